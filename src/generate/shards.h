#pragma once
// Rule generation across processes (MPI ranks, `isomer rules generate --mpi`): the
// long stages (enumeration by prefix, the exact re-check by bucket, the implied check
// and the verification by rule) are split among the ranks, item i going to rank
// i % count; each rank's results are then given to every rank, which merges them in
// item order, by the items' keys (fingerprints, buckets, rule positions). Every rank
// thus ends with what one process computes, and the written file is the same bytes.
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

namespace isomer::gen {

struct Shards {
  int rank = 0, count = 1;
  // Every rank's string, in rank order (MPI_Allgatherv); required when count > 1.
  std::function<std::vector<std::string>(const std::string&)> all_gather;

  bool mine(size_t item) const { return count <= 1 || static_cast<int>(item % static_cast<size_t>(count)) == rank; }
};

// Byte encoding of the per-item results exchanged between ranks.
class ShardWriter {
 public:
  void item(uint64_t index) { put(index); }
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  template <class T>
  void put_vector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put(static_cast<uint64_t>(v.size()));
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  void put_string(const std::string& s) {
    put(static_cast<uint64_t>(s.size()));
    out_ += s;
  }
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

class ShardReader {
 public:
  explicit ShardReader(const std::string& s) : s_(s) {}
  bool done() const { return at_ >= s_.size(); }
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, s_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  template <class T>
  std::vector<T> get_vector() {
    const uint64_t n = get<uint64_t>();
    std::vector<T> v(n);
    std::memcpy(v.data(), s_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return v;
  }
  std::string get_string() {
    const uint64_t n = get<uint64_t>();
    std::string v = s_.substr(at_, n);
    at_ += n;
    return v;
  }

 private:
  const std::string& s_;
  size_t at_ = 0;
};

// After every rank computed its items: `write(w, i)` encodes item i's result (only for
// this rank's items), `read(r, i)` decodes one (called for the other ranks' items).
template <class Write, class Read>
void exchange(const Shards& sh, size_t n, Write write, Read read) {
  if (sh.count <= 1) return;
  ShardWriter w;
  for (size_t i = 0; i < n; ++i)
    if (sh.mine(i)) {
      w.item(i);
      write(w, i);
    }
  const std::vector<std::string> all = sh.all_gather(w.bytes());
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    if (r == sh.rank) continue;
    ShardReader rd(all[static_cast<size_t>(r)]);
    while (!rd.done()) {
      const uint64_t i = rd.get<uint64_t>();
      read(rd, static_cast<size_t>(i));
    }
  }
}

}  // namespace isomer::gen
