//===- CpuFeatures.h - CPU features a trainer checks at start ---*- C++ -*-===//
//
// A trainer's step is compiled for one CPU name and feature set (loomc
// --cpu, --cpu-features; by default the host's real features). Run on a CPU
// without one of them, it would die by SIGILL at its first vector
// instruction. So loomc stores the features below that the step was compiled
// with in the string `loom_cpu_features` (Symbols.h; "avx2,fma,..."), and the trainer
// checks each with `__builtin_cpu_supports` before it runs any compiled code.
//
// Each entry is a name that LLVM's x86 target takes as a feature (-mattr)
// and that clang's `__builtin_cpu_supports` takes as well: the list is
// where the two sides agree, and only these can be checked at run time.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CPUFEATURES_H
#define LOOM_RUNTIME_CPUFEATURES_H

/// Calls X("name") for every x86 feature a trainer can check.
#define LOOM_X86_CPU_FEATURES(X)                                               \
  X("sse3") X("ssse3") X("sse4.1") X("sse4.2") X("sse4a") X("popcnt")        \
  X("avx") X("avx2") X("fma") X("fma4") X("xop") X("f16c") X("bmi")          \
  X("bmi2") X("movbe") X("lzcnt") X("adx") X("aes") X("pclmul") X("sha")     \
  X("vaes") X("vpclmulqdq") X("gfni") X("avxvnni") X("avxifma")              \
  X("avxvnniint8") X("avxneconvert") X("avx512f") X("avx512vl")              \
  X("avx512bw") X("avx512dq") X("avx512cd") X("avx512vnni")                  \
  X("avx512bf16") X("avx512fp16") X("avx512vbmi") X("avx512vbmi2")           \
  X("avx512ifma") X("avx512bitalg") X("avx512vpopcntdq") X("amx-tile")       \
  X("amx-bf16") X("amx-int8")

#endif // LOOM_RUNTIME_CPUFEATURES_H
