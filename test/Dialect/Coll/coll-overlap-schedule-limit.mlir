// coll-overlap-schedule's memory limit is hard. The step's synchronous
// order peaks at 13 MiB (two 4 MiB inputs, the 4 MiB gradient and the
// reduce-scatter's 1 MiB result); hiding the reduce-scatter under the exp
// holds the gradient beside the exp's output: 17 MiB. The report after the
// pass gives the peak the limit bounds.
// RUN: loom-opt %s --loom-set-target=device=cpu -coll-overlap-schedule="memory-limit-mb=16" | FileCheck %s --check-prefix=TIGHT
// RUN: loom-opt %s --loom-set-target=device=cpu -coll-overlap-schedule="memory-limit-mb=16" -coll-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=TIGHT-REPORT
// RUN: loom-opt %s --loom-set-target=device=cpu -coll-overlap-schedule="memory-limit-mb=17" | FileCheck %s --check-prefix=ROOM
// RUN: loom-opt %s --loom-set-target=device=cpu -coll-overlap-schedule="memory-limit-mb=17" -coll-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=ROOM-REPORT
// RUN: not loom-opt %s --loom-set-target=device=cpu -coll-overlap-schedule="memory-limit-mb=12.5" 2>&1 | FileCheck %s --check-prefix=UNREACHABLE
// RUN: not loom-opt %s --loom-set-target=device=cpu -coll-overlap-schedule="memory-headroom=-1" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: loom-opt %s --loom-set-target=device=cpu -coll-overlap-schedule="memory-limit-mb=12.5 synchronous-below-floor" 2>&1 | FileCheck %s --check-prefix=FLOOR

// Under 16 MiB the wait stays at its start: the input order (deferred) is
// over the limit, so it is not kept either.
// TIGHT: %[[R:.+]] = coll.reduce_scatter_start
// TIGHT-NEXT: coll.wait %[[R]]
// TIGHT-NEXT: tensor.empty
// TIGHT-NEXT: linalg.exp
// TIGHT-REPORT: peak memory 13.00 MiB
// TIGHT-REPORT: reduce_scatter       1        635.1              1

// With 17 MiB it is hidden: nothing exposed.
// ROOM: %[[R:.+]] = coll.reduce_scatter_start
// ROOM-NEXT: tensor.empty
// ROOM-NEXT: linalg.exp
// ROOM-NEXT: coll.wait %[[R]]
// ROOM-REPORT: exposed communication               0.0 us
// ROOM-REPORT: peak memory 17.00 MiB

// With synchronous-below-floor the same limit keeps the synchronous order,
// with a remark.
// FLOOR: remark: coll-overlap-schedule: memory-limit-mb=12.50 is below the synchronous order's peak, 13.00 MiB; it keeps that order (synchronous-below-floor)
// FLOOR: %[[R:.+]] = coll.reduce_scatter_start
// FLOOR-NEXT: coll.wait %[[R]]
// FLOOR-NEXT: tensor.empty

// UNREACHABLE: error: coll-overlap-schedule: memory-limit-mb=12.50 is below the smallest peak retiming collectives reaches, 13.00 MiB (the synchronous order: every collective waited right after its start)
// NEGATIVE: error: coll-overlap-schedule: expected non-negative memory-limit-mb and memory-headroom

func.func @deferred_within_the_limit(%g0: tensor<1048576xf32>, %big: tensor<1048576xf32>)
    -> (tensor<262144xf32>, tensor<1048576xf32>) {
  %c = coll.comm_world : !coll.comm<4>
  %eg = tensor.empty() : tensor<1048576xf32>
  %g = linalg.exp ins(%g0 : tensor<1048576xf32>) outs(%eg : tensor<1048576xf32>) -> tensor<1048576xf32>
  %r = coll.reduce_scatter_start %g on %c scatter_axis = 0 reduction = <avg> : (tensor<1048576xf32>, !coll.comm<4>) -> !coll.future<tensor<262144xf32>>
  %eb = tensor.empty() : tensor<1048576xf32>
  %t = linalg.exp ins(%big : tensor<1048576xf32>) outs(%eb : tensor<1048576xf32>) -> tensor<1048576xf32>
  %rw = coll.wait %r : !coll.future<tensor<262144xf32>>
  return %rw, %t : tensor<262144xf32>, tensor<1048576xf32>
}
