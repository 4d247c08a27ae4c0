// `isomer rules verify FILE`: checks every rule of a rule file and records the
// verdicts (verify/verify.h): Z3 proves or refutes (with a counterexample); where it
// cannot decide, the random finite-field tester tests polynomial rules; rules
// neither can settle are reported as unknown with both reasons, never accepted.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "ir/error.h"
#include "rules/rule.h"
#include "verify/verify.h"

namespace isomer::cli {

namespace {

struct VerifyArgs {
  std::string input, output, report_json;
  uint64_t seed = 0x150e7;
  double timeout_s = 10;
  int jobs = 1;
  bool no_z3 = false;
  bool in_place = false;
};

void write_text(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    require(f.good(), "cannot write '" + path + "'");
    f << text;
    require(f.good(), "cannot write '" + path + "'");
  }
  require(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot write '" + path + "'");
}

int run_verify(const VerifyArgs& a) {
  RuleSet set = load_rules(a.input);
  VerifyOptions opts;
  opts.field.seed = a.seed;
  opts.timeout_s = a.timeout_s;
  opts.use_z3 = !a.no_z3;
  auto t0 = std::chrono::steady_clock::now();
  verify_all(set, opts, a.jobs);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::map<std::string, size_t> counts{{"proved", 0}, {"tested", 0}, {"refuted", 0}, {"unknown", 0}};
  nlohmann::ordered_json rules = nlohmann::ordered_json::array();
  for (const Rule& r : set.rules) {
    const char* kind = verdict_kind_name(r.verdict.kind);
    ++counts[kind];
    std::printf("  %-40s %s\n", r.name.c_str(), print_verdict(r.verdict).c_str());
    rules.push_back({{"name", r.name},
                     {"verdict", kind},
                     {"usable", r.usable()},
                     {"error_bits", r.verdict.error_bits},
                     {"reason", r.verdict.reason},
                     {"seconds", r.verdict.time_s}});
  }
  std::printf("%zu rules: %zu proved, %zu tested, %zu refuted, %zu unknown (%.2f s)\n", set.rules.size(),
              counts["proved"], counts["tested"], counts["refuted"], counts["unknown"], seconds);
  std::string out = a.in_place ? a.input : a.output;
  if (!out.empty()) write_text(out, print_rules(set));
  if (!a.report_json.empty()) {
    nlohmann::ordered_json j;
    j["file"] = a.input;
    j["total"] = set.rules.size();
    for (const auto& [k, n] : counts) j[k] = n;
    j["seconds"] = seconds;
    j["rules"] = rules;
    write_text(a.report_json, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  return counts["refuted"] ? 1 : 0;
}

}  // namespace

void add_rules_command(CLI::App& app) {
  CLI::App* rules = app.add_subcommand("rules", "work with rule files");
  rules->require_subcommand(1);
  auto v = std::make_shared<VerifyArgs>();
  CLI::App* verify = rules->add_subcommand("verify", "verify every rule of a file; exit 1 if any is refuted");
  verify->add_option("file", v->input, "rule file")->required();
  verify->add_option("-o,--output", v->output, "write the rules with their verdicts here");
  verify->add_flag("--in-place", v->in_place, "record the verdicts in FILE itself");
  verify->add_option("--report-json", v->report_json, "write a JSON report here");
  verify->add_option("--seed", v->seed, "seed of the random field inputs");
  verify->add_option("--timeout", v->timeout_s, "Z3 time limit per rule, in seconds (default 10)");
  verify->add_option("--jobs", v->jobs, "rules verified in parallel (default 1)")->check(CLI::PositiveNumber);
  verify->add_flag("--no-z3", v->no_z3, "only the random field tester (no proofs)");
  verify->callback([v] { set_action([v] { return run_verify(*v); }); });
  add_rules_generate_command(*rules);
}

}  // namespace isomer::cli
