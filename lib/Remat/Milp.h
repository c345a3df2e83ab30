//===- Milp.h - small 0-1 programs solved by CBC ----------------*- C++ -*-===//
//
// The rematerialisation ILPs are small (tens to a few thousand binaries) and
// built row by row. Milp holds one, and solves it with CBC's standard driver
// (presolve, cuts, heuristics) under a wall-clock limit and a relative gap,
// from a warm start when one is given.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_REMAT_MILP_H
#define LOOM_LIB_REMAT_MILP_H

#include "llvm/ADT/ArrayRef.h"
#include <string>
#include <utility>
#include <vector>

namespace loom::remat {

class Milp {
public:
  /// A 0-1 column with objective coefficient `cost`; returns its index.
  int addBinary(double cost);
  /// Replaces a column's objective coefficient.
  void setCost(int column, double cost) { costs[column] = cost; }
  /// lo <= sum(coefficient * column) <= hi.
  void addRow(llvm::ArrayRef<std::pair<int, double>> terms, double lo,
              double hi);
  int getNumColumns() const { return int(costs.size()); }

  struct Result {
    enum Status {
      /// Solved to within the gap.
      Optimal,
      /// A limit (time or nodes) stopped the search with a feasible
      /// solution not proven optimal.
      TimeLimitFeasible,
      /// Proven infeasible.
      Infeasible,
      /// The time limit stopped the search with no solution.
      TimeLimitNoSolution
    } status = TimeLimitNoSolution;
    std::vector<double> values;
    double objective = 0, bound = 0, seconds = 0;
    /// (objective - bound) / |objective|, 0 when proven optimal.
    double gap = 0;
    /// The warm start was the best solution CBC returned.
    bool startKept = false;
    /// The result of an earlier solve of the same program (see solve).
    bool cached = false;
    bool hasSolution() const {
      return status == Optimal || status == TimeLimitFeasible;
    }
  };
  /// Minimises the objective. `start`, when not empty, is a feasible 0-1
  /// assignment of every column (CBC's MIP start). `maxNodes` >= 0 bounds
  /// the branch-and-bound nodes (a limit that, unlike the clock, stops the
  /// search at the same place on every machine).
  ///
  /// A program solved before in this process, with the same gap, node
  /// bound and start, and whose solve ended within its limits (optimal or
  /// infeasible, not stopped by the clock or the node bound), returns that
  /// result without running CBC again (`seconds` 0, `cached` set): loomc's
  /// --remat-budget-mb compiles the step once per probe of its search, each
  /// with the same layer programs and a different share of the time.
  Result solve(double timeLimitSeconds, double relativeGap,
               llvm::ArrayRef<double> start = {}, int64_t maxNodes = -1) const;

private:
  /// The program, its gap, node bound and start, as bytes.
  std::string getKey(double relativeGap, llvm::ArrayRef<double> start,
                     int64_t maxNodes) const;
  Result solveWithCbc(double timeLimitSeconds, double relativeGap,
                      llvm::ArrayRef<double> start, int64_t maxNodes) const;

  std::vector<double> costs;
  std::vector<double> rowLo, rowHi;
  std::vector<std::vector<std::pair<int, double>>> rows;
};

} // namespace loom::remat

#endif // LOOM_LIB_REMAT_MILP_H
