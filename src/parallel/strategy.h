#pragma once
// A graph prepared for parallelization, and strategies over it.
//
// Every operator node gets a configuration: which mesh axes cut which of its
// parallel dimensions (op_spec.h). Axes it leaves unused hold copies of its work.
// A configuration fixes the layout of each output (the dims its dimensions cut;
// partial sums over the axes of its reduction dimensions) and the layout each input
// must arrive in (not partial; copies along the axes of dimensions that do not cut
// it). Constants and graph inputs are available in any layout (weights are sliced
// when the plan is written, inputs when they are loaded); between two operators the
// producer's layout is redistributed to the consumer's (layout.h).
//
// Candidate configurations of an operator: every assignment of mesh axes to its
// dimensions whose degrees divide the extents, with the axes of one link class
// taken in order (dimension order), so that two configurations with the same
// degrees on each dimension and class are one. Index 0 is always "run whole".
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "parallel/layout.h"
#include "parallel/machine.h"
#include "parallel/op_spec.h"

namespace isomer::parallel {

struct OpConfig {
  std::vector<std::vector<int>> axes;  // per parallel dimension of the op's spec
  bool operator==(const OpConfig& o) const { return axes == o.axes; }
};

// Where an operator's input comes from.
struct Operand {
  enum class Kind { Absent, Constant, Input, Op } kind = Kind::Absent;
  int index = -1;   // Op: producer op; Input: graph input position
  int output = 0;   // Op: the producer's output
};

// A strategy: one candidate index per operator.
using Strategy = std::vector<int>;

class ParallelGraph {
 public:
  ParallelGraph(const Graph& g, const Mesh& mesh);

  const Graph& graph() const { return graph_; }
  const Mesh& mesh() const { return mesh_; }
  int size() const { return static_cast<int>(ops_.size()); }
  const Node& node(int i) const { return *ops_[static_cast<size_t>(i)]; }
  const OpSpec& spec(int i) const { return specs_[static_cast<size_t>(i)]; }
  const std::vector<OpConfig>& candidates(int i) const { return *candidates_[static_cast<size_t>(i)]; }
  const OpConfig& config(int i, int c) const { return candidates(i)[static_cast<size_t>(c)]; }
  const std::vector<Operand>& operands(int i) const { return operands_[static_cast<size_t>(i)]; }
  // Consumers of output o of op i: (op, input slot).
  const std::vector<std::pair<int, int>>& users(int i, int o) const;
  // Graph outputs produced by operators: (op, output); others (inputs, constants) cost nothing.
  const std::vector<std::pair<int, int>>& graph_outputs() const { return outputs_; }

  const std::vector<int64_t>& out_dims(int i, int o) const;
  std::vector<int64_t> in_dims(int i, int j) const;
  size_t elem_size(int i, int o) const;  // bytes per element of output o
  size_t in_elem_size(int i, int j) const;

  Layout output_layout(int i, const OpConfig& c, int o) const;
  Layout input_layout(int i, const OpConfig& c, int j) const;
  // The layout of the gradient of input j in a training step: the input layout,
  // partial over the axes of dimensions that do not cut the input (each block of
  // the operator saw all of it).
  Layout input_grad_layout(int i, const OpConfig& c, int j) const;
  // Product of the degrees of all dimensions (how much smaller each block's work is).
  int64_t work_split(int i, const OpConfig& c) const;
  // A trainable weight: a floating-point constant of more than one element.
  bool is_weight(int i, int j) const;

  // The candidate that splits the batch (the sample dimension cutting output dim 0)
  // over as many mesh axes as divide it, the others left whole: data parallelism.
  // `allowed`: bit a set = mesh axis a may be used (hierarchical search: the nodes
  // may also just hold copies).
  int data_parallel_config(int i, uint64_t allowed = ~uint64_t{0}) const;
  Strategy data_parallel(uint64_t allowed = ~uint64_t{0}) const;
  // True if candidate c of op i uses only mesh axes in `allowed`.
  bool uses_only(int i, int c, uint64_t allowed) const;
  // Index of `c` among op i's candidates, or -1.
  int find_config(int i, const OpConfig& c) const;
  // Elements of input j / output o of op i, and of one device's block of them under `c`.
  double in_numel(int i, int j) const { return in_numel_[static_cast<size_t>(i)][static_cast<size_t>(j)]; }
  double out_numel(int i, int o) const { return out_numel_[static_cast<size_t>(i)][static_cast<size_t>(o)]; }
  double in_block_numel(int i, const OpConfig& c, int j) const;
  double out_block_numel(int i, const OpConfig& c, int o) const;
  // Candidates whose input j (or output o) has the dims of `l` (partial sums ignored):
  // the configurations that take a neighbour's layout as it is. Up to two: the exact
  // one, and the one that also cuts the batch over the axes `l` leaves unused.
  std::vector<int> aligned_to_input(int i, int j, const Layout& l) const;
  std::vector<int> aligned_to_output(int i, int o, const Layout& l) const;
  std::string config_text(int i, const OpConfig& c) const;  // "S[n0]P[d0 d1]"

 private:
  Graph graph_;
  Mesh mesh_;
  std::vector<NodePtr> ops_;
  std::vector<OpSpec> specs_;
  std::vector<std::shared_ptr<const std::vector<OpConfig>>> candidates_;
  std::vector<std::vector<Operand>> operands_;
  std::vector<std::vector<std::vector<std::pair<int, int>>>> users_;
  std::vector<std::pair<int, int>> outputs_;
  std::vector<std::vector<std::vector<int64_t>>> out_dims_;
  std::vector<std::vector<double>> in_numel_, out_numel_;
  // Per candidate list (shared by operators of one spec): configuration -> index.
  std::vector<std::shared_ptr<const std::unordered_map<std::string, int>>> index_;
  std::vector<int> aligned(int i, const std::vector<int>& dim_of_pdim, const Layout& l) const;
};

// Every candidate configuration of `spec` on `mesh` (index 0: no axes).
std::vector<OpConfig> enumerate_configs(const OpSpec& spec, const Mesh& mesh);

}  // namespace isomer::parallel
