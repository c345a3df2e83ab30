//===- LinalgBuilder.h - emit linalg on tensors tersely ---------*- C++ -*-===//
//
// Decompositions, autodiff and the optimizer all emit the same few shapes of
// linalg: fills, elementwise generics, reductions over named dimensions. This
// keeps that code about the math instead of about builder plumbing.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_UTILS_LINALGBUILDER_H
#define LOOM_UTILS_LINALGBUILDER_H

#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace loom {

/// Emits tensor-level linalg, tensor and arith ops at a builder's insertion
/// point, all at one location.
class LinalgBuilder {
public:
  using BodyFn = llvm::function_ref<mlir::Value(
      mlir::OpBuilder &, mlir::Location, mlir::ValueRange)>;

  LinalgBuilder(mlir::OpBuilder &builder, mlir::Location loc)
      : builder(builder), loc(loc) {}

  mlir::OpBuilder &getBuilder() { return builder; }
  mlir::Location getLoc() { return loc; }

  /// A scalar `arith.constant` of float type `type`.
  mlir::Value floatConstant(mlir::Type type, double value);
  /// A scalar i64 `arith.constant` (a runtime kernel's size operand).
  mlir::Value i64Constant(int64_t value);
  /// A scalar `arith.constant` holding negative infinity of `type`.
  mlir::Value negativeInfinity(mlir::Type type);
  /// `tensor.empty` of the given shape.
  mlir::Value empty(llvm::ArrayRef<int64_t> shape, mlir::Type elementType);
  /// A tensor of the given shape filled with `value`.
  mlir::Value filled(llvm::ArrayRef<int64_t> shape, mlir::Type elementType,
                     double value);
  /// A tensor filled with the scalar `value`.
  mlir::Value filled(llvm::ArrayRef<int64_t> shape, mlir::Value value);

  /// The map from `numDims` loop dimensions to the listed ones.
  mlir::AffineMap map(unsigned numDims, llvm::ArrayRef<unsigned> dims);
  /// The identity map over `numDims` dimensions.
  mlir::AffineMap identity(unsigned numDims);

  /// A `linalg.generic` writing into `init`. `maps` holds one map per input
  /// then the output's. Dimensions absent from the output's map are
  /// reductions, all others parallel. `body` receives the input scalars then
  /// the output's and returns the value to yield.
  mlir::Value generic(mlir::Value init, mlir::ValueRange inputs,
                      llvm::ArrayRef<mlir::AffineMap> maps, BodyFn body);

  /// Sums `input` over the dimensions absent from `keptDims` (a list of the
  /// input's dimensions, in order).
  mlir::Value sum(mlir::Value input, llvm::ArrayRef<unsigned> keptDims);
  /// Maximum of `input` over the dimensions absent from `keptDims`.
  mlir::Value max(mlir::Value input, llvm::ArrayRef<unsigned> keptDims);
  /// Float tensor `input` with `elementType` elements (arith.extf or
  /// arith.truncf, elementwise); `input` itself when they already match.
  mlir::Value convert(mlir::Value input, mlir::Type elementType);

  /// Reshapes by grouping dimensions (`tensor.expand_shape` /
  /// `collapse_shape`): `groups` lists, per dimension of the smaller shape,
  /// the dimensions of the larger shape it spans.
  mlir::Value expand(mlir::Value input, llvm::ArrayRef<int64_t> shape,
                     llvm::ArrayRef<llvm::SmallVector<int64_t, 2>> groups);
  mlir::Value collapse(mlir::Value input,
                       llvm::ArrayRef<llvm::SmallVector<int64_t, 2>> groups);

private:
  mlir::Value reduce(mlir::Value input, llvm::ArrayRef<unsigned> keptDims,
                     mlir::Value initValue, bool isMax);

  mlir::OpBuilder &builder;
  mlir::Location loc;
};

} // namespace loom

#endif // LOOM_UTILS_LINALGBUILDER_H
