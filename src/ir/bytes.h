#pragma once
// The bytes of a tensor. Either a std::string taken over whole (what the importer,
// the evaluators and the Python bindings build), or a block allocated uninitialised
// for a producer that writes every byte of it (the runtime's outputs: a
// std::string can only be sized by filling it, and zero-filling a 25 MB output
// cost about 1 ms a run, 7% of a small fused region's). Copies copy the bytes,
// as a std::string's do; moves never do.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace isomer {

class Bytes {
 public:
  Bytes() = default;
  Bytes(std::string s) : str_(std::move(s)) {}  // NOLINT: implicit, a string is bytes
  // `n` bytes whose values are unspecified until the caller writes them; 64-byte
  // aligned (a cache line, an AVX-512 vector).
  static Bytes uninitialized(size_t n);

  Bytes(const Bytes& o);
  Bytes& operator=(const Bytes& o);
  Bytes(Bytes&&) noexcept = default;
  Bytes& operator=(Bytes&&) noexcept = default;

  // Never null, also when empty (memcpy from data() with size 0 is defined).
  const char* data() const { return raw_ ? raw_.get() : str_.data(); }
  char* data() { return raw_ ? raw_.get() : str_.data(); }
  size_t size() const { return raw_ ? raw_size_ : str_.size(); }
  bool empty() const { return size() == 0; }
  std::string_view view() const { return {data(), size()}; }
  operator std::string_view() const { return view(); }  // NOLINT: implicit, for comparisons and appends
  std::string str() const { return std::string(view()); }

  friend bool operator==(const Bytes& a, const Bytes& b) { return a.view() == b.view(); }

 private:
  struct AlignedFree {
    void operator()(char* p) const;
  };
  std::string str_;                          // the bytes, unless raw_ holds them
  std::unique_ptr<char[], AlignedFree> raw_;  // uninitialized()'s block
  size_t raw_size_ = 0;
};

}  // namespace isomer
