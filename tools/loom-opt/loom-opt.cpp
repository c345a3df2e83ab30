//===- loom-opt.cpp - Loom's optimizer driver -----------------------------===//
//
// Parses, verifies and transforms IR with Loom's dialects and passes plus the
// upstream ones Loom's pipelines build on (func, linalg, tensor, bufferization,
// scf, gpu, llvm, ...). This is the one translation unit that includes the
// upstream "register everything" headers, which are slow to compile.
//
//===----------------------------------------------------------------------===//

#include "loom/InitAllDialects.h"
#include "loom/InitAllPasses.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  loom::registerAllPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  loom::registerAllDialects(registry);

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Loom optimizer driver\n", registry));
}
