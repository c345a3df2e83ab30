// Tests that each train role-attribute rule rejects the IR it should.
// RUN: loom-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{expected 'train.param' on argument #0 to be a non-empty string, got unit}}
func.func private @param_without_name(tensor<4xf32> {train.param})

// -----

// expected-error @+1 {{expected 'train.param' on argument #0 to be a non-empty string, got ""}}
func.func private @param_with_empty_name(tensor<4xf32> {train.param = ""})

// -----

// expected-error @+1 {{expected parameter argument #1 to be a ranked tensor of floats, got 'tensor<4xi32>'}}
func.func private @integer_param(tensor<4xf32>, tensor<4xi32> {train.param = "w"})

// -----

// expected-error @+1 {{expected parameter argument #0 to be a ranked tensor of floats, got 'f32'}}
func.func private @scalar_param(f32 {train.param = "w"})

// -----

// expected-error @+1 {{duplicate parameter name "w" on arguments #0 and #2}}
func.func private @duplicate_param(tensor<4xf32> {train.param = "w"}, tensor<4xf32> {train.param = "v"}, tensor<4xf32> {train.param = "w"})

// -----

// expected-error @+1 {{argument #0 cannot be both a parameter and an input}}
func.func private @param_and_input(tensor<4xf32> {train.param = "w", train.input})

// -----

// expected-error @+1 {{expected 'train.input' on argument #0 to be a unit attribute or a non-empty string, got 3 : i64}}
func.func private @input_with_integer(tensor<4xi32> {train.input = 3})

// -----

// expected-error @+1 {{expected input argument #0 to be a ranked tensor, got 'i32'}}
func.func private @scalar_input(i32 {train.input})

// -----

// expected-error @+1 {{'train.loss' tags a result, found it on argument #0}}
func.func private @loss_on_argument(tensor<f32> {train.loss})

// -----

// expected-error @+1 {{unknown train attribute 'train.grad' on argument #0}}
func.func private @unknown_argument_attr(tensor<4xf32> {train.grad = "w"})

// -----

// expected-error @+1 {{unknown train attribute 'train.param' on result #0 (it tags arguments)}}
func.func private @param_on_result() -> (tensor<4xf32> {train.param = "w"})

// -----

// expected-error @+1 {{expected 'train.loss' to be a unit attribute, got "l"}}
func.func private @named_loss() -> (tensor<f32> {train.loss = "l"})

// -----

// expected-error @+1 {{expected the loss (result #0) to be a float scalar or 0-d float tensor, got 'tensor<4xf32>'}}
func.func private @vector_loss() -> (tensor<4xf32> {train.loss})

// -----

// expected-error @+1 {{expected the loss (result #0) to be a float scalar or 0-d float tensor, got 'tensor<i32>'}}
func.func private @integer_loss() -> (tensor<i32> {train.loss})

// -----

// expected-error @+1 {{expected at most one loss result, found results #0 and #1}}
func.func private @two_losses() -> (f32 {train.loss}, f32 {train.loss})

// -----

// expected-error @+1 {{'train.param' is not an operation attribute; train role attributes tag function arguments and results}}
%0 = arith.constant {train.param = "w"} 0.0 : f32
