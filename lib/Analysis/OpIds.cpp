//===- OpIds.cpp - stable op ids, carried in locations --------------------===//

#include "loom/Analysis/OpIds.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

/// The id a name location carries, or nullopt for any other location.
static std::optional<int64_t> parseOpId(Location loc) {
  auto name = dyn_cast<NameLoc>(loc);
  if (!name)
    return std::nullopt;
  StringRef text = name.getName().getValue();
  int64_t id;
  if (!text.consume_front(loom::kOpIdPrefix) || text.getAsInteger(10, id) ||
      id < 0)
    return std::nullopt;
  return id;
}

Location loom::withOpId(Location loc, int64_t id) {
  if (parseOpId(loc))
    loc = cast<NameLoc>(loc).getChildLoc();
  MLIRContext *context = loc->getContext();
  return NameLoc::get(StringAttr::get(context, kOpIdPrefix + llvm::Twine(id)),
                      loc);
}

SmallVector<int64_t> loom::getOpIds(Location loc) {
  SmallVector<int64_t> ids;
  loc->walk([&](Location inner) {
    if (std::optional<int64_t> id = parseOpId(inner))
      if (!llvm::is_contained(ids, *id))
        ids.push_back(*id);
    return WalkResult::advance();
  });
  return ids;
}

std::optional<int64_t> loom::getOpId(Operation *op) {
  SmallVector<int64_t> ids = getOpIds(op->getLoc());
  if (ids.size() != 1)
    return std::nullopt;
  return ids.front();
}

Location loom::withAction(Location loc, StringRef action) {
  MLIRContext *context = loc->getContext();
  return NameLoc::get(StringAttr::get(context, kActionPrefix + action), loc);
}

StringRef loom::getAction(Location loc) {
  StringRef action;
  loc->walk([&](Location inner) {
    auto name = dyn_cast<NameLoc>(inner);
    if (name && name.getName().getValue().starts_with(kActionPrefix)) {
      action = name.getName().getValue().drop_front(kActionPrefix.size());
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return action;
}
