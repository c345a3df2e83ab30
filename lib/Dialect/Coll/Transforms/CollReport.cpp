//===- CollReport.cpp - simulated time, overlap and memory of a step ------===//

#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Analysis/OpIds.h"
#include "loom/Analysis/PipelineSimulator.h"
#include "loom/Analysis/Simulator.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Coll/CollPasses.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Runtime/DurableFile.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>

namespace loom::coll {
#define GEN_PASS_DEF_COLLREPORTPASS
#include "loom/Dialect/Coll/CollPasses.h.inc"
} // namespace loom::coll

using namespace mlir;
using namespace loom;
using namespace loom::coll;

namespace {

constexpr CollectiveKind kKinds[] = {
    CollectiveKind::AllGather, CollectiveKind::ReduceScatter,
    CollectiveKind::AllReduce, CollectiveKind::Broadcast,
    CollectiveKind::Send,      CollectiveKind::Recv};

double toMicros(double seconds) { return seconds * 1e6; }

/// Microseconds rounded to the nanosecond: readable JSON, exact enough.
double jsonMicros(double seconds) { return std::round(seconds * 1e9) / 1e3; }

std::string formatBytes(int64_t bytes) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (bytes >= (int64_t(1) << 30))
    os << llvm::format("%.2f GiB", double(bytes) / double(int64_t(1) << 30));
  else if (bytes >= (1 << 20))
    os << llvm::format("%.2f MiB", double(bytes) / double(1 << 20));
  else
    os << llvm::format("%.1f KiB", double(bytes) / 1024.0);
  return text;
}

/// Writes what `write` prints to `path`, replacing it atomically and
/// durably (a device such as /dev/null is written in place).
LogicalResult writeFile(Operation *anchor, StringRef path,
                        llvm::function_ref<void(llvm::raw_ostream &)> write) {
  std::string text;
  llvm::raw_string_ostream out(text);
  write(out);
  std::string error = loom::runtime::writeFileDurably(path.str(), text);
  if (!error.empty())
    return anchor->emitError() << "coll-report: " << error;
  return success();
}

/// The target the figures are for, as the module's train.target names it:
/// the device, and the profile that replaced its estimates.
std::string describeTarget(const CostModel &model) {
  std::string text = model.getDevice().name;
  if (const Profile *profile = model.getProfile())
    text += " with the profile " + profile->source;
  return text;
}

/// The same in a report's JSON.
void writeTargetJson(llvm::json::OStream &json, const CostModel &model) {
  json.attribute("device", model.getDevice().name);
  json.attributeObject("target", [&] {
    json.attribute("device", model.getDevice().name);
    json.attribute("compute_slowdown", model.getDevice().computeSlowdown);
    if (const Profile *profile = model.getProfile())
      json.attribute("profile", profile->source);
    else
      json.attribute("profile", nullptr);
  });
}

void printTable(func::FuncOp func, const CostModel &model,
                const SimulationResult &sim, const MemoryTimeline &timeline) {
  llvm::raw_ostream &os = llvm::errs();
  os << "coll-report: @" << func.getName() << " on " << describeTarget(model)
     << " (" << sim.numOps << " ops)\n";
  os << llvm::format("  %-26s %12.1f us\n", "makespan", toMicros(sim.makespan));
  os << llvm::format("  %-26s %12.1f us\n", "compute",
                     toMicros(sim.computeTime));
  os << llvm::format("  %-26s %12.1f us\n", "communication",
                     toMicros(sim.getCommTime()));
  os << llvm::format("  %-26s %12.1f us\n", "exposed communication",
                     toMicros(sim.getExposedTime()));
  os << llvm::format("  %-26s %12.1f us\n", "critical path",
                     toMicros(sim.criticalPath));
  os << llvm::format("  %-26s %12.1f us  (makespan / bound %.3f)\n",
                     "lower bound", toMicros(sim.lowerBound),
                     sim.lowerBound > 0 ? sim.makespan / sim.lowerBound : 1.0);
  os << "  peak memory " << formatBytes(timeline.getPeakBytes()) << " at op "
     << timeline.getPeakPosition() << " ("
     << (timeline.getPeakOp() ? timeline.getPeakOp()->getName().getStringRef()
                              : StringRef("-"))
     << ")\n";
  for (unsigned kind = 0; kind < kNumBufferKinds; ++kind)
    if (int64_t bytes = timeline.getPeakBreakdown()[kind])
      os << llvm::format("    %-24s %s\n",
                         stringifyBufferKind(BufferKind(kind)).str().c_str(),
                         formatBytes(bytes).c_str());
  os << "  collective       count   exposed us  stalled waits\n";
  for (CollectiveKind kind : kKinds) {
    unsigned k = unsigned(kind);
    if (!sim.collectiveCount[k])
      continue;
    os << llvm::format("  %-15s %6u %12.1f %14u\n",
                       stringifyCollectiveKind(kind).str().c_str(),
                       sim.collectiveCount[k], toMicros(sim.exposedTime[k]),
                       sim.exposedCount[k]);
  }
}

/// What an op's time is compared under: a collective's kind, a train op's
/// name, or a linalg op's shape of work.
std::string getOpClass(Operation *op) {
  if (auto collective = dyn_cast<CollectiveOpInterface>(op))
    return stringifyCollectiveKind(collective.getKind()).str();
  if (op->getName().getDialectNamespace() == "train")
    return op->getName().getStringRef().str();
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
    if (linalg::isaContractionOpInterface(linalgOp))
      return "matmul";
    if (linalgOp.getNumReductionLoops() > 0)
      return "reduction";
    return "elementwise";
  }
  return op->getName().getDialectNamespace().str();
}

/// The device model's prediction beside the profile's measurement, per op
/// class and for the step.
struct Comparison {
  struct Class {
    std::string name;
    unsigned ops = 0, measuredOps = 0;
    /// Over the measured ops only: the model's figure and the profile's.
    double predicted = 0, measured = 0;
  };
  std::vector<Class> classes;
  /// The step simulated with the device model alone and with the profile.
  double modelMakespan = 0, profiledMakespan = 0;
};

Comparison compare(Block &block, ArrayRef<Operation *> ops,
                   const CostModel &model, const SimulationResult &sim) {
  Comparison comparison;
  llvm::StringMap<size_t> indexOf;
  Comparison::Class calls{"collective calls (host)"};
  for (Operation *op : ops) {
    if (double issue = model.getIssueTime(op)) {
      calls.ops++;
      calls.measuredOps++;
      calls.measured += issue;
    }
    auto collective = dyn_cast<CollectiveOpInterface>(op);
    double estimate = collective ? model.getEstimatedCollectiveTime(op)
                                 : model.getEstimatedComputeTime(op);
    std::optional<double> measured = model.getProfiled(op);
    if (estimate == 0 && measured.value_or(0) == 0)
      continue;
    std::string name = getOpClass(op);
    auto [it, inserted] = indexOf.try_emplace(name, comparison.classes.size());
    if (inserted)
      comparison.classes.push_back({name});
    Comparison::Class &entry = comparison.classes[it->second];
    entry.ops++;
    if (measured) {
      entry.measuredOps++;
      entry.predicted += estimate;
      entry.measured += *measured;
    }
  }
  if (calls.ops)
    comparison.classes.push_back(calls);
  CostModel plain(model.getDevice());
  comparison.modelMakespan = simulate(block, ops, plain).makespan;
  comparison.profiledMakespan = sim.makespan;
  return comparison;
}

void printComparison(const Comparison &comparison, const Profile &profile) {
  llvm::raw_ostream &os = llvm::errs();
  os << "  predicted against measured (" << profile.source << ": "
     << (profile.target.empty() ? "?" : profile.target) << ", "
     << profile.worldSize << " ranks, " << profile.steps << " steps)\n";
  os << "  op class                         ops measured  predicted us  "
        "measured us  measured/predicted\n";
  for (const Comparison::Class &entry : comparison.classes)
    os << llvm::format(
        "  %-32s %3u %8u %13.1f %12.1f  %s\n", entry.name.c_str(), entry.ops,
        entry.measuredOps, toMicros(entry.predicted), toMicros(entry.measured),
        entry.predicted > 0
            ? llvm::formatv("{0:F3}", entry.measured / entry.predicted)
                  .str()
                  .c_str()
            : "-");
  os << llvm::format("  %-26s %12.1f us  (device model)\n", "step predicted",
                     toMicros(comparison.modelMakespan));
  os << llvm::format("  %-26s %12.1f us  (with the profile)\n",
                     "step simulated", toMicros(comparison.profiledMakespan));
  if (profile.stepSeconds > 0) {
    os << llvm::format(
        "  %-26s %12.1f us  (simulated/measured %.3f, predicted/measured "
        "%.3f)\n",
        "profiled step measured", toMicros(profile.stepSeconds),
        comparison.profiledMakespan / profile.stepSeconds,
        comparison.modelMakespan / profile.stepSeconds);
    // What the probes saw of it; the rest ran outside any op's bracket
    // (allocations, views, the calls into the step and the probes).
    double ops = 0;
    for (auto [id, seconds] : profile.runSeconds)
      ops += seconds;
    os << llvm::format(
        "  %-26s %12.1f us  in ops, %.1f us in waits, %.1f us "
        "outside ops\n",
        "", toMicros(ops), toMicros(profile.waitSeconds),
        toMicros(profile.stepSeconds - ops - profile.waitSeconds));
  }
}

void writeJson(llvm::raw_ostream &out, func::FuncOp func,
               const CostModel &model, const SimulationResult &sim,
               const MemoryTimeline &timeline,
               const std::optional<Comparison> &comparison) {
  llvm::json::OStream json(out, 2);
  json.object([&] {
    json.attribute("function", func.getName());
    writeTargetJson(json, model);
    json.attribute("num_ops", int64_t(sim.numOps));
    json.attribute("peak_bytes", timeline.getPeakBytes());
    json.attribute("peak_op_index", int64_t(timeline.getPeakPosition()));
    json.attributeObject("peak_breakdown_bytes", [&] {
      for (unsigned kind = 0; kind < kNumBufferKinds; ++kind)
        json.attribute(stringifyBufferKind(BufferKind(kind)),
                       timeline.getPeakBreakdown()[kind]);
    });
    json.attribute("makespan_us", jsonMicros(sim.makespan));
    json.attribute("compute_us", jsonMicros(sim.computeTime));
    json.attribute("comm_us", jsonMicros(sim.getCommTime()));
    json.attributeArray("comm_us_per_communicator", [&] {
      for (double t : sim.commTimePerCommunicator)
        json.value(jsonMicros(t));
    });
    json.attribute("exposed_comm_us", jsonMicros(sim.getExposedTime()));
    json.attribute("critical_path_us", jsonMicros(sim.criticalPath));
    json.attribute("lower_bound_us", jsonMicros(sim.lowerBound));
    json.attribute("makespan_over_lower_bound",
                   sim.lowerBound > 0 ? sim.makespan / sim.lowerBound : 1.0);
    json.attributeObject("num_collectives", [&] {
      for (CollectiveKind kind : kKinds)
        json.attribute(stringifyCollectiveKind(kind),
                       int64_t(sim.collectiveCount[unsigned(kind)]));
    });
    json.attributeObject("exposed_us", [&] {
      for (CollectiveKind kind : kKinds)
        json.attribute(stringifyCollectiveKind(kind),
                       jsonMicros(sim.exposedTime[unsigned(kind)]));
    });
    if (!comparison)
      return;
    const Profile &profile = *model.getProfile();
    json.attributeObject("profile", [&] {
      json.attribute("source", profile.source);
      json.attribute("measured_step_us", jsonMicros(profile.stepSeconds));
      json.attribute("predicted_step_us",
                     jsonMicros(comparison->modelMakespan));
      json.attribute("simulated_step_us",
                     jsonMicros(comparison->profiledMakespan));
      json.attributeArray("classes", [&] {
        for (const Comparison::Class &entry : comparison->classes)
          json.object([&] {
            json.attribute("class", entry.name);
            json.attribute("ops", int64_t(entry.ops));
            json.attribute("measured_ops", int64_t(entry.measuredOps));
            json.attribute("predicted_us", jsonMicros(entry.predicted));
            json.attribute("measured_us", jsonMicros(entry.measured));
          });
      });
    });
  });
  out << "\n";
}

void writeTrace(llvm::raw_ostream &out, ArrayRef<Operation *> ops,
                const SimulationResult &sim) {
  // Op ids from the order at hand, not a block scan per event.
  DenseMap<Operation *, unsigned> indexOf;
  for (auto [index, op] : llvm::enumerate(ops))
    indexOf[op] = index;
  std::vector<std::string> streams = {"compute"};
  for (const TraceEvent &event : sim.events)
    if (!llvm::is_contained(streams, event.stream))
      streams.push_back(event.stream);
  llvm::json::OStream json(out);
  json.object([&] {
    json.attributeArray("traceEvents", [&] {
      for (auto [tid, name] : llvm::enumerate(streams))
        json.object([&, tid = tid, name = name] {
          json.attribute("name", "thread_name");
          json.attribute("ph", "M");
          json.attribute("pid", 0);
          json.attribute("tid", int64_t(tid));
          json.attributeObject("args", [&] { json.attribute("name", name); });
        });
      for (const TraceEvent &event : sim.events)
        json.object([&] {
          json.attribute("name", event.name);
          json.attribute("ph", "X");
          json.attribute("pid", 0);
          json.attribute("tid", int64_t(llvm::find(streams, event.stream) -
                                        streams.begin()));
          json.attribute("ts", jsonMicros(event.start));
          json.attribute("dur", jsonMicros(event.duration));
          if (event.op)
            json.attributeObject("args", [&] {
              json.attribute("index", int64_t(indexOf.lookup(event.op)));
              if (std::optional<int64_t> id = getOpId(event.op))
                json.attribute("op_id", *id);
            });
        });
    });
  });
  out << "\n";
}

/// Live memory against simulated time, as a step line.
void writePlot(llvm::raw_ostream &out, ArrayRef<Operation *> ops,
               const SimulationResult &sim, const MemoryTimeline &timeline,
               StringRef title) {
  const double width = 900, height = 320, left = 70, right = 20, top = 40,
               bottom = 40;
  double span = std::max(sim.makespan, 1e-12);
  double peak = std::max<double>(timeline.getPeakBytes(), 1);
  double gib = double(int64_t(1) << 30);
  auto x = [&](double t) { return left + t / span * (width - left - right); };
  auto y = [&](double bytes) {
    return height - bottom - bytes / peak * (height - top - bottom);
  };
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width
      << "\" height=\"" << height << "\" font-family=\"sans-serif\" "
      << "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
         "fill=\"white\"/>\n";
  out << "<text x=\"" << left << "\" y=\"20\" font-size=\"14\">" << title
      << ": peak " << formatBytes(timeline.getPeakBytes())
      << llvm::format(", makespan %.1f ms", sim.makespan * 1e3) << "</text>\n";
  out << "<line x1=\"" << left << "\" y1=\"" << height - bottom << "\" x2=\""
      << width - right << "\" y2=\"" << height - bottom
      << "\" stroke=\"black\"/>\n<line x1=\"" << left << "\" y1=\"" << top
      << "\" x2=\"" << left << "\" y2=\"" << height - bottom
      << "\" stroke=\"black\"/>\n";
  for (int tick = 0; tick <= 4; ++tick) {
    double bytes = peak * tick / 4;
    out << llvm::format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">"
                        "%.2f GiB</text>\n",
                        left - 5, y(bytes) + 4, bytes / gib);
    double t = span * tick / 4;
    out << llvm::format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">"
                        "%.1f ms</text>\n",
                        x(t), height - bottom + 16, t * 1e3);
  }
  out << "<polyline fill=\"none\" stroke=\"steelblue\" stroke-width=\"1.5\" "
         "points=\"";
  double previousY = y(0);
  for (auto [index, op] : llvm::enumerate(ops)) {
    double px = x(sim.reached.lookup(op));
    double py = y(double(timeline.getLiveBytes(index)));
    out << llvm::format("%.1f,%.1f %.1f,%.1f ", px, previousY, px, py);
    previousY = py;
  }
  out << llvm::format("%.1f,%.1f", x(span), previousY) << "\"/>\n</svg>\n";
}

//===----------------------------------------------------------------------===//
// Pipelines (pp-partition's stage functions)
//===----------------------------------------------------------------------===//

/// The microbatch count and the schedule's textbook bubble, (P-1)/(M+P-1).
std::pair<int64_t, double> textbookBubble(func::FuncOp stage, int64_t stages) {
  int64_t microbatches = 1;
  if (auto pipeline = stage->getAttrOfType<loom::train::PipelineAttr>(
          loom::train::TrainDialect::kPipelineAttrName))
    microbatches = pipeline.getMicrobatches();
  return {microbatches, double(stages - 1) / double(microbatches + stages - 1)};
}

std::string getSchedule(func::FuncOp stage) {
  if (auto pipeline = stage->getAttrOfType<loom::train::PipelineAttr>(
          loom::train::TrainDialect::kPipelineAttrName))
    return pipeline.getSchedule().str();
  return "?";
}

void printPipeline(ArrayRef<func::FuncOp> stages, const CostModel &model,
                   const PipelineSimulation &sim) {
  llvm::raw_ostream &os = llvm::errs();
  std::pair<int64_t, double> bubble =
      textbookBubble(stages.front(), stages.size());
  int64_t microbatches = bubble.first;
  double textbook = bubble.second;
  os << "coll-report: pipeline of " << stages.size() << " stages, "
     << microbatches << " microbatches, " << getSchedule(stages.front())
     << ", on " << describeTarget(model) << "\n";
  os << llvm::format("  %-26s %12.1f us\n", "makespan", toMicros(sim.makespan));
  os << llvm::format("  %-26s %12.4f  ((P-1)/(M+P-1) = %.4f)\n", "bubble",
                     sim.bubble, textbook);
  os << "  stage  peak memory      compute us     stalled us     finish us\n";
  for (auto [s, stage] : llvm::enumerate(sim.stages))
    os << llvm::format("  %5zu  %11s  %14.1f %14.1f %13.1f\n", s,
                       formatBytes(stage.peakBytes).c_str(),
                       toMicros(stage.busy), toMicros(stage.stalled),
                       toMicros(stage.finish));
}

void writePipelineJson(llvm::raw_ostream &out, ArrayRef<func::FuncOp> stages,
                       const CostModel &model, const PipelineSimulation &sim) {
  std::pair<int64_t, double> bubble =
      textbookBubble(stages.front(), stages.size());
  int64_t microbatches = bubble.first;
  double textbook = bubble.second;
  llvm::json::OStream json(out, 2);
  json.object([&] {
    writeTargetJson(json, model);
    json.attribute("stages", int64_t(stages.size()));
    json.attribute("microbatches", microbatches);
    json.attribute("schedule", getSchedule(stages.front()));
    if (auto pipeline =
            stages.front()->getAttrOfType<loom::train::PipelineAttr>(
                loom::train::TrainDialect::kPipelineAttrName))
      json.attribute("layout", pipeline.getLayout());
    json.attribute("makespan_us", jsonMicros(sim.makespan));
    json.attribute("bubble", sim.bubble);
    json.attribute("textbook_bubble", textbook);
    json.attributeArray("per_stage", [&] {
      for (size_t s = 0; s < sim.stages.size(); ++s)
        json.object([&] {
          const StageSimulation &stage = sim.stages[s];
          func::FuncOp stageFunc = stages[s];
          json.attribute("function", stageFunc.getName());
          json.attribute("peak_bytes", stage.peakBytes);
          json.attribute("compute_us", jsonMicros(stage.busy));
          json.attribute("stalled_us", jsonMicros(stage.stalled));
          json.attribute("finish_us", jsonMicros(stage.finish));
        });
    });
  });
  out << "\n";
}

/// One process per stage, one event per schedule action.
void writePipelineTrace(llvm::raw_ostream &out, const PipelineSimulation &sim) {
  llvm::json::OStream json(out, 1);
  json.object([&] {
    json.attributeArray("traceEvents", [&] {
      for (size_t s = 0; s < sim.stages.size(); ++s) {
        const StageSimulation &stage = sim.stages[s];
        json.object([&] {
          json.attribute("name", "process_name");
          json.attribute("ph", "M");
          json.attribute("pid", int64_t(s));
          json.attributeObject("args", [&] {
            json.attribute("name", ("stage " + llvm::Twine(s)).str());
          });
        });
        for (const auto &interval : stage.intervals)
          json.object([&] {
            json.attribute("name", interval.action.empty()
                                       ? std::string("stalled")
                                       : interval.action);
            json.attribute("ph", "X");
            json.attribute("pid", int64_t(s));
            json.attribute("tid", 0);
            json.attribute("ts", jsonMicros(interval.start));
            json.attribute("dur", jsonMicros(interval.end - interval.start));
          });
      }
    });
  });
  out << "\n";
}

/// The schedule grid: one row per stage, each action a box coloured by its
/// kind (F blue, B and I green, W orange), stalls left white.
void writePipelinePlot(llvm::raw_ostream &out, ArrayRef<func::FuncOp> stages,
                       const CostModel &model, const PipelineSimulation &sim) {
  const double width = 1000, rowHeight = 28, left = 70, right = 20, top = 40;
  double height = top + rowHeight * sim.stages.size() + 40;
  double span = std::max(sim.makespan, 1e-12);
  auto x = [&](double t) { return left + t / span * (width - left - right); };
  out << llvm::format("<svg xmlns=\"http://www.w3.org/2000/svg\" "
                      "width=\"%.0f\" height=\"%.0f\" "
                      "font-family=\"sans-serif\" font-size=\"11\">\n",
                      width, height)
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  int64_t microbatches = textbookBubble(stages.front(), stages.size()).first;
  out << llvm::format("<text x=\"%.0f\" y=\"20\" font-size=\"14\">", left)
      << getSchedule(stages.front()) << ", " << stages.size() << " stages, "
      << microbatches << " microbatches on " << model.getDevice().name
      << llvm::format(": %.2f ms, bubble %.3f", sim.makespan * 1e3, sim.bubble)
      << "</text>\n";
  for (auto [s, stage] : llvm::enumerate(sim.stages)) {
    double y = top + rowHeight * s;
    out << llvm::format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">"
                        "stage %zu</text>\n",
                        left - 6, y + rowHeight * 0.65, s);
    for (const auto &interval : stage.intervals) {
      if (interval.action.empty())
        continue;
      char kind = interval.action.front();
      const char *fill = kind == 'F'                  ? "#6fa8dc"
                         : kind == 'B' || kind == 'I' ? "#93c47d"
                         : kind == 'W'                ? "#f6b26b"
                                                      : "#cccccc";
      double x0 = x(interval.start), x1 = x(interval.end);
      out << llvm::format("<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                          "height=\"%.1f\" fill=\"%s\" stroke=\"white\" "
                          "stroke-width=\"0.5\"/>\n",
                          x0, y + 2, std::max(x1 - x0, 0.1), rowHeight - 4,
                          fill);
      if (x1 - x0 > 14)
        out << llvm::format("<text x=\"%.1f\" y=\"%.1f\" "
                            "text-anchor=\"middle\">%s</text>\n",
                            (x0 + x1) / 2, y + rowHeight * 0.65,
                            interval.action.c_str());
    }
  }
  out << llvm::format("<text x=\"%.1f\" y=\"%.1f\">0</text>\n", left,
                      height - 12);
  out << llvm::format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">"
                      "%.2f ms</text>\n</svg>\n",
                      width - right, height - 12, sim.makespan * 1e3);
}

struct CollReportPass
    : public loom::coll::impl::CollReportPassBase<CollReportPass> {
  using CollReportPassBase::CollReportPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<CostModel> loaded = getCostModel(module, "coll-report");
    if (!loaded)
      return signalPassFailure();
    CostModel &model = *loaded;
    FailureOr<SmallVector<func::FuncOp>> stages = getPipelineStages(module);
    if (failed(stages))
      return signalPassFailure();
    if (!stages->empty() && function.empty()) {
      if (failed(reportPipeline(*stages, model)))
        return signalPassFailure();
      markAllAnalysesPreserved();
      return;
    }
    bool reported = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() ||
          (!function.empty() && func.getName() != function))
        continue;
      if (!func.getBody().hasOneBlock()) {
        func.emitError("coll-report expects single-block functions");
        return signalPassFailure();
      }
      if (reported &&
          (!jsonPath.empty() || !tracePath.empty() || !plotPath.empty())) {
        func.emitError("coll-report writes files for one function; choose "
                       "it with function=<name>");
        return signalPassFailure();
      }
      Block &block = func.getBody().front();
      SmallVector<Operation *> ops;
      for (Operation &op : block)
        ops.push_back(&op);
      // The memory the scheduler bounds: the plan's rules on a step.
      MemoryTimeline timeline(block, ops,
                              MemoryTimelineOptions::asPlanned(block));
      if (checkTracker) {
        // The tracker applies the plain rules incrementally.
        MemoryTimeline plain(block, ops);
        MemoryTracker tracker(block);
        for (auto [index, op] : llvm::enumerate(ops)) {
          int64_t during = tracker.place(op);
          if (during != plain.getLiveBytes(index)) {
            op->emitError() << "coll-report: the memory tracker has " << during
                            << " bytes live here, the timeline "
                            << plain.getLiveBytes(index);
            return signalPassFailure();
          }
        }
      }
      SimulationResult sim = simulate(block, ops, model);
      printTable(func, model, sim, timeline);
      std::optional<Comparison> comparison;
      if (model.getProfile()) {
        comparison = compare(block, ops, model, sim);
        printComparison(*comparison, *model.getProfile());
      }
      if ((!jsonPath.empty() && failed(writeFile(func, jsonPath,
                                                 [&](llvm::raw_ostream &os) {
                                                   writeJson(os, func, model,
                                                             sim, timeline,
                                                             comparison);
                                                 }))) ||
          (!tracePath.empty() && failed(writeFile(func, tracePath,
                                                  [&](llvm::raw_ostream &os) {
                                                    writeTrace(os, ops, sim);
                                                  }))) ||
          (!plotPath.empty() &&
           failed(writeFile(func, plotPath, [&](llvm::raw_ostream &os) {
             writePlot(os, ops, sim, timeline,
                       ("@" + func.getName() + " on " + model.getDevice().name)
                           .str());
           }))))
        return signalPassFailure();
      reported = true;
    }
    if (!reported && !function.empty()) {
      module.emitError() << "coll-report: no function named '" << function
                         << "'";
      signalPassFailure();
    }
    markAllAnalysesPreserved();
  }

  LogicalResult reportPipeline(ArrayRef<func::FuncOp> stages,
                               const CostModel &model) {
    FailureOr<PipelineSimulation> sim = simulatePipeline(stages, model);
    if (failed(sim))
      return failure();
    printPipeline(stages, model, *sim);
    Operation *anchor = getOperation();
    if (!jsonPath.empty() &&
        failed(writeFile(anchor, jsonPath, [&](llvm::raw_ostream &os) {
          writePipelineJson(os, stages, model, *sim);
        })))
      return failure();
    if (!tracePath.empty() &&
        failed(writeFile(anchor, tracePath, [&](llvm::raw_ostream &os) {
          writePipelineTrace(os, *sim);
        })))
      return failure();
    if (!plotPath.empty() &&
        failed(writeFile(anchor, plotPath, [&](llvm::raw_ostream &os) {
          writePipelinePlot(os, stages, model, *sim);
        })))
      return failure();
    return success();
  }
};

} // namespace
