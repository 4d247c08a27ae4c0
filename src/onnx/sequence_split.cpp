#include "onnx/sequence_split.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/error.h"
#include "onnx/onnx_io.h"

namespace isomer::onnx_detail {

namespace {

bool default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

int64_t int_attr(const onnx::NodeProto& n, const std::string& name, int64_t fallback) {
  for (const auto& a : n.attribute())
    if (a.name() == name && a.type() == onnx::AttributeProto::INT) return a.i();
  return fallback;
}

// Every name a node reads, in the graph and in the subgraphs of its attributes.
void collect_reads(const onnx::GraphProto& g, std::multiset<std::string>* reads) {
  for (const auto& n : g.node()) {
    for (const auto& i : n.input()) reads->insert(i);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_reads(a.g(), reads);
      for (const auto& sub : a.graphs()) collect_reads(sub, reads);
    }
  }
}

}  // namespace

size_t slice_split_sequences(onnx::ModelProto* model, int64_t opset) {
  onnx::GraphProto& g = *model->mutable_graph();
  std::map<std::string, const onnx::NodeProto*> producer;
  bool any = false;
  for (const auto& n : g.node()) {
    for (const auto& o : n.output()) producer[o] = &n;
    any = any || (n.op_type() == "SequenceAt" && default_domain(n.domain()));
  }
  if (!any || opset < 11) return 0;
  // Integer values the graph states (initializers and Constant nodes), and whether
  // each is a scalar.
  struct Ints {
    std::vector<int64_t> values;
    bool scalar = false;
  };
  auto ints = [&](const std::string& name) -> std::optional<Ints> {
    const onnx::TensorProto* t = nullptr;
    for (const auto& init : g.initializer())
      if (init.name() == name) t = &init;
    auto p = producer.find(name);
    if (!t && p != producer.end() && p->second->op_type() == "Constant" && default_domain(p->second->domain()))
      for (const auto& a : p->second->attribute()) {
        if (a.name() == "value" && a.has_t()) t = &a.t();
        if (a.name() == "value_int") return Ints{{a.i()}, true};
        if (a.name() == "value_ints") return Ints{std::vector<int64_t>(a.ints().begin(), a.ints().end()), false};
      }
    if (!t || (t->data_type() != onnx::TensorProto::INT64 && t->data_type() != onnx::TensorProto::INT32) ||
        t->dims_size() > 1)
      return std::nullopt;
    try {
      return Ints{tensor_from_proto(*t, "").to_i64(), t->dims_size() == 0};
    } catch (const Error&) {
      return std::nullopt;
    }
  };
  std::set<std::string> names;
  for (const auto& n : g.node())
    for (const auto& o : n.output()) names.insert(o);
  for (const auto& i : g.initializer()) names.insert(i.name());
  for (const auto& i : g.input()) names.insert(i.name());
  auto fresh = [&](const std::string& base) {
    std::string name = base;
    for (int k = 1; names.count(name); ++k) name = base + "_" + std::to_string(k);
    names.insert(name);
    return name;
  };
  auto add_ints = [&](const std::string& base, const std::vector<int64_t>& v) {
    onnx::TensorProto* t = g.add_initializer();
    t->set_name(fresh(base));
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return t->name();
  };
  size_t replaced = 0;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> out;
  for (const auto& n : g.node()) {
    auto p = n.op_type() == "SequenceAt" && default_domain(n.domain()) && n.input_size() == 2
                 ? producer.find(n.input(0))
                 : producer.end();
    const onnx::NodeProto* split = p != producer.end() ? p->second : nullptr;
    std::optional<Ints> pos = split ? ints(n.input(1)) : std::nullopt;
    if (!split || split->op_type() != "SplitToSequence" || !default_domain(split->domain()) || !pos ||
        pos->values.size() != 1 || pos->values[0] < 0) {
      *out.Add() = n;
      continue;
    }
    const int64_t k = pos->values[0], axis = int_attr(*split, "axis", 0);
    const bool sizes_given = split->input_size() > 1 && !split->input(1).empty();
    const std::optional<Ints> given = sizes_given ? ints(split->input(1)) : Ints{{1}, true};
    if (!given || given->values.empty() || (!given->scalar && k >= static_cast<int64_t>(given->values.size()))) {
      *out.Add() = n;
      continue;
    }
    const std::vector<int64_t>& sizes = given->values;
    const bool scalar = given->scalar;
    // A scalar splits into chunks of that size (the last one shorter: Slice clamps its end).
    int64_t start = 0, end = 0;
    if (scalar) {
      start = k * sizes[0], end = start + sizes[0];
    } else {
      for (int64_t i = 0; i < k; ++i) start += sizes[static_cast<size_t>(i)];
      end = start + sizes[static_cast<size_t>(k)];
    }
    const std::string& piece = n.output(0);
    const bool squeeze = !sizes_given && int_attr(*split, "keepdims", 1) == 0;
    onnx::NodeProto* slice = out.Add();
    slice->set_op_type("Slice");
    slice->set_name(n.name().empty() ? "" : n.name() + "/slice");
    slice->add_input(split->input(0));
    slice->add_input(add_ints(piece + "/starts", {start}));
    slice->add_input(add_ints(piece + "/ends", {end}));
    slice->add_input(add_ints(piece + "/axes", {axis}));
    slice->add_output(squeeze ? fresh(piece + "/sliced") : piece);
    if (squeeze) {
      onnx::NodeProto* sq = out.Add();
      sq->set_op_type("Squeeze");
      sq->set_name(n.name());
      sq->add_input(slice->output(0));
      if (opset >= 13) {
        sq->add_input(add_ints(piece + "/squeeze_axes", {axis}));
      } else {
        auto* a = sq->add_attribute();
        a->set_name("axes"), a->set_type(onnx::AttributeProto::INTS), a->add_ints(axis);
      }
      sq->add_output(piece);
    }
    ++replaced;
  }
  if (replaced == 0) return 0;
  g.mutable_node()->Swap(&out);
  // SplitToSequence nodes nothing reads any more.
  std::multiset<std::string> reads;
  collect_reads(g, &reads);
  for (const auto& o : g.output()) reads.insert(o.name());
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (const auto& n : g.node())
    if (!(n.op_type() == "SplitToSequence" && default_domain(n.domain()) && n.output_size() == 1 &&
          !reads.count(n.output(0))))
      *kept.Add() = n;
  g.mutable_node()->Swap(&kept);
  return replaced;
}

}  // namespace isomer::onnx_detail
