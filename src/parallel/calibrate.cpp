#include "parallel/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "ir/error.h"
#include "ir/graph.h"
#include "runtime/runtime.h"

namespace isomer::parallel {

LinkModel::Fit fit_ring(Collective kind, int64_t g, const std::vector<std::pair<double, double>>& points) {
  require(points.size() >= 2 && g >= 2, "calibration needs two ranks and two message sizes");
  // Least squares on relative errors (weights 1/y^2): the sizes span three orders
  // of magnitude, and a plain fit lets the largest message decide the intercept
  // (the fixed cost of every collective, which small messages are made of).
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : points) {
    const double w = 1 / std::max(y * y, 1e-18);
    sw += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
  }
  double slope = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);  // ms per byte
  double intercept = (sy - slope * sx) / sw;                    // ms
  if (intercept < 0) {  // no fixed cost visible: the line through the origin
    intercept = 0;
    slope = sxy / sxx;
  }
  auto [steps, factor] = ring_terms(kind, g);
  LinkModel::Fit f;
  f.latency_us = intercept / steps * 1e3;
  f.gbps = slope > 0 ? factor * 8e-6 / slope : 1e6;
  return f;
}

namespace {

using Clock = std::chrono::steady_clock;

// Size of the largest (last-level) CPU cache, from sysfs; 0 if unknown.
double last_level_cache_bytes() {
  double best = 0;
  int best_level = 0;
  for (int k = 0; k < 8; ++k) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(k) + "/";
    std::ifstream level(dir + "level"), size(dir + "size");
    int l = 0;
    std::string text;
    if (!(level >> l) || !(size >> text) || text.empty()) continue;
    double bytes = std::atof(text.c_str());
    if (text.back() == 'K') bytes *= 1024;
    if (text.back() == 'M') bytes *= 1024 * 1024;
    if (l >= best_level) best_level = l, best = bytes;
  }
  return best;
}

// Milliseconds of one run of `exe`, repeated for about `seconds`: the first quartile,
// which other processes' bursts on a shared machine move less than the median.
double quartile_run_ms(runtime::Executable& exe, const std::vector<Tensor>& inputs, double seconds) {
  for (int k = 0; k < 3; ++k) exe.run(inputs);
  std::vector<double> ms;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end || ms.size() < 5) {
    const auto t = Clock::now();
    exe.run(inputs);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
  }
  std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 4), ms.end());
  return ms[ms.size() / 4];
}

// The mean over ranks of each rank's value.
double mean_over_ranks(Communicator& comm, double mine) {
  double sum = 0;
  for (const std::string& s : comm.all_gather_strings(std::string(reinterpret_cast<const char*>(&mine), sizeof mine)))
    sum += *reinterpret_cast<const double*>(s.data());
  return sum / comm.size();
}

// x[rows, k] through `layers` products with distinct [k, k] weights (nearly all zero:
// the time does not depend on their values), as one compiled graph.
std::unique_ptr<runtime::Executable> matmul_chain(int64_t rows, int64_t k, int layers, const runtime::RuntimeOptions& ro) {
  GraphBuilder b(false);
  Value x = b.input("x", {DType::Float32, make_shape({rows, k})});
  for (int l = 0; l < layers; ++l) {
    std::string bytes(static_cast<size_t>(k * k) * 4, '\0');
    const float mark = static_cast<float>(l + 1);  // distinct weights: nothing may share them
    std::memcpy(bytes.data(), &mark, sizeof mark);
    Tensor w(DType::Float32, {k, k}, std::move(bytes));
    x = b.op1("MatMul", {x, b.constant(std::move(w), "w" + std::to_string(l))});
  }
  return runtime::compile(b.finish({x}, {"y"}), ro);
}

}  // namespace

nlohmann::ordered_json measure_host(Communicator& comm, int threads) {
  runtime::RuntimeOptions ro;
  ro.threads = threads;
  ro.delegate_opaque = false;
  runtime::set_threads(threads);
  const int g = comm.size();
  const double seconds = 0.25;
  // One compiled segment's fixed cost: a 16-element Relu.
  GraphBuilder b(false);
  Value x = b.input("x", {DType::Float32, make_shape({1, 16})});
  auto tiny = runtime::compile(b.finish({b.op1("Relu", {x})}, {"y"}), ro);
  const double dispatch_ms = mean_over_ranks(comm, quartile_run_ms(*tiny, {Tensor(DType::Float32, {1, 16}, std::string(64, '\0'))}, seconds));
  // One [32,1024]x[1024,1024] product, its 4 MB weight in cache: rank 0 alone (the
  // others asleep, not spinning in a barrier), then every rank at once.
  const int64_t rows = 32, k = 1024;
  const double weight_bytes = static_cast<double>(k * k * 4);
  const std::vector<Tensor> in{Tensor(DType::Float32, {rows, k}, std::string(static_cast<size_t>(rows * k) * 4, '\0'))};
  auto one = matmul_chain(rows, k, 1, ro);
  comm.barrier();
  double alone = 0;
  if (comm.rank() == 0) alone = quartile_run_ms(*one, in, seconds);
  else std::this_thread::sleep_for(std::chrono::duration<double>(seconds + 0.2));
  comm.barrier();
  alone = mean_over_ranks(comm, alone) * g;  // rank 0's figure, on every rank
  const double together = mean_over_ranks(comm, quartile_run_ms(*one, in, seconds));
  // A chain of such products whose weights overflow the cache shared by the ranks.
  const double cache = last_level_cache_bytes();
  const int layers = std::max(4, static_cast<int>(std::ceil(2 * cache / (weight_bytes * g))));
  auto chain = matmul_chain(rows, k, layers, ro);
  comm.barrier();
  const double cold = mean_over_ranks(comm, quartile_run_ms(*chain, in, seconds)) / layers;
  const double extra_ms = cold - together;
  nlohmann::ordered_json h;
  h["dispatch_us"] = dispatch_ms * 1e3;
  h["compute_contention"] = std::max(1.0, together / alone);
  h["weight_stream_gbytes_per_s"] = extra_ms > 0 ? weight_bytes / (extra_ms * 1e-3) / 1e9 : 0.0;
  h["cache_bytes"] = cache;
  h["blocking_collectives"] = true;
  h["matmul_ms"] = {{"alone", alone}, {"all_ranks", together}, {"weights_from_memory", cold}};
  h["threads"] = threads;
  return h;
}

std::string calibrate(Communicator& comm, const CalibrateOptions& o) {
  const int g = comm.size();
  require(g >= 2, "isomer calibrate needs at least two ranks (mpirun -np 2 isomer calibrate ...)");
  std::vector<int> world(static_cast<size_t>(g));
  for (int k = 0; k < g; ++k) world[static_cast<size_t>(k)] = k;
  nlohmann::ordered_json j;
  j["ranks"] = g;
  j["link"] = o.link;
  j["library"] = comm.name();
  nlohmann::ordered_json collectives;
  for (Collective kind : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter}) {
    std::vector<std::pair<double, double>> points;
    nlohmann::ordered_json pts = nlohmann::ordered_json::array();
    for (int64_t bytes : o.sizes) {
      const size_t count = static_cast<size_t>(bytes / 4 / g * g);  // floats, divisible by the group
      std::vector<float> in(count, 1.0f), out(count * static_cast<size_t>(g));
      std::vector<double> mine;
      for (int r = 0; r < o.repeat + 2; ++r) {
        comm.barrier();
        const double t = comm.wtime();
        switch (kind) {
          case Collective::AllReduce: comm.all_reduce_sum(world, in.data(), count, DType::Float32); break;
          case Collective::AllGather: comm.all_gather(world, in.data(), count * 4, out.data()); break;
          case Collective::ReduceScatter:
            comm.reduce_scatter_sum(world, in.data(), out.data(), count / static_cast<size_t>(g), DType::Float32);
            break;
        }
        if (r >= 2) mine.push_back((comm.wtime() - t) * 1e3);
      }
      // The slowest rank decides each repetition; the median repetition is the point.
      std::vector<std::string> all =
          comm.all_gather_strings(std::string(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(double)));
      std::vector<double> slowest(mine.size(), 0);
      for (const std::string& s : all)
        for (size_t k = 0; k < slowest.size(); ++k)
          slowest[k] = std::max(slowest[k], reinterpret_cast<const double*>(s.data())[k]);
      std::sort(slowest.begin(), slowest.end());
      const double ms = slowest[slowest.size() / 2];
      points.emplace_back(static_cast<double>(count * 4), ms);
      pts.push_back({count * 4, ms});
    }
    const LinkModel::Fit f = fit_ring(kind, g, points);
    double worst = 0;
    auto [steps, factor] = ring_terms(kind, g);
    for (const auto& [x, y] : points) {
      const double model = steps * f.latency_us * 1e-3 + factor * x * 8.0 / (f.gbps * 1e9) * 1e3;
      worst = std::max(worst, std::abs(model - y) / y);
    }
    collectives[collective_name(kind)] = {{"latency_us", f.latency_us}, {"bandwidth_gbps", f.gbps},
                                          {"fit_max_rel_error", worst}, {"points_bytes_ms", pts}};
  }
  j["collectives"] = collectives;
  if (o.host) j["host"] = measure_host(comm, o.threads);
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace isomer::parallel
