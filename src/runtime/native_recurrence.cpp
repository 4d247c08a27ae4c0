// isomer's own recurrence. One product X W^T (+ biases) for every time step and
// batch row at once, then per step h R^T over R packed once in 16-row panels
// (kernels::gemm_panels: every batch row in one pass over the panel) and the
// cell's gates fused after it, written straight into Y in ONNX's layout.
//
// A ragged batch (sequence_lens) runs, at step s, only the rows whose sequence is
// longer than s, each at its own time step (a reverse direction starts each row at
// its own end); rows past their end leave zeros in Y and keep their state.
#include "runtime/native_recurrence.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>

#include "ir/error.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "kernels/quant.h"
#include "kernels/recurrent.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

struct NativeRecurrence {
  RnnCell cell = RnnCell::Lstm;
  int64_t T = 0, N = 0, I = 0, H = 0, G = 0, D = 1, layout = 0;
  bool reverse = false;
  float clip = 0;                            // 0: no clip
  bool relu = false;                         // RNN: Relu in place of Tanh
  int threads = 1;                           // for the input product
  int team = 1;                              // for the steps
  bool directions_apart = false;             // bidirectional: one thread per direction
  bool product_given = false;                // X W^T (+ biases) of every direction is an input: [rows, D G H]
  bool quantize_h = false;                   // RecurrenceGiven::quantize_h
  bool integer_step = false;                 // quantize_h, and the step product on integers
  int64_t h_chunk = 0;                       // quantize_h: batch rows per range of h (RecurrenceGiven)
  std::vector<std::vector<int8_t>> r_int;    // per direction, packed by kernels::pack_rows16_s8
  std::vector<std::vector<int32_t>> r_int_sums;  // per direction, each row's sum of R's integers
  std::vector<std::vector<float>> r_int_scale;   // per direction, each row's scale
  std::vector<int32_t> r_zp;                 // per direction
  std::unique_ptr<ParallelProbe> probe = std::make_unique<ParallelProbe>();  // planned threads or one, measured
  std::string name;                          // the node, for errors
  std::vector<int64_t> fixed_lens;           // constant sequence_lens, or empty
  std::vector<kernels::PackedB> w;           // per direction, ONNX's gate order kept
  std::vector<std::vector<float>> r;         // per direction, packed by kernels::pack_rows16
  std::vector<std::vector<float>> bias;      // per direction: Wb + Rb (a GRU's candidate: Wb only), panel-padded
  std::vector<std::vector<float>> rb_cand;   // per direction, GRU: the candidate's Rb

  // Offsets (in floats) of direction d's rows of Y ([T, D, N, H] or [N, T, D, H]),
  // of X W^T's rows (X's row order) and of the states ([D, N, H] or [N, D, H]).
  int64_t y_row(int64_t t, int64_t d, int64_t n) const {
    return (layout == 0 ? (t * D + d) * N + n : (n * T + t) * D + d) * H;
  }
  int64_t x_row(int64_t t, int64_t n) const { return layout == 0 ? t * N + n : n * T + t; }
  int64_t state_row(int64_t d, int64_t n) const { return (layout == 0 ? d * N + n : n * D + d) * H; }

  // `x` is the layer input, or X W^T (+ biases) where product_given.
  void run(const float* x, const float* h0, const float* c0, const int32_t* lens_in, float* y, float* yh,
           float* yc) const {
    std::vector<int64_t> lens(static_cast<size_t>(N), T);
    if (!fixed_lens.empty()) lens = fixed_lens;
    if (lens_in)
      for (int64_t n = 0; n < N; ++n) {
        lens[n] = lens_in[n];
        require(lens[n] >= 0 && lens[n] <= T, "node '" + name + "': sequence_lens value " + std::to_string(lens[n]) +
                                                  " is outside [0, " + std::to_string(T) + "]");
      }
    const Io io{x, h0, c0, y, yh, yc};
    const bool parallel = threads > 1 && probe->next_runs_parallel();
    const auto start = std::chrono::steady_clock::now();
    if (!parallel)
      for (int64_t d = 0; d < D; ++d) direction(d, io, lens, 1, 1);
    else if (D == 2 && directions_apart)  // two directions share nothing: each runs whole on a thread
      kernels::parallel_teams(2, [&](int d, int) { direction(d, io, lens, 1, 1); });
    else
      for (int64_t d = 0; d < D; ++d) direction(d, io, lens, threads, team);
    if (threads > 1)
      probe->record(parallel, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }

 private:
  struct Io {
    const float *x, *h0, *c0;
    float *y, *yh, *yc;
  };

  // Direction d: X W^T (+ biases) for every step on `product_threads` (unless
  // given), then the steps on a team of `members`, which also shares out X W^T's rows.
  void direction(int64_t d, const Io& io, const std::vector<int64_t>& lens, int product_threads, int members) const {
    const bool rev = reverse || d == 1;
    const int64_t GH = G * H;
    // The direction's working memory, kept by its thread between runs: X W^T alone
    // is T N G H floats (8 MB at T 256, batch 16, LSTM H 128), which a fresh vector
    // zeroed and, past malloc's mmap threshold, faulted in page by page on every run.
    thread_local std::vector<float> work;
    const size_t xw_size = product_given ? 0 : static_cast<size_t>(T * N * GH), hr_size = static_cast<size_t>(N * GH);
    const size_t state_size = static_cast<size_t>(N * H);
    if (work.size() < xw_size + hr_size + 2 * state_size) work.resize(xw_size + hr_size + 2 * state_size);
    const std::span<float> xw(work.data(), xw_size), hr(xw.data() + xw_size, hr_size);
    const std::span<float> h_init(hr.data() + hr_size, state_size), cell_state(h_init.data() + state_size, state_size);
    for (int64_t n = 0; n < N; ++n) {
      if (io.h0) std::copy_n(io.h0 + state_row(d, n), H, h_init.data() + n * H);
      else std::fill_n(h_init.data() + n * H, H, 0.0f);
      if (io.c0) std::copy_n(io.c0 + state_row(d, n), H, cell_state.data() + n * H);
      else std::fill_n(cell_state.data() + n * H, H, 0.0f);
      for (int64_t t = lens[n]; t < T; ++t) std::fill_n(io.y + y_row(t, d, n), H, 0.0f);
    }
    const Buffers buf{product_given ? io.x + d * GH : xw.data(), product_given ? D * GH : GH, hr.data(), h_init.data(),
                      cell_state.data()};
    if (members <= 1) {
      if (!product_given)
        kernels::gemm_packed(io.x, I, T * N, w[d], xw.data(), GH, nullptr, product_threads, bias[d].data());
      steps(d, rev, io, lens, buf, 0, 1, nullptr);
    } else {
      kernels::SpinBarrier barrier(members);
      kernels::parallel_teams(members, [&](int tid, int team_size) {
        const int64_t r0 = T * N * tid / team_size, r1 = T * N * (tid + 1) / team_size;
        if (!product_given && r1 > r0)
          kernels::gemm_packed(io.x + r0 * I, I, r1 - r0, w[d], xw.data() + r0 * GH, GH, nullptr, 1, bias[d].data());
        if (!product_given) barrier.wait();
        steps(d, rev, io, lens, buf, tid, team_size, &barrier);
      });
    }
    // A sequence of length 0 leaves zeros in Y_h and Y_c (as ONNX Runtime does).
    for (int64_t n = 0; n < N; ++n) {
      if (io.yh && lens[n] == 0) std::fill_n(io.yh + state_row(d, n), H, 0.0f);
      else if (io.yh) std::copy_n(io.y + y_row(rev ? 0 : lens[n] - 1, d, n), H, io.yh + state_row(d, n));
      if (io.yc && lens[n] == 0) std::fill_n(io.yc + state_row(d, n), H, 0.0f);
      else if (io.yc) std::copy_n(cell_state.data() + n * H, H, io.yc + state_row(d, n));
    }
  }

  struct Buffers {
    const float* xw;  // row r of X W^T at xw + r * xw_row
    int64_t xw_row;
    float *hr, *h_init, *cell_state;
  };

  // Step s's h quantized as ONNX Runtime's step product takes it, into `bytes`
  // (row i of the active rows at i * stride), each row's sum in `sums` and its
  // quantization in `params`.
  void quantize_states(int64_t s, const std::vector<int64_t>& lens, const std::vector<const float*>& h_prev,
                       const std::vector<int64_t>& active, const std::vector<const float*>& h_active, int64_t count,
                       uint8_t* bytes, int64_t stride, int32_t* sums, kernels::DynamicParams* params,
                       std::vector<kernels::DynamicParams>& part) const;
  // The integer products of rows [r0, r0 + rows) of R for `count` active rows into
  // h R^T's floats, moved by the zero points and scaled as ONNX Runtime does.
  void integer_products(int64_t d, const kernels::DynamicParams* q, const int32_t* acc, const int32_t* h_sums,
                        int64_t count, int64_t r0, int64_t rows, float* hr) const;

  // Member `tid` of `members` runs its share of every step: R's panels for the
  // product and the hidden units for the gates, meeting the others at `barrier`
  // after each.
  void steps(int64_t d, bool rev, const Io& io, const std::vector<int64_t>& lens, const Buffers& buf, int tid,
             int members, kernels::SpinBarrier* barrier) const {
    const int64_t GH = G * H;
    const int64_t panels = (GH + 15) / 16;
    const int64_t p0 = panels * tid / members, p1 = panels * (tid + 1) / members;
    const int64_t rows = std::min(GH, p1 * 16) - p0 * 16;
    const int64_t j0 = H * tid / members, j1 = H * (tid + 1) / members;
    std::vector<const float*> h_prev(static_cast<size_t>(N)), h_active(static_cast<size_t>(N));
    std::vector<int64_t> active(static_cast<size_t>(N)), time(static_cast<size_t>(N));
    // quantize_h: the active rows' h in uint8 (K padded to the integer panels' 4),
    // dequantized for the float product or, with integer_step, their int32 products.
    const int64_t h_stride = (H + 3) / 4 * 4;
    std::vector<uint8_t> h_bytes(quantize_h ? static_cast<size_t>(N * h_stride) : 0);
    std::vector<const uint8_t*> h_rows(static_cast<size_t>(N));
    std::vector<int32_t> h_sums(static_cast<size_t>(N)), acc(integer_step ? static_cast<size_t>(N * GH) : 0);
    std::vector<float> h_quantized(quantize_h && !integer_step ? static_cast<size_t>(N * H) : 0);
    std::vector<kernels::DynamicParams> q(static_cast<size_t>(N));
    std::vector<kernels::DynamicParams> part(quantize_h ? static_cast<size_t>((N + h_chunk - 1) / h_chunk) : 0);
    for (int64_t n = 0; n < N; ++n) h_prev[n] = buf.h_init + n * H;
    const int64_t count_steps = *std::max_element(lens.begin(), lens.end());
    for (int64_t s = 0; s < count_steps; ++s) {
      int64_t count = 0;
      for (int64_t n = 0; n < N; ++n)
        if (s < lens[n]) {
          active[count] = n, time[count] = rev ? lens[n] - 1 - s : s, h_active[count] = h_prev[n];
          ++count;
        }
      if (quantize_h) {
        quantize_states(s, lens, h_prev, active, h_active, count, h_bytes.data(), h_stride, h_sums.data(), q.data(),
                        part);
        for (int64_t i = 0; i < count; ++i) {
          const int32_t zp = q[i].zero_point;
          h_rows[i] = h_bytes.data() + i * h_stride;
          if (integer_step) continue;
          kernels::dequantize(h_rows[i], kernels::QType::U8, h_quantized.data() + i * H, kernels::QShape{1, 1, H},
                              &q[i].scale, &zp);
          h_active[i] = h_quantized.data() + i * H;
        }
      }
      if (rows > 0 && integer_step) {
        kernels::gemm_panels_u8s8(r_int[d].data() + p0 * 16 * h_stride, h_rows.data(), count, acc.data() + p0 * 16, GH,
                                  rows, H);
        integer_products(d, q.data(), acc.data(), h_sums.data(), count, p0 * 16, rows, buf.hr);
      } else if (rows > 0) {
        kernels::gemm_panels(r[d].data() + p0 * H * 16, h_active.data(), count, buf.hr + p0 * 16, GH, rows, H);
      }
      if (barrier) barrier->wait();
      for (int64_t i = 0; i < count; ++i) {
        const int64_t n = active[i], t = time[i];
        const float* a = buf.xw + x_row(t, n) * buf.xw_row + j0;
        const float* b = buf.hr + i * GH + j0;
        float* out = io.y + y_row(t, d, n) + j0;
        if (cell == RnnCell::Lstm) kernels::lstm_gates(a, b, buf.cell_state + n * H + j0, out, j1 - j0, H, clip);
        else if (cell == RnnCell::Gru) kernels::gru_lbr_gates(a, b, rb_cand[d].data() + j0, h_prev[n] + j0, out, j1 - j0, H, clip);
        else kernels::rnn_gates(a, b, out, j1 - j0, clip, relu);
      }
      if (barrier) barrier->wait();
      for (int64_t i = 0; i < count; ++i) h_prev[active[i]] = io.y + y_row(time[i], d, active[i]);
    }
  }
};

// ONNX Runtime's step product quantizes the rows of h it is given: every batch
// row's h of the step before (a row whose sequence ended earlier holds zeros
// there, which leave the range as it is), or at step 0 every initial state; on
// several threads, each part of h_chunk rows on a range of its own. Each member
// of a team computes the same values for itself.
void NativeRecurrence::quantize_states(int64_t s, const std::vector<int64_t>& lens,
                                       const std::vector<const float*>& h_prev, const std::vector<int64_t>& active,
                                       const std::vector<const float*>& h_active, int64_t count, uint8_t* bytes,
                                       int64_t stride, int32_t* sums, kernels::DynamicParams* params,
                                       std::vector<kernels::DynamicParams>& part) const {
  for (size_t c = 0; c < part.size(); ++c) {
    float range[2] = {0.0f, 0.0f};
    for (int64_t n = static_cast<int64_t>(c) * h_chunk; n < std::min(N, static_cast<int64_t>(c + 1) * h_chunk); ++n) {
      if (s > 0 && lens[static_cast<size_t>(n)] < s) continue;
      const float* h = h_prev[static_cast<size_t>(n)];
      for (int64_t j = 0; j < H; ++j) range[0] = std::min(range[0], h[j]), range[1] = std::max(range[1], h[j]);
    }
    part[c] = kernels::dynamic_params(range, 2);
  }
  for (int64_t i = 0; i < count; ++i) {
    const kernels::DynamicParams q = part[static_cast<size_t>(active[static_cast<size_t>(i)] / h_chunk)];
    const int32_t zp = q.zero_point;
    uint8_t* row = bytes + i * stride;
    kernels::quantize(h_active[static_cast<size_t>(i)], row, kernels::QType::U8, kernels::QShape{1, 1, H}, &q.scale, &zp);
    std::fill(row + H, row + stride, uint8_t{0});
    int32_t sum = 0;
    for (int64_t j = 0; j < H; ++j) sum += row[j];
    sums[i] = sum;
    params[i] = q;
  }
}

// sum (h - zh)(R - zr) = h.R - zh sum(R) - zr sum(h) + K zh zr, then float times
// (h's scale times the row's), the order ONNX Runtime multiplies in.
void NativeRecurrence::integer_products(int64_t d, const kernels::DynamicParams* q, const int32_t* acc,
                                        const int32_t* h_sums, int64_t count, int64_t r0, int64_t rows,
                                        float* hr) const {
  const int64_t GH = G * H;
  const int32_t zr = r_zp[static_cast<size_t>(d)];
  const int32_t* r_sums = r_int_sums[static_cast<size_t>(d)].data();
  const float* scale = r_int_scale[static_cast<size_t>(d)].data();
  for (int64_t i = 0; i < count; ++i) {
    const int32_t zh = q[i].zero_point;
    const float sh = q[i].scale;
    const int32_t moved = static_cast<int32_t>(H) * zh * zr - zr * h_sums[i];
    for (int64_t r = r0; r < r0 + rows; ++r)
      hr[i * GH + r] = static_cast<float>(acc[i * GH + r] - zh * r_sums[r] + moved) * (sh * scale[r]);
  }
}

std::vector<float> floats(const Tensor& t) {
  const std::vector<double> v = t.to_f64();
  return std::vector<float>(v.begin(), v.end());
}

// The multiply-adds that pay for one more thread of the input product (as a
// MatMul's, lower_matmul.cpp).
constexpr double kProductTeamMacs = 256.0 * 1024;

// X W^T + biases of every step and direction as one oneDNN matmul, [rows, I] x
// [I, cols] with W [cols, I] (every direction's gates, ONNX's order) and `bias`
// per column; returns its result. Where the CPU has AVX-512 its kernels run the
// product at twice the rate of gemm_packed's 8-lane tiles (kernels/gemm.h).
int input_product(Compiler& c, const Node& n, int x, const std::vector<float>& w, const std::vector<double>& bias,
                  int64_t rows, int64_t I, int64_t cols) {
  std::vector<double> wt(static_cast<size_t>(I * cols));
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = 0; i < I; ++i) wt[static_cast<size_t>(i * cols + j)] = w[static_cast<size_t>(j * I + i)];
  const md_t a_md = plain_md({rows, I}, dt::f32), bias_md = plain_md({1, cols}, dt::f32);
  const md_t dst_md = plain_md({rows, cols}, dt::f32);
  const double macs = static_cast<double>(rows * I * cols);
  const Compiler::TeamScope team(c, kernels::team_for_work(c.threads(), macs / kProductTeamMacs));
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, md_t(to_dims({I, cols}), dt::f32, tag::any), bias_md, dst_md),
                                  c.engine());
  const int weights = c.as_layout(c.constant_value(Tensor::from_f64(DType::Float32, {I, cols}, wt), n.name() + ".W"),
                                  pd.weights_desc());
  const int b = c.constant_value(Tensor::from_f64(DType::Float32, {1, cols}, bias), n.name() + ".B");
  const int src = c.alias(x, {rows, I}, a_md, n.name() + ".X");
  c.val(src).step_local = true;
  const int dst = c.new_value(DType::Float32, {rows, cols}, dst_md, n.name() + ".XW");
  c.add_primitive(pd, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, dst}},
                  step_info(n, "matmul",
                            "matmul src " + describe_md(a_md) + " wei " + describe_md(pd.weights_desc()) + "c dst " +
                                describe_md(dst_md) + " bias " + describe_md(bias_md) + " impl " + pd.impl_info_str(),
                            2.0 * macs));
  return dst;
}

}  // namespace

bool ParallelProbe::next_runs_parallel() {
  const int64_t phase = runs_.fetch_add(1, std::memory_order_relaxed) % kPeriod;
  if (phase == 0) total_[0] = total_[1] = 0;
  return phase < 2 * kProbe ? phase % 2 == 0 : parallel_wins_.load(std::memory_order_relaxed);
}

void ParallelProbe::record(bool parallel, double seconds) {
  const int64_t phase = (runs_.load(std::memory_order_relaxed) - 1) % kPeriod;
  if (phase >= 2 * kProbe) return;
  total_[parallel ? 1 : 0] += seconds;
  if (phase == 2 * kProbe - 1) parallel_wins_.store(total_[1] <= total_[0], std::memory_order_relaxed);
}

bool native_recurrence_supports(const Node& n, const RnnConfig& cfg) {
  if (cfg.cell == RnnCell::Gru && !cfg.linear_before_reset) return false;  // two products per step: oneDNN's
  if (cfg.input_forget || !(cfg.default_activations() || cfg.relu_rnn())) return false;
  const auto& in = n.inputs();
  return !(in.size() > 7 && in[7].present());  // peepholes
}

// Measured with `isomer run --bench` at 2 threads on 2 cores beside other work
// (load average 8-9, OMP_WAIT_POLICY=PASSIVE), PyTorch exports:
//  - a team for each step (two barriers a step) loses whenever the cores are busy:
//    LSTM batch 1 H 512 (1M multiply-adds a step) 5.4 ms against 2.2 on one thread;
//    earlier, at load 7-8, H 128 0.26 ms against 0.09 and H 256 0.56 against 0.37.
//    So steps take a team only while the cores are free (the threads spin).
//  - on a quiet machine (load 0.7-1.4, 5 interleaved rounds, isomer/ONNX Runtime at
//    2 threads), a team from 64K multiply-adds a step on (LSTM batch 1, H 128; some
//    2 us of work) against one from 1M: LSTM H 256 1.81 -> 1.13, H 128 x 2 layers
//    1.07 -> 0.84, LSTM at opset 9 1.67 -> 0.96, GRU at opset 23 1.40 -> 0.87; H 512
//    (already a team) 1.04-1.23.
//  - a bidirectional layer's directions share nothing: on two threads each runs
//    whole, one parallel region for the layer and no barrier per step.
RecurrenceTeams recurrence_teams(int threads, int64_t directions, int64_t batch, int64_t gates, int64_t hidden,
                                 bool cores_free) {
  RecurrenceTeams t;
  if (threads <= 1) return t;
  if (directions == 2) {
    t.directions_apart = true;
    return t;
  }
  if (cores_free && batch * gates * hidden * hidden >= kTeamMacs) t.steps = threads;
  return t;
}

// Measured with `isomer run --bench` on one-node models (T 10-20, input = hidden),
// native against oneDNN's primitives, at load 7-8 on 2 cores (Zen 4):
//  - batch 1: native 0.77x-0.98x of oneDNN's time (LSTM), 0.8x-1.1x (GRU); it runs.
//  - 1 thread, batch 2-16: oneDNN equal or up to 10% faster (GRU batch 2 H 128:
//    0.106 ms against 0.118); oneDNN runs.
//  - 2 threads, batch 2-16, hidden up to 256: oneDNN's threaded primitive 1.1x-7x
//    slower than the native step on one thread (GRU batch 2 H 128: 0.29 ms against
//    0.10); native runs. At hidden 512 they were even, and oneDNN keeps it.
//  - 1 thread, batch 2-4, once the step product kept each loaded panel in a register
//    (kernels/recurrent.cpp; load 7-8, 2 rounds, one-node models): bidirectional
//    LSTM T 40 batch 2 H 128 0.44 ms against oneDNN's 0.55 (input 100) and 0.66
//    against 0.87 (input 256); GRU T 64 batch 4 H 256 1.54-1.55 against 1.58; so
//    native runs there. Batch 8 H 512 and batch 16 H 128 stayed 2-7% faster on oneDNN.
bool native_recurrence_preferred(const RnnConfig& cfg, int64_t batch, int64_t hidden, int threads) {
  (void)cfg;
  if (const char* e = std::getenv("ISOMER_RNN")) return std::string(e) == "native";
  return batch <= 4 || (threads > 1 && batch <= 16 && hidden <= 256);
}

void lower_native_recurrence(Compiler& c, const Node& n, const RnnConfig& cfg, int64_t seq, int64_t batch,
                             int64_t input, int64_t H, const RecurrenceGiven* given) {
  const auto& in = n.inputs();
  auto k = std::make_shared<NativeRecurrence>();
  k->cell = cfg.cell;
  k->T = seq, k->N = batch, k->I = input, k->H = H, k->G = cfg.gates, k->D = cfg.directions, k->layout = cfg.layout;
  k->reverse = cfg.reverse;
  k->clip = cfg.has_clip ? static_cast<float>(cfg.clip) : 0.0f;
  k->relu = cfg.relu_rnn();
  k->threads = c.opts().threads;
  const RecurrenceTeams teams =
      recurrence_teams(c.opts().threads, k->D, batch, cfg.gates, H, !kernels::team_threads_sleep());
  k->team = teams.steps;
  k->directions_apart = teams.directions_apart;
  k->name = n.name();
  const int64_t GH = k->G * H;
  const std::vector<float> w = given ? given->w : floats(*c.known(in[1])), r = given ? given->r : floats(*c.known(in[2]));
  const Tensor* b = !given && in.size() > 3 && in[3].present() ? c.known(in[3]) : nullptr;
  const std::vector<double> bv = given ? given->bias
                                 : b   ? b->to_f64()
                                       : std::vector<double>(static_cast<size_t>(k->D * 2 * GH), 0.0);
  k->quantize_h = given && given->quantize_h;
  k->h_chunk = given && given->h_chunk > 0 ? given->h_chunk : batch;
  k->integer_step = k->quantize_h && !given->r_int.empty() && kernels::integer_panels_available();
  for (int64_t d = 0; d < k->D && k->integer_step; ++d) {
    const int8_t* rd = given->r_int.data() + d * GH * H;
    k->r_int.push_back(kernels::pack_rows16_s8(rd, GH, H));
    std::vector<int32_t> sums(static_cast<size_t>(GH), 0);
    for (int64_t j = 0; j < GH; ++j)
      for (int64_t i = 0; i < H; ++i) sums[static_cast<size_t>(j)] += rd[j * H + i];
    k->r_int_sums.push_back(std::move(sums));
    k->r_int_scale.emplace_back(given->r_scale.begin() + d * GH, given->r_scale.begin() + (d + 1) * GH);
    k->r_zp.push_back(given->r_zp[static_cast<size_t>(d)]);
  }
  // The input product runs as a oneDNN matmul step where its kernels are the faster
  // (kernels::prefer_packed_gemm): a bidirectional LSTM at batch 1-2 (T 50, input
  // 384, H 128, CRNN's) took 1.2-1.4x ONNX Runtime's time at 1 thread with the
  // product on gemm_packed, 59% of it in the product.
  const int64_t rows = seq * batch;
  k->product_given = (given && given->product >= 0) || !kernels::prefer_packed_gemm(rows);
  std::vector<double> biases;  // Wb + Rb per column of every direction (a GRU's candidate: Wb only)
  for (int64_t d = 0; d < k->D; ++d) {
    if (!k->product_given) k->w.push_back(kernels::pack_b(w.data() + d * GH * input, input, GH, input, true));
    k->r.push_back(kernels::pack_rows16(r.data() + d * GH * H, GH, H));
    std::vector<float> sum(static_cast<size_t>(GH)), cand(static_cast<size_t>(H));
    for (int64_t j = 0; j < GH; ++j) {
      const double wb = bv[static_cast<size_t>(d * 2 * GH + j)], rb = bv[static_cast<size_t>(d * 2 * GH + GH + j)];
      const bool candidate = cfg.cell == RnnCell::Gru && j >= 2 * H;
      sum[static_cast<size_t>(j)] = static_cast<float>(candidate ? wb : wb + rb);
      if (candidate) cand[static_cast<size_t>(j - 2 * H)] = static_cast<float>(rb);
    }
    biases.insert(biases.end(), sum.begin(), sum.end());
    if (!k->product_given) k->bias.push_back(kernels::panel_bias(sum.data(), GH));
    k->rb_cand.push_back(std::move(cand));
  }
  // sequence_lens: baked in when constant (and dropped when every sequence is full),
  // read on every run otherwise.
  bool runtime_lens = false;
  if (in.size() > 4 && in[4].present()) {
    if (const Tensor* lens = c.known(in[4])) {
      const std::vector<int64_t> v = lens->to_i64();
      for (int64_t len : v)
        require(len >= 0 && len <= seq, "node '" + n.name() + "': sequence_lens value " + std::to_string(len) +
                                            " is outside [0, " + std::to_string(seq) + "]");
      if (std::any_of(v.begin(), v.end(), [&](int64_t len) { return len != seq; })) k->fixed_lens = v;
    } else {
      runtime_lens = true;
    }
  }
  const int x = given && given->product < 0 ? given->x : given ? -1 : c.as_plain(c.id(in[0]));
  std::vector<int> reads{given && given->product >= 0 ? given->product
                         : k->product_given          ? input_product(c, n, x, w, biases, rows, input, k->D * GH)
                                                     : x};
  const bool has_h0 = in.size() > 5 && in[5].present(), has_c0 = cfg.cell == RnnCell::Lstm && in.size() > 6 && in[6].present();
  if (runtime_lens) reads.push_back(c.as_plain(c.id(in[4])));
  if (has_h0) reads.push_back(c.as_plain(c.id(in[5])));
  if (has_c0) reads.push_back(c.as_plain(c.id(in[6])));
  // Y, then Y_h and Y_c, in the node's layout (an opaque node has no shape rule to ask).
  const int64_t D = k->D;
  const std::vector<int64_t> y_dims = cfg.layout == 0 ? std::vector<int64_t>{seq, D, batch, H}
                                                      : std::vector<int64_t>{batch, seq, D, H};
  const std::vector<int64_t> state_dims = cfg.layout == 0 ? std::vector<int64_t>{D, batch, H}
                                                          : std::vector<int64_t>{batch, D, H};
  std::vector<int> writes;
  for (size_t o = 0; o < n.num_outputs(); ++o) {
    const std::vector<int64_t>& dims = o == 0 ? y_dims : state_dims;
    writes.push_back(c.new_value(DType::Float32, dims, plain_md(dims, dt::f32), n.name()));
  }
  const double flops = 2.0 * static_cast<double>(k->D * seq * batch * GH * ((k->product_given ? 0 : input) + H));
  const std::string sig = n.op_type() + " native T" + std::to_string(seq) + " N" + std::to_string(batch) + " I" +
                          std::to_string(input) + " H" + std::to_string(H) + " D" + std::to_string(k->D) + " layout" +
                          std::to_string(cfg.layout) + (has_h0 ? " h0" : "") + (has_c0 ? " c0" : "") +
                          (cfg.has_clip ? " clip" : "") + (k->quantize_h ? (k->integer_step ? " u8s8-step" : " u8-h") : "") + (k->relu ? " relu" : "") + (runtime_lens || !k->fixed_lens.empty() ? " lens" : "") +
                          " team" + std::to_string(k->team) +
                          (k->directions_apart ? " apart" : "") + (k->product_given ? " xw" : "");
  const size_t outputs = writes.size();
  add_native_step(c, step_info(n, "rnn", sig, flops), reads, writes,
                  [k, runtime_lens, has_h0, has_c0, outputs](const std::vector<char*>& p) {
                    size_t at = 0;
                    auto f = [&](bool present) { return present ? reinterpret_cast<float*>(p[at++]) : nullptr; };
                    const float* x = f(true);
                    const int32_t* lens = runtime_lens ? reinterpret_cast<const int32_t*>(p[at++]) : nullptr;
                    const float* h0 = f(has_h0);
                    const float* c0 = f(has_c0);
                    float* y = f(true);
                    float* yh = f(outputs > 1);
                    float* yc = f(outputs > 2);
                    k->run(x, h0, c0, lens, y, yh, yc);
                  });
  for (size_t o = 0; o < outputs; ++o) c.bind(n.output(o), writes[o]);
}

}  // namespace isomer::runtime
