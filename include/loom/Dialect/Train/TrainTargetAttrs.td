//===- TrainTargetAttrs.td - a step's target --------------*- tablegen -*-===//
//
// `loom-set-target` reads a device description (devices/*.json) and,
// optionally, a trainer's profile, and attaches them to the module as
// `train.target = #train.target<...>`. Every pass that estimates time reads
// this attribute; none reads files.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_TRAIN_TRAINTARGETATTRS_TD
#define LOOM_DIALECT_TRAIN_TRAINTARGETATTRS_TD

include "loom/Dialect/Train/TrainDialect.td"
include "mlir/IR/AttrTypeBase.td"

/// An f64, printed as MLIR prints one (so it reads back to the same bits)
/// without its type.
def Train_F64Parameter : AttrOrTypeParameter<"::mlir::FloatAttr",
                                             "an f64"> {
  let parser = [{ ::loom::train::parseF64Parameter($_parser) }];
  let printer = [{ ::loom::train::printF64Parameter($_printer, $_self) }];
}

class Train_Attr<string name, string attrMnemonic>
    : AttrDef<Train_Dialect, name> {
  let mnemonic = attrMnemonic;
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Train_LinkAttr : Train_Attr<"Link", "link"> {
  let summary = "a link of the target's interconnect";
  let description = [{
    The link a communicator of up to `max_ranks` ranks uses (the last link,
    without `max_ranks`, serves every larger one): its bus bandwidth per
    rank and direction in bytes/s, and its latency per ring step in seconds.

    ```mlir
    #train.link<scope = "node", max_ranks = 8, bandwidth = 3.600000e+11, latency = 6.000000e-06>
    ```
  }];
  let parameters = (ins StringRefParameter<"what the link joins">:$scope,
                        OptionalParameter<"std::optional<int64_t>">:$max_ranks,
                        Train_F64Parameter:$bandwidth,
                        Train_F64Parameter:$latency);
}

def Train_ProfileAttr : Train_Attr<"Profile", "profile"> {
  let summary = "what a trainer measured (trainer --profile)";
  let description = [{
    The mean per step of a trainer's `--profile` run, by the op ids of
    `trainer-stamp-op-ids`: the seconds of each timed run of ops (`ops`,
    `op_seconds`), the ops timed inside another's run (`fused` ->
    `fused_into`) and each collective's start-to-end time. Passes bind it
    to the ops that carry these ids; an id that names no op is ignored.

    ```mlir
    #train.profile<source = "p.json", target = "cpu", world_size = 2, steps = 4,
                   step_seconds = 5.100000e-03, wait_seconds = 8.000000e-05,
                   ops = [3, 4], op_seconds = [1.000000e-04, 2.000000e-04],
                   fused = [], fused_into = [],
                   collectives = [7], collective_seconds = [3.000000e-05]>
    ```
  }];
  let parameters = (ins StringRefParameter<"the file it was read from">:$source,
                        StringRefParameter<"the trainer's target">:$target,
                        "int64_t":$world_size, "int64_t":$steps,
                        Train_F64Parameter:$step_seconds,
                        Train_F64Parameter:$wait_seconds,
                        "::mlir::DenseI64ArrayAttr":$ops,
                        "::mlir::DenseF64ArrayAttr":$op_seconds,
                        "::mlir::DenseI64ArrayAttr":$fused,
                        "::mlir::DenseI64ArrayAttr":$fused_into,
                        "::mlir::DenseI64ArrayAttr":$collectives,
                        "::mlir::DenseF64ArrayAttr":$collective_seconds);
}

def Train_TargetAttr : Train_Attr<"Target", "target"> {
  let summary = "the device a step is compiled for, and what was measured on it";
  let description = [{
    Attached to a module as `train.target` by `loom-set-target`, from a
    device description (`devices/<name>.json`) and optionally a trainer's
    profile. The cost model of every pass that estimates time is built from
    it: peak FLOP/s per element type, memory bandwidth and size, the
    roofline's efficiencies, how much compute slows while a collective is in
    flight (`compute_slowdown`, 0 on GPUs) and the interconnect's links.
    Passes on nested modules (pipeline stages) use the nearest enclosing
    module's target.

    ```mlir
    module attributes {train.target = #train.target<
        device = "cpu", peak_flops = {f32 = 1.000000e+11 : f64},
        memory_bandwidth = 2.000000e+10, memory_bytes = 2.400000e+10,
        compute_efficiency = 5.000000e-01, memory_efficiency = 0.69999999999999996,
        compute_slowdown = 0.000000e+00,
        links = [#train.link<scope = "node", bandwidth = 5.000000e+09, latency = 2.000000e-06>]>} {
    }
    ```
  }];
  let parameters = (ins StringRefParameter<"the device's name">:$device,
                        "::mlir::DictionaryAttr":$peak_flops,
                        Train_F64Parameter:$memory_bandwidth,
                        Train_F64Parameter:$memory_bytes,
                        Train_F64Parameter:$compute_efficiency,
                        Train_F64Parameter:$memory_efficiency,
                        Train_F64Parameter:$compute_slowdown,
                        "::mlir::ArrayAttr":$links,
                        OptionalParameter<"ProfileAttr">:$profile);
}

#endif // LOOM_DIALECT_TRAIN_TRAINTARGETATTRS_TD
