//===- LoomModule.cpp - loom._loom: the compiler driver in Python ---------===//
//
// A compiled extension over lib/Driver (docs/Driver.md), so that the Python
// package compiles and reports in-process: no subprocess, the same options
// (loomc's flags, parsed by the driver), the same phases. loom/compiler.py
// is the Python face of it.
//
//===----------------------------------------------------------------------===//

#include "loom/Driver/Driver.h"
#include "loom/Runtime/StepManifest.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Target/TargetMachine.h"

#include <cstdio>
#include <unistd.h>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;
using namespace mlir;
using namespace loom::driver;

namespace {

/// What the process writes to its standard error while alive (LLVM's
/// command-line parser reports a bad value there, coll-report its table),
/// taken from the file descriptor, so that it reaches Python as text.
class StderrCapture {
public:
  StderrCapture() {
    llvm::errs().flush();
    std::fflush(stderr);
    if (llvm::sys::fs::createTemporaryFile("loom-stderr", "txt", fd, path))
      return;
    saved = ::dup(2);
    if (saved < 0 || ::dup2(fd, 2) < 0) {
      ::close(fd);
      fd = -1;
    }
  }
  /// Restores standard error and returns what was written to it.
  std::string finish() {
    if (fd < 0)
      return "";
    llvm::errs().flush();
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    ::close(fd);
    fd = -1;
    std::string text;
    if (auto buffer = llvm::MemoryBuffer::getFile(path))
      text = (*buffer)->getBuffer().str();
    llvm::sys::fs::remove(path);
    return text;
  }
  ~StderrCapture() { finish(); }

private:
  int fd = -1, saved = -1;
  llvm::SmallString<128> path;
};

/// A context with every dialect and translation the phases use.
std::unique_ptr<MLIRContext> makeContext() {
  DialectRegistry registry;
  registerCompileDialects(registry);
  auto context = std::make_unique<MLIRContext>(registry);
  context->loadAllAvailableDialects();
  return context;
}

/// Parses `source` (named `name` in diagnostics), reporting to `handler`'s
/// stream; null on a parse error.
OwningOpRef<ModuleOp> parse(const std::string &source, const std::string &name,
                            MLIRContext &context, llvm::SourceMgr &sourceMgr) {
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(source, name), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, &context);
}

/// The manifest a lowered module exports (loom_step_manifest, or one per
/// stage, loom_step_manifest_stage<s>), as dictionaries.
py::list manifests(ModuleOp module) {
  py::list result;
  for (auto global : module.getOps<LLVM::GlobalOp>()) {
    if (!global.getSymName().starts_with("loom_step_manifest"))
      continue;
    auto text = dyn_cast_or_null<StringAttr>(global.getValueOrNull());
    if (!text)
      continue;
    loom::runtime::StepManifest manifest;
    std::string error;
    // The global holds the text with its NUL.
    std::string body = text.getValue().str();
    if (!body.empty() && body.back() == '\0')
      body.pop_back();
    if (!loom::runtime::StepManifest::parse(body, manifest, error))
      throw std::runtime_error("the trainer's manifest: " + error);
    py::dict entry;
    entry["symbol"] = global.getSymName().str();
    entry["properties"] = manifest.properties;
    py::list tensors;
    for (const loom::runtime::StepTensor &t : manifest.tensors) {
      py::dict tensor;
      tensor["kind"] = t.isArgument ? "arg" : "result";
      tensor["role"] = t.role;
      tensor["name"] = t.name;
      tensor["dtype"] = t.dtype;
      tensor["local_shape"] = t.localShape;
      tensor["full_shape"] = t.fullShape;
      tensor["in_place"] = t.inPlace;
      tensors.append(tensor);
    }
    entry["tensors"] = tensors;
    result.append(entry);
  }
  return result;
}

/// Compiles `source` with loomc's `flags` to their --emit point; returns
/// (True, result) or (False, diagnostics). The result holds `text` (an
/// intermediate module or LLVM IR), `path` (the object or trainer written
/// to `output`), `plans` (each stage's memory plan) and `manifests` (the
/// lowered step's).
py::tuple compile(const std::string &source,
                  const std::vector<std::string> &flags,
                  const std::string &output, const std::string &name) {
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  auto fail = [&] { return py::make_tuple(false, diagnostics); };
  Reporter reporter("loom", os);
  CompileOptions options;
  std::string error;
  StderrCapture parserOutput;
  bool parsed = parseCompileFlags(flags, options, error);
  // cl's messages start with the program's name, "loom: ".
  std::string printed = llvm::StringRef(parserOutput.finish()).trim().str();
  if (llvm::StringRef(printed).starts_with("loom: "))
    printed = printed.substr(6);
  if (!parsed) {
    reporter.error(printed.empty() ? error
                   : error.empty() ? printed
                                   : error + "\n" + printed);
    return fail();
  }
  options.sourceName = name;
  if (std::string problem = options.verify(); !problem.empty()) {
    reporter.error(problem);
    return fail();
  }
  bool toFile =
      options.emit == EmitPoint::Obj || options.emit == EmitPoint::Exe;
  if (toFile && output.empty()) {
    reporter.error("--emit=obj and exe write a file: give an output path");
    return fail();
  }
  std::unique_ptr<llvm::TargetMachine> machine;
  if (options.emit >= EmitPoint::Llvm) {
    machine = createTargetMachine(options, error);
    if (!machine) {
      reporter.error(error);
      return fail();
    }
  }
  std::unique_ptr<MLIRContext> context = makeContext();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, context.get(), os);
  OwningOpRef<ModuleOp> module = parse(source, name, *context, sourceMgr);
  if (!module) {
    reporter.error("the parse phase failed (see above)");
    return fail();
  }
  SmallVector<StagePlan> plans;
  {
    // The phases do not need the interpreter's lock.
    py::gil_scoped_release release;
    if (failed(compileToMlir(module, options, reporter, &plans)))
      return py::gil_scoped_acquire(), fail();
  }
  py::dict result;
  py::list planList;
  for (const StagePlan &plan : plans) {
    py::dict entry;
    entry["stage"] = plan.stage;
    entry["peak_bytes"] = plan.peakBytes;
    entry["arena_bytes"] = plan.arenaBytes;
    entry["arena_bound_bytes"] = plan.arenaBoundBytes;
    planList.append(entry);
  }
  result["plans"] = planList;
  result["text"] = py::none();
  result["path"] = py::none();
  result["manifests"] =
      options.emit >= EmitPoint::LlvmMlir ? manifests(*module) : py::list();
  if (options.emit <= EmitPoint::Ptx) {
    std::string text;
    llvm::raw_string_ostream out(text);
    if (options.emit == EmitPoint::Ptx)
      printPtx(*module, out);
    else
      module->print(out);
    result["text"] = text;
    return py::make_tuple(true, result);
  }
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateToLlvm(*module, llvmContext, reporter);
  if (!llvmModule)
    return fail();
  // As loomc: the MLIR module's memory goes back before LLVM's passes.
  module = nullptr;
  setTarget(*llvmModule, *machine);
  if (options.emit == EmitPoint::Llvm) {
    std::string text;
    llvm::raw_string_ostream out(text);
    llvmModule->print(out, nullptr);
    result["text"] = text;
    return py::make_tuple(true, result);
  }
  LogicalResult written =
      options.emit == EmitPoint::Obj
          ? emitObject(*llvmModule, *machine, options, output, reporter)
          : buildTrainer(*llvmModule, *machine, options, output, reporter);
  if (failed(written))
    return fail();
  result["path"] = output;
  return py::make_tuple(true, result);
}

/// Runs coll-report{<options>} on `source` (a step) in-process, on the
/// step's own target or, when `device` is given, after
/// loom-set-target{device profile}, and returns (True, (its JSON text, its
/// table)) or (False, diagnostics).
py::tuple report(const std::string &source, const std::string &name,
                 const std::string &device, const std::string &profile,
                 const std::string &extra) {
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  auto fail = [&] { return py::make_tuple(false, diagnostics); };
  registerCompilePasses();
  std::unique_ptr<MLIRContext> context = makeContext();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, context.get(), os);
  OwningOpRef<ModuleOp> module = parse(source, name, *context, sourceMgr);
  if (!module)
    return fail();
  llvm::SmallString<128> json;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("loom-report", "json", json)) {
    os << "loom: error: cannot create a temporary file: " << ec.message()
       << "\n";
    return fail();
  }
  PassManager pm(context.get());
  // The passes of the module's pipeline (pm is anchored on builtin.module).
  std::string pipeline =
      (device.empty()
           ? std::string()
           : "loom-set-target{device=" + device +
                 (profile.empty() ? "" : " profile=" + profile) + "},") +
      "coll-report{json=" + json.str().str() +
      (extra.empty() ? "" : " " + extra) + "}";
  StderrCapture table;
  if (failed(parsePassPipeline(pipeline, pm, os)) || failed(pm.run(*module))) {
    os << table.finish();
    llvm::sys::fs::remove(json);
    return fail();
  }
  std::string printed = table.finish();
  auto text = llvm::MemoryBuffer::getFile(json);
  llvm::sys::fs::remove(json);
  if (!text) {
    os << "loom: error: coll-report wrote no report\n";
    return fail();
  }
  return py::make_tuple(true,
                        py::make_tuple((*text)->getBuffer().str(), printed));
}

/// Runs loom-opt's passes on `source` in-process: each of `args` is a pass
/// flag as loom-opt takes it (`--canonicalize`, `--zero-partition=stage=3
/// world-size=4`), `--pass-pipeline=...`, or `--mlir-print-debuginfo`.
/// Returns (True, the printed module, the passes' remarks and warnings) or
/// (False, diagnostics, "").
py::tuple opt(const std::string &source, const std::vector<std::string> &args) {
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  auto fail = [&] { return py::make_tuple(false, diagnostics, ""); };
  registerCompilePasses();
  std::unique_ptr<MLIRContext> context = makeContext();
  PassManager pm(context.get(), ModuleOp::getOperationName(),
                 OpPassManager::Nesting::Implicit);
  pm.enableVerifier(true);
  OpPrintingFlags printing;
  for (const std::string &arg : args) {
    llvm::StringRef flag = llvm::StringRef(arg).ltrim('-');
    if (flag == "mlir-print-debuginfo") {
      printing.enableDebugInfo();
      continue;
    }
    if (flag.consume_front("pass-pipeline=")) {
      // The anchored form loom-opt takes: the passes inside it go on pm.
      flag = flag.trim().trim('\'').trim('"');
      if (!flag.consume_front("builtin.module(") || !flag.consume_back(")")) {
        os << "loom: error: --pass-pipeline: expected "
              "'builtin.module(...)', got '"
           << flag << "'\n";
        return fail();
      }
      if (failed(parsePassPipeline(flag, pm, os)))
        return fail();
      continue;
    }
    // A pass flag, added as loom-opt adds it: nested where the pass is
    // anchored on an op inside the module (func.func).
    auto [name, options] = flag.split('=');
    const PassRegistryEntry *entry = PassInfo::lookup(name);
    if (!entry)
      entry = PassPipelineInfo::lookup(name);
    if (!entry) {
      os << "loom: error: unknown pass or option '" << arg << "'\n";
      return fail();
    }
    if (failed(entry->addToPipeline(pm, options, [&](const llvm::Twine &msg) {
          os << "loom: error: " << msg << "\n";
          return failure();
        })))
      return fail();
  }
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, context.get(), os);
  OwningOpRef<ModuleOp> module = parse(source, "<stdin>", *context, sourceMgr);
  if (!module)
    return fail();
  {
    py::gil_scoped_release release;
    if (failed(pm.run(*module)))
      return py::gil_scoped_acquire(), fail();
  }
  std::string text;
  llvm::raw_string_ostream out(text);
  module->print(out, printing);
  out << "\n";
  return py::make_tuple(true, text, diagnostics);
}

} // namespace

PYBIND11_MODULE(_loom, m) {
  m.def("opt", &opt, py::arg("source"), py::arg("args"));
  m.doc() = "Loom's compiler driver (lib/Driver), in-process";
  m.def("compile", &compile, py::arg("source"), py::arg("flags"),
        py::arg("output"), py::arg("name"));
  m.def("report", &report, py::arg("source"), py::arg("name"),
        py::arg("device"), py::arg("profile"), py::arg("extra"));
}
