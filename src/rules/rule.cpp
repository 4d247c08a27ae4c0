#include "rules/rule.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "ir/error.h"
#include "ir/text.h"

namespace isomer {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}
bool is_rule_name_char(char c) { return is_name_char(c) || c == '-'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool starts_with_word(std::string_view s, std::string_view word) {
  return s.substr(0, word.size()) == word && (s.size() == word.size() || s[word.size()] == ' ');
}

// ---- Shape expressions ---------------------------------------------------------------

class ExprParser {
 public:
  explicit ExprParser(std::string_view s) : s_(s) {}

  ShapeExpr parse_full() {
    ShapeExpr e = expr();
    skip();
    if (pos_ != s_.size()) fail("unexpected '" + std::string(s_.substr(pos_)) + "'");
    return e;
  }
  ShapeExpr expr() {
    ShapeExpr e = term();
    for (;;) {
      if (accept('+')) e = binary(ShapeExpr::Kind::Add, std::move(e), term());
      else if (accept('-')) e = binary(ShapeExpr::Kind::Sub, std::move(e), term());
      else return e;
    }
  }
  // Reads a comparison operator; empty if none.
  std::string comparison() {
    skip();
    for (std::string_view op : {"==", "!=", "<=", ">=", "<", ">"})
      if (s_.substr(pos_, op.size()) == op) {
        pos_ += op.size();
        return std::string(op);
      }
    return "";
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error("in expression '" + std::string(s_) + "': " + why);
  }
  void skip() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  bool accept(char c) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) fail(std::string("expected '") + c + "'");
  }
  static ShapeExpr binary(ShapeExpr::Kind k, ShapeExpr a, ShapeExpr b) {
    ShapeExpr e;
    e.kind = k;
    e.args = {std::move(a), std::move(b)};
    return e;
  }
  ShapeExpr term() {
    ShapeExpr e = atom();
    while (accept('*')) e = binary(ShapeExpr::Kind::Mul, std::move(e), atom());
    return e;
  }
  int64_t integer() {
    skip();
    bool neg = accept('-');
    skip();
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s_.data() + pos_, s_.data() + s_.size(), v);
    if (ec != std::errc()) fail("expected an integer");
    pos_ = static_cast<size_t>(p - s_.data());
    return neg ? -v : v;
  }
  std::string var() {
    skip();
    if (!accept('%')) fail("expected a variable like %x");
    size_t start = pos_;
    while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
    if (pos_ == start) fail("expected a variable name after %");
    return std::string(s_.substr(start, pos_ - start));
  }
  ShapeExpr atom() {
    skip();
    ShapeExpr e;
    if (accept('(')) {
      e = expr();
      expect(')');
      return e;
    }
    if (accept('-')) {
      e.kind = ShapeExpr::Kind::Neg;
      e.args = {atom()};
      return e;
    }
    if (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      e.value = integer();
      return e;
    }
    size_t start = pos_;
    while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
    std::string fn(s_.substr(start, pos_ - start));
    if (fn == "rank") {
      expect('(');
      e.kind = ShapeExpr::Kind::Rank;
      e.var = var();
      expect(')');
    } else if (fn == "dim") {
      expect('(');
      e.kind = ShapeExpr::Kind::Dim;
      e.var = var();
      expect(',');
      e.value = integer();
      expect(')');
    } else {
      fail(fn.empty() ? "expected an integer, rank(%v) or dim(%v, i)" : "unknown function '" + fn + "'");
    }
    return e;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

void collect_vars(const ShapeExpr& e, std::set<std::string>& out) {
  if (!e.var.empty()) out.insert(e.var);
  for (const ShapeExpr& a : e.args) collect_vars(a, out);
}

Guard parse_guard(std::string_view text) {
  Guard g;
  g.text = std::string(text);
  ExprParser p(text);
  g.lhs = p.expr();
  g.op = p.comparison();
  if (g.op.empty()) throw Error("guard '" + g.text + "' needs a comparison (== != < <= > >=)");
  g.rhs = p.parse_full();
  return g;
}

bool compare(int64_t a, const std::string& op, int64_t b) {
  if (op == "==") return a == b;
  if (op == "!=") return a != b;
  if (op == "<") return a < b;
  if (op == "<=") return a <= b;
  if (op == ">") return a > b;
  return a >= b;
}

// Finds each `$(...)` in `line`; calls fn(begin, end, inner) for it.
template <typename Fn>
void for_each_template(std::string_view line, Fn fn) {
  size_t pos = 0;
  while ((pos = line.find("$(", pos)) != std::string_view::npos) {
    int depth = 0;
    size_t end = pos + 1;
    for (; end < line.size(); ++end) {
      if (line[end] == '(') ++depth;
      if (line[end] == ')' && --depth == 0) break;
    }
    if (end >= line.size()) throw Error("unclosed $( in '" + std::string(line) + "'");
    fn(pos, end + 1, line.substr(pos + 2, end - pos - 2));
    pos = end + 1;
  }
}

// `%name` tokens of a block line (comment cut off, templates replaced): the ones it
// defines (left of the first '=') and the ones it uses.
void scan_line(std::string_view line, std::vector<std::string>& defs, std::vector<std::string>& uses) {
  std::string text;
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == '"' && (i == 0 || line[i - 1] != '\\')) in_string = !in_string;
    if (c == '#' && !in_string) break;
    text += c;
  }
  size_t eq = starts_with_word(trim(text), "return") ? std::string::npos : text.find('=');
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') continue;
    size_t j = i + 1;
    while (j < text.size() && is_name_char(text[j])) ++j;
    if (j == i + 1) continue;
    std::string name = text.substr(i + 1, j - i - 1);
    (eq != std::string::npos && i < eq ? defs : uses).push_back(name);
    i = j - 1;
  }
}

std::string join_types(const std::vector<RuleVar>& vars, const std::vector<TensorType>& types) {
  std::string s;
  for (size_t i = 0; i < vars.size(); ++i) s += (i ? ", %" : "%") + vars[i].name + ": " + print_type(types[i]);
  return s;
}

std::string shortest_double(double v) {
  char buf[400];
  // Fixed notation ("0.0003", not "3e-04"), still the shortest text that reads back exactly.
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  if (ec != std::errc()) return std::to_string(v);
  return std::string(buf, p);
}

std::string quote_reason(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

// ---- The rule file parser ------------------------------------------------------------

class RuleParser {
 public:
  RuleParser(std::string_view text, std::string_view file) : file_(file) {
    size_t start = 0;
    while (start <= text.size()) {
      size_t nl = text.find('\n', start);
      if (nl == std::string_view::npos) nl = text.size();
      lines_.push_back(text.substr(start, nl - start));
      start = nl + 1;
    }
    if (!lines_.empty() && lines_.back().empty()) lines_.pop_back();
  }

  RuleSet run() {
    RuleSet set;
    std::map<std::string, int> first_line;
    std::string comment;
    while (at_ < lines_.size()) {
      std::string_view line = trim(lines_[at_]);
      ++at_;
      if (line.empty()) {
        if (!comment.empty()) comment += "\n";  // a blank line inside a comment block is kept
        continue;
      }
      if (line[0] == '#') {
        comment += std::string(lines_[at_ - 1]) + "\n";
        continue;
      }
      if (!starts_with_word(line, "rule")) fail(at_, "expected 'rule NAME {', got '" + std::string(line) + "'");
      Rule rule = parse_rule(line);
      rule.comment = std::move(comment);
      comment.clear();
      if (auto [it, fresh] = first_line.emplace(rule.name, rule.line); !fresh)
        fail(rule.line, "duplicate rule name '" + rule.name + "' (first at line " + std::to_string(it->second) + ")");
      set.rules.push_back(std::move(rule));
    }
    set.trailer = std::move(comment);
    return set;
  }

 private:
  [[noreturn]] void fail(size_t line, const std::string& why) const {
    throw Error(std::string(file_) + ":" + std::to_string(line) + ": " + why);
  }

  Rule parse_rule(std::string_view header) {
    Rule rule;
    rule.line = static_cast<int>(at_);
    std::string_view rest = trim(header.substr(4));
    size_t n = 0;
    while (n < rest.size() && is_rule_name_char(rest[n])) ++n;
    rule.name = std::string(rest.substr(0, n));
    if (rule.name.empty() || trim(rest.substr(n)) != "{") fail(at_, "expected 'rule NAME {'");
    std::vector<std::pair<size_t, std::string_view>> verify_lines;
    bool have_source = false, have_target = false, closed = false;
    while (at_ < lines_.size() && !closed) {
      std::string_view line = trim(lines_[at_]);
      size_t line_no = ++at_;
      try {
        if (line == "}") {
          closed = true;
        } else if (starts_with_word(line, "vars")) {
          if (!rule.vars.empty()) throw Error("a second 'vars' line");
          parse_vars(rule, trim(line.substr(4)));
        } else if (starts_with_word(line, "where")) {
          rule.guards.push_back(parse_guard(trim(line.substr(5))));
        } else if (starts_with_word(line, "verify-shapes")) {
          verify_lines.emplace_back(line_no, trim(line.substr(13)));
        } else if (line == "source {" || line == "target {") {
          bool source = line[0] == 's';
          if (source ? have_source : have_target) throw Error(std::string("a second ") + (source ? "source" : "target"));
          (source ? have_source : have_target) = true;
          (source ? rule.source_first_line : rule.target_first_line) = static_cast<int>(at_ + 1);
          read_block(source ? rule.source_lines : rule.target_lines);
        } else if (starts_with_word(line, "verdict")) {
          rule.verdict = parse_verdict(trim(line.substr(7)));
        } else {
          throw Error("unknown line '" + std::string(line) + "' (expected vars, where, verify-shapes, source, "
                      "target, verdict or '}')");
        }
      } catch (const Error& e) {
        fail(line_no, e.what());
      }
    }
    if (!closed) fail(rule.line, "rule '" + rule.name + "' is not closed with '}'");
    if (!have_source || !have_target) fail(rule.line, "rule '" + rule.name + "' needs a source and a target");
    if (verify_lines.empty()) fail(rule.line, "rule '" + rule.name + "' needs at least one verify-shapes line");
    for (auto& [line_no, text] : verify_lines) {
      try {
        rule.verify_text.emplace_back(text);
        rule.verify_shapes.push_back(parse_verify(rule, text));
      } catch (const Error& e) {
        fail(line_no, e.what());
      }
    }
    check_variables(rule);
    check_sides(rule);
    return rule;
  }

  void read_block(std::vector<std::string>& out) {
    for (;;) {
      if (at_ >= lines_.size()) fail(at_, "block is not closed with '}'");
      std::string_view line = trim(lines_[at_++]);
      if (line == "}") return;
      out.emplace_back(line);
    }
  }

  static void parse_vars(Rule& rule, std::string_view text) {
    size_t pos = 0;
    while (pos < text.size()) {
      size_t comma = text.find(',', pos);
      if (comma == std::string_view::npos) comma = text.size();
      std::string_view item = trim(text.substr(pos, comma - pos));
      pos = comma + 1;
      RuleVar v;
      size_t colon = item.find(':');
      if (colon != std::string_view::npos) {
        if (trim(item.substr(colon + 1)) != "const") throw Error("variable kind must be 'const'");
        v.const_only = true;
        item = trim(item.substr(0, colon));
      }
      if (item.size() < 2 || item[0] != '%') throw Error("expected a variable like %x, got '" + std::string(item) + "'");
      v.name = std::string(item.substr(1));
      for (char c : v.name)
        if (!is_name_char(c)) throw Error("bad variable name '%" + v.name + "'");
      if (rule.find_var(v.name)) throw Error("variable %" + v.name + " declared twice");
      rule.vars.push_back(std::move(v));
    }
    if (rule.vars.empty()) throw Error("'vars' lists no variables");
  }

  static std::vector<TensorType> parse_verify(const Rule& rule, std::string_view text) {
    std::vector<std::optional<TensorType>> types(rule.vars.size());
    size_t pos = 0;
    while (pos < text.size()) {
      int depth = 0;
      size_t end = pos;
      for (; end < text.size(); ++end) {
        if (text[end] == '[') ++depth;
        if (text[end] == ']') --depth;
        if (text[end] == ',' && depth == 0) break;
      }
      std::string_view item = trim(text.substr(pos, end - pos));
      pos = end + 1;
      size_t colon = item.find(':');
      if (item.empty() || item[0] != '%' || colon == std::string_view::npos)
        throw Error("expected '%var: type' in verify-shapes, got '" + std::string(item) + "'");
      std::string name(trim(item.substr(1, colon - 1)));
      auto it = std::find_if(rule.vars.begin(), rule.vars.end(), [&](const RuleVar& v) { return v.name == name; });
      if (it == rule.vars.end()) throw Error("verify-shapes names %" + name + ", which is not a variable");
      auto& slot = types[static_cast<size_t>(it - rule.vars.begin())];
      if (slot) throw Error("verify-shapes gives %" + name + " twice");
      slot = parse_type(trim(item.substr(colon + 1)));
      for (const Dim& d : slot->shape)
        if (!d.is_static()) throw Error("verify-shapes needs concrete dims, %" + name + " has " + print_type(*slot));
    }
    std::vector<TensorType> out;
    for (size_t i = 0; i < types.size(); ++i) {
      if (!types[i]) throw Error("verify-shapes gives no type for %" + rule.vars[i].name);
      out.push_back(*types[i]);
    }
    return out;
  }

  static Verdict parse_verdict(std::string_view text) {
    Verdict v;
    std::string_view rest;
    auto take_word = [&](std::string_view s) {
      size_t sp = s.find(' ');
      rest = sp == std::string_view::npos ? std::string_view() : trim(s.substr(sp + 1));
      return s.substr(0, sp);
    };
    std::string_view kind = take_word(text);
    if (kind == "proved") v.kind = Verdict::Kind::Proved;
    else if (kind == "tested") v.kind = Verdict::Kind::Tested;
    else if (kind == "refuted") v.kind = Verdict::Kind::Refuted;
    else if (kind == "unknown") v.kind = Verdict::Kind::Unknown;
    else throw Error("verdict must be proved, tested, refuted or unknown, got '" + std::string(kind) + "'");
    if (v.kind == Verdict::Kind::Refuted || v.kind == Verdict::Kind::Unknown) {
      if (rest.empty() || rest[0] != '"') throw Error("a " + std::string(kind) + " verdict needs a quoted reason");
      size_t i = 1;
      for (; i < rest.size() && rest[i] != '"'; ++i) {
        if (rest[i] == '\\' && i + 1 < rest.size()) ++i;
        v.reason += rest[i];
      }
      if (i >= rest.size()) throw Error("unterminated reason string");
      rest = trim(rest.substr(i + 1));
    }
    auto number = [](std::string_view s, auto& out) {
      auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
      if (ec != std::errc() || p != s.data() + s.size()) throw Error("bad number '" + std::string(s) + "'");
    };
    while (!rest.empty()) {
      std::string_view item = take_word(rest);
      if (item.substr(0, 5) == "p<2^-" && v.kind == Verdict::Kind::Tested) number(item.substr(5), v.error_bits);
      else if (item.substr(0, 7) == "trials=") number(item.substr(7), v.trials);
      else if (item.substr(0, 7) == "degree=") number(item.substr(7), v.degree);
      else if (item.substr(0, 5) == "time=" && item.back() == 's') number(item.substr(5, item.size() - 6), v.time_s);
      else throw Error("unknown verdict field '" + std::string(item) + "'");
    }
    return v;
  }

  // Unbound variables and names: every use in a block is a variable or defined above
  // it; every variable is bound by the source; $(...) only in the target, over variables.
  void check_variables(const Rule& rule) const {
    std::set<std::string> used_by_source;
    for (int side = 0; side < 2; ++side) {
      const auto& lines = side == 0 ? rule.source_lines : rule.target_lines;
      int first = side == 0 ? rule.source_first_line : rule.target_first_line;
      const char* which = side == 0 ? "source" : "target";
      std::set<std::string> defined;
      for (size_t i = 0; i < lines.size(); ++i) {
        size_t line_no = static_cast<size_t>(first) + i;
        std::string plain = lines[i];
        std::string replaced;
        size_t last = 0;
        try {
          for_each_template(lines[i], [&](size_t b, size_t e, std::string_view inner) {
            if (side == 0) throw Error("the source cannot compute values with $(...); use a 'where' guard");
            std::set<std::string> refs;
            collect_vars(ExprParser(inner).parse_full(), refs);
            for (const std::string& r : refs)
              if (!rule.find_var(r)) throw Error("unbound variable %" + r + " in $(...) (not in vars)");
            replaced += lines[i].substr(last, b - last) + "0";
            last = e;
          });
        } catch (const Error& e) {
          fail(line_no, e.what());
        }
        plain = replaced + lines[i].substr(last);
        std::vector<std::string> defs, uses;
        scan_line(plain, defs, uses);
        for (const std::string& u : uses) {
          if (defined.count(u)) continue;
          if (!rule.find_var(u))
            fail(line_no, "unbound variable %" + u + " in " + which +
                              (side == 0 ? " (declare it in vars)" : " (not a source variable)"));
          if (side == 0) used_by_source.insert(u);
        }
        for (const std::string& d : defs) {
          if (rule.find_var(d)) fail(line_no, std::string(which) + " redefines variable %" + d);
          defined.insert(d);
        }
      }
    }
    for (const RuleVar& v : rule.vars)
      if (!used_by_source.count(v.name))
        fail(rule.line, "variable %" + v.name + " is not used by the source, so no match can bind it");
    std::set<std::string> guard_vars;
    for (const Guard& g : rule.guards) {
      collect_vars(g.lhs, guard_vars);
      collect_vars(g.rhs, guard_vars);
    }
    for (const std::string& g : guard_vars)
      if (!rule.find_var(g)) fail(rule.line, "unbound variable %" + g + " in a guard");
  }

  // "line L, column C: why" from parse_graph -> this file's line.
  [[noreturn]] void fail_in_block(const Rule& rule, bool source, const Error& e) const {
    std::string msg = e.what();
    int first = source ? rule.source_first_line : rule.target_first_line;
    int line = 0;
    if (msg.rfind("line ", 0) == 0 && std::from_chars(msg.data() + 5, msg.data() + msg.size(), line).ec == std::errc()) {
      size_t colon = msg.find(": ");
      if (line >= 2 && colon != std::string::npos)
        fail(static_cast<size_t>(first + line - 2), std::string(source ? "source: " : "target: ") + msg.substr(colon + 2));
    }
    fail(static_cast<size_t>(first), std::string(source ? "source: " : "target: ") + msg);
  }

  // Both sides build at every instantiation and agree on their output types.
  void check_sides(Rule& rule) const {
    for (size_t k = 0; k < rule.verify_shapes.size(); ++k) {
      const auto& types = rule.verify_shapes[k];
      std::string failed;
      if (!rule.guards_hold(types, &failed))
        fail(rule.line, "rule '" + rule.name + "': guard '" + failed + "' does not hold at verify-shapes " +
                            std::to_string(k + 1));
      Graph src, tgt;
      try {
        src = rule.build_source(types);
      } catch (const Error& e) {
        fail_in_block(rule, true, e);
      }
      try {
        tgt = rule.build_target(types);
      } catch (const Error& e) {
        fail_in_block(rule, false, e);
      }
      if (src.outputs().size() != tgt.outputs().size())
        fail(rule.line, "rule '" + rule.name + "': source has " + std::to_string(src.outputs().size()) +
                            " outputs, target " + std::to_string(tgt.outputs().size()));
      for (size_t i = 0; i < src.outputs().size(); ++i)
        if (!(src.outputs()[i].type() == tgt.outputs()[i].type()))
          fail(rule.line, "rule '" + rule.name + "': shape-inconsistent sides at verify-shapes " +
                              std::to_string(k + 1) + ": source output " + std::to_string(i) + " is " +
                              print_type(src.outputs()[i].type()) + " but target output " + std::to_string(i) +
                              " is " + print_type(tgt.outputs()[i].type()));
      if (k == 0) rule.source_pattern = std::move(src);
    }
  }

  std::string_view file_;
  std::vector<std::string_view> lines_;
  size_t at_ = 0;  // index of the next line; after reading, the 1-based number of the read one
};

Graph build_side(const Rule& rule, const std::vector<std::string>& lines, const std::vector<TensorType>& types,
                 const char* name) {
  require(types.size() == rule.vars.size(), "rule '" + rule.name + "': wrong number of variable types");
  auto type_of = [&](const std::string& v) -> const TensorType* {
    for (size_t i = 0; i < rule.vars.size(); ++i)
      if (rule.vars[i].name == v) return &types[i];
    return nullptr;
  };
  std::string text = "graph " + std::string(name) + "(" + join_types(rule.vars, types) + ") {\n";
  for (const std::string& line : lines) {
    size_t last = 0;
    for_each_template(line, [&](size_t b, size_t e, std::string_view inner) {
      std::optional<int64_t> v = eval_shape_expr(ExprParser(inner).parse_full(), type_of);
      if (!v) throw Error("$(" + std::string(inner) + ") cannot be computed at these shapes");
      text += line.substr(last, b - last) + std::to_string(*v);
      last = e;
    });
    text += line.substr(last) + "\n";
  }
  return parse_graph(text + "}\n");
}

}  // namespace

std::optional<int64_t> eval_shape_expr(const ShapeExpr& e, const VarTypeFn& type_of) {
  using K = ShapeExpr::Kind;
  switch (e.kind) {
    case K::Int: return e.value;
    case K::Rank:
    case K::Dim: {
      const TensorType* t = type_of(e.var);
      if (!t) return std::nullopt;
      int64_t rank = static_cast<int64_t>(t->shape.size());
      if (e.kind == K::Rank) return rank;
      int64_t axis = e.value < 0 ? e.value + rank : e.value;
      if (axis < 0 || axis >= rank) return std::nullopt;
      const Dim& d = t->shape[static_cast<size_t>(axis)];
      if (!d.is_static()) return std::nullopt;
      return d.value;
    }
    case K::Neg: {
      auto a = eval_shape_expr(e.args[0], type_of);
      return a ? std::optional<int64_t>(-*a) : std::nullopt;
    }
    default: {
      auto a = eval_shape_expr(e.args[0], type_of), b = eval_shape_expr(e.args[1], type_of);
      if (!a || !b) return std::nullopt;
      return e.kind == K::Add ? *a + *b : e.kind == K::Sub ? *a - *b : *a * *b;
    }
  }
}

const char* verdict_kind_name(Verdict::Kind k) {
  switch (k) {
    case Verdict::Kind::Proved: return "proved";
    case Verdict::Kind::Tested: return "tested";
    case Verdict::Kind::Refuted: return "refuted";
    case Verdict::Kind::Unknown: return "unknown";
    case Verdict::Kind::None: break;
  }
  return "none";
}

std::string print_verdict(const Verdict& v) {
  std::string s;
  switch (v.kind) {
    case Verdict::Kind::None: return "";
    case Verdict::Kind::Proved: s = "proved"; break;
    case Verdict::Kind::Tested:
      s = "tested p<2^-" + std::to_string(v.error_bits) + " trials=" + std::to_string(v.trials) +
          " degree=" + std::to_string(v.degree);
      break;
    case Verdict::Kind::Refuted: s = "refuted " + quote_reason(v.reason); break;
    case Verdict::Kind::Unknown: s = "unknown " + quote_reason(v.reason); break;
  }
  if (v.time_s >= 0) s += " time=" + shortest_double(v.time_s) + "s";
  return s;
}

const RuleVar* Rule::find_var(std::string_view n) const {
  for (const RuleVar& v : vars)
    if (v.name == n) return &v;
  return nullptr;
}

Graph Rule::build_source(const std::vector<TensorType>& var_types) const {
  return build_side(*this, source_lines, var_types, "source");
}
Graph Rule::build_target(const std::vector<TensorType>& var_types) const {
  return build_side(*this, target_lines, var_types, "target");
}

bool Rule::guards_hold(const std::vector<TensorType>& var_types, std::string* failed) const {
  auto type_of = [&](const std::string& v) -> const TensorType* {
    for (size_t i = 0; i < vars.size() && i < var_types.size(); ++i)
      if (vars[i].name == v) return &var_types[i];
    return nullptr;
  };
  for (const Guard& g : guards) {
    auto a = eval_shape_expr(g.lhs, type_of), b = eval_shape_expr(g.rhs, type_of);
    if (!a || !b || !compare(*a, g.op, *b)) {
      if (failed) *failed = g.text;
      return false;
    }
  }
  return true;
}

bool Rule::usable() const {
  return verdict.kind == Verdict::Kind::Proved || (verdict.kind == Verdict::Kind::Tested && verdict.error_bits >= 60);
}

const Rule* RuleSet::find(std::string_view name) const {
  for (const Rule& r : rules)
    if (r.name == name) return &r;
  return nullptr;
}

RuleSet parse_rules(std::string_view text, std::string_view file) { return RuleParser(text, file).run(); }

RuleSet load_rules(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open rule file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_rules(ss.str(), path);
}

std::string print_rule(const Rule& r) {
  std::string s = r.comment + "rule " + r.name + " {\n  vars ";
  for (size_t i = 0; i < r.vars.size(); ++i)
    s += (i ? ", %" : "%") + r.vars[i].name + (r.vars[i].const_only ? ": const" : "");
  s += "\n";
  for (const Guard& g : r.guards) s += "  where " + g.text + "\n";
  for (const std::string& v : r.verify_text) s += "  verify-shapes " + v + "\n";
  s += "  source {\n";
  for (const std::string& l : r.source_lines) s += "    " + l + "\n";
  s += "  }\n  target {\n";
  for (const std::string& l : r.target_lines) s += "    " + l + "\n";
  s += "  }\n";
  if (r.verdict.kind != Verdict::Kind::None) s += "  verdict " + print_verdict(r.verdict) + "\n";
  return s + "}\n";
}

std::string print_rules(const RuleSet& set) {
  std::string s;
  for (size_t i = 0; i < set.rules.size(); ++i) s += (i ? "\n" : "") + print_rule(set.rules[i]);
  if (!set.trailer.empty()) s += (set.rules.empty() ? "" : "\n") + set.trailer;
  return s;
}

}  // namespace isomer
