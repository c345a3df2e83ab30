//===- CollInterfaces.td - coll op interfaces --------------*- tablegen -*-===//

#ifndef LOOM_DIALECT_COLL_COLLINTERFACES_TD
#define LOOM_DIALECT_COLL_COLLINTERFACES_TD

include "mlir/IR/OpBase.td"

def Coll_CollectiveOpInterface : OpInterface<"CollectiveOpInterface"> {
  let cppNamespace = "::loom::coll";
  let description = [{
    Implemented by every op that starts a collective. It tells passes and
    analyses what they need without knowing the op: the pattern (`getKind`),
    the communicator, the buffer the collective reads (`getInput`, which it
    holds live until the matching `coll.wait`), the buffer it writes (the
    future's value type, live from the start), the reduction if any, and the
    bytes each rank moves.

    Buffers held live, in the memory timeline's terms:

    ```
      start ──────────────────────────── wait
      |<- input read by the collective ->|     (input may not be freed)
      |<- result buffer allocated  ------|---> (until its last use or release)
    ```
  }];
  let methods = [
    InterfaceMethod<"Returns the communication pattern of the collective.",
      "::loom::coll::CollectiveKind", "getKind">,
    InterfaceMethod<"Returns the communicator the collective runs on.",
      "::mlir::TypedValue<::loom::coll::CommType>", "getComm">,
    InterfaceMethod<[{Returns the tensor this rank contributes; the collective
      reads it until the future is waited. Null for `coll.recv_start`, which
      reads nothing.}],
      "::mlir::TypedValue<::mlir::RankedTensorType>", "getInput">,
    InterfaceMethod<"Returns the future of the collective's result.",
      "::mlir::TypedValue<::loom::coll::FutureType>", "getFuture">,
    InterfaceMethod<"Returns the reduction, for reducing collectives.",
      "std::optional<::loom::coll::ReductionKind>", "getReductionKind", (ins), [{}],
      [{ return std::nullopt; }]>,
  ];
  let extraClassDeclaration = [{
    /// Returns the number of ranks if the communicator's size is static.
    std::optional<int64_t> getNumRanks();
    /// Returns the type of the value the collective produces.
    ::mlir::RankedTensorType getResultType();
    /// Returns the `coll.wait` of this collective, or null if the IR is not
    /// yet verified and it has none.
    ::mlir::Operation *getWait();
    /// Returns true for the point-to-point kinds (send and receive).
    bool isPointToPoint();
    /// Returns the bytes of the input this rank contributes, if static (0 for
    /// a receive).
    std::optional<int64_t> getInputBytes();
    /// Returns the bytes of the result buffer on this rank, if static.
    std::optional<int64_t> getResultBytes();
    /// Returns what the busiest rank sends and receives, and the number of
    /// sequential steps, under NCCL's ring algorithms; nullopt when shapes or
    /// the rank count are dynamic.
    std::optional<::loom::coll::CollectiveTraffic> getTraffic();
  }];
  let verify = [{ return ::loom::coll::detail::verifyCollectiveOp($_op); }];
}

#endif // LOOM_DIALECT_COLL_COLLINTERFACES_TD
