#include "onnx/function_check.h"

#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "ir/error.h"
#include "onnx/libonnx_inference.h"
#include "onnx/onnx_versions.h"
#include "onnx/proto_util.h"
#include "onnx/schema_check.h"

namespace isomer::onnx_detail {
namespace {

// IR 10's `overload` (FunctionProto field 13, NodeProto field 8), which this libonnx
// parses as an unknown field.
constexpr int kFunctionOverload = 13;
constexpr int kNodeOverload = 8;
// IR 9's attribute_proto (FunctionProto field 11: attributes with default values), which
// this libonnx parses as unknown fields too.
constexpr int kFunctionAttributeProto = 11;

template <class Message>
std::string overload_of(const Message& m, int field) {
  const google::protobuf::UnknownFieldSet& unknown = m.unknown_fields();
  for (int i = 0; i < unknown.field_count(); ++i)
    if (unknown.field(i).number() == field &&
        unknown.field(i).type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      return unknown.field(i).length_delimited();
  return "";
}

}  // namespace

std::string function_overload(const onnx::FunctionProto& f) { return overload_of(f, kFunctionOverload); }
std::string call_overload(const onnx::NodeProto& n) { return overload_of(n, kNodeOverload); }

std::vector<onnx::AttributeProto> attribute_defaults(const onnx::FunctionProto& f) {
  std::vector<onnx::AttributeProto> out;
  const google::protobuf::UnknownFieldSet& unknown = f.unknown_fields();
  for (int i = 0; i < unknown.field_count(); ++i) {
    if (unknown.field(i).number() != kFunctionAttributeProto ||
        unknown.field(i).type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::AttributeProto a;
    if (a.ParseFromString(unknown.field(i).length_delimited())) out.push_back(std::move(a));
  }
  return out;
}

namespace {

using Imports = google::protobuf::RepeatedPtrField<onnx::OperatorSetIdProto>;

using Key = std::tuple<std::string, std::string, std::string>;  // domain, name, overload

std::string key_name(const Key& k) {
  const auto& [domain, name, overload] = k;
  return domain + ":" + name + (overload.empty() ? "" : ":" + overload);
}

bool imports_exactly(const Imports& imports, const std::string& domain) {
  for (const auto& o : imports)
    if (o.domain() == domain) return true;
  return false;
}

// Calls `visit` on every node of `g` and of the subgraphs inside its nodes.
void for_each_node(const onnx::GraphProto& g, const std::function<void(const onnx::NodeProto&)>& visit) {
  for (const auto& n : g.node()) {
    visit(n);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) for_each_node(a.g(), visit);
      for (const auto& sub : a.graphs()) for_each_node(sub, visit);
    }
  }
}

// Calls `visit` on every node of a function's body, subgraphs included.
void for_each_node(const onnx::FunctionProto& f, const std::function<void(const onnx::NodeProto&)>& visit) {
  onnx::GraphProto body;
  *body.mutable_node() = f.node();
  for_each_node(body, visit);
}

class FunctionChecker {
 public:
  explicit FunctionChecker(const onnx::ModelProto& model) : model_(model) {
    for (const auto& f : model.functions()) {
      const Key k{f.domain(), f.name(), function_overload(f)};
      require(functions_.emplace(k, &f).second, "model-local function '" + key_name(k) + "' is defined twice");
    }
  }

  void run() {
    // ONNX lets an attribute refer to a calling function's attribute only inside a
    // function body: in the graph it names nothing, and its own value field (unset,
    // so 0) would be read instead.
    for_each_node(model_.graph(), [&](const onnx::NodeProto& n) {
      for (const auto& a : n.attribute())
        require(a.ref_attr_name().empty(), describe_proto(n) + ": attribute '" + a.name() +
                                               "' refers to a function attribute '" + a.ref_attr_name() +
                                               "', but the node is not in a function body");
    });
    if (functions_.empty()) return;
    for (const auto& [key, f] : functions_) check_body(key, *f);
    check_recursion();
    for_each_node(model_.graph(), [&](const onnx::NodeProto& n) {
      const onnx::FunctionProto* callee = called(n);
      require_overload_defined(n, callee, "");
      if (!callee) return;
      require(imported_by_model(n.domain()), describe_proto(n) + ": calls model-local function '" +
                                                 key_name(key_of(*callee)) + "', but the model imports no opset of " +
                                                 "domain '" + n.domain() + "'");
      check_call(n, *callee, "");
    });
  }

 private:
  static Key key_of(const onnx::FunctionProto& f) { return {f.domain(), f.name(), function_overload(f)}; }

  const onnx::FunctionProto* called(const onnx::NodeProto& n) const {
    auto it = functions_.find(Key{n.domain(), n.op_type(), call_overload(n)});
    return it == functions_.end() ? nullptr : it->second;
  }

  // A node that names a model-local function whose overloads (IR 10) do not include the
  // one it asks for calls nothing: ONNX Runtime finds no such operator.
  void require_overload_defined(const onnx::NodeProto& n, const onnx::FunctionProto* callee,
                                const std::string& where) const {
    if (callee) return;
    std::string defined;
    for (const auto& [key, f] : functions_)
      if (std::get<0>(key) == n.domain() && std::get<1>(key) == n.op_type())
        defined += (defined.empty() ? "'" : ", '") + std::get<2>(key) + "'";
    if (defined.empty()) return;
    const std::string asked = call_overload(n);
    throw Error(where + describe_proto(n) + ": calls model-local function '" + n.domain() + ":" + n.op_type() +
                "' with overload '" + asked + "', but the model defines it only with overload(s) " + defined);
  }

  bool imported_by_model(const std::string& domain) const {
    for (const auto& o : model_.opset_import())
      if (o.domain() == domain || (is_default_domain(o.domain()) && is_default_domain(domain))) return true;
    return false;
  }

  void check_body(const Key& key, const onnx::FunctionProto& f) {
    const std::string where = "model-local function '" + key_name(key) + "' ";
    check_body_names(f, where);
    for (const auto& d : attribute_defaults(f))  // for calls that leave the attribute out
      if (std::string clash = ref_type_clash(f, d.name(), attribute_type(d)); !clash.empty())
        throw Error(where + "gives attribute '" + d.name() + "' a default of type " +
                    onnx::AttributeProto::AttributeType_Name(attribute_type(d)) + ", but " + clash);
    std::set<Key>& callees = calls_[key];
    for_each_node(f, [&](const onnx::NodeProto& n) {
      require(imports_exactly(f.opset_import(), n.domain()),
              where + describe_proto(n) + ": the function imports no opset of domain '" + n.domain() + "'");
      if (std::string why = missing_operator(n, f.opset_import(), model_.functions()); !why.empty())
        throw Error(where + describe_proto(n) + ": " + why);
      check_body_version(n, f, where);
      require_overload_defined(n, called(n), where);
      if (const onnx::FunctionProto* callee = called(n)) {
        check_call(n, *callee, where);
        callees.insert(key_of(*callee));
      }
    });
  }

  // The function imports its own opsets; where the model imports the same domain at
  // another version, ONNX requires that each operator of the body mean the same at both
  // (a body of Squeeze-11 in a model of opset 21, where Squeeze takes its axes as an
  // input, is not a function the model can call: onnx.checker and ONNX Runtime refuse it).
  void check_body_version(const onnx::NodeProto& n, const onnx::FunctionProto& f, const std::string& where) const {
    int64_t mine = 0, model = 0;
    for (const auto& o : f.opset_import())
      if (o.domain() == n.domain()) mine = o.version();
    for (const auto& o : model_.opset_import())
      if (o.domain() == n.domain() || (is_default_domain(o.domain()) && is_default_domain(n.domain())))
        model = o.version();
    if (mine == 0 || model == 0 || mine == model) return;
    const int at_function = op_version(n.domain(), n.op_type(), mine);
    const int at_model = op_version(n.domain(), n.op_type(), model);
    require(at_function == at_model,
            where + describe_proto(n) + ": the function imports opset " + std::to_string(mine) + " of domain '" +
                n.domain() + "', where " + n.op_type() + " is version " + std::to_string(at_function) +
                ", but the model imports opset " + std::to_string(model) + ", where it is version " +
                std::to_string(at_model) + " (ONNX requires the two to agree)");
  }

  // A function has no enclosing scope: its nodes (and the subgraphs inside them) read
  // its inputs and the outputs of the nodes before them, each name defined once, and it
  // returns names so defined.
  static void check_body_names(const onnx::FunctionProto& f, const std::string& where) {
    std::unordered_set<std::string> defined;
    for (const auto& in : f.input())
      require(defined.insert(in).second, where + "declares input '" + in + "' twice");
    for (const auto& n : f.node()) {
      std::vector<std::string> reads(n.input().begin(), n.input().end());
      for (auto& name : outer_scope_names(n)) reads.push_back(std::move(name));
      for (const auto& name : reads)
        require(name.empty() || defined.count(name), where + describe_proto(n) + " reads '" + name +
                                                          "', which no input of the function or node before it defines");
      for (const auto& o : n.output())
        require(o.empty() || defined.insert(o).second,
                where + describe_proto(n) + ": output '" + o + "' is already defined in the function");
    }
    for (const auto& out : f.output())
      require(defined.count(out), where + "returns '" + out + "', which nothing in the function defines");
    // A body inside the function returns what it defines itself (as check_subgraphs holds
    // the graph's bodies to).
    for_each_node(f, [&](const onnx::NodeProto& n) {
      for (const auto& a : n.attribute()) {
        std::vector<const onnx::GraphProto*> bodies;
        if (a.has_g()) bodies.push_back(&a.g());
        for (const auto& g : a.graphs()) bodies.push_back(&g);
        for (const onnx::GraphProto* g : bodies) {
          std::unordered_set<std::string> own;
          for (const auto& in : g->input()) own.insert(in.name());
          for (const auto& t : g->initializer()) own.insert(t.name());
          for (const auto& sp : g->sparse_initializer()) own.insert(sp.values().name());
          for (const auto& m : g->node()) own.insert(m.output().begin(), m.output().end());
          for (const auto& out : g->output())
            require(own.count(out.name()), where + describe_proto(n) + " " + a.name() + ": output '" + out.name() +
                                               "' is not defined in the " + a.name() +
                                               " (a body may read a value from outside, not return it as it is)");
        }
      }
    });
  }

  // The attributes of `f`'s body that refer to the call's attribute `name` and declare
  // the type they take; the first whose type the call's `given` is not, described.
  static std::string ref_type_clash(const onnx::FunctionProto& f, const std::string& name,
                                    onnx::AttributeProto::AttributeType given) {
    std::string clash;
    for_each_node(f, [&](const onnx::NodeProto& n) {
      for (const auto& a : n.attribute())
        if (clash.empty() && a.ref_attr_name() == name && a.type() != onnx::AttributeProto::UNDEFINED &&
            a.type() != given)
          clash = describe_proto(n) + " takes it as its attribute '" + a.name() + "' of type " +
                  onnx::AttributeProto::AttributeType_Name(a.type());
    });
    return clash;
  }

  // A call gives at most the inputs the function declares and exactly its outputs, every
  // input its body reads where the reading operator requires it, and attributes of the
  // types the body takes them at.
  void check_call(const onnx::NodeProto& n, const onnx::FunctionProto& f, const std::string& where) const {
    const std::string who = where + describe_proto(n) + ": calls model-local function '" + key_name(key_of(f)) + "' ";
    require(n.input_size() <= f.input_size(), who + "with " + std::to_string(n.input_size()) + " inputs; it declares " +
                                                  std::to_string(f.input_size()));
    // Unlike an operator's trailing optional outputs, a function's are not left off: a
    // call names each ("" for one it does not use); onnx's inference and ONNX Runtime
    // refuse a call with fewer.
    require(n.output_size() == f.output_size(),
            who + "with " + std::to_string(n.output_size()) + " outputs; it declares " +
                std::to_string(f.output_size()) +
                (n.output_size() < f.output_size() ? " (name an unused one \"\")" : ""));
    for (const auto& a : n.attribute()) {
      // A reference passed on (a call inside a function) has the type it declares.
      const auto given = a.ref_attr_name().empty() ? attribute_type(a) : a.type();
      if (given == onnx::AttributeProto::UNDEFINED) continue;
      if (std::string clash = ref_type_clash(f, a.name(), given); !clash.empty())
        throw Error(who + "with attribute '" + a.name() + "' of type " + onnx::AttributeProto::AttributeType_Name(given) + ", but " + clash);
    }
    for (int i = 0; i < f.input_size(); ++i) {
      if (i < n.input_size() && !n.input(i).empty()) continue;
      if (std::string reader = required_reader(f, f.input(i)); !reader.empty())
        throw Error(who + "without its input '" + f.input(i) + "', which " + reader + " requires");
    }
  }

  // A node of `f`'s body that reads `name` where its operator requires an input (as
  // libonnx's schema of its version says), described; "" if none does.
  static std::string required_reader(const onnx::FunctionProto& f, const std::string& name) {
    std::string reader;
    for_each_node(f, [&](const onnx::NodeProto& n) {
      int64_t version = 0;
      for (const auto& o : f.opset_import())
        if (o.domain() == n.domain()) version = o.version();
      const onnx::OpSchema* schema = libonnx_schema(n.domain(), n.op_type(), version);
      for (int i = 0; schema && reader.empty() && i < n.input_size(); ++i) {
        if (n.input(i) != name || schema->inputs().empty()) continue;
        const size_t formal = std::min<size_t>(static_cast<size_t>(i), schema->inputs().size() - 1);
        if (schema->inputs()[formal].GetOption() != onnx::OpSchema::Optional) reader = describe_proto(n);
      }
    });
    return reader;
  }

  // Functions that call themselves, directly or through others (depth-first, without
  // recursion: a chain of many functions must not overflow the stack).
  void check_recursion() const {
    std::map<Key, int> state;  // 0 unvisited, 1 on the path, 2 done
    for (const auto& [start, unused] : calls_) {
      if (state[start] != 0) continue;
      std::vector<std::pair<Key, std::set<Key>::const_iterator>> path;
      auto enter = [&](const Key& k) {
        state[k] = 1;
        path.emplace_back(k, calls_.at(k).begin());
      };
      enter(start);
      while (!path.empty()) {
        auto& [key, next] = path.back();
        if (next == calls_.at(key).end()) {
          state[key] = 2;
          path.pop_back();
          continue;
        }
        const Key callee = *next++;
        if (state[callee] == 1) {
          std::string cycle;
          bool on = false;
          for (const auto& [k, unused_it] : path) {
            on = on || k == callee;
            if (on) cycle += key_name(k) + " -> ";
          }
          throw Error("model-local function '" + key_name(callee) + "' calls itself (" + cycle + key_name(callee) +
                      "): functions must not be recursive");
        }
        if (state[callee] == 0) enter(callee);
      }
    }
  }

  const onnx::ModelProto& model_;
  std::map<Key, const onnx::FunctionProto*> functions_;
  std::map<Key, std::set<Key>> calls_;  // function -> the functions its body calls
};

}  // namespace

void check_model_functions(const onnx::ModelProto& model) { FunctionChecker(model).run(); }

}  // namespace isomer::onnx_detail
