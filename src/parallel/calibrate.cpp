#include "parallel/calibrate.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "ir/error.h"

namespace isomer::parallel {

LinkModel::Fit fit_ring(Collective kind, int64_t g, const std::vector<std::pair<double, double>>& points) {
  require(points.size() >= 2 && g >= 2, "calibration needs two ranks and two message sizes");
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double n = static_cast<double>(points.size());
  for (const auto& [x, y] : points) {
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);  // ms per byte
  const double intercept = std::max(0.0, (sy - slope * sx) / n);   // ms
  auto [steps, factor] = ring_terms(kind, g);
  LinkModel::Fit f;
  f.latency_us = intercept / steps * 1e3;
  f.gbps = slope > 0 ? factor * 8e-6 / slope : 1e6;
  return f;
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
  return j.dump(2) + "\n";
}

}  // namespace isomer::parallel
