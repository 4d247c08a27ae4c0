#include "mugraph/kernel_cache.h"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "mugraph/cost.h"

namespace isomer::mugraph {

namespace fs = std::filesystem;

namespace {

const char* kFlags = "-std=c++20 -O3 -march=native -fopenmp -fno-math-errno -fno-trapping-math -fPIC -shared -w";

std::string run_capture(const std::string& cmd, int* status) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) {
    *status = -1;
    return out;
  }
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) out.append(buf.data(), n);
  int st = pclose(f);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

std::string shell_quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

uint64_t fnv(const std::string& s, uint64_t h) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string hex_key(const std::string& s) {
  uint64_t a = fnv(s, 1469598103934665603ull), b = fnv(s, 0x84222325cbf29ce4ull ^ 0x5bd1e995);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(a), static_cast<unsigned long long>(b));
  return buf;
}

struct CompilerInfo {
  std::string cmd, version;
};

const CompilerInfo& compiler_info() {
  static CompilerInfo info;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> tries;
    for (const char* env : {"ISOMER_CXX", "CXX"})
      if (const char* v = std::getenv(env); v && *v) tries.push_back(v);
    for (const char* c : {"c++", "g++", "clang++"}) tries.push_back(c);
    for (const std::string& c : tries) {
      int st = 0;
      std::string v = run_capture(shell_quote(c) + " --version 2>/dev/null", &st);
      if (st == 0 && !v.empty()) {
        info.cmd = c;
        info.version = v.substr(0, v.find('\n'));
        return;
      }
    }
  });
  return info;
}

std::mutex g_mutex;
std::map<std::string, std::shared_ptr<const CompiledKernel>> g_loaded;

// Loads `so` and checks it is the library of `key`; nullptr (and the reason) if not.
std::shared_ptr<CompiledKernel> try_open(const std::string& so, const std::string& key, std::string* why) {
  void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    *why = std::string("dlopen: ") + (e ? e : "failed");
    return nullptr;
  }
  auto key_fn = reinterpret_cast<const char* (*)()>(dlsym(h, "isomer_mugraph_key"));
  auto run = reinterpret_cast<KernelFn>(dlsym(h, "isomer_mugraph_run"));
  if (!key_fn || !run || key != key_fn()) {
    *why = "the cached library is not the one for this kernel";
    dlclose(h);
    return nullptr;
  }
  auto k = std::make_shared<CompiledKernel>();
  k->run = run;
  k->key = key;
  k->path = so;
  return k;
}

}  // namespace

std::string kernel_cache_dir() {
  const char* x = std::getenv("XDG_CACHE_HOME");
  fs::path base = x && *x ? fs::path(x) : fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/tmp") / ".cache";
  return (base / "isomer" / "kernels").string();
}

std::string kernel_compiler() { return compiler_info().cmd; }

std::shared_ptr<const CompiledKernel> load_kernel(const std::string& source, std::string* why) {
  const CompilerInfo& cc = compiler_info();
  const std::string key =
      hex_key(source + "\n" + kFlags + "\n" + cc.cmd + "\n" + cc.version + "\n" + machine().isa());
  std::lock_guard<std::mutex> lock(g_mutex);
  if (auto it = g_loaded.find(key); it != g_loaded.end()) return it->second;
  const fs::path dir = kernel_cache_dir();
  const fs::path so = dir / (key + ".so");
  std::string reason;
  if (fs::exists(so)) {
    if (auto k = try_open(so.string(), key, &reason)) {
      g_loaded[key] = k;
      return k;
    }
    std::error_code ec;
    fs::remove(so, ec);  // stale or corrupt: rebuilt below
  }
  if (cc.cmd.empty()) {
    *why = "no C++ compiler found (set ISOMER_CXX or CXX)";
    return nullptr;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    *why = "cannot create " + dir.string() + ": " + ec.message();
    return nullptr;
  }
  const std::string tag = std::to_string(getpid()) + "." + std::to_string(reinterpret_cast<uintptr_t>(&reason));
  const fs::path cpp = dir / (key + ".cpp");
  const fs::path tmp_cpp = dir / (key + "." + tag + ".cpp"), tmp_so = dir / (key + "." + tag + ".so");
  {
    std::ofstream out(tmp_cpp);
    out << source << "\nextern \"C\" const char* isomer_mugraph_key() { return \"" << key << "\"; }\n";
    if (!out) {
      *why = "cannot write " + tmp_cpp.string();
      return nullptr;
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  int st = 0;
  std::string log = run_capture(shell_quote(cc.cmd) + " " + kFlags + " " + shell_quote(tmp_cpp.string()) + " -o " +
                                    shell_quote(tmp_so.string()) + " 2>&1",
                                &st);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (st != 0) {
    *why = "compiling the kernel failed (" + cc.cmd + "): " + log.substr(0, 2000);
    fs::remove(tmp_so, ec);
    fs::rename(tmp_cpp, dir / (key + ".failed.cpp"), ec);
    return nullptr;
  }
  fs::rename(tmp_cpp, cpp, ec);
  fs::rename(tmp_so, so, ec);  // atomic: readers see the old file or the whole new one
  auto k = try_open(so.string(), key, &reason);
  if (!k) {
    *why = "the freshly built kernel does not load: " + reason;
    return nullptr;
  }
  k->built = true;
  k->compile_seconds = secs;
  g_loaded[key] = k;
  return k;
}

}  // namespace isomer::mugraph
