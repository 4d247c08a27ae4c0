#include "runtime/delegate.h"

#include <functional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "bridge/bridge.h"
#include "onnx/onnx_io.h"
#include "runtime/compiler.h"

namespace isomer::runtime {

namespace {

// FNV-1a: a hash that stays the same across builds (cost database signatures).
uint64_t stable_hash(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

}  // namespace

void lower_delegated(Compiler& c, const Node& n) {
  const std::string who = describe(n);
  // Messages while lowering say why the node is opaque; those while running, which.
  const std::string what = describe_opaque(n);
  // The one-node model: constant inputs as initializers, the others as inputs at
  // their concrete types, named as in the source (a subgraph may refer to them).
  GraphBuilder b(/*dedupe=*/false);
  std::unordered_map<Value, Value, ValueHash> seen;
  std::vector<Value> sub_inputs;
  std::vector<int> ids;
  std::vector<RtValue> in_types;
  std::set<std::string> names;
  uint64_t constants_hash = 0;  // the constant inputs are part of what is timed
  for (size_t k = 0; k < n.inputs().size(); ++k) {
    const Value& v = n.inputs()[k];
    if (!v.present() || seen.count(v)) {
      sub_inputs.push_back(v.present() ? seen[v] : v);
      continue;
    }
    int id = c.id(v);
    const RtValue& r = c.val(id);
    std::string name = v.node->kind() == NodeKind::Input ? v.node->name()
                       : v.index < v.node->output_names().size() ? v.node->output_names()[v.index]
                                                                 : "";
    if (name.empty() || !names.insert(name).second) name = "input" + std::to_string(k);
    names.insert(name);
    Value s;
    if (r.known) {
      s = b.constant(*r.known, name);
      constants_hash = constants_hash * 31 + stable_hash(r.known->bytes());
    } else {
      require(dtype_size(r.dtype) > 0, what + "; input " + std::to_string(k) + " has type " + std::string(dtype_name(r.dtype)) +
                                           ", which cannot be sent to ONNX Runtime");
      s = b.input(name, TensorType{r.dtype, make_shape(r.dims)});
      ids.push_back(c.as_plain(id));
      in_types.push_back(c.val(ids.back()));
    }
    seen[v] = s;
    sub_inputs.push_back(s);
  }
  // Its output types are ONNX Runtime's to tell (the imported ones may hold
  // symbolic dims): none are written into the model.
  OpaqueInfo info = *n.opaque();
  info.onnx_output_types.assign(n.num_outputs(), std::string());
  std::vector<Value> outs = b.opaque(std::move(info), sub_inputs, n.output_types(), n.name(), n.output_names());
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
  require(types.size() == n.num_outputs(), what + "; ONNX Runtime gives " + std::to_string(types.size()) +
                                               " outputs, the model names " + std::to_string(n.num_outputs()));
  std::vector<int> out_ids;
  std::vector<RtValue> out_types;
  for (size_t k = 0; k < types.size(); ++k) {
    require(dtype_size(types[k].dtype) > 0, what + "; output " + std::to_string(k) + " has a type (" +
                                                to_string(types[k]) + ") the runtime cannot hold");
    std::vector<int64_t> dims = static_dims(types[k].shape);
    auto type = dnnl_type(types[k].dtype);
    int id = c.new_value(types[k].dtype, dims, type ? plain_md(dims, *type) : md_t(), n.name());
    c.bind(n.output(static_cast<uint32_t>(k)), id);
    out_ids.push_back(id);
    out_types.push_back(c.val(id));
  }
  RtStep s;
  s.info.kind = "onnxruntime";
  s.info.label = n.name();
  s.info.ops = {n.op_type()};
  std::ostringstream sig;
  sig << "ort " << (n.opaque()->domain.empty() ? "" : n.opaque()->domain + ".") << n.op_type() << " p" << std::hex
      << stable_hash(n.opaque()->node_proto) << " c" << constants_hash << std::dec;
  for (const RtValue& r : in_types) sig << " " << dtype_name(r.dtype) << to_string(r.dims);
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

}  // namespace isomer::runtime
