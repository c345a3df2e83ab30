//===- CollOps.td - coll operations ------------------------*- tablegen -*-===//

#ifndef LOOM_DIALECT_COLL_COLLOPS_TD
#define LOOM_DIALECT_COLL_COLLOPS_TD

include "loom/Dialect/Coll/CollDialect.td"
include "loom/Dialect/Coll/CollEnums.td"
include "loom/Dialect/Coll/CollInterfaces.td"
include "loom/Dialect/Coll/CollTypes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"

def Coll_NonNegativeI64Attr : ConfinedAttr<I64Attr, [IntNonNegative]>;

//===----------------------------------------------------------------------===//
// Communicators
//===----------------------------------------------------------------------===//

def Coll_CommWorldOp : Coll_Op<"comm_world", [Pure]> {
  let summary = "the communicator of all ranks the launcher started";
  let description = [{
    Returns the communicator spanning every rank of the job (MPI's
    `MPI_COMM_WORLD`, or the NCCL communicator built from the launcher's
    environment). A static size in the result type is a claim the runtime
    checks at start-up.

    ```mlir
    %comm = coll.comm_world : !coll.comm<8>
    ```
  }];
  let results = (outs Coll_Comm:$comm);
  let assemblyFormat = "attr-dict `:` qualified(type($comm))";
}

def Coll_CommGroupOp : Coll_Op<"comm_group", [Pure]> {
  let summary = "a strided group of a communicator's ranks";
  let description = [{
    Splits `parent` (of static size `W`) into `W / size` disjoint groups of
    `size` ranks each, `stride` ranks apart, and returns the calling rank's
    group. Rank `r` of the parent belongs to the group
    `{b + i * stride : 0 <= i < size}` with
    `b = r mod stride + floor(r / (size * stride)) * size * stride`, and is
    rank `floor(r / stride) mod size` in it. Peers and roots of the
    collectives on a group are ranks of the group.

    A grid of `P` pipeline stages by `D` data-parallel replicas, world rank
    `s * D + d`, has two: a stage's replicas (`size = D stride = 1`) and a
    replica's pipeline (`size = P stride = D`).

    ```mlir
    %world = coll.comm_world : !coll.comm<8>
    // ranks {0, 1}, {2, 3}, ... : the replicas of one stage
    %replicas = coll.comm_group %world size = 2 stride = 1
        : !coll.comm<8> -> !coll.comm<2>
    // ranks {0, 2, 4, 6} and {1, 3, 5, 7}: one replica's four stages
    %stages = coll.comm_group %world size = 4 stride = 2
        : !coll.comm<8> -> !coll.comm<4>
    ```

    The parent's size must be static and a multiple of `size * stride`; the
    result's size is `size`. A group of the whole parent is the parent.
  }];
  let arguments = (ins Coll_Comm:$parent, ConfinedAttr<I64Attr, [IntPositive]>:$size,
                       ConfinedAttr<I64Attr, [IntPositive]>:$stride);
  let results = (outs Coll_Comm:$comm);
  let assemblyFormat = [{
    $parent `size` `=` $size `stride` `=` $stride attr-dict `:`
    qualified(type($parent)) `->` qualified(type($comm))
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Coll_CommRankOp : Coll_Op<"comm_rank", [Pure]> {
  let summary = "this rank's index in a communicator";
  let description = [{
    Returns the calling rank's index in `[0, size)`. Programs are SPMD: the
    same IR runs on every rank, and this is how a rank finds its own shard.
    On a one-rank communicator it folds to 0.

    ```mlir
    %rank = coll.comm_rank %comm : !coll.comm<8>
    ```
  }];
  let arguments = (ins Coll_Comm:$comm);
  let results = (outs Index:$rank);
  let assemblyFormat = "$comm attr-dict `:` qualified(type($comm))";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Collective start ops
//===----------------------------------------------------------------------===//

/// Start ops read and write the communication stream: they are never dropped,
/// merged or reordered by generic passes.
class Coll_StartOp<string mnemonic, list<string> interfaceMethods = []>
    : Coll_Op<mnemonic, [
        DeclareOpInterfaceMethods<Coll_CollectiveOpInterface,
                                  !listconcat(["getKind"], interfaceMethods)>,
        MemoryEffects<[MemRead<Coll_CommResource>, MemWrite<Coll_CommResource>,
                       MemAlloc<Coll_BufferResource>]>]> {
  dag commonArgs = (ins AnyRankedTensor:$input, Coll_Comm:$comm);
  let results = (outs Coll_Future:$future);
  let hasVerifier = 1;
}

def Coll_AllGatherStartOp : Coll_StartOp<"all_gather_start"> {
  let summary = "starts concatenating every rank's tensor along an axis";
  let description = [{
    Every rank contributes `input`; the result, on every rank, is the ranks'
    inputs concatenated in rank order along `gather_axis`. The result's
    `gather_axis` dimension is the input's times the number of ranks; every
    other dimension is the input's.

    ```
      rank 0: [a]          all ranks: [a]
      rank 1: [b]   --->              [b]
      rank 2: [c]                     [c]
    ```

    ```mlir
    %f = coll.all_gather_start %shard on %comm gather_axis = 0
        : (tensor<128x64xf32>, !coll.comm<4>) -> !coll.future<tensor<512x64xf32>>
    ```
  }];
  let arguments = !con(commonArgs, (ins Coll_NonNegativeI64Attr:$gather_axis));
  let assemblyFormat = [{
    $input `on` $comm `gather_axis` `=` $gather_axis attr-dict
    `:` `(` type($input) `,` qualified(type($comm)) `)` `->` qualified(type($future))
  }];
}

def Coll_ReduceScatterStartOp : Coll_StartOp<"reduce_scatter_start",
                                                   ["getReductionKind"]> {
  let summary = "starts reducing tensors over ranks and scattering the blocks";
  let description = [{
    The ranks' inputs are combined element-wise with `reduction`; the reduced
    tensor is cut into as many equal blocks along `scatter_axis` as there are
    ranks, and rank `r` receives block `r`. The input's `scatter_axis`
    dimension is the result's times the number of ranks.

    ```
      rank 0: [a0 a1]        rank 0: [a0+b0]
      rank 1: [b0 b1]  --->  rank 1: [a1+b1]
    ```

    ```mlir
    %f = coll.reduce_scatter_start %grad on %comm scatter_axis = 0 reduction = <avg>
        : (tensor<4096xf32>, !coll.comm<4>) -> !coll.future<tensor<1024xf32>>
    ```
  }];
  let arguments = !con(commonArgs, (ins Coll_NonNegativeI64Attr:$scatter_axis,
                                        Coll_ReductionKindAttr:$reduction));
  let assemblyFormat = [{
    $input `on` $comm `scatter_axis` `=` $scatter_axis `reduction` `=` $reduction
    attr-dict `:` `(` type($input) `,` qualified(type($comm)) `)` `->` qualified(type($future))
  }];
}

def Coll_AllReduceStartOp : Coll_StartOp<"all_reduce_start",
                                               ["getReductionKind"]> {
  let summary = "starts reducing tensors over ranks, result on every rank";
  let description = [{
    The ranks' inputs are combined element-wise with `reduction`; every rank
    receives the whole reduced tensor. The result type is the input type.

    ```mlir
    %f = coll.all_reduce_start %grad on %comm reduction = <sum>
        : (tensor<1024xf32>, !coll.comm<4>) -> !coll.future<tensor<1024xf32>>
    ```
  }];
  let arguments = !con(commonArgs, (ins Coll_ReductionKindAttr:$reduction));
  let assemblyFormat = [{
    $input `on` $comm `reduction` `=` $reduction attr-dict
    `:` `(` type($input) `,` qualified(type($comm)) `)` `->` qualified(type($future))
  }];
}

def Coll_BroadcastStartOp : Coll_StartOp<"broadcast_start"> {
  let summary = "starts sending the root rank's tensor to every rank";
  let description = [{
    Every rank receives the `input` of rank `root`; the other ranks' inputs
    are ignored (but still give the result's type). The result type is the
    input type and `root` is less than the number of ranks.

    ```mlir
    %f = coll.broadcast_start %params on %comm root = 0
        : (tensor<1024xf32>, !coll.comm<4>) -> !coll.future<tensor<1024xf32>>
    ```
  }];
  let arguments = !con(commonArgs, (ins Coll_NonNegativeI64Attr:$root));
  let assemblyFormat = [{
    $input `on` $comm `root` `=` $root attr-dict
    `:` `(` type($input) `,` qualified(type($comm)) `)` `->` qualified(type($future))
  }];
}

//===----------------------------------------------------------------------===//
// Point-to-point
//===----------------------------------------------------------------------===//

def Coll_SendStartOp : Coll_StartOp<"send_start"> {
  let summary = "starts sending a tensor to one rank of a communicator";
  let description = [{
    Sends `input` to rank `peer` of the communicator. The rank `peer` receives
    it with a `coll.recv_start` of the same type, the same `tag` and
    `peer` naming the sender. Messages between two ranks are matched in the
    order they are started (NCCL matches point-to-point operations only by
    order; MPI also checks the tag), so a program may start them in any
    order that the other side starts the matching receives in.

    The future holds nothing (`tensor<0xT>`): its wait says that `input` may
    be reused. Until then the input stays live, as every collective's does.

    ```mlir
    %f = coll.send_start %act on %pp to = 1 tag = 3
        : (tensor<512x64xf32>, !coll.comm<4>) -> !coll.future<tensor<0xf32>>
    %sent = coll.wait %f : !coll.future<tensor<0xf32>>
    ```
  }];
  let arguments = !con(commonArgs, (ins Coll_NonNegativeI64Attr:$peer,
                                        Coll_NonNegativeI64Attr:$tag));
  let assemblyFormat = [{
    $input `on` $comm `to` `=` $peer `tag` `=` $tag attr-dict
    `:` `(` type($input) `,` qualified(type($comm)) `)` `->` qualified(type($future))
  }];
}

def Coll_RecvStartOp : Coll_StartOp<"recv_start", ["getInput"]> {
  let summary = "starts receiving a tensor from one rank of a communicator";
  let description = [{
    Receives the tensor that rank `peer` sends with the matching
    `coll.send_start` (same type and `tag`). It reads no tensor of this rank
    (`getInput` is null); the future's value type is what arrives, and its
    buffer is allocated from the start, as every collective's result is.

    ```mlir
    %f = coll.recv_start on %pp from = 0 tag = 3
        : (!coll.comm<4>) -> !coll.future<tensor<512x64xf32>>
    %act = coll.wait %f : !coll.future<tensor<512x64xf32>>
    ```
  }];
  let arguments = (ins Coll_Comm:$comm, Coll_NonNegativeI64Attr:$peer,
                       Coll_NonNegativeI64Attr:$tag);
  let assemblyFormat = [{
    `on` $comm `from` `=` $peer `tag` `=` $tag attr-dict
    `:` `(` qualified(type($comm)) `)` `->` qualified(type($future))
  }];
}

//===----------------------------------------------------------------------===//
// Completion and lifetime
//===----------------------------------------------------------------------===//

def Coll_WaitOp : Coll_Op<"wait", [
    MemoryEffects<[MemRead<Coll_CommResource>, MemWrite<Coll_CommResource>]>,
    TypesMatchWith<"result type matches the future's value type",
                   "future", "result",
                   "::llvm::cast<::loom::coll::FutureType>($_self).getValueType()">]> {
  let summary = "waits for a collective and returns its result";
  let description = [{
    Blocks until the collective that produced `future` has completed on this
    rank and returns its result. Each future is waited exactly once, in the
    block of its start op. The input of the collective may be reused and the
    communication stream's later work may depend on the result only after
    this op.

    ```mlir
    %full = coll.wait %f : !coll.future<tensor<512x64xf32>>
    ```
  }];
  let arguments = (ins Coll_Future:$future);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$future attr-dict `:` qualified(type($future))";
  let builders = [
    OpBuilder<(ins "::mlir::Value":$future), [{
      build($_builder, $_state,
            ::llvm::cast<::loom::coll::FutureType>(future.getType()).getValueType(),
            future);
    }]>
  ];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = [{
    /// Returns the op that started the collective, or null on unverified IR.
    CollectiveOpInterface getStart();
  }];
}

def Coll_ReleaseOp : Coll_Op<"release", [
    MemoryEffects<[MemFree<Coll_BufferResource>]>]> {
  let summary = "ends the life of a collective's buffer";
  let description = [{
    Declares that a collective's buffer is dead from here on, so it can be
    freed before the end of the step. The operand is either the result of a
    `coll.wait` (DeepCompile's "release" of a gathered parameter), or the input
    of a collective started in this block: that buffer is freed as soon as the
    collective has read it, at its wait (ZeRO-2 frees a full gradient once its
    reduce-scatter has started). The value may not be used after the release,
    and it is released at most once.

    ```mlir
    %w = coll.wait %f : !coll.future<tensor<512x64xf32>>
    %y = linalg.matmul ins(%x, %w : ...) outs(...) -> tensor<8x64xf32>
    coll.release %w : tensor<512x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$buffer);
  let assemblyFormat = "$buffer attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

#endif // LOOM_DIALECT_COLL_COLLOPS_TD
