// Tests that each train role-attribute rule rejects the IR it should.
// RUN: loom-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{expected 'train.param' on argument #0 to be a non-empty string, got unit}}
func.func private @param_without_name(tensor<4xf32> {train.param})

// -----

// expected-error @+1 {{expected 'train.param' on argument #0 to be a non-empty string, got ""}}
func.func private @param_with_empty_name(tensor<4xf32> {train.param = ""})

// -----

// expected-error @+1 {{expected parameter argument #1 to be a ranked tensor or memref of floats, got 'tensor<4xi32>'}}
func.func private @integer_param(tensor<4xf32>, tensor<4xi32> {train.param = "w"})

// -----

// expected-error @+1 {{expected parameter argument #0 to be a ranked tensor or memref of floats, got 'f32'}}
func.func private @scalar_param(f32 {train.param = "w"})

// -----

// expected-error @+1 {{duplicate 'train.param' name "w" on arguments #0 and #2}}
func.func private @duplicate_param(tensor<4xf32> {train.param = "w"}, tensor<4xf32> {train.param = "v"}, tensor<4xf32> {train.param = "w"})

// -----

// expected-error @+1 {{argument #0 cannot be tagged both 'train.param' and 'train.input'}}
func.func private @param_and_input(tensor<4xf32> {train.param = "w", train.input})

// -----

// expected-error @+1 {{expected 'train.input' on argument #0 to be a unit attribute or a non-empty string, got 3 : i64}}
func.func private @input_with_integer(tensor<4xi32> {train.input = 3})

// -----

// expected-error @+1 {{expected input argument #0 to be a ranked tensor or memref, got 'i32'}}
func.func private @scalar_input(i32 {train.input})

// -----

// expected-error @+1 {{'train.loss' tags a result, found it on argument #0}}
func.func private @loss_on_argument(tensor<f32> {train.loss})

// -----

// expected-error @+1 {{'train.grad' tags a result, found it on argument #0}}
func.func private @grad_on_argument(tensor<4xf32> {train.grad = "w"})

// -----

// expected-error @+1 {{unknown train attribute 'train.params' on argument #0}}
func.func private @misspelt_param(tensor<4xf32> {train.params = "w"})

// -----

// expected-error @+1 {{unknown train attribute 'train.input' on result #0 (it tags arguments)}}
func.func private @input_on_result() -> (tensor<4xf32> {train.input})

// -----

// expected-error @+1 {{'train.grad' "v" on result #1 names no argument tagged 'train.param'}}
func.func private @grad_of_unknown_param(tensor<4xf32> {train.param = "w"}) -> (f32 {train.loss}, tensor<4xf32> {train.grad = "v"})

// -----

// expected-error @+1 {{expected result #1 ('train.grad' "w") to have the type of argument #0, 'tensor<4xf32>', got 'tensor<8xf32>'}}
func.func private @grad_of_wrong_type(tensor<4xf32> {train.param = "w"}) -> (f32 {train.loss}, tensor<8xf32> {train.grad = "w"})

// -----

// expected-error @+1 {{'train.param' "v" on result #0 names no argument tagged 'train.param'}}
func.func private @updated_unknown_param(tensor<4xf32> {train.param = "w"}) -> (tensor<4xf32> {train.param = "v"})

// -----

// expected-error @+1 {{'train.state' "w.m" on result #0 names no argument tagged 'train.state'}}
func.func private @updated_unknown_state(tensor<4xf32> {train.state = "w.n"}) -> (tensor<4xf32> {train.state = "w.m"})

// -----

// Found by loom-fuzz: pp-partition copied the second result's name onto a
// stage argument and left IR that did not verify.
// expected-error @+1 {{duplicate 'train.param' name "w" on results #1 and #2}}
func.func private @duplicate_updated_param(tensor<4xf32> {train.param = "w"}, tensor<4xf32> {train.param = "v"}) -> (f32 {train.loss}, tensor<4xf32> {train.param = "w"}, tensor<4xf32> {train.param = "w"})

// -----

// expected-error @+1 {{duplicate 'train.grad' name "w" on results #0 and #1}}
func.func private @duplicate_grad(tensor<4xf32> {train.param = "w"}) -> (tensor<4xf32> {train.grad = "w"}, tensor<4xf32> {train.grad = "w"})

// -----

// expected-error @+1 {{duplicate 'train.state' name "step" on arguments #0 and #1}}
func.func private @duplicate_state(tensor<f32> {train.state = "step"}, tensor<f32> {train.state = "step"})

// -----

// expected-error @+1 {{expected state argument #0 to be a ranked tensor or memref of floats, got 'i64'}}
func.func private @integer_state(i64 {train.state = "step"})

// -----

// expected-error @+1 {{expected 'train.loss' to be a unit attribute, got "l"}}
func.func private @named_loss() -> (tensor<f32> {train.loss = "l"})

// -----

// expected-error @+1 {{expected the loss (result #0) to be a float scalar or a 0-d float tensor or memref, got 'tensor<4xf32>'}}
func.func private @vector_loss() -> (tensor<4xf32> {train.loss})

// -----

// expected-error @+1 {{expected the loss (result #0) to be a float scalar or a 0-d float tensor or memref, got 'tensor<i32>'}}
func.func private @integer_loss() -> (tensor<i32> {train.loss})

// -----

// expected-error @+1 {{expected at most one loss result, found results #0 and #1}}
func.func private @two_losses() -> (f32 {train.loss}, f32 {train.loss})

// -----

// expected-error @+1 {{'train.param' is not an operation attribute; train role attributes tag function arguments and results}}
%0 = arith.constant {train.param = "w"} 0.0 : f32
