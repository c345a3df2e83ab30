//===- Merge.h - several flat collectives as one ----------------*- C++ -*-===//
//
// Shared by coll-bucket and coll-reorder-baseline's fsdp policy. Members are
// flat (zero-partition's shards: rank-1 tensors, static, on a communicator of
// known size N). The merged buffer is rank-major: member i's [N S_i] is
// viewed as [N, S_i] and the members are concatenated along dimension 1, so
// rank r's block of the merged buffer holds every member's block r.
// Private to lib/Dialect/Coll/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_DIALECT_COLL_TRANSFORMS_MERGE_H
#define LOOM_LIB_DIALECT_COLL_TRANSFORMS_MERGE_H

#include "loom/Dialect/Coll/CollOps.h"

namespace loom::coll {

/// A collective to merge: its start and its wait.
struct MergeMember {
  mlir::Operation *start;
  WaitOp wait;
};

/// Returns true if `op` is flat: a static rank-1 input and result on a
/// communicator of known size.
bool isFlatCollective(CollectiveOpInterface op);

/// Returns true if `a` and `b` may be one collective: both flat
/// reduce-scatters, or both flat all-gathers, on the same communicator with
/// the same element type (and, for reduce-scatters, the same reduction).
bool areMergeable(mlir::Operation *a, mlir::Operation *b);

/// Returns true if mergeReduceScatters applies to `members`: they are
/// mergeable, each has a wait in the block, and every wait follows every
/// start (the merged collective starts where the last member did).
bool canMergeReduceScatters(llvm::ArrayRef<MergeMember> members);

/// Merges reduce-scatters into one. Right before the last member's start
/// (in block order), the inputs are concatenated rank-major and
/// reduce-scattered once; the merged wait goes where the first member's wait
/// was, and each member's result becomes its slice of the merged result.
/// Releases of member inputs become one release of the merged input, where
/// the last one was but not before the merged start. Requires
/// canMergeReduceScatters.
ReduceScatterStartOp mergeReduceScatters(llvm::ArrayRef<MergeMember> members);

/// Returns true if mergeAllGathers applies to `members`: they are mergeable,
/// each has a wait in the block, every input is defined before the first
/// member's start (where the merged collective starts), and either every
/// member's result is released or none is.
bool canMergeAllGathers(llvm::ArrayRef<MergeMember> members);

/// Merges all-gathers into one. Right before the first member's start, the
/// shards are concatenated and gathered once; the merged wait goes where the
/// first member's wait was, and each member's result becomes its columns of
/// the [N, sum S_i] view, flattened. The columns are strided in the merged
/// buffer: with `copyOut` (FSDP2's copy-out) each member's are copied into a
/// buffer of its own and the merged buffer is released right after;
/// without, members are views of the merged buffer (a non-contiguous
/// flattening, which bufferisation copies unseen by the memory timeline),
/// released after the last of the members' releases. Requires
/// canMergeAllGathers.
AllGatherStartOp mergeAllGathers(llvm::ArrayRef<MergeMember> members,
                                 bool copyOut);

} // namespace loom::coll

#endif // LOOM_LIB_DIALECT_COLL_TRANSFORMS_MERGE_H
