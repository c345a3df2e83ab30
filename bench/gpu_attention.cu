//===- gpu_attention.cu - the bf16 attention kernels alone, timed ---------===//
//
// Runs loom::flash's bf16 forward and backward (runtime/Kernels/CUDA/
// FlashAttentionBf16.cu) on random inputs of one shape, causal, and prints
// their times and tensor-core throughput (FlashAttention-2's count: the
// forward 4 b h s^2 d multiply-adds halved by the mask, the backward 2.5
// times that). With --dump FILE it writes out, lse, dq, dk and dv; with
// --compare FILE it reads another build's and prints the largest
// difference of each, relative to that tensor's largest value. Driven by
// bench/gpu_attention.
//
//   gpu_attention B S H HK D [--iters N] [--dump FILE | --compare FILE]
//
//===----------------------------------------------------------------------===//

#include "FlashAttention.h"
#include "loom/Runtime/Bf16.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

#define CHECK(call)                                                            \
  do {                                                                         \
    if (cudaError_t error = (call); error != cudaSuccess) {                    \
      std::fprintf(stderr, "gpu_attention: %s: %s\n", #call,                   \
                   cudaGetErrorString(error));                                 \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

struct Buffer {
  void *device = nullptr;
  size_t bytes = 0;
  explicit Buffer(size_t n) : bytes(n) { CHECK(cudaMalloc(&device, n)); }
  ~Buffer() { cudaFree(device); }
  template <typename T> T *as() const { return static_cast<T *>(device); }
};

void upload(const Buffer &buffer, const std::vector<uint16_t> &host) {
  CHECK(cudaMemcpy(buffer.device, host.data(), buffer.bytes,
                   cudaMemcpyHostToDevice));
}

std::vector<float> download(const Buffer &buffer, bool bf16) {
  std::vector<float> values(buffer.bytes / (bf16 ? 2 : 4));
  if (bf16) {
    std::vector<uint16_t> raw(values.size());
    CHECK(cudaMemcpy(raw.data(), buffer.device, buffer.bytes,
                     cudaMemcpyDeviceToHost));
    std::transform(raw.begin(), raw.end(), values.begin(), loom::bf16ToFloat);
  } else {
    CHECK(cudaMemcpy(values.data(), buffer.device, buffer.bytes,
                     cudaMemcpyDeviceToHost));
  }
  return values;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: gpu_attention B S H HK D [--iters N] "
                         "[--dump FILE | --compare FILE]\n");
    return 2;
  }
  const int64_t b = std::atoll(argv[1]), s = std::atoll(argv[2]),
                h = std::atoll(argv[3]), hk = std::atoll(argv[4]),
                d = std::atoll(argv[5]);
  int iters = 20;
  std::string dump, compare;
  for (int i = 6; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iters"))
      iters = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--dump"))
      dump = argv[i + 1];
    else if (!std::strcmp(argv[i], "--compare"))
      compare = argv[i + 1];
    else {
      std::fprintf(stderr, "gpu_attention: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  const size_t qElems = b * s * h * d, kvElems = b * s * hk * d,
               stats = b * h * s;
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  auto randomBf16 = [&](size_t n) {
    std::vector<uint16_t> v(n);
    for (uint16_t &x : v)
      x = loom::floatToBf16(normal(rng));
    return v;
  };
  Buffer q(qElems * 2), k(kvElems * 2), v(kvElems * 2), out(qElems * 2),
      dout(qElems * 2), dq(qElems * 2), dk(kvElems * 2), dv(kvElems * 2),
      lse(stats * 4), delta(stats * 4);
  upload(q, randomBf16(qElems));
  upload(k, randomBf16(kvElems));
  upload(v, randomBf16(kvElems));
  upload(dout, randomBf16(qElems));
  const float scale = 1.f / std::sqrt(float(d));

  auto forward = [&] {
    CHECK(loom::flash::forwardBf16(
        nullptr, q.as<uint16_t>(), k.as<uint16_t>(), v.as<uint16_t>(),
        out.as<uint16_t>(), lse.as<float>(), b, s, h, hk, d, true, scale));
  };
  auto backward = [&] {
    CHECK(loom::flash::backwardBf16(
        nullptr, q.as<uint16_t>(), k.as<uint16_t>(), v.as<uint16_t>(),
        out.as<uint16_t>(), lse.as<float>(), dout.as<uint16_t>(),
        dq.as<uint16_t>(), dk.as<uint16_t>(), dv.as<uint16_t>(),
        delta.as<float>(), b, s, h, hk, d, true, scale));
  };
  auto timeMs = [&](auto &&run) {
    run(); // warm-up
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    CHECK(cudaEventRecord(start));
    for (int i = 0; i < iters; ++i)
      run();
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms / iters;
  };
  const double forwardMs = timeMs(forward);
  const double backwardMs = timeMs(backward);
  CHECK(cudaDeviceSynchronize());
  const double forwardFlop = 4.0 * b * h * s * s * d / 2;
  std::printf("B=%ld S=%ld H=%ld HK=%ld D=%ld causal: forward %.3f ms "
              "(%.0f TFLOP/s), backward %.3f ms (%.0f TFLOP/s)\n",
              long(b), long(s), long(h), long(hk), long(d), forwardMs,
              forwardFlop / forwardMs / 1e9, backwardMs,
              2.5 * forwardFlop / backwardMs / 1e9);

  const Buffer *results[] = {&out, &lse, &dq, &dk, &dv};
  const char *names[] = {"out", "lse", "dq", "dk", "dv"};
  if (!dump.empty()) {
    FILE *file = std::fopen(dump.c_str(), "wb");
    if (!file) {
      std::fprintf(stderr, "gpu_attention: cannot write %s\n", dump.c_str());
      return 1;
    }
    for (int i = 0; i < 5; ++i) {
      std::vector<float> values = download(*results[i], i != 1);
      std::fwrite(values.data(), 4, values.size(), file);
    }
    std::fclose(file);
  }
  if (!compare.empty()) {
    FILE *file = std::fopen(compare.c_str(), "rb");
    if (!file) {
      std::fprintf(stderr, "gpu_attention: cannot read %s\n", compare.c_str());
      return 1;
    }
    for (int i = 0; i < 5; ++i) {
      std::vector<float> values = download(*results[i], i != 1);
      std::vector<float> other(values.size());
      if (std::fread(other.data(), 4, other.size(), file) != other.size()) {
        std::fprintf(stderr, "gpu_attention: %s is short\n", compare.c_str());
        return 1;
      }
      double largest = 0, difference = 0;
      for (size_t j = 0; j < values.size(); ++j) {
        largest = std::max(largest, double(std::fabs(other[j])));
        difference =
            std::max(difference, double(std::fabs(values[j] - other[j])));
      }
      std::printf("  %s: largest difference %.2e of %.2e (%.1e relative)\n",
                  names[i], difference, largest,
                  difference / std::max(largest, 1e-30));
    }
    std::fclose(file);
  }
  return 0;
}
