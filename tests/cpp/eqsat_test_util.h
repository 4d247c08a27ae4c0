#pragma once
// What the e-graph search's tests share: constant tensors and a cost model with fixed
// rates (deterministic, no timing).
#include <vector>

#include "cost/cost.h"
#include "ir/tensor.h"

namespace isomer::eqsat_test {

// A float32 tensor of `dims` with every element `v`.
inline Tensor weights(std::vector<int64_t> dims, double v) {
  std::vector<double> data(static_cast<size_t>(num_elements(dims)), v);
  return Tensor::from_f64(DType::Float32, std::move(dims), data);
}

// The analytic model at 50 GFLOP/s and 10 GB/s, one thread.
inline cost::AnalyticCostModel fixed_model() {
  cost::PeakRates r;
  r.gflops = 50;
  r.gbytes_per_s = 10;
  cost::AnalyticCostModel m(r);
  m.runtime_options().threads = 1;
  return m;
}

}  // namespace isomer::eqsat_test
