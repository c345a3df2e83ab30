//===- BackendCApi.cpp - the C ABI entry points every backend shares ------===//
//
// Linked into each backend library; the backend itself comes from
// backend().
//
//===----------------------------------------------------------------------===//

#include "Backends/Backend.h"
#include "Backends/RuntimeSupport.h"
#include "loom/Runtime/CommGroups.h"
#include "loom/Runtime/HeapScope.h"
#include "loom/Runtime/Symbols.h"
#include "loom/Runtime/loomrt.h"

#include <cstdio>
#include <string>
#include <string_view>

using loom::runtime::backend;
using loom::runtime::recorder;


// Each name the compiler calls is a function loomrt.h declares.
#define LOOMRT_CHECK_SYMBOL(constant, function)                                \
  static_assert(std::string_view(loom::runtime::symbols::constant) ==          \
                    #function,                                                 \
                "Symbols.h's " #constant " is not " #function);                \
  static_assert(sizeof(&function) != 0, #function " is not declared");
LOOMRT_CHECK_SYMBOL(kCollStart, loomrt_coll_start)
LOOMRT_CHECK_SYMBOL(kCollWait, loomrt_coll_wait)
LOOMRT_CHECK_SYMBOL(kCommGroup, loomrt_comm_group)
LOOMRT_CHECK_SYMBOL(kRank, loomrt_rank)
LOOMRT_CHECK_SYMBOL(kOpBegin, loomrt_op_begin)
LOOMRT_CHECK_SYMBOL(kOpEnd, loomrt_op_end)
LOOMRT_CHECK_SYMBOL(kOpFused, loomrt_op_fused)
LOOMRT_CHECK_SYMBOL(kAttentionF32, loomrt_attention_f32)
LOOMRT_CHECK_SYMBOL(kAttentionGradF32, loomrt_attention_grad_f32)
LOOMRT_CHECK_SYMBOL(kAttentionBf16, loomrt_attention_bf16)
LOOMRT_CHECK_SYMBOL(kAttentionGradBf16, loomrt_attention_grad_bf16)
LOOMRT_CHECK_SYMBOL(kCrossEntropyF32, loomrt_cross_entropy_f32)
LOOMRT_CHECK_SYMBOL(kCrossEntropyGradF32, loomrt_cross_entropy_grad_f32)
LOOMRT_CHECK_SYMBOL(kCrossEntropyGradBf16, loomrt_cross_entropy_grad_bf16)
LOOMRT_CHECK_SYMBOL(kEmbeddingGradF32, loomrt_embedding_grad_f32)
LOOMRT_CHECK_SYMBOL(kEmbeddingGradBf16, loomrt_embedding_grad_bf16)
#undef LOOMRT_CHECK_SYMBOL
// The GEMMs are called by prefix and type (loomrt_cblas_sgemm_batched,
// loomrt_cublas_sgemm, ...).
static_assert(sizeof(&loomrt_cblas_sgemm_batched) != 0 &&
                  sizeof(&loomrt_cublas_sgemm) != 0,
              "loomrt.h declares no runtime GEMMs");
static_assert(std::string_view(loom::runtime::symbols::kLoomCblasPrefix) ==
                  std::string_view("loomrt_cblas_sgemm_batched", 13),
              "Symbols.h's kLoomCblasPrefix does not name loomrt_cblas_*");
static_assert(std::string_view(loom::runtime::symbols::kCublasPrefix) ==
                  std::string_view("loomrt_cublas_sgemm", 14),
              "Symbols.h's kCublasPrefix does not name loomrt_cublas_*");

const char *loom::runtime::collectiveKindName(int64_t kind) {
  switch (kind) {
  case LOOMRT_ALL_GATHER:
    return "all_gather";
  case LOOMRT_REDUCE_SCATTER:
    return "reduce_scatter";
  case LOOMRT_ALL_REDUCE:
    return "all_reduce";
  case LOOMRT_BROADCAST:
    return "broadcast";
  case LOOMRT_SEND:
    return "send";
  case LOOMRT_RECV:
    return "recv";
  }
  return "collective";
}

int64_t loom::runtime::CollRequest::getBytes() const {
  int64_t element = dtype == LOOMRT_F64 ? 8 : dtype == LOOMRT_BF16 ? 2 : 4;
  return (inCount > outCount ? inCount : outCount) * element;
}

const loom::runtime::Backend::Comm &
loom::runtime::Backend::comm(int64_t handle) {
  if (comms.empty()) {
    Comm world{size, rank, {}};
    for (int r = 0; r < size; ++r)
      world.worldRanks.push_back(r);
    comms.push_back(std::move(world));
  }
  if (handle < 0 || handle >= int64_t(comms.size()))
    abort("unknown communicator handle " + std::to_string(handle));
  return comms[handle];
}

int64_t loom::runtime::Backend::group(int64_t parent, int64_t size,
                                      int64_t stride) {
  const Comm &of = comm(parent);
  if (size < 1 || stride < 1 || of.size % (size * stride) != 0)
    abort("loomrt_comm_group: a communicator of " + std::to_string(of.size) +
          " ranks has no groups of " + std::to_string(size) + " ranks " +
          std::to_string(stride) + " apart");
  auto [it, inserted] =
      groups.try_emplace({parent, size, stride}, int64_t(comms.size()));
  if (!inserted)
    return it->second;
  StridedGroup group = StridedGroup::of(of.rank, size, stride);
  Comm made{size, StridedGroup::rankOf(of.rank, size, stride), {}};
  for (int64_t i = 0; i < size; ++i)
    made.worldRanks.push_back(of.worldRanks[group.member(i)]);
  comms.push_back(std::move(made));
  makeGroup(it->second);
  return it->second;
}

void loom::runtime::Backend::makeGroup(int64_t) {
  abort(std::string("communicator groups (coll.comm_group) are not built on "
                    "the ") +
        target() + " backend");
}

void loom::runtime::Backend::opBegin(int64_t opId) {
  openOp = opId;
  waitedBeforeUs = recorder().waitedUs();
  openSinceUs = nowUs();
}

void loom::runtime::Backend::opEnd(int64_t opId) {
  if (openOp != opId)
    abort("loomrt_op_end(" + std::to_string(opId) +
          ") does not close the open op " + std::to_string(openOp));
  double end = nowUs();
  recorder().opTime(opId, end - openSinceUs -
                              (recorder().waitedUs() - waitedBeforeUs));
  openOp = -1;
}

extern "C" {

int loomrt_init(int *argc, char ***argv) { return backend().init(argc, argv); }
int loomrt_finalize(void) { return backend().finalize(); }
int64_t loomrt_rank(void) { return backend().rank; }
int64_t loomrt_world_size(void) { return backend().size; }
void loomrt_abort(const char *message) { backend().abort(message); }
double loomrt_now_us(void) { return backend().nowUs(); }

int64_t loomrt_comm_group(int64_t parent, int64_t size, int64_t stride) {
  return backend().group(parent, size, stride);
}

int64_t loomrt_coll_start(int64_t kind, int64_t reduction, int64_t dtype,
                          int64_t comm, int64_t arg, int64_t in,
                          int64_t inCount, int64_t out, int64_t outCount,
                          int64_t opId) {
  if (kind < 0 || kind > LOOMRT_RECV || dtype < 0 || dtype > LOOMRT_BF16)
    backend().abort("loomrt_coll_start: bad kind or dtype");
  const loom::runtime::Backend::Comm &c = backend().comm(comm);
  if ((kind == LOOMRT_SEND || kind == LOOMRT_RECV) &&
      (arg < 0 || arg >= c.size || arg == c.rank))
    backend().abort("loomrt_coll_start: " +
                    std::string(loom::runtime::collectiveKindName(kind)) +
                    " with peer " + std::to_string(arg) + " on rank " +
                    std::to_string(c.rank) + " of " + std::to_string(c.size) +
                    (comm ? " (a group)" : ""));
  if (kind == LOOMRT_BROADCAST && (arg < 0 || arg >= c.size))
    backend().abort("loomrt_coll_start: broadcast from root " +
                    std::to_string(arg) + " of " + std::to_string(c.size));
  // What the backend allocates for a collective's bookkeeping (its table
  // entry, its queued call) is a named line of the trainer's heap, not the
  // step's.
  loom::runtime::HeapScope scope(LOOMRT_HEAP_RUNTIME);
  return backend().start(
      {kind, reduction, dtype, comm, arg, in, inCount, out, outCount, opId});
}

void loomrt_coll_wait(int64_t handle, int64_t in, int64_t out) {
  loom::runtime::HeapScope scope(LOOMRT_HEAP_RUNTIME);
  backend().wait(handle, in, out);
}

void loomrt_op_begin(int64_t opId) {
  if (recorder().isProfiling())
    backend().opBegin(opId);
}

void loomrt_op_end(int64_t opId) {
  if (recorder().isProfiling())
    backend().opEnd(opId);
}

void loomrt_op_fused(int64_t member, int64_t opId) {
  if (recorder().isProfiling())
    recorder().opFused(member, opId);
}

void loomrt_profile_start(void) { recorder().profileStart(); }

void loomrt_profile_step(double stepUs) { recorder().profileStep(stepUs); }

int loomrt_profile_write(const char *path) {
  std::string error = recorder().writeProfile(
      path, backend().rank, backend().size, backend().target());
  if (error.empty())
    return 0;
  if (backend().rank == 0)
    std::fprintf(stderr, "loomrt: error: --profile %s: %s\n", path,
                 error.c_str());
  return 1;
}

} // extern "C"
