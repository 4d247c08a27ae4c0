// Parsing a rule side's statements into a pattern tree (rules/pattern.h). One
// statement per line, in the graph text format's syntax extended with variables,
// `$(...)` expressions, `...%a` attribute sets and `fold` steps.
#include <algorithm>
#include <charconv>
#include <map>

#include "ir/error.h"
#include "ir/text.h"
#include "ir/text_internal.h"
#include "ops/op.h"
#include "rules/fold.h"
#include "rules/rule.h"

namespace isomer {

size_t Pattern::num_ops() const {
  return static_cast<size_t>(
      std::count_if(nodes.begin(), nodes.end(), [](const PatternNode& n) { return n.kind == PatternNode::Kind::Op; }));
}

namespace {

using text_detail::append_element;
using text_detail::is_name_char;

// A statement line, tokenized: refs, names, numbers, strings, punctuation, `$(...)`
// (kept as its inner text) and `...`.
struct Tok {
  enum Kind { Ref, Name, Number, String, Punct, Template, Spread, End } kind = End;
  std::string text;
};

std::vector<Tok> tokenize(std::string_view s) {
  std::vector<Tok> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    if (c == '#') break;
    Tok t;
    if (c == '%') {
      size_t j = i + 1;
      while (j < s.size() && is_name_char(s[j])) ++j;
      if (j == i + 1) throw Error("expected a name after '%'");
      t = {Tok::Ref, std::string(s.substr(i + 1, j - i - 1))};
      i = j;
    } else if (c == '$' && i + 1 < s.size() && s[i + 1] == '(') {
      int depth = 0;
      size_t j = i + 1;
      for (; j < s.size(); ++j) {
        if (s[j] == '(') ++depth;
        if (s[j] == ')' && --depth == 0) break;
      }
      if (j >= s.size()) throw Error("unclosed $(");
      t = {Tok::Template, std::string(s.substr(i + 2, j - i - 2))};
      i = j + 1;
    } else if (s.substr(i, 3) == "...") {
      t = {Tok::Spread, "..."};
      i += 3;
    } else if (c == '"') {
      size_t j = s.find('"', i + 1);
      if (j == std::string_view::npos) throw Error("unterminated string");
      t = {Tok::String, std::string(s.substr(i + 1, j - i - 1))};
      i = j + 1;
    } else if ((c >= '0' && c <= '9') || ((c == '-' || c == '+' || c == '.') && i + 1 < s.size() &&
                                          (std::isdigit(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == 'i' ||
                                           s[i + 1] == 'n' || s[i + 1] == '.'))) {
      size_t j = i + 1;
      while (j < s.size() && (is_name_char(s[j]) || ((s[j] == '-' || s[j] == '+') && (s[j - 1] == 'e' || s[j - 1] == 'E'))))
        ++j;
      t = {Tok::Number, std::string(s.substr(i, j - i))};
      i = j;
    } else if (is_name_char(c)) {
      size_t j = i;
      while (j < s.size() && is_name_char(s[j])) ++j;
      t = {Tok::Name, std::string(s.substr(i, j - i))};
      if (t.text == "inf" || t.text == "nan") t.kind = Tok::Number;
      i = j;
    } else if (std::string_view("(){}[],=:").find(c) != std::string_view::npos) {
      t = {Tok::Punct, std::string(1, c)};
      ++i;
    } else {
      throw Error(std::string("unexpected character '") + c + "'");
    }
    out.push_back(std::move(t));
  }
  out.push_back({Tok::End, ""});
  return out;
}

class StatementParser {
 public:
  StatementParser(const Rule& rule, Pattern& pattern, std::map<std::string, PatternRef>& names, bool source,
                  const Pattern* source_side)
      : rule_(rule), p_(pattern), names_(names), source_(source), source_side_(source_side) {}

  void parse(std::string_view line, int line_no) {
    toks_ = tokenize(line);
    pos_ = 0;
    line_ = line_no;
    if (peek().kind == Tok::End) return;  // a comment
    if (peek_name("return")) {
      next();
      if (!p_.outputs.empty()) throw Error("a second 'return'");
      do p_.outputs.push_back(operand(/*allow_omitted=*/false));
      while (accept(","));
      end();
      returned_ = true;
      return;
    }
    if (returned_) throw Error("statement after 'return'");
    std::vector<std::string> defs;
    do {
      const Tok& t = next();
      if (t.kind != Tok::Ref) throw Error("expected a statement like %y = Op(%x)");
      if (rule_.find_var(t.text)) throw Error((source_ ? "source" : "target") + std::string(" redefines variable %") + t.text);
      if (names_.count(t.text)) throw Error("%" + t.text + " is defined twice");
      defs.push_back(t.text);
    } while (accept(","));
    expect("=");
    PatternNode n;
    n.line = line_no;
    n.label = defs[0];
    if (peek_name("const")) {
      next();
      if (defs.size() != 1) throw Error("a constant defines one value");
      parse_const(n);
    } else if (peek_name("fold")) {
      next();
      if (source_) throw Error("a source cannot compute constants with fold; match the value and use a 'where' guard");
      if (defs.size() != 1) throw Error("a fold defines one value");
      n.kind = PatternNode::Kind::Fold;
      std::string text;
      while (peek().kind != Tok::End) text += raw(next());
      n.fold = parse_expr(text, resolver());
      if (!n.fold.fold)
        throw Error("'fold' needs a fold function computing a tensor (such as " + tensor_fold_names() + ")");
    } else {
      parse_op(n, defs.size());
    }
    end();
    p_.nodes.push_back(std::move(n));
    const int id = static_cast<int>(p_.nodes.size() - 1);
    for (size_t i = 0; i < defs.size(); ++i) names_[defs[i]] = PatternRef{id, static_cast<uint32_t>(i)};
  }

  bool returned() const { return returned_; }

 private:
  static std::string raw(const Tok& t) {
    switch (t.kind) {
      case Tok::Ref: return "%" + t.text;
      case Tok::String: return "\"" + t.text + "\"";
      case Tok::Template: return "$(" + t.text + ")";
      default: return t.text + " ";
    }
  }
  static std::string tensor_fold_names() {
    std::string s;
    for (const FoldDef* f : all_folds())
      if (f->tensor_fold()) s += (s.empty() ? "" : ", ") + std::string(f->name);
    return s;
  }
  const Tok& peek() const { return toks_[pos_]; }
  const Tok& next() {
    const Tok& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool peek_name(std::string_view w) const { return peek().kind == Tok::Name && peek().text == w; }
  bool accept(std::string_view punct) {
    if (peek().kind != Tok::Punct || peek().text != punct) return false;
    next();
    return true;
  }
  void expect(std::string_view punct) {
    if (!accept(punct)) throw Error("expected '" + std::string(punct) + "', found '" + peek().text + "'");
  }
  void end() {
    if (peek().kind != Tok::End) throw Error("unexpected '" + peek().text + "' at the end of the statement");
  }

  RefResolver resolver() {
    return [this](const std::string& name) {
      ExprRef r;
      r.name = name;
      int v = rule_.var_index(name);
      if (v >= 0) {
        const RuleVar& var = rule_.vars[static_cast<size_t>(v)];
        r.kind = var.kind == RuleVar::Kind::Attr    ? ExprRef::Kind::Attr
                 : var.kind == RuleVar::Kind::Attrs ? ExprRef::Kind::Attrs
                                                    : ExprRef::Kind::Operand;
        r.index = v;
        return r;
      }
      auto it = names_.find(name);
      if (it == names_.end()) throw Error("unbound variable %" + name + (source_ ? " (declare it in vars)" : ""));
      r.kind = source_ ? ExprRef::Kind::SourceValue : ExprRef::Kind::TargetValue;
      r.index = it->second.node;
      r.output = it->second.output;
      return r;
    };
  }

  // The node standing for variable `v` on this side (made on first use).
  int var_node(int v) {
    if (p_.var_node[static_cast<size_t>(v)] < 0) {
      PatternNode n;
      n.kind = PatternNode::Kind::Var;
      n.var = v;
      n.label = rule_.vars[static_cast<size_t>(v)].name;
      n.line = line_;
      p_.nodes.push_back(std::move(n));
      p_.var_node[static_cast<size_t>(v)] = static_cast<int>(p_.nodes.size() - 1);
    }
    return p_.var_node[static_cast<size_t>(v)];
  }

  PatternRef operand(bool allow_omitted) {
    const Tok& t = next();
    if (t.kind == Tok::Name && t.text == "_") {
      if (!allow_omitted) throw Error("an output cannot be omitted");
      return PatternRef{};
    }
    if (t.kind != Tok::Ref) throw Error("expected an operand like %x, found '" + t.text + "'");
    if (auto it = names_.find(t.text); it != names_.end()) return it->second;
    int v = rule_.var_index(t.text);
    if (v < 0)
      throw Error("unbound variable %" + t.text + " in " + (source_ ? "source (declare it in vars)" : "target (not a source variable)"));
    if (!rule_.vars[static_cast<size_t>(v)].operand()) throw Error("%" + t.text + " is an attribute variable, not an operand");
    return PatternRef{var_node(v), 0};
  }

  TensorType type() {
    std::string text;
    const Tok& t = next();
    if (t.kind != Tok::Name) throw Error("expected an element type such as f32");
    text = t.text;
    expect("[");
    text += "[";
    if (!accept("]")) {
      do {
        const Tok& d = next();
        if (d.kind != Tok::Number) throw Error("a constant needs static dims");
        text += d.text + ",";
      } while (accept(","));
      expect("]");
      text.pop_back();
    }
    return parse_type(text + "]");
  }

  void parse_const(PatternNode& n) {
    n.kind = PatternNode::Kind::Const;
    n.const_type = type();
    std::vector<int64_t> dims = static_dims(n.const_type.shape, "constant");
    expect("{");
    std::vector<Tok> items;
    if (!accept("}")) {
      do items.push_back(next());
      while (accept(","));
      expect("}");
    }
    if (static_cast<int64_t>(items.size()) != num_elements(dims))
      throw Error(print_type(n.const_type) + " needs " + std::to_string(num_elements(dims)) + " values, found " +
                  std::to_string(items.size()));
    bool computed = std::any_of(items.begin(), items.end(), [](const Tok& t) { return t.kind == Tok::Template; });
    std::string bytes;
    for (const Tok& t : items) {
      if (computed) {
        if (t.kind == Tok::Template) n.elements.push_back(parse_expr(t.text, resolver()));
        else n.elements.push_back(parse_expr(t.text, resolver()));
        continue;
      }
      if (t.kind != Tok::Number || !append_element(n.const_type.dtype, t.text, bytes))
        throw Error("'" + t.text + "' is not a valid " + std::string(dtype_name(n.const_type.dtype)) + " value");
    }
    if (!computed) n.literal = Tensor(n.const_type.dtype, dims, std::move(bytes));
  }

  AttrValue attr_literal() {
    const Tok& t = peek();
    if (t.kind == Tok::Number) {
      next();
      std::string s = t.text;
      if (s.find_first_of(".eE") != std::string::npos || s == "inf" || s == "-inf" || s == "nan" || s.back() == 'f') {
        bool f32 = s.back() == 'f' && s.find("inf") == std::string::npos;
        std::string num = f32 ? s.substr(0, s.size() - 1) : s;
        char* end = nullptr;
        double v = std::strtod(num.c_str(), &end);
        if (end != num.c_str() + num.size()) throw Error("bad float '" + s + "'");
        return f32 ? static_cast<double>(static_cast<float>(v)) : v;
      }
      int64_t v;
      auto [p, ec] = std::from_chars(s.data() + (s[0] == '+'), s.data() + s.size(), v);
      if (ec != std::errc() || p != s.data() + s.size()) throw Error("bad integer '" + s + "'");
      return v;
    }
    if (t.kind == Tok::String) return next().text;
    std::string kind;
    if (t.kind == Tok::Name && (t.text == "ints" || t.text == "floats" || t.text == "strings")) kind = next().text;
    expect("[");
    std::vector<Tok> items;
    if (!accept("]")) {
      do items.push_back(next());
      while (accept(","));
      expect("]");
    }
    if (kind.empty()) {
      if (items.empty()) throw Error("an empty list needs its kind: ints[], floats[] or strings[]");
      bool floats = std::any_of(items.begin(), items.end(), [](const Tok& i) {
        return i.kind == Tok::Number && i.text.find_first_of(".eE") != std::string::npos;
      });
      kind = items[0].kind == Tok::String ? "strings" : floats ? "floats" : "ints";
    }
    std::vector<int64_t> ints;
    std::vector<double> floats;
    std::vector<std::string> strings;
    for (const Tok& i : items) {
      if (kind == "strings") {
        if (i.kind != Tok::String) throw Error("list element does not fit a list of strings");
        strings.push_back(i.text);
      } else if (kind == "floats") {
        floats.push_back(std::strtod(i.text.c_str(), nullptr));
      } else {
        int64_t v;
        auto [p, ec] = std::from_chars(i.text.data(), i.text.data() + i.text.size(), v);
        if (i.kind != Tok::Number || ec != std::errc() || p != i.text.data() + i.text.size())
          throw Error("bad integer '" + i.text + "' in a list of ints");
        ints.push_back(v);
      }
    }
    if (kind == "strings") return strings;
    if (kind == "floats") return floats;
    return ints;
  }

  void parse_op(PatternNode& n, size_t num_defs) {
    const Tok& op_tok = next();
    if (op_tok.kind != Tok::Name) throw Error("expected an operator name, found '" + op_tok.text + "'");
    n.op = find_op(op_tok.text);
    if (!n.op) throw Error("unknown operator '" + op_tok.text + "'");
    n.kind = PatternNode::Kind::Op;
    n.num_outputs = static_cast<uint32_t>(num_defs);
    expect("(");
    if (!accept(")")) {
      do n.inputs.push_back(operand(/*allow_omitted=*/true));
      while (accept(","));
      expect(")");
    }
    const int argc = static_cast<int>(n.inputs.size());
    if (argc < n.op->min_inputs || (n.op->max_inputs >= 0 && argc > n.op->max_inputs))
      throw Error(op_tok.text + " takes " + std::to_string(n.op->min_inputs) + " to " +
                  (n.op->max_inputs < 0 ? std::string("any number of") : std::to_string(n.op->max_inputs)) +
                  " inputs, got " + std::to_string(argc));
    if (!accept("{")) return;
    do {
      if (peek().kind == Tok::Spread) {
        next();
        const Tok& v = next();
        int var = v.kind == Tok::Ref ? rule_.var_index(v.text) : -1;
        if (var < 0 || rule_.vars[static_cast<size_t>(var)].kind != RuleVar::Kind::Attrs)
          throw Error("'...' takes an attribute-set variable declared as '%a: attrs'");
        if (n.spread >= 0) throw Error("a second '...'");
        n.spread = var;
        continue;
      }
      const Tok& name = next();
      if (name.kind != Tok::Name) throw Error("expected an attribute name");
      for (const AttrPattern& a : n.attrs)
        if (a.name == name.text) throw Error("duplicate attribute '" + name.text + "'");
      expect("=");
      AttrPattern a;
      a.name = name.text;
      if (peek().kind == Tok::Ref) {
        const Tok& v = next();
        int var = rule_.var_index(v.text);
        if (var < 0) throw Error("unbound variable %" + v.text + (source_ ? " (declare it in vars)" : ""));
        if (rule_.vars[static_cast<size_t>(var)].kind != RuleVar::Kind::Attr)
          throw Error("%" + v.text + " is not an attribute variable (declare it as '%" + v.text + ": attr')");
        a.kind = AttrPattern::Kind::Var;
        a.var = var;
      } else if (peek().kind == Tok::Template) {
        a.kind = AttrPattern::Kind::Computed;
        a.expr = parse_expr(next().text, resolver());
      } else {
        a.literal = attr_literal();
      }
      n.attrs.push_back(std::move(a));
    } while (accept(","));
    expect("}");
  }

  const Rule& rule_;
  Pattern& p_;
  std::map<std::string, PatternRef>& names_;
  bool source_;
  const Pattern* source_side_;
  std::vector<Tok> toks_;
  size_t pos_ = 0;
  int line_ = 0;
  bool returned_ = false;
};

}  // namespace

Pattern parse_pattern(const Rule& rule, const std::vector<std::string>& lines, int first_line, bool source,
                      const Pattern* source_side) {
  Pattern p;
  p.var_node.assign(rule.vars.size(), -1);
  std::map<std::string, PatternRef> names;
  StatementParser parser(rule, p, names, source, source_side);
  for (size_t i = 0; i < lines.size(); ++i) {
    const int line_no = first_line + static_cast<int>(i);
    try {
      parser.parse(lines[i], line_no);
    } catch (const Error& e) {
      throw Error("line " + std::to_string(line_no) + ": " + (source ? "source: " : "target: ") + e.what());
    }
  }
  if (!parser.returned())
    throw Error("line " + std::to_string(first_line + static_cast<int>(lines.size())) + ": " +
                (source ? "source" : "target") + " has no 'return'");
  p.names = std::move(names);
  return p;
}

}  // namespace isomer
