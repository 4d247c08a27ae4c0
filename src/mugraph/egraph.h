#pragma once
// Abstract expressions (Mirage) and the e-graph that holds a target's.
//
// A tensor's abstract expression forgets indices except the atoms a sum runs over:
// a matmul is (sum k (* a b)), a reduction over n is (sum n a), a loop accumulator
// over atom k is (sum k ...) again (partial sums of one atom collapse: the pruning
// asks only whether a value can be part of the target, not how far along it is),
// elementwise operators map one to one; sqrt, erf, tanh, sigmoid, relu, log, max,
// min and where are uninterpreted. Sub and Neg are written with (* -1 x).
//
// The target's expressions are saturated once with Mirage's axioms (rules below,
// text like egg's); a partial μGraph's tile is kept only if its expression is
// already in the saturated e-graph, a hash-table lookup. Each axiom has a concrete
// witness in rules/mugraph_axioms.rules that the Z3 verifier proves (a test).
//
// This e-graph is deliberately small and self-contained: it only has to hold one
// region's expression. When src/egraph (the shared e-graph over the operator
// table) lands, the abstract language can become one more language there.
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace isomer::mugraph {

enum class EKind : uint8_t { Leaf, Const, Add, Mul, Div, Exp, Uf, Sum };

struct ENode {
  EKind kind = EKind::Leaf;
  int nkids = 0;
  int64_t data = 0;  // Leaf: statement id; Const: the double's bits; Uf: the Op; Sum: the atom
  std::array<int, 3> kids{-1, -1, -1};

  bool operator==(const ENode& o) const {
    return kind == o.kind && nkids == o.nkids && data == o.data && kids == o.kids;
  }
};
struct ENodeHash {
  size_t operator()(const ENode& n) const;
};

ENode leaf_node(int stmt);
ENode const_node(double v);
ENode op_node(EKind kind, std::initializer_list<int> kids, int64_t data = 0);
double const_value(const ENode& n);

struct SaturationLimits {
  size_t max_nodes = 40000;
  int max_iterations = 40;
  double max_seconds = 20;
};

struct SaturationReport {
  size_t nodes = 0, classes = 0;
  int iterations = 0;
  std::string stop;  // "saturated", "node limit", "iteration limit", "time limit"
  std::vector<std::pair<std::string, size_t>> applications;  // per axiom
};

// One of Mirage's axioms as text: "name: lhs => rhs [if ?i !in ?x]".
struct Axiom {
  std::string name;
  std::string text;
};
const std::vector<Axiom>& mirage_axioms();

class EGraph {
 public:
  // free_atoms(stmt): the atom mask of a leaf (the program's input statement).
  explicit EGraph(std::vector<uint64_t> leaf_atoms, std::vector<int64_t> atom_extents);

  int add(const ENode& n);         // canonicalizes kids; returns the class
  int lookup(const ENode& n) const;  // -1 if absent
  int find(int c) const;
  uint64_t free_atoms(int c) const { return classes_[find(c)].free; }
  size_t num_nodes() const { return memo_.size(); }
  size_t num_classes() const;

  SaturationReport saturate(const SaturationLimits& limits);
  // Every constant the e-graph holds (the target's and those folding made), sorted.
  std::vector<double> constants() const;
  // A readable term of class c (the smallest it holds), for reports and tests.
  std::string show(int c) const;

 private:
  struct EClass {
    std::vector<ENode> nodes;
    uint64_t free = 0;
  };
  void merge(int a, int b);
  void rebuild();
  ENode canon(ENode n) const;
  uint64_t node_free(const ENode& n) const;

  std::vector<uint64_t> leaf_atoms_;
  std::vector<int64_t> extents_;
  mutable std::vector<int> parent_;
  std::vector<EClass> classes_;
  std::unordered_map<ENode, int, ENodeHash> memo_;
  bool dirty_ = false;
};

}  // namespace isomer::mugraph
