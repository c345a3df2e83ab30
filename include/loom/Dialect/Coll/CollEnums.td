//===- CollEnums.td - coll enums and attributes ------------*- tablegen -*-===//

#ifndef LOOM_DIALECT_COLL_COLLENUMS_TD
#define LOOM_DIALECT_COLL_COLLENUMS_TD

include "loom/Dialect/Coll/CollDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Coll_ReductionKind : I32EnumAttr<"ReductionKind",
    "how a reducing collective combines the ranks' contributions", [
      I32EnumAttrCase<"Sum", 0, "sum">,
      I32EnumAttrCase<"Avg", 1, "avg">,
      I32EnumAttrCase<"Max", 2, "max">,
      I32EnumAttrCase<"Min", 3, "min">,
    ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::loom::coll";
}

def Coll_ReductionKindAttr : EnumAttr<Coll_Dialect, Coll_ReductionKind,
                                      "reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

def Coll_CollectiveKind : I32EnumAttr<"CollectiveKind",
    "the communication pattern of a collective", [
      I32EnumAttrCase<"AllGather", 0, "all_gather">,
      I32EnumAttrCase<"ReduceScatter", 1, "reduce_scatter">,
      I32EnumAttrCase<"AllReduce", 2, "all_reduce">,
      I32EnumAttrCase<"Broadcast", 3, "broadcast">,
      I32EnumAttrCase<"Send", 4, "send">,
      I32EnumAttrCase<"Recv", 5, "recv">,
    ]> {
  let cppNamespace = "::loom::coll";
}

#endif // LOOM_DIALECT_COLL_COLLENUMS_TD
