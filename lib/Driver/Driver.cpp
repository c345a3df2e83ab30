//===- Driver.cpp - the phases from a forward to lowered modules ----------===//
//
// The phases are the registered pipelines of lib/Pipelines, run in turn on
// one module; -v prints each as loom-opt's --pass-pipeline takes it, so
// that loom-opt reproduces every emit point of a build without stages:
//
//   training-step   loom-training-step-pipeline      (--emit=training-step)
//   sharding        loom-sharding-pipeline           (--emit=step)
//   memory-plan     loom-memory-plan-pipeline        (--emit=memory-plan)
//   entry           loom-entry-pipeline              (--emit=mlir)
//   lowering        loom-lower-to-cpu-pipeline or
//                   loom-lower-to-cuda-pipeline      (--emit=llvm-mlir, ptx)
//
// A pipeline's stages are compiled one by one after the training step, each
// as a module of its own (one step, one memory plan).
//
//===----------------------------------------------------------------------===//

#include "loom/Driver/Driver.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "loom/InitAllDialects.h"
#include "loom/InitAllPasses.h"
#include "loom/PipelineParallel/Passes.h"
#include "loom/Trainer/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/Support/FormatVariadic.h"
#include <cmath>

using namespace mlir;
using namespace llvm;
using namespace loom;
using namespace loom::driver;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

/// `bytes` in MiB rounded up to the 0.001 an error prints: a bound a user
/// copies from the message is then one that holds it.
double mibUp(int64_t bytes) {
  return std::ceil(double(bytes) / kMiB * 1000.0) / 1000.0;
}

/// Runs the passes `build` adds on `module` as the phase `phase`; on
/// failure says which phase failed.
LogicalResult runPasses(ModuleOp module, StringRef phase, bool verifyEach,
                        Reporter &reporter,
                        llvm::function_ref<void(OpPassManager &)> build) {
  PassManager pm(module.getContext());
  // Every phase's result is verified, and with --verify-each every pass's:
  // a pass that leaves invalid IR is an error, never a miscompile further
  // on. Verifying after every pass costs a fifth of the phases' time on a
  // pipeline's unrolled stages; it names the pass (as opt's -verify-each).
  pm.enableVerifier(verifyEach);
  // --mlir-timing, --mlir-print-ir-after-all... as the client's command
  // line set them (registered here too, at their defaults, for a client
  // without one: applying unregistered options fails).
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  if (failed(applyPassManagerCLOptions(pm))) {
    reporter.error("the " + phase +
                   " phase: the pass manager's options do "
                   "not apply");
    return failure();
  }
  applyDefaultTimingPassManagerCLOptions(pm);
  build(pm);
  if (failed(pm.run(module))) {
    reporter.error("the " + phase + " phase failed (see above)");
    return failure();
  }
  if (!verifyEach && failed(mlir::verify(module))) {
    reporter.error("the " + phase +
                   " phase left invalid IR (see above; --verify-each names "
                   "the pass)");
    return failure();
  }
  return success();
}

/// How a phase meets a pipeline's stages.
enum class Stages {
  /// No stages: the phase runs on the step's module.
  None,
  /// The phase runs on each stage's module, nested in the split step, with
  /// a nested pass manager (`builtin.module(builtin.module(...))`), every
  /// stage in one run: in parallel where the context has threads.
  Nested,
};

/// -v's line for the phase `phase` running `pipeline` on the module: the
/// --pass-pipeline loom-opt takes.
std::string phaseLine(Reporter &reporter, StringRef phase, StringRef pipeline) {
  return (reporter.getTool() + ": phase " + phase +
          ": --pass-pipeline='builtin.module(" + pipeline + ")'")
      .str();
}

/// Runs the registered pipeline `name` with `options` (built by `build`) on
/// `module` as the phase `phase`; with -v, prints it as loom-opt's
/// --pass-pipeline takes it first. On failure says which phase failed.
template <typename Options>
LogicalResult runPhase(ModuleOp module, StringRef phase, StringRef name,
                       const Options &options,
                       void (*build)(OpPassManager &, const Options &),
                       bool verbose, bool verifyEach, Reporter &reporter,
                       Stages stages = Stages::None) {
  if (verbose) {
    std::string pipeline;
    raw_string_ostream os(pipeline);
    os << name;
    options.print(os);
    if (stages == Stages::Nested)
      pipeline = "builtin.module(" + pipeline + ")";
    reporter.stream() << phaseLine(reporter, phase, pipeline) << "\n";
  }
  return runPasses(module, phase, verifyEach, reporter, [&](OpPassManager &pm) {
    build(stages == Stages::Nested ? pm.nest<ModuleOp>() : pm, options);
  });
}

/// Compiles one stage's step from the training step on.
class StageCompiler {
public:
  /// With Stages::Nested `module` holds every stage.
  StageCompiler(const CompileOptions &options, Reporter &reporter,
                Stages stages)
      : options(options), reporter(reporter), stages(stages) {}

  /// Runs the phases after the training step on `module` up to the emit
  /// point (through lowering past it); records its plan in `plans`.
  LogicalResult run(OwningOpRef<ModuleOp> &module, int64_t stage,
                    SmallVectorImpl<StagePlan> *plans);

private:
  template <typename Options>
  LogicalResult phase(ModuleOp module, StringRef phase, StringRef name,
                      const Options &phaseOptions,
                      void (*build)(OpPassManager &, const Options &)) {
    return runPhase(module, phase, name, phaseOptions, build, options.verbose,
                    options.verifyEach, reporter, stages);
  }
  LogicalResult sharding(ModuleOp module, const ShardingOptions &sharding) {
    return phase(module, "sharding", "loom-sharding-pipeline", sharding,
                 buildShardingPipeline);
  }
  LogicalResult memoryPlan(ModuleOp module) {
    MemoryPlanOptions plan;
    options.fill(plan);
    return phase(module, "memory-plan", "loom-memory-plan-pipeline", plan,
                 buildMemoryPlanPipeline);
  }
  LogicalResult underRematBudget(OwningOpRef<ModuleOp> &module);
  LogicalResult shardAndPlan(OwningOpRef<ModuleOp> &module);

  const CompileOptions &options;
  Reporter &reporter;
  Stages stages;
};

/// Compiles `module` (a training step) through the sharding and memory-plan
/// phases so that its memory plan, what the trainer allocates for the step,
/// is within --remat-budget-mb (and --memory-limit-mb where that is lower),
/// recomputing as little as that allows. At --emit=step, stops after the
/// chosen step's sharding phase.
///
/// train-remat's budget is a peak of the synchronous order's timeline,
/// measured with the plan's rules (train-footprint, asPlanned); the plan
/// after scheduling is measured all the same, not predicted:
/// the step keeping everything first; else train-remat's leanest step (its
/// floor: a user budget below that plan is an error naming it), which also
/// lists the peaks at which train-remat's choice changes (its Pareto
/// candidates, `candidate_peak_bytes`); then a binary search over those for
/// the least recompute whose plan is within the budget. Each candidate is
/// compiled in full, so every accepted budget's plan is within it.
LogicalResult StageCompiler::underRematBudget(OwningOpRef<ModuleOp> &module) {
  ShardingOptions shardingOptions;
  options.fill(shardingOptions);
  double boundMb = options.rematBudgetMb;
  const char *boundFlag = "--remat-budget-mb";
  if (options.memoryLimitMb > 0 && options.memoryLimitMb < boundMb) {
    boundMb = options.memoryLimitMb;
    boundFlag = "--memory-limit-mb";
  }
  int64_t bound = int64_t(std::floor(boundMb * kMiB));
  OwningOpRef<ModuleOp> unsharded = module->clone();
  // train-remat's budget is the scheduler's limit too: the scheduler keeps
  // the memory remat freed.
  shardingOptions.memoryLimitMb = 0;
  shardingOptions.leanestBelowFloor = true;
  // The plan's peak with train-remat's budget `rematBytes` (0: none); with
  // `planned` false, the sharding phase alone (--emit=step) and 0.
  int64_t compiledBytes = -1;
  // The passes' remarks of the last compile: only the chosen step's are
  // shown (errors always are).
  SmallVector<std::pair<Location, std::string>> remarks;
  auto compile = [&](int64_t rematBytes,
                     bool planned = true) -> std::optional<int64_t> {
    remarks.clear();
    ScopedDiagnosticHandler keepRemarks(
        unsharded->getContext(), [&](Diagnostic &diag) {
          if (diag.getSeverity() != mlir::DiagnosticSeverity::Remark)
            return failure(); // to the client's handler
          remarks.push_back({diag.getLocation(), diag.str()});
          return success();
        });
    module = unsharded->clone();
    compiledBytes = rematBytes;
    shardingOptions.rematBudgetMb =
        rematBytes ? (double(rematBytes) + 0.5) / kMiB : 0.0;
    if (failed(sharding(*module, shardingOptions)))
      return std::nullopt;
    if (!planned) {
      compiledBytes = -1;
      return 0;
    }
    if (failed(memoryPlan(*module)))
      return std::nullopt;
    return trainer::getPredictedPeakBytes(trainer::findStep(*module));
  };
  // The chosen step: its plan is `planned` with train-remat's budget
  // `rematBytes`; compiled again unless the module holds it.
  auto finish = [&](int64_t rematBytes, int64_t planned, int64_t floor,
                    int64_t keepAll) -> LogicalResult {
    bool step = options.emit == EmitPoint::Step;
    if (compiledBytes != rematBytes || step) {
      std::optional<int64_t> again = compile(rematBytes, !step);
      if (!again)
        return failure();
      // CBC under its time limit may answer differently on a second solve;
      // the bound holds all the same, or the build fails.
      if (!step && *again > bound) {
        reporter.error(formatv("the step compiled again plans {0:F3} MiB, "
                               "over {1} {2:F3} (it planned {3:F3} MiB "
                               "before: train-remat's solver stopped at its "
                               "time limit?)",
                               *again / kMiB, boundFlag, boundMb,
                               planned / kMiB));
        return failure();
      }
    }
    for (auto &[loc, message] : remarks)
      emitRemark(loc) << message;
    if (rematBytes == 0)
      reporter.remark(formatv("{0} {1:F3}: the step keeps everything; its "
                              "memory plan is {2:F3} MiB ({3} bytes)",
                              boundFlag, boundMb, planned / kMiB, planned));
    else
      reporter.remark(formatv(
          "{0} {1:F3}: the step's memory plan is {2:F3} MiB ({3} bytes); "
          "plans reach from {4:F3} MiB ({5} bytes, the floor) to {6:F3} MiB "
          "(keeping everything); {7}",
          boundFlag, boundMb, planned / kMiB, planned, floor / kMiB, floor,
          keepAll / kMiB,
          rematBytes == 1
              ? std::string("train-remat's leanest step")
              : formatv("train-remat's budget {0:F3} MiB", rematBytes / kMiB)
                    .str()));
    return success();
  };
  std::optional<int64_t> keepAll = compile(0);
  if (!keepAll)
    return failure();
  // Within the bound keeping everything: nothing is recomputed.
  if (*keepAll <= bound)
    return finish(0, *keepAll, *keepAll, *keepAll);
  // The floor: train-remat's leanest step, in the synchronous order.
  std::optional<int64_t> floor = compile(1);
  if (!floor)
    return failure();
  SmallVector<int64_t> peaks;
  if (auto info = trainer::findStep(*module)->getAttrOfType<DictionaryAttr>(
          "loom.remat"))
    if (auto list = info.getAs<DenseI64ArrayAttr>("candidate_peak_bytes"))
      peaks.assign(list.asArrayRef().begin(), list.asArrayRef().end());
  if (*floor > bound) {
    reporter.error(formatv("{0} {1:F3} cannot be met: the smallest memory "
                           "plan Loom reaches is {2:F3} MiB (recomputing what "
                           "train-remat can; keeping everything: {3:F3} MiB)",
                           boundFlag, boundMb, mibUp(*floor), mibUp(*keepAll)));
    return failure();
  }
  // The candidates from the floor (index 0) to keeping everything: the
  // largest whose plan is within the bound. Plans grow with the candidates'
  // peaks; each probe is compiled and measured all the same.
  int64_t low = 0, high = int64_t(peaks.size()) - 1, lowPlan = *floor;
  while (low < high) {
    int64_t mid = (low + high + 1) / 2;
    std::optional<int64_t> probe = compile(peaks[mid]);
    if (!probe)
      return failure();
    if (*probe <= bound) {
      low = mid;
      lowPlan = *probe;
    } else {
      high = mid - 1;
    }
  }
  return finish(low > 0 ? peaks[low] : 1, lowPlan, *floor, *keepAll);
}

/// The sharding and memory-plan phases (the sharding phase alone at
/// --emit=step). --memory-limit-mb is the scheduler's limit as it stands:
/// the scheduler's timeline charges each train op what its lowering
/// allocates (train-footprint) under the plan's rules
/// (MemoryTimelineOptions::asPlanned), so the schedule's peak bounds the
/// plan's. The plan is checked against the limit all the same: a step with
/// no collectives to schedule (one rank) is bounded by nothing else, and a
/// plan over a limit its schedule met would be a timeline that under-counts,
/// reported as such. The limit bounds the most bytes live at once; where
/// the arena's packing leaves some unused above that, a remark says how
/// much.
LogicalResult StageCompiler::shardAndPlan(OwningOpRef<ModuleOp> &module) {
  ShardingOptions shardingOptions;
  options.fill(shardingOptions);
  if (failed(sharding(*module, shardingOptions)))
    return failure();
  if (options.emit == EmitPoint::Step)
    return success();
  if (failed(memoryPlan(*module)))
    return failure();
  if (options.memoryLimitMb <= 0)
    return success();
  auto limit = int64_t(std::floor(options.memoryLimitMb * kMiB));
  SmallVector<ModuleOp> steps;
  if (stages == Stages::Nested)
    llvm::append_range(steps, module->getOps<ModuleOp>());
  else
    steps.push_back(*module);
  for (auto [index, stepModule] : llvm::enumerate(steps)) {
    func::FuncOp step = trainer::findStep(stepModule);
    int64_t live = trainer::getPredictedPeakBytes(step);
    // What the arena's packing leaves unused above the most live at once.
    auto arena = step->getAttrOfType<IntegerAttr>(
        loom::train::TrainDialect::kArenaBytesAttrName);
    auto bound = step->getAttrOfType<IntegerAttr>(
        loom::train::TrainDialect::kArenaBoundBytesAttrName);
    int64_t unused = arena && bound
                         ? std::max<int64_t>(0, arena.getInt() - bound.getInt())
                         : 0;
    std::string what = stages == Stages::Nested
                           ? formatv("stage {0}'s memory plan", index).str()
                           : std::string("the step's memory plan");
    // The limit bounds what is live at once, which the scheduler sees; the
    // arena's packing may leave some of it unused above that (usually
    // nothing): said, not hidden.
    if (live <= limit) {
      if (live + unused > limit)
        reporter.remark(formatv(
            "{0} holds {1:F3} MiB live at most, within --memory-limit-mb "
            "{2:F3}; its arena packs {3} bytes above that, {4:F3} MiB in all",
            what, live / kMiB, options.memoryLimitMb, unused,
            (live + unused) / kMiB));
      continue;
    }
    auto scheduled = step->getAttrOfType<IntegerAttr>(
        loom::train::TrainDialect::kScheduledPeakBytesAttrName);
    bool wasScheduled = options.zeroStage != ZeroStage::None &&
                        options.schedule == Schedule::Loom;
    if (wasScheduled && scheduled && scheduled.getInt() <= limit)
      reporter.error(formatv(
          "{0} needs {1:F3} MiB, over --memory-limit-mb {2:F3}, which its "
          "schedule met ({3:F3} MiB): the scheduler's memory timeline "
          "under-counts what the plan allocates (a bug; please report it)",
          what, live / kMiB, options.memoryLimitMb, scheduled.getInt() / kMiB));
    else
      reporter.error(formatv(
          "--memory-limit-mb {0:F3} cannot be met: {1} needs {2:F3} MiB with "
          "no collectives to schedule{3}",
          options.memoryLimitMb, what, mibUp(live),
          options.pipelineStages > 1
              ? ""
              : "; --remat-budget-mb recomputes activations to go lower"));
    return failure();
  }
  return success();
}

/// The figures the memory-plan phase left on `module`'s step.
static StagePlan readPlan(ModuleOp module, int64_t stage) {
  StagePlan plan;
  plan.stage = stage;
  func::FuncOp step = trainer::findStep(module);
  plan.peakBytes = trainer::getPredictedPeakBytes(step);
  module.walk([&](Operation *op) {
    if (auto arena = op->getAttrOfType<IntegerAttr>(
            loom::train::TrainDialect::kArenaBytesAttrName))
      plan.arenaBytes = arena.getInt();
    if (auto bound = op->getAttrOfType<IntegerAttr>(
            loom::train::TrainDialect::kArenaBoundBytesAttrName))
      plan.arenaBoundBytes = bound.getInt();
  });
  return plan;
}

LogicalResult StageCompiler::run(OwningOpRef<ModuleOp> &module, int64_t stage,
                                 SmallVectorImpl<StagePlan> *plans) {
  // 2. ZeRO and the communication schedule, and 3. the static memory plan,
  // on the decomposed step: its memory timeline (results in the trainer's
  // buffers) is the prediction, and every buffer it allocates is pinned to
  // an arena offset.
  if (failed(options.rematBudgetMb > 0 ? underRematBudget(module)
                                       : shardAndPlan(module)))
    return failure();
  if (plans && options.emit >= EmitPoint::MemoryPlan) {
    if (stages == Stages::Nested)
      for (auto [index, nested] : llvm::enumerate(module->getOps<ModuleOp>()))
        plans->push_back(readPlan(nested, index));
    else
      plans->push_back(readPlan(*module, stage));
  }
  if (options.emit <= EmitPoint::MemoryPlan)
    return success();

  // 4. The trainer's entry point and the runtime's collectives.
  EntryOptions entry;
  options.fill(entry);
  if (failed(phase(*module, "entry", "loom-entry-pipeline", entry,
                   buildEntryPipeline)))
    return failure();
  if (options.emit == EmitPoint::Mlir)
    return success();

  // 5. Lowering to the LLVM dialect, and the manifest.
  if (options.target == Target::Cuda) {
    LowerToCudaOptions lowering;
    options.fill(lowering);
    return phase(*module, "lowering", "loom-lower-to-cuda-pipeline", lowering,
                 buildLowerToCudaPipeline);
  }
  LowerToCpuOptions lowering;
  options.fill(lowering);
  return phase(*module, "lowering", "loom-lower-to-cpu-pipeline", lowering,
               buildLowerToCpuPipeline);
}

} // namespace

void loom::driver::registerCompileDialects(DialectRegistry &registry) {
  mlir::registerAllDialects(registry);
  registerAllExtensions(registry);
  loom::registerAllDialects(registry);
  registerAllToLLVMIRTranslations(registry);
}

void loom::driver::registerCompilePasses() {
  static bool registered = [] {
    mlir::registerAllPasses();
    loom::registerAllPasses();
    return true;
  }();
  (void)registered;
}

void Reporter::error(const Twine &message) {
  os << tool << ": error: " << message << "\n";
}

void Reporter::remark(const Twine &message) {
  os << tool << ": remark: " << message << "\n";
}

/// Runs `pass` on `module` as the phase `phase`, printed with -v as the
/// registered phases are.
static LogicalResult runPassPhase(ModuleOp module, StringRef phase,
                                  std::unique_ptr<Pass> pass, bool verbose,
                                  bool verifyEach, Reporter &reporter) {
  if (verbose) {
    std::string pipeline;
    raw_string_ostream os(pipeline);
    pass->printAsTextualPipeline(os);
    reporter.stream() << phaseLine(reporter, phase, pipeline) << "\n";
  }
  return runPasses(module, phase, verifyEach, reporter,
                   [&](OpPassManager &pm) { pm.addPass(std::move(pass)); });
}

/// A pipeline's step, split into stages by the training-step phase: each
/// stage compiled as a module of its own (one step, one memory plan),
/// nested in the step, the phases running on them with nested pass
/// managers as loom-opt runs them, then linked into one module.
static LogicalResult compileStages(OwningOpRef<ModuleOp> &module,
                                   const CompileOptions &options,
                                   Reporter &reporter,
                                   SmallVectorImpl<StagePlan> *plans) {
  if (failed(runPassPhase(*module, "stages", pp::createPPSplitStagesPass(),
                          options.verbose, options.verifyEach, reporter)))
    return failure();
  if (failed(StageCompiler(options, reporter, Stages::Nested)
                 .run(module, 0, plans)))
    return failure();
  if (options.emit <= EmitPoint::Mlir)
    return success();
  // The lowered stages, linked into one module for one object.
  return runPassPhase(*module, "link", pp::createPPLinkStagesPass(),
                      options.verbose, options.verifyEach, reporter);
}

/// The layout pp-partition gave the training step's stages (the one the
/// user named, or the one it balanced).
static std::string getStageLayout(ModuleOp module) {
  for (auto func : module.getOps<func::FuncOp>())
    if (auto pipeline = func->getAttrOfType<train::PipelineAttr>(
            train::TrainDialect::kPipelineAttrName))
      return pipeline.getLayout().str();
  return "";
}

/// The evaluation step (--eval): `forward` compiled alone, its loss the
/// only result, through the phases the training step takes (for a
/// pipeline, cut into the training step's stages: `layout`), then linked
/// into the lowered `module` with the suffix _eval (loom_step_packed_eval
/// and loom_step_manifest_eval, or a pipeline's tables
/// loom_pipeline_packed_eval and loom_pipeline_manifests_eval). Its
/// parameters are placed and sharded as the training step's are, so the
/// trainer passes it the same buffers.
static LogicalResult compileEvaluation(ModuleOp module,
                                       OwningOpRef<ModuleOp> &forward,
                                       StringRef layout,
                                       const CompileOptions &options,
                                       Reporter &reporter) {
  CompileOptions evaluation = options;
  // No backward: nothing to recompute.
  evaluation.rematBudgetMb = 0;
  evaluation.rematActivations = 1;
  TrainingStepOptions step;
  evaluation.fill(step);
  step.forwardOnly = true;
  if (failed(runPhase(*forward, "eval-training-step",
                      "loom-training-step-pipeline", step,
                      buildTrainingStepPipeline, options.verbose,
                      options.verifyEach, reporter)))
    return failure();
  if (options.pipelineStages > 1) {
    pp::PPPartitionPassOptions partition;
    partition.stages = step.pipelineStages;
    partition.replicas = step.pipelineReplicas;
    partition.schedule = step.pipelineSchedule;
    partition.layout = layout.str();
    partition.forwardOnly = true;
    if (failed(runPassPhase(*forward, "eval-partition",
                            pp::createPPPartitionPass(partition),
                            options.verbose, options.verifyEach, reporter)) ||
        failed(compileStages(forward, evaluation, reporter, nullptr)))
      return failure();
  } else if (failed(StageCompiler(evaluation, reporter, Stages::None)
                        .run(forward, 0, nullptr))) {
    return failure();
  }
  ModuleOp nested = forward.release();
  module.getBody()->push_back(nested);
  SymbolTable linked(module);
  if (failed(pp::linkNestedModule(
          nested, "_eval", "loomc --eval: the evaluation step", linked))) {
    reporter.error("the evaluation step (--eval) does not link with the "
                   "training step");
    return failure();
  }
  return success();
}

LogicalResult loom::driver::compileToMlir(OwningOpRef<ModuleOp> &module,
                                          const CompileOptions &options,
                                          Reporter &reporter,
                                          SmallVectorImpl<StagePlan> *plans) {
  if (std::string problem = options.verify(); !problem.empty()) {
    reporter.error(problem);
    return failure();
  }
  registerCompilePasses();
  if (!trainer::findStep(*module)) {
    reporter.error((options.sourceName.empty() ? std::string("the module")
                                               : options.sourceName) +
                   " has no function with a train.loss result");
    return failure();
  }
  // 0. The target every phase estimates time on, in the IR.
  target::LoomSetTargetPassOptions setTarget;
  options.fill(setTarget);
  if (failed(runPassPhase(*module, "target",
                          target::createLoomSetTargetPass(setTarget),
                          options.verbose, options.verifyEach, reporter)))
    return failure();
  // The forward, for the evaluation step (compiled after the training
  // step, then linked beside it).
  OwningOpRef<ModuleOp> forward;
  if (options.eval && options.emit >= EmitPoint::LlvmMlir)
    forward = module->clone();
  // 1. The training step.
  TrainingStepOptions step;
  options.fill(step);
  if (failed(runPhase(*module, "training-step", "loom-training-step-pipeline",
                      step, buildTrainingStepPipeline, options.verbose,
                      options.verifyEach, reporter)))
    return failure();
  if (options.emit == EmitPoint::TrainingStep)
    return success();
  std::string layout = forward ? getStageLayout(*module) : "";
  if (failed(options.pipelineStages > 1
                 ? compileStages(module, options, reporter, plans)
                 : StageCompiler(options, reporter, Stages::None)
                       .run(module, 0, plans)))
    return failure();
  return forward
             ? compileEvaluation(*module, forward, layout, options, reporter)
             : success();
}

void loom::driver::printPtx(ModuleOp module, raw_ostream &os) {
  module.walk([&](gpu::BinaryOp binary) {
    for (mlir::Attribute object : binary.getObjects())
      os << "// loom-module " << binary.getName() << "\n"
         << cast<gpu::ObjectAttr>(object).getObject().getValue() << "\n";
  });
}
