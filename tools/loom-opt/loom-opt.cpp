//===- loom-opt.cpp - Loom's optimizer driver -----------------------------===//
//
// Parses, verifies and transforms IR with Loom's dialects and passes plus the
// upstream ones Loom's pipelines build on (func, linalg, tensor, bufferization,
// scf, gpu, llvm, ...). This is the one translation unit that includes the
// upstream "register everything" headers, which are slow to compile.
//
// `-o FILE` is replaced atomically and durably (loom/Runtime/DurableFile.h):
// mlir-opt's driver writes a temporary beside it, which is fsynced and
// renamed over FILE only when every pass succeeded; a device or stream such
// as /dev/null is written by the driver itself.
//
//===----------------------------------------------------------------------===//

#include "loom/InitAllDialects.h"
#include "loom/InitAllPasses.h"
#include "loom/Runtime/DurableFile.h"
#include "loom/Support/CrashGuard.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  loom::registerAllPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  loom::registerAllDialects(registry);

  auto [parsedInput, parsedOutput] = mlir::registerAndParseCLIOptions(
      argc, argv, "Loom optimizer driver\n", registry);
  std::string input = parsedInput, output = parsedOutput;
  // A crash on the main thread (an upstream parser's, say) is a diagnostic.
  auto optMain = [&](llvm::StringRef outputPath) {
    mlir::LogicalResult result = mlir::failure();
    if (!loom::runGuarded("loom-opt", "processing " + input, [&] {
          result = mlir::MlirOptMain(argc, argv, input, outputPath, registry);
        }))
      return mlir::failure();
    return result;
  };
  loom::runtime::DurableTarget target =
      loom::runtime::planDurableWrite(output == "-" ? "/dev/stdout" : output);
  // Streams and devices are written by the driver itself.
  if (output == "-" || target.append)
    return mlir::asMainReturnCode(optMain(output));
  if (!target.error.empty()) {
    llvm::errs() << "loom-opt: error: " << target.error << "\n";
    return EXIT_FAILURE;
  }
  // A file rewritten where it is (other hard links) is written to a
  // scratch file first, and copied over it only on success.
  if (std::string error = loom::runtime::writeToScratch(target);
      !error.empty()) {
    llvm::errs() << "loom-opt: error: " << error << "\n";
    return EXIT_FAILURE;
  }
  if (failed(optMain(target.write))) {
    llvm::sys::fs::remove(target.write);
    return EXIT_FAILURE;
  }
  if (std::string error = loom::runtime::installFileDurably(target);
      !error.empty()) {
    llvm::errs() << "loom-opt: error: " << error << "\n";
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}
