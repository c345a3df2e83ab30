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

#endif // LOOM_DIALECT_TRAIN_TRAINCONTRACTATTRS_TD
