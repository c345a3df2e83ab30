//===- ConvertKernelsToCalls.cpp - train.call_kernel to func.call ---------===//
//
// On buffers, each train.call_kernel becomes a call of its runtime function
// with one pointer per buffer (its aligned address plus its offset) and the
// scalars. The kernels take contiguous row-major buffers: any other input
// is first copied into a new buffer, and any other output is written into a
// new buffer (copied in first if the kernel reads it) and copied back
// (linalg.copy, so that the CUDA target makes a kernel of it).
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/Passes.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"

namespace loom {
#define GEN_PASS_DEF_CONVERTTRAINKERNELSTOCALLSPASS
#include "loom/Conversion/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom::train;

namespace {

/// The address of `buffer`'s first element as an !llvm.ptr.
Value addressOf(OpBuilder &b, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  unsigned bytes = type.getElementTypeBitWidth() / 8;
  Value offset = arith::MulIOp::create(
      b, loc, meta.getOffset(), arith::ConstantIndexOp::create(b, loc, bytes));
  Value address = arith::IndexCastOp::create(
      b, loc, b.getI64Type(), arith::AddIOp::create(b, loc, base, offset));
  return LLVM::IntToPtrOp::create(b, loc, LLVM::LLVMPointerType::get(
                                              b.getContext()),
                                  address);
}

struct ConvertKernelsToCalls
    : loom::impl::ConvertTrainKernelsToCallsPassBase<ConvertKernelsToCalls> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<CallKernelOp> calls;
    module.walk([&](CallKernelOp op) { calls.push_back(op); });
    MLIRContext *ctx = &getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    for (CallKernelOp call : calls) {
      if (!call.getResults().empty()) {
        call.emitOpError("must be bufferised first");
        return signalPassFailure();
      }
      SmallVector<Type> argTypes(call.getInputs().size() +
                                     call.getOutputs().size(),
                                 ptr);
      llvm::append_range(argTypes, call.getScalars().getTypes());
      auto type = FunctionType::get(ctx, argTypes, {});
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
      if (!callee) {
        OpBuilder b(module.getBodyRegion());
        callee = func::FuncOp::create(b, call.getLoc(), call.getCallee(), type);
        callee.setPrivate();
      } else if (callee.getFunctionType() != type) {
        call.emitOpError() << "calls @" << call.getCallee() << " as " << type
                           << ", but it is declared "
                           << callee.getFunctionType();
        return signalPassFailure();
      }
      SmallVector<Value> buffers(call.getInputs());
      llvm::append_range(buffers, call.getOutputs());
      if (llvm::any_of(buffers, [](Value buffer) {
            return !cast<MemRefType>(buffer.getType()).hasStaticShape();
          })) {
        call.emitOpError("takes static shapes only");
        return signalPassFailure();
      }
      OpBuilder b(call);
      Location loc = call.getLoc();
      SmallVector<Value> operands;
      SmallVector<std::pair<size_t, Value>> copies; // buffer index, stand-in
      for (auto [i, buffer] : llvm::enumerate(buffers)) {
        auto type = cast<MemRefType>(buffer.getType());
        if (memref::isStaticShapeAndContiguousRowMajor(type)) {
          operands.push_back(addressOf(b, loc, buffer));
          continue;
        }
        // A contiguous stand-in: inputs are copied in, outputs out after.
        Value copy = memref::AllocOp::create(
            b, loc, MemRefType::get(type.getShape(), type.getElementType()));
        size_t inputs = call.getInputs().size();
        if (i < inputs || call.readsOutput(i - inputs))
          linalg::CopyOp::create(b, loc, buffer, copy);
        operands.push_back(addressOf(b, loc, copy));
        copies.push_back({i, copy});
      }
      llvm::append_range(operands, call.getScalars());
      func::CallOp::create(b, loc, callee, operands);
      for (auto [i, copy] : copies) {
        if (i >= call.getInputs().size())
          linalg::CopyOp::create(b, loc, copy, buffers[i]);
        memref::DeallocOp::create(b, loc, copy);
      }
      call.erase();
    }
  }
};

} // namespace
