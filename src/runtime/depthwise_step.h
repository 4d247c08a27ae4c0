#pragma once
// A depthwise convolution whose SiLU or sigmoid runs in its own kernel's epilogue
// (kernels/depthwise.h), where that beats oneDNN's convolution followed by the
// in-place gate step lower_conv otherwise adds (measured per shape class below).
#include <cstdint>
#include <vector>

#include "kernels/pointwise.h"
#include "runtime/compiler.h"

namespace isomer::runtime {

struct DepthwiseConv {
  std::vector<int64_t> in, out;  // [N, C, H, W]
  std::vector<int64_t> kernel;   // [kh, kw]
  std::vector<int64_t> strides, dilations, pad_begin;  // dilations as ONNX's (1: dense)
  std::vector<double> weights;   // [C, 1, kh, kw]
  std::vector<double> bias;      // [C]
  kernels::PwOp act;
};

// True where the native kernel runs `d`, reading `src` and writing `dst` (oneDNN's
// chosen layouts), faster than oneDNN and the gate step.
bool native_depthwise_wins(const DepthwiseConv& d, const md_t& src, const md_t& dst);

// The step: reads value `x` (in `src`'s layout), writes a new value in `dst`'s,
// which it returns.
int add_native_depthwise(Compiler& c, const DepthwiseConv& d, int x, const md_t& dst, StepInfo info,
                         const std::string& name);

}  // namespace isomer::runtime
