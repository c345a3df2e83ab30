// MLIR 22's linalg.broadcast parser dereferences a null attribute on a
// malformed `dimensions` list (NamedAttrList::set). Used by
// upstream-parser-crash.test.
func.func @f(%b: tensor<64xf32>) -> tensor<32x64xf32> {
  %e = tensor.empty() : tensor<32x64xf32>
  %bb = linalg.broadcast ins(%b : tensor<64xf32>) outs(%e : tensor<32x64xf32>) dimensions = [[]
  return %bb : tensor<32x64xf32>
}
