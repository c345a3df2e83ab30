//===- TrainerMain.cpp - the trainer executable's main --------------------===//
//
// Linked with a step compiled by loomc (loom_step_packed, loom_step_manifest)
// and a loomrt backend. Flags, file formats and the initialisation rule are
// in docs/Runtime.md.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "SampleData.h"
#include "TokenData.h"
#include "loom/Runtime/Bf16.h"
#include "loom/Runtime/CpuFeatures.h"
#include "loom/Runtime/DurableFile.h"
#include "loom/Runtime/HeapScope.h"
#include "loom/Runtime/StepManifest.h"
#include "loom/Runtime/loomrt.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

// A trainer's step: loom_step_packed and its manifest, or for a pipeline
// (loomc --pipeline-stages) one of each per stage, in the tables below;
// each is weak so that either kind links.
extern "C" __attribute__((weak)) void loom_step_packed(void **buffers);
extern "C" __attribute__((weak)) const char loom_step_manifest[];
extern "C" __attribute__((weak)) const int64_t loom_pipeline_stages;
extern "C" __attribute__((weak)) void (*const loom_pipeline_packed[])(void **);
extern "C" __attribute__((weak)) const char *const loom_pipeline_manifests[];
// The evaluation step (loomc --eval): the forward alone, the loss of a batch
// of held-out data; for a pipeline, one per stage in the tables.
extern "C" __attribute__((weak)) void loom_step_packed_eval(void **buffers);
extern "C" __attribute__((weak)) const char loom_step_manifest_eval[];
extern "C" __attribute__((weak)) const int64_t loom_pipeline_stages_eval;
extern "C"
    __attribute__((weak)) void (*const loom_pipeline_packed_eval[])(void **);
extern "C" __attribute__((weak))
const char *const loom_pipeline_manifests_eval[];
// The CPU features the step was compiled for (Symbols.h's kCpuFeatures).
extern "C" __attribute__((weak)) const char loom_cpu_features[];
// OpenBLAS's thread count; weak, so a trainer linked with another CBLAS
// still links.
extern "C" __attribute__((weak)) void openblas_set_num_threads(int);

using namespace loom::runtime;

namespace {

struct Tensor {
  bool isArgument = false;
  /// A result the step writes into the buffer of the argument it updates
  /// (the manifest's `in-place`): it has no storage of its own.
  bool inPlace = false;
  std::string role, name, dtype;
  std::vector<int64_t> local, full;
  int64_t localCount = 1, fullCount = 1;
  /// Bytes of this rank's tensor.
  int64_t bytes = 0;
  /// This rank's storage (local shape), 8-byte aligned.
  std::vector<double> storage;
  /// The step's copy on the device (CUDA backend), or null: the step then
  /// reads `storage`.
  void *device = nullptr;
  void *data() { return storage.data(); }
  void *buffer() { return device ? device : data(); }
  void upload() {
    if (device)
      loomrt_copy_to_device(device, data(), bytes);
  }
  void download() {
    if (device)
      loomrt_copy_to_host(data(), device, bytes);
  }
  float *f32() { return reinterpret_cast<float *>(storage.data()); }
  uint16_t *bf16() { return reinterpret_cast<uint16_t *>(storage.data()); }
  /// Element i of an f32 or bf16 tensor, as a float.
  float get(int64_t i) {
    return dtype == "bf16" ? loom::bf16ToFloat(bf16()[i]) : f32()[i];
  }
  int32_t *i32() { return reinterpret_cast<int32_t *>(storage.data()); }
  bool sharded() const { return localCount != fullCount; }
};

struct Options {
  int64_t steps = 10, seq = 0, batch = 0, seed = 0, checkpointEvery = 0;
  /// The checkpoints kept: `latest` and the ones before it; 0 keeps all,
  /// -1 is the default (3).
  int64_t keepCheckpoints = -1;
  double lr = 0;
  std::string data, log, checkpoint, trace, profile, init;
  loom::runtime::TokenFormat dataFormat = loom::runtime::TokenFormat::Auto;
  bool resume = false;
  /// Held-out data: a file of its own, or the last `dataSplit` of --data;
  /// its loss every `evalEvery` steps (0: after the last) over
  /// `evalBatches` batches (-1 until given: 4).
  std::string valData;
  loom::runtime::TokenFormat valFormat = loom::runtime::TokenFormat::Auto;
  double dataSplit = 0;
  int64_t evalEvery = 0, evalBatches = -1;
  bool evaluates() const { return !valData.empty() || dataSplit > 0; }
  /// Inputs other than token ids, by name: `--input NAME=FILE.npy`.
  std::map<std::string, std::string> inputs;
};

/// Where this rank sits: its place in the world, its pipeline stage and its
/// slice of the data. Set once at start and passed to what needs it.
struct Placement {
  int64_t rank = 0, worldSize = 1;
  /// A pipeline's stage count (0: not a pipeline) and this rank's stage.
  int64_t pipelineStages = 0, stage = 0;
  /// Which slice of the data this rank trains on, of how many, which is
  /// also its ZeRO shard: the rank and the world, except that in a pipeline
  /// of P stages by D replicas rank s * D + d runs stage s of replica d,
  /// and the stages of a replica see the same batch.
  int64_t dataRank = 0, dataWorld = 1;
};
/// A pipeline's figures per stage in the log: heap, plan, step time,
/// stalls, buffers, and the heap's lines (MPI's scratch, other threads, the
/// runtime's tables, the kernels' scratch, the trainer's own).
constexpr int kStageFields = 10;

/// The manifest of `s`'s step (the only one outside a pipeline).
const char *manifestText(const Placement &at, int64_t s) {
  return at.pipelineStages ? loom_pipeline_manifests[s] : loom_step_manifest;
}

[[noreturn]] void fail(const std::string &message) {
  loomrt_abort(("trainer: " + message).c_str());
  std::abort();
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text;
  for (int64_t d : shape)
    text += (text.empty() ? "" : "x") + std::to_string(d);
  return text.empty() ? "scalar" : text;
}

/// The compiled step's manifest.
struct Manifest {
  std::map<std::string, std::string> properties;
  std::vector<Tensor> tensors;
};

/// A numeric manifest property as JSON: its text, or null if absent.
const char *property(const Manifest &m, const std::string &key) {
  auto it = m.properties.find(key);
  return it == m.properties.end() || it->second.empty() ? "null"
                                                        : it->second.c_str();
}

/// Stage `s`'s manifest as compiled: the tensors described, none
/// allocated.
loom::runtime::StepManifest parseStepManifest(const Placement &at, int64_t s) {
  loom::runtime::StepManifest parsed;
  std::string error;
  if (!loom::runtime::StepManifest::parse(manifestText(at, s), parsed, error))
    fail("the compiled step's manifest is malformed: " + error);
  return parsed;
}

/// A manifest's tensor with this process's storage (none for a result
/// written in place).
Tensor allocateTensor(const loom::runtime::StepTensor &s) {
  Tensor t;
  t.isArgument = s.isArgument;
  t.inPlace = s.inPlace;
  t.localCount = s.getLocalCount();
  t.fullCount = s.getFullCount();
  t.bytes = s.getBytes();
  t.role = s.role;
  t.name = s.name;
  t.dtype = s.dtype;
  t.local = s.localShape;
  t.full = s.fullShape;
  if (!t.inPlace)
    t.storage.assign((t.bytes + 7) / 8, 0.0);
  return t;
}

/// Every stage's tensors (the step's, outside a pipeline), as compiled.
std::vector<loom::runtime::StepTensor> getAllStageTensors(const Placement &at) {
  std::vector<loom::runtime::StepTensor> all;
  for (int64_t s = 0; s < std::max<int64_t>(at.pipelineStages, 1); ++s)
    for (loom::runtime::StepTensor &t : parseStepManifest(at, s).tensors)
      all.push_back(std::move(t));
  return all;
}

/// Stage `s`'s manifest with this process's storage for each tensor.
Manifest readStepManifest(const Placement &at, int64_t s) {
  loom::runtime::StepManifest parsed = parseStepManifest(at, s);
  Manifest m;
  m.properties = std::move(parsed.properties);
  for (const loom::runtime::StepTensor &t : parsed.tensors)
    m.tensors.push_back(allocateTensor(t));
  return m;
}

Options parseOptions(const Placement &at, int argc, char **argv,
                     const Manifest &m) {
  Options o;
  auto need = [&](int &i) -> std::string {
    if (i + 1 >= argc)
      fail(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  auto integer = [&](int &i) -> int64_t {
    std::string flag = argv[i], text = need(i);
    char *end = nullptr;
    long long v = std::strtoll(text.c_str(), &end, 10);
    if (end == text.c_str() || *end || v < 0)
      fail(flag + " expects a non-negative integer, got '" + text + "'");
    return v;
  };
  auto format = [&](int &i) {
    std::string flag = argv[i], name = need(i);
    loom::runtime::TokenFormat parsed;
    if (!loom::runtime::parseTokenFormat(name, parsed))
      fail(flag + " expects " +
           std::string(loom::runtime::getTokenFormatNames()) + ", got '" +
           name + "'");
    return parsed;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--steps")
      o.steps = integer(i);
    else if (a == "--seq")
      o.seq = integer(i);
    else if (a == "--batch")
      o.batch = integer(i);
    else if (a == "--seed")
      o.seed = integer(i);
    else if (a == "--checkpoint-every")
      o.checkpointEvery = integer(i);
    else if (a == "--keep-checkpoints")
      o.keepCheckpoints = integer(i);
    else if (a == "--lr") {
      std::string text = need(i);
      char *end = nullptr;
      o.lr = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end || !(o.lr > 0))
        fail("--lr expects a positive number, got '" + text + "'");
    } else if (a == "--data")
      o.data = need(i);
    else if (a == "--input") {
      std::string text = need(i);
      size_t equals = text.find('=');
      if (equals == 0 || equals == std::string::npos || equals + 1 == text.size())
        fail("--input expects NAME=FILE.npy, got '" + text + "'");
      if (!o.inputs.emplace(text.substr(0, equals), text.substr(equals + 1))
               .second)
        fail("--input " + text.substr(0, equals) + " is given twice");
    }
    else if (a == "--val-data")
      o.valData = need(i);
    else if (a == "--val-data-format")
      o.valFormat = format(i);
    else if (a == "--data-split") {
      std::string text = need(i);
      char *end = nullptr;
      o.dataSplit = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end || !(o.dataSplit > 0 && o.dataSplit < 1))
        fail("--data-split expects the held-out fraction of --data, in (0, "
             "1), got '" +
             text + "'");
    } else if (a == "--eval-every")
      o.evalEvery = integer(i);
    else if (a == "--eval-batches") {
      o.evalBatches = integer(i);
      if (o.evalBatches < 1)
        fail("--eval-batches expects 1 or more batches");
    } else if (a == "--data-format")
      o.dataFormat = format(i);
    else if (a == "--log")
      o.log = need(i);
    else if (a == "--checkpoint")
      o.checkpoint = need(i);
    else if (a == "--trace")
      o.trace = need(i);
    else if (a == "--profile")
      o.profile = need(i);
    else if (a == "--resume")
      o.resume = true;
    else if (a == "--init")
      o.init = need(i);
    else if (a == "--help" || a == "-h") {
      if (at.rank == 0)
        std::printf(
            "usage: %s --data FILE [--data-format auto|bytes|uint16|uint32|"
            "llmc|npy]\n       [--input NAME=FILE.npy (an input other than "
            "tokens, one sample a row)]\n       [--steps N] [--seq S] [--batch B] "
            "[--seed K] [--lr X]\n       [--log metrics.jsonl] "
            "[--checkpoint DIR [--checkpoint-every N] [--resume]\n"
            "       [--keep-checkpoints K (default 3; 0 keeps all)]] "
            "[--init CHECKPOINT (its parameters, at step 0)]\n       "
            "[--val-data FILE [--val-data-format F] | --data-split FRACTION] "
            "[--eval-every K] [--eval-batches N (default 4)]\n       "
            "[--trace trace.json]\n       [--profile profile.json (per op "
            "id, for loomc --profile)]\nThe step was compiled for:\n%s",
            argv[0], manifestText(at, at.stage));
      loomrt_finalize();
      std::exit(0);
    } else
      fail("unknown flag '" + a + "' (see --help)");
  }
  if ((o.resume || o.checkpointEvery || o.keepCheckpoints >= 0) &&
      o.checkpoint.empty())
    fail("--resume, --checkpoint-every and --keep-checkpoints need "
         "--checkpoint DIR");
  if (o.keepCheckpoints < 0)
    o.keepCheckpoints = 3;
  if (!o.valData.empty() && o.dataSplit > 0)
    fail("--val-data and --data-split both name the held-out data: give "
         "one");
  if ((o.evalEvery || o.evalBatches > 0) && !o.evaluates())
    fail("--eval-every and --eval-batches need held-out data: --val-data "
         "FILE or --data-split FRACTION");
  bool hasEvaluation = at.pipelineStages
                           ? &loom_pipeline_stages_eval &&
                                 loom_pipeline_packed_eval &&
                                 loom_pipeline_manifests_eval &&
                                 loom_pipeline_stages_eval == at.pipelineStages
                           : loom_step_packed_eval && loom_step_manifest_eval;
  if (o.evaluates() && !hasEvaluation)
    fail("this trainer has no evaluation step; compile it with loomc --eval "
         "to use --val-data or --data-split");
  if (o.evalBatches < 0)
    o.evalBatches = 4;
  if (o.valFormat != loom::runtime::TokenFormat::Auto && o.valData.empty())
    fail("--val-data-format names the format of --val-data FILE, which is "
         "not given");
  // The evaluation step's ops would be timed under the training step's op
  // ids.
  if (o.evaluates() && !o.profile.empty())
    fail("--profile times the training step; give it without --val-data "
         "or --data-split");
  if (o.resume && !o.init.empty())
    fail("--init starts a run from a checkpoint's parameters and --resume "
         "continues one: give one of them");
  if (!o.profile.empty()) {
    // Checked now, not after the run it records.
    if (o.steps < 1)
      fail("--profile needs --steps 1 or more");
    std::error_code ec;
    std::filesystem::path where = std::filesystem::absolute(o.profile, ec);
    if (ec || std::filesystem::is_directory(where, ec) ||
        !std::filesystem::is_directory(where.parent_path(), ec))
      fail("--profile " + o.profile +
           ": expected a file in an existing directory");
  }
  if (o.lr == 0) {
    auto compiled = m.properties.find("lr");
    o.lr = compiled == m.properties.end() ? 0
                                          : std::atof(compiled->second.c_str());
  }
  if (!(o.lr > 0))
    fail("--lr must be positive");
  return o;
}

// -- Initialisation ---------------------------------------------------------

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001b3ull;
  return h;
}

/// Element `i` of parameter `name` (documented in docs/Runtime.md): names
/// ending in "norm" are 1; others are N(0, 1) / sqrt(last dimension), from
/// two splitmix64 draws through Box-Muller.
float initialValue(const Tensor &t, uint64_t seed, int64_t i) {
  if (t.name.size() >= 4 && t.name.compare(t.name.size() - 4, 4, "norm") == 0)
    return 1.0f;
  uint64_t key = splitmix64(seed) ^ fnv1a(t.name);
  double u1 = (double(splitmix64(key + 2 * uint64_t(i)) >> 11) + 1.0) /
              9007199254740993.0;
  double u2 =
      double(splitmix64(key + 2 * uint64_t(i) + 1) >> 11) / 9007199254740992.0;
  double normal = std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2);
  return float(normal / std::sqrt(double(t.full.empty() ? 1 : t.full.back())));
}

/// This rank's part of a full tensor given element by element: the whole
/// tensor if it is replicated, else the flat shard [d*L, d*L+L) of its data
/// rank d, zero-padded past the end (bf16 values rounded to nearest even).
template <typename Fn>
void fillLocal(const Placement &at, Tensor &t, Fn fullValue) {
  int64_t offset = t.sharded() ? at.dataRank * t.localCount : 0;
  auto value = [&](int64_t i) {
    return offset + i < t.fullCount ? fullValue(offset + i) : 0.0f;
  };
  if (t.dtype == "bf16")
    for (int64_t i = 0; i < t.localCount; ++i)
      t.bf16()[i] = loom::floatToBf16(value(i));
  else
    for (int64_t i = 0; i < t.localCount; ++i)
      t.f32()[i] = value(i);
}

/// The full tensor on rank 0 as f32 (other ranks get an empty vector).
std::vector<float> gatherFull(const Placement &at, Tensor &t) {
  // f32 is read in place; bf16 is widened (exactly) first.
  std::vector<float> widened;
  const float *local = t.f32();
  if (t.dtype == "bf16") {
    widened.resize(t.localCount);
    for (int64_t i = 0; i < t.localCount; ++i)
      widened[i] = loom::bf16ToFloat(t.bf16()[i]);
    local = widened.data();
  }
  if (!t.sharded())
    return at.rank == 0 ? std::vector<float>(local, local + t.fullCount)
                        : std::vector<float>();
  std::vector<float> all(at.rank == 0 ? t.localCount * at.worldSize : 0);
  loomrt_gather_f32(local, t.localCount, all.data(), 0);
  all.resize(at.rank == 0 ? t.fullCount : 0);
  return all;
}

// -- Data ---------------------------------------------------------------------

/// The smallest vocabulary the step reads its tokens and labels with
/// (their manifests' `below=N`, over every stage of a pipeline), or 0.
int64_t tokenBound(const Placement &at) {
  int64_t bound = 0;
  for (const loom::runtime::StepTensor &t : getAllStageTensors(at))
    if (t.isArgument && t.role == "input" && t.bound > 0 &&
        (t.name == "tokens" || t.name == "labels"))
      bound = bound ? std::min(bound, t.bound) : t.bound;
  return bound;
}

/// Opens a token file and checks every token against the model's
/// vocabulary.
void openTokenData(const Placement &at, const std::string &path,
                   loom::runtime::TokenFormat format,
                   loom::runtime::TokenData &data) {
  if (std::string error = data.open(path, format); !error.empty())
    fail(error);
  // Without a vocabulary recorded, the ids must still fit the step's i32.
  int64_t bound = tokenBound(at);
  int64_t bad = data.findOutOfRange(bound ? bound : int64_t(1) << 31);
  if (bad >= 0)
    fail("data file " + path + " (" + data.describe() + "): token " +
         std::to_string(data[bad]) + " at token offset " + std::to_string(bad) +
         " (byte " + std::to_string(data.getByteOffset(bad)) + ") is not " +
         (bound ? "below the model's vocabulary of " + std::to_string(bound)
                : std::string("an id the step's i32 tokens hold")));
}

/// The tokens [begin, begin + count) of a file: the training data, or the
/// held-out data.
struct TokenSpan {
  const loom::runtime::TokenData *data = nullptr;
  int64_t begin = 0, count = 0;
  int64_t operator[](int64_t i) const { return (*data)[begin + i]; }
};

/// Checks that `span` (named `what`) holds one step's sequences (no two of
/// a step are the same tokens).
void checkSpanLength(const Placement &at, const std::string &what,
                     const TokenSpan &span, int64_t batch, int64_t seq) {
  // At least two windows, so that the span windows start in is not empty.
  int64_t needed = std::max(at.dataWorld * batch * seq + 1, seq + 2);
  if (span.count < needed)
    fail(what + " holds " + std::to_string(span.count) + " tokens (" +
         span.data->describe() + "); one step's " +
         std::to_string(at.dataWorld * batch) + " sequences of " +
         std::to_string(seq) + " need at least " + std::to_string(needed));
}

/// Fills tokens and labels for `step`: sequence b of this rank is global
/// sequence g = (step * world + rank) * batch + b, starting at token
/// (g * seq) mod (count - seq - 1) of `span`; labels are the next tokens.
void fillBatch(const Placement &at, const TokenSpan &span, int64_t step,
               Tensor *tokens, Tensor *labels, int64_t batch, int64_t seq) {
  int64_t windows = span.count - seq - 1;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t g = (step * at.dataWorld + at.dataRank) * batch + b;
    int64_t start = (g * seq) % windows;
    for (int64_t t = 0; t < seq; ++t) {
      if (tokens)
        tokens->i32()[b * seq + t] = int32_t(span[start + t]);
      if (labels)
        labels->i32()[b * seq + t] = int32_t(span[start + t + 1]);
    }
  }
}

/// The evaluation step (loomc --eval) and the buffers it is called with:
/// the training step's parameters (by name, at their current storage), and
/// its own batch and loss. A pipeline stage's takes the tokens (the first),
/// the labels and returns the loss (the last), or neither.
struct Evaluation {
  void (*packed)(void **) = nullptr;
  std::vector<Tensor> own;
  /// For each of the step's tensors: the training tensor it reads, or
  /// null for one of `own`.
  std::vector<Tensor *> shared;
  std::vector<void *> buffers;
  Tensor *tokens = nullptr, *labels = nullptr, *loss = nullptr;
};

/// Reads this rank's evaluation step's manifest and matches its parameters
/// with the training step's arguments `argByKey` (same names, local shapes
/// and types: placed and sharded alike).
void setUpEvaluation(const Placement &at,
                     const std::map<std::string, Tensor *> &argByKey,
                     int64_t batch, int64_t seq, Evaluation &e) {
  e.packed = at.pipelineStages ? loom_pipeline_packed_eval[at.stage]
                               : loom_step_packed_eval;
  loom::runtime::StepManifest parsed;
  std::string error;
  if (!loom::runtime::StepManifest::parse(
          at.pipelineStages ? loom_pipeline_manifests_eval[at.stage]
                            : loom_step_manifest_eval,
          parsed, error))
    fail("the evaluation step's manifest is malformed: " + error);
  e.own.reserve(parsed.tensors.size());
  for (const loom::runtime::StepTensor &t : parsed.tensors) {
    std::string key = t.role + "." + t.name;
    if (t.isArgument && t.role == "param") {
      auto it = argByKey.find(key);
      if (it == argByKey.end() || it->second->local != t.localShape ||
          it->second->dtype != t.dtype)
        fail("the evaluation step's parameter '" + t.name + "' (" + t.dtype +
             " " + shapeText(t.localShape) +
             ") is not one of the training step's");
      e.shared.push_back(it->second);
      continue;
    }
    bool input = t.isArgument && t.role == "input" &&
                 (t.name == "tokens" || t.name == "labels");
    if (!input && !(!t.isArgument && t.role == "loss"))
      fail("the evaluation step takes parameters, tokens and labels and "
           "returns the loss; it has " +
           std::string(t.isArgument ? "argument " : "result ") + key);
    e.own.push_back(allocateTensor(t));
    e.shared.push_back(nullptr);
  }
  for (Tensor &t : e.own)
    (t.role == "loss" ? e.loss : t.name == "tokens" ? e.tokens : e.labels) = &t;
  bool first = !at.pipelineStages || at.stage == 0;
  bool last = !at.pipelineStages || at.stage == at.pipelineStages - 1;
  if ((first && !e.tokens) || (last && (!e.labels || !e.loss)))
    fail("the evaluation step must take 'tokens' and 'labels' and return "
         "the loss");
  // Its batch is cut as the training step's is.
  for (Tensor *t : {e.tokens, e.labels})
    if (t &&
        (t->dtype != "i32" || t->local != std::vector<int64_t>{batch, seq}))
      fail("the evaluation step's '" + t->name + "' is " + t->dtype + " " +
           shapeText(t->local) + "; the training step's batch is i32 " +
           std::to_string(batch) + "x" + std::to_string(seq));
  if (e.loss && (e.loss->localCount != 1 ||
                 (e.loss->dtype != "f32" && e.loss->dtype != "bf16")))
    fail("the evaluation step's loss is " + e.loss->dtype + " " +
         shapeText(e.loss->local) +
         "; the trainer reads an f32 or bf16 "
         "scalar");
}

/// The held-out loss: the mean of the evaluation step's losses over the
/// first `batches` batches of `span` (the same batches every time).
double evaluate(const Placement &at, Evaluation &e, const TokenSpan &span,
                int64_t batches, int64_t batch, int64_t seq) {
  double sum = 0;
  for (int64_t i = 0; i < batches; ++i) {
    fillBatch(at, span, i, e.tokens, e.labels, batch, seq);
    // A parameter's storage moves when the step returns it anew.
    e.buffers.clear();
    size_t own = 0;
    for (Tensor *t : e.shared)
      e.buffers.push_back(t ? t->buffer() : e.own[own++].buffer());
    e.packed(e.buffers.data());
    loomrt_step_sync();
    // The step averages its loss over the ranks (a pipeline's over its
    // replicas, on the last stage, which gives it to every rank).
    double loss = e.loss ? e.loss->get(0) : 0.0;
    if (at.pipelineStages) {
      double mine = at.dataRank == 0 ? loss : 0.0;
      loomrt_allreduce_f64(&mine, &loss, 1, LOOMRT_SUM);
    }
    sum += loss;
  }
  return sum / double(batches);
}

// -- Checkpoints --------------------------------------------------------------

/// Drops the lines of the metrics log `path` for steps from `first` on (a
/// trainer killed after logging them redoes them on --resume), and a last
/// line cut short. Rewrites the log durably when it changes.
std::string trimMetricsLog(const std::string &path, int64_t first) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode))
    return "";
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof())
    return "cannot read " + path;
  std::string kept;
  size_t begin = 0;
  for (size_t end; (end = text.find('\n', begin)) != std::string::npos;
       begin = end + 1) {
    std::string line = text.substr(begin, end - begin + 1);
    long long step = 0;
    if (std::sscanf(line.c_str(), "{\"step\": %lld", &step) == 1 &&
        step >= first)
      continue;
    kept += line;
  }
  if (kept.size() == text.size())
    return "";
  return writeFileDurably(path, kept);
}

std::string checkpointFile(const std::string &role, const std::string &name) {
  std::string file = role + "." + name + ".npy";
  for (char &c : file)
    if (c == '/')
      c = '_';
  return file;
}

/// A pipeline's checkpoint: every stage's parameters and state, each
/// written once (by the first stage that has it) under its name, as a
/// single-stage trainer's would be, so that a trainer with any other stage
/// or replica count loads it. Each tensor goes to rank 0 by a gather of
/// one shard's size from every rank: its stage's replicas send their
/// shards (or the whole tensor, if it is not sharded), the other ranks
/// zeros.
void saveStages(const Placement &at, CheckpointManifest &cm,
                std::vector<Tensor *> &saved, const std::string &tmp,
                std::string &error) {
  std::map<std::string, std::pair<int64_t, loom::runtime::StepTensor>> owners;
  for (int64_t s = 0; s < at.pipelineStages; ++s)
    for (loom::runtime::StepTensor &t : parseStepManifest(at, s).tensors)
      if (t.isArgument && (t.role == "param" || t.role == "state"))
        owners.try_emplace(t.role + "." + t.name, s, std::move(t));
  std::map<std::string, Tensor *> mine;
  for (Tensor *t : saved)
    mine[t->role + "." + t->name] = t;
  for (auto &[key, owner] : owners) {
    const loom::runtime::StepTensor &desc = owner.second;
    // Each rank sends what it holds: its shard of L elements (elements
    // [d L, d L + L) of the tensor, zero-padded), or the whole tensor.
    int64_t shard = desc.getLocalCount();
    std::vector<float> local(shard, 0.0f);
    auto it = mine.find(key);
    if (owner.first == at.stage && it != mine.end()) {
      Tensor &t = *it->second;
      for (int64_t i = 0; i < shard; ++i)
        local[i] =
            t.dtype == "bf16" ? loom::bf16ToFloat(t.bf16()[i]) : t.f32()[i];
    }
    std::vector<float> all(at.rank == 0 ? shard * at.worldSize : 0);
    loomrt_gather_f32(local.data(), shard, all.data(), 0);
    std::string file = checkpointFile(desc.role, desc.name);
    cm.tensors.push_back({desc.name, desc.role, file, desc.fullShape});
    if (at.rank == 0 && error.empty()) {
      // Stage s's replicas are ranks s * D ... s * D + D - 1: their shards
      // end to end, less the padding, are the tensor (or the first's copy).
      error = writeNpyF32(tmp + "/" + file, desc.fullShape,
                          all.data() + owner.first * at.dataWorld * shard);
      if (cm.tensors.size() == 1 || cm.tensors.size() == owners.size())
        checkpointCrashPoint();
    }
  }
}

void saveCheckpoint(const Placement &at, const Options &o, Manifest &m,
                    std::vector<Tensor *> &saved, int64_t step) {
  CheckpointManifest cm;
  cm.step = step;
  cm.worldSize = at.worldSize;
  cm.zeroStage = std::atoll(m.properties["zero_stage"].c_str());
  cm.source = m.properties["source"];
  // Rank 0 writes; every rank takes part in the gathers. An error removes
  // the unfinished checkpoint, so `latest` still names a complete one.
  std::string tmp, error;
  if (at.rank == 0) {
    error = beginCheckpoint(o.checkpoint, step, tmp);
    checkpointCrashPoint();
  }
  if (at.pipelineStages) {
    saveStages(at, cm, saved, tmp, error);
  } else
    for (Tensor *t : saved) {
      std::vector<float> full = gatherFull(at, *t);
      cm.tensors.push_back(
          {t->name, t->role, checkpointFile(t->role, t->name), t->full});
      if (at.rank == 0 && error.empty()) {
        error = writeNpyF32(tmp + "/" + checkpointFile(t->role, t->name),
                            t->full, full.data());
        if (cm.tensors.size() == 1 || cm.tensors.size() == saved.size())
          checkpointCrashPoint();
      }
    }
  if (at.rank == 0) {
    if (error.empty())
      error = writeManifest(tmp + "/manifest.json", cm);
    checkpointCrashPoint();
    if (error.empty())
      error = commitCheckpoint(o.checkpoint, step, tmp);
    // The checkpoint is in place: a checkpoint that could not be pruned is
    // a warning, not the end of the run.
    if (error.empty())
      if (std::string pruning =
              pruneCheckpoints(o.checkpoint, o.keepCheckpoints);
          !pruning.empty())
        std::fprintf(stderr, "trainer: warning: --keep-checkpoints: %s\n",
                     pruning.c_str());
    if (!error.empty()) {
      std::error_code ec;
      if (!tmp.empty())
        std::filesystem::remove_all(tmp, ec);
      fail("checkpoint at step " + std::to_string(step) + ": " + error);
    }
  }
  loomrt_barrier();
}

/// Reads the checkpoint `dir` (a step directory) into `tensors`, each
/// rank its shard. `flag` names the option in messages.
void loadTensors(const std::string &flag, const std::string &dir,
                 const CheckpointManifest &cm, const Placement &at,
                 const std::vector<Tensor *> &tensors) {
  std::map<std::string, const CheckpointTensor *> byKey;
  for (const CheckpointTensor &t : cm.tensors)
    byKey[t.role + "." + t.name] = &t;
  for (Tensor *t : tensors) {
    auto it = byKey.find(t->role + "." + t->name);
    if (it == byKey.end())
      fail(flag + ": " + dir + " has no " + t->role + " '" + t->name + "'");
    if (it->second->shape != t->full)
      fail(flag + ": " + t->role + " '" + t->name + "' has shape " +
           shapeText(it->second->shape) + " in " + dir + ", the step expects " +
           shapeText(t->full));
    std::vector<float> full;
    if (std::string error =
            readNpyF32(dir + "/" + it->second->file, t->full, full);
        !error.empty())
      fail(flag + ": " + error);
    fillLocal(at, *t, [&](int64_t i) { return full[i]; });
  }
}

/// The checkpoint `root` names: its `latest`, or `root` itself when it is
/// a step directory (it holds a manifest.json).
std::string readCheckpointManifest(const std::string &flag,
                                   const std::string &root,
                                   CheckpointManifest &cm) {
  std::string dir = root;
  struct stat info;
  if (::stat((root + "/manifest.json").c_str(), &info) != 0)
    if (std::string error = findLatestCheckpoint(root, dir); !error.empty())
      fail(flag + ": " + error);
  if (std::string error = readManifest(dir + "/manifest.json", cm);
      !error.empty())
    fail(flag + ": " + error);
  return dir;
}

int64_t loadCheckpoint(const Placement &at, const Options &o,
                       std::vector<Tensor *> &saved) {
  CheckpointManifest cm;
  std::string dir = readCheckpointManifest("--resume", o.checkpoint, cm);
  // A pipeline's stage loads its own part of the checkpoint.
  if (!at.pipelineStages && cm.tensors.size() != saved.size())
    fail("--resume: " + dir + " holds " + std::to_string(cm.tensors.size()) +
         " tensors; this trainer's step has " + std::to_string(saved.size()));
  loadTensors("--resume", dir, cm, at, saved);
  return cm.step;
}

/// --init: this rank's parameters from a checkpoint of any world size (the
/// optimizer state starts at zero, the run at step 0). A parameter of the
/// checkpoint that no stage of the step has is an error: a name that does
/// not match would otherwise train from the default initialisation.
void initParameters(const Placement &at, const Options &o,
                    std::vector<Tensor *> &saved) {
  CheckpointManifest cm;
  std::string dir = readCheckpointManifest("--init", o.init, cm);
  std::vector<Tensor *> params;
  for (Tensor *t : saved)
    if (t->role == "param")
      params.push_back(t);
  std::set<std::string> known;
  for (const loom::runtime::StepTensor &t : getAllStageTensors(at))
    if (t.isArgument && t.role == "param")
      known.insert(t.name);
  std::string unknown;
  int unknownCount = 0;
  for (const CheckpointTensor &t : cm.tensors)
    if (t.role == "param" && !known.count(t.name) && ++unknownCount <= 5)
      unknown += (unknown.empty() ? "'" : ", '") + t.name + "'";
  if (unknownCount)
    fail("--init: " + dir + " has " + std::to_string(unknownCount) +
         " parameter(s) the step does not: " + unknown +
         (unknownCount > 5 ? ", ..." : ""));
  loadTensors("--init", dir, cm, at, params);
}

/// The resident set now (/proc/self/statm), or -1.
int64_t residentBytes() {
  FILE *statm = std::fopen("/proc/self/statm", "r");
  if (!statm)
    return -1;
  long long pages = -1, resident = -1;
  int read = std::fscanf(statm, "%lld %lld", &pages, &resident);
  std::fclose(statm);
  return read == 2 ? resident * int64_t(sysconf(_SC_PAGESIZE)) : -1;
}

int64_t peakResidentBytes() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return int64_t(usage.ru_maxrss) * 1024;
}

/// The features of `loom_cpu_features` this CPU lacks, comma-separated: a
/// step compiled for them would die by SIGILL at its first such
/// instruction. Checked before MPI starts and before any compiled code runs.
std::string missingCpuFeatures() {
  std::string missing;
#if defined(__x86_64__) || defined(__i386__)
  if (!loom_cpu_features)
    return missing;
  __builtin_cpu_init();
  std::string required = std::string(",") + loom_cpu_features + ",";
#define LOOM_CHECK_FEATURE(name)                                               \
  if (required.find("," name ",") != std::string::npos &&                      \
      !__builtin_cpu_supports(name))                                           \
    missing += (missing.empty() ? "" : ",") + std::string(name);
  LOOM_X86_CPU_FEATURES(LOOM_CHECK_FEATURE)
#undef LOOM_CHECK_FEATURE
#endif
  return missing;
}

} // namespace

int main(int argc, char **argv) {
  // The compute thread is measured on its own; threads MPI starts are not.
  loomrt_heap_name_thread();
  if (std::string missing = missingCpuFeatures(); !missing.empty()) {
    std::fprintf(stderr,
                 "trainer: error: this trainer was compiled for CPU features "
                 "this CPU lacks: %s (compile it here, or for this CPU with "
                 "loomc --cpu and --cpu-features)\n",
                 missing.c_str());
    return 1;
  }
  if (loomrt_init(&argc, &argv) != 0)
    return 1;
  Placement at;
  at.rank = loomrt_rank();
  at.worldSize = loomrt_world_size();
  // Ranks already share the cores: one BLAS thread each unless told.
  if (at.worldSize > 1 && !std::getenv("OPENBLAS_NUM_THREADS") &&
      openblas_set_num_threads)
    openblas_set_num_threads(1);
  if (&loom_pipeline_stages) {
    at.pipelineStages = loom_pipeline_stages;
    if (at.worldSize % at.pipelineStages != 0)
      fail("this trainer is a pipeline of " +
           std::to_string(at.pipelineStages) + " stages, but runs on " +
           std::to_string(at.worldSize) + " ranks, not a multiple of them");
    // D replicas of the pipeline: rank s * D + d runs stage s of replica
    // d, and the stages of a replica train on the same batch.
    at.dataWorld = at.worldSize / at.pipelineStages;
    at.dataRank = at.rank % at.dataWorld;
    at.stage = at.rank / at.dataWorld;
  } else {
    at.dataRank = at.rank;
    at.dataWorld = at.worldSize;
  }
  if (!at.pipelineStages && !(loom_step_packed && loom_step_manifest))
    fail("this trainer has no compiled step");
  void (*stepPacked)(void **) =
      at.pipelineStages ? loom_pipeline_packed[at.stage] : loom_step_packed;
  Manifest m = readStepManifest(at, at.stage);
  Options o = parseOptions(at, argc, argv, m);
  int64_t compiledWorld = std::atoll(m.properties["world_size"].c_str());
  if (compiledWorld != at.worldSize)
    fail("this trainer was compiled for " + std::to_string(compiledWorld) +
         " ranks but runs on " + std::to_string(at.worldSize) +
         " (recompile with loomc --world-size " + std::to_string(at.worldSize) +
         ", or launch with mpirun -np " + std::to_string(compiledWorld) + ")");

  // Arguments and the results that replace them.
  std::vector<Tensor *> args, results, saved;
  Tensor *tokens = nullptr, *labels = nullptr, *loss = nullptr,
         *learningRate = nullptr;
  // Inputs filled from --input files (their samples in `samples`).
  std::vector<Tensor *> fed;
  std::map<std::string, Tensor *> argByKey;
  for (Tensor &t : m.tensors)
    (t.isArgument ? args : results).push_back(&t);
  for (Tensor *t : args) {
    argByKey[t->role + "." + t->name] = t;
    if (t->role == "input" && t->name == "tokens")
      tokens = t;
    else if (t->role == "input" && t->name == "labels")
      labels = t;
    else if (t->role == "input" && t->name == "lr" && t->localCount == 1 &&
             t->dtype == "f32")
      learningRate = t;
    else if (t->role == "input") {
      if (!o.inputs.count(t->name))
        fail("the step has an input '" + t->name +
             "' the trainer cannot fill (it fills 'tokens' and 'labels' "
             "from --data, 'lr' from --lr, others from --input " + t->name +
             "=FILE.npy)");
      fed.push_back(t);
    } else
      saved.push_back(t);
  }
  // Every --input names an input of some stage.
  if (!o.inputs.empty()) {
    std::set<std::string> inputNames;
    for (const loom::runtime::StepTensor &t : getAllStageTensors(at))
      if (t.isArgument && t.role == "input")
        inputNames.insert(t.name);
    for (const auto &[name, file] : o.inputs)
      if (!inputNames.count(name))
        fail("--input " + name + ": the step has no input '" + name + "'");
  }
  std::vector<std::pair<Tensor *, Tensor *>> replaces;
  std::map<Tensor *, Tensor *> updatedInPlace;
  for (Tensor *r : results) {
    if (r->role == "loss") {
      loss = r;
      continue;
    }
    auto it = argByKey.find(r->role + "." + r->name);
    if (it == argByKey.end())
      fail("result " + r->role + " '" + r->name + "' updates no argument");
    if (r->inPlace)
      updatedInPlace[r] = it->second;
    else
      replaces.push_back({it->second, r});
  }
  // A pipeline's first stage reads the tokens and its last returns the
  // loss; the batch's shape is the first stage's tokens'.
  std::optional<std::pair<std::vector<int64_t>, std::string>> shape;
  if (tokens)
    shape = {tokens->local, tokens->dtype};
  else if (at.pipelineStages)
    for (const loom::runtime::StepTensor &t : parseStepManifest(at, 0).tensors)
      if (t.isArgument && t.role == "input" && t.name == "tokens")
        shape = {t.localShape, t.dtype};
  bool lastStage = !at.pipelineStages || at.stage == at.pipelineStages - 1;
  // A step without tokens (a regression) takes every input from --input:
  // its batch is the first input's first dimension, and "tokens" in the
  // log count samples.
  bool samplesOnly = !shape;
  if (samplesOnly)
    for (const loom::runtime::StepTensor &t : parseStepManifest(at, 0).tensors)
      if (t.isArgument && t.role == "input" && t.name != "lr" &&
          !t.localShape.empty() && !shape)
        shape = {{t.localShape[0], 1}, "i32"};
  if (!shape || (lastStage && !loss) || shape->first.size() != 2 ||
      shape->second != "i32")
    fail("the step must take 'tokens' (i32, batch x seq) or inputs given "
         "by --input, and return a loss");
  int64_t batch = shape->first[0], seq = shape->first[1];
  if (samplesOnly && (!o.data.empty() || o.evaluates()))
    fail("this step takes no tokens: its inputs come from --input "
         "NAME=FILE.npy, not --data, --val-data or --data-split");
  if (!samplesOnly && o.data.empty())
    fail("--data FILE is required (token ids: any file's bytes, raw uint16 "
         "or uint32 ids, an llm.c shard or a .npy array; docs/Data.md)");
  std::vector<loom::runtime::SampleData> samples(fed.size());
  for (size_t i = 0; i < fed.size(); ++i) {
    Tensor &t = *fed[i];
    if (t.local.empty() || t.local[0] != batch ||
        (t.dtype != "f32" && t.dtype != "i32"))
      fail("input '" + t.name + "' is " + t.dtype + " " + shapeText(t.local) +
           "; --input fills f32 or i32 inputs whose first dimension is the "
           "batch (" + std::to_string(batch) + ")");
    std::vector<int64_t> row(t.local.begin() + 1, t.local.end());
    if (std::string error = samples[i].open(o.inputs[t.name], row, t.dtype);
        !error.empty())
      fail("--input " + t.name + ": " + error);
  }
  if ((o.seq && o.seq != seq) || (o.batch && o.batch != batch))
    fail("this trainer was compiled for --seq " + std::to_string(seq) +
         " --batch " + std::to_string(batch) + " per rank");
  for (Tensor *t : saved)
    if (t->dtype != "f32" && t->dtype != "bf16")
      fail(t->role + " '" + t->name + "' is " + t->dtype +
           "; the trainer handles f32 and bf16 parameters and state");
  if (loss && loss->dtype != "f32" && loss->dtype != "bf16")
    fail("the loss is " + loss->dtype + "; the trainer reads f32 or bf16");

  if (learningRate)
    learningRate->f32()[0] = float(o.lr);
  else if (o.lr != std::atof(m.properties["lr"].c_str()))
    fail("this step has the learning rate compiled in; --lr cannot change "
         "it");
  loom::runtime::TokenData corpus, heldOutFile;
  if (!samplesOnly)
    openTokenData(at, o.data, o.dataFormat, corpus);
  TokenSpan training{&corpus, 0, corpus.size()}, heldOut;
  if (o.dataSplit > 0) {
    int64_t held = int64_t(double(corpus.size()) * o.dataSplit);
    training.count -= held;
    heldOut = {&corpus, training.count, held};
  } else if (!o.valData.empty()) {
    openTokenData(at, o.valData, o.valFormat, heldOutFile);
    heldOut = {&heldOutFile, 0, heldOutFile.size()};
  }
  if (!samplesOnly)
    checkSpanLength(at,
                    "data file " + o.data +
                        (o.dataSplit > 0 ? " less its held-out part" : ""),
                    training, batch, seq);
  Evaluation evaluation;
  if (o.evaluates()) {
    checkSpanLength(at,
                    o.dataSplit > 0 ? "the held-out part of " + o.data
                                    : "held-out data file " + o.valData,
                    heldOut, batch, seq);
    setUpEvaluation(at, argByKey, batch, seq, evaluation);
  }
  // What a killed trainer left half-written goes first (rank 0, before any
  // rank reads a checkpoint).
  if (at.rank == 0 && !o.checkpoint.empty())
    if (std::string error = cleanCheckpointRoot(o.checkpoint); !error.empty())
      fail("--checkpoint: " + error);
  loomrt_barrier();
  int64_t first = 0;
  if (o.resume) {
    first = loadCheckpoint(at, o, saved);
    if (at.rank == 0 && !o.log.empty())
      if (std::string error = trimMetricsLog(o.log, first); !error.empty())
        fail("--log: " + error);
  } else {
    for (Tensor *t : saved)
      if (t->role == "param")
        fillLocal(at, *t,
                  [&](int64_t i) { return initialValue(*t, o.seed, i); });
      else
        fillLocal(at, *t, [](int64_t) { return 0.0f; });
    if (!o.init.empty())
      initParameters(at, o, saved);
  }

  FILE *log = nullptr;
  if (at.rank == 0 && !o.log.empty() &&
      !(log = std::fopen(o.log.c_str(), o.resume ? "a" : "w")))
    fail("cannot write --log " + o.log + ": " + std::strerror(errno));
  if (!o.trace.empty())
    loomrt_trace_to((o.trace + (at.worldSize > 1 ? "." + std::to_string(at.rank)
                                                 : std::string()))
                        .c_str());

  // The step's arguments and results: the memory the trainer owns beside
  // what the step allocates (its arena). Storage rounds each tensor up to 8
  // bytes; the step touches only `bytes`.
  std::vector<void *> buffers;
  int64_t bufferBytes = 0;
  bool onDevice = loomrt_device_used_bytes() >= 0;
  for (Tensor &t : m.tensors) {
    if (t.inPlace)
      continue;
    t.device = loomrt_device_alloc(t.bytes);
    t.upload();
    bufferBytes += t.bytes;
  }
  // An in-place result's pointer is its argument's (the step ignores it).
  auto pointerOf = [&](Tensor &t) {
    return t.inPlace ? updatedInPlace.at(&t)->buffer() : t.buffer();
  };
  for (Tensor &t : m.tensors)
    buffers.push_back(pointerOf(t));
  auto saveState = [&](int64_t done) {
    // The log's lines up to this step persist before the checkpoint that
    // --resume would trim them against.
    if (log) {
      struct stat info;
      if (std::fflush(log) != 0 ||
          (::fstat(fileno(log), &info) == 0 && S_ISREG(info.st_mode) &&
           ::fsync(fileno(log)) != 0))
        fail("cannot write --log " + o.log + ": " + std::strerror(errno));
    }
    for (Tensor *t : saved)
      t->download();
    saveCheckpoint(at, o, m, saved, done);
  };
  // A named line beside the plan: the heap OpenBLAS takes in each
  // multi-threaded GEMM call (probed once, before anything is measured).
  int64_t blasScratch = onDevice ? 0 : loomrt_blas_scratch_bytes();
  // The heap the process holds for itself: what a step allocates is
  // measured above this.
  int64_t heapBase = loomrt_heap_bytes() - bufferBytes;
  // The named lines' bases, taken with heapBase. A block stays on the line
  // that allocated it until freed, by whichever thread (a queued call the
  // communication thread runs and destroys is the runtime's), so each
  // line's figure is its own.
  int64_t otherBase = loomrt_heap_other_bytes();
  int64_t runtimeBase = loomrt_heap_scope_bytes(LOOMRT_HEAP_RUNTIME);
  int64_t kernelBase = loomrt_heap_scope_bytes(LOOMRT_HEAP_KERNELS);
  int64_t trainerBase = loomrt_heap_scope_bytes(LOOMRT_HEAP_TRAINER);
  int64_t unscopedBase = loomrt_heap_unscoped_bytes() - bufferBytes;
  // --profile: every step after the first, which pays for first calls
  // (BLAS's buffers, the modules loaded on the GPU); the only one of a
  // one-step run.
  bool profiling = !o.profile.empty();
  int64_t profileFrom = first + (o.steps > 1 ? 1 : 0);
  // What the trainer allocates between steps (the batch, the log line,
  // stdio's buffers, checkpoints) is a line of its own.
  std::optional<loom::runtime::HeapScope> between;
  for (int64_t step = first; step < first + o.steps; ++step) {
    between.emplace(LOOMRT_HEAP_TRAINER);
    // Testing hooks: "RANK:STEP" makes that rank exit (LOOM_TRAINER_DIE)
    // or stop answering (LOOM_TRAINER_STALL) at that step.
    for (const char *hook : {"LOOM_TRAINER_DIE", "LOOM_TRAINER_STALL"}) {
      long long hookRank = -1, hookStep = -1;
      const char *value = std::getenv(hook);
      if (!value ||
          std::sscanf(value, "%lld:%lld", &hookRank, &hookStep) != 2 ||
          hookRank != at.rank || hookStep != step)
        continue;
      std::fprintf(stderr, "trainer: rank %lld: %s\n", hookRank, hook);
      if (std::strcmp(hook, "LOOM_TRAINER_DIE") == 0)
        std::_Exit(3);
      std::this_thread::sleep_for(std::chrono::hours(1));
    }
    fillBatch(at, training, step, tokens, labels, batch, seq);
    // Sample b of this rank is sample g = (step * world + rank) * batch + b
    // of each --input file (modulo its length), as token windows are.
    for (size_t i = 0; i < fed.size(); ++i) {
      int64_t rowBytes = fed[i]->localCount / batch * 4;
      for (int64_t b = 0; b < batch; ++b)
        samples[i].copyRow((step * at.dataWorld + at.dataRank) * batch + b,
                           static_cast<char *>(fed[i]->data()) + b * rowBytes);
      fed[i]->upload();
    }
    if (tokens)
      tokens->upload();
    if (labels)
      labels->upload();
    if (profiling && step == profileFrom)
      loomrt_profile_start();
    between.reset();
    loomrt_take_stats();
    loomrt_host_reset_peak();
    loomrt_heap_reset_peak();
    loomrt_heap_other_reset_peak();
    loomrt_heap_scope_reset_peak(LOOMRT_HEAP_RUNTIME);
    loomrt_heap_scope_reset_peak(LOOMRT_HEAP_KERNELS);
    loomrt_heap_unscoped_reset_peak();
    loomrt_heap_scope_reset_peak(LOOMRT_HEAP_TRAINER);
    double begin = loomrt_now_us();
    stepPacked(buffers.data());
    loomrt_step_sync();
    double end = loomrt_now_us();
    if (profiling && step >= profileFrom)
      loomrt_profile_step(end - begin);
    loomrt_trace_span("step", begin, end);
    loomrt_stats stats = loomrt_take_stats();
    // Counted: the most the step's own allocations reached, plus its
    // buffers (on the GPU, the device memory it allocated).
    int64_t stepAllocBytes = loomrt_host_peak_bytes() + bufferBytes;
    // Measured on the CPU: the process heap's high-water during the step
    // above what the process held before its first step without the
    // step's buffers. That counts every allocation made for the step since
    // (the arena kept across steps, the runtime kernels' scratch, BLAS's
    // and MPI's), not only the plan's.
    int64_t peakBytes =
        onDevice ? stepAllocBytes : loomrt_heap_peak_bytes() - heapBase;
    loomrt_device_lines deviceLines = loomrt_device_named_bytes();
    // A named line: the most the threads MPI and BLAS start for
    // themselves held during the step above what they held before the
    // first step.
    int64_t otherThreadBytes =
        std::max<int64_t>(0, loomrt_heap_other_peak_bytes() - otherBase);
    // And what the runtime's collective calls kept for their bookkeeping.
    int64_t runtimeBytes =
        std::max<int64_t>(0, loomrt_heap_scope_peak_bytes(LOOMRT_HEAP_RUNTIME) -
                                 runtimeBase);
    // And the runtime kernels' scratch (attention's score blocks, the
    // embedding gradient's id lists, bf16 widening).
    int64_t kernelBytes = std::max<int64_t>(
        0, loomrt_heap_scope_peak_bytes(LOOMRT_HEAP_KERNELS) - kernelBase);
    // Not a line: the compute thread's heap outside the scopes, which holds
    // the step's own allocations (the plan) and the trainer's and the
    // runtime's bytes on that thread besides.
    int64_t computeBytes = onDevice ? stepAllocBytes
                                    : loomrt_heap_unscoped_peak_bytes() -
                                          unscopedBase;
    // What the trainer held during the step, allocated between steps.
    int64_t trainerBytes = std::max<int64_t>(
        0, loomrt_heap_scope_peak_bytes(LOOMRT_HEAP_TRAINER) - trainerBase);
    between.emplace(LOOMRT_HEAP_TRAINER);

    double local[2] = {stats.comm_us, stats.exposed_us}, worst[2];
    loomrt_allreduce_f64(local, worst, 2, LOOMRT_MAX);
    for (auto &[arg, result] : replaces) {
      std::swap(arg->storage, result->storage);
      std::swap(arg->device, result->device);
    }
    for (size_t i = 0; i < m.tensors.size(); ++i)
      buffers[i] = pointerOf(m.tensors[i]);
    float lossValue = 0;
    if (loss) {
      loss->download();
      lossValue = loss->get(0);
    }
    // A pipeline's stages, each rank's own figures side by side: its heap
    // high-water, its plan, its step time and the time it stalled at
    // waits (receives mostly). The last stage has the loss.
    std::vector<double> stageFigures;
    if (at.pipelineStages) {
      std::vector<double> mine(kStageFields * at.pipelineStages + 1, 0.0);
      double *own = &mine[kStageFields * at.stage];
      own[0] = double(peakBytes);
      own[1] = std::atof(property(m, "planned_peak_bytes"));
      own[2] = end - begin;
      own[3] = stats.exposed_us;
      own[4] = double(bufferBytes);
      own[5] = double(stats.scratch_bytes);
      own[6] = double(otherThreadBytes);
      own[7] = double(runtimeBytes);
      own[8] = double(kernelBytes);
      own[9] = double(trainerBytes);
      mine.back() = lossValue;
      // A stage's figures are its first replica's; the loss, averaged over
      // the replicas already, is the last stage's.
      if (at.dataRank != 0)
        std::fill(mine.begin(), mine.end(), 0.0);
      stageFigures.assign(mine.size(), 0.0);
      loomrt_allreduce_f64(mine.data(), stageFigures.data(),
                           int64_t(mine.size()), LOOMRT_SUM);
      lossValue = float(stageFigures.back());
    }
    if (!std::isfinite(lossValue))
      fail("step " + std::to_string(step) + ": the loss is " +
           std::to_string(lossValue));
    double seconds = (end - begin) * 1e-6;
    double tokensPerS = double(batch * seq * at.dataWorld) / seconds;
    // The held-out loss with this step's update: every --eval-every steps
    // and after the last. Its allocations are the trainer's (between
    // steps), and every rank takes part (the step gathers and averages).
    std::optional<double> valLoss;
    if (o.evaluates() && ((o.evalEvery && (step + 1) % o.evalEvery == 0) ||
                          step + 1 == first + o.steps)) {
      valLoss = evaluate(at, evaluation, heldOut, o.evalBatches, batch, seq);
      if (!std::isfinite(*valLoss))
        fail("step " + std::to_string(step) + ": the held-out loss is " +
             std::to_string(*valLoss));
    }
    if (at.rank == 0) {
      std::printf("step %lld  loss %.6f  %.0f tok/s  comm %.1f ms (exposed "
                  "%.1f ms)",
                  (long long)step, lossValue, tokensPerS, worst[0] / 1e3,
                  worst[1] / 1e3);
      if (valLoss)
        std::printf("  held-out loss %.6f", *valLoss);
      std::printf("\n");
      std::fflush(stdout);
      if (log) {
        std::fprintf(
            log,
            "{\"step\": %lld, \"loss\": %.9g, \"tokens_per_s\": %.1f, "
            "\"peak_bytes\": %lld, \"step_alloc_peak_bytes\": %lld, "
            "\"predicted_peak_bytes\": %s, "
            "\"planned_peak_bytes\": %s, "
            "\"planned_arena_bytes\": %s, "
            "\"planned_arena_bound_bytes\": %s, \"buffer_bytes\": %lld, "
            "\"blas_scratch_bytes\": %lld, "
            "\"gemm_scratch_bytes\": %lld, \"comm_scratch_bytes\": %lld, "
            "\"other_threads_bytes\": %lld, \"runtime_bytes\": %lld, "
            "\"kernel_scratch_bytes\": %lld, \"trainer_bytes\": %lld, "
            "\"compute_thread_bytes\": %lld, "
            "\"untracked_blocks\": %lld, "
            "\"rss_bytes\": %lld, \"max_rss_bytes\": %lld, "
            "\"device_bytes\": %lld, \"cublas_workspace_bytes\": %lld, "
            "\"module_bytes\": %lld, \"nccl_bytes\": %lld, "
            "\"comm_us\": %.1f, \"exposed_comm_us\": %.1f",
            (long long)step, lossValue, tokensPerS, (long long)peakBytes,
            (long long)stepAllocBytes, property(m, "predicted_peak_bytes"),
            property(m, "planned_peak_bytes"),
            property(m, "planned_arena_bytes"),
            property(m, "planned_arena_bound_bytes"), (long long)bufferBytes,
            (long long)blasScratch, (long long)loomrt_gemm_scratch_bytes(),
            (long long)stats.scratch_bytes, (long long)otherThreadBytes,
            (long long)runtimeBytes, (long long)kernelBytes,
            (long long)trainerBytes, (long long)computeBytes,
            (long long)loomrt_heap_untracked_blocks(),
            (long long)residentBytes(),
            (long long)peakResidentBytes(),
            (long long)loomrt_device_used_bytes(),
            (long long)deviceLines.cublas_workspace,
            (long long)deviceLines.modules, (long long)deviceLines.nccl,
            worst[0], worst[1]);
        if (at.pipelineStages) {
          std::fprintf(log, ", \"stages\": [");
          for (int64_t s = 0; s < at.pipelineStages; ++s) {
            const double *f = &stageFigures[kStageFields * s];
            std::fprintf(log,
                         "%s{\"peak_bytes\": %.0f, \"planned_peak_bytes\": "
                         "%.0f, \"step_us\": %.1f, \"stalled_us\": %.1f, "
                         "\"buffer_bytes\": %.0f, \"comm_scratch_bytes\": "
                         "%.0f, \"other_threads_bytes\": %.0f, "
                         "\"runtime_bytes\": %.0f, "
                         "\"kernel_scratch_bytes\": %.0f, "
                         "\"trainer_bytes\": %.0f}",
                         s ? ", " : "", f[0], f[1], f[2], f[3], f[4], f[5],
                         f[6], f[7], f[8], f[9]);
          }
          std::fprintf(log, "]");
        }
        if (valLoss)
          std::fprintf(log, ", \"val_loss\": %.9g", *valLoss);
        std::fprintf(log, "}\n");
        std::fflush(log);
      }
    }
    int64_t done = step + 1;
    if (!o.checkpoint.empty() &&
        ((o.checkpointEvery && done % o.checkpointEvery == 0) ||
         done == first + o.steps))
      saveState(done);
  }
  // --steps 0 with --checkpoint writes the initial state (a resumed one is
  // on disk already).
  if (o.steps == 0 && !o.checkpoint.empty() && !o.resume)
    saveState(first);
  if (log)
    std::fclose(log);
  if (profiling && loomrt_profile_write(o.profile.c_str()) != 0)
    fail("cannot write --profile " + o.profile);
  for (Tensor &t : m.tensors)
    loomrt_device_free(t.device);
  return loomrt_finalize();
}
