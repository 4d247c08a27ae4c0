#include "mugraph/onnx_function.h"

#include "ir/error.h"
#include "ir/text.h"
#include "mugraph/region.h"
#include "onnx/onnx_io.h"
#include "ops/op.h"

namespace isomer::mugraph {

void export_fused_call(const Node& n, onnx::NodeProto* call, onnx::ModelProto* model, int64_t opset) {
  auto region = fused_region(n.attrs());
  const std::string name = region->function_name();
  call->set_op_type(name);
  call->set_domain(kDomain);
  call->clear_attribute();
  const std::string kernel = n.attrs().get_string("kernel", "");
  if (!kernel.empty()) {
    onnx::AttributeProto* a = call->add_attribute();
    a->set_name("kernel");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(kernel);
  }
  bool has_domain = false;
  for (const auto& o : model->opset_import()) has_domain = has_domain || o.domain() == kDomain;
  if (!has_domain) {
    auto* o = model->add_opset_import();
    o->set_domain(kDomain);
    o->set_version(1);
  }
  for (const auto& f : model->functions())
    if (f.domain() == kDomain && f.name() == name) return;
  // The body as ONNX at the model's opset, by isomer's own exporter.
  Graph body = region->body;
  ModelInfo info = body.info();
  info.opset_imports = {{"", opset}};
  info.ir_version = model->ir_version();
  Graph at_opset(body.inputs(), body.outputs(), body.output_names(), info);
  onnx::ModelProto bm;
  require(bm.ParseFromString(export_onnx_bytes(at_opset)), "MuGraph body does not export");
  onnx::FunctionProto* f = model->add_functions();
  f->set_name(name);
  f->set_domain(kDomain);
  f->set_doc_string(region->body_text);
  f->add_attribute("kernel");
  for (const auto& in : bm.graph().input()) f->add_input(in.name());
  for (const auto& out : bm.graph().output()) f->add_output(out.name());
  for (const auto& t : bm.graph().initializer()) {
    onnx::NodeProto* c = f->add_node();
    c->set_op_type("Constant");
    c->add_output(t.name());
    onnx::AttributeProto* a = c->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = t;
    a->mutable_t()->clear_name();
  }
  for (const auto& node : bm.graph().node()) *f->add_node() = node;
  for (const auto& o : bm.opset_import()) *f->add_opset_import() = o;
}

namespace {

// The body a call's function stands for: its isomer text if it fits the call, else
// its nodes imported at the call's input types.
Graph body_of(const onnx::FunctionProto& f, const std::vector<Value>& inputs, const onnx::ModelProto& model,
              size_t outputs) {
  auto fits = [&](const Graph& g) {
    if (g.inputs().size() != inputs.size() || g.outputs().size() != outputs) return false;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!(g.inputs()[i]->output_types()[0] == inputs[i].type())) return false;
    return true;
  };
  if (!f.doc_string().empty()) {
    try {
      Graph g = parse_graph(f.doc_string());
      if (fits(g)) return g;
    } catch (const Error&) {
    }
  }
  onnx::ModelProto m;
  m.set_ir_version(model.ir_version());
  *m.mutable_opset_import() = f.opset_import();
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name(f.name());
  for (const auto& n : f.node()) *g->add_node() = n;
  for (int i = 0; i < f.input_size(); ++i) {
    auto* vi = g->add_input();
    vi->set_name(f.input(i));
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    const TensorType& t = inputs[static_cast<size_t>(i)].type();
    tt->set_elem_type(static_cast<int>(t.dtype));
    auto* shape = tt->mutable_shape();
    for (const Dim& d : t.shape) {
      require(d.is_static(), "a dynamic dim at a MuGraph call");
      shape->add_dim()->set_dim_value(d.value);
    }
  }
  for (const auto& o : f.output()) g->add_output()->set_name(o);
  Graph body = import_onnx_bytes(m.SerializeAsString(), "");
  require(fits(body), "the function's body does not fit the call");
  return body;
}

}  // namespace

NodePtr import_fused_call(const onnx::NodeProto& call, const std::vector<Value>& inputs,
                          const onnx::ModelProto& model, std::string* reason) {
  const onnx::FunctionProto* f = nullptr;
  for (const auto& fn : model.functions())
    if (fn.domain() == call.domain() && fn.name() == call.op_type()) f = &fn;
  if (!f) {
    *reason = "no model-local function '" + call.op_type() + "' of domain " + call.domain();
    return nullptr;
  }
  for (const Value& v : inputs)
    if (!v.present() || type_unknown(v) || !is_static(v.type().shape)) {
      *reason = "a MuGraph call with an input of unknown or dynamic shape";
      return nullptr;
    }
  std::string kernel;
  for (const auto& a : call.attribute())
    if (a.name() == "kernel") kernel = a.s();
  try {
    Graph body = body_of(*f, inputs, model, static_cast<size_t>(call.output_size()));
    Attributes at;
    at.set("body", print_graph(body));
    at.set("kernel", kernel);
    std::vector<std::string> outs(call.output().begin(), call.output().end());
    return Node::make_op(get_op("MuGraph"), inputs, at, outs.size(), call.name(), outs);
  } catch (const Error& e) {
    *reason = std::string("MuGraph call: ") + e.what();
    return nullptr;
  }
}

}  // namespace isomer::mugraph
