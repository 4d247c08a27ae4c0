#include "ir/run_limit.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>

namespace isomer {

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int64_t> g_limit_ns{0};     // per run; 0: no RunLimit
std::atomic<int64_t> g_deadline_ns{0};  // 0: no scope armed
std::atomic<bool> g_exceeded{false};
std::mutex g_mu;
std::string g_what;    // under g_mu
std::string g_origin;  // under g_mu

int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

std::string limit_text() {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f s", static_cast<double>(g_limit_ns.load()) / 1e9);
  return buf;
}

}  // namespace

void exceed_run_limit() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_exceeded.exchange(true))
    g_what = "a run of the model took longer than optimize's limit of " + limit_text() + " per run (" + g_origin + ")";
  throw RunLimitExceeded(g_what);
}

RunLimit::RunLimit(double seconds, std::string origin) {
  g_limit_ns = seconds > 0 ? static_cast<int64_t>(seconds * 1e9) : 0;
  g_deadline_ns = 0;
  g_exceeded = false;
  std::lock_guard<std::mutex> lock(g_mu);
  g_what.clear();
  g_origin = std::move(origin);
}

RunLimit::~RunLimit() {
  g_limit_ns = 0;
  g_deadline_ns = 0;
  g_exceeded = false;
}

std::string RunLimit::exceeded() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_exceeded ? g_what : "";
}

RunScope::RunScope(int runs) {
  const int64_t limit = g_limit_ns.load();
  if (!limit) return;
  if (g_exceeded) exceed_run_limit();
  if (g_deadline_ns.load()) return;  // an enclosing scope's deadline stays
  g_deadline_ns = now_ns() + limit * std::max(runs, 1);
  armed_ = true;
}

RunScope::~RunScope() {
  if (armed_) g_deadline_ns = 0;
}

void check_run_limit() {
  const int64_t deadline = g_deadline_ns.load(std::memory_order_relaxed);
  if (deadline && now_ns() > deadline) exceed_run_limit();
}

std::optional<Clock::duration> run_time_left() {
  const int64_t deadline = g_deadline_ns.load();
  if (!deadline) return std::nullopt;
  return std::chrono::nanoseconds(std::max<int64_t>(deadline - now_ns(), 0));
}

}  // namespace isomer
