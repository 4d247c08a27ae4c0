#pragma once
// Extraction: one e-node chosen per needed class, so that the chosen e-nodes form an
// acyclic graph computing the roots, at the least cost. The cost is the DAG cost:
// every chosen e-node is paid once however many others read it (tree cost pays a
// shared node once per reader, so it never prefers a merged operator read through two
// projections). Two extractors:
//   - greedy: bottom-up, each class keeps the set of e-nodes its best choice needs and
//     picks the e-node whose set (itself and its children's sets, shared nodes once)
//     costs least; a cyclic result is repaired by banning an e-node on the cycle. Then
//     a local search on the whole selection's DAG cost: one class switched to another
//     e-node, or every needed class that could read one new class switched to read it
//     at once (an operator shared by several classes, paid once), the classes a move
//     newly needs choosing given what is needed already; taken largest saving first
//     while the cost drops and the selection stays acyclic;
//   - ilp: exact, an integer program solved by CBC (COIN-OR, from Debian): a binary
//     per e-node, each root class needs a chosen e-node, a chosen e-node needs one of
//     every child class; warm-started from the greedy result, cycles cut lazily (a
//     cycle found in the solution forbids choosing all of its e-nodes), capped in
//     time, with its optimality gap reported.
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "egraph/egraph.h"

namespace isomer::eg {

constexpr double kInfiniteCost = std::numeric_limits<double>::infinity();

// Per class, the cost of each of its e-nodes (in EClass::nodes order); kInfiniteCost
// marks an e-node that must not be chosen.
using CostTable = std::unordered_map<ClassId, std::vector<double>>;

struct Extraction {
  std::unordered_map<ClassId, uint32_t> choice;  // class -> index of its chosen e-node
  double cost = 0;                               // DAG cost of what the roots need
  std::string method;                            // "greedy" or "ilp"
  double plain_cost = -1;   // greedy: the bottom-up pass's cost, before the local search
  size_t moves = 0;         // greedy: local-search moves taken
  double seconds = 0;
  bool optimal = false;     // ilp: proved optimal
  double gap = -1;          // ilp: (cost - lower bound) / cost; -1 when not known
  double lower_bound = -1;  // ilp
  size_t cycles_cut = 0;    // constraints or bans added against cycles
  std::string note;         // why the ILP gave up, if it did
};

// The DAG cost of `choice` below `roots`; kInfiniteCost if it is incomplete or cyclic.
double dag_cost(const EGraph& g, const std::unordered_map<ClassId, uint32_t>& choice,
                const std::vector<ClassId>& roots, const CostTable& costs);

// A cycle among the chosen e-nodes reachable from `roots` (the classes on it), or empty.
std::vector<ClassId> find_cycle(const EGraph& g, const std::unordered_map<ClassId, uint32_t>& choice,
                                const std::vector<ClassId>& roots);

struct GreedyOptions {
  bool improve = true;        // run the local search after the bottom-up pass
  int max_rounds = 50;        // rounds over every move
  double time_limit_s = 1.0;  // the whole extraction's wall clock, for the local search
};

Extraction extract_greedy(const EGraph& g, const std::vector<ClassId>& roots, const CostTable& costs,
                          const GreedyOptions& options = {});

// nullopt if the solver fails (the greedy result stands); a result no better than
// `warm` returns `warm`'s choice with the solver's bound and gap.
std::optional<Extraction> extract_ilp(const EGraph& g, const std::vector<ClassId>& roots, const CostTable& costs,
                                      const Extraction& warm, double time_limit_s);

// The extracted values as graph values built through `b`: one per root. `inputs`
// gives the value of each Input leaf (by leaf index).
std::vector<Value> build_values(const EGraph& g, const Extraction& ex, const std::vector<ClassId>& roots,
                                GraphBuilder& b, const std::function<Value(uint32_t leaf)>& inputs);

}  // namespace isomer::eg
