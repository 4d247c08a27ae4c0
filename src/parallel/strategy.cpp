#include "parallel/strategy.h"

#include <algorithm>
#include <map>

#include "ir/error.h"
#include "ops/op.h"

namespace isomer::parallel {

namespace {

void enumerate(const OpSpec& spec, const Mesh& mesh, int axis, int lower, std::vector<int>& choice,
               std::vector<OpConfig>& out) {
  const int P = static_cast<int>(spec.dims.size());
  if (axis == mesh.num_axes()) {
    OpConfig c;
    c.axes.resize(static_cast<size_t>(P));
    bool any = false;
    for (int a = 0; a < mesh.num_axes(); ++a)
      if (choice[a] < P) {
        c.axes[choice[a]].push_back(a);
        any = true;
      }
    if (!any) return;  // "run whole" is index 0, added by the caller
    for (int p = 0; p < P; ++p)
      if (spec.dims[p].extent % mesh.group_size(c.axes[p]) != 0) return;
    out.push_back(std::move(c));
    return;
  }
  // Within one link class the axes go to dimensions in order (none last).
  if (axis > 0 && mesh.axis(axis).inter_node != mesh.axis(axis - 1).inter_node) lower = 0;
  for (int p = lower; p <= P; ++p) {
    choice[axis] = p;
    enumerate(spec, mesh, axis + 1, p, choice, out);
  }
}

std::string config_key(const OpConfig& c) {
  std::string k;
  for (const auto& axes : c.axes) {
    for (int a : axes) k += static_cast<char>('a' + a);
    k += ',';
  }
  return k;
}

std::string spec_key(const OpSpec& spec) {
  std::string k;
  for (const ParallelDim& d : spec.dims) k += d.kind + std::to_string(d.extent) + ",";
  return k;
}

}  // namespace

std::vector<OpConfig> enumerate_configs(const OpSpec& spec, const Mesh& mesh) {
  std::vector<OpConfig> out{OpConfig{std::vector<std::vector<int>>(spec.dims.size())}};
  if (spec.dims.empty()) return out;
  std::vector<int> choice(static_cast<size_t>(mesh.num_axes()), 0);
  enumerate(spec, mesh, 0, 0, choice, out);
  return out;
}

ParallelGraph::ParallelGraph(const Graph& g, const Mesh& mesh) : graph_(g), mesh_(mesh) {
  std::unordered_map<const Node*, int> index;
  for (const NodePtr& n : g.topo_order()) {
    if (n->kind() != NodeKind::Op && n->kind() != NodeKind::Opaque) continue;
    index[n.get()] = static_cast<int>(ops_.size());
    ops_.push_back(n);
  }
  std::unordered_map<const Node*, int> input_pos;
  for (size_t k = 0; k < g.inputs().size(); ++k) input_pos[g.inputs()[k].get()] = static_cast<int>(k);
  std::map<std::string, std::shared_ptr<const std::vector<OpConfig>>> cache;
  std::map<std::string, std::shared_ptr<const std::unordered_map<std::string, int>>> index_cache;
  users_.resize(ops_.size());
  for (size_t i = 0; i < ops_.size(); ++i) {
    const Node& n = *ops_[i];
    users_[i].resize(n.num_outputs());
    out_dims_.emplace_back();
    bool all_static = true;
    for (const TensorType& t : n.output_types()) {
      all_static = all_static && is_static(t.shape);
      out_dims_.back().push_back(is_static(t.shape) ? static_dims(t.shape) : std::vector<int64_t>{});
    }
    require(all_static, describe(n) + ": parallelizing needs static shapes (fix the inputs with --batch or "
                                      "--input-shape)");
    specs_.push_back(op_spec(n));
    const std::string key = spec_key(specs_.back());
    auto it = cache.find(key);
    if (it == cache.end())
      it = cache.emplace(key, std::make_shared<const std::vector<OpConfig>>(enumerate_configs(specs_.back(), mesh_)))
               .first;
    candidates_.push_back(it->second);
    auto ix = index_cache.find(key);
    if (ix == index_cache.end()) {
      auto map = std::make_shared<std::unordered_map<std::string, int>>();
      for (size_t k = 0; k < it->second->size(); ++k) (*map)[config_key((*it->second)[k])] = static_cast<int>(k);
      ix = index_cache.emplace(key, std::move(map)).first;
    }
    index_.push_back(ix->second);
    in_numel_.emplace_back();
    for (const Value& v : n.inputs()) {
      std::optional<int64_t> e = v.present() ? num_elements(v.type().shape) : std::optional<int64_t>(0);
      in_numel_.back().push_back(e ? static_cast<double>(*e) : 0);
    }
    out_numel_.emplace_back();
    for (const TensorType& t : n.output_types()) out_numel_.back().push_back(static_cast<double>(*num_elements(t.shape)));
    std::vector<Operand> ops;
    for (const Value& v : n.inputs()) {
      Operand o;
      if (!v.present()) {
        o.kind = Operand::Kind::Absent;
      } else if (v.node->kind() == NodeKind::Constant) {
        o.kind = Operand::Kind::Constant;
      } else if (v.node->kind() == NodeKind::Input) {
        o.kind = Operand::Kind::Input;
        o.index = input_pos.at(v.node.get());
      } else {
        o.kind = Operand::Kind::Op;
        o.index = index.at(v.node.get());
        o.output = static_cast<int>(v.index);
        users_[static_cast<size_t>(o.index)][v.index].emplace_back(static_cast<int>(i), static_cast<int>(ops.size()));
      }
      ops.push_back(o);
    }
    operands_.push_back(std::move(ops));
  }
  for (const Value& v : g.outputs()) {
    auto it = index.find(v.node.get());
    if (it != index.end()) outputs_.emplace_back(it->second, static_cast<int>(v.index));
  }
}

const std::vector<std::pair<int, int>>& ParallelGraph::users(int i, int o) const {
  return users_[static_cast<size_t>(i)][static_cast<size_t>(o)];
}

const std::vector<int64_t>& ParallelGraph::out_dims(int i, int o) const {
  return out_dims_[static_cast<size_t>(i)][static_cast<size_t>(o)];
}

std::vector<int64_t> ParallelGraph::in_dims(int i, int j) const {
  const Value& v = node(i).inputs()[static_cast<size_t>(j)];
  return v.present() ? static_dims(v.type().shape) : std::vector<int64_t>{};
}

size_t ParallelGraph::elem_size(int i, int o) const {
  return dtype_size(node(i).output_types()[static_cast<size_t>(o)].dtype);
}

size_t ParallelGraph::in_elem_size(int i, int j) const {
  const Value& v = node(i).inputs()[static_cast<size_t>(j)];
  return v.present() ? dtype_size(v.type().dtype) : 0;
}

Layout ParallelGraph::output_layout(int i, const OpConfig& c, int o) const {
  Layout l = Layout::replicated(out_dims(i, o).size());
  const OpSpec& s = spec(i);
  for (size_t p = 0; p < s.dims.size(); ++p) {
    const std::vector<int>& axes = c.axes[p];
    if (axes.empty()) continue;
    if (s.dims[p].kind == 'R') {
      l.partial.insert(l.partial.end(), axes.begin(), axes.end());
    } else if (s.dims[p].out[static_cast<size_t>(o)] >= 0) {
      auto& d = l.dims[static_cast<size_t>(s.dims[p].out[static_cast<size_t>(o)])];
      d.insert(d.end(), axes.begin(), axes.end());
    }
  }
  std::sort(l.partial.begin(), l.partial.end());
  return l;
}

Layout ParallelGraph::input_layout(int i, const OpConfig& c, int j) const {
  Layout l = Layout::replicated(in_dims(i, j).size());
  const OpSpec& s = spec(i);
  for (size_t p = 0; p < s.dims.size(); ++p) {
    const int d = s.dims[p].in[static_cast<size_t>(j)];
    if (d < 0) continue;
    auto& dst = l.dims[static_cast<size_t>(d)];
    dst.insert(dst.end(), c.axes[p].begin(), c.axes[p].end());
  }
  return l;
}

Layout ParallelGraph::input_grad_layout(int i, const OpConfig& c, int j) const {
  Layout l = input_layout(i, c, j);
  const OpSpec& s = spec(i);
  for (size_t p = 0; p < s.dims.size(); ++p)
    if (s.dims[p].kind != 'R' && s.dims[p].in[static_cast<size_t>(j)] < 0)
      l.partial.insert(l.partial.end(), c.axes[p].begin(), c.axes[p].end());
  std::sort(l.partial.begin(), l.partial.end());
  return l;
}

int64_t ParallelGraph::work_split(int i, const OpConfig& c) const {
  int64_t w = 1;
  for (const auto& axes : c.axes) w *= mesh_.group_size(axes);
  return w;
}

bool ParallelGraph::is_weight(int i, int j) const {
  const Value& v = node(i).inputs()[static_cast<size_t>(j)];
  const Tensor* t = v.present() ? v.constant() : nullptr;
  return t && is_float(t->dtype()) && t->numel() > 1;
}

int ParallelGraph::find_config(int i, const OpConfig& c) const {
  const auto& index = *index_[static_cast<size_t>(i)];
  auto it = index.find(config_key(c));
  return it == index.end() ? -1 : it->second;
}

double ParallelGraph::in_block_numel(int i, const OpConfig& c, int j) const {
  double n = in_numel(i, j);
  const OpSpec& s = spec(i);
  for (size_t p = 0; p < s.dims.size(); ++p)
    if (s.dims[p].in[static_cast<size_t>(j)] >= 0) n /= static_cast<double>(mesh_.group_size(c.axes[p]));
  return n;
}

double ParallelGraph::out_block_numel(int i, const OpConfig& c, int o) const {
  double n = out_numel(i, o);
  const OpSpec& s = spec(i);
  for (size_t p = 0; p < s.dims.size(); ++p)
    if (s.dims[p].kind != 'R' && s.dims[p].out[static_cast<size_t>(o)] >= 0)
      n /= static_cast<double>(mesh_.group_size(c.axes[p]));
  return n;
}

std::vector<int> ParallelGraph::aligned(int i, const std::vector<int>& dim_of_pdim, const Layout& l) const {
  const OpSpec& s = spec(i);
  OpConfig c{std::vector<std::vector<int>>(s.dims.size())};
  std::vector<char> used(static_cast<size_t>(mesh_.num_axes()), 0);
  for (size_t p = 0; p < s.dims.size(); ++p) {
    const int d = dim_of_pdim[p];
    if (d < 0 || s.dims[p].kind == 'R') continue;
    c.axes[p] = l.dims[static_cast<size_t>(d)];
    for (int a : c.axes[p]) used[static_cast<size_t>(a)] = 1;
  }
  std::vector<int> out;
  const int exact = find_config(i, c);
  if (exact >= 0) out.push_back(exact);
  // The same with the batch also cut over the unused axes (as far as they divide it).
  for (size_t p = 0; p < s.dims.size(); ++p) {
    if (s.dims[p].out.empty() || s.dims[p].out[0] != 0 || s.dims[p].kind == 'R') continue;
    int64_t degree = mesh_.group_size(c.axes[p]);
    std::vector<int> axes = c.axes[p];
    for (int a = 0; a < mesh_.num_axes(); ++a)
      if (!used[static_cast<size_t>(a)] && s.dims[p].extent % (degree * mesh_.axis(a).size) == 0) {
        axes.push_back(a);
        degree *= mesh_.axis(a).size;
      }
    std::sort(axes.begin(), axes.end());
    if (axes == c.axes[p]) break;
    c.axes[p] = axes;
    const int k = find_config(i, c);
    if (k >= 0 && k != exact) out.push_back(k);
    break;
  }
  return out;
}

std::vector<int> ParallelGraph::aligned_to_input(int i, int j, const Layout& l) const {
  std::vector<int> dims;
  for (const ParallelDim& d : spec(i).dims) dims.push_back(d.in[static_cast<size_t>(j)]);
  return aligned(i, dims, l);
}

std::vector<int> ParallelGraph::aligned_to_output(int i, int o, const Layout& l) const {
  std::vector<int> dims;
  for (const ParallelDim& d : spec(i).dims) dims.push_back(d.out[static_cast<size_t>(o)]);
  return aligned(i, dims, l);
}

bool ParallelGraph::uses_only(int i, int c, uint64_t allowed) const {
  for (const auto& axes : config(i, c).axes)
    for (int a : axes)
      if (!(allowed >> a & 1)) return false;
  return true;
}

int ParallelGraph::data_parallel_config(int i, uint64_t allowed) const {
  const OpSpec& s = spec(i);
  for (size_t p = 0; p < s.dims.size(); ++p) {
    if (s.dims[p].kind != 'S' || s.dims[p].out.empty() || s.dims[p].out[0] != 0) continue;
    OpConfig c{std::vector<std::vector<int>>(s.dims.size())};
    int64_t degree = 1;
    for (int a = 0; a < mesh_.num_axes(); ++a)
      if ((allowed >> a & 1) && s.dims[p].extent % (degree * mesh_.axis(a).size) == 0) {
        c.axes[p].push_back(a);
        degree *= mesh_.axis(a).size;
      }
    const int k = find_config(i, c);
    if (k >= 0) return k;
  }
  return 0;
}

Strategy ParallelGraph::data_parallel(uint64_t allowed) const {
  Strategy s(static_cast<size_t>(size()));
  for (int i = 0; i < size(); ++i) s[static_cast<size_t>(i)] = data_parallel_config(i, allowed);
  return s;
}

std::string ParallelGraph::config_text(int i, const OpConfig& c) const {
  std::string s;
  for (size_t p = 0; p < c.axes.size(); ++p)
    if (!c.axes[p].empty()) s += std::string(1, spec(i).dims[p].kind) + mesh_.axes_text(c.axes[p]);
  return s.empty() ? "whole" : s;
}

}  // namespace isomer::parallel
