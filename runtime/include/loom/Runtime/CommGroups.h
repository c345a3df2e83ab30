//===- CommGroups.h - strided groups of a communicator's ranks --*- C++ -*-===//
//
// `coll.comm_group %parent size = N stride = S` splits a parent of W ranks
// (W a multiple of N * S) into W / N groups of N ranks, S apart. loom-run
// and the runtime backends number the groups with these functions; the
// lowering of coll.comm_rank computes rankOf in the IR.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMMGROUPS_H
#define LOOM_RUNTIME_COMMGROUPS_H

#include <cstdint>

namespace loom::runtime {

/// The group of `size` ranks `stride` apart that parent rank `rank` is in.
struct StridedGroup {
  /// The group's rank 0 in the parent.
  int64_t base;
  int64_t size, stride;

  /// Parent rank `r`'s group.
  static StridedGroup of(int64_t r, int64_t size, int64_t stride) {
    return {r % stride + r / (size * stride) * size * stride, size, stride};
  }
  /// Parent rank `r`'s rank in its group.
  static int64_t rankOf(int64_t r, int64_t size, int64_t stride) {
    return r / stride % size;
  }
  /// The parent rank of the group's rank `i`.
  int64_t member(int64_t i) const { return base + i * stride; }
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_COMMGROUPS_H
