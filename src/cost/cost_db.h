#pragma once
// The persistent cost cache: SQLite, one row per (machine fingerprint, step
// signature). Several processes may use one file at once: WAL journaling, a busy
// timeout, and one short transaction per write keep it consistent. A commit does
// not wait for the disk (synchronous=NORMAL): it is a cache, and an operating-system
// crash costs at most the last rows, measured again.
#include <optional>
#include <string>

struct sqlite3;

namespace isomer::cost {

class CostDb {
 public:
  // Opens (creating directories and tables as needed). Throws Error on failure.
  explicit CostDb(const std::string& path);
  ~CostDb();
  CostDb(const CostDb&) = delete;
  CostDb& operator=(const CostDb&) = delete;

  // A cached step cost. `noisy`: measured while the machine was overloaded (load
  // average above its core count), so probably too high; see MeasuredCostModel.
  struct Entry {
    double ms = 0;
    bool noisy = false;
    double load = 0;  // 1-minute load average when it was measured
  };
  std::optional<Entry> find(const std::string& fingerprint, const std::string& signature);
  // The cost, clean or noisy.
  std::optional<double> lookup(const std::string& fingerprint, const std::string& signature);
  // One short transaction (atomic: a writer killed at any point leaves either the
  // old row or the new one).
  void store(const std::string& fingerprint, const std::string& signature, double ms, int repeats,
             bool noisy = false, double load = 0);
  // SQLite's `PRAGMA synchronous` of this connection (1: NORMAL, a commit does not
  // wait for the disk).
  int synchronous();
  // Rows measured on an overloaded machine.
  size_t noisy_count();
  // SQLite's own integrity check; `why` gets its complaint.
  bool integrity_ok(std::string* why = nullptr);
  // Free-form numbers per machine (peak rates).
  std::optional<double> lookup_fact(const std::string& fingerprint, const std::string& key);
  void store_fact(const std::string& fingerprint, const std::string& key, double value);
  size_t size();
  // Compiled plans of whole graphs (cost/plan_cache.h), by machine fingerprint and
  // graph key: what the runtime's compilation said, so that a graph priced before
  // is priced again from its steps' rows without compiling it.
  std::optional<std::string> find_plan(const std::string& fingerprint, const std::string& key);
  void store_plan(const std::string& fingerprint, const std::string& key, const std::string& plan);
  size_t plan_count();
  const std::string& path() const { return path_; }

 private:
  void exec(const std::string& sql);
  void check(int rc, int want);
  sqlite3* db_ = nullptr;
  std::string path_;
};

}  // namespace isomer::cost
