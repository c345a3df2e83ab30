//===- StepGraph.h - what train-remat sees of a training step ---*- C++ -*-===//
//
// The forward of a step is every top-level op the train.loss result depends
// on; the rest (backward, optimizer) is the backward. A *node* is a forward
// op whose results cost memory and time: views, tensor.empty, constants,
// fills of an empty tensor and collectives are not nodes (views alias their
// source; the others are free or never recomputed). A node is *needed* when
// the backward reads one of its results, and *recomputable* when it is pure,
// not the loss, and each operand is available in the backward: a block
// argument, a free op, another node, or a gathered parameter that the
// backward gathers again (ZeRO-3) -- the clone reads that gather.
//
// Layers come from the parameters' names: the first all-digit component of
// `train.param` ("layers.3.wq" -> group "layers.3"). Forward ops belong to
// the group of the last parameter read before them; ops before the first
// layer are the prologue, ops after a non-layer parameter read past the last
// layer the epilogue (both keep everything). A node read by the forward of a
// later group is an *interface* (a layer's output) and is always kept by
// Loom's solvers; with runs of groups as the solvers' layers (`segment`),
// only a run's output is.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_REMAT_STEPGRAPH_H
#define LOOM_LIB_REMAT_STEPGRAPH_H

#include "loom/Analysis/CostModel.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include <string>
#include <vector>

namespace loom::remat {

/// Layer index of the prologue and the epilogue.
constexpr int kPrologue = -1;
constexpr int kEpilogue = 1 << 30;

struct Node {
  mlir::Operation *op = nullptr;
  int layer = kPrologue;
  /// Bytes of its results, and the time to compute it once.
  int64_t bytes = 0;
  double seconds = 0;
  bool needed = false, recomputable = false, interface = false;
  /// A matmul-like op (linalg contraction, attention): the knapsack
  /// baseline never recomputes these, as PyTorch's policy does not.
  bool heavy = false;
  /// Nodes it reads (through views), each once, in operand order.
  llvm::SmallVector<unsigned> operands;
  /// Why it is not recomputable, for remarks.
  std::string reason;
};

struct StepGraph {
  mlir::func::FuncOp func;
  mlir::Block *block = nullptr;
  llvm::DenseSet<mlir::Operation *> forward;
  std::vector<Node> nodes;
  llvm::DenseMap<mlir::Operation *, unsigned> nodeOf;
  /// Forward gathers' wait results -> the backward's wait of the same
  /// parameter (its first gather after the forward).
  llvm::DenseMap<mlir::Value, mlir::Operation *> backwardGather;
  /// Nodes of each layer (0 .. numLayers-1), in block order.
  std::vector<std::vector<unsigned>> layers;
  /// Layers with identical structure share a class; one solve per class.
  std::vector<unsigned> layerClass;
  unsigned numClasses = 0;

  /// Builds the graph of `func`'s body; emits an error and fails on steps
  /// it cannot take (no train.loss, more than one block). With `segment`
  /// > 1 the solvers' layers are runs of that many consecutive parameter
  /// groups (the last run may be shorter): the outputs of the groups inside
  /// a run are then ordinary nodes, which a run's options may recompute
  /// from the run's input (segment checkpoints, Chen et al.'s and
  /// Revolve's, with the op-level choices inside); a run of every group
  /// takes the prologue and the epilogue too. The nodes, their order
  /// and every other field do not depend on `segment`, so keep sets carry
  /// over between graphs of one function.
  static llvm::FailureOr<StepGraph> build(mlir::func::FuncOp func,
                                          const CostModel &model,
                                          unsigned segment = 1);

  /// The node whose result `value` is, or views: -1 for anything else.
  int getNodeOf(mlir::Value value) const;
};

/// Which nodes the backward keeps; every other needed node is recomputed
/// (with whatever it needs that is not kept), once, just before its first
/// use in the backward.
using KeepSet = llvm::BitVector;

/// Keeps every node: the step as it is.
KeepSet keepAll(const StepGraph &graph);
/// The nodes a keep set recomputes: every needed node not kept, and their
/// operands not kept, transitively. Fails (returns false) when one of them
/// is not recomputable.
bool getRecomputed(const StepGraph &graph, const KeepSet &keep,
                   llvm::BitVector &recomputed);

/// Clones the recomputed nodes into the backward of `graph.func` (see
/// KeepSet) and moves the backward gathers a clone reads up to before it.
/// When it recomputes anything, the backward's reads of the forward's
/// zero-filled inits get a fill of their own too. Returns the number of
/// ops cloned.
unsigned rewrite(const StepGraph &graph, const KeepSet &keep);

} // namespace loom::remat

#endif // LOOM_LIB_REMAT_STEPGRAPH_H
