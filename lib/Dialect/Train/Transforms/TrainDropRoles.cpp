//===- TrainDropRoles.cpp - train-drop-roles ------------------------------===//

#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Dialect/Train/TrainPasses.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace loom::train {
#define GEN_PASS_DEF_TRAINDROPROLESPASS
#include "loom/Dialect/Train/TrainPasses.h.inc"
} // namespace loom::train

using namespace mlir;

namespace {

/// `attrs` without the train dialect's.
SmallVector<NamedAttribute> withoutRoles(ArrayRef<NamedAttribute> attrs) {
  SmallVector<NamedAttribute> kept;
  for (NamedAttribute attr : attrs)
    if (attr.getName().getValue().split('.').first !=
        loom::train::TrainDialect::getDialectNamespace())
      kept.push_back(attr);
  return kept;
}

struct TrainDropRolesPass
    : public loom::train::impl::TrainDropRolesPassBase<TrainDropRolesPass> {
  void runOnOperation() override {
    getOperation().walk([](FunctionOpInterface func) {
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
        func.setArgAttrs(i, withoutRoles(func.getArgAttrs(i)));
      for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
        func.setResultAttrs(i, withoutRoles(func.getResultAttrs(i)));
    });
  }
};

} // namespace
