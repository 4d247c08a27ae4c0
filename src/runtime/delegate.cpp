#include "runtime/delegate.h"

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "bridge/bridge.h"
#include "onnx/onnx_io.h"
#include "runtime/compiler.h"
#include "runtime/lower_control.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

// An opaque node the runtime runs on ONNX Runtime, nothing else: not random, not
// a vendor operator it runs itself, not control flow (which may run natively).
bool only_delegated(const Node& n) {
  return n.kind() == NodeKind::Opaque && !runs_natively(n) && !vendor_runs_natively(n) && !is_control_flow(n);
}

// Operators that only give their input another shape: the runtime makes them views,
// so they are no step between two delegated nodes, and ONNX Runtime runs them as such.
bool reshapes_only(const Node& n) {
  static const std::set<std::string> ops = {"Squeeze", "Unsqueeze", "Reshape", "Flatten", "Identity"};
  return n.kind() == NodeKind::Op && n.num_outputs() == 1 && ops.count(n.op_type());
}

// The nodes reading v.
std::vector<const Node*> readers(Compiler& c, const Value& v) {
  std::vector<const Node*> r;
  for (const auto& [reader, index] : c.consumers(v))
    if (std::find(r.begin(), r.end(), reader) == r.end()) r.push_back(reader);
  return r;
}

// The nodes one delegated step runs, `first` first: each next one a delegated node
// reading a value of the group (directly or through a reshape of one), its other
// inputs compile-time or computed without the group; values of the group read
// elsewhere are its outputs too. Every ONNX Runtime session run is a round trip to
// the helper process and back, which where such nodes are adjacent in the plan is
// all the runtime adds to ONNX Runtime's time (a quantized 2-layer LSTM: two
// DynamicQuantizeLSTM nodes with a Squeeze between them). The nodes taken are
// claimed (Compiler::set_pending) until the step is made.
std::vector<const Node*> delegated_group(Compiler& c, const Node& first) {
  std::vector<const Node*> group = {&first};
  if (!only_delegated(first)) return group;
  std::unordered_set<const Node*> in_group = {&first};
  auto joins = [&](const Node& r, const Node* via) {
    if (!c.takeable(r) || !only_delegated(r)) return false;
    for (const Value& in : r.inputs())  // the group's, known, or not waiting for the group
      if (in.present() && !in_group.count(in.node.get()) && in.node.get() != via && !c.peek_known(in) &&
          c.depends_on_pending(in))
        return false;
    return true;
  };
  for (;;) {
    const Node& last = *group.back();
    const Node *via = nullptr, *next = nullptr;
    for (uint32_t k = 0; k < last.num_outputs() && !next; ++k)
      for (const Node* r : readers(c, last.output(k))) {
        if (joins(*r, nullptr)) {
          next = r;
          break;
        }
        if (!reshapes_only(*r) || !c.takeable(*r) || r->inputs()[0].node.get() != &last) continue;
        bool fixed = true;  // its shape operand (Reshape's, Squeeze's axes) known now
        for (size_t i = 1; i < r->inputs().size(); ++i)
          fixed = fixed && (!r->inputs()[i].present() || c.peek_known(r->inputs()[i]));
        for (const Node* r2 : fixed ? readers(c, r->output(0)) : std::vector<const Node*>{})
          if (joins(*r2, r)) {
            via = r, next = r2;
            break;
          }
        if (next) break;
      }
    if (!next) return group;
    for (const Node* g : {via, next}) {
      if (!g) continue;
      c.set_pending(*g, true);
      in_group.insert(g);
      group.push_back(g);
    }
  }
}

void release(Compiler& c, const std::vector<const Node*>& group, bool done) {
  for (size_t k = 1; k < group.size(); ++k) {
    if (done) c.mark_done(*group[k]);
    c.set_pending(*group[k], false);
  }
}

// Lowers `group` (delegated_group) to one step running it on ONNX Runtime.
void lower_group(Compiler& c, const std::vector<const Node*>& group);

}  // namespace

void lower_delegated(Compiler& c, const Node& n) {
  std::vector<const Node*> group = delegated_group(c, n);
  if (group.size() > 1) {
    try {
      lower_group(c, group);
      release(c, group, /*done=*/true);
      return;
    } catch (const Error&) {
      // ONNX Runtime would not take them together: each node on its own, which
      // says why where it fails.
      release(c, group, /*done=*/false);
    }
  }
  lower_group(c, {&n});
}

namespace {

void lower_group(Compiler& c, const std::vector<const Node*>& group) {
  const Node& n = *group.front();
  std::string who = describe(n);
  for (size_t k = 1; k < group.size(); ++k) who += (k == 1 ? " (with " : ", ") + describe(*group[k]);
  if (group.size() > 1) who += ")";
  // Messages while lowering say why the node is opaque; those while running, which.
  const std::string what = describe_opaque(n);
  // The group's model: constant inputs as initializers, the others as inputs at
  // their concrete types, named as in the source (a subgraph may refer to them);
  // its outputs, those of the group's nodes read outside it (all, for one node).
  GraphBuilder b(/*dedupe=*/false);
  std::unordered_set<const Node*> in_group(group.begin(), group.end());
  std::unordered_map<Value, Value, ValueHash> seen;
  std::vector<int> ids;
  std::vector<RtValue> in_types;
  std::set<std::string> names;
  uint64_t constants_hash = 0;  // the constant inputs are part of what is timed
  std::vector<Value> outs, exported;
  for (const Node* g : group) {
    std::vector<Value> sub_inputs;
    for (size_t k = 0; k < g->inputs().size(); ++k) {
      const Value& v = g->inputs()[k];
      if (!v.present() || seen.count(v)) {
        sub_inputs.push_back(v.present() ? seen[v] : v);
        continue;
      }
      int id = c.id(v);
      const RtValue& r = c.val(id);
      std::string name = v.node->kind() == NodeKind::Input ? v.node->name()
                         : v.index < v.node->output_names().size() ? v.node->output_names()[v.index]
                                                                   : "";
      if (name.empty() || !names.insert(name).second) name = "input" + std::to_string(names.size());
      names.insert(name);
      Value s;
      if (r.known) {
        s = b.constant(*r.known, name);
        constants_hash = constants_hash * 31 + stable_hash(r.known->bytes());
      } else {
        require(dtype_size(r.dtype) > 0, what + "; input " + std::to_string(k) + " has type " +
                                             std::string(dtype_name(r.dtype)) + ", which cannot be sent to ONNX Runtime");
        s = b.input(name, TensorType{r.dtype, make_shape(r.dims)});
        ids.push_back(c.as_plain(id));
        in_types.push_back(c.val(ids.back()));
      }
      seen[v] = s;
      sub_inputs.push_back(s);
    }
    std::vector<Value> g_outs;
    if (g->kind() == NodeKind::Opaque) {
      // Its output types are ONNX Runtime's to tell (the imported ones may hold
      // symbolic dims): none are written into the model.
      OpaqueInfo info = *g->opaque();
      info.onnx_output_types.assign(g->num_outputs(), std::string());
      g_outs = b.opaque(std::move(info), sub_inputs, g->output_types(), g->name(), g->output_names());
    } else {
      g_outs = b.op(g->op_type(), sub_inputs, g->attrs(), g->num_outputs(), g->name());
    }
    for (uint32_t k = 0; k < g_outs.size(); ++k) {
      const Value v = g->output(k);
      seen[v] = g_outs[k];
      bool read_outside = group.size() == 1 || c.is_output(v);
      for (const auto& [reader, index] : c.consumers(v)) read_outside = read_outside || !in_group.count(reader);
      if (!read_outside) continue;
      outs.push_back(g_outs[k]);
      exported.push_back(v);
    }
  }
  std::vector<std::string> out_names;
  for (size_t k = 0; k < outs.size(); ++k) out_names.push_back("output" + std::to_string(k));
  std::string bytes;
  try {
    bytes = export_onnx_bytes(b.finish(outs, out_names, c.graph().info()));
  } catch (const Error& e) {
    throw Error(what + "; cannot be made into a model of its own for ONNX Runtime (" + e.what() + ")");
  }
  std::shared_ptr<bridge::OrtBridge> ort;
  try {
    ort = bridge::OrtBridge::shared();
  } catch (const Error& e) {
    throw Error(what + ", and " + e.what());
  }
  std::vector<TensorType> probe_inputs;
  for (const RtValue& r : in_types) probe_inputs.push_back({r.dtype, make_shape(r.dims)});
  bridge::Session session;
  try {
    // isomer's threads run right after the node: ONNX Runtime's must not spin.
    session = ort->load_bytes(bytes, {.threads = c.opts().threads, .optimization = "all", .spinning = false},
                              &probe_inputs);
  } catch (const Error& e) {
    throw Error(what + "; ONNX Runtime " + ort->version() + " cannot run it (" + e.what() + ")");
  }
  const std::vector<std::vector<TensorType>>& probes = session.probes;
  require(!probes.empty(), what + "; ONNX Runtime gave no output types");
  // The buffers are planned from the probes' output types: they must not depend on
  // the data (NonZero's do), and every run checks that they did not.
  const std::vector<TensorType>& types = probes.front();
  for (size_t p = 1; p < probes.size(); ++p)
    for (size_t k = 0; k < types.size() && k < probes[p].size(); ++k)
      if (probes[p][k] != types[k])
        throw Error(what + "; its output shapes depend on the data (output " + std::to_string(k) + ": " +
                    to_string(types[k]) + " on zeros, " + to_string(probes[p][k]) + " on " +
                    (p == 1 ? "ones" : "distinct values") + "), so the runtime cannot plan them");
  require(types.size() == exported.size(), what + "; ONNX Runtime gives " + std::to_string(types.size()) +
                                                " outputs, the model names " + std::to_string(exported.size()));
  std::vector<int> out_ids;
  std::vector<RtValue> out_types;
  for (size_t k = 0; k < types.size(); ++k) {
    require(dtype_size(types[k].dtype) > 0, what + "; output " + std::to_string(k) + " has a type (" +
                                                to_string(types[k]) + ") the runtime cannot hold");
    std::vector<int64_t> dims = static_dims(types[k].shape);
    auto type = dnnl_type(types[k].dtype);
    int id = c.new_value(types[k].dtype, dims, type ? plain_md(dims, *type) : md_t(), n.name());
    c.bind(exported[k], id);
    out_ids.push_back(id);
    out_types.push_back(c.val(id));
  }
  RtStep s;
  s.info.kind = "onnxruntime";
  s.info.label = n.name();
  std::ostringstream sig;
  sig << "ort";
  for (const Node* g : group) {
    s.info.ops.push_back(g->op_type());
    s.info.nodes.push_back(node_key(*g));
    if (g->opaque())
      sig << " " << (g->opaque()->domain.empty() ? "" : g->opaque()->domain + ".") << g->op_type() << " p"
          << std::hex << stable_hash(g->opaque()->node_proto) << std::dec;
    else
      sig << " " << g->op_type();  // its attributes show in the outputs' shapes
  }
  sig << " c" << std::hex << constants_hash << std::dec;
  for (const RtValue& r : in_types) sig << " " << dtype_name(r.dtype) << to_string(r.dims);
  if (group.size() > 1)
    for (const RtValue& r : out_types) sig << " -> " << dtype_name(r.dtype) << to_string(r.dims);
  s.info.signature = sig.str();
  for (const RtValue& r : in_types) s.info.bytes += static_cast<double>(r.bytes);
  for (const RtValue& r : out_types) s.info.bytes += static_cast<double>(r.bytes);
  s.info.flops = s.info.bytes / 4;
  s.reads = ids;
  s.writes = out_ids;
  const int handle = session.id;
  s.make_fn = [ort, handle, ids, in_types, out_ids, out_types, who](const std::function<char*(int)>& data) {
    std::vector<bridge::Buffer> in, out;
    for (size_t k = 0; k < ids.size(); ++k)
      in.push_back({in_types[k].dtype, in_types[k].dims, data(ids[k]), in_types[k].bytes});
    for (size_t k = 0; k < out_ids.size(); ++k)
      out.push_back({out_types[k].dtype, out_types[k].dims, data(out_ids[k]), out_types[k].bytes});
    return std::function<void()>([ort, handle, in, out, who] {
      std::string mismatch;
      try {
        mismatch = ort->run_into(handle, in, out);
      } catch (const bridge::OrtError& e) {
        throw Error(who + " on ONNX Runtime: " + e.what());
      }
      if (!mismatch.empty()) throw DelegatedShapeError(who + " on ONNX Runtime: " + mismatch + " by the plan");
    });
  };
  c.add_step(std::move(s));
}

}  // namespace

}  // namespace isomer::runtime
