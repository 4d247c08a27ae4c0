// The rule generator (generate/): expected identities are found (checked by running
// each found rule's matcher on a hand-built graph and comparing the rewrite with the
// expected other side), every rule loads, the output is deterministic across runs and
// thread counts, false identities are absent and the stage counts are consistent.
#include <gtest/gtest.h>

#include <functional>
#include <unordered_map>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "generate/enumerate.h"
#include "generate/generate.h"
#include "ops/op.h"
#include "generate/implied.h"
#include "generate/palette.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ir/text.h"
#include "rules/match.h"
#include "rules/rule.h"

namespace isomer {
namespace {

using gen::GenerateOptions;
using gen::GenerateResult;

// Runs are shared between tests (each configuration once per process).
const GenerateResult& run(int max_ops, const std::vector<std::string>& ops, int jobs = 2, bool verify = true) {
  static std::map<std::string, GenerateResult> cache;
  std::string key = std::to_string(max_ops) + "/" + std::to_string(jobs) + (verify ? "v" : "");
  for (const std::string& op : ops) key += "," + op;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  GenerateOptions o;
  o.max_ops = max_ops;
  o.ops = ops;
  o.jobs = jobs;
  o.verify = verify;
  return cache.emplace(key, gen::generate_rules(o)).first->second;
}

// `g` with the operands of commutative operators in a canonical order (the written
// rules leave that order to the matchers, see generate/collapse.h).
Graph commuted(const Graph& g) {
  std::unordered_map<const Node*, std::string> key;
  std::function<std::string(const Value&)> key_of = [&](const Value& v) -> std::string {
    const Node& n = *v.node;
    if (n.kind() == NodeKind::Input) return "%" + n.name();
    if (auto it = key.find(&n); it != key.end()) return it->second + "#" + std::to_string(v.index);
    std::vector<std::string> args;
    for (const Value& in : n.inputs()) args.push_back(in.present() ? key_of(in) : "_");
    if (n.op() && n.op()->props.commutative && args.size() == 2) std::sort(args.begin(), args.end());
    std::string k = n.op_type() + "(";
    for (const std::string& a : args) k += a + ",";
    return (key[&n] = k + ")") + "#" + std::to_string(v.index);
  };
  return rebuild(g, [&](const Node& n, const std::vector<Value>& in, GraphBuilder&) -> std::vector<Value> {
    if (!n.op() || !n.op()->props.commutative || in.size() != 2 || key_of(in[0]) <= key_of(in[1])) return {};
    std::vector<Value> outs;
    NodePtr swapped = n.with_inputs({in[1], in[0]});
    for (uint32_t i = 0; i < swapped->num_outputs(); ++i) outs.push_back(swapped->output(i));
    return outs;
  });
}

// True if some rule rewrites the whole of graph `a` into graph `b` (or `b` into `a`),
// up to the order of commutative operands: the rule's matcher runs on the hand-built graph.
bool rewrites(const Rule& rule, const Graph& a, const Graph& b) {
  for (const Match& m : find_matches(a, rule)) {
    if (m.nodes.size() != a.num_ops()) continue;
    bool applied = false;
    Graph g = apply_rule(a, rule, m, nullptr, &applied);
    if (!applied || g.outputs().size() != b.outputs().size()) continue;
    // Output names are not part of the structure being compared.
    if (same_graph(commuted(Graph(g.inputs(), g.outputs(), b.output_names(), g.info())), commuted(b))) return true;
  }
  return false;
}

// Name of a rule (in `rules`) that states a = b in either direction; "" if none.
std::string find_identity(const std::vector<Rule>& rules, const std::string& a_text, const std::string& b_text) {
  Graph a = parse_graph(a_text), b = parse_graph(b_text);
  for (const Rule& r : rules)
    if (rewrites(r, a, b) || rewrites(r, b, a)) return r.name;
  return "";
}

std::string header(const std::string& inputs) { return "graph g(" + inputs + ") {\n"; }

TEST(GeneratorPalette, LetterSumsDecompose) {
  auto fams = gen::default_families();
  ASSERT_EQ(fams.size(), 3u);
  const gen::Family& m = fams[1];
  EXPECT_EQ(m.name, "matrix");
  // b + c over the two shape sets, and 2c.
  gen::LetterSum bc = gen::decompose(m, {3 + 4, 2 + 6});
  EXPECT_EQ(gen::sum_terms(bc), 2);
  EXPECT_EQ(gen::letter_count(bc, 1), 1);
  EXPECT_EQ(gen::letter_count(bc, 2), 1);
  EXPECT_EQ(gen::sum_terms(gen::decompose(m, {8, 12})), 2);
  EXPECT_EQ(gen::decompose(m, {1, 1}), 0u);
  EXPECT_EQ(gen::proper_parts(bc, 4).size(), 2u);
  EXPECT_THROW(gen::default_families({"NoSuchOp"}), Error);
}

TEST(GeneratorEnumerate, IncrementalFingerprintsAgreeWithReplay) {
  auto fams = gen::default_families({"MatMul", "Add", "Transpose"});
  gen::EnumerateStats stats;
  auto records = gen::enumerate_graphs(fams, 2, 1, 7, stats);
  ASSERT_FALSE(records.empty());
  EXPECT_GE(stats.enumerated, records.size());
  // Records with equal keys compute equal functions (re-checked exactly) or are
  // rejected by recheck_pair; a record always equals itself.
  for (size_t i = 0; i < records.size(); i += 17) {
    const gen::Family& f = fams[records[i].code.family];
    EXPECT_TRUE(gen::recheck_pair(f, records[i].code, records[i].code, 1));
  }
}

TEST(GeneratorRules, MatrixIdentitiesAreFound) {
  const GenerateResult& r = run(3, {"MatMul", "Add", "Transpose"});
  const std::string xyz = header("%x: f32[2,3], %y: f32[3,4], %z: f32[3,4]");
  // Distributivity of MatMul over Add.
  EXPECT_NE(find_identity(r.rules.rules,
                          xyz + "  %0 = Add(%y, %z)\n  %1 = MatMul(%x, %0)\n  return %1\n}\n",
                          xyz + "  %0 = MatMul(%x, %y)\n  %1 = MatMul(%x, %z)\n  %2 = Add(%0, %1)\n  return %2\n}\n"),
            "");
  // Associativity.
  const std::string xyw = header("%x: f32[2,3], %y: f32[3,4], %w: f32[4,5]");
  EXPECT_NE(find_identity(r.rules.rules,
                          xyw + "  %0 = MatMul(%x, %y)\n  %1 = MatMul(%0, %w)\n  return %1\n}\n",
                          xyw + "  %0 = MatMul(%y, %w)\n  %1 = MatMul(%x, %0)\n  return %1\n}\n"),
            "");
  // Transpose of a product.
  const std::string xy = header("%x: f32[2,3], %y: f32[3,4]");
  EXPECT_NE(find_identity(r.rules.rules,
                          xy + "  %0 = MatMul(%x, %y)\n  %1 = Transpose(%0) {perm=[1, 0]}\n  return %1\n}\n",
                          xy + "  %0 = Transpose(%y) {perm=[1, 0]}\n  %1 = Transpose(%x) {perm=[1, 0]}\n"
                               "  %2 = MatMul(%0, %1)\n  return %2\n}\n"),
            "");
  // Transpose(Transpose(x)) = x: a 0-operator side.
  EXPECT_NE(find_identity(r.rules.rules,
                          xy + "  %0 = Transpose(%x) {perm=[1, 0]}\n  %1 = Transpose(%0) {perm=[1, 0]}\n"
                               "  return %1\n}\n",
                          xy + "  return %x\n}\n"),
            "");
  // Add associativity (elementwise family) is written; commutativity is not: the
  // matchers try both operand orders of a commutative operator (generate/collapse.h).
  const std::string pqr = header("%p: f32[2,3], %q: f32[2,3], %r: f32[2,3]");
  EXPECT_EQ(find_identity(r.rules.rules, pqr + "  %0 = Add(%p, %q)\n  return %0\n}\n",
                          pqr + "  %0 = Add(%q, %p)\n  return %0\n}\n"),
            "");
  const std::string pbr = header("%p: f32[3,4], %q: f32[], %r: f32[3,4]");  // a family this op set reaches
  EXPECT_NE(find_identity(r.rules.rules, pbr + "  %0 = Add(%p, %q)\n  %1 = Add(%0, %r)\n  return %1\n}\n",
                          pbr + "  %0 = Add(%p, %r)\n  %1 = Add(%q, %0)\n  return %1\n}\n"),
            "");
}

TEST(GeneratorRules, EveryRuleLoadsAndIsConsistent) {
  const GenerateResult& r = run(3, {"MatMul", "Add", "Transpose"});
  GenerateOptions o;
  o.max_ops = 3;
  o.ops = {"MatMul", "Add", "Transpose"};
  std::string text = gen::print_generated(r, o);
  RuleSet back = parse_rules(text, "generated");
  EXPECT_EQ(back.rules.size(), r.rules.rules.size());
  ASSERT_EQ(back.rules.size(), r.rules.rules.size());
  for (size_t i = 1; i < back.rules.size(); ++i) EXPECT_EQ(print_rule(back.rules[i]), print_rule(r.rules.rules[i]));
  EXPECT_EQ(print_rules(back), text);  // the file reads back to itself
  for (const Rule& rule : back.rules) EXPECT_TRUE(rule.usable()) << rule.name;
  // Each stage keeps at most what the previous one had.
  const char* chain[] = {"enumerated", "fingerprinted", "canonical_names", "distinct"};
  for (size_t i = 1; i < std::size(chain); ++i) EXPECT_LE(r.count(chain[i]), r.count(chain[i - 1])) << chain[i];
  const char* pairs[] = {"candidate_pairs", "rechecked",     "after_trivial",        "after_common_subgraph",
                         "after_ac_normal", "after_congruence", "after_binding", "after_duplicate_text",
                         "loaded",          "after_implied"};
  for (size_t i = 1; i < std::size(pairs); ++i) EXPECT_LE(r.count(pairs[i]), r.count(pairs[i - 1])) << pairs[i];
  EXPECT_LT(r.count("after_implied"), r.count("loaded"));  // some 3-operator rules follow from smaller ones
  EXPECT_EQ(r.count("proved") + r.count("tested") + r.count("refuted") + r.count("unknown"), r.count("after_implied"));
  EXPECT_EQ(r.all.size(), r.count("after_implied"));
  EXPECT_EQ(r.count("written"), r.rules.rules.size());
  EXPECT_EQ(r.count("refuted"), 0u);
  EXPECT_GT(r.count("written"), 5u);
}

TEST(GeneratorRules, DeterministicAcrossRunsAndJobs) {
  GenerateOptions o;
  o.max_ops = 2;
  o.ops = {"MatMul", "Add", "Concat", "Split", "Transpose", "Mul"};
  o.jobs = 1;
  std::string one = gen::print_generated(gen::generate_rules(o), o);
  o.jobs = 2;
  std::string two = gen::print_generated(gen::generate_rules(o), o);
  std::string again = gen::print_generated(gen::generate_rules(o), o);
  EXPECT_EQ(one, two);
  EXPECT_EQ(two, again);
  EXPECT_NE(one.find("rule gen"), std::string::npos);
}

TEST(GeneratorRules, FalseIdentitiesAreAbsent) {
  const GenerateResult& r = run(3, {"MatMul", "Add", "Transpose"});
  // MatMul does not commute, (xy)^T != x^T y^T, and x (y + z) != x y + z.
  const std::string yz = header("%y: f32[3,3], %z: f32[3,3]");
  for (const Rule& rule : r.all) {
    EXPECT_FALSE(rewrites(rule, parse_graph(yz + "  %0 = MatMul(%y, %z)\n  return %0\n}\n"),
                          parse_graph(yz + "  %0 = MatMul(%z, %y)\n  return %0\n}\n")))
        << rule.name;
  }
  const std::string xyz = header("%x: f32[2,3], %y: f32[3,4], %z: f32[3,4]");
  EXPECT_EQ(find_identity(r.all, xyz + "  %0 = Add(%y, %z)\n  %1 = MatMul(%x, %0)\n  return %1\n}\n",
                          xyz + "  %0 = MatMul(%x, %y)\n  %1 = Add(%0, %0)\n  return %1\n}\n"),
            "");
  // Nothing the generator wrote is refuted by the field verifier.
  for (const Rule& rule : r.rules.rules) EXPECT_TRUE(rule.usable()) << rule.name;
}

TEST(GeneratorRules, ConcatSplitMergesAreFound) {
  const GenerateResult& r = run(3, {"MatMul", "Concat", "Split"});
  const std::string xyz = header("%x: f32[2,3], %y: f32[3,4], %z: f32[3,4]");
  EXPECT_NE(find_identity(r.rules.rules, xyz + "  %0 = MatMul(%x, %y)\n  %1 = MatMul(%x, %z)\n  return %0, %1\n}\n",
                          xyz + "  %c = Concat(%y, %z) {axis=1}\n  %m = MatMul(%x, %c)\n"
                                "  %s = const i64[2] {4, 4}\n  %0, %1 = Split(%m, %s) {axis=1}\n  return %0, %1\n}\n"),
            "");
}

TEST(GeneratorRules, ConvIdentitiesAreFound) {
  const GenerateResult& r = run(3, {"Conv", "Add"});
  const std::string ijk = header("%i: f32[2,3,4,5], %j: f32[2,3,4,5], %k: f32[6,3,3,3], %l: f32[6,3,3,3]");
  auto conv_of = [](const std::string& x, const std::string& w) {
    return "Conv(" + x + ", " + w + ") {kernel_shape=[3, 3], pads=[1, 1, 1, 1]}";
  };
  // Linear in the input.
  EXPECT_NE(find_identity(r.rules.rules, ijk + "  %0 = Add(%i, %j)\n  %1 = " + conv_of("%0", "%k") + "\n  return %1\n}\n",
                          ijk + "  %0 = " + conv_of("%i", "%k") + "\n  %1 = " + conv_of("%j", "%k") +
                              "\n  %2 = Add(%0, %1)\n  return %2\n}\n"),
            "");
  // Linear in the weights.
  EXPECT_NE(find_identity(r.rules.rules, ijk + "  %0 = Add(%k, %l)\n  %1 = " + conv_of("%i", "%0") + "\n  return %1\n}\n",
                          ijk + "  %0 = " + conv_of("%i", "%k") + "\n  %1 = " + conv_of("%i", "%l") +
                              "\n  %2 = Add(%0, %1)\n  return %2\n}\n"),
            "");
}

TEST(GeneratorRules, ConvMergeThroughConcatSplitIsFound) {
  const GenerateResult& r = run(3, {"Conv", "Concat", "Split"});
  const std::string ik = header("%i: f32[2,3,4,5], %k: f32[6,3,3,3], %l: f32[6,3,3,3]");
  const std::string attrs = " {kernel_shape=[3, 3], pads=[1, 1, 1, 1]}";
  EXPECT_NE(find_identity(r.rules.rules,
                          ik + "  %0 = Conv(%i, %k)" + attrs + "\n  %1 = Conv(%i, %l)" + attrs + "\n  return %0, %1\n}\n",
                          ik + "  %c = Concat(%k, %l) {axis=0}\n  %m = Conv(%i, %c)" + attrs +
                              "\n  %s = const i64[2] {6, 6}\n  %0, %1 = Split(%m, %s) {axis=1}\n  return %0, %1\n}\n"),
            "");
}

// Relu has no field semantics: its identities are candidates that only a proof
// accepts, so this checks the candidates (before verification).
TEST(GeneratorRules, ReluCommutesWithConcatAndSplitCandidates) {
  const GenerateResult& r = run(3, {"Relu", "Concat", "Split"}, 2, /*verify=*/false);
  const std::string yz = header("%y: f32[3,4], %z: f32[3,4]");
  EXPECT_NE(find_identity(r.all, yz + "  %0 = Concat(%y, %z) {axis=0}\n  %1 = Relu(%0)\n  return %1\n}\n",
                          yz + "  %0 = Relu(%y)\n  %1 = Relu(%z)\n  %2 = Concat(%0, %1) {axis=0}\n  return %2\n}\n"),
            "");
  EXPECT_NE(find_identity(r.all,
                          yz + "  %0 = Relu(%y)\n  %1 = Relu(%z)\n  return %0, %1\n}\n",
                          yz + "  %0 = Concat(%y, %z) {axis=0}\n  %1 = Relu(%0)\n  %s = const i64[2] {3, 3}\n"
                               "  %2, %3 = Split(%1, %s) {axis=0}\n  return %2, %3\n}\n"),
            "");
  for (const Rule& rule : r.all) EXPECT_EQ(rule.verdict.kind, Verdict::Kind::None);
}

// Implied-by-smaller pruning: the structural hash ignores names and build order, and
// a rule is implied only when accepted rules join its sides in at most two rewrites.
TEST(GeneratorImplied, StructuralHashIgnoresNamesAndOrder) {
  const std::string xy = header("%x: f32[2,3], %y: f32[2,3]");
  Graph a = parse_graph(xy + "  %a = Mul(%x, %y)\n  %b = Add(%x, %y)\n  %c = Sub(%a, %b)\n  return %c\n}\n");
  Graph b = parse_graph(xy + "  %p = Add(%x, %y)\n  %q = Mul(%x, %y)\n  %r = Sub(%q, %p)\n  return %r\n}\n");
  Graph c = parse_graph(xy + "  %p = Add(%x, %y)\n  %q = Mul(%x, %y)\n  %r = Sub(%p, %q)\n  return %r\n}\n");
  Graph d = parse_graph(xy + "  %p = Add(%y, %x)\n  %q = Mul(%x, %y)\n  %r = Sub(%q, %p)\n  return %r\n}\n");
  EXPECT_EQ(structural_hash(a), structural_hash(b));
  EXPECT_NE(structural_hash(a), structural_hash(c));  // operand order matters
  EXPECT_NE(structural_hash(a), structural_hash(d));
}

TEST(GeneratorImplied, RulesJoinedByAcceptedRulesAreImplied) {
  auto rule = [&](const std::string& name, const std::string& src, const std::string& tgt) {
    const bool z = src.find("%z") != std::string::npos;
    std::string vars = z ? "  vars %x, %y, %z\n  verify-shapes %x: f32[2,3], %y: f32[2,3], %z: f32[2,3]\n"
                         : "  vars %x, %y\n  verify-shapes %x: f32[2,3], %y: f32[2,3]\n";
    return parse_rules("rule " + name + " {\n" + vars + "  source {\n" + src + "  }\n  target {\n" + tgt + "  }\n}\n")
        .rules.at(0);
  };
  Rule comm = rule("comm", "    %0 = Add(%x, %y)\n    return %0\n", "    %0 = Add(%y, %x)\n    return %0\n");
  // (x + y) + z = z + (y + x): both sides reach z + (x + y) in one commutation.
  Rule two_steps = rule("two_steps", "    %0 = Add(%x, %y)\n    %1 = Add(%0, %z)\n    return %1\n",
                        "    %0 = Add(%y, %x)\n    %1 = Add(%z, %0)\n    return %1\n");
  // (x + y) + z = x + (y + z) needs associativity, which is not accepted.
  Rule assoc = rule("assoc", "    %0 = Add(%x, %y)\n    %1 = Add(%0, %z)\n    return %1\n",
                    "    %0 = Add(%y, %z)\n    %1 = Add(%x, %0)\n    return %1\n");
  gen::ImpliedChecker none;
  EXPECT_FALSE(none.implied(two_steps));
  gen::ImpliedChecker accepted;
  accepted.add(comm);
  EXPECT_GE(accepted.size(), 1u);
  EXPECT_TRUE(accepted.implied(two_steps));
  EXPECT_FALSE(accepted.implied(assoc));
  // Once associativity is accepted, the rule is implied by itself in one step.
  accepted.add(assoc);
  EXPECT_TRUE(accepted.implied(assoc));
}

// The shipped rule set (`make rules`) loads, and holds only usable generated rules.
TEST(GeneratorShipped, GeneratedRulesLoad) {
  RuleSet set = load_rules(std::string(ISOMER_SOURCE_DIR) + "/rules/generated.rules");
  EXPECT_GT(set.rules.size(), 100u);
  for (const Rule& rule : set.rules) {
    EXPECT_TRUE(rule.usable()) << rule.name;
    EXPECT_EQ(rule.name.rfind("gen", 0), 0u) << rule.name;
  }
  const std::string xyz = header("%x: f32[2,3], %y: f32[3,4], %z: f32[3,4]");
  EXPECT_NE(find_identity(set.rules, xyz + "  %0 = Add(%y, %z)\n  %1 = MatMul(%x, %0)\n  return %1\n}\n",
                          xyz + "  %0 = MatMul(%x, %y)\n  %1 = MatMul(%x, %z)\n  %2 = Add(%0, %1)\n  return %2\n}\n"),
            "");
  EXPECT_NE(find_identity(set.rules, xyz + "  %0 = MatMul(%x, %y)\n  %1 = MatMul(%x, %z)\n  return %0, %1\n}\n",
                          xyz + "  %c = Concat(%y, %z) {axis=1}\n  %m = MatMul(%x, %c)\n"
                                "  %s = const i64[2] {4, 4}\n  %0, %1 = Split(%m, %s) {axis=1}\n  return %0, %1\n}\n"),
            "");
  // Proved by Z3 (Relu has no field semantics).
  const std::string yz = header("%y: f32[3,4], %z: f32[3,4]");
  EXPECT_NE(find_identity(set.rules, yz + "  %0 = Concat(%y, %z) {axis=0}\n  %1 = Relu(%0)\n  return %1\n}\n",
                          yz + "  %0 = Relu(%y)\n  %1 = Relu(%z)\n  %2 = Concat(%0, %1) {axis=0}\n  return %2\n}\n"),
            "");
}

}  // namespace
}  // namespace isomer

namespace isomer {
namespace {

// Manual benchmark (not run by default): ISOMER_GEN_MAX_OPS=3 isomer_tests
// --gtest_also_run_disabled_tests --gtest_filter='GeneratorBench.*' prints every stage.
TEST(GeneratorBench, DISABLED_FullPalette) {
  GenerateOptions o;
  const char* n = std::getenv("ISOMER_GEN_MAX_OPS");
  o.max_ops = n ? std::atoi(n) : 2;
  const char* timeout = std::getenv("ISOMER_GEN_TIMEOUT");
  if (timeout) o.timeout_s = std::atof(timeout);
  o.verify = std::getenv("ISOMER_GEN_NO_VERIFY") == nullptr;
  GenerateResult r = gen::generate_rules(o);
  for (const auto& [stage, c] : r.counts) std::printf("  %-24s %10llu\n", stage.c_str(), static_cast<unsigned long long>(c));
  for (const auto& [stage, s] : r.seconds) std::printf("  %-24s %9.2fs\n", stage.c_str(), s);
  for (const Rule& rule : r.all)
    if (rule.verdict.kind == Verdict::Kind::Refuted) std::printf("%s\n", print_rule(rule).c_str());
}

}  // namespace
}  // namespace isomer
