//===- NameGpuKernels.cpp - each outlined kernel named after its module ---===//

#include "loom/Codegen/GPU/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"

namespace loom::codegen {
#define GEN_PASS_DEF_GPUNAMEKERNELSPASS
#include "loom/Codegen/GPU/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;

namespace {

struct NameGpuKernels
    : loom::codegen::impl::GpuNameKernelsPassBase<NameGpuKernels> {
  void runOnOperation() override {
    ModuleOp top = getOperation();
    // old @module::@kernel -> new @module::@module
    DenseMap<Attribute, SymbolRefAttr> renamed;
    for (auto module : top.getOps<gpu::GPUModuleOp>()) {
      auto kernels = llvm::to_vector(llvm::make_filter_range(
          module.getOps<gpu::GPUFuncOp>(),
          [](gpu::GPUFuncOp f) { return f.isKernel(); }));
      if (kernels.size() != 1 || kernels[0].getName() == module.getName())
        continue;
      gpu::GPUFuncOp kernel = kernels[0];
      StringAttr name = module.getNameAttr();
      if (SymbolTable::lookupSymbolIn(module, name)) {
        module.emitError("cannot name its kernel @")
            << name.getValue() << ": the module already holds that symbol";
        return signalPassFailure();
      }
      auto before = SymbolRefAttr::get(
          name, {FlatSymbolRefAttr::get(kernel.getNameAttr())});
      if (failed(SymbolTable::replaceAllSymbolUses(kernel, name, module)))
        return signalPassFailure();
      SymbolTable::setSymbolName(kernel, name);
      renamed[before] = SymbolRefAttr::get(name, {FlatSymbolRefAttr::get(name)});
    }
    if (renamed.empty())
      return;
    top.walk([&](gpu::LaunchFuncOp launch) {
      auto it = renamed.find(launch.getKernel());
      if (it != renamed.end())
        launch.setKernelAttr(it->second);
    });
  }
};

} // namespace
