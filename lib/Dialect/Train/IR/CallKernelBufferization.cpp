//===- CallKernelBufferization.cpp - train.call_kernel on buffers ---------===//
//
// train.call_kernel is a destination-style op: each output bufferises in
// place into its init's buffer, which the kernel overwrites without reading
// it (so a tensor.empty init needs no copy) unless read_outputs lists it,
// and the inputs are only read.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Train/TrainOps.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/DstBufferizableOpInterfaceImpl.h"

using namespace mlir;
using namespace mlir::bufferization;

namespace {

struct CallKernelBufferization
    : DstBufferizableOpInterfaceExternalModel<CallKernelBufferization,
                                              loom::train::CallKernelOp> {
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand,
                              const AnalysisState &) const {
    auto call = cast<loom::train::CallKernelOp>(op);
    if (!call.isDpsInit(&operand))
      return true;
    return call.readsOutput(operand.getOperandNumber() -
                            call.getInputs().size());
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto call = cast<loom::train::CallKernelOp>(op);
    auto buffers = [&](ValueRange values) -> FailureOr<SmallVector<Value>> {
      SmallVector<Value> result;
      for (Value value : values) {
        FailureOr<Value> buffer = getBuffer(rewriter, value, options, state);
        if (failed(buffer))
          return failure();
        result.push_back(*buffer);
      }
      return result;
    };
    FailureOr<SmallVector<Value>> inputs = buffers(call.getInputs());
    FailureOr<SmallVector<Value>> outputs = buffers(call.getOutputs());
    if (failed(inputs) || failed(outputs))
      return failure();
    rewriter.setInsertionPoint(op);
    loom::train::CallKernelOp::create(
        rewriter, op->getLoc(), TypeRange(), call.getCalleeAttr(), *inputs,
        *outputs, call.getScalars(), call.getReadOutputsAttr());
    replaceOpWithBufferizedValues(rewriter, op, *outputs);
    return success();
  }
};

} // namespace

void loom::train::attachCallKernelBufferization(MLIRContext &context) {
  CallKernelOp::attachInterface<CallKernelBufferization>(context);
}
