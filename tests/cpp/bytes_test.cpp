// Tensor bytes: a std::string taken over, or an uninitialised block a producer
// fills (the runtime's outputs). Both read the same through data(), size() and
// comparisons; copies are deep, moves keep the block.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "ir/bytes.h"
#include "ir/error.h"
#include "ir/tensor.h"

namespace isomer {
namespace {

Bytes filled(size_t n, char first) {
  Bytes b = Bytes::uninitialized(n);
  for (size_t i = 0; i < n; ++i) b.data()[i] = static_cast<char>(first + i % 7);
  return b;
}

TEST(Bytes, UninitializedBlocksAreSizedAlignedAndCompareByContent) {
  for (size_t n : {size_t{1}, size_t{63}, size_t{4096}, size_t{3} << 20}) {
    Bytes b = filled(n, 'a');
    EXPECT_EQ(b.size(), n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u) << n;
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + i % 7);
    EXPECT_TRUE(b == Bytes(s));
    EXPECT_EQ(b.str(), s);
    s[n / 2] = 'z';
    EXPECT_FALSE(b == Bytes(s));
  }
}

TEST(Bytes, EmptyBlocksHaveAPointerToCopyFrom) {
  const Bytes none = Bytes::uninitialized(0), blank;
  EXPECT_TRUE(none.empty());
  EXPECT_NE(none.data(), nullptr);
  EXPECT_NE(blank.data(), nullptr);
  EXPECT_TRUE(none == blank);
  const Tensor t(DType::Float32, {0, 4}, Bytes::uninitialized(0));
  EXPECT_EQ(t.byte_size(), 0u);
  EXPECT_TRUE(t.same_as(Tensor(DType::Float32, {0, 4}, std::string())));
}

TEST(Bytes, CopiesAreDeepAndMovesKeepTheBlock) {
  Bytes a = filled(1000, 'k');
  const char* where = a.data();
  Bytes copy = a;
  EXPECT_NE(copy.data(), a.data());
  EXPECT_TRUE(copy == a);
  copy.data()[0] = 'Q';
  EXPECT_EQ(a.data()[0], 'k');
  Bytes moved = std::move(a);
  EXPECT_EQ(moved.data(), where);
  Bytes assigned;
  assigned = moved;
  EXPECT_TRUE(assigned == moved);
  assigned = Bytes(std::string("short"));  // a string's bytes replace a block
  EXPECT_EQ(assigned.view(), "short");
}

TEST(Bytes, TensorsOfEitherKindReadTheSame) {
  const float v[3] = {1.5f, -2.0f, 3.25f};
  Bytes block = Bytes::uninitialized(sizeof v);
  std::memcpy(block.data(), v, sizeof v);
  const Tensor a(DType::Float32, {3}, std::move(block));
  const Tensor b(DType::Float32, {3}, std::string(reinterpret_cast<const char*>(v), sizeof v));
  EXPECT_TRUE(a.same_as(b));
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(a.to_f64(), b.to_f64());
  EXPECT_THROW(Tensor(DType::Float32, {4}, Bytes::uninitialized(12)), Error);
}

}  // namespace
}  // namespace isomer
