// The decode attention kernels (kernels/attention_decode.h) on every instruction
// set the CPU has, against a double-precision softmax: odd head sizes (no whole
// vector), key counts that fill no block, per-row key ranges, float and bool masks,
// a softcap, rows with every key masked, large logits, and a head's keys split into
// ranges whose partial results merge.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/attention_decode.h"
#include "kernels/vector_isa.h"

namespace isomer::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Case {
  int64_t rows = 3, D = 40, Dv = 24, T = 777;
  float logit = 1;  // the queries' scale: logits of about D x logit
  bool bool_mask = false;
  float softcap = 0;
};

struct Data {
  std::vector<float> q, k, v, fmask;
  std::vector<char> bmask;
  std::vector<int64_t> lo, hi;
  std::vector<const char*> mrows;
};

Data make(const Case& c, std::mt19937& rng) {
  std::normal_distribution<float> n;
  Data d;
  d.q.resize(static_cast<size_t>(c.rows * c.D));
  for (float& x : d.q) x = n(rng) * c.logit;
  // Keys and values at row strides wider than D and Dv (rows of a [T, heads x d] projection).
  d.k.resize(static_cast<size_t>(c.T * (c.D + 3)));
  d.v.resize(static_cast<size_t>(c.T * (c.Dv + 5)));
  for (float& x : d.k) x = n(rng);
  for (float& x : d.v) x = n(rng);
  d.fmask.resize(static_cast<size_t>(c.rows * c.T));
  d.bmask.resize(static_cast<size_t>(c.rows * c.T));
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t j = 0; j < c.T; ++j) {
      const bool keep = r == 1 || (j * 7 + r) % 5 != 0;
      d.bmask[static_cast<size_t>(r * c.T + j)] = keep;
      d.fmask[static_cast<size_t>(r * c.T + j)] = keep ? 0.25f * static_cast<float>(j % 3) : kNegInf;
    }
  for (int64_t r = 0; r < c.rows; ++r) {
    d.lo.push_back(r == 2 ? 100 : 0);
    d.hi.push_back(r == 1 ? c.T - 13 : c.T);
    d.mrows.push_back(c.bool_mask ? &d.bmask[static_cast<size_t>(r * c.T)]
                                  : reinterpret_cast<const char*>(&d.fmask[static_cast<size_t>(r * c.T)]));
  }
  return d;
}

DecodeHead head(const Case& c, const Data& d) {
  DecodeHead h;
  h.rows = c.rows, h.D = c.D, h.Dv = c.Dv;
  h.q = d.q.data(), h.q_row = c.D;
  h.k = d.k.data(), h.k_row = c.D + 3;
  h.v = d.v.data(), h.v_row = c.Dv + 5;
  h.lo = d.lo.data(), h.hi = d.hi.data();
  h.mask = d.mrows.data();
  h.bool_mask = c.bool_mask;
  h.softcap = c.softcap;
  return h;
}

// Row r of the result in double precision; NaN where no key is left.
std::vector<double> reference(const Case& c, const Data& d, int64_t r) {
  std::vector<double> s(static_cast<size_t>(c.T), -INFINITY);
  double top = -INFINITY;
  for (int64_t j = d.lo[static_cast<size_t>(r)]; j < d.hi[static_cast<size_t>(r)]; ++j) {
    double x = 0;
    for (int64_t e = 0; e < c.D; ++e) x += double{d.q[static_cast<size_t>(r * c.D + e)]} * d.k[static_cast<size_t>(j * (c.D + 3) + e)];
    if (c.softcap > 0) x = c.softcap * std::tanh(x / c.softcap);
    const size_t at = static_cast<size_t>(r * c.T + j);
    x = c.bool_mask ? (d.bmask[at] ? x : -INFINITY) : x + d.fmask[at];
    s[static_cast<size_t>(j)] = x;
    top = std::max(top, x);
  }
  std::vector<double> y(static_cast<size_t>(c.Dv), 0.0);
  if (top == -INFINITY) return std::vector<double>(static_cast<size_t>(c.Dv), NAN);
  double sum = 0;
  for (int64_t j = 0; j < c.T; ++j) {
    const double w = std::exp(s[static_cast<size_t>(j)] - top);
    sum += w;
    for (int64_t e = 0; e < c.Dv; ++e) y[static_cast<size_t>(e)] += w * d.v[static_cast<size_t>(j * (c.Dv + 5) + e)];
  }
  for (double& x : y) x /= sum;
  return y;
}

// The rows through `ranges` ranges of keys, merged.
std::vector<float> run(VectorIsa isa, const Case& c, const Data& d, int64_t ranges) {
  const DecodeHead h = head(c, d);
  const int64_t part = c.rows * (2 + c.Dv);
  std::vector<float> parts(static_cast<size_t>(ranges * part)), scratch(static_cast<size_t>(decode_scratch_size(c.rows)));
  for (int64_t k = 0; k < ranges; ++k) {
    float* m = parts.data() + k * part;
    std::fill(m, m + c.rows, kNegInf);
    std::fill(m + c.rows, m + part, 0.0f);
    decode_attention_keys(isa, h, c.T * k / ranges, c.T * (k + 1) / ranges, m, m + c.rows, m + 2 * c.rows,
                          scratch.data());
  }
  std::vector<float> y(static_cast<size_t>(c.rows * c.Dv)), m(static_cast<size_t>(ranges)), l(static_cast<size_t>(ranges));
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t k = 0; k < ranges; ++k) {
      m[static_cast<size_t>(k)] = parts[static_cast<size_t>(k * part + r)];
      l[static_cast<size_t>(k)] = parts[static_cast<size_t>(k * part + c.rows + r)];
    }
    decode_attention_merge(m.data(), l.data(), parts.data() + 2 * c.rows + r * c.Dv, part, ranges, c.Dv,
                           std::numeric_limits<float>::quiet_NaN(), y.data() + r * c.Dv);
  }
  return y;
}

std::vector<VectorIsa> isas() {
  std::vector<VectorIsa> out;
  for (VectorIsa isa : {VectorIsa::Baseline, VectorIsa::Avx2, VectorIsa::Avx512})
    if (vector_isa_available(isa)) out.push_back(isa);
  return out;
}

void expect_rows(const Case& c, const Data& d, int64_t ranges) {
  for (VectorIsa isa : isas()) {
    const std::vector<float> got = run(isa, c, d, ranges);
    for (int64_t r = 0; r < c.rows; ++r) {
      const std::vector<double> want = reference(c, d, r);
      for (int64_t e = 0; e < c.Dv; ++e) {
        const double w = want[static_cast<size_t>(e)], g = got[static_cast<size_t>(r * c.Dv + e)];
        if (std::isnan(w)) {
          EXPECT_TRUE(std::isnan(g)) << vector_isa_name(isa) << " row " << r;
        } else {
          EXPECT_NEAR(g, w, 2e-5 + 1e-4 * std::abs(w)) << vector_isa_name(isa) << " row " << r << " col " << e
                                                        << " ranges " << ranges;
        }
      }
    }
  }
}

TEST(DecodeAttention, MatchesSoftmaxOverOddShapesAndMasks) {
  std::mt19937 rng(7);
  for (const bool bool_mask : {false, true})
    for (const int64_t ranges : {1, 2, 5}) {
      Case c;
      c.bool_mask = bool_mask;
      const Data d = make(c, rng);
      expect_rows(c, d, ranges);
    }
}

TEST(DecodeAttention, WholeVectorsSoftcapAndOneRow) {
  std::mt19937 rng(8);
  for (const int64_t rows : {1, 2, 4, 5}) {
    Case c;
    c.rows = rows, c.D = 64, c.Dv = 64, c.T = 515, c.softcap = 5;
    const Data d = make(c, rng);
    expect_rows(c, d, 3);
  }
}

TEST(DecodeAttention, LargeLogitsStayExact) {
  // Logits in the thousands: every block's max shifts its exponents, and the merge
  // rescales the ranges' sums by their maxima.
  std::mt19937 rng(9);
  Case c;
  c.logit = 300;
  const Data d = make(c, rng);
  expect_rows(c, d, 4);
}

TEST(DecodeAttention, RowsWithNoKeyAreEmpty) {
  std::mt19937 rng(10);
  Case c;
  Data d = make(c, rng);
  // Row 0: every key masked; row 2: an empty key range.
  for (int64_t j = 0; j < c.T; ++j) d.fmask[static_cast<size_t>(j)] = kNegInf;
  d.lo[2] = d.hi[2] = 50;
  expect_rows(c, d, 2);
  const std::vector<float> y = run(isas().back(), c, d, 2);
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[static_cast<size_t>(2 * c.Dv)]));
  EXPECT_FALSE(std::isnan(y[static_cast<size_t>(c.Dv)]));
}

TEST(DecodeAttention, AnInfiniteLogitMakesTheRowNan) {
  // softmax of a row holding +inf is NaN (inf - inf), as the decomposed graph computes it.
  std::mt19937 rng(11);
  Case c;
  c.rows = 1;
  Data d = make(c, rng);
  d.fmask[300] = std::numeric_limits<float>::infinity();
  for (const int64_t ranges : {1, 3}) {
    const std::vector<float> y = run(isas().back(), c, d, ranges);
    for (float x : y) EXPECT_TRUE(std::isnan(x));
  }
}

}  // namespace
}  // namespace isomer::kernels
