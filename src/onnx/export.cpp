// Graph -> ONNX ModelProto.
//
// Values get unique SSA names: graph inputs keep theirs, graph outputs and names
// subgraphs of opaque nodes read from outside get theirs (an Identity where one
// value needs two names), every other value its preferred (source) name where
// free, "isomer_<n>" otherwise. Constants become initializers. Native nodes pass
// through their operator's onnx_export hook; opaque nodes are written back
// verbatim with their input and output names remapped. The output is a function of
// the graph alone, so exporting equal graphs gives equal bytes.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/checker.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "mugraph/onnx_function.h"
#include "onnx/extras.h"
#include "onnx/onnx_io.h"
#include "onnx/proto_util.h"
#include "ops/op.h"

namespace isomer {
namespace {

using namespace onnx_detail;

// Above this much constant data a single protobuf (2 GB limit) is at risk.
constexpr size_t kAutoExternalBytes = 1800ull * 1000 * 1000;
constexpr uint64_t kExternalAlignment = 64;

// Writes large initializers' data to the external data file.
struct ExternalWriter {
  std::ofstream out;
  std::string location;  // relative to the model's directory
  size_t threshold = 1024;
  uint64_t offset = 0;

  // Returns false if `t` stays inline.
  bool place(const Tensor& t, onnx::TensorProto* p) {
    if (t.dtype() == DType::String || t.byte_size() < threshold) return false;
    write(t.bytes());
    p->set_data_type(static_cast<int32_t>(t.dtype()));
    for (int64_t d : t.dims()) p->add_dims(d);
    point_to_file(p, t.byte_size());
    return true;
  }

  // A tensor kept verbatim (an element type isomer does not know): its raw_data moves
  // to the file. Returns false if it stays inline.
  bool place_raw(onnx::TensorProto* p) {
    if (!p->has_raw_data() || p->raw_data().size() < threshold) return false;
    write(p->raw_data());
    const size_t size = p->raw_data().size();
    p->clear_raw_data();
    point_to_file(p, size);
    return true;
  }

 private:
  // Blocks of zeros are skipped, not written: a weight that is mostly zeros (a sparse
  // 2 GB file read in) stays sparse on disk. close() gives the file its full length.
  void write(std::string_view bytes) {
    static constexpr size_t kBlock = 1 << 16;
    static const std::string kZeros(kBlock, '\0');
    offset += (kExternalAlignment - offset % kExternalAlignment) % kExternalAlignment;
    out.seekp(static_cast<std::streamoff>(offset));
    for (size_t at = 0; at < bytes.size(); at += kBlock) {
      const size_t n = std::min(kBlock, bytes.size() - at);
      if (std::memcmp(bytes.data() + at, kZeros.data(), n) == 0)
        out.seekp(static_cast<std::streamoff>(n), std::ios::cur);
      else
        out.write(bytes.data() + at, static_cast<std::streamsize>(n));
    }
    require(out.good(), "writing the external data file failed");
  }

  void point_to_file(onnx::TensorProto* p, size_t size) {
    p->set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const char* key, const std::string& value) {
      auto* e = p->add_external_data();
      e->set_key(key);
      e->set_value(value);
    };
    add("location", location);
    add("offset", std::to_string(offset));
    add("length", std::to_string(size));
    offset += size;
  }
};

bool is_empty_list(const AttrValue& v) {
  return std::visit(
      [](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<double>> ||
                      std::is_same_v<T, std::vector<std::string>>)
          return x.empty();
        else
          return false;
      },
      v);
}

void set_attribute(const std::string& name, const AttrValue& value, onnx::AttributeProto* a) {
  using A = onnx::AttributeProto;
  a->set_name(name);
  struct Visitor {
    A* a;
    void operator()(int64_t v) const { a->set_type(A::INT), a->set_i(v); }
    void operator()(double v) const { a->set_type(A::FLOAT), a->set_f(static_cast<float>(v)); }
    void operator()(const std::string& v) const { a->set_type(A::STRING), a->set_s(v); }
    void operator()(const std::vector<int64_t>& v) const {
      a->set_type(A::INTS);
      for (int64_t x : v) a->add_ints(x);
    }
    void operator()(const std::vector<double>& v) const {
      a->set_type(A::FLOATS);
      for (double x : v) a->add_floats(static_cast<float>(x));
    }
    void operator()(const std::vector<std::string>& v) const {
      a->set_type(A::STRINGS);
      for (const auto& x : v) a->add_strings(x);
    }
    void operator()(const Tensor& v) const {
      a->set_type(A::TENSOR);
      tensor_to_proto(v, a->mutable_t());
    }
  };
  std::visit(Visitor{a}, value);
}

bool is_default_domain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// An opaque Constant node holding a tensor isomer keeps verbatim (an initializer or
// Constant node of an element type isomer does not compute with): written as an
// initializer, as native constants are.
bool is_kept_constant(const onnx::NodeProto& p) {
  return p.op_type() == "Constant" && is_default_domain(p.domain()) && p.input_size() == 0 && p.output_size() == 1 &&
         p.attribute_size() == 1 && p.attribute(0).name() == "value" && p.attribute(0).has_t();
}

class Exporter {
 public:
  Exporter(const Graph& g, ExternalWriter* external) : g_(g), external_(external), extras_(g.info().onnx_extras ? *g.info().onnx_extras : std::string()) {}

  onnx::ModelProto run() {
    const ModelInfo& info = g_.info();
    order_ = g_.topo_order();
    opset_ = info.opset() > 0 ? info.opset() : lowest_opset_for_native_ops();
    prepare_forms();
    name_values();
    onnx::ModelProto m;
    // The model keeps the IR version it came with: nothing isomer writes needs a newer
    // one (its operators and element types are older than IR 4's, and what a newer IR
    // added comes back only where the source had it), and an older reader may need it.
    m.set_ir_version(info.ir_version);
    for (const auto& [domain, version] : info.opset_imports) {
      auto* o = m.add_opset_import();
      o->set_domain(domain);
      o->set_version(version);
    }
    if (!info.producer_name.empty()) m.set_producer_name(info.producer_name);
    if (!info.producer_version.empty()) m.set_producer_version(info.producer_version);
    if (!info.domain.empty()) m.set_domain(info.domain);
    if (info.model_version != 0) m.set_model_version(info.model_version);
    if (!info.doc_string.empty()) m.set_doc_string(info.doc_string);
    for (const auto& [key, value] : info.metadata_props) {
      auto* p = m.add_metadata_props();
      p->set_key(key);
      p->set_value(value);
    }
    for (const auto& f : info.functions)
      require(m.add_functions()->ParseFromString(f), "a model-local function does not parse");
    model_ = &m;
    write_graph(m.mutable_graph());
    add_missing_default_opset(&m);
    extras_.add_to_model(&m);
    return m;
  }

 private:
  // The ai.onnx opset for a model that imports none (vendor operators only): the
  // lowest that has every native operator of the graph.
  int64_t lowest_opset_for_native_ops() const {
    int64_t v = 1;
    for (const NodePtr& n : order_)
      if (n->kind() == NodeKind::Op && n->op()->onnx_domain.empty()) v = std::max<int64_t>(v, n->op()->min_opset);
    return v;
  }

  // Native operators and the Identity nodes export adds are of ai.onnx: a model that did
  // not import it (vendor operators only) gets it, at the version the forms were
  // written for.
  void add_missing_default_opset(onnx::ModelProto* m) const {
    for (const auto& o : m->opset_import())
      if (is_default_domain(o.domain())) return;
    bool uses_default = false;
    for (const auto& n : m->graph().node()) uses_default = uses_default || is_default_domain(n.domain());
    if (!uses_default) return;
    auto* o = m->add_opset_import();
    o->set_domain("");
    o->set_version(opset_);
  }

  // Native nodes in their ONNX form for the model's opset; opaque nodes' protos.
  void prepare_forms() {
    std::unordered_set<const Node*> in_order;
    for (const NodePtr& n : order_) in_order.insert(n.get());
    auto read = [&](const Value& v) {
      if (!v.present()) return;
      referenced_.insert(v);
      if (in_order.count(v.node.get())) return;
      require(v.node->kind() == NodeKind::Constant,
              "an onnx_export hook produced a non-constant input (" + describe(*v.node) + ")");
      in_order.insert(v.node.get());
      extra_constants_.push_back(v.node);
    };
    for (const NodePtr& n : order_) {
      if (n->kind() == NodeKind::Op) {
        OnnxForm form{n->attrs(), n->inputs(), n->num_outputs(), {}};
        // An operator newer than the model's opset, with no adapter between its form
        // and older ones, would make the file invalid: refuse rather than write it.
        const OpDef& op = *n->op();
        require(op.onnx_export || op.onnx_import || opset_ >= op.min_opset,
                "cannot export " + describe(*n) + ": the model's opset " + std::to_string(opset_) +
                    " predates the operator (opset " + std::to_string(n->op()->min_opset) + ")");
        if (n->op()->onnx_export) {
          try {
            n->op()->onnx_export(form, opset_);
          } catch (const Error& e) {
            throw Error("exporting " + describe(*n) + " at opset " + std::to_string(opset_) + ": " + e.what());
          }
        }
        for (const Value& v : form.inputs) read(v);
        forms_.emplace(n.get(), std::move(form));
      } else if (n->kind() == NodeKind::Opaque) {
        onnx::NodeProto proto;
        require(proto.ParseFromString(n->opaque()->node_proto), describe(*n) + ": stored NodeProto does not parse");
        std::vector<std::string> refs = outer_scope_names(proto);
        require(n->inputs().size() == static_cast<size_t>(proto.input_size()) + refs.size(),
                describe(*n) + " has " + std::to_string(n->inputs().size()) + " inputs, its NodeProto " +
                    std::to_string(proto.input_size()) + " and " + std::to_string(refs.size()) + " outer-scope names");
        for (const Value& v : n->inputs()) read(v);
        for (size_t k = 0; k < refs.size(); ++k) outer_refs_.push_back({refs[k], n->inputs()[proto.input_size() + k]});
        protos_.emplace(n.get(), std::move(proto));
      }
    }
    for (const Value& v : g_.outputs()) referenced_.insert(v);
  }

  void take(const Value& v, const std::string& name) {
    names_[v] = name;
    owner_.emplace(name, v);
  }

  // `v` must be known as `want` (a graph output's or an outer-scope reference's
  // name); a value that already has another name gets an Identity to `want`.
  void claim(const Value& v, const std::string& want, const std::string& who) {
    auto owner = owner_.find(want);
    if (owner != owner_.end()) {
      require(owner->second == v, "cannot export: " + who + " '" + want + "' names another value too");
      return;
    }
    if (names_.count(v)) {
      owner_.emplace(want, v);
      aliases_[v.node.get()].push_back({v, want});
    } else {
      take(v, want);
    }
  }

  std::string fresh_name() {
    std::string n;
    do n = "isomer_" + std::to_string(counter_++);
    while (owner_.count(n) || preferred_.count(n));
    return n;
  }

  void name_values() {
    for (const NodePtr& in : g_.inputs()) {
      require(!owner_.count(in->name()), "duplicate graph input '" + in->name() + "'");
      take(in->output(0), in->name());
    }
    for (size_t i = 0; i < g_.outputs().size(); ++i) claim(g_.outputs()[i], g_.output_names()[i], "graph output");
    for (const auto& [name, v] : outer_refs_) claim(v, name, "the outer-scope value");
    for (const NodePtr& n : order_) {
      if (n->kind() == NodeKind::Constant && !n->name().empty()) preferred_.insert(n->name());
      for (const auto& o : n->output_names())
        if (!o.empty()) preferred_.insert(o);
    }
    auto pick = [&](const Value& v, const std::string& preferred) {
      if (names_.count(v)) return;
      take(v, !preferred.empty() && !owner_.count(preferred) ? preferred : fresh_name());
    };
    for (const NodePtr& n : order_) {
      if (n->kind() == NodeKind::Constant) {
        if (referenced_.count(n->output(0))) pick(n->output(0), n->name());
        continue;
      }
      if (n->kind() == NodeKind::Input) continue;
      const auto& preferred = n->output_names();
      auto proto = protos_.find(n.get());
      for (uint32_t i = 0; i < n->num_outputs(); ++i) {
        Value v = n->output(i);
        // An optional output the source left out stays out unless something reads it.
        bool omitted_in_source = proto != protos_.end() ? proto->second.output(i).empty()
                                                        : i < preferred.size() && preferred[i].empty();
        if (omitted_in_source && !referenced_.count(v) && !names_.count(v)) {
          names_[v] = "";
          continue;
        }
        pick(v, i < preferred.size() ? preferred[i] : "");
      }
    }
    for (const NodePtr& c : extra_constants_) pick(c->output(0), c->name());
    // Node names: kept where unique; opaque nodes keep theirs verbatim.
    for (const NodePtr& n : order_)
      if (!n->name().empty()) preferred_node_names_.insert(n->name());
    for (const auto& [node, proto] : protos_) node_names_.insert(proto.name());
  }

  std::string node_name(const std::string& preferred, const std::string& op_type) {
    if (!preferred.empty() && node_names_.insert(preferred).second) return preferred;
    std::string n;
    do n = op_type + "_" + std::to_string(node_counter_++);
    while (node_names_.count(n) || preferred_node_names_.count(n));
    node_names_.insert(n);
    return n;
  }

  const std::string& name_of(const Value& v) const {
    static const std::string kAbsent;
    return v.present() ? names_.at(v) : kAbsent;
  }

  void add_value_info(const std::string& name, const Value& v, google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* out) {
    onnx::ValueInfoProto* vi = out->Add();
    vi->set_name(name);
    // Types a TensorType cannot state (opaque outputs, untyped graph inputs) go back verbatim.
    if (const std::string* onnx_type = onnx_type_of(v)) {
      if (!onnx_type->empty()) vi->mutable_type()->ParseFromString(*onnx_type);
    } else {
      tensor_type_to_proto(v.type(), vi->mutable_type());
    }
    extras_.add_to_value(vi);
  }

  void add_initializer(const NodePtr& c, onnx::GraphProto* graph) {
    onnx::TensorProto* t = graph->add_initializer();
    t->set_name(names_.at(c->output(0)));
    if (!external_ || !external_->place(*c->value(), t)) tensor_to_proto(*c->value(), t);
    extras_.add_to_initializer(t);
  }

  void add_kept_constant(const Node& n, onnx::GraphProto* graph) {
    onnx::TensorProto* t = graph->add_initializer();
    *t = protos_.at(&n).attribute(0).t();
    t->set_name(names_.at(n.output(0)));
    if (external_) external_->place_raw(t);
    extras_.add_to_initializer(t);
  }

  // Kept constants become initializers, except at IR version 3 and older, where every
  // initializer must also be a graph input: there they stay Constant nodes.
  bool writes_as_initializer(const Node& n) const {
    return g_.info().ir_version >= 4 && is_kept_constant(protos_.at(&n));
  }

  void add_aliases(const Node* n, onnx::GraphProto* graph) {
    auto it = aliases_.find(n);
    if (it == aliases_.end()) return;
    for (const auto& [v, name] : it->second) {
      onnx::NodeProto* p = graph->add_node();
      p->set_name(node_name("", "Identity"));
      p->set_op_type("Identity");
      p->add_input(names_.at(v));
      p->add_output(name);
    }
  }

  void add_op(const Node& n, onnx::GraphProto* graph) {
    const OnnxForm& form = forms_.at(&n);
    onnx::NodeProto* p = graph->add_node();
    p->set_name(node_name(n.name(), n.op_type()));
    p->set_op_type(form.op_type.empty() ? std::string(n.op()->name) : form.op_type);
    if (!n.op()->onnx_domain.empty()) p->set_domain(std::string(n.op()->onnx_domain));
    for (const Value& v : form.inputs) p->add_input(name_of(v));
    while (p->input_size() > 0 && p->input(p->input_size() - 1).empty()) p->mutable_input()->RemoveLast();
    for (uint32_t i = 0; i < n.num_outputs(); ++i) p->add_output(names_.at(n.output(i)));
    while (p->output_size() > 1 && p->output(p->output_size() - 1).empty()) p->mutable_output()->RemoveLast();
    for (const auto& [name, value] : form.attrs.items()) {
      // ONNX cannot tell an empty list from an absent attribute (the checker rejects
      // it); absent means the default, which an empty list is where one is allowed.
      if (is_empty_list(value)) continue;
      set_attribute(name, value, p->add_attribute());
    }
    extras_.add_to_node(p);
    // A fused μGraph region: a call of a model-local function holding the subgraph.
    if (n.op()->name == "MuGraph") mugraph::export_fused_call(n, p, model_, opset_);
  }

  void add_opaque(const Node& n, onnx::GraphProto* graph) {
    onnx::NodeProto* p = graph->add_node();
    *p = protos_.at(&n);
    for (int i = 0; i < p->input_size(); ++i) p->set_input(i, name_of(n.inputs()[i]));
    for (int i = 0; i < p->output_size(); ++i) p->set_output(i, names_.at(n.output(i)));
  }

  void write_graph(onnx::GraphProto* graph) {
    const ModelInfo& info = g_.info();
    graph->set_name(info.graph_name);
    if (!info.graph_doc_string.empty()) graph->set_doc_string(info.graph_doc_string);
    for (const NodePtr& in : g_.inputs()) add_value_info(in->name(), in->output(0), graph->mutable_input());
    // An overridable input keeps its default value (onnx_io.h).
    for (const NodePtr& in : g_.inputs()) {
      const onnx::TensorProto* value = extras_.input_default(in->name());
      if (!value) continue;
      onnx::TensorProto* t = graph->add_initializer();
      *t = *value;
      if (external_) external_->place_raw(t);
    }
    std::vector<NodePtr> constants;
    for (const NodePtr& n : order_)
      if (n->kind() == NodeKind::Constant && referenced_.count(n->output(0))) constants.push_back(n);
    constants.insert(constants.end(), extra_constants_.begin(), extra_constants_.end());
    for (const NodePtr& c : constants) {
      add_initializer(c, graph);
      // IR version 3 and older: every initializer is also a graph input.
      if (info.ir_version < 4) add_value_info(names_.at(c->output(0)), c->output(0), graph->mutable_input());
    }
    for (const NodePtr& n : order_)
      if (n->kind() == NodeKind::Input || n->kind() == NodeKind::Constant) add_aliases(n.get(), graph);
    for (const NodePtr& n : order_) {
      if (n->kind() == NodeKind::Op) add_op(*n, graph);
      else if (n->kind() == NodeKind::Opaque && writes_as_initializer(*n)) add_kept_constant(*n, graph);
      else if (n->kind() == NodeKind::Opaque) add_opaque(*n, graph);
      else continue;
      add_aliases(n.get(), graph);
    }
    std::unordered_set<std::string> output_names;
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      add_value_info(g_.output_names()[i], g_.outputs()[i], graph->mutable_output());
      output_names.insert(g_.output_names()[i]);
    }
    // Types of opaque outputs: ONNX inference may not recover them on re-import.
    std::unordered_set<std::string> typed = output_names;
    for (const auto& in : graph->input()) typed.insert(in.name());
    for (const auto& t : graph->initializer()) typed.insert(t.name());
    for (const NodePtr& n : order_) {
      if (n->kind() != NodeKind::Opaque || writes_as_initializer(*n)) continue;
      for (uint32_t i = 0; i < n->num_outputs(); ++i) {
        const std::string& name = names_.at(n->output(i));
        if (name.empty() || output_names.count(name)) continue;
        if (n->opaque()->output_type_unknown(i) && n->opaque()->onnx_output_types[i]->empty()) continue;
        add_value_info(name, n->output(i), graph->mutable_value_info());
        typed.insert(name);
      }
    }
    // Other values whose source value_info held metadata or a doc string keep it.
    for (const NodePtr& n : order_) {
      if (n->kind() != NodeKind::Op) continue;
      for (uint32_t i = 0; i < n->num_outputs(); ++i) {
        auto name = names_.find(n->output(i));
        if (name == names_.end() || name->second.empty() || typed.count(name->second) ||
            !extras_.value_has_extras(name->second))
          continue;
        add_value_info(name->second, n->output(i), graph->mutable_value_info());
        typed.insert(name->second);
      }
    }
    extras_.add_to_graph(graph, [&](const std::string& name) { return owner_.count(name) > 0; });
  }

  const Graph& g_;
  ExternalWriter* external_;
  const ModelExtras extras_;
  int64_t opset_ = 1;
  onnx::ModelProto* model_ = nullptr;  // the model being written (MuGraph calls add functions)
  std::vector<NodePtr> order_;
  std::unordered_map<const Node*, OnnxForm> forms_;
  std::unordered_map<const Node*, onnx::NodeProto> protos_;
  std::vector<std::pair<std::string, Value>> outer_refs_;
  std::vector<NodePtr> extra_constants_;  // constants made by onnx_export hooks
  std::unordered_set<Value, ValueHash> referenced_;
  std::unordered_map<Value, std::string, ValueHash> names_;
  std::unordered_map<std::string, Value> owner_;  // value names in use
  std::unordered_set<std::string> preferred_;
  std::unordered_map<const Node*, std::vector<std::pair<Value, std::string>>> aliases_;
  size_t counter_ = 0;
  std::unordered_set<std::string> node_names_;
  std::unordered_set<std::string> preferred_node_names_;
  size_t node_counter_ = 0;
};

// Deterministic serialization (same graph, same bytes) to any output stream.
void serialize_to(const onnx::ModelProto& m, google::protobuf::io::ZeroCopyOutputStream* stream) {
  const size_t size = m.ByteSizeLong();
  require(size <= static_cast<size_t>(INT_MAX), "the model is " + std::to_string(size) +
                                                    " bytes, over protobuf's 2 GB limit (use external data)");
  google::protobuf::io::CodedOutputStream coded(stream);
  coded.SetSerializationDeterministic(true);
  m.SerializeToCodedStream(&coded);
  require(!coded.HadError(), "serializing the model failed");
}

std::string serialize(const onnx::ModelProto& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    serialize_to(m, &stream);
  }
  return out;
}

std::string temp_name(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return path + ".tmp" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
}

}  // namespace

std::string export_onnx_bytes(const Graph& g) { return serialize(Exporter(g, nullptr).run()); }

std::string ExportedFiles::describe() const {
  char line[128];
  std::snprintf(line, sizeof line, " (%.1f MB)", static_cast<double>(model_bytes) / 1e6);
  std::string out = line;
  if (data_path.empty()) return "one file" + out + ", every tensor inline";
  std::snprintf(line, sizeof line, " (%.1f MB)", static_cast<double>(data_bytes) / 1e6);
  return "the model" + out + " and its external data " + data_path + line;
}

ExportedFiles export_onnx_file(const Graph& g, const std::string& path, const ExportOptions& opts) {
  namespace fs = std::filesystem;
  const bool external = opts.external_data || g.constant_bytes() > kAutoExternalBytes;
  const std::string data_path = path + ".data";
  const std::string tmp_model = temp_name(path);
  const std::string tmp_data = temp_name(data_path);
  try {
    std::unique_ptr<ExternalWriter> writer;
    if (external) {
      writer = std::make_unique<ExternalWriter>();
      writer->out.open(tmp_data, std::ios::binary | std::ios::trunc);
      require(writer->out.good(), "cannot write '" + tmp_data + "'");
      writer->location = fs::path(data_path).filename().string();
      writer->threshold = opts.external_threshold_bytes;
    }
    const onnx::ModelProto model = Exporter(g, writer.get()).run();
    if (writer) {
      writer->out.close();
      require(!writer->out.fail(), "writing '" + tmp_data + "' failed");
      std::error_code ec;
      fs::resize_file(tmp_data, writer->offset, ec);  // a file that ends in skipped zeros
      require(!ec, "writing '" + tmp_data + "' failed: " + ec.message());
    }
    std::ofstream out(tmp_model, std::ios::binary | std::ios::trunc);
    require(out.good(), "cannot write '" + tmp_model + "'");
    {
      google::protobuf::io::OstreamOutputStream stream(&out);
      serialize_to(model, &stream);
    }
    out.close();
    require(!out.fail(), "writing '" + tmp_model + "' failed");
    std::error_code ec;
    if (writer) {
      fs::rename(tmp_data, data_path, ec);
      require(!ec, "cannot rename '" + tmp_data + "' to '" + data_path + "': " + ec.message());
    }
    fs::rename(tmp_model, path, ec);
    require(!ec, "cannot rename '" + tmp_model + "' to '" + path + "': " + ec.message());
    ExportedFiles files;
    files.model_bytes = fs::file_size(path, ec);
    if (writer) {
      files.data_path = data_path;
      files.data_bytes = fs::file_size(data_path, ec);
    }
    return files;
  } catch (const Error& e) {
    std::error_code ignored;
    fs::remove(tmp_model, ignored);
    fs::remove(tmp_data, ignored);
    throw Error(path + ": " + e.what());
  }
}

void check_onnx_model(const std::string& bytes) {
  onnx::ModelProto model;
  require(model.ParseFromString(bytes), "not an ONNX model: the protobuf does not parse");
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw Error("ONNX checker: " + one_line(e.what()));
  }
}

void check_onnx_file(const std::string& path) {
  try {
    onnx::checker::check_model(path);
  } catch (const std::exception& e) {
    throw Error(path + ": ONNX checker: " + one_line(e.what()));
  }
}

}  // namespace isomer
