#include "cost/cost_db.h"

#include <sqlite3.h>

#include <ctime>
#include <filesystem>

#include "ir/error.h"

namespace isomer::cost {

namespace {

// A prepared statement that finalizes itself.
struct Stmt {
  sqlite3_stmt* s = nullptr;
  Stmt(sqlite3* db, const char* sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK)
      throw Error(std::string("cost database: ") + sqlite3_errmsg(db));
  }
  ~Stmt() { sqlite3_finalize(s); }
  void text(int i, const std::string& v) { sqlite3_bind_text(s, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT); }
};

}  // namespace

CostDb::CostDb(const std::string& path) : path_(path) {
  std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error("cannot open cost database '" + path + "': " + why);
  }
  // Other processes may hold the lock briefly: wait rather than fail.
  sqlite3_busy_timeout(db_, 30000);
  try {
    exec("PRAGMA journal_mode=WAL");
    // A commit is written to the log without waiting for the disk: under WAL that
    // stays atomic and consistent (a writer killed at any point leaves the old row or
    // the new one), and only an operating-system crash can lose the last rows, which
    // are measured again. Waiting for the disk at every row took 50 syncs of 2-4 ms in
    // a first search of ResNeXt-50 and 95 in SqueezeNet 1.1's (0.15 and 0.19 s, of
    // searches of 0.8 and 0.5 s).
    exec("PRAGMA synchronous=NORMAL");
    exec("CREATE TABLE IF NOT EXISTS step_costs (fingerprint TEXT NOT NULL, signature TEXT NOT NULL, ms REAL NOT NULL,"
         " repeats INTEGER NOT NULL, measured_at INTEGER NOT NULL, PRIMARY KEY (fingerprint, signature))");
    // Databases written before noisy measurements were marked lack the columns.
    bool has_noisy = false;
    {
      Stmt st(db_, "PRAGMA table_info(step_costs)");
      while (sqlite3_step(st.s) == SQLITE_ROW)
        has_noisy = has_noisy || std::string(reinterpret_cast<const char*>(sqlite3_column_text(st.s, 1))) == "noisy";
    }
    if (!has_noisy) {
      try {
        exec("ALTER TABLE step_costs ADD COLUMN noisy INTEGER NOT NULL DEFAULT 0");
        exec("ALTER TABLE step_costs ADD COLUMN load REAL NOT NULL DEFAULT 0");
      } catch (const Error&) {
        // Another process added them first.
      }
    }
    exec("CREATE TABLE IF NOT EXISTS machine_facts (fingerprint TEXT NOT NULL, key TEXT NOT NULL, value REAL NOT NULL,"
         " PRIMARY KEY (fingerprint, key))");
    exec("CREATE TABLE IF NOT EXISTS graph_plans (fingerprint TEXT NOT NULL, key TEXT NOT NULL, plan BLOB NOT NULL,"
         " stored_at INTEGER NOT NULL, PRIMARY KEY (fingerprint, key))");
  } catch (const Error& e) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error("cost database '" + path + "': " + e.what());
  }
}

CostDb::~CostDb() { sqlite3_close(db_); }

// The message is read after the call that failed: as an argument next to the call
// itself, the order of evaluation is unspecified and it could describe the state
// before the call ("not an error").
void CostDb::check(int rc, int want) {
  if (rc == want) return;
  throw Error("cost database '" + path_ + "': " + sqlite3_errstr(rc) + " (" + sqlite3_errmsg(db_) + ")");
}

void CostDb::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string why = err ? err : "unknown error";
    sqlite3_free(err);
    throw Error(why);
  }
}

std::optional<CostDb::Entry> CostDb::find(const std::string& fingerprint, const std::string& signature) {
  Stmt st(db_, "SELECT ms, noisy, load FROM step_costs WHERE fingerprint = ?1 AND signature = ?2");
  st.text(1, fingerprint);
  st.text(2, signature);
  int rc = sqlite3_step(st.s);
  if (rc == SQLITE_ROW) return Entry{sqlite3_column_double(st.s, 0), sqlite3_column_int(st.s, 1) != 0,
                                     sqlite3_column_double(st.s, 2)};
  check(rc, SQLITE_DONE);
  return std::nullopt;
}

std::optional<double> CostDb::lookup(const std::string& fingerprint, const std::string& signature) {
  auto e = find(fingerprint, signature);
  return e ? std::optional<double>(e->ms) : std::nullopt;
}

void CostDb::store(const std::string& fingerprint, const std::string& signature, double ms, int repeats, bool noisy,
                   double load) {
  Stmt st(db_,
          "INSERT OR REPLACE INTO step_costs (fingerprint, signature, ms, repeats, measured_at, noisy, load)"
          " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  st.text(1, fingerprint);
  st.text(2, signature);
  sqlite3_bind_double(st.s, 3, ms);
  sqlite3_bind_int(st.s, 4, repeats);
  sqlite3_bind_int64(st.s, 5, static_cast<sqlite3_int64>(std::time(nullptr)));
  sqlite3_bind_int(st.s, 6, noisy ? 1 : 0);
  sqlite3_bind_double(st.s, 7, load);
  check(sqlite3_step(st.s), SQLITE_DONE);
}

int CostDb::synchronous() {
  Stmt st(db_, "PRAGMA synchronous");
  check(sqlite3_step(st.s), SQLITE_ROW);
  return sqlite3_column_int(st.s, 0);
}

size_t CostDb::noisy_count() {
  Stmt st(db_, "SELECT COUNT(*) FROM step_costs WHERE noisy != 0");
  check(sqlite3_step(st.s), SQLITE_ROW);
  return static_cast<size_t>(sqlite3_column_int64(st.s, 0));
}

bool CostDb::integrity_ok(std::string* why) {
  Stmt st(db_, "PRAGMA integrity_check");
  std::string all;
  while (sqlite3_step(st.s) == SQLITE_ROW) {
    const unsigned char* t = sqlite3_column_text(st.s, 0);
    all += (all.empty() ? "" : "; ") + std::string(t ? reinterpret_cast<const char*>(t) : "");
  }
  if (why) *why = all;
  return all == "ok";
}

std::optional<double> CostDb::lookup_fact(const std::string& fingerprint, const std::string& key) {
  Stmt st(db_, "SELECT value FROM machine_facts WHERE fingerprint = ?1 AND key = ?2");
  st.text(1, fingerprint);
  st.text(2, key);
  int rc = sqlite3_step(st.s);
  if (rc == SQLITE_ROW) return sqlite3_column_double(st.s, 0);
  check(rc, SQLITE_DONE);
  return std::nullopt;
}

void CostDb::store_fact(const std::string& fingerprint, const std::string& key, double value) {
  Stmt st(db_, "INSERT OR REPLACE INTO machine_facts (fingerprint, key, value) VALUES (?1, ?2, ?3)");
  st.text(1, fingerprint);
  st.text(2, key);
  sqlite3_bind_double(st.s, 3, value);
  check(sqlite3_step(st.s), SQLITE_DONE);
}

size_t CostDb::size() {
  Stmt st(db_, "SELECT COUNT(*) FROM step_costs");
  check(sqlite3_step(st.s), SQLITE_ROW);
  return static_cast<size_t>(sqlite3_column_int64(st.s, 0));
}

std::optional<std::string> CostDb::find_plan(const std::string& fingerprint, const std::string& key) {
  Stmt st(db_, "SELECT plan FROM graph_plans WHERE fingerprint = ?1 AND key = ?2");
  st.text(1, fingerprint);
  st.text(2, key);
  int rc = sqlite3_step(st.s);
  if (rc == SQLITE_ROW) {
    const void* p = sqlite3_column_blob(st.s, 0);
    const int n = sqlite3_column_bytes(st.s, 0);
    return std::string(p ? static_cast<const char*>(p) : "", static_cast<size_t>(n));
  }
  check(rc, SQLITE_DONE);
  return std::nullopt;
}

void CostDb::store_plan(const std::string& fingerprint, const std::string& key, const std::string& plan) {
  Stmt st(db_, "INSERT OR REPLACE INTO graph_plans (fingerprint, key, plan, stored_at) VALUES (?1, ?2, ?3, ?4)");
  st.text(1, fingerprint);
  st.text(2, key);
  sqlite3_bind_blob(st.s, 3, plan.data(), static_cast<int>(plan.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(st.s, 4, static_cast<sqlite3_int64>(std::time(nullptr)));
  check(sqlite3_step(st.s), SQLITE_DONE);
}

size_t CostDb::plan_count() {
  Stmt st(db_, "SELECT COUNT(*) FROM graph_plans");
  check(sqlite3_step(st.s), SQLITE_ROW);
  return static_cast<size_t>(sqlite3_column_int64(st.s, 0));
}

}  // namespace isomer::cost
