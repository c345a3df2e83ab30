//===- TrainContractAttrs.td - what passes hand each other -*- tablegen -*-===//
//
// The attributes one training pass writes and a later one reads, typed and
// verified by the train dialect (TrainDialect::verify*Attribute):
//
//   train.microbatches = M : i64       on a function (train-microbatch)
//   train.microbatch = m : i64         on an op of microbatch m < M
//   train.pipeline = #train.pipeline<...>, train.pipeline_stage = s : i64
//                                      on a stage's function (pp-partition),
//                                      train.pipeline_stage on its module
//                                      (pp-split-stages)
//   train.action = "F3"                on a stage's op: its schedule action
//   train.zero_stage = 1|2|3 : i64     on a sharded step (zero-partition)
//   train.full_shape = array<i64: ...> on a sharded argument or result: the
//                                      unpartitioned shape
//   train.footprint = #train.footprint<...>
//                                      on a train op: the memory its lowering
//                                      allocates (train-footprint)
//   train.step_manifest = #train.step_manifest<...>
//                                      on a module with a trainer entry: the
//                                      trainer's ABI (trainer-entry-point,
//                                      read by trainer-manifest)
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_TRAIN_TRAINCONTRACTATTRS_TD
#define LOOM_DIALECT_TRAIN_TRAINCONTRACTATTRS_TD

include "loom/Dialect/Train/TrainTargetAttrs.td"

def Train_PipelineAttr : Train_Attr<"Pipeline", "pipeline"> {
  let summary = "a pipeline stage's grid and schedule";
  let description = [{
    On each stage function `pp-partition` makes: the pipeline's stages,
    microbatches and data-parallel replicas per stage (the world is stages
    x replicas), its schedule and the units each stage holds in Megatron's
    layout syntax.

    ```mlir
    func.func @step_stage0(...) attributes {
        train.pipeline = #train.pipeline<stages = 2, microbatches = 4,
                                         replicas = 1, schedule = "1f1b",
                                         layout = "Ett|L">,
        train.pipeline_stage = 0 : i64}
    ```
  }];
  let parameters = (ins "int64_t":$stages, "int64_t":$microbatches,
                        "int64_t":$replicas,
                        StringRefParameter<"gpipe, 1f1b or zb-h1">:$schedule,
                        StringRefParameter<"units per stage">:$layout);
}

def Train_FootprintAttr : Train_Attr<"Footprint", "footprint"> {
  let summary = "the memory a train op's lowering allocates";
  let description = [{
    On a train op, by `train-footprint`, which lowers a copy of the op as
    the memory-plan phase will and measures it with the memory plan's
    timeline: `scratch` is the most bytes the lowering holds while it runs
    beyond its operands, its results and its tables, and `in_place` names
    for each result the operand whose buffer the lowering writes it into
    when that operand's value dies at the op (-1: a buffer of its own).
    `tables` lists, as (key, bytes) pairs, the constant tables of indices
    the lowering computes (RoPE's angles): `codegen-share-index-generics`
    computes equal tables once for the whole step, so a table lives from
    the first op that needs it to the last; equal keys are equal tables.
    The memory timeline (and so train-remat and the scheduler) charges the
    op what its lowering will allocate, not what the op's types alone say.

    ```mlir
    %y = train.rope %x theta = 1.0e+04 {train.footprint =
        #train.footprint<scratch = 0, in_place = [-1],
                         tables = [5230960331178532862, 2048]>} : ...
    ```
  }];
  let parameters = (ins "int64_t":$scratch,
                        "::mlir::DenseI64ArrayAttr":$in_place,
                        OptionalParameter<"::mlir::DenseI64ArrayAttr">:$tables);
}

def Train_ManifestTensorAttr : Train_Attr<"ManifestTensor", "manifest_tensor"> {
  let summary = "one buffer the trainer allocates for the compiled step";
  let description = [{
    An argument (`kind = "arg"`) or result (`kind = "result"`) of the
    step, in the order of `@loom_step`'s memrefs: its role (`param`,
    `state`, `input` or `loss`), its name, its type on this rank (f32, f64,
    bf16, i32 or i64), its unpartitioned shape (`train.full_shape`: ZeRO
    shards differ) and, for a result, whether it is written into the
    buffer of the argument it updates (`in_place`).

    ```mlir
    #train.manifest_tensor<kind = "result", role = "param", name = "w",
                           type = tensor<4xf32>, full_shape = [8], in_place = true>
    ```
  }];
  let parameters = (ins StringRefParameter<"arg or result">:$kind,
                        StringRefParameter<"param, state, input or loss">:$role,
                        StringRefParameter<"the tensor's name">:$name,
                        "::mlir::RankedTensorType":$type,
                        "::mlir::DenseI64ArrayAttr":$full_shape,
                        DefaultValuedParameter<"bool", "false">:$in_place,
                        DefaultValuedParameter<"int64_t", "0">:$id_bound);
  let extraClassDeclaration = [{
    bool isArgument() const { return getKind() == "arg"; }
    /// The trainer's name of `element` (f32, f64, bf16, i32 or i64), or ""
    /// for a type the trainer does not allocate.
    static ::llvm::StringRef getElementName(::mlir::Type element);
  }];
}

def Train_StepManifestAttr : Train_Attr<"StepManifest", "step_manifest"> {
  let summary = "what the trainer needs to know of the compiled step";
  let description = [{
    On the module, by `trainer-entry-point`, from the tensor-level step:
    the world size (its `coll.comm_world`), the ZeRO stage, a pipeline
    stage's place in its grid, the optimizer and learning rate
    `train-optimizer` recorded, the model file, the scheduler's and the
    memory timeline's peaks, and one `#train.manifest_tensor` per memref of
    `@loom_step`. `trainer-manifest` completes it with the plan's figures
    as lowered and emits it as `loom_step_manifest`'s text
    (`runtime/include/loom/Runtime/StepManifest.h`). The dialect checks the
    tensors against `@loom_step`'s memrefs while the entry is a `func.func`.

    ```mlir
    module attributes {train.step_manifest = #train.step_manifest<
        world_size = 2, zero_stage = 3, optimizer = "sgd", lr = 1.000000e-01 : f64,
        source = "model.mlir", scheduled_peak_bytes = 120,
        predicted_peak_bytes = 96, tensors = [
          #train.manifest_tensor<kind = "arg", role = "param", name = "w",
              type = tensor<4xf32>, full_shape = [8]>, ...]>}
    ```
  }];
  let parameters = (ins
      "int64_t":$world_size,
      "int64_t":$zero_stage,
      OptionalParameter<"std::optional<int64_t>">:$pipeline_stage,
      OptionalParameter<"std::optional<int64_t>">:$pipeline_stages,
      OptionalParameter<"std::optional<int64_t>">:$pipeline_replicas,
      StringRefParameter<"adamw, sgd, or empty: none recorded", "\"\"">:$optimizer,
      OptionalParameter<"::mlir::FloatAttr">:$lr,
      StringRefParameter<"the model file", "\"\"">:$source,
      OptionalParameter<"std::optional<int64_t>">:$scheduled_peak_bytes,
      "int64_t":$predicted_peak_bytes,
      "::mlir::ArrayAttr":$tensors);
}

#endif // LOOM_DIALECT_TRAIN_TRAINCONTRACTATTRS_TD
