// The rule file: parsing, load-time checks, printing and reversal (rules/rule.h).
#include "rules/rule.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "ir/error.h"
#include "ir/text.h"
#include "ir/text_internal.h"
#include "rules/binding.h"

namespace isomer {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}
bool is_rule_name_char(char c) { return is_name_char(c) || c == '-' || c == '/'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool starts_with_word(std::string_view s, std::string_view word) {
  return s.substr(0, word.size()) == word && (s.size() == word.size() || s[word.size()] == ' ');
}

// Splits at commas outside brackets, braces, parentheses and strings.
std::vector<std::string_view> split_top(std::string_view text) {
  std::vector<std::string_view> out;
  int depth = 0;
  bool in_string = false;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') in_string = !in_string;
    if (in_string) continue;
    if (c == '[' || c == '{' || c == '(') ++depth;
    if (c == ']' || c == '}' || c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (start < text.size() || !out.empty()) out.push_back(trim(text.substr(start)));
  return out;
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

// A value written in a verify-shapes line: an expression without variables.
AttrValue constant_value(std::string_view text) {
  RefResolver none = [](const std::string& n) -> ExprRef { throw Error("%" + n + " cannot appear here"); };
  struct NoEnv : ExprEnv {
    const TensorType* type_of(const ExprRef&) const override { return nullptr; }
    const Tensor* constant_of(const ExprRef&) const override { return nullptr; }
    const AttrValue* attr_of(const ExprRef&) const override { return nullptr; }
    const Attributes* attrs_of(const ExprRef&) const override { return nullptr; }
  } env;
  return eval_expr(parse_expr(text, none), env);
}

// `const TYPE {v, ...}` in a verify-shapes line.
Tensor constant_tensor(std::string_view text) {
  size_t brace = text.find('{');
  if (brace == std::string_view::npos || text.back() != '}') throw Error("expected const TYPE {values}");
  TensorType type = parse_type(trim(text.substr(0, brace)));
  std::vector<int64_t> dims = static_dims(type.shape, "constant");
  std::string bytes;
  size_t count = 0;
  for (std::string_view item : split_top(text.substr(brace + 1, text.size() - brace - 2))) {
    if (item.empty()) continue;
    if (!text_detail::append_element(type.dtype, item, bytes))
      throw Error("'" + std::string(item) + "' is not a valid " + std::string(dtype_name(type.dtype)) + " value");
    ++count;
  }
  if (static_cast<int64_t>(count) != num_elements(dims)) throw Error(print_type(type) + ": wrong number of values");
  return Tensor(type.dtype, dims, std::move(bytes));
}

class RuleParser {
 public:
  RuleParser(std::string_view text, std::string_view file, bool allow_no_verify = false)
      : file_(file), allow_no_verify_(allow_no_verify) {
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
      Rule rule = is_variadic() ? parse_variadic() : parse_rule(line);
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

  // The lines of the rule whose header was just read (header to closing brace).
  std::vector<std::string> rule_lines() const {
    std::vector<std::string> out{std::string(lines_[at_ - 1])};
    int depth = 1;
    for (size_t i = at_; i < lines_.size() && depth > 0; ++i) {
      std::string_view l = trim(lines_[i]);
      out.emplace_back(lines_[i]);
      if (l == "}") --depth;
      else if (!l.empty() && l.back() == '{') ++depth;
    }
    return out;
  }

  bool is_variadic() const {
    for (const std::string& l : rule_lines())
      if (starts_with_word(trim(l), "vars")) return declares_list(trim(l));
    return false;
  }

  // A variadic rule: its template, and its expansions at the verified sizes checked
  // like any rule; the smallest of them stands for it.
  Rule parse_variadic() {
    const size_t header = at_;
    std::vector<std::string> lines = rule_lines();
    at_ += lines.size() - 1;
    VariadicTemplate t;
    try {
      t = make_template(lines, std::string(file_), static_cast<int>(header));
    } catch (const Error& e) {
      fail(header, e.what());
    }
    std::vector<size_t> arities = verify_arities(t);
    if (arities.empty() || arities[0] == 0) fail(header, "a variadic rule needs verify-shapes lines naming its elements (%w1, %w2, ...)");
    Rule base;
    for (size_t n : arities) {
      Rule r;
      try {
        RuleSet one = RuleParser(expand_template(t, n), std::string(file_) + ":" + std::to_string(header) + " (expanded for " +
                                                        std::to_string(n) + " elements)").run();
        if (one.rules.size() != 1) throw Error("does not expand to one rule");
        r = std::move(one.rules[0]);
      } catch (const Error& e) {
        fail(header, "variadic rule expanded for " + std::to_string(n) + " elements: " + e.what());
      }
      if (n == arities[0] || (n == 2 && base.name.empty())) base = std::move(r);
    }
    base.line = static_cast<int>(header);
    base.variadic = std::make_shared<const VariadicTemplate>(std::move(t));
    return base;
  }

  // "line L: why" from the block parser -> "file:L: why".
  [[noreturn]] void fail_at(const Error& e, size_t fallback) const {
    std::string msg = e.what();
    int line = 0;
    if (msg.rfind("line ", 0) == 0 && std::from_chars(msg.data() + 5, msg.data() + msg.size(), line).ec == std::errc()) {
      size_t colon = msg.find(": ");
      if (colon != std::string::npos) fail(static_cast<size_t>(line), msg.substr(colon + 2));
    }
    fail(fallback, msg);
  }

  Rule parse_rule(std::string_view header) {
    Rule rule;
    rule.line = static_cast<int>(at_);
    std::string_view rest = trim(header.substr(4));
    size_t n = 0;
    while (n < rest.size() && is_rule_name_char(rest[n])) ++n;
    rule.name = std::string(rest.substr(0, n));
    if (rule.name.empty() || trim(rest.substr(n)) != "{") fail(at_, "expected 'rule NAME {'");
    std::vector<std::pair<size_t, std::string_view>> verify_lines, guard_lines;
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
          // Syntax now; names once the source is known.
          try {
            parse_expr(trim(line.substr(5)), [](const std::string& n) { return ExprRef{ExprRef::Kind::Operand, 0, 0, n}; });
          } catch (const Error& e) {
            throw Error(std::string(e.what()) + " (a guard is a comparison with == != < <= > >=, or a predicate)");
          }
          guard_lines.emplace_back(line_no, trim(line.substr(5)));
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
        } else if (line == "leave-to-search") {
          rule.leave_to_search = true;
        } else if (line == "templates-only") {
          rule.templates_only = true;
        } else {
          throw Error("unknown line '" + std::string(line) + "' (expected vars, where, verify-shapes, source, "
                      "target, leave-to-search, templates-only, verdict or '}')");
        }
      } catch (const Error& e) {
        fail(line_no, e.what());
      }
    }
    if (!closed) fail(rule.line, "rule '" + rule.name + "' is not closed with '}'");
    if (!have_source || !have_target) fail(rule.line, "rule '" + rule.name + "' needs a source and a target");
    if (verify_lines.empty() && !allow_no_verify_)
      fail(rule.line, "rule '" + rule.name + "' needs at least one verify-shapes line");
    try {
      rule.source = parse_pattern(rule, rule.source_lines, rule.source_first_line, true, nullptr);
      rule.target = parse_pattern(rule, rule.target_lines, rule.target_first_line, false, &rule.source);
    } catch (const Error& e) {
      fail_at(e, static_cast<size_t>(rule.line));
    }
    RefResolver resolve = source_resolver(rule);
    for (auto& [line_no, text] : guard_lines) {
      try {
        rule.guards.push_back(Guard{std::string(text), parse_expr(text, resolve)});
      } catch (const Error& e) {
        fail(line_no, e.what());
      }
    }
    for (auto& [line_no, text] : verify_lines) {
      try {
        rule.verify.push_back(parse_verify(rule, text));
      } catch (const Error& e) {
        fail(line_no, e.what());
      }
    }
    std::string why;
    if (!source_binds_all(rule, rule.source, &why)) fail(static_cast<size_t>(rule.line), why);
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

 public:
  // Guards see the variables and the source's named values.
  static RefResolver source_resolver(const Rule& rule) {
    return [&rule](const std::string& name) {
      ExprRef r;
      r.name = name;
      if (int v = rule.var_index(name); v >= 0) {
        const RuleVar& var = rule.vars[static_cast<size_t>(v)];
        r.kind = var.kind == RuleVar::Kind::Attr    ? ExprRef::Kind::Attr
                 : var.kind == RuleVar::Kind::Attrs ? ExprRef::Kind::Attrs
                                                    : ExprRef::Kind::Operand;
        r.index = v;
        return r;
      }
      auto it = rule.source.names.find(name);
      if (it == rule.source.names.end()) throw Error("unbound variable %" + name + " (not in vars, not a source value)");
      r.kind = ExprRef::Kind::SourceValue;
      r.index = it->second.node;
      r.output = it->second.output;
      return r;
    };
  }

  // Every variable is bound by a position of `side` that matching fills.
  static bool source_binds_all(const Rule& rule, const Pattern& side, std::string* why) {
    std::vector<bool> bound(rule.vars.size(), false);
    for (const PatternNode& n : side.nodes) {
      if (n.kind == PatternNode::Kind::Var) bound[static_cast<size_t>(n.var)] = true;
      if (n.kind != PatternNode::Kind::Op) continue;
      if (n.spread >= 0) bound[static_cast<size_t>(n.spread)] = true;
      for (const AttrPattern& a : n.attrs)
        if (a.kind == AttrPattern::Kind::Var) bound[static_cast<size_t>(a.var)] = true;
    }
    for (size_t v = 0; v < rule.vars.size(); ++v)
      if (!bound[v]) {
        if (why) *why = "variable %" + rule.vars[v].name + " is not used by the source, so no match can bind it";
        return false;
      }
    for (const PatternRef& r : side.outputs)
      if (side.nodes[static_cast<size_t>(r.node)].kind != PatternNode::Kind::Op) {
        if (why) *why = "source output %" + side.nodes[static_cast<size_t>(r.node)].label + " is not computed by an operator";
        return false;
      }
    return true;
  }

 private:
  static void parse_vars(Rule& rule, std::string_view text) {
    for (std::string_view item : split_top(text)) {
      RuleVar v;
      size_t colon = item.find(':');
      if (colon != std::string_view::npos) {
        std::string_view kind = trim(item.substr(colon + 1));
        if (kind == "const") v.const_only = true;
        else if (kind == "attr") v.kind = RuleVar::Kind::Attr;
        else if (kind == "attrs") v.kind = RuleVar::Kind::Attrs;
        else throw Error("variable kind must be const, attr or attrs, got '" + std::string(kind) + "'");
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

  static VerifyBinding parse_verify(const Rule& rule, std::string_view text) {
    VerifyBinding b;
    b.text = std::string(text);
    const size_t n = rule.vars.size();
    b.types.resize(n);
    b.constants.resize(n);
    b.attrs.resize(n);
    b.attr_sets.resize(n);
    std::vector<bool> given(n, false);
    for (std::string_view item : split_top(text)) {
      size_t sep = item.find_first_of(":=");
      if (item.empty() || item[0] != '%' || sep == std::string_view::npos)
        throw Error("expected '%var: type' or '%var = value' in verify-shapes, got '" + std::string(item) + "'");
      std::string name(trim(item.substr(1, sep - 1)));
      int v = rule.var_index(name);
      if (v < 0) throw Error("verify-shapes names %" + name + ", which is not a variable");
      if (given[static_cast<size_t>(v)]) throw Error("verify-shapes gives %" + name + " twice");
      given[static_cast<size_t>(v)] = true;
      const RuleVar& var = rule.vars[static_cast<size_t>(v)];
      std::string_view value = trim(item.substr(sep + 1));
      const size_t i = static_cast<size_t>(v);
      if (item[sep] == ':') {
        if (!var.operand()) throw Error("%" + name + " is an attribute variable: give its value with '='");
        b.types[i] = parse_type(value);
        for (const Dim& d : b.types[i].shape)
          if (!d.is_static()) throw Error("verify-shapes needs concrete dims, %" + name + " has " + print_type(b.types[i]));
      } else if (var.operand()) {
        if (!starts_with_word(value, "const")) throw Error("an operand is given as '%x: type' or '%x = const type {...}'");
        b.constants[i] = constant_tensor(trim(value.substr(5)));
        b.types[i] = b.constants[i]->type();
      } else if (var.kind == RuleVar::Kind::Attr) {
        b.attrs[i] = constant_value(value);
      } else {
        if (value.size() < 2 || value.front() != '{' || value.back() != '}')
          throw Error("an attribute set is given as %a = {name=value, ...}");
        Attributes a;
        for (std::string_view kv : split_top(value.substr(1, value.size() - 2))) {
          if (kv.empty()) continue;
          size_t eq = kv.find('=');
          if (eq == std::string_view::npos) throw Error("expected name=value in an attribute set");
          a.set(std::string(trim(kv.substr(0, eq))), constant_value(trim(kv.substr(eq + 1))));
        }
        b.attr_sets[i] = std::move(a);
      }
    }
    for (size_t i = 0; i < n; ++i)
      if (!given[i])
        throw Error("verify-shapes gives no " + std::string(rule.vars[i].operand() ? "type" : "value") + " for %" +
                    rule.vars[i].name);
    return b;
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

  // Both sides build at every instantiation, the guards hold there, and the sides
  // agree on their output types.
  void check_sides(const Rule& rule) const {
    for (size_t k = 0; k < rule.verify.size(); ++k) {
      RuleInstance inst;
      try {
        inst = instantiate(rule, k);
      } catch (const std::exception& e) {
        std::string msg = e.what();
        if (msg.starts_with("line ")) fail_at(Error(msg), static_cast<size_t>(rule.line));
        fail(static_cast<size_t>(rule.line),
             "rule '" + rule.name + "': " + msg + " at verify-shapes " + std::to_string(k + 1));
      }
      const auto& src = inst.source.outputs();
      const auto& tgt = inst.target.outputs();
      if (src.size() != tgt.size())
        fail(rule.line, "rule '" + rule.name + "': source has " + std::to_string(src.size()) + " outputs, target " +
                            std::to_string(tgt.size()));
      for (size_t i = 0; i < src.size(); ++i)
        if (src[i].type() != tgt[i].type())
          fail(rule.line, "rule '" + rule.name + "': shape-inconsistent sides at verify-shapes " + std::to_string(k + 1) +
                              ": source output " + std::to_string(i) + " is " + print_type(src[i].type()) +
                              " but target output " + std::to_string(i) + " is " + print_type(tgt[i].type()));
    }
  }

  std::string_view file_;
  bool allow_no_verify_ = false;
  std::vector<std::string_view> lines_;
  size_t at_ = 0;  // index of the next line; after reading, the 1-based number of the read one
};

}  // namespace

RuleSet parse_rules_unverified(std::string_view text, std::string_view file) {
  return RuleParser(text, file, /*allow_no_verify=*/true).run();
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
  int i = var_index(n);
  return i < 0 ? nullptr : &vars[static_cast<size_t>(i)];
}

int Rule::var_index(std::string_view n) const {
  for (size_t i = 0; i < vars.size(); ++i)
    if (vars[i].name == n) return static_cast<int>(i);
  return -1;
}

std::string Rule::family() const {
  size_t slash = name.find('/');
  return slash == std::string::npos ? name : name.substr(0, slash);
}

bool Rule::usable() const {
  return verdict.kind == Verdict::Kind::Proved || (verdict.kind == Verdict::Kind::Tested && verdict.error_bits >= 60);
}

std::optional<Rule> reversed_rule(const Rule& rule, std::string* why) {
  Rule r = rule;
  std::swap(r.source, r.target);
  std::swap(r.source_lines, r.target_lines);
  std::swap(r.source_first_line, r.target_first_line);
  r.name += "-rev";
  r.comment.clear();
  std::string reason;
  if (!RuleParser::source_binds_all(r, r.source, &reason)) {
    if (why) *why = reason;
    return std::nullopt;
  }
  // Guards that name source values would now name target values: such a rule is not
  // reversed (its guard reads what only the old source computed).
  for (const Guard& g : r.guards) {
    std::vector<const ExprRef*> refs;
    g.expr.collect_refs(refs);
    for (const ExprRef* ref : refs)
      if (ref->kind == ExprRef::Kind::SourceValue) {
        if (why) *why = "a guard reads source value %" + ref->name;
        return std::nullopt;
      }
  }
  // Expressions inside the sides name their own side's values: swap the kinds.
  std::function<void(Expr&)> retag = [&](Expr& e) {
    if (e.kind == Expr::Kind::Ref) {
      if (e.ref.kind == ExprRef::Kind::SourceValue) e.ref.kind = ExprRef::Kind::TargetValue;
      else if (e.ref.kind == ExprRef::Kind::TargetValue) e.ref.kind = ExprRef::Kind::SourceValue;
    }
    for (Expr& a : e.args) retag(a);
  };
  for (Pattern* p : {&r.source, &r.target})
    for (PatternNode& n : p->nodes) {
      retag(n.fold);
      for (Expr& e : n.elements) retag(e);
      for (AttrPattern& a : n.attrs) retag(a.expr);
    }
  return r;
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
  if (r.variadic) {
    // The template as written, with the current verdict.
    std::string s = r.comment;
    bool wrote_verdict = false;
    const std::vector<std::string>& lines = r.variadic->lines;
    for (size_t i = 0; i < lines.size(); ++i) {
      std::string_view l = trim(lines[i]);
      if (starts_with_word(l, "verdict")) continue;
      if (i + 1 == lines.size() && r.verdict.kind != Verdict::Kind::None && !wrote_verdict) {
        s += "  verdict " + print_verdict(r.verdict) + "\n";
        wrote_verdict = true;
      }
      s += lines[i] + "\n";
    }
    return s;
  }
  std::string s = r.comment + "rule " + r.name + " {\n  vars ";
  for (size_t i = 0; i < r.vars.size(); ++i) {
    const RuleVar& v = r.vars[i];
    s += (i ? ", %" : "%") + v.name;
    if (v.const_only) s += ": const";
    if (v.kind == RuleVar::Kind::Attr) s += ": attr";
    if (v.kind == RuleVar::Kind::Attrs) s += ": attrs";
  }
  s += "\n";
  for (const Guard& g : r.guards) s += "  where " + g.text + "\n";
  for (const VerifyBinding& v : r.verify) s += "  verify-shapes " + v.text + "\n";
  if (r.leave_to_search) s += "  leave-to-search\n";
  if (r.templates_only) s += "  templates-only\n";
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
