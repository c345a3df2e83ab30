//===- PpLinkStages.cpp - the lowered stages in one module ----------------===//
//
// Moves the LLVM-dialect contents of every nested module @stage<s> into the
// enclosing module: the symbols a stage defines get the suffix _stage<s>
// (and internal linkage, but for its entry point and manifest), the
// declarations are shared, and loom_pipeline_stages with the tables
// loom_pipeline_packed and loom_pipeline_manifests let the trainer pick
// its rank's stage.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Train/TrainOps.h"
#include "loom/PipelineParallel/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

namespace loom::pp {
#define GEN_PASS_DEF_PPLINKSTAGESPASS
#include "loom/PipelineParallel/Passes.h.inc"
} // namespace loom::pp

using namespace mlir;
using namespace loom;

namespace {

constexpr llvm::StringLiteral kPacked = "loom_step_packed";
constexpr llvm::StringLiteral kManifest = "loom_step_manifest";
/// What a trainer looks up: a step's entry and manifest, or a pipeline's
/// tables of them.
constexpr llvm::StringLiteral kStages = "loom_pipeline_stages";
constexpr llvm::StringLiteral kPackedTable = "loom_pipeline_packed";
constexpr llvm::StringLiteral kManifestTable = "loom_pipeline_manifests";

/// The type a declaration is used with, to check two stages agree on it.
Type declaredType(Operation *op) {
  if (auto func = dyn_cast<LLVM::LLVMFuncOp>(op))
    return func.getFunctionType();
  if (auto global = dyn_cast<LLVM::GlobalOp>(op))
    return global.getGlobalType();
  return {};
}

/// Whether `op` is a symbol without a definition here.
bool isDeclaration(Operation *op) {
  if (auto func = dyn_cast<LLVM::LLVMFuncOp>(op))
    return func.isExternal();
  if (auto global = dyn_cast<LLVM::GlobalOp>(op))
    return !global.getValueOrNull() && global.getInitializerRegion().empty();
  return false;
}

} // namespace

LogicalResult loom::pp::linkNestedModule(ModuleOp nested, StringRef suffix,
                                         StringRef what, SymbolTable &linked) {
  // The module's definitions get their new names first, and the references
  // to them are rewritten in one walk of it (SymbolTable::rename walks it
  // once per symbol: quadratic in an unrolled stage).
  llvm::DenseMap<StringAttr, StringAttr> renamed;
  for (Operation &op : llvm::make_early_inc_range(nested.getOps())) {
    auto symbol = dyn_cast<SymbolOpInterface>(op);
    if (!symbol || !isa<LLVM::LLVMFuncOp, LLVM::GlobalOp>(op))
      return op.emitError() << what << ": '" << op.getName()
                            << "': expected LLVM functions and globals";
    if (isDeclaration(&op))
      continue;
    StringRef name = symbol.getName();
    bool entry = llvm::is_contained(
        {kPacked, kManifest, kStages, kPackedTable, kManifestTable}, name);
    auto newName = StringAttr::get(op.getContext(), name + suffix);
    renamed[symbol.getNameAttr()] = newName;
    SymbolTable::setSymbolName(&op, newName);
    if (entry)
      continue;
    if (auto func = dyn_cast<LLVM::LLVMFuncOp>(op)) {
      if (func.getLinkage() != LLVM::Linkage::Private)
        func.setLinkage(LLVM::Linkage::Internal);
    } else {
      auto global = cast<LLVM::GlobalOp>(op);
      if (global.getLinkage() != LLVM::Linkage::Private)
        global.setLinkage(LLVM::Linkage::Internal);
    }
  }
  AttrTypeReplacer references;
  references.addReplacement(
      [&](FlatSymbolRefAttr ref) -> std::optional<Attribute> {
        if (StringAttr name = renamed.lookup(ref.getAttr()))
          return FlatSymbolRefAttr::get(name);
        return std::nullopt;
      });
  nested.walk([&](Operation *op) {
    references.replaceElementsIn(op, /*replaceAttrs=*/true,
                                 /*replaceLocs=*/false,
                                 /*replaceTypes=*/false);
  });
  for (Operation &op : llvm::make_early_inc_range(nested.getOps())) {
    StringRef name = cast<SymbolOpInterface>(op).getName();
    if (Operation *existing = linked.lookup(name)) {
      if (isDeclaration(&op) && isDeclaration(existing) &&
          declaredType(&op) == declaredType(existing)) {
        op.erase();
        continue;
      }
      return op.emitError()
             << what << ": @" << name
             << " conflicts with the linked module's (declared with another "
                "type, or defined twice)";
    }
    op.remove();
    linked.insert(&op);
  }
  nested.erase();
  return success();
}

namespace {

struct PPLinkStagesPass
    : public loom::pp::impl::PPLinkStagesPassBase<PPLinkStagesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<ModuleOp> stages;
    for (auto nested : module.getOps<ModuleOp>())
      if (auto index = nested->getAttrOfType<IntegerAttr>(
              loom::train::TrainDialect::kPipelineStageAttrName)) {
        if (index.getInt() != int64_t(stages.size())) {
          nested.emitError()
              << "pp-link-stages: stage " << index.getInt() << " where stage "
              << stages.size() << " was expected (stages in order from 0)";
          return signalPassFailure();
        }
        stages.push_back(nested);
      }
    if (stages.empty())
      return;
    SymbolTable linked(module);
    for (auto [index, stage] : llvm::enumerate(stages))
      if (failed(loom::pp::linkNestedModule(
              stage, ("_stage" + llvm::Twine(index)).str(),
              ("pp-link-stages: stage " + llvm::Twine(index)).str(), linked)))
        return signalPassFailure();
    addTables(module, stages.size());
  }

  void addTables(ModuleOp module, int64_t count) {
    MLIRContext *context = module.getContext();
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    Location loc = module.getLoc();
    Type i64 = builder.getI64Type();
    LLVM::GlobalOp::create(builder, loc, i64, /*isConstant=*/true,
                           LLVM::Linkage::External, kStages,
                           builder.getI64IntegerAttr(count));
    auto ptr = LLVM::LLVMPointerType::get(context);
    auto array = LLVM::LLVMArrayType::get(ptr, count);
    for (auto [table, entry] :
         {std::pair{kPackedTable, kPacked}, {kManifestTable, kManifest}}) {
      auto global = LLVM::GlobalOp::create(
          builder, loc, array,
          /*isConstant=*/true, LLVM::Linkage::External, table, Attribute());
      OpBuilder::InsertionGuard guard(builder);
      builder.createBlock(&global.getInitializerRegion());
      Value value = LLVM::UndefOp::create(builder, loc, array);
      for (int64_t s = 0; s < count; ++s) {
        Value address = LLVM::AddressOfOp::create(
            builder, loc, ptr, (entry + "_stage" + llvm::Twine(s)).str());
        value = LLVM::InsertValueOp::create(builder, loc, value, address, s);
      }
      LLVM::ReturnOp::create(builder, loc, value);
    }
  }
};

} // namespace
