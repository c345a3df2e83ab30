//===- CollTypes.td - coll types ---------------------------*- tablegen -*-===//

#ifndef LOOM_DIALECT_COLL_COLLTYPES_TD
#define LOOM_DIALECT_COLL_COLLTYPES_TD

include "loom/Dialect/Coll/CollDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinTypeInterfaces.td"

class Coll_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Coll_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Coll_CommType : Coll_Type<"Comm", "comm"> {
  let summary = "a group of ranks that take part in collectives together";
  let description = [{
    A communicator. Its parameter is the number of ranks when the IR knows it
    (`!coll.comm<8>`), or `?` when it is only known at run time
    (`!coll.comm<?>`). Shape checks on collectives use the static size; the
    runtime checks a dynamic one when the communicator is created.
  }];
  let parameters = (ins "int64_t":$size);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Returns true if the number of ranks is known in the IR.
    bool hasStaticSize() const { return !::mlir::ShapedType::isDynamic(getSize()); }
    /// Returns the number of ranks if it is known in the IR.
    std::optional<int64_t> getStaticSize() const {
      if (hasStaticSize())
        return getSize();
      return std::nullopt;
    }
  }];
}

def Coll_FutureType : Coll_Type<"Future", "future"> {
  let summary = "the value of a collective that is still in flight";
  let description = [{
    `!coll.future<T>` is returned by every collective start op; `coll.wait`
    turns it into the `T` the collective produces. A future is used exactly
    once, by a `coll.wait` in the block of its start: it cannot be copied,
    stored, returned or passed into another region, so every start has one
    wait that a scheduler can move.

    ```mlir
    !coll.future<tensor<4096x1024xbf16>>
    ```
  }];
  let parameters = (ins "::mlir::RankedTensorType":$valueType);
  let assemblyFormat = "`<` $valueType `>`";
  let builders = [
    TypeBuilderWithInferredContext<(ins "::mlir::RankedTensorType":$valueType), [{
      return $_get(valueType.getContext(), valueType);
    }]>
  ];
}

def Coll_Comm : Type<CPred<"::llvm::isa<::loom::coll::CommType>($_self)">,
                     "communicator type", "::loom::coll::CommType">;
def Coll_Future : Type<CPred<"::llvm::isa<::loom::coll::FutureType>($_self)">,
                       "future type", "::loom::coll::FutureType">;

#endif // LOOM_DIALECT_COLL_COLLTYPES_TD
