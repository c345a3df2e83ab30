//===- MemoryTimeline.h - live bytes at every program point -----*- C++ -*-===//
//
// Live bytes of a single-block function at each of its top-level ops, in
// block order (or any order a scheduler proposes), with the rules that make
// the planned peak equal the real one:
//
//   * function arguments are live throughout;
//   * views (expand/collapse/extract_slice/cast) alias their source;
//   * a destination-style op writes into its init when the init dies there
//     (as one-shot bufferization does), so it allocates nothing new;
//   * tensor.empty allocates nothing (its consumer's result does);
//   * a collective's result buffer is live from its start, not its wait;
//   * a collective's input stays live until its wait (it is read until then);
//   * coll.release ends a buffer (at the wait, for a collective's input);
//   * an op writes in place only if no alias of the buffer (a view, the
//     source it views, a collective still reading it) is used later, or
//     when it updates a subset: its init is a slice of X and its only use
//     inserts the result back into X at the same place (X used by nothing
//     else);
//   * scf.for's results live in their init's buffer under the same rule;
//   * a train op's `train.footprint` (train-footprint) says what its
//     lowering allocates: its scratch is live while it runs, and a result
//     it writes into an operand is that operand's init (the rule above);
//   * an scf.for's body is a timeline of its own (its arguments and the
//     values it reads from outside are external: charged 0, and an op may
//     write in place into a loop-carried argument), whose peak is live at
//     the loop's position on top of everything else (the loop's transient).
//
// With `callerOwnedResults` (how a compiled trainer runs a step) each result
// is a buffer the caller owns for the whole step: the op that produces it
// writes straight into it when its init is a tensor.empty (as bufferization's
// empty-tensor elimination does), otherwise the value is copied there at
// the end.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_MEMORYTIMELINE_H
#define LOOM_ANALYSIS_MEMORYTIMELINE_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include <array>
#include <optional>
#include <vector>

namespace loom {

/// What a buffer holds, for the breakdown at the peak.
enum class BufferKind {
  Parameter,
  OptimizerState,
  Gradient,
  Activation,
  Communication,
  Input
};
constexpr unsigned kNumBufferKinds = 6;
llvm::StringRef stringifyBufferKind(BufferKind kind);

/// One allocation: live over [begin, end] (positions in the order).
struct BufferInterval {
  mlir::Value value;
  int64_t bytes = 0;
  unsigned begin = 0, end = 0;
  BufferKind kind = BufferKind::Activation;
  /// A result buffer the caller owns (with `callerOwnedResults`).
  bool callerOwned = false;
  /// Owned outside the analysed block (a loop body's arguments and the
  /// values it reads from outside): charged 0 bytes.
  bool external = false;
};

/// The operand whose buffer `result` is written into when that operand's
/// value dies at its op: a destination-style op's init, or scf.for's init
/// argument, or the operand a train op's footprint writes it into. Null for
/// any other op.
mlir::OpOperand *getTiedInit(mlir::OpResult result);

/// Whether `op`'s result only views its first operand's buffer (reshapes,
/// slices, casts): the timeline binds it to that buffer.
bool isBufferView(mlir::Operation *op);

/// The largest table codegen-share-index-generics computes once per step
/// (its max-bytes' default).
constexpr int64_t kMaxIndexTableBytes = 1 << 20;

/// Whether `op` computes a table of at most `maxBytes` from its indices
/// alone: no inputs, one static empty init (what
/// codegen-share-index-generics computes once).
bool isIndexTable(mlir::linalg::GenericOp op,
                  int64_t maxBytes = kMaxIndexTableBytes);

/// For a generic that computes a table from its indices alone (no inputs,
/// an empty init, at most 1 MiB: what codegen-share-index-generics computes
/// once per step), a key equal for equal tables: a stable hash of its
/// result type, attributes and body, each value read from outside named by
/// its constant (the same in every process, so the printed IR is too).
std::optional<int64_t> getIndexTableKey(mlir::linalg::GenericOp table);

/// The scratch a train op's lowering holds while it runs, beyond its
/// operands and results (its `train.footprint`); 0 for any other op.
int64_t getScratchBytes(mlir::Operation *op);

/// The insert_slice that puts `result` back where its init came from: the
/// init is an extract_slice of some X with no other use, and `result`'s only
/// use inserts it into X at the same offsets, sizes and strides (one-shot
/// bufferization writes such a slice in place). Null otherwise.
mlir::tensor::InsertSliceOp getSliceWriteBack(mlir::OpResult result);

struct MemoryTimelineOptions {
  /// The function's results are caller-owned buffers live for the whole
  /// step (see the file comment); a result the function's
  /// `train.tied_results` ties to an argument (codegen-update-in-place) is the
  /// argument's buffer and costs nothing.
  bool callerOwnedResults = false;
  /// Buffers the function allocates (not arguments, not caller-owned
  /// results) take whole multiples of this many bytes, as in a static plan.
  int64_t alignment = 1;
  /// With `callerOwnedResults` on a function without `train.tied_results`
  /// (before codegen-update-in-place decides): a result that updates an
  /// argument (the same train.param or train.state name and type) is taken
  /// as written into the argument's buffer.
  bool predictTies = false;
  /// What the memory plan's codegen shares or copies: a fill of a new
  /// tensor several ops take as their init is each user's own
  /// (codegen-memory-plan clones it before each), costing what a
  /// tensor.empty does; the index tables of train ops' footprints are
  /// computed once (codegen-share-index-generics), each live from the first
  /// op that needs it to the last.
  bool sharedAsPlanned = false;

  /// The memory plan's rules (codegen-memory-plan's timeline) where `block`
  /// is a training step's body (a function with a train.loss result, or a
  /// pipeline stage's), which a trainer runs with caller-owned results; the
  /// plain rules elsewhere. For the passes that bound memory before the
  /// plan exists: the scheduler's limit is then a bound on the plan.
  static MemoryTimelineOptions asPlanned(mlir::Block &block);
};

class MemoryTimeline {
public:
  /// Analyses `ops`, the top-level ops of one block in execution order (the
  /// terminator included); `block` gives the arguments.
  MemoryTimeline(mlir::Block &block, llvm::ArrayRef<mlir::Operation *> ops,
                 MemoryTimelineOptions options = {});
  /// Analyses a block in its current order.
  explicit MemoryTimeline(mlir::Block &block,
                          MemoryTimelineOptions options = {});

  /// Bytes live while the op at `position` runs.
  int64_t getLiveBytes(unsigned position) const { return live[position]; }
  llvm::ArrayRef<int64_t> getLiveBytes() const { return live; }
  int64_t getPeakBytes() const { return peakBytes; }
  /// The first op at which the peak is reached.
  mlir::Operation *getPeakOp() const { return peakOp; }
  unsigned getPeakPosition() const { return peakPosition; }
  /// Bytes of each kind live at the peak.
  const std::array<int64_t, kNumBufferKinds> &getPeakBreakdown() const {
    return peakBreakdown;
  }
  llvm::ArrayRef<BufferInterval> getBuffers() const { return buffers; }
  /// Bytes an op's nested block needs while it runs (an scf.for body's
  /// peak), at each position; 0 for ops without one.
  int64_t getTransientBytes(unsigned position) const {
    return transient[position];
  }

private:
  void analyse(mlir::Block &block, llvm::ArrayRef<mlir::Operation *> ops,
               MemoryTimelineOptions options);

  std::vector<BufferInterval> buffers;
  std::vector<int64_t> live, transient;
  int64_t peakBytes = 0;
  unsigned peakPosition = 0;
  mlir::Operation *peakOp = nullptr;
  std::array<int64_t, kNumBufferKinds> peakBreakdown{};
};

/// Live bytes while ops are placed one at a time, as a list scheduler sees
/// them (steps with train ops whole: loop transients and subset updates
/// are not modelled). Applies MemoryTimeline's rules incrementally: each
/// placement costs O(operands + results). Placing every op of a block in some
/// order gives, op by op, exactly MemoryTimeline's live bytes for that order.
class MemoryTracker {
public:
  /// Starts with the block's arguments live and nothing placed.
  explicit MemoryTracker(mlir::Block &block);

  /// What placing `op` next would do.
  struct Effect {
    /// Bytes of new buffers (a collective start allocates its result).
    int64_t allocated = 0;
    /// Bytes of buffers whose last use `op` is.
    int64_t freed = 0;
  };
  Effect getEffect(mlir::Operation *op) const;

  /// Places `op` (its operands' producers must be placed); returns the live
  /// bytes while it runs (before its frees).
  int64_t place(mlir::Operation *op);

  /// Live bytes after the last placement.
  int64_t getLiveBytes() const { return live; }
  int64_t getPeakBytes() const { return peak; }

private:
  struct Buffer {
    int64_t bytes = 0;
    /// Uses not yet placed, plus pins (an argument, a collective in flight).
    int64_t remaining = 0;
  };
  /// The buffer `result` would be written into in place, if any.
  std::optional<unsigned> getInPlaceBuffer(mlir::OpResult result) const;
  /// getInPlaceBuffer for each of `op`'s results, each buffer taken once.
  llvm::SmallVector<std::optional<unsigned>>
  getInPlaceBuffers(mlir::Operation *op) const;
  /// Buffers `op` reads, each once, with how many of their uses `op` is.
  llvm::SmallVector<std::pair<unsigned, int64_t>>
  getReadBuffers(mlir::Operation *op) const;
  void addUsers(unsigned buffer, mlir::Value value);

  mlir::Block &block;
  std::vector<Buffer> buffers;
  llvm::DenseMap<mlir::Value, unsigned> bufferOf;
  /// The result buffer of each collective started and not yet waited.
  llvm::DenseMap<mlir::Operation *, unsigned> pendingResult;
  int64_t live = 0, peak = 0;
};

} // namespace loom

#endif // LOOM_ANALYSIS_MEMORYTIMELINE_H
