//===- EntryPoint.cpp - the trainer-facing entry of a compiled step -------===//

#include "EntryPoint.h"

#include "loom/Dialect/Train/TrainDialect.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace loom;

static std::string shapeText(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "-";
  return llvm::join(llvm::map_range(shape,
                                    [](int64_t d) { return std::to_string(d); }),
                    "x");
}

static std::string dtypeText(Type element) {
  if (element.isF32())
    return "f32";
  if (element.isF64())
    return "f64";
  if (element.isBF16())
    return "bf16";
  if (element.isSignlessInteger(32))
    return "i32";
  if (element.isSignlessInteger(64))
    return "i64";
  return "";
}

/// Role and name of a tagged argument or result.
static std::pair<std::string, std::string> roleOf(DictionaryAttr attrs) {
  if (!attrs)
    return {"", ""};
  for (StringRef role :
       {train::TrainDialect::kParamAttrName, train::TrainDialect::kStateAttrName,
        train::TrainDialect::kInputAttrName}) {
    if (Attribute value = attrs.get(role)) {
      auto name = dyn_cast<StringAttr>(value);
      return {role.drop_front(6).str(), name ? name.str() : ""};
    }
  }
  if (attrs.get(train::TrainDialect::kLossAttrName))
    return {"loss", "loss"};
  return {"", ""};
}

FailureOr<StepSignature> loom::describeStep(func::FuncOp full,
                                            func::FuncOp local) {
  StepSignature signature;
  auto describe = [&](Type fullType, Type localType, DictionaryAttr attrs,
                      bool isArg, unsigned index) -> LogicalResult {
    auto fullTensor = dyn_cast<RankedTensorType>(fullType);
    auto localTensor = dyn_cast<RankedTensorType>(localType);
    auto [role, name] = roleOf(attrs);
    if (!fullTensor || !localTensor || !fullTensor.hasStaticShape() ||
        !localTensor.hasStaticShape() ||
        dtypeText(localTensor.getElementType()).empty())
      return local.emitError() << "loomc: " << (isArg ? "argument" : "result")
                               << " #" << index
                               << " must be a static tensor of f32, f64, "
                                  "bf16, i32 or i64, got "
                               << localType;
    if (role.empty())
      return local.emitError()
             << "loomc: " << (isArg ? "argument" : "result") << " #" << index
             << " has no train role; every argument must be a param, state "
                "or input, and every result the loss, a param or a state";
    signature.tensors.push_back(
        {isArg, role, name, dtypeText(localTensor.getElementType()),
         SmallVector<int64_t>(localTensor.getShape()),
         SmallVector<int64_t>(fullTensor.getShape())});
    return success();
  };
  auto fullFn = cast<FunctionOpInterface>(full.getOperation());
  auto localFn = cast<FunctionOpInterface>(local.getOperation());
  if (fullFn.getNumArguments() != localFn.getNumArguments() ||
      fullFn.getNumResults() != localFn.getNumResults())
    return local.emitError("loomc: partitioning changed the step's arity");
  for (unsigned i = 0; i < localFn.getNumArguments(); ++i)
    if (failed(describe(fullFn.getArgumentTypes()[i],
                        localFn.getArgumentTypes()[i], localFn.getArgAttrDict(i),
                        true, i)))
      return failure();
  for (unsigned i = 0; i < localFn.getNumResults(); ++i)
    if (failed(describe(fullFn.getResultTypes()[i],
                        localFn.getResultTypes()[i],
                        localFn.getResultAttrDict(i), false, i)))
      return failure();
  return signature;
}

std::string StepSignature::manifest() const {
  std::string text = "loom-step 1\n";
  for (const auto &[key, value] : properties)
    text += key + " " + value + "\n";
  for (const StepTensor &t : tensors)
    text += std::string(t.isArgument ? "arg" : "result") + " " + t.role + " " +
            t.name + " " + t.dtype + " " + shapeText(t.localShape) + " " +
            shapeText(t.fullShape) + (t.inPlace ? " in-place" : "") + "\n";
  return text;
}

LogicalResult loom::buildEntryFunction(ModuleOp module, func::FuncOp step) {
  OpBuilder builder(module.getBodyRegion());
  builder.setInsertionPointToEnd(module.getBody());
  Location loc = step.getLoc();
  FunctionType type = step.getFunctionType();
  SmallVector<Type> buffers;
  for (Type t : llvm::concat<const Type>(type.getInputs(), type.getResults())) {
    auto tensor = cast<RankedTensorType>(t);
    buffers.push_back(
        MemRefType::get(tensor.getShape(), tensor.getElementType()));
  }
  auto entry = func::FuncOp::create(builder, loc, kEntryName,
                                    builder.getFunctionType(buffers, {}));
  Block *body = entry.addEntryBlock();
  builder.setInsertionPointToStart(body);
  SmallVector<Value> inputs;
  for (auto [index, t] : llvm::enumerate(type.getInputs())) {
    auto toTensor = bufferization::ToTensorOp::create(
        builder, loc, t, body->getArgument(index));
    toTensor.setRestrict(true);
    inputs.push_back(toTensor);
  }
  auto call = func::CallOp::create(builder, loc, step, inputs);
  auto tied = step->getAttrOfType<DenseI64ArrayAttr>("loom.tied_results");
  for (auto [index, result] : llvm::enumerate(call.getResults())) {
    int64_t arg = tied && index < size_t(tied.size()) ? tied[index] : -1;
    auto materialize = bufferization::MaterializeInDestinationOp::create(
        builder, loc, result,
        body->getArgument(arg >= 0 ? unsigned(arg)
                                   : type.getNumInputs() + index));
    materialize.setRestrict(true);
    materialize.setWritable(true);
  }
  func::ReturnOp::create(builder, loc);
  step.setPrivate();
  return success();
}

LogicalResult loom::buildPackedEntry(ModuleOp module,
                                     ArrayRef<MemRefType> buffers,
                                     StringRef manifest) {
  auto entry = module.lookupSymbol<LLVM::LLVMFuncOp>(kEntryName);
  if (!entry)
    return module.emitError("loomc: the lowered module lost @") << kEntryName;
  MLIRContext *ctx = module.getContext();
  OpBuilder builder(ctx);
  builder.setInsertionPointToEnd(module.getBody());
  Location loc = module.getLoc();
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  Type i64 = builder.getI64Type();

  // The manifest, NUL-terminated, for the trainer to read.
  std::string text = manifest.str();
  text.push_back('\0');
  LLVM::GlobalOp::create(builder, loc,
                         LLVM::LLVMArrayType::get(builder.getI8Type(),
                                                  text.size()),
                         /*isConstant=*/true, LLVM::Linkage::External,
                         kManifestName, builder.getStringAttr(text));

  // void loom_step_packed(void **buffers): one data pointer per buffer.
  auto packed = LLVM::LLVMFuncOp::create(
      builder, loc, kPackedEntryName,
      LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {ptr}));
  Block *body = packed.addEntryBlock(builder);
  builder.setInsertionPointToStart(body);
  auto constant = [&](int64_t v) -> Value {
    return LLVM::ConstantOp::create(builder, loc, i64,
                                    builder.getI64IntegerAttr(v));
  };
  SmallVector<Value> args;
  for (auto [index, type] : llvm::enumerate(buffers)) {
    Value slot = LLVM::GEPOp::create(builder, loc, ptr, ptr,
                                     body->getArgument(0),
                                     ArrayRef<LLVM::GEPArg>{int32_t(index)});
    Value data = LLVM::LoadOp::create(builder, loc, ptr, slot);
    // The descriptor: allocated, aligned, offset, sizes, strides.
    args.append({data, data, constant(0)});
    int64_t stride = 1;
    SmallVector<int64_t> strides(type.getRank());
    for (int64_t d = type.getRank() - 1; d >= 0; --d) {
      strides[d] = stride;
      stride *= type.getDimSize(d);
    }
    for (int64_t size : type.getShape())
      args.push_back(constant(size));
    for (int64_t s : strides)
      args.push_back(constant(s));
  }
  if (args.size() != entry.getNumArguments())
    return entry.emitError("loomc: expected ")
           << args.size() << " lowered arguments, got "
           << entry.getNumArguments();
  LLVM::CallOp::create(builder, loc, entry, args);
  LLVM::ReturnOp::create(builder, loc, ValueRange{});
  return success();
}
