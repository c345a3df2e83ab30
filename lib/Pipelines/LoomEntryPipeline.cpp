//===- LoomEntryPipeline.cpp - loom-entry-pipeline ------------------------===//
//
// The trainer's entry point around the planned step, which is then inlined
// into it (as it is: no further simplification), and the collectives as
// calls of the runtime.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/Passes.h"
#include "loom/Pipelines/Pipelines.h"
#include "loom/Trainer/Passes.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void loom::buildEntryPipeline(OpPassManager &pm, const EntryOptions &options) {
  trainer::TrainerEntryPointPassOptions entry;
  entry.source = options.source;
  pm.addPass(trainer::createTrainerEntryPointPass(entry));
  pm.addPass(createConvertCollToLoomrtPass());
  pm.addPass(
      createInlinerPass(/*opPipelines=*/{},
                        /*defaultPipelineBuilder=*/[](OpPassManager &) {}));
  pm.addPass(createSymbolDCEPass());
}
