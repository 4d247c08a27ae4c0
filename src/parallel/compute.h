#pragma once
// What one device's share of an operator costs (the compute tasks of the simulator).
//
// Given device rates (cluster.json "device"): a roofline, the larger of the block's
// arithmetic over the peak rate and its bytes (inputs and outputs of the block) over
// the memory bandwidth, plus a fixed launch cost; operators that only relabel dims
// (Reshape, Flatten, ...) are views and cost nothing.
// Without rates: the device is this machine, and the block is priced by isomer's
// cost model (cost/cost.h) as the runtime would run it: the operator built at the
// block's shapes (weights as constants of the block's shape, shape operands
// adjusted as run-plan adjusts them), measured or estimated, memoized per shape.
#include <memory>
#include <string>
#include <unordered_map>

#include "cost/cost.h"
#include "parallel/machine.h"
#include "parallel/strategy.h"

namespace isomer::parallel {

class ComputeModel {
 public:
  virtual ~ComputeModel() = default;
  virtual std::string name() const = 0;
  // Forward milliseconds of op i's block under configuration `c` on one device.
  virtual double op_ms(const ParallelGraph& pg, int i, const OpConfig& c) = 0;
  // Milliseconds to copy `bytes` within one device (slices, reorders around collectives).
  virtual double copy_ms(double bytes) = 0;
};

// Arithmetic operations of the whole operator (not one block).
double op_flops(const Node& n);
// Operators that only relabel dims: views, no work.
bool is_view_op(const Node& n);

class RatesModel : public ComputeModel {
 public:
  explicit RatesModel(DeviceRates rates) : rates_(rates) {}
  std::string name() const override { return "rates"; }
  double op_ms(const ParallelGraph& pg, int i, const OpConfig& c) override;
  double copy_ms(double bytes) override;

 private:
  DeviceRates rates_;
};

class CostModelCompute : public ComputeModel {
 public:
  // `model`: "measured" or "analytic" (cost/cost.h), `threads` per device.
  CostModelCompute(const std::string& model, const std::string& db, int threads);
  // A given cost model (tests: an analytic one with fixed rates); copies at `copy_gbytes_per_s`.
  CostModelCompute(std::unique_ptr<cost::CostModel> model, double copy_gbytes_per_s);
  std::string name() const override { return model_->name(); }
  double op_ms(const ParallelGraph& pg, int i, const OpConfig& c) override;
  double copy_ms(double bytes) override;
  cost::CostModel& model() { return *model_; }

 private:
  std::unique_ptr<cost::CostModel> model_;
  std::unordered_map<std::string, double> memo_;
  double copy_gbytes_per_s_ = 10;
};

// The model a cluster asks for: rates if it gives a device, else the cost model.
std::unique_ptr<ComputeModel> make_compute_model(const Cluster& c);

}  // namespace isomer::parallel
