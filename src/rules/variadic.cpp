#include "rules/variadic.h"

#include <algorithm>

#include "ir/error.h"
#include "rules/rule.h"

namespace isomer {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Positions of `%name...` tokens of the lists in `line` (start of %, end after ...).
struct ListToken {
  size_t begin, end;
  std::string name;
};
std::vector<ListToken> list_tokens(std::string_view line, const std::set<std::string>& names) {
  std::vector<ListToken> out;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '%') continue;
    size_t j = i + 1;
    while (j < line.size() && is_name_char(line[j]) && line.substr(j, 3) != "...") ++j;
    std::string name(line.substr(i + 1, j - i - 1));
    if (line.substr(j, 3) == "..." && names.count(name)) out.push_back({i, j + 3, name});
  }
  return out;
}

// Every list token as element i (1-based).
std::string element(std::string_view line, const std::set<std::string>& names, size_t i) {
  std::string out;
  size_t last = 0;
  for (const ListToken& t : list_tokens(line, names)) {
    out += std::string(line.substr(last, t.begin - last)) + "%" + t.name + std::to_string(i);
    last = t.end;
  }
  return out + std::string(line.substr(last));
}

// Lists written out in place: `%w...` -> `%w1, ..., %wn`, `$(.. %w ...)` repeated per
// element, `[N]` -> `[n]`.
std::string inline_lists(std::string_view line, const std::set<std::string>& names, size_t n) {
  std::string out;
  size_t i = 0;
  while (i < line.size()) {
    if (line.substr(i, 2) == "$(") {
      int depth = 0;
      size_t j = i + 1;
      for (; j < line.size(); ++j) {
        if (line[j] == '(') ++depth;
        if (line[j] == ')' && --depth == 0) break;
      }
      std::string_view segment = line.substr(i, j + 1 - i);
      if (!list_tokens(segment, names).empty()) {
        for (size_t k = 1; k <= n; ++k) out += (k > 1 ? ", " : "") + element(segment, names, k);
      } else {
        out += std::string(segment);
      }
      i = j + 1;
      continue;
    }
    if (line.substr(i, 3) == "[N]") {
      out += "[" + std::to_string(n) + "]";
      i += 3;
      continue;
    }
    if (line[i] == '%') {
      std::vector<ListToken> t = list_tokens(line.substr(i), names);
      if (!t.empty() && t[0].begin == 0) {
        for (size_t k = 1; k <= n; ++k) out += (k > 1 ? ", %" : "%") + t[0].name + std::to_string(k);
        i += t[0].end;
        continue;
      }
    }
    out += line[i++];
  }
  return out;
}

}  // namespace

bool declares_list(std::string_view vars_line) { return vars_line.find("...") != std::string_view::npos; }

VariadicTemplate make_template(std::vector<std::string> lines, std::string file, int first_line) {
  VariadicTemplate t;
  t.lines = std::move(lines);
  t.file = std::move(file);
  t.first_line = first_line;
  for (const std::string& raw : t.lines) {
    std::string_view l = trim(raw);
    if (l.substr(0, 5) == "vars ") {
      size_t pos = 0;
      while ((pos = l.find('%', pos)) != std::string_view::npos) {
        size_t j = pos + 1;
        while (j < l.size() && is_name_char(l[j]) && l.substr(j, 3) != "...") ++j;
        if (l.substr(j, 3) == "...") {
          std::string name(l.substr(pos + 1, j - pos - 1));
          t.names.insert(name);
          t.vars.insert(name);
        }
        pos = j;
      }
    } else if (!l.empty() && l[0] == '%') {
      size_t eq = l.find('=');
      std::string_view lhs = l.substr(0, eq == std::string_view::npos ? 0 : eq);
      size_t pos = 0;
      while ((pos = lhs.find('%', pos)) != std::string_view::npos) {
        size_t j = pos + 1;
        while (j < lhs.size() && is_name_char(lhs[j]) && lhs.substr(j, 3) != "...") ++j;
        if (lhs.substr(j, 3) == "...") t.names.insert(std::string(lhs.substr(pos + 1, j - pos - 1)));
        pos = j;
      }
    }
  }
  require(!t.vars.empty(), "a variadic rule needs a list variable like %w...");
  return t;
}

std::vector<size_t> verify_arities(const VariadicTemplate& t) {
  std::vector<size_t> out;
  const std::string first = *t.vars.begin();
  for (const std::string& raw : t.lines) {
    std::string_view l = trim(raw);
    if (l.substr(0, 14) != "verify-shapes ") continue;
    size_t count = 0;
    for (size_t pos = 0; (pos = l.find("%" + first, pos)) != std::string_view::npos; pos += first.size() + 1) {
      size_t j = pos + 1 + first.size();
      size_t k = j;
      while (k < l.size() && l[k] >= '0' && l[k] <= '9') ++k;
      if (k > j && (k == l.size() || !is_name_char(l[k]))) ++count;
    }
    out.push_back(count);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string expand_template(const VariadicTemplate& t, size_t n) {
  std::string out;
  const std::string first = *t.vars.begin();
  bool in_block = false;
  for (const std::string& raw : t.lines) {
    std::string_view l = trim(raw);
    std::string indent(raw.substr(0, raw.find_first_not_of(' ')));
    if (l == "source {" || l == "target {") in_block = true;
    if (l == "}") in_block = false;
    if (l.substr(0, 5) == "vars ") {
      // `%w...: const` -> `%w1: const, ..., %wn: const`
      std::string line;
      std::string_view items = l.substr(5);
      size_t start = 0;
      while (start <= items.size()) {
        size_t comma = items.find(',', start);
        std::string_view item = trim(items.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
        if (!item.empty()) {
          std::vector<ListToken> tok = list_tokens(item, t.vars);
          if (tok.empty()) {
            line += (line.empty() ? "" : ", ") + std::string(item);
          } else {
            for (size_t k = 1; k <= n; ++k) line += (line.empty() ? "" : ", ") + element(item, t.vars, k);
          }
        }
        if (comma == std::string_view::npos) break;
        start = comma + 1;
      }
      out += indent + "vars " + line + "\n";
      continue;
    }
    if (l.substr(0, 6) == "where ") {
      if (list_tokens(l, t.names).empty()) {
        out += raw + "\n";
      } else {
        for (size_t k = 1; k <= n; ++k) out += indent + element(l, t.names, k) + "\n";
      }
      continue;
    }
    if (l.substr(0, 14) == "verify-shapes ") {
      VariadicTemplate one = t;
      one.lines = {raw};
      std::vector<size_t> a = verify_arities(one);
      if (!a.empty() && a[0] == n) out += raw + "\n";
      continue;
    }
    if (in_block && !l.empty() && l[0] == '%') {
      size_t eq = l.find('=');
      std::string_view lhs = l.substr(0, eq), rhs = eq == std::string_view::npos ? "" : l.substr(eq + 1);
      // A list defined from a list operand: one statement per element.
      bool defines_list = !list_tokens(lhs, t.names).empty();
      std::string rhs_outside;  // the right-hand side without $(...) parts
      for (size_t i = 0, depth = 0; i < rhs.size(); ++i) {
        if (rhs.substr(i, 2) == "$(") ++depth;
        if (depth == 0) rhs_outside += rhs[i];
        if (depth && rhs[i] == ')') --depth;
      }
      if (defines_list && !list_tokens(rhs_outside, t.names).empty()) {
        for (size_t k = 1; k <= n; ++k) out += indent + element(l, t.names, k) + "\n";
        continue;
      }
    }
    out += indent + inline_lists(l, t.names, n) + "\n";
  }
  return out;
}

Rule expand_variadic(const Rule& rule, size_t n) {
  require(rule.variadic != nullptr, "rule '" + rule.name + "' is not variadic");
  require(n >= 1, "a variadic rule needs at least one element");
  std::string text = expand_template(*rule.variadic, n);
  RuleSet set = parse_rules_unverified(text, rule.variadic->file + " (" + rule.name + " for " + std::to_string(n) + ")");
  require(set.rules.size() == 1, "rule '" + rule.name + "' does not expand to one rule");
  Rule out = std::move(set.rules[0]);
  out.verdict = rule.verdict;
  return out;
}

}  // namespace isomer
