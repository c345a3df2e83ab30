//===- cuda_runtime.h - CUDA emulated on the CPU for the runtime kernels --===//
//
// The parts of CUDA that runtime/Kernels/CUDA's kernels (FlashAttention*.cu,
// CrossEntropy.cu, EmbeddingGrad.cu) use, on the CPU, so that
// cuda_emulated.py can run those kernels without a GPU: every block runs its
// threads as fibers (ucontext) on the launching thread, each running until
// it reaches a barrier; __syncthreads and the warp-wide operations are
// barriers that hand over to the block's next fiber. Warp shuffles, ballots,
// ldmatrix and mma.sync exchange registers through a per-warp buffer, and
// cp.async copies are held back until the wait that covers them, so that a
// read before that wait sees the old contents. Shared memory starts as NaNs,
// so a read of a word no thread wrote shows; and as each thread runs alone
// up to its next barrier, a read of shared memory that another thread writes
// without a barrier between them sees the NaNs every time, not by chance.
// A block whose threads wait at barriers none can pass (a barrier in
// divergent code) is reported, not hung. The kernels reach the emulated PTX
// through `#elif defined(LOOM_CUDA_EMULATION)`. Launches check the shared
// memory a kernel asks for against the opt-in attribute and the device's
// 227 KiB.
//
// Fibers instead of std::threads: a thread a fiber costs no system call to
// start, and a barrier no wake-ups, so the emulated kernels run in seconds
// on a loaded 2-core machine where a thread per CUDA thread took minutes.
//
//===----------------------------------------------------------------------===//

#pragma once
#include <math.h>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ucontext.h>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct float4 { float x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
struct uint4 { unsigned x, y, z, w; };
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline unsigned __float_as_uint(float x) { unsigned u; memcpy(&u, &x, 4); return u; }
inline float __uint_as_float(unsigned u) { float x; memcpy(&x, &u, 4); return x; }
struct uint3 { unsigned x, y, z; };
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
inline thread_local uint3 threadIdx, blockIdx;
inline thread_local dim3 blockDim, gridDim;
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
typedef struct CUstream_st *cudaStream_t;
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };

namespace emu {
inline int maxSmem = 48 * 1024;

/// The block's threads, as fibers the launch runs in turn.
struct Fiber;
inline Fiber *current;
inline ucontext_t scheduler;
/// Barriers passed and fibers finished: the launch's progress.
inline unsigned long events;
/// Hands over to the next fiber of the block.
inline void yield();

/// A barrier of `count` fibers: the last to arrive releases the others.
struct Barrier {
  explicit Barrier(unsigned count) : count(count) {}
  void arrive_and_wait() {
    ++events;
    if (++arrived == count) {
      arrived = 0;
      ++generation;
      return;
    }
    for (unsigned long waited = generation; waited == generation;)
      yield();
  }
  unsigned count, arrived = 0;
  unsigned long generation = 0;
};

inline thread_local Barrier *blockBarrier;
inline thread_local Barrier *warpBarrier;
inline thread_local float *warpBuf;
/// One warp's mma.sync operands, a lane's registers a row.
struct MmaOperands { uint32_t a[32][4], b[32][2]; };
inline thread_local MmaOperands *warpMma;
/// One warp's ldmatrix row addresses.
inline thread_local const uint16_t **warpRows;
/// This thread's cp.async copies: committed groups, then the open one.
struct AsyncCopy {
  void *dst;
  const void *src;
  int bytes, valid;
};
inline thread_local std::vector<std::vector<AsyncCopy>> *asyncGroups;
inline thread_local void *shared;
inline long launches = 0;
} // namespace emu

template <class T> cudaError_t cudaFuncSetAttribute(T *, cudaFuncAttribute, int v) {
  emu::maxSmem = v;
  return cudaSuccess;
}
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline float4 __ldg(const float4 *p) {
  assert(reinterpret_cast<uintptr_t>(p) % 16 == 0);
  return *p;
}
inline void __syncthreads() { emu::blockBarrier->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned mask, float v, int lane) {
  assert(mask == 0xffffffffu);
  int me = threadIdx.x % 32;
  emu::warpBuf[me] = v;
  emu::warpBarrier->arrive_and_wait();
  float r = emu::warpBuf[me ^ lane];
  emu::warpBarrier->arrive_and_wait();
  return r;
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  assert(mask == 0xffffffffu);
  int me = threadIdx.x % 32;
  emu::warpBuf[me] = predicate ? 1.f : 0.f;
  emu::warpBarrier->arrive_and_wait();
  unsigned ballot = 0;
  for (int lane = 0; lane < 32; ++lane)
    if (emu::warpBuf[lane] != 0.f) ballot |= 1u << lane;
  emu::warpBarrier->arrive_and_wait();
  return ballot;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t) {
  memset(p, value, bytes);
  return cudaSuccess;
}

namespace emu {
/// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, d += a b, with the
/// fragment layouts of PTX's "Matrix Fragments for mma.m16n8k16": lane l,
/// g = l / 4, t = l % 4; A register r holds row g + 8 (r % 2), columns
/// 2t + 8 (r / 2) and the next; B register r rows 2t + 8 r and the next of
/// column g; D element r is row g + 8 (r / 2), column 2t + r % 2.
inline void mmaBf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const int me = threadIdx.x % 32;
  for (int r = 0; r < 4; ++r) warpMma->a[me][r] = a[r];
  warpMma->b[me][0] = b0;
  warpMma->b[me][1] = b1;
  warpBarrier->arrive_and_wait();
  auto half = [](uint32_t word, int k) { return __uint_as_float((word >> (16 * (k % 2))) << 16); };
  auto aAt = [&](int row, int k) {
    return half(warpMma->a[(row % 8) * 4 + (k % 8) / 2][row / 8 + 2 * (k / 8)], k);
  };
  auto bAt = [&](int k, int col) { return half(warpMma->b[col * 4 + (k % 8) / 2][k / 8], k); };
  for (int r = 0; r < 4; ++r) {
    const int row = me / 4 + 8 * (r / 2), col = 2 * (me % 4) + r % 2;
    float sum = d[r];
    for (int k = 0; k < 16; ++k) sum += aAt(row, k) * bAt(k, col);
    d[r] = sum;
  }
  warpBarrier->arrive_and_wait();
}

/// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lane l gives the
/// address of row l % 8 of matrix l / 8; register m of lane l receives
/// matrix m's elements (l / 4, 2 (l % 4)) and the next column, or with
/// .trans (2 (l % 4), l / 4) and the next row.
inline void ldmatrix4(uint32_t (&r)[4], const uint16_t *row, bool trans) {
  const int me = threadIdx.x % 32;
  assert(reinterpret_cast<uintptr_t>(row) % 16 == 0);
  warpRows[me] = row;
  warpBarrier->arrive_and_wait();
  const int g = me / 4, t = me % 4;
  for (int m = 0; m < 4; ++m) {
    const uint16_t *const *rows = warpRows + 8 * m;
    const uint16_t lo = trans ? rows[2 * t][g] : rows[g][2 * t];
    const uint16_t hi = trans ? rows[2 * t + 1][g] : rows[g][2 * t + 1];
    r[m] = lo | uint32_t(hi) << 16;
  }
  warpBarrier->arrive_and_wait();
}

/// cp.async of `bytes` (4, 8 or 16) from `src` to `dst`, zeros instead
/// unless `valid`: done at the cp.async.wait_group that covers it.
inline void copyAsync(void *dst, const void *src, int bytes, bool valid) {
  assert(reinterpret_cast<uintptr_t>(dst) % bytes == 0 &&
         reinterpret_cast<uintptr_t>(src) % bytes == 0);
  asyncGroups->back().push_back({dst, src, bytes, valid});
}
/// cp.async.commit_group: closes the open group (an empty one too).
inline void commitCopies() { asyncGroups->emplace_back(); }
/// cp.async.wait_group n: completes every committed group but the newest n.
inline void waitCopies(int n) {
  const int committed = static_cast<int>(asyncGroups->size()) - 1;
  int done = 0;
  for (; done < committed - n; ++done)
    for (const AsyncCopy &c : (*asyncGroups)[done]) {
      if (c.valid)
        memcpy(c.dst, c.src, c.bytes);
      else
        memset(c.dst, 0, c.bytes);
    }
  asyncGroups->erase(asyncGroups->begin(), asyncGroups->begin() + done);
}
} // namespace emu

namespace emu {
/// One CUDA thread: its context and stack, and what the thread-local names
/// above hold while it runs.
struct Fiber {
  static constexpr size_t kStackBytes = 256 * 1024;
  ucontext_t context;
  std::unique_ptr<char[]> stack{new char[kStackBytes]};
  bool done = false;
  uint3 thread;
  Barrier *warp;
  float *warpBuf;
  MmaOperands *mma;
  const uint16_t **rows;
  std::vector<std::vector<AsyncCopy>> groups;
  void (*body)(void *);
  void *kernel;
};

inline void yield() { swapcontext(&current->context, &scheduler); }

inline void runFiber() {
  Fiber *fiber = current;
  fiber->body(fiber->kernel);
  // A kernel waits for every copy it issued before it exits.
  for (const auto &group : fiber->groups)
    assert(group.empty());
  fiber->done = true;
  ++events;
} // returns to `scheduler` (uc_link)

/// Fibers are kept from launch to launch: their stacks are allocated once.
inline std::vector<std::unique_ptr<Fiber>> &fiberPool() {
  static std::vector<std::unique_ptr<Fiber>> pool;
  return pool;
}
} // namespace emu

template <class F>
void emuLaunch(dim3 grid, dim3 block, size_t smem, cudaStream_t, F f) {
  ++emu::launches;
  if (smem > 48 * 1024 && (int)smem > emu::maxSmem) {
    fprintf(stderr, "smem %zu over the attribute %d\n", smem, emu::maxSmem);
    abort();
  }
  if (smem > 232448) { fprintf(stderr, "smem %zu too big\n", smem); abort(); }
  if (grid.y > 65535 || grid.x == 0 || grid.y == 0) { fprintf(stderr, "bad grid\n"); abort(); }
  unsigned nt = block.x;
  auto &pool = emu::fiberPool();
  while (pool.size() < nt) pool.emplace_back(new emu::Fiber);
  blockDim = block;
  gridDim = grid;
  for (unsigned by = 0; by < grid.y; ++by)
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      float *sh = nullptr;
      if (smem) {
        sh = static_cast<float *>(aligned_alloc(16, smem));
        memset(sh, 0xff, smem); // NaN as f32 and as bf16
      }
      emu::Barrier bb(nt);
      unsigned nw = (nt + 31) / 32;
      std::vector<std::unique_ptr<emu::Barrier>> wb;
      for (unsigned w = 0; w < nw; ++w) wb.emplace_back(new emu::Barrier(32));
      std::vector<float> wbuf(nw * 32);
      std::vector<emu::MmaOperands> mmaBuf(nw);
      std::vector<const uint16_t *> rowBuf(nw * 32);
      blockIdx = {bx, by, 0};
      emu::blockBarrier = &bb;
      emu::shared = sh;
      for (unsigned t = 0; t < nt; ++t) {
        emu::Fiber &fiber = *pool[t];
        fiber.done = false;
        fiber.thread = {t, 0, 0};
        fiber.warp = wb[t / 32].get();
        fiber.warpBuf = wbuf.data() + (t / 32) * 32;
        fiber.mma = &mmaBuf[t / 32];
        fiber.rows = rowBuf.data() + (t / 32) * 32;
        fiber.groups.assign(1, {});
        fiber.body = [](void *kernel) { (*static_cast<F *>(kernel))(); };
        fiber.kernel = &f;
        getcontext(&fiber.context);
        fiber.context.uc_stack.ss_sp = fiber.stack.get();
        fiber.context.uc_stack.ss_size = emu::Fiber::kStackBytes;
        fiber.context.uc_link = &emu::scheduler;
        makecontext(&fiber.context, emu::runFiber, 0);
      }
      // Round robin until every thread is done; a round in which none
      // passed a barrier or finished is a deadlock.
      for (unsigned live = nt; live;) {
        unsigned long before = emu::events;
        live = 0;
        for (unsigned t = 0; t < nt; ++t) {
          emu::Fiber &fiber = *pool[t];
          if (fiber.done) continue;
          emu::current = &fiber;
          threadIdx = fiber.thread;
          emu::warpBarrier = fiber.warp;
          emu::warpBuf = fiber.warpBuf;
          emu::warpMma = fiber.mma;
          emu::warpRows = fiber.rows;
          emu::asyncGroups = &fiber.groups;
          swapcontext(&emu::scheduler, &fiber.context);
          live += !fiber.done;
        }
        if (live && emu::events == before) {
          fprintf(stderr, "block (%u, %u): %u threads wait at barriers none "
                  "can pass\n", bx, by, live);
          abort();
        }
      }
      free(sh);
    }
}
