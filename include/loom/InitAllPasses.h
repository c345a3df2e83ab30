//===- InitAllPasses.h - register Loom's passes -----------------*- C++ -*-===//

#ifndef LOOM_INITALLPASSES_H
#define LOOM_INITALLPASSES_H

#include "loom/Dialect/Coll/CollPasses.h"
#include "loom/Dialect/Train/TrainPasses.h"

namespace loom {

/// Registers every pass and pipeline Loom defines with the global registry.
inline void registerAllPasses() {
  coll::registerCollPasses();
  coll::registerSchedulePipeline();
  train::registerTrainPasses();
}

} // namespace loom

#endif // LOOM_INITALLPASSES_H
