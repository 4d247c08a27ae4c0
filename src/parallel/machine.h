#pragma once
// The machine a plan is made for: nodes x devices per node, what a device computes
// and holds, and the links within and between nodes (cluster.json), seen as a
// device mesh.
//
//   {"nodes": 8, "devices_per_node": 8,
//    "device": {"tflops": 100, "memory_gb": 80, "bandwidth_gbps": 2000},
//    "intra_node": {"bandwidth_gbps": 2400, "latency_us": 5},
//    "inter_node": {"bandwidth_gbps": 200, "latency_us": 10}}
//
// Units: a device's "bandwidth_gbps" is its memory bandwidth in GB/s (gigabytes, as
// accelerator data sheets give it); link bandwidths are in Gbit/s (as networks are
// quoted). The inter-node bandwidth is what one node sends and receives, shared by
// its devices ("links_per_node" > 1 for nodes with one network card per device).
// Without "device", a device is this machine: operators are priced by isomer's cost
// model (measured or analytic) at their partitioned shapes, `threads_per_device`
// threads each, and the capacity is "memory_gb" at the top level (default: this
// machine's memory). A link may name a calibration file written by `isomer
// calibrate` ("calibration": "calib.json", relative to the cluster file): its fitted
// latency and bandwidth per collective replace the link's figures for that collective.
//
// The mesh: the node count and the devices per node are each split into prime
// factors, one mesh axis per factor (inter-node axes first, major to minor). A
// tensor dimension split over a list of axes is cut into the product of their sizes,
// block index in mixed radix over those axes; a collective over a set of axes runs in
// each group of devices that differ only in those coordinates.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace isomer::parallel {

enum class Collective { AllReduce, AllGather, ReduceScatter };
const char* collective_name(Collective c);  // "all_reduce", "all_gather", "reduce_scatter"

// Latency and bandwidth of one link class, per collective where calibrated.
struct LinkModel {
  double gbps = 100;        // Gbit/s
  double latency_us = 10;
  int links_per_node = 1;   // inter-node only: network cards per node
  struct Fit {
    double latency_us = 0, gbps = 0;
    // The measured (bytes per rank, ms) points, sorted, and the group size they were
    // measured on. MPI libraries switch algorithms with the message size (Open MPI's
    // tuned decisions), so one line does not pass through them all: a group of that
    // size reads its time off the points (linear between them; beyond the largest,
    // the fitted bandwidth; below the smallest, the smallest's time).
    int64_t ranks = 0;
    std::vector<std::pair<double, double>> points;
    // Milliseconds for `bytes` from the points (ranks == group size, points not empty).
    double measured_ms(double bytes) const;
  };
  std::map<Collective, Fit> fitted;  // from `isomer calibrate`
  std::string calibration;           // the file the fits came from, for reports

  // The per-step latency (us) and bandwidth (Gbit/s) a collective sees.
  Fit for_collective(Collective c) const;
};

struct DeviceRates {
  double tflops = 100;
  double memory_gbytes_per_s = 2000;
  double launch_us = 2;  // fixed cost of one operator
};

// What running a plan costs on a measured host beyond the operators' own times, as
// `isomer calibrate` measures it (its "host" object; see calibrate.h). The cost
// model times each operator alone, again and again: its weights stay in cache and
// no other rank competes for the core's neighbours. A step of a plan differs:
//  - every rank computes at once (`compute_contention`: time when all ranks of the
//    node run a kernel together over the time alone; virtual CPUs that share a
//    physical core, or a shared memory system, make it > 1);
//  - weights come from memory each step once the node's ranks hold more weight bytes
//    than the shared last-level cache (`cache_bytes`): each block's weight bytes
//    then cost bytes / `weight_stream_gbytes_per_s` more, the extra time per byte
//    measured by a chain of matrix products whose weights overflow the cache;
//  - every collective is a call into MPI made by the rank's one thread between two
//    compiled segments of its graph (parallel/execute.h): `dispatch_us` on the
//    compute stream, and while the collective runs the rank computes nothing
//    (`blocking_collectives`).
// The defaults change nothing (clusters of given rates, or no calibration).
struct HostOverheads {
  double dispatch_us = 0;
  double compute_contention = 1;
  double weight_stream_gbytes_per_s = 0;  // 0: weights never cost extra
  double cache_bytes = 0;
  bool blocking_collectives = false;
  std::string source;  // the calibration file it came from
};

struct Cluster {
  int nodes = 1;
  int devices_per_node = 1;
  std::optional<DeviceRates> device;  // nullopt: this machine, priced by the cost model
  double memory_gb = 0;               // capacity of one device
  LinkModel intra, inter;
  // Measured devices: the cost model ("measured" or "analytic"), its database and
  // the threads one device uses.
  std::string cost_model = "measured";
  std::string cost_db;
  int threads_per_device = 1;
  // Measured devices with a calibration that has a "host" object.
  HostOverheads host;

  int devices() const { return nodes * devices_per_node; }
  std::string describe() const;  // "2x8 devices (100 TFLOPS, 80 GB), 2400/200 Gbit/s"
};

// Parses cluster.json text; `file` names it in errors and anchors calibration paths.
Cluster parse_cluster(const std::string& text, const std::string& file = "<cluster>");
Cluster load_cluster(const std::string& path);

// Merges a calibration JSON (see calibrate.h) into `link`, and its "host" object (if
// any) into `host` (when not null). Throws Error naming the file.
void apply_calibration(LinkModel& link, const std::string& path, HostOverheads* host = nullptr);

struct MeshAxis {
  int size = 1;
  bool inter_node = false;
};

class Mesh {
 public:
  explicit Mesh(const Cluster& c);
  int devices() const { return devices_; }
  int num_axes() const { return static_cast<int>(axes_.size()); }
  const MeshAxis& axis(int a) const { return axes_[static_cast<size_t>(a)]; }
  const std::vector<MeshAxis>& axes() const { return axes_; }
  int devices_per_node() const { return devices_per_node_; }

  // Mesh coordinates of a device (device = node * devices_per_node + local).
  std::vector<int> coords(int device) const;
  // Product of the sizes of `axes` (1 for none).
  int64_t group_size(const std::vector<int>& axes) const;
  // The block index of `device` over `axes` (mixed radix, first axis major), and the
  // identity of its group (the coordinates on every other axis, as one number).
  int64_t position(int device, const std::vector<int>& axes) const;
  int64_t group_id(int device, const std::vector<int>& axes) const;
  std::string axes_text(const std::vector<int>& axes) const;  // "[n0 d0 d1]"

 private:
  std::vector<MeshAxis> axes_;
  int devices_ = 1, devices_per_node_ = 1;
};

// Milliseconds a collective over `axes` takes when each device contributes `bytes`
// (all-gather: its block; all-reduce and reduce-scatter: its whole buffer). Ring
// algorithms, hierarchical where the group spans nodes: a phase within each node
// over the intra-node link, a phase between nodes over the node's network link,
// which the groups of a node share.
double collective_ms(const Cluster& c, const Mesh& mesh, Collective kind, const std::vector<int>& axes, double bytes,
                     double latency_share = 1);

// Gradient summation of a weight: an all-reduce, its latency paid in proportion to
// the weight's share of a 25 MB bucket (data-parallel frameworks sum gradients in
// buckets: PyTorch DDP, Horovod), its bandwidth term in full.
constexpr double kGradientBucketBytes = 25e6;
double gradient_sync_ms(const Cluster& c, const Mesh& mesh, const std::vector<int>& axes, double bytes);

// The ring model's (steps, bytes factor) for `kind` over a group of g devices of one
// link class: time = steps * latency + factor * bytes / bandwidth. Calibration fits
// the measured times to it.
std::pair<double, double> ring_terms(Collective kind, int64_t g);

}  // namespace isomer::parallel
