#pragma once
// The persistent cost cache: SQLite, one row per (machine fingerprint, step
// signature). Several processes may use one file at once: WAL journaling, a busy
// timeout, and one short transaction per write keep it consistent.
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

  std::optional<double> lookup(const std::string& fingerprint, const std::string& signature);
  void store(const std::string& fingerprint, const std::string& signature, double ms, int repeats);
  // Free-form numbers per machine (peak rates).
  std::optional<double> lookup_fact(const std::string& fingerprint, const std::string& key);
  void store_fact(const std::string& fingerprint, const std::string& key, double value);
  size_t size();
  const std::string& path() const { return path_; }

 private:
  void exec(const std::string& sql);
  sqlite3* db_ = nullptr;
  std::string path_;
};

}  // namespace isomer::cost
