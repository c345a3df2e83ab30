//===- TrainDialect.td - train dialect definition ----------*- tablegen -*-===//

#ifndef LOOM_DIALECT_TRAIN_TRAINDIALECT_TD
#define LOOM_DIALECT_TRAIN_TRAINDIALECT_TD

include "mlir/IR/OpBase.td"

def Train_Dialect : Dialect {
  let name = "train";
  let cppNamespace = "::loom::train";
  let summary = "What a training step needs that linalg does not say well";
  let description = [{
    The `train` dialect marks the roles of a model function's values and
    holds the ops of training that linalg expresses poorly: embedding lookup,
    RMSNorm, rotary embedding, attention, cross-entropy and their gradients.
    Each op decomposes to linalg (`train-decompose`).

    Roles are discardable attributes on `func.func` arguments and results:

    | attribute | where | value | meaning |
    |-----------|-------|-------|---------|
    | `train.param` | argument | non-empty string, unique in the function | a trainable parameter and its name (`"layers.0.attn.wq"`) |
    | `train.input` | argument | unit, or a non-empty string naming the input | data fed each step (tokens, labels) |
    | `train.state` | argument | non-empty string, unique in the function | optimizer state (`"layers.0.attn.wq.m"`, `"step"`) |
    | `train.loss` | result | unit | the scalar loss; at most one per function |
    | `train.grad` | result | the name of a `train.param` argument | that parameter's gradient, of its type |
    | `train.param` | result | the name of a `train.param` argument | that parameter after the update, of its type |
    | `train.state` | result | the name of a `train.state` argument | that state after the update, of its type |

    ```mlir
    func.func @forward(%w: tensor<64x64xf32> {train.param = "proj.w"},
                       %x: tensor<8x64xf32> {train.input = "hidden"})
        -> (tensor<f32> {train.loss}) { ... }
    ```

    Parameters and state are ranked tensors of floating-point elements;
    inputs are ranked tensors; the loss is a floating-point scalar (`f32` or
    `tensor<f32>`). After bufferisation the same roles tag the memrefs. A result named after an argument has that argument's
    type. The ops `train-optimizer` creates carry the unit attribute
    `train.update`, so later passes (ZeRO) can tell the update from the
    backward. A module carries the target it is compiled for as
    `train.target = #train.target<...>` (`loom-set-target`).

    What one pass hands the next is typed and verified here too:

    | attribute | where | value |
    |-----------|-------|-------|
    | `train.microbatches` | function | i64 >= 1: the microbatches its batch is split into (`train-microbatch`) |
    | `train.microbatch` | op | i64 in [0, M) of its function's `train.microbatches` (or pipeline's) |
    | `train.pipeline` | function | `#train.pipeline<stages, microbatches, replicas, schedule, layout>` (`pp-partition`) |
    | `train.pipeline_stage` | function, module | i64 in [0, stages) |
    | `train.action` | op | `"F<m>"`, `"B<m>"`, `"I<m>"` or `"W<m>"`, m below the pipeline's microbatches |
    | `train.zero_stage` | function | i64 in [1, 3] (`zero-partition`) |
    | `train.full_shape` | argument, result | dense i64 array: the unpartitioned shape, holding at least the local elements |
    | `train.optimizer`, `train.lr` | function | `"adamw"` or `"sgd"`; an f64 >= 0 (`train-optimizer`) |
    | `train.tied_results` | function | dense i64 array, one per result: the argument written in place, or -1 |
    | `train.synchronous_peak_bytes`, `train.scheduled_peak_bytes`, `train.timeline_peak_bytes`, `train.arena_bytes`, `train.arena_bound_bytes`, `train.packed_bytes`, `train.packed_bound_bytes` | function | i64 >= 0: the schedule's and the plan's figures |

    Any other `train.*` attribute, or one of these in the wrong place, is an
    error.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::tensor::TensorDialect"
  ];
  let useDefaultAttributePrinterParser = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Tags a function argument as a parameter: `train.param = "name"`.
    static constexpr ::llvm::StringLiteral kParamAttrName = "train.param";
    /// Tags a function argument as per-step input data.
    static constexpr ::llvm::StringLiteral kInputAttrName = "train.input";
    /// Tags the function result that is the loss.
    static constexpr ::llvm::StringLiteral kLossAttrName = "train.loss";
    /// Tags a function result as the gradient of the named parameter.
    static constexpr ::llvm::StringLiteral kGradAttrName = "train.grad";
    /// Tags optimizer state, as an argument and as an updated result.
    static constexpr ::llvm::StringLiteral kStateAttrName = "train.state";
    /// Marks the ops of the optimizer update (a unit attribute on the op).
    static constexpr ::llvm::StringLiteral kUpdateAttrName = "train.update";
    /// The module's target (#train.target), set by loom-set-target.
    static constexpr ::llvm::StringLiteral kTargetAttrName = "train.target";
    /// On a function: the microbatches its batch is split into (i64 >= 1,
    /// train-microbatch).
    static constexpr ::llvm::StringLiteral kMicrobatchesAttrName =
        "train.microbatches";
    /// On an op train-microbatch cloned: its microbatch (i64, below the
    /// function's count).
    static constexpr ::llvm::StringLiteral kMicrobatchAttrName =
        "train.microbatch";
    /// On a pipeline stage's function: its grid and schedule
    /// (#train.pipeline, pp-partition).
    static constexpr ::llvm::StringLiteral kPipelineAttrName = "train.pipeline";
    /// On a stage's function or module: its stage (i64, below the stages).
    static constexpr ::llvm::StringLiteral kPipelineStageAttrName =
        "train.pipeline_stage";
    /// On a stage's op: the schedule action it runs in ("F3", "B0", "I2",
    /// "W1").
    static constexpr ::llvm::StringLiteral kActionAttrName = "train.action";
    /// On a sharded step: the ZeRO stage (i64 in [1, 3], zero-partition).
    static constexpr ::llvm::StringLiteral kZeroStageAttrName =
        "train.zero_stage";
    /// On an integer input argument: its values lie in [0, N) (i64 > 0,
    /// train-record-id-bounds: the vocabulary of the ops that read them).
    static constexpr ::llvm::StringLiteral kIdBoundAttrName =
        "train.id_bound";
    /// On a sharded argument or result: its unpartitioned shape (dense i64
    /// array).
    static constexpr ::llvm::StringLiteral kFullShapeAttrName =
        "train.full_shape";
    /// On a train op: the memory its lowering allocates
    /// (#train.footprint, train-footprint).
    static constexpr ::llvm::StringLiteral kFootprintAttrName =
        "train.footprint";
    /// On a module with a trainer entry: the trainer's ABI
    /// (#train.step_manifest, trainer-entry-point).
    static constexpr ::llvm::StringLiteral kStepManifestAttrName =
        "train.step_manifest";
    /// On a step: the optimizer it updates with (adamw or sgd) and its
    /// learning rate (f64 >= 0, the trainer's default; train-optimizer).
    static constexpr ::llvm::StringLiteral kOptimizerAttrName =
        "train.optimizer";
    static constexpr ::llvm::StringLiteral kLearningRateAttrName = "train.lr";
    /// On a step: the memory timeline's peak of the synchronous order, the
    /// least memory retiming collectives reaches (coll-overlap-schedule),
    /// and of the order the scheduler bounded
    /// (trainer-record-scheduled-peak); i64 bytes.
    static constexpr ::llvm::StringLiteral kSynchronousPeakBytesAttrName =
        "train.synchronous_peak_bytes";
    static constexpr ::llvm::StringLiteral kScheduledPeakBytesAttrName =
        "train.scheduled_peak_bytes";
    /// On a step: per result, the argument whose buffer it is written into,
    /// or -1 (codegen-update-in-place).
    static constexpr ::llvm::StringLiteral kTiedResultsAttrName =
        "train.tied_results";
    /// On a step: the memory plan's figures (codegen-memory-plan): the
    /// timeline's peak with arguments and caller-owned results, the arena's
    /// size and the most of it live at once; and what bufferisation
    /// allocated outside the plan, packed, and its bound
    /// (codegen-pack-buffers); i64 bytes.
    static constexpr ::llvm::StringLiteral kTimelinePeakBytesAttrName =
        "train.timeline_peak_bytes";
    static constexpr ::llvm::StringLiteral kArenaBytesAttrName =
        "train.arena_bytes";
    static constexpr ::llvm::StringLiteral kArenaBoundBytesAttrName =
        "train.arena_bound_bytes";
    static constexpr ::llvm::StringLiteral kPackedBytesAttrName =
        "train.packed_bytes";
    static constexpr ::llvm::StringLiteral kPackedBoundBytesAttrName =
        "train.packed_bound_bytes";
  }];
}

class Train_Op<string mnemonic, list<Trait> traits = []>
    : Op<Train_Dialect, mnemonic, traits>;

#endif // LOOM_DIALECT_TRAIN_TRAINDIALECT_TD
