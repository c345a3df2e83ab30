// Tests that each coll verifier rule rejects the IR it should, with its own
// diagnostic.
// RUN: loom-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

// expected-error @+1 {{expected a positive number of ranks, got 0}}
func.func @comm_of_zero_ranks(%c: !coll.comm<0>)

// -----

func.func @gather_element_type(%c: !coll.comm<2>, %x: tensor<4xf32>) {
  // expected-error @+1 {{expected result element type 'f32', got 'f16'}}
  %f = coll.all_gather_start %x on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf16>>
  %w = coll.wait %f : !coll.future<tensor<8xf16>>
  return
}

// -----

func.func @gather_rank(%c: !coll.comm<2>, %x: tensor<4xf32>) {
  // expected-error @+1 {{expected result rank 1, got 2}}
  %f = coll.all_gather_start %x on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<8x1xf32>>
  %w = coll.wait %f : !coll.future<tensor<8x1xf32>>
  return
}

// -----

func.func @gather_axis_out_of_range(%c: !coll.comm<2>, %x: tensor<4x4xf32>) {
  // expected-error @+1 {{expected gather_axis to be less than the rank 2, got 2}}
  %f = coll.all_gather_start %x on %c gather_axis = 2 : (tensor<4x4xf32>, !coll.comm<2>) -> !coll.future<tensor<4x4xf32>>
  %w = coll.wait %f : !coll.future<tensor<4x4xf32>>
  return
}

// -----

func.func @gather_negative_axis(%c: !coll.comm<2>, %x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'gather_axis' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %f = coll.all_gather_start %x on %c gather_axis = -1 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  %w = coll.wait %f : !coll.future<tensor<8xf32>>
  return
}

// -----

func.func @gather_size_does_not_match_ranks(%c: !coll.comm<4>, %x: tensor<16x8xf32>) {
  // expected-error @+1 {{expected result dimension 1 (gather_axis) to be 32 (the input's 8 times 4 ranks), got 24}}
  %f = coll.all_gather_start %x on %c gather_axis = 1 : (tensor<16x8xf32>, !coll.comm<4>) -> !coll.future<tensor<16x24xf32>>
  %w = coll.wait %f : !coll.future<tensor<16x24xf32>>
  return
}

// -----

func.func @gather_other_dimension_changes(%c: !coll.comm<4>, %x: tensor<16x8xf32>) {
  // expected-error @+1 {{expected result dimension 0 to be 16 (the input's), got 8}}
  %f = coll.all_gather_start %x on %c gather_axis = 1 : (tensor<16x8xf32>, !coll.comm<4>) -> !coll.future<tensor<8x32xf32>>
  %w = coll.wait %f : !coll.future<tensor<8x32xf32>>
  return
}

// -----

func.func @gather_dynamic_comm_not_a_multiple(%c: !coll.comm<?>, %x: tensor<8xf32>) {
  // expected-error @+1 {{expected result dimension 0 (gather_axis) to be a multiple of 8, got 12}}
  %f = coll.all_gather_start %x on %c gather_axis = 0 : (tensor<8xf32>, !coll.comm<?>) -> !coll.future<tensor<12xf32>>
  %w = coll.wait %f : !coll.future<tensor<12xf32>>
  return
}

// -----

func.func @scatter_size_does_not_match_ranks(%c: !coll.comm<8>, %g: tensor<4000xf32>) {
  // expected-error @+1 {{expected input dimension 0 (scatter_axis) to be 4096 (the result's 512 times 8 ranks), got 4000}}
  %f = coll.reduce_scatter_start %g on %c scatter_axis = 0 reduction = <sum> : (tensor<4000xf32>, !coll.comm<8>) -> !coll.future<tensor<512xf32>>
  %w = coll.wait %f : !coll.future<tensor<512xf32>>
  return
}

// -----

func.func @scatter_dynamic_comm_not_a_multiple(%c: !coll.comm<?>, %g: tensor<10xf32>) {
  // expected-error @+1 {{expected input dimension 0 (scatter_axis) to be a multiple of 4, got 10}}
  %f = coll.reduce_scatter_start %g on %c scatter_axis = 0 reduction = <sum> : (tensor<10xf32>, !coll.comm<?>) -> !coll.future<tensor<4xf32>>
  %w = coll.wait %f : !coll.future<tensor<4xf32>>
  return
}

// -----

func.func @scatter_element_type(%c: !coll.comm<2>, %g: tensor<8xbf16>) {
  // expected-error @+1 {{expected result element type 'bf16', got 'f32'}}
  %f = coll.reduce_scatter_start %g on %c scatter_axis = 0 reduction = <avg> : (tensor<8xbf16>, !coll.comm<2>) -> !coll.future<tensor<4xf32>>
  %w = coll.wait %f : !coll.future<tensor<4xf32>>
  return
}

// -----

func.func @scatter_unknown_reduction(%c: !coll.comm<2>, %g: tensor<8xf32>) {
  // expected-error @+2 {{expected ::loom::coll::ReductionKind to be one of: sum, avg, max, min}}
  // expected-error @+1 {{failed to parse Coll_ReductionKindAttr parameter 'value'}}
  %f = coll.reduce_scatter_start %g on %c scatter_axis = 0 reduction = <prod> : (tensor<8xf32>, !coll.comm<2>) -> !coll.future<tensor<4xf32>>
  return
}

// -----

func.func @all_reduce_type_change(%c: !coll.comm<2>, %g: tensor<8xf32>) {
  // expected-error @+1 {{expected future value type 'tensor<8xf32>' (the input type), got 'tensor<4xf32>'}}
  %f = coll.all_reduce_start %g on %c reduction = <sum> : (tensor<8xf32>, !coll.comm<2>) -> !coll.future<tensor<4xf32>>
  %w = coll.wait %f : !coll.future<tensor<4xf32>>
  return
}

// -----

func.func @broadcast_root_out_of_range(%c: !coll.comm<4>, %x: tensor<8xf32>) {
  // expected-error @+1 {{expected root to be less than the 4 ranks of the communicator, got 4}}
  %f = coll.broadcast_start %x on %c root = 4 : (tensor<8xf32>, !coll.comm<4>) -> !coll.future<tensor<8xf32>>
  %w = coll.wait %f : !coll.future<tensor<8xf32>>
  return
}

// -----

func.func @broadcast_type_change(%c: !coll.comm<4>, %x: tensor<8xf32>) {
  // expected-error @+1 {{expected future value type 'tensor<8xf32>' (the input type), got 'tensor<8xf64>'}}
  %f = coll.broadcast_start %x on %c root = 0 : (tensor<8xf32>, !coll.comm<4>) -> !coll.future<tensor<8xf64>>
  %w = coll.wait %f : !coll.future<tensor<8xf64>>
  return
}

// -----

// expected-error @+2 {{invalid kind of type specified: expected builtin.tensor, but found 'f32'}}
// expected-error @+1 {{failed to parse Coll_FutureType parameter 'valueType' which is to be a `::mlir::RankedTensorType`}}
func.func @future_of_a_scalar(%f: !coll.future<f32>)

// -----

func.func @waited_twice(%c: !coll.comm<2>, %x: tensor<8xf32>) {
  // expected-error @+1 {{expected the future to be waited exactly once, found 2 waits}}
  %f = coll.all_reduce_start %x on %c reduction = <sum> : (tensor<8xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  %w0 = coll.wait %f : !coll.future<tensor<8xf32>>
  %w1 = coll.wait %f : !coll.future<tensor<8xf32>>
  return
}

// -----

func.func @never_waited(%c: !coll.comm<2>, %x: tensor<8xf32>) {
  // expected-error @+1 {{expected the future to be waited in its block, found no 'coll.wait'}}
  %f = coll.all_reduce_start %x on %c reduction = <sum> : (tensor<8xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  return
}

// -----

func.func @returned(%c: !coll.comm<2>, %x: tensor<8xf32>) -> !coll.future<tensor<8xf32>> {
  // expected-error @+1 {{future escapes its block through terminator 'func.return'}}
  %f = coll.all_reduce_start %x on %c reduction = <sum> : (tensor<8xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  return %f : !coll.future<tensor<8xf32>>
}

// -----

func.func @yielded_out_of_a_region(%c: !coll.comm<2>, %x: tensor<8xf32>, %p: i1) {
  %r = scf.if %p -> !coll.future<tensor<8xf32>> {
    // expected-error @+1 {{future escapes its block through terminator 'scf.yield'}}
    %f = coll.all_reduce_start %x on %c reduction = <sum> : (tensor<8xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
    scf.yield %f : !coll.future<tensor<8xf32>>
  } else {
    %f = "test.make_future"() : () -> !coll.future<tensor<8xf32>>
    scf.yield %f : !coll.future<tensor<8xf32>>
  }
  return
}

// -----

func.func @waited_in_a_nested_region(%c: !coll.comm<2>, %x: tensor<8xf32>, %p: i1) {
  // expected-error @+1 {{future escapes through a region boundary: waited inside 'scf.if'}}
  %f = coll.all_reduce_start %x on %c reduction = <sum> : (tensor<8xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  scf.if %p {
    %w = coll.wait %f : !coll.future<tensor<8xf32>>
  }
  return
}

// -----

func.func @waited_in_another_block(%c: !coll.comm<2>, %x: tensor<8xf32>) {
  // expected-error @+1 {{expected the future to be waited in the block of its start, found its 'coll.wait' in another block}}
  %f = coll.all_reduce_start %x on %c reduction = <sum> : (tensor<8xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  cf.br ^bb1
^bb1:
  %w = coll.wait %f : !coll.future<tensor<8xf32>>
  return
}

// -----

func.func @used_by_another_op(%c: !coll.comm<2>, %x: tensor<8xf32>) {
  // expected-error @+1 {{expected the future to be used only by 'coll.wait', found 'test.store'}}
  %f = coll.all_reduce_start %x on %c reduction = <sum> : (tensor<8xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  "test.store"(%f) : (!coll.future<tensor<8xf32>>) -> ()
  %w = coll.wait %f : !coll.future<tensor<8xf32>>
  return
}

// -----

func.func @wait_on_an_argument(%f: !coll.future<tensor<8xf32>>) -> tensor<8xf32> {
  // expected-error @+1 {{expected a future produced by a collective start op in this block, found a block argument}}
  %w = coll.wait %f : !coll.future<tensor<8xf32>>
  return %w : tensor<8xf32>
}

// -----

func.func @wait_result_type(%c: !coll.comm<2>, %x: tensor<8xf32>) {
  %f = coll.all_reduce_start %x on %c reduction = <sum> : (tensor<8xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  // expected-error @+1 {{failed to verify that result type matches the future's value type}}
  %w = "coll.wait"(%f) : (!coll.future<tensor<8xf32>>) -> tensor<4xf32>
  return
}

// -----

func.func @release_of_an_argument(%x: tensor<8xf32>) {
  // expected-error @+1 {{expected the result of a 'coll.wait' or the input of an earlier collective start, found a block argument}}
  coll.release %x : tensor<8xf32>
  return
}

// -----

func.func @release_of_compute(%x: tensor<8xf32>) {
  %y = math.exp %x : tensor<8xf32>
  // expected-error @+1 {{expected the result of a 'coll.wait' or the input of an earlier collective start, found the result of 'math.exp'}}
  coll.release %y : tensor<8xf32>
  return
}

// -----

func.func @use_after_release(%c: !coll.comm<2>, %x: tensor<4xf32>) -> tensor<8xf32> {
  %f = coll.all_gather_start %x on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  %w = coll.wait %f : !coll.future<tensor<8xf32>>
  // expected-error @+1 {{value is used after its release by 'math.exp'}}
  coll.release %w : tensor<8xf32>
  %y = math.exp %w : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @released_twice(%c: !coll.comm<2>, %x: tensor<4xf32>) {
  %f = coll.all_gather_start %x on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  %w = coll.wait %f : !coll.future<tensor<8xf32>>
  // expected-error @+1 {{value is released more than once}}
  coll.release %w : tensor<8xf32>
  coll.release %w : tensor<8xf32>
  return
}

// -----

func.func @use_after_release_in_a_region(%c: !coll.comm<2>, %x: tensor<4xf32>, %p: i1) {
  %f = coll.all_gather_start %x on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  %w = coll.wait %f : !coll.future<tensor<8xf32>>
  // expected-error @+1 {{value is used after its release by 'math.exp'}}
  coll.release %w : tensor<8xf32>
  scf.if %p {
    %y = math.exp %w : tensor<8xf32>
  }
  return
}

// -----

func.func @release_with_a_use_in_another_block(%c: !coll.comm<2>, %x: tensor<4xf32>) {
  %f = coll.all_gather_start %x on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
  %w = coll.wait %f : !coll.future<tensor<8xf32>>
  // expected-error @+1 {{expected every use of the released value in the block of its release, found 'math.exp' in another block}}
  coll.release %w : tensor<8xf32>
  cf.br ^bb1
^bb1:
  %y = math.exp %w : tensor<8xf32>
  return
}

// -----

func.func @release_input_before_start(%c: !coll.comm<2>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %g = math.exp %x : tensor<4xf32>
  // expected-error @+1 {{expected the result of a 'coll.wait' or the input of an earlier collective start, found the result of 'math.exp'}}
  coll.release %g : tensor<4xf32>
  %f = coll.reduce_scatter_start %g on %c scatter_axis = 0 reduction = <avg> : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<2xf32>>
  %w = coll.wait %f : !coll.future<tensor<2xf32>>
  %r = tensor.empty() : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @use_of_released_input(%c: !coll.comm<2>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %g = math.exp %x : tensor<4xf32>
  %f = coll.reduce_scatter_start %g on %c scatter_axis = 0 reduction = <avg> : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<2xf32>>
  // expected-error @+1 {{value is used after its release by 'math.exp'}}
  coll.release %g : tensor<4xf32>
  %w = coll.wait %f : !coll.future<tensor<2xf32>>
  %y = math.exp %g : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @send_result(%c: !coll.comm<2>, %x: tensor<4xf32>) {
  // expected-error @+1 {{expected future value type 'tensor<0xf32>' (a send returns nothing), got 'tensor<4xf32>'}}
  %f = coll.send_start %x on %c to = 1 tag = 0 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<4xf32>>
  %w = coll.wait %f : !coll.future<tensor<4xf32>>
  return
}

// -----

func.func @send_peer(%c: !coll.comm<2>, %x: tensor<4xf32>) {
  // expected-error @+1 {{expected peer to be less than the 2 ranks of the communicator, got 2}}
  %f = coll.send_start %x on %c to = 2 tag = 0 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<0xf32>>
  %w = coll.wait %f : !coll.future<tensor<0xf32>>
  return
}

// -----

func.func @recv_peer(%c: !coll.comm<4>) {
  // expected-error @+1 {{expected peer to be less than the 4 ranks of the communicator, got 7}}
  %f = coll.recv_start on %c from = 7 tag = 0 : (!coll.comm<4>) -> !coll.future<tensor<4xf32>>
  %w = coll.wait %f : !coll.future<tensor<4xf32>>
  return
}

// -----

func.func @recv_unwaited(%c: !coll.comm<4>) {
  // expected-error @+1 {{expected the future to be waited in its block, found no 'coll.wait'}}
  %f = coll.recv_start on %c from = 1 tag = 0 : (!coll.comm<4>) -> !coll.future<tensor<4xf32>>
  return
}

// -----

func.func @recv_negative_tag(%c: !coll.comm<4>) {
  // expected-error @+1 {{attribute 'tag' failed to satisfy constraint}}
  %f = coll.recv_start on %c from = 1 tag = -1 : (!coll.comm<4>) -> !coll.future<tensor<4xf32>>
  %w = coll.wait %f : !coll.future<tensor<4xf32>>
  return
}

// -----

func.func @group_does_not_divide(%w: !coll.comm<6>) -> !coll.comm<2> {
  // expected-error @below {{expected the parent's 6 ranks to be a multiple of size * stride = 2 * 2}}
  %g = coll.comm_group %w size = 2 stride = 2 : !coll.comm<6> -> !coll.comm<2>
  return %g : !coll.comm<2>
}

// -----

func.func @group_result_size(%w: !coll.comm<4>) -> !coll.comm<4> {
  // expected-error @below {{expected a result of size 2, got '!coll.comm<4>'}}
  %g = coll.comm_group %w size = 2 stride = 1 : !coll.comm<4> -> !coll.comm<4>
  return %g : !coll.comm<4>
}

// -----

func.func @group_of_dynamic(%w: !coll.comm<?>) -> !coll.comm<2> {
  // expected-error @below {{expected a parent communicator of static size}}
  %g = coll.comm_group %w size = 2 stride = 1 : !coll.comm<?> -> !coll.comm<2>
  return %g : !coll.comm<2>
}

// -----

func.func @group_of_zero(%w: !coll.comm<4>) -> !coll.comm<2> {
  // expected-error @below {{attribute 'stride' failed to satisfy constraint}}
  %g = coll.comm_group %w size = 2 stride = 0 : !coll.comm<4> -> !coll.comm<2>
  return %g : !coll.comm<2>
}
