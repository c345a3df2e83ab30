//===- Passes.td - target-independent codegen --------------*- tablegen -*-===//
//
// Codegen passes every target runs: on the decomposed step's tensors before
// bufferisation (precision, fills, shared tables, the memory plan), and on
// its buffers after (the fallback arena).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_COMMON_PASSES_TD
#define LOOM_CODEGEN_COMMON_PASSES_TD

include "mlir/Pass/PassBase.td"

def CodegenWidenComputePass
    : Pass<"codegen-widen-compute", "::mlir::func::FuncOp"> {
  let summary = "Computes bf16 and f16 linalg generics in f32";
  let description = [{
    Mixed precision as the compiler's job: tensors stay in bf16 (or f16),
    arithmetic does not. Each `linalg.generic` that reads or writes a
    16-bit float computes its body in f32: its 16-bit arguments are extended
    at the top, every op computes in f32, and what it yields is rounded once.
    A reduction accumulates into an f32 tensor (a fill is widened in place,
    any other init is extended) and is rounded once after the last element;
    a later generic that reads the rounded result reads the f32 one instead,
    so a norm's sum of squares or softmax's row sum is never rounded on its
    way to the division. Contractions whose body is a multiply-accumulate
    are left for `convert-linalg-to-blas`, whose bf16 GEMMs accumulate in
    f32. A contraction of an f32 and a bf16 operand into a bf16 result,
    `out + truncf(x * extf(y))` (autodiff's adjoints of the f32 logits'
    matmul), has its f32 operand rounded to bf16 first and becomes such a
    multiply-accumulate, as PyTorch rounds the logits' gradient before its
    bf16 matmuls. Run after `train-decompose`, on tensors.

    ```mlir
    %ss = linalg.generic {.. ["parallel", "reduction"]}
        ins(%x : tensor<8x64xbf16>) outs(%zero : tensor<8xbf16>) {
    ^bb0(%a: bf16, %acc: bf16):
      %sq = arith.mulf %a, %a : bf16
      %s = arith.addf %acc, %sq : bf16
      linalg.yield %s : bf16
    } -> tensor<8xbf16>
    // becomes
    %f = linalg.fill ins(%c0_f32 : f32) outs(%e : tensor<8xf32>)
    %ss32 = linalg.generic {..} ins(%x : tensor<8x64xbf16>)
        outs(%f : tensor<8xf32>) {
    ^bb0(%a: bf16, %acc: f32):
      %a32 = arith.extf %a : bf16 to f32
      %sq = arith.mulf %a32, %a32 : f32
      %s = arith.addf %acc, %sq : f32
      linalg.yield %s : f32
    } -> tensor<8xf32>
    %ss = linalg.generic {..} ins(%ss32 : tensor<8xf32>)
        outs(%e2 : tensor<8xbf16>) { arith.truncf }  // only if still used
    ```

    A generic whose body holds an op outside `arith` and `math` (other
    than `linalg.index`), or a bit cast of a 16-bit float, is left as it
    is.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def CodegenFoldInitFillsPass
    : Pass<"codegen-fold-init-fills", "::mlir::func::FuncOp"> {
  let summary = "Elementwise ops read a fill's value instead of its tensor";
  let description = [{
    Autodiff starts an adjoint at zero and adds each contribution into it,
    so an elementwise adjoint reads a zero-filled init: on the GPU that is
    a fill kernel writing the whole tensor, and the elementwise kernel
    reading it back. In a linalg op whose loops are all parallel and whose
    init is read through a permutation map, each init element is read once,
    where it is written, and holds the fill's value: the payload uses that
    value instead, and the init becomes a `tensor.empty`. An init the
    payload never reads (a named elementwise op, a fill into a fill) loses
    its fill too. The arithmetic is unchanged (`0 + x` is still computed),
    so the results keep their bits. Only fills of a `tensor.empty` are
    folded; a reduction keeps its init. Run on tensors, before the memory
    plan.

    ```mlir
    %z = linalg.fill ins(%c0 : bf16) outs(%e : tensor<8192x768xbf16>)
    %g = linalg.generic {iterator_types = ["parallel", "parallel"]}
        ins(%dy, %x : ...) outs(%z : tensor<8192x768xbf16>) {
    ^bb0(%a: bf16, %b: bf16, %acc: bf16):
      ...
      %s = arith.addf %acc, %p : bf16
      linalg.yield %s : bf16
    }
    // becomes
    %e2 = tensor.empty() : tensor<8192x768xbf16>
    %g = linalg.generic {iterator_types = ["parallel", "parallel"]}
        ins(%dy, %x : ...) outs(%e2 : tensor<8192x768xbf16>) {
    ^bb0(%a: bf16, %b: bf16, %acc: bf16):
      ...
      %s = arith.addf %c0, %p : bf16
      linalg.yield %s : bf16
    }
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numFolded", "folded-fills", "Inits whose fill a payload reads as a value">
  ];
}

def CodegenShareIndexGenericsPass
    : Pass<"codegen-share-index-generics", "::mlir::func::FuncOp"> {
  let summary = "Computes equal tables of indices once";
  let description = [{
    A `linalg.generic` with no inputs, whose init is a `tensor.empty`,
    computes from its indices alone: RoPE's cos and sin tables, which
    `train.rope`'s decomposition builds for every rope op and again in the
    backward (50 at ~125M). Equivalent ones in the same block (the same
    type, attributes and body) are computed once, at the first; the later
    ones use its result. Each is a GPU kernel less; the table lives from
    the first use to the last, so only tables of at most `max-bytes` are
    shared. Run on tensors, after `train-decompose`.

    ```mlir
    %c1 = linalg.generic {iterator_types = ["parallel", "parallel"]}
        outs(%e1 : tensor<2048x32xbf16>) { linalg.index ... math.cos ... }
    ...
    %c2 = linalg.generic {iterator_types = ["parallel", "parallel"]}
        outs(%e2 : tensor<2048x32xbf16>) { the same body }
    // %c2's uses read %c1
    ```
  }];
  let options = [
    Option<"maxBytes", "max-bytes", "int64_t", /*default=*/"1048576",
           "share only tables of at most this many bytes">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
  let statistics = [
    Statistic<"numShared", "shared-tables", "Index tables replaced by an equal earlier one">
  ];
}

def CodegenEliminateEmptyTensorsPass
    : Pass<"codegen-eliminate-empty-tensors", "::mlir::ModuleOp"> {
  let summary = "Upstream's eliminate-empty-tensors, where it can replace "
                "a tensor.empty";
  let description = [{
    Upstream's `eliminate-empty-tensors`, run only on a module where it can
    replace something: a subset insertion (`tensor.insert_slice`,
    `bufferization.materialize_in_destination`) whose source starts at a
    `tensor.empty`, through destination-passing ops'
    inits and casts, or through what the check does not follow (a loop's
    result, a block argument of a region). Upstream analyses the whole
    module before it looks: on an unrolled pipeline stage (two stages of
    32 microbatches, 60,000 ops) that is about 2 s each time, for no
    replacement when the decompositions already write into their slices
    (RoPE's halves). Where it can replace, it runs as upstream does.

    A step's result written into its caller's buffer (the trainer's entry
    point materialises each result in a function argument: an output, or
    the parameter it updates) is first written there directly, as upstream
    would, where that is safe on its face: the result's op is
    destination-passing on tensors, its init a `tensor.empty` only it uses,
    its result read by the materialisation alone, and every read of the
    buffer (through a `bufferization.to_tensor` of it and the slices and
    reshapes of that) at or before the op. What remains decides whether
    upstream runs.

    ```mlir
    // Replaced (upstream runs): the generic writes into the slice.
    %e = tensor.empty() : tensor<4x8xf32>
    %h = linalg.generic ... outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
    %r = tensor.insert_slice %h into %t[0, 0] [4, 8] [1, 1]
    // Nothing to replace (skipped): the init is already a slice.
    %s = tensor.extract_slice %t[0, 0] [4, 8] [1, 1]
    %h = linalg.generic ... outs(%s : tensor<4x8xf32>) -> tensor<4x8xf32>
    %r = tensor.insert_slice %h into %t[0, 0] [4, 8] [1, 1]
    ```
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numIntoCallerBuffers", "into-caller-buffers",
              "Results written into their caller's buffer without the "
              "analysis">,
    Statistic<"numRuns", "analysed-modules",
              "Modules analysed and given to upstream's elimination">,
    Statistic<"numSkipped", "skipped-modules",
              "Modules with nothing to eliminate, not analysed">
  ];
}

def CodegenDeallocateAtExitPass
    : Pass<"codegen-deallocate-at-exit", "::mlir::ModuleOp"> {
  let summary = "Frees a bufferised step's buffers where it returns, or "
                "runs upstream's deallocation pipeline";
  let description = [{
    After bufferisation, a step whose buffers the memory plan placed allocates
    little: its arena and the empty buffers of its sends' futures, each at
    the top of the function, none leaving it. Freeing each where the
    function returns is then what upstream's ownership-based deallocation
    gives (it frees at the end of the block), without its pipeline: four
    analyses and three canonicalisations of the whole step, about 2.5 s on
    an unrolled pipeline stage (2 stages x 32 microbatches).

    A module qualifies when every function with a body has one block ending
    in `func.return` and no `memref.dealloc`, `bufferization.dealloc` or
    `memref.realloc`, and each `memref.alloc` is in that block and does not
    escape: no memref derived from it (through any op's memref result, a
    loop's iteration argument or result) is returned, passed to a call or a
    region op other than a linalg op or `scf.for`, stored, or turned into a
    tensor. Otherwise upstream's `buildBufferDeallocationPipeline` runs on
    the module, as it would without this pass.

    ```mlir
    func.func @step(%x: memref<4xf32>) {
      %arena = memref.alloc() : memref<1024xi8>
      %v = memref.view %arena[%c0][] : memref<1024xi8> to memref<4xf32>
      linalg.copy ins(%x : memref<4xf32>) outs(%v : memref<4xf32>)
      // inserted: memref.dealloc %arena : memref<1024xi8>
      return
    }
    ```
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect",
                           "::mlir::bufferization::BufferizationDialect"];
}

def CodegenUpdateInPlacePass
    : Pass<"codegen-update-in-place", "::mlir::func::FuncOp"> {
  let summary = "Writes a step's parameter and state updates into their "
                "arguments' buffers";
  let description = [{
    A training step takes every parameter and optimizer state tensor and
    returns its update, so the caller would hold two copies of each. This
    pass marks the results that may be written into the buffer of the
    argument they update (the same `train.param` or `train.state` name):
    the result's op is elementwise (all loops parallel), starts a new
    buffer (its init is a `tensor.empty`), reads the argument only at the
    indices it writes, and comes after every other read of the argument in
    the step's order, counting reads through views and a collective's
    asynchronous read up to its `coll.wait`. The function gets
    `train.tied_results`, one entry per result: the argument's index, or -1.

    The memory timeline (with caller-owned results) then charges nothing
    for a tied result, `codegen-memory-plan` leaves it out of the arena, and
    loomc's entry point materialises it into the argument's buffer, which
    bufferisation writes in place; the trainer does not allocate the
    result. Run after every reordering, right before `codegen-memory-plan`.

    ```mlir
    func.func @step(%w: tensor<64xf32> {train.param = "w"}, ...)
        -> (tensor<64xf32> {train.param = "w"}, ...)
    // gets
    attributes {train.tied_results = array<i64: 0, ...>}
    ```
  }];
}

def CodegenMemoryPlanPass : Pass<"codegen-memory-plan", "::mlir::func::FuncOp"> {
  let summary = "Places a step's tensors in one arena, from the memory timeline";
  let description = [{
    The static memory plan, made on tensors before bufferisation so that the
    executable uses exactly the memory the memory timeline (MemoryTimeline,
    the analysis the scheduler bounds) predicts. The pass computes the
    timeline of the function's single block, packs every buffer the timeline
    allocates into one arena (offsets from the buffers' lifetimes; see
    ArenaPacker.h), and pins each buffer to its offset (below). A loop body (the
    fused loss's chunks) is planned the same way, recursively, into a
    region of the arena that is one buffer of the enclosing block, live
    while the loop runs; the timeline charges the body's peak there.
    Pinning:

    * an op whose result starts a buffer writes into its slot: its
      tensor.empty init (or an init it never reads) is replaced by the slot,
      otherwise the init is first copied into the slot (`linalg.copy`);
    * a collective's result buffer is recorded on its start op as
      `loom.arena_offset`, which `convert-coll-to-loomrt` turns into a view;
    * a `tensor.empty` whose slice an op writes and inserts back at the same
      place (what `eliminate-empty-tensors` makes of a tensor joined from
      parts, RoPE's halves) is itself replaced by the slot: its buffer
      begins at that op, which writes into the slice in place. An empty
      tensor that several joins share (CSE merges them) is first cloned for
      each, as a shared fill is for each user.

    A slot is `bufferization.to_tensor restrict writable` of a `memref.view`
    into the arena, so one-shot bufferisation writes in place and allocates
    nothing else. Arguments (and, with `caller-owned-results`, results written
    straight into the caller's buffers) stay outside the arena.

    ```mlir
    %e = tensor.empty() : tensor<64xf32>          %arena = memref.alloc() {alignment = 64 : i64, loom.arena} : memref<256xi8>
    %r = linalg.generic ... outs(%e ...)          %v = memref.view %arena[%c0][] : memref<256xi8> to memref<64xf32>
                                                  %s = bufferization.to_tensor %v restrict writable ...
                                                  %r = linalg.generic ... outs(%s ...)
    ```

    The function gets `train.timeline_peak_bytes` (the timeline's peak, with
    arguments and caller-owned results), `train.arena_bytes` (the arena) and
    `train.arena_bound_bytes` (the most arena bytes live at once, which no
    packing can beat). The plan's peak (arena + arguments + results) equals
    the timeline's peak exactly when the arena reaches that bound. Buffers
    made by ops the pass cannot pin are counted in `loom.unplanned_buffers`
    (and the statistic `unplanned-buffers`) and left to bufferisation (and
    `codegen-pack-buffers`).
  }];
  let options = [
    Option<"callerOwnedResults", "caller-owned-results", "bool",
           /*default=*/"false",
           "results are buffers the caller owns for the whole call">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect"];
  let statistics = [
    Statistic<"arenaBytes", "arena-bytes", "Bytes of the arenas planned">,
    Statistic<"numUnplanned", "unplanned-buffers", "Buffers left to bufferisation">
  ];
}

def CodegenPackBuffersPass : Pass<"codegen-pack-buffers", "::mlir::func::FuncOp"> {
  let summary = "Places what bufferisation allocated in one arena";
  let description = [{
    The fallback of the static memory plan, on bufferised IR: every
    `memref.alloc` at the top of the function body (static shape, identity
    layout, not the planned arena) whose buffer does not escape becomes a
    `memref.view` into one more arena, allocated once at entry and freed
    before each return. "Escapes" means returned, passed to a call, stored,
    or deallocated inside a region. After `codegen-memory-plan` nothing is left
    for it unless bufferisation copied something the timeline did not
    predict.

    A buffer's lifetime runs from its allocation to the last top-level op
    that uses it, any view of it, or its address (a runtime call reads it
    through the address). Its `memref.dealloc`s are dropped. Offsets come
    from ArenaPacker. The function gets `train.packed_bytes` and
    `train.packed_bound_bytes` (the most bytes live at once).

    ```mlir
    %a = memref.alloc() : memref<64xf32>        %arena = memref.alloc() : memref<512xi8>
    ...                                          %a = memref.view %arena[%c0][] : ... to memref<64xf32>
    memref.dealloc %a : memref<64xf32>          %b = memref.view %arena[%c256][] : ...
    %b = memref.alloc() : memref<64xf32>        ...
                                                 memref.dealloc %arena : memref<512xi8>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
  let statistics = [
    Statistic<"numPacked", "packed-buffers", "Allocations placed in the fallback arena">,
    Statistic<"packedBytes", "packed-bytes", "Bytes of the fallback arenas">
  ];
}

def CodegenOutlineActionsPass
    : Pass<"codegen-outline-actions", "::mlir::ModuleOp"> {
  let summary = "Compiles each pipeline action's code once, called per microbatch";
  let description = [{
    A pipeline stage's step is straight-line code: its schedule's actions
    unrolled over the microbatches, so its size, and the time LLVM takes to
    compile it, grows with the microbatch count. The forward (or backward)
    of one microbatch is the same code as the next one's, at other
    addresses of the arena. This pass, on bufferised IR, outlines each
    action (the top-level ops whose location names it, `loom.action.F3`,
    which `pp-partition` stamps) into a private function, then merges the
    functions that differ only in integer and float constants, which become
    arguments: the arena offsets, a transfer's tag and peer, a profile
    probe's op id. The step becomes a table of calls in the schedule's order.

    Pure address computations (constants, `memref.view`, `subview`,
    `collapse_shape`, `expand_shape`, pointer extraction) are cloned into
    each action that uses them, one copy per use, so that they are
    constants of the action's function. A `subview` of a function argument
    at a static offset (a microbatch's slice of the batch) is cloned with
    that offset as an operand, and the users that only read through it
    (loads, stores, vector transfers, linalg ops on buffers, pointer
    extraction, further views) take the dynamic layout; any other user gets
    a `memref.cast` back. It runs after the profile probes (their op ids
    are constants it passes) and before the loops, so the loops and the
    LLVM dialect are made once per kind of action.
    Functions without actions (a step without pipeline stages) are left as
    they are. The outlined functions carry LLVM's `noinline`
    (`passthrough`), so LLVM compiles each once.

    ```mlir
    // F0 and F1 of a stage:                 func.func private @step_action0(
    %v0 = memref.view %arena[%c0][] ...        %arena: memref<64xi8>, %off: index) {
    scf.for ... { ... } loc("loom.action.F0"...)   %v = memref.view %arena[%off][] ...
    %v1 = memref.view %arena[%c32][] ...         scf.for ... { ... }
    scf.for ... { ... } loc("loom.action.F1"...) }
                                              call @step_action0(%arena, %c0)
                                              call @step_action0(%arena, %c32)
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
  let statistics = [
    Statistic<"numActions", "actions", "Actions outlined">,
    Statistic<"numFunctions", "functions", "Functions the actions share">,
    Statistic<"numCasts", "layout-casts", "Users given a memref.cast back to a static layout">
  ];
}

#endif // LOOM_CODEGEN_COMMON_PASSES_TD
