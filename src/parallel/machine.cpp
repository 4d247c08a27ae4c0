#include "parallel/machine.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ir/error.h"

namespace isomer::parallel {

namespace {

using json = nlohmann::json;

std::string read_text(const std::string& path, const std::string& what) {
  std::ifstream f(path, std::ios::binary);
  require(f.good(), "cannot read " + what + " '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A positive number at obj[key]; `dflt` where absent (nullopt: required).
double number(const json& obj, const char* key, std::optional<double> dflt, const std::string& where) {
  if (!obj.contains(key)) {
    require(dflt.has_value(), where + ": missing \"" + key + "\"");
    return *dflt;
  }
  const json& v = obj.at(key);
  require(v.is_number(), where + ": \"" + key + "\" must be a number");
  const double x = v.get<double>();
  require(x > 0 || (x == 0 && std::string(key) == "latency_us"), where + ": \"" + key + "\" must be positive");
  return x;
}

int count(const json& obj, const char* key, int dflt, const std::string& where) {
  if (!obj.contains(key)) return dflt;
  const json& v = obj.at(key);
  require(v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= 1 << 20,
          where + ": \"" + key + "\" must be a positive integer");
  return v.get<int>();
}

LinkModel parse_link(const json& obj, const std::string& where, const std::string& base_dir, double gbps,
                     double latency_us, HostOverheads* host) {
  LinkModel l;
  l.gbps = gbps;
  l.latency_us = latency_us;
  if (obj.is_null()) return l;
  require(obj.is_object(), where + " must be an object");
  l.gbps = number(obj, "bandwidth_gbps", gbps, where);
  l.latency_us = number(obj, "latency_us", latency_us, where);
  l.links_per_node = count(obj, "links_per_node", 1, where);
  if (obj.contains("calibration")) {
    require(obj["calibration"].is_string(), where + ": \"calibration\" must be a file name");
    std::filesystem::path p = obj["calibration"].get<std::string>();
    if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
    apply_calibration(l, p.string(), host);
  }
  return l;
}

double machine_memory_gb() {
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<double>(pages) * static_cast<double>(size) / 1e9 : 16;
}

std::vector<int> prime_factors(int n) {
  std::vector<int> f;
  for (int p = 2; p * p <= n; ++p)
    while (n % p == 0) {
      f.push_back(p);
      n /= p;
    }
  if (n > 1) f.push_back(n);
  return f;
}

}  // namespace

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::AllGather: return "all_gather";
    case Collective::ReduceScatter: return "reduce_scatter";
  }
  return "?";
}

double LinkModel::Fit::measured_ms(double bytes) const {
  const auto& p = points;
  if (bytes <= p.front().first || p.size() == 1) return p.front().second;
  for (size_t k = 1; k < p.size(); ++k)
    if (bytes <= p[k].first) {
      const double t = (bytes - p[k - 1].first) / (p[k].first - p[k - 1].first);
      return p[k - 1].second + t * (p[k].second - p[k - 1].second);
    }
  // Beyond the largest: the bandwidth between the two largest sizes.
  const auto& [x0, y0] = p[p.size() - 2];
  const auto& [x1, y1] = p.back();
  return y1 + (bytes - x1) * std::max(0.0, (y1 - y0) / (x1 - x0));
}

LinkModel::Fit LinkModel::for_collective(Collective c) const {
  auto it = fitted.find(c);
  return it != fitted.end() ? it->second : Fit{latency_us, gbps};
}

std::string Cluster::describe() const {
  char buf[256];
  std::string dev = device ? (std::to_string(static_cast<int>(device->tflops)) + " TFLOPS") : "this machine";
  std::snprintf(buf, sizeof buf, "%dx%d devices (%s, %.0f GB), links %g/%g Gbit/s", nodes, devices_per_node,
                dev.c_str(), memory_gb, intra.gbps, inter.gbps);
  return buf;
}

void apply_calibration(LinkModel& link, const std::string& path, HostOverheads* host) {
  json j;
  try {
    j = json::parse(read_text(path, "calibration file"));
  } catch (const json::exception& e) {
    throw Error("calibration file '" + path + "': " + e.what());
  }
  require(j.is_object() && j.contains("collectives") && j["collectives"].is_object(),
          "calibration file '" + path + "': no \"collectives\" object");
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter}) {
    if (!j["collectives"].contains(collective_name(c))) continue;
    const json& f = j["collectives"][collective_name(c)];
    const std::string where = "calibration file '" + path + "': " + collective_name(c);
    LinkModel::Fit fit{number(f, "latency_us", 0.0, where), number(f, "bandwidth_gbps", std::nullopt, where)};
    if (f.contains("points_bytes_ms") && j.contains("ranks")) {
      require(j["ranks"].is_number_integer() && j["ranks"].get<int64_t>() >= 2, where + ": \"ranks\" must be an integer >= 2");
      fit.ranks = j["ranks"].get<int64_t>();
      const json& pts = f["points_bytes_ms"];
      require(pts.is_array(), where + ": \"points_bytes_ms\" must be an array of [bytes, ms]");
      for (const json& pt : pts) {
        require(pt.is_array() && pt.size() == 2 && pt[0].is_number() && pt[1].is_number() && pt[0].get<double>() > 0 &&
                    pt[1].get<double>() >= 0,
                where + ": \"points_bytes_ms\" must be an array of [bytes > 0, ms >= 0]");
        fit.points.emplace_back(pt[0].get<double>(), pt[1].get<double>());
      }
      std::sort(fit.points.begin(), fit.points.end());
      for (size_t k = 1; k < fit.points.size(); ++k)
        require(fit.points[k].first > fit.points[k - 1].first, where + ": \"points_bytes_ms\" repeats a size");
    }
    link.fitted[c] = std::move(fit);
  }
  link.calibration = path;
  if (host == nullptr || !j.contains("host")) return;
  const json& h = j["host"];
  const std::string where = "calibration file '" + path + "': host";
  require(h.is_object(), where + " must be an object");
  auto non_negative = [&](const char* key) {
    if (!h.contains(key)) return 0.0;
    require(h[key].is_number() && h[key].get<double>() >= 0, where + ": \"" + std::string(key) + "\" must be a number >= 0");
    return h[key].get<double>();
  };
  HostOverheads o;
  o.dispatch_us = non_negative("dispatch_us");
  o.compute_contention = std::max(1.0, non_negative("compute_contention"));
  o.weight_stream_gbytes_per_s = non_negative("weight_stream_gbytes_per_s");
  o.cache_bytes = non_negative("cache_bytes");
  require(!h.contains("blocking_collectives") || h["blocking_collectives"].is_boolean(),
          where + ": \"blocking_collectives\" must be true or false");
  o.blocking_collectives = h.value("blocking_collectives", true);
  o.source = path;
  *host = o;
}

Cluster parse_cluster(const std::string& text, const std::string& file) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error("cluster file '" + file + "': " + e.what());
  }
  const std::string where = "cluster file '" + file + "'";
  require(j.is_object(), where + ": not a JSON object");
  const std::string base_dir = std::filesystem::path(file).parent_path().string();
  Cluster c;
  c.nodes = count(j, "nodes", 1, where);
  c.devices_per_node = count(j, "devices_per_node", 1, where);
  require(c.devices() <= 4096, where + ": at most 4096 devices");
  if (j.contains("device") && !j["device"].is_null()) {
    const json& d = j["device"];
    require(d.is_object(), where + ": \"device\" must be an object");
    DeviceRates r;
    r.tflops = number(d, "tflops", std::nullopt, where + " device");
    r.memory_gbytes_per_s = number(d, "bandwidth_gbps", std::nullopt, where + " device");
    r.launch_us = number(d, "launch_us", 2.0, where + " device");
    c.device = r;
    c.memory_gb = number(d, "memory_gb", std::nullopt, where + " device");
  } else {
    c.memory_gb = number(j, "memory_gb", machine_memory_gb(), where);
    if (j.contains("cost_model")) {
      require(j["cost_model"] == "measured" || j["cost_model"] == "analytic",
              where + ": \"cost_model\" must be \"measured\" or \"analytic\"");
      c.cost_model = j["cost_model"].get<std::string>();
    }
    if (j.contains("cost_db")) c.cost_db = j["cost_db"].get<std::string>();
    c.threads_per_device = count(j, "threads_per_device", 1, where);
  }
  // A calibration's host overheads are this machine's: they apply to measured devices only.
  HostOverheads* host = c.device ? nullptr : &c.host;
  c.intra = parse_link(j.value("intra_node", json()), where + " intra_node", base_dir, 2400, 5, host);
  c.inter = parse_link(j.value("inter_node", json()), where + " inter_node", base_dir, 200, 10, host);
  for (const auto& [key, _] : j.items()) {
    static const char* known[] = {"nodes", "devices_per_node", "device", "intra_node", "inter_node",
                                  "memory_gb", "cost_model", "cost_db", "threads_per_device", "name"};
    require(std::find_if(std::begin(known), std::end(known), [&](const char* k) { return key == k; }) !=
                std::end(known),
            where + ": unknown key \"" + key + "\"");
  }
  return c;
}

Cluster load_cluster(const std::string& path) { return parse_cluster(read_text(path, "cluster file"), path); }

Mesh::Mesh(const Cluster& c) : devices_(c.devices()), devices_per_node_(c.devices_per_node) {
  for (int p : prime_factors(c.nodes)) axes_.push_back({p, true});
  for (int p : prime_factors(c.devices_per_node)) axes_.push_back({p, false});
}

std::vector<int> Mesh::coords(int device) const {
  std::vector<int> c(axes_.size());
  for (int a = num_axes() - 1; a >= 0; --a) {
    c[a] = device % axes_[a].size;
    device /= axes_[a].size;
  }
  return c;
}

int64_t Mesh::group_size(const std::vector<int>& axes) const {
  int64_t g = 1;
  for (int a : axes) g *= axes_[a].size;
  return g;
}

int64_t Mesh::position(int device, const std::vector<int>& axes) const {
  const std::vector<int> c = coords(device);
  int64_t p = 0;
  for (int a : axes) p = p * axes_[a].size + c[a];
  return p;
}

int64_t Mesh::group_id(int device, const std::vector<int>& axes) const {
  const std::vector<int> c = coords(device);
  int64_t id = 0;
  for (int a = 0; a < num_axes(); ++a)
    if (std::find(axes.begin(), axes.end(), a) == axes.end()) id = id * axes_[a].size + c[a];
  return id;
}

std::string Mesh::axes_text(const std::vector<int>& axes) const {
  std::string s = "[";
  int inter = 0, intra = 0;
  std::vector<int> index(axes_.size());
  for (int a = 0; a < num_axes(); ++a) index[a] = axes_[a].inter_node ? inter++ : intra++;
  for (size_t i = 0; i < axes.size(); ++i)
    s += (i ? " " : "") + std::string(axes_[axes[i]].inter_node ? "n" : "d") + std::to_string(index[axes[i]]);
  return s + "]";
}

std::pair<double, double> ring_terms(Collective kind, int64_t g) {
  const double n = static_cast<double>(g);
  switch (kind) {
    case Collective::AllReduce: return {2 * (n - 1), 2 * (n - 1) / n};
    case Collective::AllGather: return {n - 1, n - 1};
    case Collective::ReduceScatter: return {n - 1, (n - 1) / n};
  }
  return {0, 0};
}

double gradient_sync_ms(const Cluster& c, const Mesh& mesh, const std::vector<int>& axes, double bytes) {
  const double share = std::min(1.0, bytes / kGradientBucketBytes);
  return collective_ms(c, mesh, Collective::AllReduce, axes, bytes, share);
}

double collective_ms(const Cluster& c, const Mesh& mesh, Collective kind, const std::vector<int>& axes, double bytes,
                     double latency_share) {
  if (axes.empty() || bytes <= 0) return 0;
  int64_t m = 1, k = 1;  // group devices within one node, nodes spanned
  for (int a : axes) (mesh.axis(a).inter_node ? k : m) *= mesh.axis(a).size;
  // One ring phase over g devices of a link class; `share` groups use the link at once.
  auto phase = [&](const LinkModel& link, int64_t g, double b, double share) {
    if (g <= 1) return 0.0;
    auto [steps, factor] = ring_terms(kind, g);
    const LinkModel::Fit f = link.for_collective(kind);
    if (f.ranks == g && !f.points.empty()) {
      // Measured on groups of this size: the time read off the points, `share`
      // groups' bytes at once; the fixed cost (the smallest message's time) in
      // proportion to `latency_share`.
      const double fixed = f.points.front().second;
      return f.measured_ms(share * b) - (1 - latency_share) * fixed;
    }
    return latency_share * steps * f.latency_us * 1e-3 + share * factor * b * 8.0 / (f.gbps * 1e9) * 1e3;
  };
  const double nic_share = static_cast<double>(mesh.devices_per_node()) / c.inter.links_per_node;
  switch (kind) {
    case Collective::AllReduce:
    case Collective::ReduceScatter:
      // Reduce-scatter within the node, then each device's 1/m across the nodes.
      return phase(c.intra, m, bytes, 1) + phase(c.inter, k, bytes / static_cast<double>(m), nic_share);
    case Collective::AllGather:
      // Each device's block crosses to the other nodes once; then within the node.
      return phase(c.inter, k, bytes, nic_share) + phase(c.intra, m, bytes * static_cast<double>(k), 1);
  }
  return 0;
}

}  // namespace isomer::parallel
