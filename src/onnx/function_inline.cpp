#include "onnx/function_inline.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/error.h"
#include "mugraph/region.h"
#include "onnx/function_check.h"
#include "onnx/libonnx_inference.h"
#include "onnx/onnx_versions.h"
#include "onnx/proto_util.h"
#include "onnx/vendor_types.h"

namespace isomer::onnx_detail {
namespace {

using Key = std::tuple<std::string, std::string, std::string>;  // domain, name, overload
using Scope = std::unordered_map<std::string, std::string>;     // a body's name -> its inlined name

// Bodies calling bodies grow a graph geometrically (a chain of functions each calling the
// next twice); past these, the calls left stay calls.
constexpr size_t kMaxInlinedNodes = 200000;
constexpr int kMaxSubgraphDepth = 32;
constexpr size_t kMaxPrefix = 200;

template <class Visit>
void for_each_graph_node(onnx::GraphProto* g, const Visit& visit) {
  for (auto& n : *g->mutable_node()) {
    visit(n);
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) for_each_graph_node(a.mutable_g(), visit);
      for (auto& sub : *a.mutable_graphs()) for_each_graph_node(&sub, visit);
    }
  }
}

// Every value name `g` and its subgraphs define or read.
void collect_names(const onnx::GraphProto& g, std::unordered_set<std::string>* names) {
  for (const auto& v : g.input()) names->insert(v.name());
  for (const auto& v : g.output()) names->insert(v.name());
  for (const auto& v : g.value_info()) names->insert(v.name());
  for (const auto& t : g.initializer()) names->insert(t.name());
  for (const auto& t : g.sparse_initializer()) names->insert(t.values().name());
  for (const auto& n : g.node()) {
    names->insert(n.input().begin(), n.input().end());
    names->insert(n.output().begin(), n.output().end());
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_names(a.g(), names);
      for (const auto& sub : a.graphs()) collect_names(sub, names);
    }
  }
}

size_t count_nodes(const onnx::NodeProto& n) {
  size_t total = 1;
  for (const auto& a : n.attribute()) {
    std::vector<const onnx::GraphProto*> graphs;
    if (a.has_g()) graphs.push_back(&a.g());
    for (const auto& sub : a.graphs()) graphs.push_back(&sub);
    for (const onnx::GraphProto* g : graphs)
      for (const auto& m : g->node()) total += count_nodes(m);
  }
  return total;
}

class Inliner {
 public:
  explicit Inliner(onnx::ModelProto* model) : model_(*model) {
    for (const auto& f : model->functions())
      if (f.domain() != mugraph::kDomain) functions_[{f.domain(), f.name(), function_overload(f)}] = &f;
    for (const auto& o : model->opset_import()) imports_[import_key(o.domain())] = o.version();
    collect_names(model->graph(), &names_);
    for_each_graph_node(model->mutable_graph(), [&](const onnx::NodeProto& n) { node_names_.insert(n.name()); });
  }

  InlinedFunctions run() {
    if (functions_.empty()) return {};
    called_before_ = called_functions();
    expand(model_.mutable_graph(), 0);
    for (const auto& [domain, version] : added_imports_) {
      auto* o = model_.add_opset_import();
      o->set_domain(domain);
      o->set_version(version);
    }
    drop_uncalled_functions();
    return std::move(result_);
  }

 private:
  static std::string import_key(const std::string& domain) { return is_default_domain(domain) ? "" : domain; }

  // The function `n` calls, or nullptr: a name its domain defines as an operator at the
  // model's opset is that operator, whatever function shares its name. ONNX leaves the
  // choice to the runtime; ONNX Runtime takes its own operator, in vendor domains too (a
  // function com.microsoft.Gelu is its Gelu kernel), so a vendor domain's operators are
  // those ONNX Runtime defines there.
  const onnx::FunctionProto* called(const onnx::NodeProto& n) {
    auto it = functions_.find(Key{n.domain(), n.op_type(), call_overload(n)});
    if (it == functions_.end()) return nullptr;
    auto version = imports_.find(import_key(n.domain()));
    if (version == imports_.end()) return it->second;
    if (op_version(n.domain(), n.op_type(), version->second) != 0) return nullptr;
    if (newest_opset(n.domain()) == 0) {  // not an ONNX domain
      auto ops = vendor_ops_.find(n.domain());
      if (ops == vendor_ops_.end()) ops = vendor_ops_.emplace(n.domain(), onnxruntime_operators(n.domain())).first;
      if (ops->second) {
        auto op = ops->second->find(n.op_type());
        if (op != ops->second->end() && op->second <= version->second) return nullptr;
      }
    }
    return it->second;
  }

  // Expands the calls of `g` in place, bodies inside bodies in the order they run, then
  // those of its subgraphs. Iterative: a chain of many functions must not overflow the stack.
  void expand(onnx::GraphProto* g, int depth) {
    std::vector<onnx::NodeProto> pending(g->mutable_node()->begin(), g->mutable_node()->end());
    std::reverse(pending.begin(), pending.end());
    g->clear_node();
    while (!pending.empty()) {
      onnx::NodeProto n = std::move(pending.back());
      pending.pop_back();
      const onnx::FunctionProto* f = called(n);
      if (!f) {
        *g->add_node() = std::move(n);
        continue;
      }
      std::string why;
      if (depth > kMaxSubgraphDepth) {
        why = "calls nest in more than " + std::to_string(kMaxSubgraphDepth) + " levels of subgraphs";
      } else {
        size_t size = static_cast<size_t>(f->output_size());  // copies of returned inputs, at most
        for (const auto& m : f->node()) size += count_nodes(m);
        if (inlined_nodes_ + size > kMaxInlinedNodes)
          why = "expanding every call would add over " + std::to_string(kMaxInlinedNodes) + " nodes";
        else
          inlined_nodes_ += size;
      }
      if (!why.empty()) {
        result_.kept.emplace(n.domain(), n.op_type());
        if (result_.kept_reason.empty()) result_.kept_reason = "model-local function kept as a call: " + why;
        *g->add_node() = std::move(n);
        continue;
      }
      std::vector<onnx::NodeProto> body = instantiate(n, *f);
      ++result_.calls;
      for (const auto& o : f->opset_import())
        if (!imports_.count(import_key(o.domain()))) {
          imports_[import_key(o.domain())] = o.version();
          added_imports_.emplace_back(o.domain(), o.version());
        }
      for (auto it = body.rbegin(); it != body.rend(); ++it) pending.push_back(std::move(*it));
    }
    for (auto& n : *g->mutable_node())
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) expand(a.mutable_g(), depth + 1);
        for (auto& sub : *a.mutable_graphs()) expand(&sub, depth + 1);
      }
  }

  std::string fresh_value(const std::string& prefix, const std::string& name) {
    std::string candidate = prefix + "/" + name;
    for (int i = 1; names_.count(candidate); ++i) candidate = prefix + "/" + name + "_" + std::to_string(i);
    names_.insert(candidate);
    return candidate;
  }

  std::string fresh_node_name(const std::string& prefix, const onnx::NodeProto& n) {
    const std::string base = prefix + "/" + (n.name().empty() ? n.op_type() : n.name());
    std::string candidate = base;
    for (int i = 1; node_names_.count(candidate); ++i) candidate = base + "_" + std::to_string(i);
    node_names_.insert(candidate);
    return candidate;
  }

  // The nodes that compute call `c` of `f`: its body with names bound and renamed, and
  // attribute references resolved. Calls among them are expanded in turn by `expand`.
  std::vector<onnx::NodeProto> instantiate(const onnx::NodeProto& c, const onnx::FunctionProto& f) {
    // Inlined names say where they come from ("ln1/mean", "F/G/mean"), up to a length: a
    // chain of thousands of calls must not grow every name quadratically.
    std::string prefix = c.name().empty() ? c.op_type() : c.name();
    if (prefix.size() > kMaxPrefix) prefix = c.op_type().substr(0, kMaxPrefix) + "#" + std::to_string(result_.calls);
    std::map<std::string, onnx::AttributeProto> given;
    for (const auto& d : attribute_defaults(f)) given[d.name()] = d;
    for (const auto& a : c.attribute()) given[a.name()] = a;
    Scope scope;
    for (int i = 0; i < f.input_size(); ++i) scope[f.input(i)] = i < c.input_size() ? c.input(i) : "";
    // A body value returned (first under its name) takes the call's name for it directly.
    Scope returned;
    for (int i = 0; i < f.output_size() && i < c.output_size(); ++i)
      if (!c.output(i).empty() && !scope.count(f.output(i))) returned.emplace(f.output(i), c.output(i));
    std::vector<onnx::NodeProto> body;
    for (const auto& m : f.node()) {
      onnx::NodeProto n = m;
      for (auto& in : *n.mutable_input()) in = in.empty() ? in : scope.at(in);
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) rename_graph(a.mutable_g(), scope, prefix);
        for (auto& sub : *a.mutable_graphs()) rename_graph(&sub, scope, prefix);
      }
      resolve_references(&n, given);
      for (auto& out : *n.mutable_output()) {
        if (out.empty()) continue;
        auto r = returned.find(out);
        const std::string bound = r != returned.end() ? r->second : fresh_value(prefix, out);
        if (r != returned.end()) returned.erase(r);
        scope[out] = bound;
        out = bound;
      }
      n.set_name(fresh_node_name(prefix, m));
      body.push_back(std::move(n));
    }
    // Outputs the body names otherwise (an input, or one value returned twice) are copies.
    for (int i = 0; i < f.output_size() && i < c.output_size(); ++i) {
      const std::string& value = scope.at(f.output(i));
      if (c.output(i).empty() || value == c.output(i)) continue;
      require(!value.empty(), describe_proto(c) + ": calls model-local function '" + f.name() + "', which returns " +
                                  "its input '" + f.output(i) + "', but the call leaves that input out");
      onnx::NodeProto copy;
      copy.set_op_type("Identity");
      copy.add_input(value);
      copy.add_output(c.output(i));
      copy.set_name(fresh_node_name(prefix, copy));
      body.push_back(std::move(copy));
    }
    return body;
  }

  // Renames what subgraph `g` of a body defines, and its reads of the body's values
  // (`outer`), apart from every name of the model.
  void rename_graph(onnx::GraphProto* g, Scope scope, const std::string& prefix) {
    auto define = [&](std::string* name) {
      if (name->empty()) return;
      std::string fresh = fresh_value(prefix, *name);
      scope[*name] = fresh;
      *name = std::move(fresh);
    };
    auto read = [&](std::string* name) {
      auto it = scope.find(*name);
      if (it != scope.end()) *name = it->second;
    };
    // Every definition first: a subgraph's nodes need not be in order.
    for (auto& v : *g->mutable_input()) define(v.mutable_name());
    for (auto& t : *g->mutable_initializer()) define(t.mutable_name());
    for (auto& t : *g->mutable_sparse_initializer()) define(t.mutable_values()->mutable_name());
    for (auto& n : *g->mutable_node())
      for (auto& out : *n.mutable_output()) define(&out);
    for (auto& n : *g->mutable_node()) {
      for (auto& in : *n.mutable_input()) read(&in);
      n.set_name(fresh_node_name(prefix, n));
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) rename_graph(a.mutable_g(), scope, prefix);
        for (auto& sub : *a.mutable_graphs()) rename_graph(&sub, scope, prefix);
      }
    }
    for (auto& v : *g->mutable_output()) read(v.mutable_name());
    for (auto& v : *g->mutable_value_info()) read(v.mutable_name());
    for (auto& q : *g->mutable_quantization_annotation()) read(q.mutable_tensor_name());
  }

  // Each attribute of `n` (and of the nodes of its subgraphs) that refers to an attribute
  // of the call takes the call's value, or the function's default; with neither, it is
  // absent, as ONNX says.
  static void resolve_references(onnx::NodeProto* n, const std::map<std::string, onnx::AttributeProto>& given) {
    google::protobuf::RepeatedPtrField<onnx::AttributeProto> resolved;
    for (auto& a : *n->mutable_attribute()) {
      if (a.ref_attr_name().empty()) {
        if (a.has_g())
          for (auto& m : *a.mutable_g()->mutable_node()) resolve_references(&m, given);
        for (auto& sub : *a.mutable_graphs())
          for (auto& m : *sub.mutable_node()) resolve_references(&m, given);
        *resolved.Add() = std::move(a);
        continue;
      }
      auto it = given.find(a.ref_attr_name());
      if (it == given.end()) continue;
      onnx::AttributeProto value = it->second;
      value.set_name(a.name());
      value.set_type(attribute_type(value));
      *resolved.Add() = std::move(value);
    }
    n->mutable_attribute()->Swap(&resolved);
  }

  // The functions a node of the graph calls, and those their bodies call.
  std::set<Key> called_functions() {
    std::set<Key> needed;
    auto note = [&](const onnx::NodeProto& n) { needed.insert(Key{n.domain(), n.op_type(), call_overload(n)}); };
    for_each_graph_node(model_.mutable_graph(), note);
    for (bool grew = true; grew;) {
      grew = false;
      for (auto& f : *model_.mutable_functions()) {
        if (!needed.count(Key{f.domain(), f.name(), function_overload(f)})) continue;
        const size_t before = needed.size();
        onnx::GraphProto body;
        *body.mutable_node() = f.node();
        for_each_graph_node(&body, note);
        grew = grew || needed.size() > before;
      }
    }
    return needed;
  }

  // Drops the functions the calls inlined were the last to call; those no call needs now
  // (kept calls, ai.isomer.mugraph regions) and those no call needed before stay.
  void drop_uncalled_functions() {
    const std::set<Key> needed = called_functions();
    google::protobuf::RepeatedPtrField<onnx::FunctionProto> kept;
    for (auto& f : *model_.mutable_functions()) {
      const Key key{f.domain(), f.name(), function_overload(f)};
      if (needed.count(key) || !called_before_.count(key)) *kept.Add() = std::move(f);
    }
    functions_.clear();  // pointed into the old list
    model_.mutable_functions()->Swap(&kept);
  }

  onnx::ModelProto& model_;
  std::map<Key, const onnx::FunctionProto*> functions_;
  std::set<Key> called_before_;
  std::map<std::string, int64_t> imports_;  // domain ("" for ai.onnx) -> opset
  std::map<std::string, std::optional<std::map<std::string, int>>> vendor_ops_;  // ONNX Runtime's, asked once
  std::vector<std::pair<std::string, int64_t>> added_imports_;
  std::unordered_set<std::string> names_;
  std::unordered_set<std::string> node_names_;
  size_t inlined_nodes_ = 0;
  InlinedFunctions result_;
};

}  // namespace

InlinedFunctions inline_model_functions(onnx::ModelProto* model) { return Inliner(model).run(); }

}  // namespace isomer::onnx_detail
