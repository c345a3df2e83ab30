//===- MergeGpuModules.cpp - one kernel module, identical kernels shared --===//
//
// Outlining gives every kernel its own gpu.module. A Llama step repeats the
// same kernels once per layer, and each module is a separate PTX (JIT) or
// cubin (ptxas run) and a separate cuModuleLoad: 2,037 of them for ~125M
// parameters. Merging them into one module whose identical kernels are
// kept once cuts the kernels to compile by about the number of layers.
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/GPU/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace loom::codegen {
#define GEN_PASS_DEF_GPUMERGEMODULESPASS
#include "loom/Codegen/GPU/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;

namespace {

/// A module that holds kernels only, with no target or other attributes
/// yet: its kernels can move without taking anything along.
bool isMergeable(gpu::GPUModuleOp module) {
  if (module.getTargetsAttr() || module.getOffloadingHandlerAttr())
    return false;
  return llvm::all_of(module.getBody()->getOperations(), [](Operation &op) {
    auto func = dyn_cast<gpu::GPUFuncOp>(op);
    return func && func.isKernel();
  });
}

/// The kernel's text under a placeholder name: equal for kernels that
/// differ in name only.
std::string bodyKey(gpu::GPUFuncOp kernel) {
  StringAttr name = kernel.getNameAttr();
  SymbolTable::setSymbolName(kernel, "kernel");
  std::string key;
  llvm::raw_string_ostream os(key);
  kernel->print(os, OpPrintingFlags().useLocalScope());
  SymbolTable::setSymbolName(kernel, name);
  return key;
}

struct MergeGpuModules
    : loom::codegen::impl::GpuMergeModulesPassBase<MergeGpuModules> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp top = getOperation();
    auto modules = llvm::to_vector(llvm::make_filter_range(
        top.getOps<gpu::GPUModuleOp>(), isMergeable));
    if (modules.size() < 2)
      return;
    OpBuilder builder(&getContext()); // detached, until inserted
    auto merged = gpu::GPUModuleOp::create(builder, modules.front().getLoc(),
                                           moduleName);
    // Before the first module, under a unique name.
    SymbolTable(top).insert(merged, Block::iterator(modules.front()));
    SymbolTable kernels(merged);
    // old @module::@kernel -> new @merged::@kernel
    DenseMap<Attribute, SymbolRefAttr> moved;
    llvm::StringMap<StringAttr> byKey;
    for (gpu::GPUModuleOp module : modules) {
      for (auto kernel :
           llvm::make_early_inc_range(module.getOps<gpu::GPUFuncOp>())) {
        auto before = SymbolRefAttr::get(
            module.getNameAttr(),
            {FlatSymbolRefAttr::get(kernel.getNameAttr())});
        auto [it, inserted] =
            byKey.try_emplace(bodyKey(kernel), StringAttr());
        if (inserted) {
          kernel->remove();
          it->second = kernels.insert(kernel); // renamed if taken
          ++numKernels;
        } else {
          ++numDuplicates;
        }
        moved[before] = SymbolRefAttr::get(merged.getNameAttr(),
                                           {FlatSymbolRefAttr::get(it->second)});
      }
      module.erase();
    }
    top.walk([&](gpu::LaunchFuncOp launch) {
      auto it = moved.find(launch.getKernel());
      if (it != moved.end())
        launch.setKernelAttr(it->second);
    });
  }
};

} // namespace
