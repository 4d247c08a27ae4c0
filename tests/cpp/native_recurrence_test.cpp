// isomer's own recurrence (runtime/native_recurrence.cpp, kernels/recurrent.cpp):
// the panel product against a plain loop, and every variant the native step
// claims (LSTM, linear-before-reset GRU, RNN; each direction and layout; batch 1
// and larger; initial states given or not; clip; sequence_lens shorter than the
// sequence, constant or a graph input) against the reference evaluator, on one
// thread and on a team of two. tests/python/test_native_recurrence.py checks the
// same against ONNX Runtime.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "kernels/gemm.h"
#include "kernels/recurrent.h"
#include "runtime/native_recurrence.h"
#include "runtime_test_util.h"

namespace isomer {
namespace {

using testing::random_tensor;

TEST(NativeRecurrence, PanelProductMatchesAPlainLoop) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t rows : {5, 16, 48, 100, 130})
    for (int64_t K : {1, 7, 64})
      for (int64_t N : {1, 2, 3, 4, 5, 6, 7, 9}) {
        SCOPED_TRACE("rows " + std::to_string(rows) + " K " + std::to_string(K) + " N " + std::to_string(N));
        std::vector<float> R(static_cast<size_t>(rows * K)), h(static_cast<size_t>(N * (K + 3)));
        for (float& v : R) v = u(rng);
        for (float& v : h) v = u(rng);
        // Rows of h at uneven addresses, as a ragged batch's rows are.
        std::vector<const float*> hp;
        for (int64_t i = 0; i < N; ++i) hp.push_back(h.data() + (N - 1 - i) * (K + 3) + i % 3);
        const int64_t ldy = rows + 2;
        std::vector<float> y(static_cast<size_t>(N * ldy), -7.0f);
        kernels::gemm_panels(kernels::pack_rows16(R.data(), rows, K).data(), hp.data(), N, y.data(), ldy, rows, K);
        for (int64_t i = 0; i < N; ++i) {
          for (int64_t r = 0; r < rows; ++r) {
            double want = 0;
            for (int64_t k = 0; k < K; ++k) want += static_cast<double>(R[r * K + k]) * hp[i][k];
            EXPECT_NEAR(y[i * ldy + r], want, 1e-4) << "row " << i << " unit " << r;
          }
          EXPECT_EQ(y[i * ldy + rows], -7.0f) << "wrote past the rows";
        }
      }
}

enum class Lens { Full, Constant, Input };

struct Variant {
  std::string op, direction;
  int64_t layout, seq, batch, input, hidden;
  bool h0, c0;
  double clip;  // 0: none
  Lens lens;
  bool relu = false;  // RNN: activations Relu (PyTorch's nonlinearity='relu')
};

// The sequence lengths a variant's batch gets (seq >= 2): the first full, the second
// 0 where the batch has three rows or more, the others in between.
std::vector<double> lengths(const Variant& v) {
  std::vector<double> out;
  for (int64_t n = 0; n < v.batch; ++n)
    out.push_back(static_cast<double>(n == 0 ? v.seq : n == 1 && v.batch > 2 ? 0 : 1 + (n * 3) % (v.seq - 1)));
  return out;
}

Graph variant_graph(const Variant& v, uint64_t seed) {
  GraphBuilder b;
  const int64_t D = v.direction == "bidirectional" ? 2 : 1, G = v.op == "LSTM" ? 4 : v.op == "GRU" ? 3 : 1, H = v.hidden;
  const std::vector<int64_t> xd = v.layout == 0 ? std::vector<int64_t>{v.seq, v.batch, v.input}
                                                : std::vector<int64_t>{v.batch, v.seq, v.input};
  const std::vector<int64_t> sd = v.layout == 0 ? std::vector<int64_t>{D, v.batch, H} : std::vector<int64_t>{v.batch, D, H};
  std::vector<Value> in{b.input("x", {DType::Float32, make_shape(xd)}),
                        b.constant(random_tensor({D, G * H, v.input}, seed)),
                        b.constant(random_tensor({D, G * H, H}, seed + 1)),
                        b.constant(random_tensor({D, 2 * G * H}, seed + 2))};
  if (v.lens == Lens::Full) in.push_back(Value{});
  else if (v.lens == Lens::Constant) in.push_back(b.constant(Tensor::from_f64(DType::Int32, {v.batch}, lengths(v))));
  else in.push_back(b.input("lens", {DType::Int32, make_shape({v.batch})}));
  in.push_back(v.h0 ? b.input("h0", {DType::Float32, make_shape(sd)}) : Value{});
  if (v.op == "LSTM") in.push_back(v.c0 ? b.input("c0", {DType::Float32, make_shape(sd)}) : Value{});
  while (!in.back().present()) in.pop_back();
  Attributes a;
  a.set("hidden_size", H);
  a.set("direction", v.direction);
  a.set("layout", v.layout);
  if (v.op == "GRU") a.set("linear_before_reset", int64_t{1});
  if (v.clip > 0) a.set("clip", v.clip);
  if (v.relu) a.set("activations", std::vector<std::string>(static_cast<size_t>(D), "Relu"));
  std::vector<Value> out = b.op(v.op, in, a, v.op == "LSTM" ? 3 : 2);
  std::vector<std::string> names{"y", "y_h", "y_c"};
  names.resize(out.size());
  return b.finish(out, names);
}

// Runs `v` natively on `threads` threads against the reference evaluator.
void check_variant(const Variant& v, uint64_t seed, int threads) {
  SCOPED_TRACE(v.op + " " + v.direction + " layout " + std::to_string(v.layout) + " T" + std::to_string(v.seq) + " N" +
               std::to_string(v.batch) + " I" + std::to_string(v.input) + " H" + std::to_string(v.hidden) +
               (v.h0 ? " h0" : "") + (v.c0 ? " c0" : "") + " clip " + std::to_string(v.clip) + " lens " +
               std::to_string(static_cast<int>(v.lens)) + (v.relu ? " relu" : "") + " threads " + std::to_string(threads));
  Graph g = variant_graph(v, seed);
  std::vector<Tensor> inputs = random_inputs(g, seed + 3);
  if (v.lens == Lens::Input) inputs[1] = Tensor::from_f64(DType::Int32, {v.batch}, lengths(v));
  std::vector<Tensor> want = evaluate(g, inputs);
  runtime::RuntimeOptions o;
  o.threads = threads;
  auto exe = runtime::compile(g, o);
  bool native = false, team = false, apart = false, product_step = false;
  for (const runtime::StepInfo& s : exe->steps()) {
    native = native || s.signature.find(" native ") != std::string::npos;
    team = team || s.signature.find(" team2") != std::string::npos;
    apart = apart || s.signature.find(" apart") != std::string::npos;
    product_step = product_step || s.kind == "matmul";
  }
  EXPECT_TRUE(native) << "the node did not run on the native recurrence";
  // X W^T of every step runs as a oneDNN matmul step where its kernels are the faster.
  EXPECT_EQ(product_step, !kernels::prefer_packed_gemm(v.seq * v.batch));
  // The tests' OpenMP threads spin (no OMP_WAIT_POLICY=PASSIVE) unless a test says so.
  const bool sleeping = std::getenv("OMP_WAIT_POLICY") != nullptr;
  const int64_t G = v.op == "LSTM" ? 4 : v.op == "GRU" ? 3 : 1;
  const bool bidirectional = v.direction == "bidirectional";
  EXPECT_EQ(apart, threads > 1 && bidirectional);
  EXPECT_EQ(team, threads > 1 && !bidirectional && !sleeping && v.batch * G * v.hidden * v.hidden >= runtime::kTeamMacs);
  for (int run = 0; run < 2; ++run) {
    CheckResult r = compare_outputs(want, exe->run(inputs), g.output_names(), 1e-4);
    EXPECT_EQ(r.status, CheckResult::Status::Passed) << r.reason;
  }
}

// DynamicQuantizeLSTM's step product: uint8 h times int8 R in int32, exactly, at the
// extremes of both types, on any row count, K and batch (VNNI's where the CPU has it).
TEST(NativeRecurrence, IntegerPanelProductIsExact) {
  std::mt19937_64 rng(12);
  std::uniform_int_distribution<int> u8(0, 255), s8(-128, 127);
  for (int64_t rows : {5, 16, 48, 100})
    for (int64_t K : {1, 7, 64, 130})
      for (int64_t N : {1, 2, 3, 5, 9}) {
        SCOPED_TRACE("rows " + std::to_string(rows) + " K " + std::to_string(K) + " N " + std::to_string(N));
        const int64_t stride = (K + 3) / 4 * 4;
        std::vector<int8_t> R(static_cast<size_t>(rows * K));
        std::vector<uint8_t> h(static_cast<size_t>(N * stride), 0);
        for (int8_t& v : R) v = static_cast<int8_t>(rows == 16 ? -128 : s8(rng));
        for (int64_t i = 0; i < N; ++i)
          for (int64_t k = 0; k < K; ++k) h[static_cast<size_t>(i * stride + k)] = static_cast<uint8_t>(rows == 16 ? 255 : u8(rng));
        std::vector<const uint8_t*> hp;
        for (int64_t i = 0; i < N; ++i) hp.push_back(h.data() + (N - 1 - i) * stride);
        const std::vector<int8_t> packed = kernels::pack_rows16_s8(R.data(), rows, K);
        std::vector<int32_t> y(static_cast<size_t>(N * (rows + 2)), -1);
        kernels::gemm_panels_u8s8(packed.data(), hp.data(), N, y.data(), rows + 2, rows, K);
        for (int64_t i = 0; i < N; ++i) {
          for (int64_t r = 0; r < rows; ++r) {
            int32_t want = 0;
            for (int64_t k = 0; k < K; ++k) want += static_cast<int32_t>(hp[i][k]) * R[static_cast<size_t>(r * K + k)];
            ASSERT_EQ(y[static_cast<size_t>(i * (rows + 2) + r)], want) << "row " << r << " of batch row " << i;
          }
          EXPECT_EQ(y[static_cast<size_t>(i * (rows + 2) + rows)], -1) << "written past the rows";
        }
      }
}

TEST(NativeRecurrence, EveryVariantMatchesTheReference) {
  setenv("ISOMER_RNN", "native", 1);  // batches above 1 would run on oneDNN where it can
  const char* const ops[] = {"LSTM", "GRU", "RNN"};
  const char* const directions[] = {"forward", "reverse", "bidirectional"};
  int i = 0;
  for (const char* op : ops)
    for (const char* direction : directions)
      for (int64_t batch : {1, 3})
        for (Lens lens : {Lens::Full, Lens::Constant, Lens::Input}) {
          ++i;
          const Variant v{op, direction, i % 2, 5, batch, 3 + i % 4, 6 + i % 5, i % 3 != 0, i % 2 == 0,
                          i % 4 == 1 ? 0.6 : 0.0, lens};
          check_variant(v, 900 + i, 1);
        }
  unsetenv("ISOMER_RNN");
}

// An RNN on Relu has no oneDNN path (isomer's primitives there are the default
// activations): the native step runs it at every batch, clip and direction, and its
// gate maps NaN to 0 as the reference's Relu does.
TEST(NativeRecurrence, ReluRnnRunsNatively) {
  int i = 0;
  for (const char* direction : {"forward", "reverse", "bidirectional"})
    for (int64_t batch : {1, 4})
      for (int threads : {1, 2}) {
        ++i;
        Variant v{"RNN", direction, i % 2, 6, batch, 5, 9 + i, i % 3 == 0, false, i % 4 == 1 ? 0.5 : 0.0,
                  i % 3 == 1 ? Lens::Constant : Lens::Full};
        v.relu = true;
        check_variant(v, 700 + i, threads);
      }
  float a[3] = {std::nanf(""), -1.0f, 2.0f}, b[3] = {0.0f, 0.5f, 0.25f}, h[3];
  kernels::rnn_gates(a, b, h, 3, 0.0f, true);
  EXPECT_EQ(h[0], 0.0f);
  EXPECT_EQ(h[1], 0.0f);
  EXPECT_EQ(h[2], 2.25f);
}

// The input product X W^T in either form, isomer's packed GEMM inside the step or a
// oneDNN matmul step before it that writes every direction's gates side by side
// ($ISOMER_GEMM chooses, as the CPU would): each direction reads its own columns at
// the product's row stride, in either layout, ragged or not, on one thread or two.
TEST(NativeRecurrence, BothInputProductsMatchTheReference) {
  setenv("ISOMER_RNN", "native", 1);
  for (const char* gemm : {"native", "onednn"}) {
    setenv("ISOMER_GEMM", gemm, 1);
    SCOPED_TRACE(std::string("ISOMER_GEMM=") + gemm);
    check_variant({"LSTM", "bidirectional", 1, 7, 3, 13, 21, true, true, 0.0, Lens::Constant}, 111, 1);
    check_variant({"GRU", "bidirectional", 0, 5, 2, 9, 17, true, false, 0.4, Lens::Input}, 112, 1);
    check_variant({"RNN", "reverse", 1, 6, 1, 11, 19, false, false, 0.0, Lens::Full}, 113, 1);
    check_variant({"LSTM", "forward", 0, 4, 4, 5, 256, true, true, 0.0, Lens::Full}, 114, 2);
    check_variant({"GRU", "bidirectional", 1, 3, 3, 10, 34, true, false, 0.0, Lens::Input}, 115, 2);
  }
  unsetenv("ISOMER_GEMM");
  unsetenv("ISOMER_RNN");
}

// Ragged sequences, clip and larger batches when clip or ragged lengths keep oneDNN
// out (no override): the native step is the only fast path then.
TEST(NativeRecurrence, ClipAndRaggedBatchesRunNativelyByDefault) {
  check_variant({"LSTM", "forward", 0, 7, 4, 5, 9, true, true, 0.4, Lens::Full}, 31, 1);
  check_variant({"GRU", "bidirectional", 1, 6, 5, 4, 8, true, false, 0.0, Lens::Constant}, 32, 1);
  check_variant({"RNN", "reverse", 0, 4, 2, 3, 7, false, false, 0.0, Lens::Input}, 33, 1);
}

// With no override, batches up to 4 run natively on one thread too (the step product
// keeps each panel in a register for every row there), larger ones on oneDNN.
TEST(NativeRecurrence, BatchesUpToFourRunNativelyOnOneThreadByDefault) {
  check_variant({"LSTM", "bidirectional", 1, 6, 2, 7, 20, false, false, 0.0, Lens::Full}, 61, 1);
  check_variant({"GRU", "forward", 0, 5, 3, 9, 33, true, false, 0.0, Lens::Full}, 62, 1);
  check_variant({"RNN", "reverse", 0, 4, 4, 6, 17, true, false, 0.0, Lens::Full}, 63, 1);
  const Variant large{"LSTM", "forward", 0, 4, 8, 5, 16, false, false, 0.0, Lens::Full};
  runtime::RuntimeOptions one_thread;
  one_thread.threads = 1;
  auto exe = runtime::compile(variant_graph(large, 64), one_thread);
  for (const runtime::StepInfo& st : exe->steps())
    EXPECT_EQ(st.signature.find(" native "), std::string::npos) << "batch 8 ran natively: " << st.signature;
}

// Each thread keeps its directions' working memory between runs; nodes of different
// sizes taking turns on it (the larger first, then a smaller, then the larger again)
// still match the reference on every run.
TEST(NativeRecurrence, NodesOfDifferentSizesShareAThreadsWorkingMemory) {
  setenv("ISOMER_RNN", "native", 1);
  const Variant big{"LSTM", "bidirectional", 0, 9, 3, 11, 40, true, true, 0.0, Lens::Constant};
  const Variant small{"GRU", "reverse", 1, 4, 2, 5, 12, true, false, 0.0, Lens::Full};
  for (int threads : {1, 2}) {
    runtime::RuntimeOptions o;
    o.threads = threads;
    const Graph gb = variant_graph(big, 71 + threads), gs = variant_graph(small, 81 + threads);
    auto eb = runtime::compile(gb, o), es = runtime::compile(gs, o);
    const std::vector<Tensor> ib = random_inputs(gb, 91), is = random_inputs(gs, 92);
    const std::vector<Tensor> wb = evaluate(gb, ib), ws = evaluate(gs, is);
    for (int round = 0; round < 2; ++round) {
      SCOPED_TRACE("threads " + std::to_string(threads) + " round " + std::to_string(round));
      CheckResult r = compare_outputs(wb, eb->run(ib), gb.output_names(), 1e-4);
      EXPECT_EQ(r.status, CheckResult::Status::Passed) << "LSTM: " << r.reason;
      r = compare_outputs(ws, es->run(is), gs.output_names(), 1e-4);
      EXPECT_EQ(r.status, CheckResult::Status::Passed) << "GRU: " << r.reason;
    }
  }
  unsetenv("ISOMER_RNN");
}

// A team of two splits each step's product by panels and its gates by units (steps of
// 1M multiply-adds or more: G * H * H * batch >= 2^20), also when the rows of a
// ragged batch sit at different time steps; smaller cells run on one thread of two;
// a bidirectional layer runs each direction on a thread of its own.
TEST(NativeRecurrence, TwoThreadsMatchTheReference) {
  setenv("ISOMER_RNN", "native", 1);
  check_variant({"LSTM", "reverse", 0, 4, 4, 12, 256, true, true, 0.0, Lens::Constant}, 41, 2);
  check_variant({"GRU", "bidirectional", 1, 3, 3, 10, 340, true, false, 0.5, Lens::Input}, 42, 2);
  check_variant({"RNN", "forward", 0, 3, 1, 8, 1030, false, false, 0.0, Lens::Full}, 43, 2);
  check_variant({"LSTM", "bidirectional", 1, 5, 2, 6, 20, false, true, 0.0, Lens::Full}, 44, 2);
  check_variant({"GRU", "forward", 1, 6, 3, 5, 340, true, false, 0.0, Lens::Input}, 45, 2);
  unsetenv("ISOMER_RNN");
}

// Threads that sleep between regions (the cores are busy): no step takes a team,
// however large, and the outputs stay the reference's.
TEST(NativeRecurrence, BusyCoresRunEveryStepOnOneThread) {
  setenv("ISOMER_RNN", "native", 1);
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  check_variant({"LSTM", "reverse", 0, 4, 4, 12, 256, true, true, 0.0, Lens::Constant}, 51, 2);
  check_variant({"RNN", "forward", 0, 3, 1, 8, 1030, false, false, 0.0, Lens::Full}, 52, 2);
  check_variant({"GRU", "bidirectional", 1, 3, 3, 10, 40, true, false, 0.0, Lens::Input}, 53, 2);
  unsetenv("OMP_WAIT_POLICY");
  unsetenv("ISOMER_RNN");
}

TEST(NativeRecurrence, TeamsFollowTheStepsWorkAndTheCores) {
  using runtime::recurrence_teams;
  // One thread: nothing to share.
  EXPECT_EQ(recurrence_teams(1, 1, 1, 4, 1024, true).steps, 1);
  EXPECT_FALSE(recurrence_teams(1, 2, 1, 4, 256, true).directions_apart);
  // Small steps (LSTM batch 1, hidden 64; GRU hidden 100: 16K and 30K multiply-adds) stay on one thread.
  EXPECT_EQ(recurrence_teams(2, 1, 1, 4, 64, true).steps, 1);
  EXPECT_EQ(recurrence_teams(2, 1, 1, 3, 100, true).steps, 1);
  // From 64K multiply-adds a step on (LSTM batch 1, hidden 128), a team, while the cores are free ...
  EXPECT_EQ(recurrence_teams(2, 1, 1, 4, 128, true).steps, 2);
  EXPECT_EQ(recurrence_teams(2, 1, 1, 4, 256, true).steps, 2);
  EXPECT_EQ(recurrence_teams(2, 1, 1, 4, 512, true).steps, 2);
  EXPECT_EQ(recurrence_teams(2, 1, 16, 3, 256, true).steps, 2);
  // ... and never while they are busy.
  EXPECT_EQ(recurrence_teams(2, 1, 1, 4, 512, false).steps, 1);
  EXPECT_EQ(recurrence_teams(2, 1, 16, 4, 1024, false).steps, 1);
  // Two directions: a thread each, busy or not, with no team inside.
  for (bool free_cores : {true, false}) {
    const runtime::RecurrenceTeams t = recurrence_teams(2, 2, 1, 4, 1024, free_cores);
    EXPECT_TRUE(t.directions_apart);
    EXPECT_EQ(t.steps, 1);
  }
}

// The probe alternates runs on the planned threads and on one thread at the start of
// each period, then keeps the kind whose probes took less time in all, until the next
// period probes again.
TEST(NativeRecurrence, ParallelProbeKeepsTheFasterKindUntilTheNextPeriod) {
  using runtime::ParallelProbe;
  ParallelProbe p;
  auto period = [&](double team_seconds, double solo_seconds) {
    std::vector<bool> kinds;
    for (int64_t r = 0; r < ParallelProbe::kPeriod; ++r) {
      const bool team = p.next_runs_parallel();
      kinds.push_back(team);
      // One lucky team probe (a tenth of its usual time) does not outweigh two slow ones.
      const double t = (team ? team_seconds : solo_seconds) * (team && r == 0 ? 0.1 : 1.0);
      p.record(team, t);
    }
    return kinds;
  };
  std::vector<bool> k = period(2e-3, 1e-3);  // busy cores: one thread is faster
  for (int64_t r = 0; r < 2 * ParallelProbe::kProbe; ++r) EXPECT_EQ(k[r], r % 2 == 0) << "probe run " << r;
  EXPECT_EQ(std::count(k.begin() + 2 * ParallelProbe::kProbe, k.end(), true), 0);
  k = period(1e-3, 2e-3);  // the cores are free again: the team comes back
  EXPECT_EQ(std::count(k.begin() + 2 * ParallelProbe::kProbe, k.end(), false), 0);
}

TEST(NativeRecurrence, SequenceLengthOutsideTheSequenceIsAnErrorNamingTheNode) {
  const Variant v{"GRU", "forward", 0, 4, 2, 3, 5, false, false, 0.0, Lens::Input};
  Graph g = variant_graph(v, 5);
  std::vector<Tensor> inputs = random_inputs(g, 6);
  inputs[1] = Tensor::from_f64(DType::Int32, {2}, std::vector<double>{4, 5});
  auto exe = runtime::compile(g, runtime::RuntimeOptions{});
  try {
    exe->run(inputs);
    FAIL() << "a length of 5 in a sequence of 4 ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence_lens value 5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace isomer
