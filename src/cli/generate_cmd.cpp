// `isomer rules generate`: enumerates small graphs, pairs the equivalent ones and
// writes them as verified rules (see generate/generate.h).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "generate/generate.h"
#include "ir/error.h"
#include "parallel/comm.h"

namespace isomer::cli {

namespace {

struct GenerateArgs {
  gen::GenerateOptions options;
  std::string ops, output, report_json;
  bool quiet = false, mpi = false;
};

void write_file(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    require(f.good(), "cannot write '" + path + "'");
    f << text;
    require(f.good(), "cannot write '" + path + "'");
  }
  require(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot write '" + path + "'");
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: KiB
}

int run_generate(GenerateArgs& a) {
  // --mpi: the ranks share the work (generate/shards.h); rank 0 reports and writes.
  std::unique_ptr<parallel::Communicator> comm;
  if (a.mpi) {
    comm = parallel::mpi_communicator();
    a.options.shards.rank = comm->rank();
    a.options.shards.count = comm->size();
    parallel::Communicator* c = comm.get();
    a.options.shards.all_gather = [c](const std::string& mine) { return c->all_gather_strings(mine); };
    if (comm->rank() != 0) a.quiet = true;
  }
  std::stringstream ss(a.ops);
  for (std::string op; std::getline(ss, op, ',');)
    if (!op.empty()) a.options.ops.push_back(op);
  auto t0 = std::chrono::steady_clock::now();
  if (!a.quiet)
    a.options.progress = [t0](const std::string& line) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "[%7.1fs] %s\n", s, line.c_str());
    };
  gen::GenerateResult r = gen::generate_rules(a.options);
  double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (comm && comm->rank() != 0) return 0;

  std::printf("isomer rules generate --max-ops %d -> %s%s\n\n", a.options.max_ops, a.output.c_str(),
              comm ? (" (" + std::to_string(comm->size()) + " MPI ranks)").c_str() : "");
  for (const auto& [stage, n] : r.counts) std::printf("  %-24s %10llu\n", stage.c_str(), static_cast<unsigned long long>(n));
  std::printf("\n");
  for (const auto& [stage, s] : r.seconds) std::printf("  %-24s %9.2fs\n", stage.c_str(), s);
  bool listed = false;
  for (const gen::RuleReport& rep : r.reports) {
    if (rep.verdict.kind == Verdict::Kind::Proved || rep.verdict.kind == Verdict::Kind::Tested) continue;
    if (!listed) std::printf("\nnot written (refuted or unknown):\n");
    listed = true;
    std::printf("  %-48s %s\n", rep.name.c_str(), print_verdict(rep.verdict).c_str());
  }
  double rss = peak_rss_mib();
  std::printf("\n%zu usable rules written (verifier %s), %.2f s, peak RSS %.0f MiB\n", r.rules.rules.size(),
              r.verifier.c_str(), total, rss);

  write_file(a.output, gen::print_generated(r, a.options));
  if (!a.report_json.empty()) {
    nlohmann::ordered_json j;
    j["max_ops"] = a.options.max_ops;
    j["verifier"] = r.verifier;
    nlohmann::ordered_json counts, seconds, rules = nlohmann::ordered_json::array();
    for (const auto& [stage, n] : r.counts) counts[stage] = n;
    for (const auto& [stage, s] : r.seconds) seconds[stage] = s;
    for (const gen::RuleReport& rep : r.reports)
      rules.push_back({{"name", rep.name},
                       {"family", rep.family},
                       {"needs_proof", rep.needs_proof},
                       {"level", rep.level},
                       {"verdict", verdict_kind_name(rep.verdict.kind)},
                       {"seconds", rep.verdict.time_s},
                       {"reason", rep.verdict.reason},
                       {"written", rep.verdict.kind == Verdict::Kind::Proved ||
                                       (rep.verdict.kind == Verdict::Kind::Tested && rep.verdict.error_bits >= 60)}});
    j["counts"] = counts;
    j["seconds"] = seconds;
    j["total_seconds"] = total;
    j["peak_rss_mib"] = rss;
    j["rules"] = rules;
    write_file(a.report_json, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  return 0;
}

}  // namespace

void add_rules_generate_command(CLI::App& rules) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* g = rules.add_subcommand("generate", "enumerate small graphs and write the verified identities as rules");
  g->add_option("--max-ops", a->options.max_ops, "largest graph size in operators (0 to 4)")->capture_default_str();
  g->add_option("--ops", a->ops, "comma-separated operator subset (default: the whole palette)");
  g->add_option("--jobs,-j", a->options.jobs, "threads (default: all cores)");
  g->add_option("--seed", a->options.seed, "seed of the fingerprint inputs")->capture_default_str();
  g->add_option("--timeout", a->options.timeout_s, "verifier wall-clock limit per rule, seconds")->capture_default_str();
  g->add_option("--rlimit", a->options.rlimit, "Z3 resource limit per solver call (deterministic; 0 = none)")
      ->capture_default_str();
  g->add_flag("--prove", a->options.prove, "run Z3 on polynomial rules too (default: field tester, Z3 only for "
             "rules without field semantics)");
  g->add_flag("!--keep-implied", a->options.prune_implied,
              "verify and write rules that smaller accepted rules already imply (default: drop them)");
  g->add_flag("--quiet,-q", a->quiet, "no progress lines on stderr");
  g->add_flag("--mpi", a->mpi, "share the work among MPI ranks (mpirun -np N isomer rules generate --mpi ...); "
                               "rank 0 writes the same file one process writes");
  g->add_option("--report-json", a->report_json, "write stage counts, timings and verdicts here");
  g->add_option("-o,--output", a->output, "rule file to write")->required();
  g->callback([a] { set_action([a] { return run_generate(*a); }); });
}

}  // namespace isomer::cli
