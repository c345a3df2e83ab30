//===- loom-fuzz.cpp - parse, verify and run Loom's passes on any input ---===//
//
// A libFuzzer target. An input is a selector, then MLIR text. A first byte
// below 128 picks a pipeline from kPipelines (Loom's passes alone and in the
// orders loomc runs them, and loomc's phases; new ones go at the end, so
// that past crashers keep their meaning); one from 128 on makes a random
// pipeline: 1 to 3 passes from kPasses, named by the next bytes (modulo
// their count: a past crasher of a random pipeline is re-encoded when
// passes are added, --print-pipeline-of says what it runs). A choice
// `[a;b;c]` in a pipeline or a pass is an option value the input draws: it
// takes the next byte (after the selector for a fixed pipeline, after the
// pass's byte in a random one), modulo its count. Every pipeline starts
// with loom-set-target{device=cpu}, the target the cost-model passes read
// (not part of the encoding). The text is parsed
// (unknown dialects allowed: passes must cope with ops they do not know)
// and the pipeline runs with every pass checked as it ends:
//
//   - a pass that succeeds must leave IR its verifiers accept;
//   - a pass that fails must have said why (an error diagnostic).
//
// Either breach aborts with the pass's name (a line `loom-fuzz: ERROR: ...`,
// which libFuzzer's fork mode echoes), which libFuzzer reports as a
// crash, as it does a real crash or a sanitizer's report (the target is
// built with ASan and UBSan). Diagnostics themselves are expected: a
// rejected input is a correct outcome.
//
//   loom-fuzz CORPUS -max_total_time=60      fuzz
//   loom-fuzz crash-input                     replay one input
//   loom-fuzz --print-pipelines               the pipelines, by selector
//   loom-fuzz --print-pipeline-of FILE        what an input runs, and where
//                                             its IR starts
//
//===----------------------------------------------------------------------===//

#include "loom/InitAllDialects.h"
#include "loom/InitAllPasses.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace mlir;

namespace {

// Option values drawn by the input (see the file's header): the first three
// of each choice go together on common inputs (make_seeds.py's seeds draw
// the first, second or third of every choice), the later ones reach the
// passes' checks (out of range, a layout the units may not match; an empty
// alternative leaves the option at its default). train-remat's CBC solves
// get at most a second, and the seeds solve layers alone or runs of two (each
// grouping's candidates are rewritten and counted, slowly under ASan), so
// that one input stays fast.
#define PP_OPTIONS                                                             \
  "stages=[2;2;3;4;1;0] replicas=[1;2;1;3] "                                   \
  "schedule=[1f1b;gpipe;zb-h1;interleaved] "                                   \
  "[;;;layout=Et|tL;layout=t|tL;layout=E|t*2L;"                                \
  "layout=Et*2|L;layout=Et|t|tL;layout=E*0|L] "                                \
  "[;;;forward-only=true]"
#define REMAT_OPTIONS                                                          \
  "solver=[chain;ilp;every-layer;sqrt;knapsack;none;greedy] "                  \
  "budget-mb=[0.3;1;4;16;0.01;0;-1] time-limit-s=[0.2;0.5;1;0] "               \
  "gap=[0.01;0.5] leanest-below-floor=[false;true] "                           \
  "activation-budget=[1;0.3;1;0;-0.5;2] max-segment=[1;2;1;4;0;64]"

/// The pipelines an input's first byte chooses from (modulo their count).
const char *const kPipelines[] = {
    "train-autodiff",
    "train-autodiff{cleanup=false}",
    "train-autodiff,train-optimizer",
    "train-autodiff,train-optimizer{kind=sgd lr-input=true}",
    "train-decompose",
    "convert-train-to-kernels,train-decompose",
    "func.func(train-fuse-linear-cross-entropy{chunk-tokens=4 "
    "chunk-vocab=8 remarks=true})",
    "func.func(train-fuse-attention)",
    "train-autodiff,train-optimizer,zero-partition{stage=1 world-size=4}",
    "train-autodiff,train-optimizer,zero-partition{stage=2 world-size=4}",
    "train-autodiff,train-optimizer,zero-partition{stage=3 world-size=4}",
    "zero-partition{stage=3 world-size=3}",
    "zero-partition{stage=2 world-size=2 reduction=sum}",
    "zero-selective-gather{budget-mb=1}",
    "func.func(coll-bucket{bucket-mb=1 first-bucket-mb=0.01})",
    "func.func(coll-prefetch)",
    "func.func(coll-overlap-schedule)",
    "func.func(coll-reorder-baseline{policy=eager-prefetch})",
    "func.func(coll-reorder-baseline{policy=sink-waits})",
    "coll-report",
    "loom-schedule-pipeline{gather-budget-mb=1}",
    "convert-coll-to-loomrt",
    "canonicalize,cse",
    "func.func(codegen-widen-compute)",
    "func.func(codegen-fold-init-fills)",
    "func.func(codegen-share-index-generics)",
    "func.func(codegen-update-in-place)",
    "func.func(codegen-memory-plan)",
    "func.func(codegen-memory-plan{caller-owned-results=true})",
    "func.func(gpu-fuse-elementwise)",
    "func.func(gpu-split-reduction{rows=2 min-rows=4})",
    "trainer-record-scheduled-peak",
    "trainer-entry-point",
    "loom-training-step-pipeline",
    "loom-training-step-pipeline,loom-sharding-pipeline{zero-stage=3 "
    "world-size=2}",
    "loom-memory-plan-pipeline",
    "loom-memory-plan-pipeline{target=cuda}",
    "loom-memory-plan-pipeline,loom-entry-pipeline",
    "loom-training-step-pipeline,loom-sharding-pipeline{zero-stage=2 "
    "world-size=4},loom-memory-plan-pipeline,loom-entry-pipeline",
    "loom-reference-pipeline",
    "one-shot-bufferize{bufferize-function-boundaries},"
    "convert-train-kernels-to-calls,convert-linalg-to-blas",
    "one-shot-bufferize{bufferize-function-boundaries},"
    "convert-linalg-to-blas{library=cublas},func.func(cpu-vectorize)",
    "one-shot-bufferize{bufferize-function-boundaries},"
    "func.func(codegen-pack-buffers,gpu-map-linalg)",
    "one-shot-bufferize{bufferize-function-boundaries},"
    "func.func(gpu-map-linalg{device-buffers=false vector-bytes=0})",
    "gpu-kernel-outlining,gpu-name-kernels,gpu-merge-modules",
    "loom-memory-plan-pipeline,loom-entry-pipeline,loom-lower-to-cpu-"
    "pipeline",
    // The microbatched and pipelined step, remat and the baseline orders,
    // with option values drawn by the input.
    "train-microbatch{microbatches=[2;1;4;3;8;0;-1]}",
    "train-microbatch{microbatches=[2;4;1;3]},train-autodiff,"
    "train-optimizer{kind=[adamw;sgd] lr-input=[true;false]}",
    "train-microbatch{microbatches=[2;1;4;3]},train-autodiff,train-optimizer,"
    "pp-partition{" PP_OPTIONS "}",
    "train-microbatch{microbatches=[2;1;4]},train-autodiff,train-optimizer,"
    "pp-partition{stages=[2;3;2] replicas=[2;1;3] schedule=[1f1b;gpipe;zb-h1]}"
    ",zero-partition{stage=[1;2;1;3] world-size=[2;1;3;4]}",
    "pp-partition{" PP_OPTIONS "}",
    "train-remat{" REMAT_OPTIONS "}",
    "train-autodiff,zero-partition{stage=[3;2;1] world-size=[2;4;3]},"
    "train-remat{" REMAT_OPTIONS "}",
    "train-autodiff,train-optimizer,zero-partition{stage=[3;1;2] "
    "world-size=[2;4]},trainer-stamp-op-ids,train-remat{" REMAT_OPTIONS "},"
    "func.func(coll-overlap-schedule)",
    "func.func(coll-reorder-baseline{policy=[synchronous;fsdp;original;"
    "sink-waits;eager-prefetch;bogus]})",
    "train-autodiff,train-optimizer,zero-partition{stage=[3;1;2] "
    "world-size=[2;4;3]},func.func(coll-reorder-baseline{policy=[synchronous;"
    "fsdp]})",
    "loom-training-step-pipeline{microbatches=[2;1;4] pipeline-stages=[2;1;3] "
    "pipeline-replicas=[1;2] pipeline-schedule=[1f1b;gpipe;zb-h1]}",
    "loom-training-step-pipeline{microbatches=[2;1]},loom-sharding-pipeline{"
    "zero-stage=[3;1;2] world-size=[2;4] schedule=[synchronous;fsdp;original;"
    "loom] remat-budget-mb=[0;0.3;1;4] remat-solver=[every-layer;sqrt;none;"
    "knapsack]}",
    "loom-training-step-pipeline{microbatches=2 pipeline-stages=2 "
    "pipeline-replicas=2},loom-sharding-pipeline{zero-stage=[1;2] "
    "world-size=2 schedule=[loom;synchronous;fsdp]}",
};
constexpr size_t kNumPipelines = sizeof(kPipelines) / sizeof(kPipelines[0]);

/// The passes random pipelines are made of: every Loom pass, some with
/// other options, and the upstream passes they meet in loomc's phases.
const char *const kPasses[] = {
    "train-autodiff",
    "train-autodiff{cleanup=false}",
    "train-optimizer",
    "train-optimizer{kind=sgd lr-input=true}",
    "train-decompose",
    "convert-train-to-kernels",
    "train-drop-roles",
    "func.func(train-fuse-linear-cross-entropy{chunk-tokens=4})",
    "func.func(train-fuse-attention)",
    "zero-partition{stage=1 world-size=4}",
    "zero-partition{stage=2 world-size=3}",
    "zero-partition{stage=3 world-size=4}",
    "zero-selective-gather{budget-mb=1}",
    "func.func(coll-bucket{bucket-mb=1})",
    "func.func(coll-prefetch)",
    "func.func(coll-overlap-schedule)",
    "func.func(coll-reorder-baseline{policy=eager-prefetch})",
    "coll-report",
    "convert-coll-to-loomrt",
    "func.func(codegen-widen-compute)",
    "func.func(codegen-fold-init-fills)",
    "func.func(codegen-share-index-generics)",
    "func.func(codegen-update-in-place)",
    "func.func(codegen-memory-plan{caller-owned-results=true})",
    "func.func(codegen-pack-buffers)",
    "func.func(gpu-fuse-elementwise)",
    "func.func(gpu-split-reduction{rows=2 min-rows=4})",
    "func.func(gpu-map-linalg{device-buffers=false})",
    "func.func(cpu-vectorize)",
    "convert-linalg-to-blas",
    "convert-train-kernels-to-calls",
    "gpu-name-kernels",
    "gpu-merge-modules",
    "trainer-record-scheduled-peak",
    "trainer-entry-point",
    "canonicalize",
    "eliminate-empty-tensors",
    "codegen-eliminate-empty-tensors",
    "one-shot-bufferize{bufferize-function-boundaries}",
    "codegen-deallocate-at-exit",
    "train-microbatch{microbatches=[2;1;3;4;0]}",
    "pp-partition{" PP_OPTIONS "}",
    "train-remat{" REMAT_OPTIONS "}",
    ("func.func(coll-reorder-baseline{policy=[synchronous;fsdp;original;"
     "sink-waits]})"),
    "trainer-stamp-op-ids",
    "trainer-profile-probes{collective-calls=[true;false]}",
    "trainer-manifest",
    "func.func(train-record-id-bounds)",
};
constexpr size_t kNumPasses = sizeof(kPasses) / sizeof(kPasses[0]);

/// `pattern` with each choice `[a;b;c]` replaced by the alternative the
/// next byte of `data` names (the first once the bytes run out).
std::string drawOptions(StringRef pattern, const uint8_t *data, size_t size,
                        size_t &used) {
  std::string text;
  for (size_t open; (open = pattern.find('[')) != StringRef::npos;) {
    text += pattern.take_front(open);
    size_t close = pattern.find(']', open);
    SmallVector<StringRef> alternatives;
    pattern.slice(open + 1, close).split(alternatives, ';');
    text += alternatives[used < size ? data[used++] % alternatives.size() : 0];
    pattern = pattern.drop_front(std::min(close, pattern.size() - 1) + 1);
  }
  return text + pattern.str();
}

/// Every pipeline starts by setting the target the cost-model passes read
/// (their device is no longer an option of theirs).
constexpr const char *kSetTarget = "loom-set-target{device=cpu},";

/// The pipeline `data` selects; `used` is how many of its bytes that took.
std::string selectPipeline(const uint8_t *data, size_t size, size_t &used) {
  used = 1;
  if (data[0] < 128)
    return kSetTarget +
           drawOptions(kPipelines[data[0] % kNumPipelines], data, size, used);
  size_t count = 1 + data[0] % 3;
  std::string pipeline = kSetTarget;
  for (size_t i = 0; i < count && used < size; ++i) {
    const char *pass = kPasses[data[used++] % kNumPasses];
    pipeline += (pipeline.back() == ',' ? "" : ",") +
                drawOptions(pass, data, size, used);
  }
  return pipeline;
}

/// Checks every pass as it ends: valid IR after success, an error after
/// failure.
struct PassChecker : public PassInstrumentation {
  explicit PassChecker(const unsigned &errors) : errors(errors) {}
  const unsigned &errors;
  unsigned errorsBefore = 0;

  void runBeforePass(Pass *pass, Operation *op) override {
    errorsBefore = errors;
  }
  void runAfterPass(Pass *pass, Operation *op) override {
    if (errors != errorsBefore && !pass->getArgument().empty()) {
      llvm::errs() << "loom-fuzz: ERROR: " << pass->getArgument()
                   << " reported an error but succeeded\n";
      std::abort();
    }
    if (succeeded(verify(op)))
      return;
    llvm::errs() << "loom-fuzz: ERROR: "
                 << (isUpstream(pass) ? "upstream pass " : "")
                 << pass->getArgument()
                 << " succeeded but left IR that does not verify\n";
    std::abort();
  }

  /// Whether `pass` is MLIR's (its vtable lies in libMLIR, while Loom's
  /// passes are linked into this binary). An upstream pass that turns IR
  /// its verifiers accept into IR they reject is a gap in upstream
  /// verifiers, which test/Fuzz/run_fuzz.py files as upstream's.
  static bool isUpstream(Pass *pass) {
    Dl_info info;
    return dladdr(*reinterpret_cast<void **>(pass), &info) && info.dli_fname &&
           StringRef(info.dli_fname).contains("libMLIR");
  }
  void runAfterPassFailed(Pass *pass, Operation *op) override {
    if (errors != errorsBefore || pass->getArgument().empty())
      return;
    llvm::errs() << "loom-fuzz: ERROR: " << pass->getArgument()
                 << " failed without an error diagnostic\n";
    std::abort();
  }
};

/// The registry and passes, made once.
DialectRegistry &getRegistry() {
  static DialectRegistry *registry = [] {
    auto *r = new DialectRegistry();
    registerAllDialects(*r);
    registerAllExtensions(*r);
    loom::registerAllDialects(*r);
    registerAllPasses();
    loom::registerAllPasses();
    return r;
  }();
  return *registry;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  size_t used;
  std::string pipeline = selectPipeline(data, size, used);
  MLIRContext context(getRegistry(), MLIRContext::Threading::DISABLED);
  context.allowUnregisteredDialects();
  context.printOpOnDiagnostic(false);
  unsigned errors = 0;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
    if (diagnostic.getSeverity() == DiagnosticSeverity::Error)
      ++errors;
    return success();
  });
  std::string text(reinterpret_cast<const char *>(data + used), size - used);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  if (!module)
    return 0;
  PassManager pm(&context);
  pm.enableVerifier(false); // PassChecker verifies, and says which pass
  std::string parseErrors;
  llvm::raw_string_ostream os(parseErrors);
  if (failed(parsePassPipeline(pipeline, pm, os))) {
    llvm::errs() << "loom-fuzz: ERROR: bad pipeline '" << pipeline
                 << "': " << parseErrors << "\n";
    std::abort();
  }
  pm.addInstrumentation(std::make_unique<PassChecker>(errors));
  (void)pm.run(*module);
  return 0;
}

/// --print-pipelines lists the fixed pipelines, --print-passes the passes
/// random ones are made of (with their choices), --print-pipeline-of FILE
/// what an input runs and, on a second line, the offset of its IR.
extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) {
  for (int i = 1; i < *argc; ++i) {
    if (!std::strcmp((*argv)[i], "--print-pipelines")) {
      for (size_t p = 0; p < kNumPipelines; ++p)
        std::printf("%zu %s\n", p, kPipelines[p]);
      std::exit(0);
    }
    if (!std::strcmp((*argv)[i], "--print-passes")) {
      for (size_t p = 0; p < kNumPasses; ++p)
        std::printf("%zu %s\n", p, kPasses[p]);
      std::exit(0);
    }
    if (!std::strcmp((*argv)[i], "--print-pipeline-of") && i + 1 < *argc) {
      FILE *file = std::fopen((*argv)[i + 1], "rb");
      uint8_t head[256] = {};
      size_t read = file ? std::fread(head, 1, sizeof(head), file) : 0;
      if (file)
        std::fclose(file);
      size_t used = 0;
      std::printf("%s\n%zu\n",
                  read ? selectPipeline(head, read, used).c_str() : "(none)",
                  used);
      std::exit(0);
    }
  }
  (void)getRegistry();
  return 0;
}
