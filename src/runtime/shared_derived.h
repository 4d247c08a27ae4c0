#pragma once
// Data derived from a constant once (its float32 form, its weights packed for the
// GEMM, a oneDNN layout of it), shared by every graph compiled in this process while
// one of them holds it: the check and the guard compile the input and its rewrites,
// whose weights are the same tensors, and each derived copy is as large as the weights.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "ir/tensor.h"

namespace isomer::runtime {

// The entry holds its source, so the address that keys it stays that tensor's while
// the entry lives; the cache itself holds entries weakly.
template <class Payload>
struct Derived {
  Tensor source;
  Payload payload;
};

// `make()`'s result for `source` and `kind` (what was derived, and how), made once
// while a holder of the returned pointer lives.
template <class Payload, class Make>
std::shared_ptr<Payload> shared_derived(const Tensor& source, const std::string& kind, Make make) {
  using Key = std::tuple<const char*, size_t, std::string>;
  static std::mutex mutex;
  static std::map<Key, std::weak_ptr<Derived<Payload>>> cache;
  const Key key{source.bytes().data(), source.byte_size(), kind};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(key); it != cache.end())
      if (auto hit = it->second.lock()) return {hit, &hit->payload};
  }
  auto made = std::make_shared<Derived<Payload>>(Derived<Payload>{source, make()});
  std::lock_guard<std::mutex> lock(mutex);
  std::erase_if(cache, [](const auto& entry) { return entry.second.expired(); });
  if (auto raced = cache[key].lock()) return {raced, &raced->payload};
  cache[key] = made;
  return {made, &made->payload};
}

}  // namespace isomer::runtime
