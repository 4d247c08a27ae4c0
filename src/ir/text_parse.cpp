// The graph text format (ir/text.h), reading side: the lexer, the parser, parse_graph and parse_type.
#include "ir/text.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <unordered_map>

#include "ir/error.h"
#include "ir/text_internal.h"
#include "ops/op.h"

namespace isomer {
namespace {

using namespace text_detail;

// ---- Blobs: hex for tensor data, base64 for serialized protos -------------------

int hex_digit(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool from_hex(std::string_view text, std::string& out) {
  if (text.size() % 2) return false;
  out.resize(text.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = hex_digit(text[2 * i]), lo = hex_digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<char>(hi * 16 + lo);
  }
  return true;
}

bool from_base64(std::string_view text, std::string& out) {
  if (text.size() % 4) return false;
  out.clear();
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t n = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      char c = text[i + k];
      const char* p = c ? std::strchr(kBase64, c) : nullptr;
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        ++pad;
      } else if (p && !pad) {
        n |= static_cast<uint32_t>(p - kBase64) << (18 - 6 * k);
      } else {
        return false;
      }
    }
    out += static_cast<char>(n >> 16);
    if (pad < 2) out += static_cast<char>((n >> 8) & 255);
    if (pad < 1) out += static_cast<char>(n & 255);
  }
  return true;
}

// ---- Numbers ----------------------------------------------------------------------

bool is_special_float(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  return s == "inf" || s == "nan";
}

bool looks_float(std::string_view s) {
  return is_special_float(s) || s.find_first_of(".eE") != std::string_view::npos || (!s.empty() && s.back() == 'f');
}

bool parse_float_attr(std::string_view s, double& v) {
  if (!is_special_float(s) && !s.empty() && s.back() == 'f') {
    float f;
    if (!parse_all(s.substr(0, s.size() - 1), f)) return false;
    v = f;
    return true;
  }
  return parse_all(s, v);
}

// ---- Tensor elements -------------------------------------------------------------

template <class T>
void append(std::string& bytes, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  bytes.append(buf, sizeof(T));
}

template <class I>
bool append_int(std::string_view s, std::string& bytes) {
  if constexpr (std::is_signed_v<I>) {
    int64_t v;
    if (!parse_all(s, v) || v < std::numeric_limits<I>::min() || v > std::numeric_limits<I>::max()) return false;
    append(bytes, static_cast<I>(v));
  } else {
    uint64_t v;
    if (s.starts_with('-') || !parse_all(s, v) || v > std::numeric_limits<I>::max()) return false;
    append(bytes, static_cast<I>(v));
  }
  return true;
}

}  // namespace

// ---- Shared with the printer (declared in text_internal.h) -----------------------

bool text_detail::append_element(DType dt, std::string_view s, std::string& bytes) {
  float f;
  double d;
  switch (dt) {
    case DType::Float32: return parse_all(s, f) && (append(bytes, f), true);
    case DType::Float64: return parse_all(s, d) && (append(bytes, d), true);
    case DType::Float16: return parse_all(s, f) && (append(bytes, float_to_half(f)), true);
    case DType::BFloat16: return parse_all(s, f) && (append(bytes, float_to_bfloat16(f)), true);
    case DType::Bool:
      if (s != "true" && s != "false" && s != "1" && s != "0") return false;
      append<uint8_t>(bytes, s == "true" || s == "1");
      return true;
    case DType::UInt8: return append_int<uint8_t>(s, bytes);
    case DType::Int8: return append_int<int8_t>(s, bytes);
    case DType::UInt16: return append_int<uint16_t>(s, bytes);
    case DType::Int16: return append_int<int16_t>(s, bytes);
    case DType::Int32: return append_int<int32_t>(s, bytes);
    case DType::UInt32: return append_int<uint32_t>(s, bytes);
    case DType::Int64: return append_int<int64_t>(s, bytes);
    case DType::UInt64: return append_int<uint64_t>(s, bytes);
    default: return false;
  }
}

namespace {

// ---- Lexer ------------------------------------------------------------------------

struct Token {
  enum Kind { Ident, Number, String, Blob, Ref, At, Punct, End };
  Kind kind = End;
  std::string text;     // String/Blob/quoted Ref and At: the decoded content
  bool quoted = false;  // Ref/At written as %"..."
  int line = 1;
  int col = 1;
};

std::string position(int line, int col) {
  return "line " + std::to_string(line) + ", column " + std::to_string(col) + ": ";
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  std::vector<Token> run() {
    std::vector<Token> tokens;
    for (;;) {
      skip_space();
      Token t;
      t.line = line_;
      t.col = col_;
      if (i_ == src_.size()) {
        tokens.push_back(t);
        return tokens;
      }
      char c = src_[i_];
      if (c == '"') {
        t.kind = Token::String;
        t.text = read_string(t);
      } else if (c == '%' || c == '@') {
        t.kind = c == '%' ? Token::Ref : Token::At;
        advance(1);
        if (peek() == '"') {
          t.quoted = true;
          t.text = read_string(t);
        } else {
          t.text = read_while(is_name_char);
          if (t.text.empty()) fail(t, std::string("expected a name after '") + c + "'");
        }
      } else if (is_letter(c) || c == '_') {
        t.kind = Token::Ident;
        t.text = read_while(is_name_char);
        if ((t.text == "hex" || t.text == "b64") && peek() == '"') read_blob(t);
        if (t.text == "inf" || t.text == "nan") t.kind = Token::Number;
      } else if (starts_number()) {
        t.kind = Token::Number;
        size_t start = i_;
        if (c == '-' || c == '+') advance(1);
        while (i_ < src_.size() && (is_name_char(src_[i_]) || ((src_[i_] == '-' || src_[i_] == '+') &&
                                                               (src_[i_ - 1] == 'e' || src_[i_ - 1] == 'E'))))
          advance(1);
        t.text = std::string(src_.substr(start, i_ - start));
      } else if (c == ':' && peek(1) == ':') {
        t.kind = Token::Punct;
        t.text = "::";
        advance(2);
      } else if (c != '\0' && std::strchr("(){}[],:=?", c)) {
        t.kind = Token::Punct;
        t.text = std::string(1, c);
        advance(1);
      } else {
        auto u = static_cast<unsigned char>(c);
        fail(t, u >= 0x20 && u < 0x7f ? std::string("unexpected character '") + c + "'"
                                      : "unexpected byte 0x" + to_hex(std::string_view(&c, 1)));
      }
      tokens.push_back(std::move(t));
    }
  }

 private:
  [[noreturn]] void fail(const Token& t, const std::string& msg) const { throw Error(position(t.line, t.col) + msg); }

  char peek(size_t k = 0) const { return i_ + k < src_.size() ? src_[i_ + k] : '\0'; }

  void advance(size_t n) {
    for (; n > 0 && i_ < src_.size(); --n, ++i_) {
      if (src_[i_] == '\n') {
        ++line_;
        col_ = 1;
      } else {
        ++col_;
      }
    }
  }

  void skip_space() {
    while (i_ < src_.size()) {
      char c = src_[i_];
      if (c == '#') {
        while (i_ < src_.size() && src_[i_] != '\n') advance(1);
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        advance(1);
      } else {
        return;
      }
    }
  }

  bool starts_number() const {
    char c = peek();
    if (is_digit(c)) return true;
    char d = peek(1);
    if (c == '.') return is_digit(d);
    return (c == '-' || c == '+') && (is_digit(d) || is_letter(d) || (d == '.' && is_digit(peek(2))));
  }

  std::string read_while(bool (*pred)(char)) {
    size_t start = i_;
    while (i_ < src_.size() && pred(src_[i_])) advance(1);
    return std::string(src_.substr(start, i_ - start));
  }

  // Reads "..." at the cursor; `t` (where the string starts) positions errors.
  std::string read_string(const Token& t) {
    advance(1);
    std::string out;
    for (;;) {
      char c = peek();
      if (i_ == src_.size() || c == '\n') fail(t, "unterminated string");
      if (c == '"') {
        advance(1);
        return out;
      }
      if (c != '\\') {
        out += c;
        advance(1);
        continue;
      }
      char e = peek(1);
      int hi = hex_digit(peek(2)), lo = hex_digit(peek(3));
      switch (e) {
        case '"': case '\\': out += e; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'x':
          if (hi < 0 || lo < 0) fail(t, "bad escape in string: \\x needs two hex digits");
          out += static_cast<char>(hi * 16 + lo);
          advance(2);
          break;
        default: fail(t, std::string("unknown escape '\\") + e + "' in string");
      }
      advance(2);
    }
  }

  // hex"..." or b64"...": the decoded bytes.
  void read_blob(Token& t) {
    bool hex = t.text == "hex";
    advance(1);
    size_t start = i_;
    while (i_ < src_.size() && src_[i_] != '"' && src_[i_] != '\n') advance(1);
    if (peek() != '"') fail(t, std::string("unterminated ") + (hex ? "hex" : "base64") + " string");
    std::string_view data = src_.substr(start, i_ - start);
    advance(1);
    t.kind = Token::Blob;
    if (hex ? !from_hex(data, t.text) : !from_base64(data, t.text))
      fail(t, hex ? "bad hex data (expected pairs of hex digits)" : "bad base64 data");
  }

  std::string_view src_;
  size_t i_ = 0;
  int line_ = 1;
  int col_ = 1;
};

// ---- Parser -----------------------------------------------------------------------

class Parser {
 public:
  explicit Parser(std::string_view text) : tokens_(Lexer(text).run()) {}

  Graph parse_graph() {
    ModelInfo info = parse_header();
    expect_word("graph");
    info.graph_name = parse_name("a graph name");
    expect("(");
    if (!accept(")")) {
      do {
        const Token& ref = next();
        if (ref.kind != Token::Ref) fail(ref, "expected a graph input like %x, found " + describe(ref));
        expect(":");
        TensorType type = parse_type();
        std::optional<std::string> onnx_type;
        if (accept_word("onnx_type")) {
          expect("=");
          onnx_type = expect_blob("a serialized TypeProto").text;
        }
        Value v;
        try {
          if (!onnx_type) {
            v = builder_.input(ref.text, type);
          } else {
            for (const NodePtr& in : builder_.inputs())
              require(in->name() != ref.text, "duplicate graph input '" + ref.text + "'");
            v = builder_.intern(Node::make_input(ref.text, type, std::move(onnx_type)))->output(0);
          }
        } catch (const Error& e) {
          fail(ref, e.what());
        }
        define(ref, v);
      } while (accept(","));
      expect(")");
    }
    expect("{");
    while (!is_word(peek(), "return")) {
      if (peek().kind == Token::End) fail(peek(), "missing 'return' at the end of the graph");
      parse_statement();
    }
    next();
    std::vector<Value> outputs;
    std::vector<std::string> names;
    if (!accept("}")) {
      do {
        const Token& ref = peek();
        outputs.push_back(parse_operand());
        if (!outputs.back().present()) fail(ref, "a graph output cannot be omitted");
        names.push_back(accept_word("as") ? parse_string("an output name") : ref.text);
      } while (accept(","));
      expect("}");
    }
    if (peek().kind != Token::End) fail(peek(), "unexpected " + describe(peek()) + " after the graph");
    return builder_.finish(std::move(outputs), std::move(names), std::move(info));
  }

  TensorType parse_type() {
    const Token& t = next();
    if (t.kind != Token::Ident) fail(t, "expected an element type such as f32, found " + describe(t));
    TensorType type;
    type.dtype = dtype_from_name(t.text);
    if (type.dtype == DType::Undefined && t.text != "undef")
      fail(t, "unknown element type '" + t.text + "' (expected f32, f16, bf16, f64, i8, i16, i32, i64, u8, u16, "
                                                  "u32, u64, bool, str, c64, c128 or undef)");
    expect("[");
    if (!accept("]")) {
      do {
        const Token& d = next();
        if (d.kind == Token::Number) {
          int64_t v;
          if (!parse_all(d.text, v) || v < 0) fail(d, "dimension '" + d.text + "' is not a non-negative integer");
          type.shape.push_back(Dim(v));
        } else if (d.kind == Token::Punct && d.text == "?") {
          type.shape.push_back(Dim::unknown());
        } else if (d.kind == Token::Ident || d.kind == Token::String) {
          type.shape.push_back(Dim::sym(d.text));
        } else {
          fail(d, "expected a dimension (a number, a symbol or ?), found " + describe(d));
        }
      } while (accept(","));
      expect("]");
    }
    return type;
  }

  const Token& peek() const { return tokens_[pos_]; }

  [[noreturn]] void fail(const Token& t, const std::string& msg) const { throw Error(position(t.line, t.col) + msg); }

 private:
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }

  static bool is_word(const Token& t, std::string_view w) { return t.kind == Token::Ident && t.text == w; }
  static bool is_punct(const Token& t, std::string_view p) { return t.kind == Token::Punct && t.text == p; }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Token::End: return "the end of the text";
      case Token::String: return "the string " + quote(t.text);
      case Token::Blob: return "binary data";
      case Token::Ref: return "%" + (t.quoted ? quote(t.text) : t.text);
      case Token::At: return "@" + (t.quoted ? quote(t.text) : t.text);
      default: return "'" + t.text + "'";
    }
  }

  bool accept(std::string_view p) {
    if (!is_punct(peek(), p)) return false;
    next();
    return true;
  }
  bool accept_word(std::string_view w) {
    if (!is_word(peek(), w)) return false;
    next();
    return true;
  }
  void expect(std::string_view p) {
    if (!accept(p)) fail(peek(), "expected '" + std::string(p) + "', found " + describe(peek()));
  }
  void expect_word(std::string_view w) {
    if (!accept_word(w)) fail(peek(), "expected '" + std::string(w) + "', found " + describe(peek()));
  }

  std::string parse_name(const char* what) {
    const Token& t = next();
    if (t.kind != Token::Ident && t.kind != Token::String) fail(t, std::string("expected ") + what + ", found " + describe(t));
    return t.text;
  }
  std::string parse_string(const char* what) {
    const Token& t = next();
    if (t.kind != Token::String) fail(t, std::string("expected ") + what + " in quotes, found " + describe(t));
    return t.text;
  }
  int64_t parse_int(const char* what) {
    const Token& t = next();
    int64_t v;
    if (t.kind != Token::Number || !parse_all(t.text, v)) fail(t, std::string("expected ") + what + ", found " + describe(t));
    return v;
  }
  const Token& expect_blob(const char* what) {
    const Token& t = next();
    if (t.kind != Token::Blob) fail(t, std::string("expected ") + what + " as b64\"...\" or hex\"...\", found " + describe(t));
    return t;
  }

  ModelInfo parse_header() {
    ModelInfo info;
    info.opset_imports.clear();
    bool saw_opset = false;
    while (peek().kind == Token::Ident && !is_word(peek(), "graph")) {
      const Token& key = next();
      const std::string& k = key.text;
      auto int_field = std::find_if(std::begin(kIntFields), std::end(kIntFields), [&](auto& f) { return k == f.first; });
      auto text_field = std::find_if(std::begin(kTextFields), std::end(kTextFields), [&](auto& f) { return k == f.first; });
      if (int_field != std::end(kIntFields)) {
        info.*(int_field->second) = parse_int("a number");
      } else if (text_field != std::end(kTextFields)) {
        info.*(text_field->second) = parse_string("the text");
      } else if (k == "opset") {
        saw_opset = true;
        if (accept_word("none")) continue;
        std::string domain = peek().kind == Token::Number ? "" : parse_name("an opset domain");
        info.opset_imports.emplace_back(domain, parse_int("an opset version"));
      } else if (k == "metadata_props") {
        std::string key_text = parse_string("a metadata key");
        info.metadata_props.emplace_back(key_text, parse_string("a metadata value"));
      } else if (k == "function") {
        info.functions.push_back(expect_blob("a serialized FunctionProto").text);
      } else if (k == "onnx_extras") {
        info.onnx_extras = std::make_shared<const std::string>(expect_blob("a serialized ModelProto").text);
      } else {
        fail(key, "unknown header line '" + k + "' (expected ir_version, model_version, opset, producer_name, "
                  "producer_version, domain, doc_string, graph_doc_string, metadata_props, function, onnx_extras or "
                  "graph)");
      }
    }
    if (!saw_opset) info.opset_imports = ModelInfo{}.opset_imports;
    return info;
  }

  // Values are keyed by id; an unquoted all-digit id is anonymous and distinct from
  // the quoted name with the same digits.
  static std::string key(const Token& ref) {
    return (!ref.quoted && all_digits(ref.text) ? "#" : "%") + ref.text;
  }

  void define(const Token& ref, Value v) {
    auto [it, fresh] = values_.try_emplace(key(ref), v, ref.line);
    if (!fresh) fail(ref, describe(ref) + " is already defined on line " + std::to_string(it->second.second));
  }

  Value parse_operand() {
    const Token& t = next();
    if (is_word(t, "_")) return Value{};
    if (t.kind != Token::Ref) fail(t, "expected a value like %x (or _ for an omitted input), found " + describe(t));
    auto it = values_.find(key(t));
    if (it == values_.end()) fail(t, "unknown value " + describe(t));
    return it->second.first;
  }

  Tensor parse_tensor() {
    const Token& type_token = peek();
    TensorType type = parse_type();
    std::vector<int64_t> dims;
    for (const Dim& d : type.shape) {
      if (!d.is_static()) fail(type_token, "a constant needs a static shape, not " + print_type(type));
      dims.push_back(d.value);
    }
    const Token& data = peek();
    std::string bytes;
    if (data.kind == Token::Blob) {
      bytes = next().text;
      if (type.dtype == DType::Undefined && dims.empty() && bytes.empty()) return Tensor();
    } else if (accept("{")) {
      int64_t count = 0;
      if (!accept("}")) {
        do {
          const Token& e = next();
          if (e.kind != Token::Number && e.kind != Token::Ident) fail(e, "expected a number, found " + describe(e));
          if (!is_numeric(type.dtype))
            fail(e, "values of type " + std::string(dtype_name(type.dtype)) + " must be written as hex\"...\"");
          if (!append_element(type.dtype, e.text, bytes))
            fail(e, "'" + e.text + "' is not a valid " + std::string(dtype_name(type.dtype)) + " value");
          ++count;
        } while (accept(","));
        expect("}");
      }
      if (count != num_elements(dims))
        fail(data, print_type(type) + " needs " + std::to_string(num_elements(dims)) + " values, found " +
                       std::to_string(count));
    } else {
      fail(data, "expected the constant's values in {...} or as hex\"...\", found " + describe(data));
    }
    try {
      return Tensor(type.dtype, dims, std::move(bytes));
    } catch (const Error& e) {
      fail(data, e.what());
    }
  }

  AttrValue parse_attr_value() {
    const Token& t = peek();
    if (t.kind == Token::Number) {
      next();
      if (looks_float(t.text)) {
        double v;
        if (!parse_float_attr(t.text, v)) fail(t, "bad float '" + t.text + "'");
        return v;
      }
      int64_t v;
      if (!parse_all(t.text, v)) fail(t, "bad integer '" + t.text + "'");
      return v;
    }
    if (t.kind == Token::String) return next().text;
    if (accept_word("tensor")) return parse_tensor();
    // A list: [..] with its kind taken from the elements, or ints[..] / floats[..] /
    // strings[..] (the only way to write an empty list).
    std::string kind;
    if (is_word(t, "ints") || is_word(t, "floats") || is_word(t, "strings")) kind = next().text;
    if (!is_punct(peek(), "[")) fail(peek(), "expected an attribute value, found " + describe(peek()));
    const Token& open = next();
    std::vector<const Token*> items;
    if (!accept("]")) {
      do items.push_back(&next());
      while (accept(","));
      expect("]");
    }
    if (kind.empty()) {
      if (items.empty()) fail(open, "an empty list needs its kind: ints[], floats[] or strings[]");
      bool strings = items[0]->kind == Token::String;
      bool floats = std::any_of(items.begin(), items.end(), [](const Token* i) { return looks_float(i->text); });
      kind = strings ? "strings" : floats ? "floats" : "ints";
    }
    std::vector<int64_t> ints;
    std::vector<double> floats;
    std::vector<std::string> strings;
    for (const Token* item : items) {
      if ((kind == "strings") != (item->kind == Token::String) || (kind != "strings" && item->kind != Token::Number))
        fail(*item, "list element " + describe(*item) + " does not fit a list of " + kind);
      if (kind == "strings") {
        strings.push_back(item->text);
      } else if (kind == "floats") {
        floats.emplace_back();
        if (!parse_float_attr(item->text, floats.back())) fail(*item, "bad float '" + item->text + "'");
      } else {
        ints.emplace_back();
        if (!parse_all(item->text, ints.back())) fail(*item, "bad integer '" + item->text + "' in a list of ints");
      }
    }
    if (kind == "strings") return strings;
    if (kind == "floats") return floats;
    return ints;
  }

  void parse_statement() {
    struct Def {
      const Token* ref;
      std::string name;
    };
    std::vector<Def> defs;
    do {
      const Token& ref = next();
      if (ref.kind != Token::Ref) fail(ref, "expected a statement like %y = Op(%x), found " + describe(ref));
      std::string name = key(ref)[0] == '#' ? "" : ref.text;
      if (accept_word("as")) name = parse_string("a value name");
      defs.push_back({&ref, name});
    } while (accept(","));
    expect("=");
    const Token& op = peek();
    if (accept_word("const")) {
      if (defs.size() != 1) fail(op, "a constant defines one value, not " + std::to_string(defs.size()));
      define(*defs[0].ref, builder_.constant(parse_tensor(), defs[0].name));
      return;
    }
    bool opaque = accept_word("opaque");
    OpaqueInfo info;
    if (opaque) {
      info.domain = parse_string("the opaque node's domain");
      expect("::");
    }
    const Token& op_token = peek();
    std::string op_type = parse_name("an operator name");
    const OpDef* def = opaque ? nullptr : find_op(op_type);
    if (!opaque && !def) fail(op_token, "unknown operator '" + op_type + "'");
    expect("(");
    std::vector<Value> inputs;
    if (!accept(")")) {
      do inputs.push_back(parse_operand());
      while (accept(","));
      expect(")");
    }
    Attributes attrs;
    if (opaque) {
      info.op_type = op_type;
      if (accept_word("uid")) {
        expect("=");
        const Token& t = next();
        if (t.kind != Token::Number || !parse_all(t.text, info.uid)) fail(t, "expected a uid number, found " + describe(t));
      }
      if (accept_word("proto")) {
        expect("=");
        info.node_proto = expect_blob("the serialized NodeProto").text;
      }
      if (accept_word("onnx_types")) {
        expect("=");
        expect("[");
        do {
          if (accept_word("_"))
            info.onnx_output_types.emplace_back(std::nullopt);
          else
            info.onnx_output_types.emplace_back(expect_blob("a serialized TypeProto (or _)").text);
        } while (accept(","));
        expect("]");
      }
    } else if (accept("{")) {
      do {
        const Token& name_token = peek();
        std::string name = parse_name("an attribute name");
        expect("=");
        if (attrs.has(name)) fail(name_token, "duplicate attribute '" + name + "'");
        attrs.set(name, parse_attr_value());
      } while (accept(","));
      expect("}");
    }
    std::vector<TensorType> types;
    std::vector<const Token*> type_tokens;
    if (accept(":")) {
      do {
        type_tokens.push_back(&peek());
        types.push_back(parse_type());
      } while (accept(","));
      if (types.size() != defs.size())
        fail(*type_tokens[0], std::to_string(types.size()) + " types for " + std::to_string(defs.size()) + " values");
    } else if (opaque) {
      fail(op_token, "an opaque node needs its output types after ':'");
    }
    std::string node_name;
    if (peek().kind == Token::At) node_name = next().text;

    std::vector<std::string> out_names;
    for (const Def& d : defs) out_names.push_back(d.name);
    if (std::all_of(out_names.begin(), out_names.end(), [](const std::string& n) { return n.empty(); }))
      out_names.clear();
    NodePtr node;
    try {
      node = opaque ? Node::make_opaque(std::move(info), std::move(inputs), types, node_name, std::move(out_names))
                    : Node::make_op(*def, std::move(inputs), std::move(attrs), defs.size(), node_name,
                                    std::move(out_names));
    } catch (const Error& e) {
      fail(op_token, e.what());
    }
    node = builder_.intern(node);
    for (size_t i = 0; i < types.size(); ++i)
      if (types[i] != node->output_types()[i])
        fail(*type_tokens[i], "the text says output " + std::to_string(i) + " of " + op_type + " is " +
                                  print_type(types[i]) + " but its inferred type is " +
                                  print_type(node->output_types()[i]));
    for (size_t i = 0; i < defs.size(); ++i) define(*defs[i].ref, node->output(static_cast<uint32_t>(i)));
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  GraphBuilder builder_{/*dedupe=*/false};
  std::unordered_map<std::string, std::pair<Value, int>> values_;  // id -> value, line of definition
};

}  // namespace

TensorType parse_type(std::string_view text) {
  Parser p(text);
  TensorType t = p.parse_type();
  if (p.peek().kind != Token::End) p.fail(p.peek(), "unexpected text after the type");
  return t;
}

Graph parse_graph(std::string_view text) { return Parser(text).parse_graph(); }

}  // namespace isomer
