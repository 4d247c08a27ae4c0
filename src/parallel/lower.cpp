#include "parallel/lower.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>

#include "ir/error.h"
#include "parallel/box.h"

namespace isomer::parallel {

namespace {

// Opaque collective nodes never merge with each other: their uids are unique.
std::atomic<uint64_t> g_next_uid{uint64_t{1} << 62};

int64_t degree_of(const Mesh& mesh, const OpConfig& c, size_t p) { return mesh.group_size(c.axes[p]); }

// The devices of `device`'s group over `axes`, in block order.
std::vector<int> group_ranks(const Mesh& mesh, int device, const std::vector<int>& axes) {
  std::vector<std::pair<int64_t, int>> members;
  const int64_t id = mesh.group_id(device, axes);
  for (int d = 0; d < mesh.devices(); ++d)
    if (mesh.group_id(d, axes) == id) members.emplace_back(mesh.position(d, axes), d);
  std::sort(members.begin(), members.end());
  std::vector<int> ranks;
  for (const auto& m : members) ranks.push_back(m.second);
  return ranks;
}

Value collective(GraphBuilder& b, const std::string& kind, Value x, const std::vector<int>& ranks, int axis, int seq,
                 const TensorType& out) {
  onnx::NodeProto p;
  p.set_op_type(kind);
  p.set_domain(kMpiDomain);
  p.set_name(kind + "_" + std::to_string(seq));
  p.add_input("x");
  p.add_output("y");
  auto* a = p.add_attribute();
  a->set_name("ranks");
  a->set_type(onnx::AttributeProto::INTS);
  for (int r : ranks) a->add_ints(r);
  a = p.add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(axis);
  a = p.add_attribute();
  a->set_name("seq");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(seq);
  OpaqueInfo info;
  info.domain = kMpiDomain;
  info.op_type = kind;
  info.node_proto = p.SerializeAsString();
  info.uid = g_next_uid++;
  info.onnx_output_types = {std::nullopt};
  return b.opaque(std::move(info), {std::move(x)}, {out}, p.name())[0];
}

class RankLowering {
 public:
  RankLowering(const ParallelGraph& pg, const Strategy& s, int device) : pg_(pg), s_(s), device_(device) {}

  Graph run() {
    const Graph& g = pg_.graph();
    std::vector<Value> inputs;
    for (const NodePtr& in : g.inputs()) inputs.push_back(b_.input(in->name(), in->output_types()[0]));
    const Mesh& mesh = pg_.mesh();
    for (int i = 0; i < pg_.size(); ++i) {
      const OpConfig& c = pg_.config(i, s_[static_cast<size_t>(i)]);
      const Node& n = pg_.node(i);
      std::vector<Value> ins;
      for (int j = 0; j < static_cast<int>(n.inputs().size()); ++j) {
        const Operand& o = pg_.operands(i)[static_cast<size_t>(j)];
        const Value& v = n.inputs()[static_cast<size_t>(j)];
        const Layout want = pg_.input_layout(i, c, j);
        switch (o.kind) {
          case Operand::Kind::Absent: ins.emplace_back(); break;
          case Operand::Kind::Constant: ins.push_back(b_.constant(slice_block(*v.constant(), want, mesh, device_))); break;
          case Operand::Kind::Input:
            ins.push_back(move({-1 - o.index, 0}, inputs[static_cast<size_t>(o.index)],
                               Layout::replicated(pg_.in_dims(i, j).size()), want, v.type()));
            break;
          case Operand::Kind::Op: {
            const auto& [val, layout] = values_.at({o.index, o.output});
            ins.push_back(move({o.index, o.output}, val, layout, want, v.type()));
            break;
          }
        }
      }
      std::vector<Value> outs = build_local_op(b_, pg_, i, c, std::move(ins), device_);
      for (size_t o = 0; o < outs.size(); ++o)
        values_[{i, static_cast<int>(o)}] = {outs[o], pg_.output_layout(i, c, static_cast<int>(o))};
    }
    std::vector<Value> outs;
    for (const Value& v : g.outputs()) {
      if (v.node->kind() == NodeKind::Input) {
        for (size_t k = 0; k < g.inputs().size(); ++k)
          if (g.inputs()[k] == v.node) outs.push_back(inputs[k]);
      } else if (v.node->kind() == NodeKind::Constant) {
        outs.push_back(b_.constant(*v.constant()));
      } else {
        int p = -1;
        for (int i = 0; i < pg_.size() && p < 0; ++i)
          if (&pg_.node(i) == v.node.get()) p = i;
        const auto& [val, layout] = values_.at({p, static_cast<int>(v.index)});
        outs.push_back(move({p, static_cast<int>(v.index)}, val, layout, Layout::replicated(v.type().rank()), v.type()));
      }
    }
    ModelInfo info = g.info();
    info.opset_imports.emplace_back(kMpiDomain, 1);
    info.graph_name = g.info().graph_name + "_rank" + std::to_string(device_);
    return b_.finish(outs, g.output_names(), info);
  }

 private:
  // `x` (value `key` in layout `from`) in layout `to`, through the steps of layout.h;
  // each redistributed form is made once per rank.
  Value move(std::pair<int, int> key, Value x, const Layout& from, const Layout& to, const TensorType& global) {
    if (from == to) return x;
    auto& made = moved_[key];
    for (const auto& [l, v] : made)
      if (l == to) return v;
    const Mesh& mesh = pg_.mesh();
    const std::vector<int64_t> dims = static_dims(global.shape);
    for (const CommStep& st : redistribute(from, to, dims, mesh)) {
      const TensorType out{global.dtype, make_shape(st.local_after)};
      switch (st.kind) {
        case CommStep::Kind::Slice: {
          const int64_t start = mesh.position(device_, st.axes) * st.local_after[static_cast<size_t>(st.dim)];
          x = b_.op1("Slice", {x, b_.constant(Tensor::vector_i64({start})),
                               b_.constant(Tensor::vector_i64({start + st.local_after[static_cast<size_t>(st.dim)]})),
                               b_.constant(Tensor::vector_i64({st.dim}))});
          break;
        }
        case CommStep::Kind::AllReduce:
          x = collective(b_, "AllReduce", x, group_ranks(mesh, device_, st.axes), -1, seq_++, out);
          break;
        case CommStep::Kind::AllGather:
          x = collective(b_, "AllGather", x, group_ranks(mesh, device_, st.axes), st.dim, seq_++, out);
          break;
        case CommStep::Kind::ReduceScatter:
          x = collective(b_, "ReduceScatter", x, group_ranks(mesh, device_, st.axes), st.dim, seq_++, out);
          break;
      }
    }
    made.emplace_back(to, x);
    return x;
  }

  const ParallelGraph& pg_;
  const Strategy& s_;
  int device_;
  GraphBuilder b_;
  int seq_ = 0;
  std::map<std::pair<int, int>, std::pair<Value, Layout>> values_;
  std::map<std::pair<int, int>, std::vector<std::pair<Layout, Value>>> moved_;
};

}  // namespace

std::vector<Value> build_local_op(GraphBuilder& b, const ParallelGraph& pg, int i, const OpConfig& c,
                                  std::vector<Value> inputs, int device) {
  const Node& n = pg.node(i);
  if (n.kind() == NodeKind::Opaque) return b.opaque(*n.opaque(), std::move(inputs), n.output_types(), n.name());
  const OpSpec& spec = pg.spec(i);
  const Mesh& mesh = pg.mesh();
  Attributes attrs = n.attrs();
  const std::string& op = n.op_type();
  if (op == "Reshape" || op == "Expand") {
    const std::vector<int64_t> local = local_dims(pg.out_dims(i, 0), pg.output_layout(i, c, 0), mesh);
    inputs[1] = b.constant(Tensor::vector_i64(local));
  }
  if (spec.group_dim >= 0)
    attrs.set("group", attrs.get_int("group", 1) / degree_of(mesh, c, static_cast<size_t>(spec.group_dim)));
  if (spec.add_once >= 0) {
    std::vector<int> reduction_axes;
    for (size_t p = 0; p < spec.dims.size(); ++p)
      if (spec.dims[p].kind == 'R') reduction_axes.insert(reduction_axes.end(), c.axes[p].begin(), c.axes[p].end());
    if (mesh.position(device, reduction_axes) != 0) {
      if (op == "Gemm") attrs.set("beta", 0.0);
      else inputs.resize(static_cast<size_t>(spec.add_once));
    }
  }
  return b.op(op, std::move(inputs), std::move(attrs), n.num_outputs(), n.name());
}

Tensor slice_block(const Tensor& t, const Layout& l, const Mesh& mesh, int device) {
  bool whole = true;
  for (const auto& d : l.dims) whole = whole && d.empty();
  if (whole) return t;
  const std::vector<int64_t> local = local_dims(t.dims(), l, mesh);
  const std::vector<int64_t> off = block_offsets(t.dims(), l, mesh, device);
  const size_t elem = dtype_size(t.dtype());
  std::string bytes(static_cast<size_t>(num_elements(local)) * elem, '\0');
  copy_box(t.bytes().data(), t.dims(), off, bytes.data(), local, std::vector<int64_t>(local.size(), 0), local, elem);
  return Tensor(t.dtype(), local, std::move(bytes));
}

Graph lower_rank(const ParallelGraph& pg, const Strategy& s, int device) {
  require(device >= 0 && device < pg.mesh().devices(), "rank " + std::to_string(device) + " is not in the mesh");
  return RankLowering(pg, s, device).run();
}

bool is_collective(const Node& n) { return n.kind() == NodeKind::Opaque && n.opaque()->domain == kMpiDomain; }

CollectiveInfo collective_info(const Node& n) {
  require(is_collective(n), describe(n) + " is not an isomer.mpi collective");
  onnx::NodeProto p;
  require(p.ParseFromString(n.opaque()->node_proto), describe(n) + ": stored NodeProto does not parse");
  CollectiveInfo c;
  c.kind = p.op_type();
  require(c.kind == "AllReduce" || c.kind == "AllGather" || c.kind == "ReduceScatter",
          describe(n) + ": unknown collective '" + c.kind + "'");
  bool has_seq = false;
  for (const auto& a : p.attribute()) {
    if (a.name() == "ranks") c.ranks.assign(a.ints().begin(), a.ints().end());
    if (a.name() == "axis") c.axis = static_cast<int>(a.i());
    if (a.name() == "seq") {
      c.seq = static_cast<int>(a.i());
      has_seq = true;
    }
  }
  require(!c.ranks.empty() && has_seq, describe(n) + ": collective without ranks or seq");
  require(c.kind == "AllReduce" || c.axis >= 0, describe(n) + ": collective without an axis");
  return c;
}

}  // namespace isomer::parallel
