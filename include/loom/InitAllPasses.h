//===- InitAllPasses.h - register Loom's passes -----------------*- C++ -*-===//

#ifndef LOOM_INITALLPASSES_H
#define LOOM_INITALLPASSES_H

#include "loom/Dialect/Train/TrainPasses.h"

namespace loom {

/// Registers every pass Loom defines with the global pass registry.
inline void registerAllPasses() { train::registerTrainPasses(); }

} // namespace loom

#endif // LOOM_INITALLPASSES_H
