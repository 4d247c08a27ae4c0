#include "generate/collapse.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "generate/implied.h"
#include "ir/error.h"
#include "ops/op.h"

namespace isomer::gen {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

// `text` with every %name renamed through `names` (names not in the map kept).
std::string rename_vars(const std::string& text, const std::map<std::string, std::string>& names) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    size_t j = i + 1;
    while (j < text.size() && is_name_char(text[j])) ++j;
    std::string name = text.substr(i + 1, j - i - 1);
    auto it = names.find(name);
    out += "%" + (it == names.end() ? name : it->second);
    i = j - 1;
  }
  return out;
}

std::string attr_text(const AttrValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, int64_t>) return std::to_string(x);
        else if constexpr (std::is_same_v<X, double>) return std::to_string(x);
        else if constexpr (std::is_same_v<X, std::string>) return "\"" + x + "\"";
        else if constexpr (std::is_same_v<X, std::vector<int64_t>>) {
          std::string s = "[";
          for (int64_t i : x) s += std::to_string(i) + ",";
          return s + "]";
        } else if constexpr (std::is_same_v<X, std::vector<double>>) {
          std::string s = "[";
          for (double d : x) s += std::to_string(d) + ",";
          return s + "]";
        } else {
          return "#" + std::to_string(attr_hash(x));
        }
      },
      v);
}

// A side written with commutative operands sorted and variables named through `names`.
class Canonical {
 public:
  Canonical(const Rule& rule, const Pattern& p, const std::vector<std::string>& lines, int first_line,
            const std::map<std::string, std::string>& names)
      : rule_(rule), p_(p), lines_(lines), first_(first_line), names_(names), memo_(p.nodes.size()) {}

  std::string outputs() {
    std::string s;
    for (const PatternRef& r : p_.outputs) s += ref(r) + ";";
    return s;
  }

 private:
  std::string ref(const PatternRef& r) {
    if (!r.present()) return "_";
    std::string s = node(static_cast<size_t>(r.node));
    if (p_.nodes[static_cast<size_t>(r.node)].num_outputs > 1) s += "#" + std::to_string(r.output);
    return s;
  }
  std::string node(size_t i) {
    if (!memo_[i].empty()) return memo_[i];
    const PatternNode& n = p_.nodes[i];
    std::string s;
    switch (n.kind) {
      case PatternNode::Kind::Var: s = "%" + names_.at(rule_.vars[static_cast<size_t>(n.var)].name); break;
      case PatternNode::Kind::Const:
      case PatternNode::Kind::Fold: {
        // The statement's right-hand side, with the variables renamed.
        const std::string& line = lines_.at(static_cast<size_t>(n.line - first_));
        s = "{" + rename_vars(line.substr(line.find('=') + 1), names_) + "}";
        break;
      }
      case PatternNode::Kind::Op: {
        std::vector<std::string> args;
        for (const PatternRef& a : n.inputs) args.push_back(ref(a));
        if (n.op->props.commutative && args.size() == 2) std::sort(args.begin(), args.end());
        s = std::string(n.op->name) + "(";
        for (const std::string& a : args) s += a + ",";
        s += ")";
        for (const AttrPattern& a : n.attrs) s += a.name + "=" + attr_text(a.literal) + ",";
        if (n.num_outputs > 1) s += "/" + std::to_string(n.num_outputs);
        break;
      }
    }
    return memo_[i] = s;
  }

  const Rule& rule_;
  const Pattern& p_;
  const std::vector<std::string>& lines_;
  int first_;
  const std::map<std::string, std::string>& names_;
  std::vector<std::string> memo_;
};

struct Key {
  std::string source, target;
  std::map<std::string, std::string> names;  // rule var -> canonical name (v0, v1, ...)
};

// Names variables by first appearance in the canonical source (twice: sorting operands
// depends on the names, and the names on the order).
Key canonical_key(const Rule& r) {
  Key k;
  for (const RuleVar& v : r.vars) k.names[v.name] = v.name;
  for (int round = 0; round < 3; ++round) {
    k.source = Canonical(r, r.source, r.source_lines, r.source_first_line, k.names).outputs();
    std::map<std::string, std::string> next;
    std::map<std::string, std::string> back;  // current name -> rule var
    for (const auto& [var, name] : k.names) back[name] = var;
    for (size_t i = 0; i < k.source.size(); ++i) {
      if (k.source[i] != '%') continue;
      size_t j = i + 1;
      while (j < k.source.size() && is_name_char(k.source[j])) ++j;
      std::string name = k.source.substr(i + 1, j - i - 1);
      auto it = back.find(name);
      if (it != back.end() && !next.count(it->second)) next[it->second] = "v" + std::to_string(next.size());
    }
    for (const RuleVar& v : r.vars)
      if (!next.count(v.name)) next[v.name] = "v" + std::to_string(next.size());
    k.names = std::move(next);
  }
  k.source = Canonical(r, r.source, r.source_lines, r.source_first_line, k.names).outputs();
  k.target = Canonical(r, r.target, r.target_lines, r.target_first_line, k.names).outputs();
  return k;
}

bool all_elementwise(const Rule& r) {
  for (const Pattern* p : {&r.source, &r.target})
    for (const PatternNode& n : p->nodes)
      if (n.kind == PatternNode::Kind::Op && !n.op->props.elementwise) return false;
      else if (n.kind == PatternNode::Kind::Const || n.kind == PatternNode::Kind::Fold) return false;
  return true;
}

bool all_scalar(const Rule& r, const VerifyBinding& v) {
  for (size_t i = 0; i < r.vars.size(); ++i)
    if (r.vars[i].operand() && v.types[i].rank() != 0) return false;
  return true;
}

Verdict weakest(const Verdict& a, const Verdict& b) {
  if (a.kind == Verdict::Kind::Proved) return b;
  if (b.kind == Verdict::Kind::Proved) return a;
  Verdict v = a;
  v.error_bits = std::min(a.error_bits, b.error_bits);
  v.trials = std::max(a.trials, b.trials);
  v.degree = std::max(a.degree, b.degree);
  return v;
}

}  // namespace

RuleSet collapse_rules(const RuleSet& rules, CollapseStats* stats, bool drop_implied) {
  CollapseStats st;
  struct Group {
    const Rule* first;
    Key key;
    std::vector<std::pair<const Rule*, std::map<std::string, std::string>>> members;  // rule, its var -> first's var
  };
  std::vector<Group> groups;
  std::map<std::pair<std::string, std::string>, size_t> by_key;
  for (const Rule& r : rules.rules) {
    Key k = canonical_key(r);
    if (k.source == k.target) {
      ++st.commutations_dropped;
      continue;
    }
    auto [it, fresh] = by_key.emplace(std::make_pair(k.source, k.target), groups.size());
    if (fresh) {
      std::map<std::string, std::string> same;
      for (const RuleVar& v : r.vars) same[v.name] = v.name;
      groups.push_back({&r, k, {{&r, same}}});
      continue;
    }
    Group& g = groups[it->second];
    std::map<std::string, std::string> from_canonical;  // canonical -> first rule's var
    for (const auto& [var, c] : g.key.names) from_canonical[c] = var;
    std::map<std::string, std::string> to_first;
    for (const auto& [var, c] : k.names) to_first[var] = from_canonical.at(c);
    g.members.emplace_back(&r, std::move(to_first));
    ++st.copies_merged;
  }
  RuleSet merged_set;
  merged_set.trailer = rules.trailer;
  for (const Group& g : groups) {
    Rule merged = *g.first;
    // Verify instantiations of every copy, renamed to the first copy's variables.
    std::vector<std::string> verify;
    std::vector<std::string> alternatives;
    bool scalar = false;
    Verdict verdict = g.first->verdict;
    for (const auto& [r, names] : g.members) {
      std::string conj;
      for (const Guard& guard : r->guards) conj += (conj.empty() ? "" : " && ") + rename_vars(guard.text, names);
      if (std::find(alternatives.begin(), alternatives.end(), conj) == alternatives.end()) alternatives.push_back(conj);
      for (const VerifyBinding& v : r->verify) {
        std::string text = rename_vars(v.text, names);
        if (std::find(verify.begin(), verify.end(), text) == verify.end()) verify.push_back(text);
        scalar = scalar || all_scalar(*r, v);
      }
      verdict = weakest(verdict, r->verdict);
    }
    std::string text = "rule " + merged.name + " {\n  vars ";
    for (size_t i = 0; i < merged.vars.size(); ++i)
      text += (i ? ", %" : "%") + merged.vars[i].name + (merged.vars[i].const_only ? ": const" : "");
    text += "\n";
    if (all_elementwise(merged) && scalar) {
      ++st.guards_dropped;
    } else if (alternatives.size() == 1) {
      if (!alternatives[0].empty()) text += "  where " + alternatives[0] + "\n";
    } else {
      std::string any;
      for (const std::string& a : alternatives) any += (any.empty() ? "(" : " || (") + (a.empty() ? "true" : a) + ")";
      text += "  where " + any + "\n";
    }
    for (const std::string& v : verify) text += "  verify-shapes " + v + "\n";
    text += "  source {\n";
    for (const std::string& l : merged.source_lines) text += "    " + l + "\n";
    text += "  }\n  target {\n";
    for (const std::string& l : merged.target_lines) text += "    " + l + "\n";
    text += "  }\n";
    if (verdict.kind != Verdict::Kind::None) text += "  verdict " + print_verdict(verdict) + "\n";
    text += "}\n";
    RuleSet one = parse_rules(text, "<collapsed " + merged.name + ">");
    merged_set.rules.push_back(std::move(one.rules.at(0)));
  }
  // Rules the earlier ones now join (the merged rules apply more widely than each copy
  // did, and the matchers see commutative operands in either order).
  RuleSet out;
  out.trailer = merged_set.trailer;
  ImpliedChecker accepted;
  for (Rule& r : merged_set.rules) {
    if (drop_implied && accepted.size() > 0 && accepted.implied(r)) {
      ++st.implied_dropped;
      continue;
    }
    accepted.add(r);
    out.rules.push_back(std::move(r));
  }
  if (stats) *stats = st;
  return out;
}

}  // namespace isomer::gen
