// Tests that #train.target, #train.link and #train.profile reject what a
// device description or a profile may not hold, and that train.target sits
// on modules only.
// RUN: loom-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{expected a positive memory_bandwidth, got -1.000000e+00 : f64}}
module attributes {train.target = #train.target<device = "d", peak_flops = {f32 = 1.0e12 : f64}, memory_bandwidth = -1.0, memory_bytes = 1.0e9, compute_efficiency = 0.5, memory_efficiency = 0.5, compute_slowdown = 0.0, links = [#train.link<scope = "node", bandwidth = 1.0e9, latency = 0.0>]>} {}

// -----

// expected-error @+1 {{expected compute_efficiency in (0, 1], got 1.500000e+00 : f64}}
module attributes {train.target = #train.target<device = "d", peak_flops = {f32 = 1.0e12 : f64}, memory_bandwidth = 1.0e9, memory_bytes = 1.0e9, compute_efficiency = 1.5, memory_efficiency = 0.5, compute_slowdown = 0.0, links = [#train.link<scope = "node", bandwidth = 1.0e9, latency = 0.0>]>} {}

// -----

// expected-error @+1 {{expected a positive float for peak_flops.f32, got 0 : i64}}
module attributes {train.target = #train.target<device = "d", peak_flops = {f32 = 0}, memory_bandwidth = 1.0e9, memory_bytes = 1.0e9, compute_efficiency = 0.5, memory_efficiency = 0.5, compute_slowdown = 0.0, links = [#train.link<scope = "node", bandwidth = 1.0e9, latency = 0.0>]>} {}

// -----

// expected-error @+1 {{expected the last link to have no max_ranks (it serves every larger communicator)}}
module attributes {train.target = #train.target<device = "d", peak_flops = {f32 = 1.0e12 : f64}, memory_bandwidth = 1.0e9, memory_bytes = 1.0e9, compute_efficiency = 0.5, memory_efficiency = 0.5, compute_slowdown = 0.0, links = [#train.link<scope = "node", max_ranks = 8, bandwidth = 1.0e9, latency = 0.0>]>} {}

// -----

// expected-error @+1 {{expected links of #train.link, got "node"}}
module attributes {train.target = #train.target<device = "d", peak_flops = {f32 = 1.0e12 : f64}, memory_bandwidth = 1.0e9, memory_bytes = 1.0e9, compute_efficiency = 0.5, memory_efficiency = 0.5, compute_slowdown = 0.0, links = ["node"]>} {}

// -----

// expected-error @+1 {{expected a non-negative latency, got -1.000000e+00 : f64}}
module attributes {train.link = #train.link<scope = "node", bandwidth = 1.0e9, latency = -1.0>} {}

// -----

// expected-error @+1 {{expected as many op_seconds as ops, got 1 and 2}}
module attributes {train.profile = #train.profile<source = "p.json", target = "cpu", world_size = 2, steps = 1, step_seconds = 1.0e-3, wait_seconds = 0.0, ops = [1, 2], op_seconds = [1.0e-4], fused = [], fused_into = [], collectives = [], collective_seconds = []>} {}

// -----

// expected-error @+1 {{expected op ids >= 0, got -3}}
module attributes {train.profile = #train.profile<source = "p.json", target = "cpu", world_size = 2, steps = 1, step_seconds = 1.0e-3, wait_seconds = 0.0, ops = [-3], op_seconds = [1.0e-4], fused = [], fused_into = [], collectives = [], collective_seconds = []>} {}

// -----

// expected-error @+1 {{'train.target' is only valid on a module}}
func.func private @f() attributes {train.target = #train.target<device = "d", peak_flops = {f32 = 1.0e12 : f64}, memory_bandwidth = 1.0e9, memory_bytes = 1.0e9, compute_efficiency = 0.5, memory_efficiency = 0.5, compute_slowdown = 0.0, links = [#train.link<scope = "node", bandwidth = 1.0e9, latency = 0.0>]>}

// -----

// expected-error @+1 {{expected 'train.target' to be a #train.target, got "cpu"}}
module attributes {train.target = "cpu"} {}
