#pragma once
// Compiled μGraph kernels: C++ from codegen.cpp built by the system compiler into a
// shared library, cached by content under $XDG_CACHE_HOME/isomer/kernels (default
// ~/.cache/isomer/kernels), loaded with dlopen.
//
// The key is a hash of the source, the compiler command and flags, the compiler's
// version line and the instruction set of this CPU. The key is compiled into the
// library (isomer_mugraph_key) and checked after loading, so a stale, truncated or
// foreign file is rebuilt, never trusted. No compiler: load() returns nullptr with
// the reason (the runtime then interprets the μGraph).
#include <memory>
#include <string>

namespace isomer::mugraph {

using KernelFn = void (*)(const void* const* in, void* const* out, int threads);

struct CompiledKernel {
  KernelFn run = nullptr;
  std::string key;
  std::string path;
  bool built = false;        // compiled now (else loaded from the cache)
  double compile_seconds = 0;
};

// Compiles (or loads from the cache) `source`. Thread-safe; a process keeps every
// library it loaded.
std::shared_ptr<const CompiledKernel> load_kernel(const std::string& source, std::string* why);

// The directory kernels are cached in.
std::string kernel_cache_dir();
// The compiler command used ($ISOMER_CXX, else $CXX, else c++/g++/clang++ on PATH);
// empty if none works.
std::string kernel_compiler();

}  // namespace isomer::mugraph
