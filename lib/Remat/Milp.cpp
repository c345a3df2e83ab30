//===- Milp.cpp - small 0-1 programs solved by CBC ------------------------===//

#include "Milp.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>

#include "CbcModel.hpp"
#include "CbcSolver.hpp"
#include "CoinError.hpp"
#include "CoinPackedMatrix.hpp"
#include "OsiClpSolverInterface.hpp"

using namespace loom::remat;

int Milp::addBinary(double cost) {
  costs.push_back(cost);
  return int(costs.size()) - 1;
}

void Milp::addRow(llvm::ArrayRef<std::pair<int, double>> terms, double lo,
                  double hi) {
  rows.emplace_back(terms.begin(), terms.end());
  rowLo.push_back(lo);
  rowHi.push_back(hi);
}

std::string Milp::getKey(double relativeGap, llvm::ArrayRef<double> start,
                         int64_t maxNodes) const {
  std::string key;
  auto append = [&](const auto &value) {
    key.append(reinterpret_cast<const char *>(&value), sizeof(value));
  };
  auto appendAll = [&](const auto &values) {
    append(values.size());
    for (const auto &value : values)
      append(value);
  };
  append(relativeGap);
  append(maxNodes);
  appendAll(start);
  appendAll(costs);
  appendAll(rowLo);
  appendAll(rowHi);
  append(rows.size());
  for (const auto &row : rows) {
    append(row.size());
    for (auto [column, coefficient] : row) {
      append(column);
      append(coefficient);
    }
  }
  return key;
}

Milp::Result Milp::solve(double timeLimitSeconds, double relativeGap,
                         llvm::ArrayRef<double> start, int64_t maxNodes) const {
  // CbcMain1 parses its arguments into process-wide state: one solve at a
  // time. CBC reports internal failures by throwing CoinError: a failed
  // solve.
  static std::mutex cbcMutex;
  // Earlier solves that ended within their limits, by their programs;
  // dropped whole when it grows large (a long-lived process compiling many
  // models).
  static std::map<std::string, Result> solved;
  constexpr size_t kMaxSolved = 4096;
  std::string key = getKey(relativeGap, start, maxNodes);
  std::lock_guard<std::mutex> lock(cbcMutex);
  if (auto it = solved.find(key); it != solved.end()) {
    Result result = it->second;
    result.seconds = 0;
    result.cached = true;
    return result;
  }
  Result result;
  try {
    result = solveWithCbc(timeLimitSeconds, relativeGap, start, maxNodes);
  } catch (const CoinError &) {
    return Result{};
  }
  if (result.status != Result::Optimal && result.status != Result::Infeasible)
    return result;
  if (solved.size() >= kMaxSolved)
    solved.clear();
  solved.emplace(std::move(key), result);
  return result;
}

Milp::Result Milp::solveWithCbc(double timeLimitSeconds, double relativeGap,
                                llvm::ArrayRef<double> start,
                                int64_t maxNodes) const {
  auto began = std::chrono::steady_clock::now();
  int numColumns = getNumColumns();
  CoinPackedMatrix matrix(/*colordered=*/false, 0, 0);
  matrix.setDimensions(0, numColumns);
  for (const auto &row : rows) {
    std::vector<int> indices;
    std::vector<double> values;
    for (auto [column, coefficient] : row) {
      indices.push_back(column);
      values.push_back(coefficient);
    }
    matrix.appendRow(int(indices.size()), indices.data(), values.data());
  }
  std::vector<double> columnLo(numColumns, 0.0), columnHi(numColumns, 1.0);
  std::vector<double> lo = rowLo, hi = rowHi;
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  // Keep the column names: the MIP start refers to columns by name.
  solver.setIntParam(OsiNameDiscipline, 1);
  solver.loadProblem(matrix, columnLo.data(), columnHi.data(), costs.data(),
                     lo.data(), hi.data());
  for (int column = 0; column < numColumns; ++column) {
    solver.setInteger(column);
    solver.setColName(column, "x" + std::to_string(column));
  }

  CbcModel model(solver);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  CbcSolverUsefulData data;
  data.noPrinting_ = true;
  CbcMain0(model, data);
  model.setLogLevel(0);
  std::vector<std::pair<std::string, double>> mipStart;
  if (!start.empty()) {
    for (int column = 0; column < numColumns; ++column)
      mipStart.emplace_back("x" + std::to_string(column),
                            std::round(start[column]));
    model.setMIPStart(mipStart);
  }
  std::string seconds =
      llvm::formatv("{0:F3}", std::max(timeLimitSeconds, 0.01));
  std::string gap = llvm::formatv("{0:E}", std::max(relativeGap, 0.0));
  // The standard driver: presolve, cuts and heuristics, on one thread, the
  // limit counted on the wall clock.
  std::string nodes = std::to_string(maxNodes);
  std::vector<const char *> argv = {
      "loom-remat", "-log",    "0",    "-slog",         "0",
      "-timeMode",  "elapsed", "-sec", seconds.c_str(), "-ratio",
      gap.c_str()};
  if (maxNodes >= 0)
    argv.insert(argv.end(), {"-maxNodes", nodes.c_str()});
  argv.insert(argv.end(), {"-solve", "-quit"});
  CbcMain1(
      int(argv.size()), argv.data(), model, [](CbcModel *, int) { return 0; },
      data);

  Result result;
  const double *best = model.bestSolution();
  bool timedOut = model.isSecondsLimitReached() ||
                  model.isNodeLimitReached() || model.status() == 1;
  if (best) {
    result.values.assign(best, best + numColumns);
    for (double &value : result.values)
      value = std::round(value);
    result.objective = model.getObjValue();
    result.bound = model.getBestPossibleObjValue();
    result.status = timedOut && !model.isProvenOptimal()
                        ? Result::TimeLimitFeasible
                        : Result::Optimal;
    if (result.status == Result::Optimal)
      result.bound = std::min(result.bound, result.objective);
    double scale = std::max(std::abs(result.objective), 1e-12);
    result.gap = std::max(0.0, (result.objective - result.bound) / scale);
    if (!start.empty())
      result.startKept = llvm::equal(result.values, mipStart,
                                     [](double value, const auto &entry) {
                                       return value == entry.second;
                                     });
  } else {
    result.status = model.isProvenInfeasible() || !timedOut
                        ? Result::Infeasible
                        : Result::TimeLimitNoSolution;
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
          .count();
  return result;
}
