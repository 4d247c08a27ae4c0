// Dropout in training mode on the runtime's own kernel (runtime/lower_random.cpp),
// not on ONNX Runtime: what is dropped, how the kept values are scaled, that every
// run draws anew, and that a seed fixes the draws run for run.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>

#include "ir/error.h"
#include "kernels/random.h"
#include "onnx/onnx_io.h"
#include "runtime/runtime.h"

namespace isomer {
namespace {

void set_type(onnx::ValueInfoProto* v, const std::string& name, int elem, const std::vector<int64_t>& dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  t->mutable_shape();  // a scalar has a shape of no dims
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

struct DropoutForm {
  float ratio = 0.3f;
  bool ratio_is_input = false;     // else a constant initializer
  bool training_is_input = false;  // else a constant true
  bool mask = true;
  std::optional<int64_t> seed;
};

// x [rows, cols] -> Dropout (opset 13) -> Relu -> y, and the mask where asked for.
Graph dropout_model(const DropoutForm& f, int64_t rows, int64_t cols) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("dropout");
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {rows, cols});
  // The ratio and the training flag: scalar graph inputs, or constants.
  auto constant = [&](const char* name, int elem) {
    onnx::TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(elem);
    return t;
  };
  if (f.ratio_is_input) set_type(g->add_input(), "ratio", onnx::TensorProto::FLOAT, {});
  else constant("ratio", onnx::TensorProto::FLOAT)->add_float_data(f.ratio);
  if (f.training_is_input) set_type(g->add_input(), "training", onnx::TensorProto::BOOL, {});
  else constant("training", onnx::TensorProto::BOOL)->add_int32_data(1);
  onnx::NodeProto* d = g->add_node();
  d->set_op_type("Dropout");
  d->set_name("drop");
  for (const char* i : {"x", "ratio", "training"}) d->add_input(i);
  d->add_output("d");
  if (f.mask) d->add_output("mask");
  if (f.seed) {
    onnx::AttributeProto* a = d->add_attribute();
    a->set_name("seed");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(*f.seed);
  }
  onnx::NodeProto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->add_input("d");
  relu->add_output("y");
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {rows, cols});
  if (f.mask) set_type(g->add_output(), "mask", onnx::TensorProto::BOOL, {rows, cols});
  return import_onnx_bytes(m.SerializeAsString(), "");
}

std::unique_ptr<runtime::Executable> compile(const Graph& g, int threads) {
  runtime::RuntimeOptions o;
  o.threads = threads;
  o.delegate_opaque = false;  // fails unless the runtime runs the Dropout itself
  return runtime::compile(g, o);
}

// Positive inputs 1 + i/n, so Relu keeps what Dropout keeps.
Tensor ramp(int64_t rows, int64_t cols) {
  std::vector<double> x;
  for (int64_t i = 0; i < rows * cols; ++i) x.push_back(1.0 + static_cast<double>(i) / static_cast<double>(rows * cols));
  return Tensor::from_f64(DType::Float32, {rows, cols}, x);
}

// The fraction of elements kept, checking each against x and the mask.
double kept_fraction(const Tensor& x, const std::vector<Tensor>& out, double ratio) {
  const std::vector<double> xv = x.to_f64(), y = out[0].to_f64(), mask = out[1].to_f64();
  size_t kept = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    const bool k = mask[i] != 0;
    kept += k;
    EXPECT_FLOAT_EQ(y[i], k ? static_cast<float>(xv[i]) * static_cast<float>(1.0 / (1.0 - ratio)) : 0.0f)
        << "at " << i;
  }
  return static_cast<double>(kept) / static_cast<double>(xv.size());
}

TEST(RuntimeRandom, TrainingDropoutRunsNativelyKeepsOneMinusRatioAndScales) {
  const int64_t rows = 64, cols = 1000;  // 64K elements: 1 - ratio within 0.5% (about 5 sigma)
  for (int threads : {1, 2}) {
    auto exe = compile(dropout_model({}, rows, cols), threads);
    bool delegated = false;
    for (const runtime::StepInfo& s : exe->steps()) delegated |= s.kind == "onnxruntime";
    EXPECT_FALSE(delegated);
    const Tensor x = ramp(rows, cols);
    std::vector<Tensor> a = exe->run({x}), b = exe->run({x});
    EXPECT_NEAR(kept_fraction(x, a, 0.3), 0.7, 0.01);
    EXPECT_NEAR(kept_fraction(x, b, 0.3), 0.7, 0.01);
    // Each run draws anew: the two masks agree where independent draws would (0.58).
    const std::vector<double> ma = a[1].to_f64(), mb = b[1].to_f64();
    size_t same = 0;
    for (size_t i = 0; i < ma.size(); ++i) same += ma[i] == mb[i];
    EXPECT_NEAR(static_cast<double>(same) / static_cast<double>(ma.size()), 0.7 * 0.7 + 0.3 * 0.3, 0.01);
  }
}

TEST(RuntimeRandom, ASeedFixesTheDrawsRunForRunWhateverTheThreads) {
  DropoutForm f;
  f.seed = 42;
  const Graph g = dropout_model(f, 32, 100);
  auto one = compile(g, 1), two = compile(g, 2);
  const Tensor x = ramp(32, 100);
  for (int run = 0; run < 3; ++run) {
    std::vector<Tensor> a = one->run({x}), b = two->run({x});
    EXPECT_EQ(a[0].to_f64(), b[0].to_f64()) << "run " << run;
    EXPECT_EQ(a[1].to_f64(), b[1].to_f64()) << "run " << run;
  }
  f.seed = 43;
  auto other = compile(dropout_model(f, 32, 100), 1);
  EXPECT_NE(other->run({x})[1].to_f64(), compile(g, 1)->run({x})[1].to_f64());
}

TEST(RuntimeRandom, RatioAndTrainingModeReadWhenTheyAreInputs) {
  DropoutForm f;
  f.ratio_is_input = f.training_is_input = true;
  auto exe = compile(dropout_model(f, 16, 1000), 1);
  const Tensor x = ramp(16, 1000);
  auto scalar = [](DType t, double v) { return Tensor::from_f64(t, {}, std::vector<double>{v}); };
  EXPECT_NEAR(kept_fraction(x, exe->run({x, scalar(DType::Float32, 0.75), scalar(DType::Bool, 1)}), 0.75), 0.25,
              0.015);
  // Not training: the identity, every element kept, whatever the ratio.
  std::vector<Tensor> id = exe->run({x, scalar(DType::Float32, 0.75), scalar(DType::Bool, 0)});
  EXPECT_EQ(id[0].to_f64(), x.to_f64());
  EXPECT_EQ(kept_fraction(x, id, 0.0), 1.0);
  // A ratio outside [0, 1) is an error naming the node.
  try {
    exe->run({x, scalar(DType::Float32, 1.0), scalar(DType::Bool, 1)});
    FAIL() << "a ratio of 1 ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'drop'"), std::string::npos) << e.what();
  }
}

TEST(RuntimeRandom, DropoutKernelHonoursTheRatioAndTheKey) {
  const int64_t n = 100003;  // odd: the threads' parts differ in length
  std::vector<float> x(n, 2.0f), y(n), y2(n);
  std::vector<uint8_t> mask(n), mask2(n);
  for (double ratio : {0.1, 0.5, 0.9}) {
    kernels::dropout(x.data(), y.data(), reinterpret_cast<bool*>(mask.data()), n, ratio, kernels::random_key(7, 0), 1);
    kernels::dropout(x.data(), y2.data(), reinterpret_cast<bool*>(mask2.data()), n, ratio, kernels::random_key(7, 0),
                     2);
    EXPECT_EQ(y, y2) << "ratio " << ratio;  // the split between threads changes nothing
    EXPECT_EQ(mask, mask2);
    size_t kept = 0;
    for (uint8_t m : mask) kept += m;
    EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - ratio, 0.01) << "ratio " << ratio;
  }
  EXPECT_NE(kernels::random_key(7, 0), kernels::random_key(7, 1));
  EXPECT_NE(kernels::random_key(7, 0), kernels::random_key(8, 0));
}

}  // namespace
}  // namespace isomer
