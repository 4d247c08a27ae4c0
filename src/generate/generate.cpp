#include "generate/generate.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "generate/enumerate.h"
#include "generate/implied.h"
#include "ir/error.h"
#include "ir/text.h"
#include "ops/op.h"
#include "verify/field_verifier.h"
#include "verify/verify.h"

namespace isomer::gen {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int resolve_jobs(int jobs) {
  if (jobs > 0) return jobs;
  unsigned n = std::thread::hardware_concurrency();
  return n ? static_cast<int>(n) : 1;
}

// Runs fn(i) for i in [0, n) on `jobs` threads; rethrows the first error.
template <class Fn>
void parallel_for(size_t n, int jobs, Fn fn) {
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min<int>(jobs, static_cast<int>(n)); ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

struct Pair {
  size_t family;
  GraphCode a, b;  // a: the bucket's representative
};

// Palette variables a graph reads.
std::set<size_t> used_vars(const Family& f, const GraphCode& c) {
  std::set<size_t> out;
  for (size_t i = 0; i < c.num_ops; ++i)
    for (uint8_t a : c.ops[i].in)
      if (a != kNone && a < f.vars.size()) out.insert(a);
  for (size_t k = 0; k < c.num_outputs; ++k)
    if (c.outputs[k] < f.vars.size()) out.insert(c.outputs[k]);
  return out;
}

// Palette variables in order of first appearance.
std::vector<size_t> var_order(const Family& f, const GraphCode& c) {
  std::vector<size_t> out;
  auto see = [&](size_t v) {
    if (v < f.vars.size() && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  };
  for (size_t i = 0; i < c.num_ops; ++i)
    for (uint8_t a : c.ops[i].in)
      if (a != kNone) see(a);
  for (size_t k = 0; k < c.num_outputs; ++k) see(c.outputs[k]);
  return out;
}

bool has_split(const Family& f, const GraphCode& c) {
  for (size_t i = 0; i < c.num_ops; ++i)
    if (f.ops[c.ops[i].variant].split) return true;
  return false;
}

bool shares_an_operator(const Family& f, const GraphCode& a, const GraphCode& b) {
  auto ta = op_texts(f, a), tb = op_texts(f, b);
  std::set<std::string> sa(ta.begin(), ta.end());
  for (const std::string& t : tb)
    if (sa.count(t)) return true;
  return false;
}

// Value `v` of `code` evaluated alone in set 0 (field when possible).
bool same_value(const Family& f, const GraphCode& a, size_t va, const GraphCode& b, size_t vb, uint64_t seed) {
  GraphCode ca = a, cb = b;
  ca.num_outputs = cb.num_outputs = 1;
  ca.outputs[0] = static_cast<uint8_t>(va);
  cb.outputs[0] = static_cast<uint8_t>(vb);
  if (a.poly && b.poly) {
    auto vars = random_field_vars(f, 0, seed);
    auto ra = eval_field_outputs(f, ca, 0, vars), rb = eval_field_outputs(f, cb, 0, vars);
    return ra[0].dims == rb[0].dims && ra[0].data == rb[0].data;
  }
  auto vars = random_integer_vars(f, 0, seed);
  bool ea = true, eb = true;
  auto ra = eval_real_outputs(f, ca, 0, vars, ea), rb = eval_real_outputs(f, cb, 0, vars, eb);
  return ra[0].dims() == rb[0].dims() && ra[0].to_f64() == rb[0].to_f64();
}

// Both sides are one operator of the same kind applied to pairwise equal operands:
// the pair follows from the smaller pairs of operands.
bool congruent(const Family& f, const GraphCode& a, const GraphCode& b, uint64_t seed) {
  if (a.num_outputs != 1 || b.num_outputs != 1) return false;
  auto [oa, ka] = value_origin(f, a, a.outputs[0]);
  auto [ob, kb] = value_origin(f, b, b.outputs[0]);
  if (oa < 0 || ob < 0 || ka != kb) return false;
  const OpInst &pa = a.ops[static_cast<size_t>(oa)], &pb = b.ops[static_cast<size_t>(ob)];
  if (pa.variant != pb.variant || pa.part != pb.part) return false;
  for (size_t i = 0; i < 2; ++i) {
    if ((pa.in[i] == kNone) != (pb.in[i] == kNone)) return false;
    if (pa.in[i] != kNone && !same_value(f, a, pa.in[i], b, pb.in[i], seed)) return false;
  }
  return true;
}

const char* kVarNames[] = {"x", "y", "z", "u", "v", "w", "t", "q"};

struct RuleText {
  std::string canonical;  // vars, guards, both sides: what makes two rules the same
  std::string text;       // the rule without its name line
  std::string op_summary; // "matmul_add"
};

class RuleWriter {
 public:
  RuleWriter(const Family& f, const GraphCode& src, const GraphCode& tgt) : f_(f) {
    order_ = var_order(f, src);
    for (size_t i = 0; i < order_.size(); ++i) name_[order_[i]] = std::string("%") + kVarNames[i];
  }

  // False if the rule cannot be stated (a letter no variable carries).
  bool write(const GraphCode& src, const GraphCode& tgt, RuleText& out) {
    std::string vars = "  vars ";
    std::vector<std::string> guards;
    for (size_t i = 0; i < order_.size(); ++i) {
      const PaletteVar& v = f_.vars[order_[i]];
      vars += (i ? ", " : "") + name_[order_[i]];
      guards.push_back("rank(" + name_[order_[i]] + ") == " + std::to_string(v.dims.size()));
      for (size_t axis = 0; axis < v.dims.size(); ++axis) {
        std::string here = "dim(" + name_[order_[i]] + ", " + std::to_string(axis) + ")";
        int l = f_.letter_index(v.dims[axis]);
        if (l < 0) {
          guards.push_back(here + " == " + v.dims[axis]);
        } else if (letter_expr_.count(l)) {
          guards.push_back(here + " == " + letter_expr_[l]);
        } else {
          letter_expr_[l] = here;
        }
      }
    }
    std::string body = vars + "\n";
    for (const std::string& g : guards) body += "  where " + g + "\n";
    std::string verify;
    for (size_t s = 0; s < f_.num_sets(); ++s) {
      verify += "  verify-shapes ";
      for (size_t i = 0; i < order_.size(); ++i)
        verify += (i ? ", " : "") + name_[order_[i]] + ": " +
                  print_type(TensorType{DType::Float32, make_shape(f_.var_dims(order_[i], s))});
      verify += "\n";
    }
    std::string sides;
    for (int side = 0; side < 2; ++side) {
      std::vector<std::string> lines;
      if (!side_lines(side == 0 ? src : tgt, lines)) return false;
      sides += side == 0 ? "  source {\n" : "  target {\n";
      for (const std::string& l : lines) sides += "    " + l + "\n";
      sides += "  }\n";
    }
    out.canonical = body + sides;
    out.text = body + verify + sides;
    std::vector<std::string> ops;
    for (size_t i = 0; i < src.num_ops; ++i) {
      std::string n = f_.ops[src.ops[i].variant].op;
      std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
      if (std::find(ops.begin(), ops.end(), n) == ops.end()) ops.push_back(n);
    }
    for (size_t i = 0; i < ops.size(); ++i) out.op_summary += (i ? "_" : "") + ops[i];
    if (ops.empty()) out.op_summary = "id";
    return true;
  }

 private:
  bool sum_expr(LetterSum m, std::string& out) {
    out.clear();
    for (size_t l = 0; l < f_.letters.size(); ++l)
      for (int c = 0; c < letter_count(m, l); ++c) {
        auto it = letter_expr_.find(static_cast<int>(l));
        if (it == letter_expr_.end()) return false;
        out += (out.empty() ? "" : " + ") + it->second;
      }
    return !out.empty();
  }

  bool side_lines(const GraphCode& c, std::vector<std::string>& lines) {
    std::vector<std::string> value_name(num_values(f_, c));
    for (size_t i = 0; i < f_.vars.size(); ++i) value_name[i] = name_.count(i) ? name_[i] : "";
    std::vector<std::vector<std::vector<int64_t>>> dims;  // set -> value -> dims
    for (size_t s = 0; s < f_.num_sets(); ++s) dims.push_back(value_dims(f_, c, s));
    size_t next = f_.vars.size(), id = 0;
    for (size_t i = 0; i < c.num_ops; ++i) {
      const OpInst& op = c.ops[i];
      const OpVariant& v = f_.ops[op.variant];
      std::vector<std::string> args;
      for (uint8_t a : op.in)
        if (a != kNone) {
          if (value_name[a].empty()) return false;
          args.push_back(value_name[a]);
        }
      std::string lhs;
      if (v.split) {
        std::vector<int64_t> extents;
        for (size_t s = 0; s < f_.num_sets(); ++s) extents.push_back(dims[s][op.in[0]][static_cast<size_t>(v.split_axis)]);
        LetterSum total = decompose(f_, extents);
        std::string first, rest;
        if (!sum_expr(op.part, first) || !sum_expr(total - op.part, rest)) return false;
        std::string sizes = "%s" + std::to_string(i);
        lines.push_back(sizes + " = const i64[2] {$(" + first + "), $(" + rest + ")}");
        args.push_back(sizes);
        value_name[next] = "%" + std::to_string(id++);
        value_name[next + 1] = "%" + std::to_string(id++);
        lhs = value_name[next] + ", " + value_name[next + 1];
        next += 2;
      } else {
        value_name[next] = "%" + std::to_string(id++);
        lhs = value_name[next];
        next += 1;
      }
      std::string line = lhs + " = " + v.op + "(";
      for (size_t k = 0; k < args.size(); ++k) line += (k ? ", " : "") + args[k];
      line += ")";
      if (!v.attr_text.empty()) line += " " + v.attr_text;
      lines.push_back(line);
    }
    std::string ret = "return ";
    for (size_t k = 0; k < c.num_outputs; ++k) {
      if (value_name[c.outputs[k]].empty()) return false;
      ret += (k ? ", " : "") + value_name[c.outputs[k]];
    }
    lines.push_back(ret);
    return true;
  }

  const Family& f_;
  std::vector<size_t> order_;
  std::map<size_t, std::string> name_;     // palette var -> %x
  std::map<int, std::string> letter_expr_; // letter -> dim(%x, i)
};

// Polynomial rules: the field tester alone unless options.prove (fast, and the verdict
// does not depend on a solver's time limit, so the file stays reproducible); rules
// with a non-polynomial side: Z3, the only way they can become usable.
Verdict run_verifier(const Rule& rule, bool polynomial, const GenerateOptions& o) {
  VerifyOptions vo;
  vo.timeout_s = o.timeout_s;
  vo.rlimit = o.rlimit;
  vo.use_z3 = o.prove || !polynomial;
  return verify_rule(rule, vo);
}

// One progress line: the stage's time and the count it left.
void say_stage(const GenerateResult& r, const GenerateOptions& o, const char* stage, const char* count) {
  if (!o.progress) return;
  char line[160];
  std::snprintf(line, sizeof line, "%s: %.1fs, %s %llu", stage, r.seconds.back().second, count,
                static_cast<unsigned long long>(r.count(count)));
  o.progress(line);
}

// Progress inside a long stage: a line at every 10% of `total` items (only for
// stages of 2,000 items or more), from whichever worker finishes the item.
class Ticker {
 public:
  Ticker(const GenerateOptions& o, std::string what, size_t total)
      : o_(o), what_(std::move(what)), total_(total), start_(Clock::now()) {}
  void operator()() {
    if (!o_.progress || total_ < 2000) return;
    size_t n = ++done_;
    if (n * 10 / total_ == (n - 1) * 10 / total_ || n == total_) return;
    char line[160];
    std::snprintf(line, sizeof line, "  %s: %zu of %zu (%.0fs)", what_.c_str(), n, total_, seconds_since(start_));
    std::lock_guard<std::mutex> lock(mutex_);
    o_.progress(line);
  }

 private:
  const GenerateOptions& o_;
  std::string what_;
  size_t total_;
  Clock::time_point start_;
  std::atomic<size_t> done_{0};
  std::mutex mutex_;
};

struct Candidate {
  size_t family;
  GraphCode src, tgt;
  RuleText text;
};

}  // namespace

uint64_t GenerateResult::count(const std::string& stage) const {
  for (const auto& [name, n] : counts)
    if (name == stage) return n;
  return 0;
}

GenerateResult generate_rules(const GenerateOptions& o) {
  GenerateResult result;
  result.verifier = "verify_rule";
  const int jobs = resolve_jobs(o.jobs);
  std::vector<Family> families = default_families(o.ops);

  // 1. Enumerate.
  auto t = Clock::now();
  EnumerateStats stats;
  std::vector<GraphRecord> records = enumerate_graphs(families, o.max_ops, jobs, o.seed, stats, o.shards);
  result.counts.emplace_back("enumerated", stats.enumerated);
  result.counts.emplace_back("fingerprinted", stats.enumerated - stats.no_fingerprint);
  result.counts.emplace_back("canonical_names", records.size());
  result.seconds.emplace_back("enumerate", seconds_since(t));
  say_stage(result, o, "enumerate", "canonical_names");

  // 2-3. Buckets (records with equal keys), duplicates removed, members sorted so that
  // the representative (fewest operators, then canonical text) comes first.
  t = Clock::now();
  std::stable_sort(records.begin(), records.end(),
                   [](const GraphRecord& a, const GraphRecord& b) { return a.key < b.key; });
  std::vector<std::pair<size_t, size_t>> ranges;  // buckets of 2+ records
  uint64_t distinct = 0;
  for (size_t i = 0; i < records.size();) {
    size_t j = i + 1;
    while (j < records.size() && records[j].key == records[i].key) ++j;
    if (j - i == 1) ++distinct;
    else ranges.emplace_back(i, j);
    i = j;
  }
  std::vector<std::vector<size_t>> buckets(ranges.size());
  parallel_for(ranges.size(), jobs, [&](size_t b) {
    auto [i, j] = ranges[b];
    const Family& f = families[records[i].code.family];
    std::vector<std::tuple<int, std::string, size_t>> members;
    for (size_t k = i; k < j; ++k) members.emplace_back(records[k].code.num_ops, dedupe_text(f, records[k].code), k);
    std::sort(members.begin(), members.end());
    members.erase(std::unique(members.begin(), members.end(),
                              [](const auto& x, const auto& y) { return std::get<1>(x) == std::get<1>(y); }),
                  members.end());
    for (const auto& m : members) buckets[b].push_back(std::get<2>(m));
  });
  uint64_t candidates = 0;
  for (const auto& members : buckets) {
    distinct += members.size();
    candidates += members.size() - 1;
  }
  result.counts.emplace_back("distinct", distinct);
  result.counts.emplace_back("candidate_pairs", candidates);
  result.seconds.emplace_back("pair", seconds_since(t));
  say_stage(result, o, "pair", "candidate_pairs");

  // 4. Exact re-check on fresh inputs under every shape set. A member that does not
  // equal the representative (a fingerprint coincidence, e.g. a scalar input that
  // happened to be 1) is compared with the other classes of its bucket in turn, and
  // starts a class of its own if it equals none.
  t = Clock::now();
  const bool debug = std::getenv("ISOMER_GENERATE_DEBUG") != nullptr;
  std::vector<std::vector<Pair>> found(buckets.size());
  // The fresh inputs are made once per family, and each class representative is
  // evaluated once per bucket (not once per member it is compared with).
  std::vector<RecheckInputs> fresh;
  for (const Family& f : families) fresh.push_back(recheck_inputs(f, o.seed ^ 0x9ec4ec));
  parallel_for(buckets.size(), jobs, [&](size_t b) {
    if (!o.shards.mine(b)) return;
    const auto& members = buckets[b];
    size_t fi = records[members[0]].code.family;
    const Family& f = families[fi];
    std::vector<size_t> reps{members[0]};
    std::vector<RecheckValues> rep_values{recheck_values(f, records[members[0]].code, fresh[fi])};
    for (size_t k = 1; k < members.size(); ++k) {
      const GraphCode& m = records[members[k]].code;
      const RecheckValues mv = recheck_values(f, m, fresh[fi]);
      bool joined = false;
      for (size_t i = 0; i < reps.size(); ++i) {
        const GraphCode& rc = records[reps[i]].code;
        bool same = rc.poly == m.poly ? rc.num_outputs == m.num_outputs && same_recheck_values(rep_values[i], mv)
                                      : recheck_pair(f, rc, m, o.seed ^ 0x9ec4ec);
        if (same) {
          found[b].push_back({fi, rc, m});
          joined = true;
          break;
        }
      }
      if (!joined) {
        if (debug)
          std::fprintf(stderr, "recheck failed: %s  vs  %s\n", canonical_text(f, records[reps[0]].code, false).c_str(),
                       canonical_text(f, m, false).c_str());
        reps.push_back(members[k]);
        rep_values.push_back(mv);
      }
    }
  });
  exchange(
      o.shards, found.size(), [&](ShardWriter& w, size_t b) { w.put_vector(found[b]); },
      [&](ShardReader& r, size_t b) { found[b] = r.get_vector<Pair>(); });
  std::vector<Pair> pairs;
  for (auto& v : found) pairs.insert(pairs.end(), v.begin(), v.end());
  std::vector<GraphRecord>().swap(records);
  result.counts.emplace_back("rechecked", pairs.size());
  result.seconds.emplace_back("recheck", seconds_since(t));
  say_stage(result, o, "recheck", "rechecked");

  // 5. Pruning.
  t = Clock::now();
  auto prune = [&](const char* stage, auto drop) {
    std::vector<char> gone(pairs.size(), 0);
    parallel_for(pairs.size(), jobs, [&](size_t i) { gone[i] = drop(pairs[i]); });
    std::vector<Pair> rest;
    for (size_t i = 0; i < pairs.size(); ++i)
      if (!gone[i]) rest.push_back(pairs[i]);
    pairs = std::move(rest);
    result.counts.emplace_back(stage, pairs.size());
  };
  prune("after_trivial", [&](const Pair& p) {
    const Family& f = families[p.family];
    return canonical_text(f, p.a, false) == canonical_text(f, p.b, false);
  });
  prune("after_common_subgraph", [&](const Pair& p) { return shares_an_operator(families[p.family], p.a, p.b); });
  // Pairs equal modulo associativity and commutativity of Add / Mul follow from the
  // 1- and 2-operator commutativity and associativity rules (which stay).
  prune("after_ac_normal", [&](const Pair& p) {
    const Family& f = families[p.family];
    return p.a.num_ops + p.b.num_ops > 4 && ac_normal_text(f, p.a) == ac_normal_text(f, p.b);
  });
  prune("after_congruence", [&](const Pair& p) { return congruent(families[p.family], p.a, p.b, o.seed ^ 0xc0c0); });

  // Direction, binding and rule text.
  std::vector<Candidate> cands;
  for (const Pair& p : pairs) {
    const Family& f = families[p.family];
    GraphCode src = p.a, tgt = p.b;
    auto bigger = [&](const GraphCode& x, const GraphCode& y) {
      if (x.num_ops != y.num_ops) return x.num_ops > y.num_ops;
      return canonical_text(f, x, false) > canonical_text(f, y, false);
    };
    if (bigger(tgt, src)) std::swap(src, tgt);
    // A source must bind every variable of the target, and cannot contain a Split:
    // its sizes are computed ($(...)), which only a target may do.
    auto can_be_source = [&](const GraphCode& s, const GraphCode& d) {
      auto us = used_vars(f, s), ud = used_vars(f, d);
      return std::includes(us.begin(), us.end(), ud.begin(), ud.end()) && !has_split(f, s);
    };
    if (!can_be_source(src, tgt)) {
      if (!can_be_source(tgt, src)) continue;
      std::swap(src, tgt);
    }
    Candidate c{p.family, src, tgt, {}};
    if (!RuleWriter(f, src, tgt).write(src, tgt, c.text)) continue;
    cands.push_back(std::move(c));
  }
  result.counts.emplace_back("after_binding", cands.size());
  std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    int na = a.src.num_ops + a.tgt.num_ops, nb = b.src.num_ops + b.tgt.num_ops;
    if (na != nb) return na < nb;
    return a.text.canonical < b.text.canonical;
  });
  cands.erase(std::unique(cands.begin(), cands.end(),
                          [](const Candidate& a, const Candidate& b) { return a.text.canonical == b.text.canonical; }),
              cands.end());
  result.counts.emplace_back("after_duplicate_text", cands.size());

  // Rules: name, parse (the loader rebuilds both sides at every verify-shapes line).
  std::set<std::string> names;
  std::vector<RuleReport> reports;
  for (const Candidate& c : cands) {
    const Family& f = families[c.family];
    char hex[17];
    std::snprintf(hex, sizeof hex, "%08llx", static_cast<unsigned long long>(fnv1a(c.text.canonical) & 0xffffffffULL));
    std::string name = "gen" + std::to_string(c.src.num_ops + c.tgt.num_ops) + "_" + f.name + "_" +
                       c.text.op_summary + "_" + hex;
    while (names.count(name)) name += "x";
    names.insert(name);
    bool needs_proof = !(c.src.poly && c.tgt.poly);
    std::string comment = "# " + f.name + ": " + std::to_string(c.src.num_ops) + " -> " +
                          std::to_string(c.tgt.num_ops) + " operators" +
                          (needs_proof ? "; no field semantics, needs a proof" : "") + "\n";
    std::string text = comment + "rule " + name + " {\n" + c.text.text + "}\n";
    try {
      RuleSet one = parse_rules(text, name);
      result.all.push_back(std::move(one.rules.at(0)));
      reports.push_back({name, f.name, needs_proof, c.src.num_ops + c.tgt.num_ops,
                         std::max<int>(c.src.num_ops, c.tgt.num_ops), false, {}});
    } catch (const Error& e) {
      std::fprintf(stderr, "isomer rules generate: internal: rule %s does not load: %s\n", name.c_str(), e.what());
    }
  }
  result.counts.emplace_back("loaded", result.all.size());
  result.seconds.emplace_back("prune", seconds_since(t));
  say_stage(result, o, "prune", "loaded");

  // 6. Verification, level by level: the usable rules of the lower levels decide which
  // rules of this one are implied (generate/implied.h); the others are verified.
  t = Clock::now();
  uint64_t implied_count = 0;
  if (o.verify) {
    ImpliedChecker accepted;
    for (size_t i = 0; i < result.all.size();) {
      size_t j = i;
      while (j < result.all.size() && reports[j].level == reports[i].level) ++j;
      auto tl = Clock::now();
      const int level = reports[i].level;
      if (o.prune_implied && accepted.size() > 0) {
        Ticker tick(o, "level " + std::to_string(level) + " implied check", j - i);
        parallel_for(j - i, jobs, [&](size_t k) {
          if (!o.shards.mine(k)) return;
          reports[i + k].implied = accepted.implied(result.all[i + k]);
          tick();
        });
        exchange(
            o.shards, j - i, [&](ShardWriter& w, size_t k) { w.put<char>(reports[i + k].implied ? 1 : 0); },
            [&](ShardReader& r, size_t k) { reports[i + k].implied = r.get<char>() != 0; });
      }
      size_t level_implied = 0;
      for (size_t k = i; k < j; ++k) level_implied += reports[k].implied;
      double implied_s = seconds_since(tl);
      tl = Clock::now();
      Ticker tick(o, "level " + std::to_string(level) + " verification", j - i);
      parallel_for(j - i, jobs, [&](size_t k) {
        if (!o.shards.mine(k)) return;
        if (!reports[i + k].implied)
          result.all[i + k].verdict = run_verifier(result.all[i + k], !reports[i + k].needs_proof, o);
        tick();
      });
      exchange(
          o.shards, j - i,
          [&](ShardWriter& w, size_t k) {
            const Verdict& v = result.all[i + k].verdict;
            w.put(static_cast<int>(v.kind));
            w.put(v.error_bits);
            w.put(v.trials);
            w.put(v.degree);
            w.put(v.time_s);
            w.put_string(v.reason);
          },
          [&](ShardReader& r, size_t k) {
            Verdict& v = result.all[i + k].verdict;
            v.kind = static_cast<Verdict::Kind>(r.get<int>());
            v.error_bits = r.get<int>();
            v.trials = r.get<int>();
            v.degree = r.get<int64_t>();
            v.time_s = r.get<double>();
            v.reason = r.get_string();
          });
      size_t level_usable = 0;
      for (size_t k = i; k < j; ++k)
        if (!reports[k].implied && result.all[k].usable()) {
          if (reports[k].largest_side <= kImpliedMaxSide) accepted.add(result.all[k]);
          ++level_usable;
        }
      implied_count += level_implied;
      char line[200];
      std::snprintf(line, sizeof line, "verify level %d: %zu rules, %zu implied (%.1fs), %zu usable of %zu verified (%.1fs)",
                    level, j - i, level_implied, implied_s, level_usable, j - i - level_implied,
                    seconds_since(tl));
      if (o.progress) o.progress(line);
      i = j;
    }
  }
  uint64_t proved = 0, tested = 0, refuted = 0, unknown = 0;
  std::vector<Rule> verified;
  std::vector<RuleReport> verified_reports;
  for (size_t i = 0; i < result.all.size(); ++i) {
    if (reports[i].implied) continue;
    Rule& r = result.all[i];
    reports[i].verdict = r.verdict;
    switch (r.verdict.kind) {
      case Verdict::Kind::Proved: ++proved; break;
      case Verdict::Kind::Tested: ++tested; break;
      case Verdict::Kind::Refuted: ++refuted; break;
      default: ++unknown; break;
    }
    if (r.usable()) {
      Rule w = r;
      w.verdict.time_s = -1;  // timings would make the file differ between runs
      result.rules.rules.push_back(std::move(w));
    }
    verified.push_back(std::move(r));
    verified_reports.push_back(std::move(reports[i]));
  }
  result.all = std::move(verified);
  reports = std::move(verified_reports);
  result.counts.emplace_back("after_implied", result.all.size());
  result.reports = std::move(reports);
  result.counts.emplace_back("proved", proved);
  result.counts.emplace_back("tested", tested);
  result.counts.emplace_back("refuted", refuted);
  result.counts.emplace_back("unknown", unknown);
  result.counts.emplace_back("written", result.rules.rules.size());
  result.seconds.emplace_back("verify", seconds_since(t));
  return result;
}

std::string print_generated(const GenerateResult& result, const GenerateOptions& options) {
  std::string ops;
  for (const std::string& op : options.ops) ops += (ops.empty() ? " --ops " : ",") + op;
  std::string head = "# Generated by `isomer rules generate --max-ops " + std::to_string(options.max_ops) + ops +
                     "`: do not edit by hand.\n# " + std::to_string(result.rules.rules.size()) +
                     " usable rules (verifier: " + result.verifier + "); see generate/generate.h.\n\n";
  return head + print_rules(result.rules);
}

}  // namespace isomer::gen
