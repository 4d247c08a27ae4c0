// The graph text format (ir/text.h), printing side: print_graph and print_type.
#include "ir/text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/text_internal.h"

namespace isomer {

// ---- Shared with the parser (declared in text_internal.h) ------------------------

namespace text_detail {

std::string quote(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char ch : bytes) {
    auto c = static_cast<unsigned char>(ch);
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

}  // namespace text_detail

namespace {

using namespace text_detail;

// Tensors with at most this many elements print their values inline; larger ones as hex.
constexpr int64_t kMaxInlineElements = 16;

// ---- Names and quoting -----------------------------------------------------------

bool is_plain_name(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_name_char); }

// A word the lexer reads back as one identifier ("inf" and "nan" read as numbers).
bool is_plain_ident(std::string_view s) {
  return is_plain_name(s) && (is_letter(s[0]) || s[0] == '_') && s != "inf" && s != "nan";
}

std::string ident_or_quote(std::string_view s) { return is_plain_ident(s) ? std::string(s) : quote(s); }
// The reference to a named value (all-digit text would read as anonymous).
std::string named_ref(std::string_view s) {
  std::string ref = "%";
  ref += is_plain_name(s) && !all_digits(s) ? std::string(s) : quote(s);
  return ref;
}

// ---- Blobs: hex for tensor data, base64 for serialized protos -------------------

std::string to_base64(std::string_view bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 2]);
    out += kBase64[(n >> 18) & 63];
    out += kBase64[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kBase64[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kBase64[n & 63] : '=';
  }
  return out;
}

// ---- Numbers ----------------------------------------------------------------------

template <class T>
std::string shortest(T v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// A float attribute: the shortest text that reads back to the same double, marked as
// a float. Float32 values widened to double (what ONNX float attributes are) print
// shorter as "0.1f" = the float32 nearest 0.1.
std::string float_attr_text(double v) {
  std::string s = shortest(v);
  if (std::isfinite(v) && static_cast<double>(static_cast<float>(v)) == v) {
    std::string f = shortest(static_cast<float>(v));
    if (f.size() < s.size()) return f + "f";
  }
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

// ---- Tensor elements -------------------------------------------------------------

template <class T>
T load(std::string_view bytes, int64_t i) {
  T v;
  std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
  return v;
}

std::string element_text(DType dt, std::string_view b, int64_t i) {
  switch (dt) {
    case DType::Float32: return shortest(load<float>(b, i));
    case DType::Float64: return shortest(load<double>(b, i));
    case DType::Float16: return shortest(half_to_float(load<uint16_t>(b, i)));
    case DType::BFloat16: return shortest(bfloat16_to_float(load<uint16_t>(b, i)));
    case DType::Bool: return load<uint8_t>(b, i) ? "true" : "false";
    case DType::UInt8: return std::to_string(load<uint8_t>(b, i));
    case DType::Int8: return std::to_string(load<int8_t>(b, i));
    case DType::UInt16: return std::to_string(load<uint16_t>(b, i));
    case DType::Int16: return std::to_string(load<int16_t>(b, i));
    case DType::Int32: return std::to_string(load<int32_t>(b, i));
    case DType::UInt32: return std::to_string(load<uint32_t>(b, i));
    case DType::Int64: return std::to_string(load<int64_t>(b, i));
    case DType::UInt64: return std::to_string(load<uint64_t>(b, i));
    default: return "";
  }
}

// "{1, 2.5}" when the values read back bit-exactly (not so for NaN payloads, say);
// nullopt when the tensor must be written as hex.
std::optional<std::string> inline_values(const Tensor& t) {
  if (t.numel() > kMaxInlineElements || !is_numeric(t.dtype())) return std::nullopt;
  std::string text = "{", reread;
  for (int64_t i = 0; i < t.numel(); ++i) {
    std::string e = element_text(t.dtype(), t.bytes(), i);
    if (!append_element(t.dtype(), e, reread)) return std::nullopt;
    text += (i ? ", " : "") + e;
  }
  if (reread != t.bytes().view()) return std::nullopt;
  return text + "}";
}

std::string tensor_text(const Tensor& t) {
  if (t.dtype() == DType::Undefined) return "undef[] hex\"\"";  // a default-constructed Tensor
  std::string out = print_type(t.type()) + " ";
  if (auto values = inline_values(t)) return out + *values;
  return out + "hex\"" + to_hex(t.bytes()) + "\"";
}

// ---- Printer ----------------------------------------------------------------------

std::string attr_text(const AttrValue& value) {
  auto list = [](const auto& items, const char* empty, auto item_text) {
    if (items.empty()) return std::string(empty);
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + item_text(items[i]);
    return out + "]";
  };
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) return std::to_string(v);
        if constexpr (std::is_same_v<T, double>) return float_attr_text(v);
        if constexpr (std::is_same_v<T, std::string>) return quote(v);
        if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          return list(v, "ints[]", [](int64_t x) { return std::to_string(x); });
        if constexpr (std::is_same_v<T, std::vector<double>>) return list(v, "floats[]", float_attr_text);
        if constexpr (std::is_same_v<T, std::vector<std::string>>)
          return list(v, "strings[]", [](const std::string& x) { return quote(x); });
        if constexpr (std::is_same_v<T, Tensor>) return "tensor " + tensor_text(v);
      },
      value);
}

class Printer {
 public:
  explicit Printer(const Graph& g) : g_(g) {}

  std::string run() {
    print_info(g_.info());
    out_ += "graph " + ident_or_quote(g_.info().graph_name) + "(";
    for (size_t i = 0; i < g_.inputs().size(); ++i) {
      const Node& in = *g_.inputs()[i];
      used_.insert(in.name());
      std::string ref = named_ref(in.name());
      refs_[&in] = {ref};
      out_ += (i ? ", " : "") + ref + ": " + print_type(in.output_types()[0]);
      // The ONNX type of an input a TensorType cannot state (sequence, map, ...).
      if (in.onnx_type()) out_ += " onnx_type=b64\"" + to_base64(*in.onnx_type()) + "\"";
    }
    out_ += ") {\n";
    for (const NodePtr& node : g_.topo_order()) print_node(*node);
    out_ += "  return";
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      const Value& v = g_.outputs()[i];
      const std::string& name = g_.output_names()[i];
      std::string ref = reference(v);
      out_ += (i ? ", " : " ") + ref;
      // `as` is left out where the output name is the value's own name.
      if (ref != named_ref(name)) out_ += " as " + quote(name);
    }
    return out_ + "\n}\n";
  }

 private:
  void print_info(const ModelInfo& info) {
    const ModelInfo dflt;
    for (const auto& [key, field] : kIntFields)
      if (info.*field != dflt.*field) out_ += std::string(key) + " " + std::to_string(info.*field) + "\n";
    if (info.opset_imports.empty()) out_ += "opset none\n";
    if (info.opset_imports != dflt.opset_imports) {
      for (const auto& [domain, version] : info.opset_imports)
        out_ += "opset " + (domain.empty() ? "" : ident_or_quote(domain) + " ") + std::to_string(version) + "\n";
    }
    for (const auto& [key, field] : kTextFields)
      if (info.*field != dflt.*field) out_ += std::string(key) + " " + quote(info.*field) + "\n";
    for (const auto& [key, value] : info.metadata_props)
      out_ += "metadata_props " + quote(key) + " " + quote(value) + "\n";
    for (const std::string& f : info.functions) out_ += "function b64\"" + to_base64(f) + "\"\n";
    if (info.onnx_extras) out_ += "onnx_extras b64\"" + to_base64(*info.onnx_extras) + "\"\n";
  }

  // Gives the next output of `node` its id: the value's name where it is free, else
  // the next number (then the name, if any, follows as `as "name"`).
  std::string define(const Node& node, const std::string& name) {
    bool named = !name.empty() && used_.insert(name).second;
    std::string ref = named ? named_ref(name) : std::string("%") + std::to_string(next_number_++);
    refs_[&node].push_back(ref);
    return named || name.empty() ? ref : ref + " as " + quote(name);
  }

  std::string reference(const Value& v) const {
    if (!v.present()) return "_";
    auto it = refs_.find(v.node.get());
    if (it == refs_.end()) throw Error(describe(*v.node) + " is used but is not a graph input");
    return it->second.at(v.index);
  }

  void print_node(const Node& node) {
    if (node.kind() == NodeKind::Input) {
      reference(node.output(0));  // throws if it is not one of the graph's inputs
      return;
    }
    if (node.kind() == NodeKind::Constant) {
      out_ += "  " + define(node, node.name()) + " = const " + tensor_text(*node.value()) + "\n";
      return;
    }
    std::string line = "  ";
    for (size_t i = 0; i < node.num_outputs(); ++i) {
      std::string name = i < node.output_names().size() ? node.output_names()[i] : "";
      line += (i ? ", " : "") + define(node, name);
    }
    line += " = ";
    if (node.kind() == NodeKind::Opaque) line += "opaque " + quote(node.opaque()->domain) + "::";
    line += ident_or_quote(node.op_type()) + "(";
    for (size_t i = 0; i < node.inputs().size(); ++i) line += (i ? ", " : "") + reference(node.inputs()[i]);
    line += ")";
    if (node.kind() == NodeKind::Opaque) {
      if (node.opaque()->uid) line += " uid=" + std::to_string(node.opaque()->uid);
      if (!node.opaque()->node_proto.empty()) line += " proto=b64\"" + to_base64(node.opaque()->node_proto) + "\"";
      // ONNX output types a TensorType cannot state: `_` where the TensorType is exact.
      const auto& onnx_types = node.opaque()->onnx_output_types;
      for (size_t i = 0; i < onnx_types.size(); ++i) {
        line += i ? ", " : " onnx_types=[";
        line += onnx_types[i] ? "b64\"" + to_base64(*onnx_types[i]) + "\"" : "_";
      }
      if (!onnx_types.empty()) line += "]";
    } else if (!node.attrs().empty()) {
      line += " {";
      bool first = true;
      for (const auto& [name, value] : node.attrs().items()) {
        line += (first ? "" : ", ") + ident_or_quote(name) + "=" + attr_text(value);
        first = false;
      }
      line += "}";
    }
    line += " :";
    for (size_t i = 0; i < node.num_outputs(); ++i) line += (i ? ", " : " ") + print_type(node.output_types()[i]);
    if (!node.name().empty()) line += " @" + (is_plain_name(node.name()) ? node.name() : quote(node.name()));
    out_ += line + "\n";
  }

  const Graph& g_;
  std::string out_;
  std::unordered_map<const Node*, std::vector<std::string>> refs_;  // printed reference of each output
  std::unordered_set<std::string> used_;                             // names already taken as ids
  int64_t next_number_ = 0;
};

}  // namespace

std::string print_type(const TensorType& t) {
  std::string out = std::string(dtype_name(t.dtype)) + "[";
  for (size_t i = 0; i < t.shape.size(); ++i) {
    const Dim& d = t.shape[i];
    if (i) out += ",";
    out += d.is_static() ? std::to_string(d.value) : d.symbol.empty() ? "?" : ident_or_quote(d.symbol);
  }
  return out + "]";
}

std::string print_graph(const Graph& g) { return Printer(g).run(); }

}  // namespace isomer
