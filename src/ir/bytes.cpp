#include "ir/bytes.h"

#include <cstring>
#include <new>

namespace isomer {

namespace {
constexpr std::align_val_t kAlignment{64};
}

void Bytes::AlignedFree::operator()(char* p) const { ::operator delete[](p, kAlignment); }

Bytes Bytes::uninitialized(size_t n) {
  Bytes b;
  if (n == 0) return b;  // the empty string's storage: data() stays non-null
  b.raw_.reset(static_cast<char*>(::operator new[](n, kAlignment)));
  b.raw_size_ = n;
  return b;
}

Bytes::Bytes(const Bytes& o) : str_(o.str_) {
  if (o.raw_) {
    *this = uninitialized(o.raw_size_);
    std::memcpy(raw_.get(), o.raw_.get(), raw_size_);
  }
}

Bytes& Bytes::operator=(const Bytes& o) {
  if (this != &o) *this = Bytes(o);
  return *this;
}

}  // namespace isomer
