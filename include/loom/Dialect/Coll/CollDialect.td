//===- CollDialect.td - coll dialect definition ------------*- tablegen -*-===//
//
// The `coll` dialect: communicators, asynchronous collectives and their waits.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_COLL_COLLDIALECT_TD
#define LOOM_DIALECT_COLL_COLLDIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Coll_Dialect : Dialect {
  let name = "coll";
  let cppNamespace = "::loom::coll";
  let summary = "Asynchronous collectives over communicators, as typed futures";
  let description = [{
    The `coll` dialect expresses the collective communication of data-parallel
    and ZeRO-sharded training at tensor level. A collective is split in two:
    a *start* op issues it on a communicator and returns a typed
    `!coll.future<T>`; `coll.wait` turns the future back into the value `T`.
    Because the only way to get the value is through the wait, "no use before
    the wait" holds by SSA, and compute placed between start and wait is
    exactly the compute that overlaps the communication.

    ```mlir
    %comm = coll.comm_world : !coll.comm<4>
    %f = coll.all_gather_start %shard on %comm gather_axis = 0
        : (tensor<256x64xf32>, !coll.comm<4>) -> !coll.future<tensor<1024x64xf32>>
    %y = linalg.matmul ...                 // overlaps the gather
    %w = coll.wait %f : !coll.future<tensor<1024x64xf32>>
    ```

    Every rank must issue the collectives of a communicator in the same
    order, so start ops, waits and releases carry side effects on a
    communication resource: generic passes (canonicalisation, CSE, DCE)
    never drop, merge or reorder them. Only Loom's scheduling passes move
    them, and they do so the same way on every rank.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  let hasConstantMaterializer = 1;
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
}

/// Base class of every `coll` op.
class Coll_Op<string mnemonic, list<Trait> traits = []>
    : Op<Coll_Dialect, mnemonic, traits>;

/// The communication stream of a communicator. Start ops and waits read and
/// write it, which orders them against each other and keeps them alive.
def Coll_CommResource : Resource<"::loom::coll::CommunicationResource">;

/// The memory that collectives allocate for their results. `coll.release`
/// frees it.
def Coll_BufferResource : Resource<"::loom::coll::CollectiveBufferResource">;

#endif // LOOM_DIALECT_COLL_COLLDIALECT_TD
