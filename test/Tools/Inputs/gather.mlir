func.func @f(%x: tensor<2x3xf32>) -> tensor<8x3xf32> {
  %c = coll.comm_world : !coll.comm<4>
  %fa = coll.all_gather_start %x on %c gather_axis = 0 : (tensor<2x3xf32>, !coll.comm<4>) -> !coll.future<tensor<8x3xf32>>
  %wa = coll.wait %fa : !coll.future<tensor<8x3xf32>>
  return %wa : tensor<8x3xf32>
}
func.func @rank() -> index {
  %c = coll.comm_world : !coll.comm<4>
  %r = coll.comm_rank %c : !coll.comm<4>
  return %r : index
}
