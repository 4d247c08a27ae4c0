#include "parallel/plan.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ir/error.h"
#include "onnx/onnx_io.h"
#include "parallel/lower.h"
#include "passes/passes.h"

namespace isomer::parallel {

namespace {

using json = nlohmann::ordered_json;

std::string tensor_name(const Node& n, int o) {
  if (static_cast<size_t>(o) < n.output_names().size() && !n.output_names()[static_cast<size_t>(o)].empty())
    return n.output_names()[static_cast<size_t>(o)];
  return (n.name().empty() ? n.op_type() : n.name()) + ":" + std::to_string(o);
}

json layout_json(const Layout& l, const Mesh& mesh, const std::vector<int64_t>& dims) {
  json j;
  j["text"] = layout_text(l, mesh);
  json d = json::array();
  for (size_t k = 0; k < l.dims.size(); ++k) {
    json axes = json::array();
    for (int a : l.dims[k]) axes.push_back(a);
    d.push_back({{"size", dims[k]}, {"degree", mesh.group_size(l.dims[k])}, {"mesh_axes", axes}});
  }
  j["dims"] = d;
  j["replica"] = l.partial.empty() ? "copies" : "partial_sums";
  json p = json::array();
  for (int a : l.partial) p.push_back(a);
  j["partial_mesh_axes"] = p;
  return j;
}

// The parallel operators a redistribution step is (Unity's PCG) and its collective.
json step_json(const CommStep& st, const Mesh& mesh) {
  const char* ops = "";
  const char* collective = "none";
  switch (st.kind) {
    case CommStep::Kind::Slice: ops = "Partition"; break;
    case CommStep::Kind::AllGather: ops = "Combine+Replicate"; collective = "all_gather"; break;
    case CommStep::Kind::AllReduce: ops = "Reduce+Replicate"; collective = "all_reduce"; break;
    case CommStep::Kind::ReduceScatter: ops = "Reduce+Partition"; collective = "reduce_scatter"; break;
  }
  json axes = json::array();
  for (int a : st.axes) axes.push_back(a);
  return {{"parallel_ops", ops},   {"collective", collective}, {"mesh_axes", axes},
          {"group", mesh.axes_text(st.axes)}, {"dim", st.dim}, {"block_before", st.local_before},
          {"block_after", st.local_after}};
}

json result_json(const SimResult& r) {
  return {{"step_ms", r.step_ms},      {"compute_ms", r.compute_ms},     {"communication_ms", r.comm_ms},
          {"overlap_ms", r.overlap_ms}, {"memory_per_device_bytes", r.memory_bytes}, {"fits_memory", r.fits}};
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  require(f.good(), "cannot write '" + path + "'");
  f << text;
  require(f.good(), "cannot write '" + path + "'");
}

}  // namespace

Graph prepare_model(const std::string& path, const ModelOptions& opts) {
  Graph first = import_onnx_file(path);
  ImportOptions io;
  for (const NodePtr& in : first.inputs()) {
    const Shape& s = in->output_types()[0].shape;
    auto given = opts.input_shapes.find(in->name());
    if (given != opts.input_shapes.end()) {
      io.input_shapes[in->name()] = given->second;
      continue;
    }
    std::vector<int64_t> dims;
    for (size_t d = 0; d < s.size(); ++d) {
      if (d == 0 && opts.batch > 0) {
        dims.push_back(opts.batch);
        continue;
      }
      require(s[d].is_static(), path + ": input '" + in->name() + "' has a dynamic dimension " + std::to_string(d) +
                                    (d == 0 ? " (give --batch N)" : " (give --input-shape " + in->name() + ":...)"));
      dims.push_back(s[d].value);
    }
    io.input_shapes[in->name()] = dims;
  }
  return simplify(import_onnx_file(path, io));
}

std::string write_plan(const std::string& dir, const ParallelSearchReport& rep, const Cluster& cluster,
                       const PlanMeta& meta, bool rank_graphs) {
  std::filesystem::create_directories(dir);
  const ParallelGraph& pg = *rep.best.graph;
  const Mesh& mesh = pg.mesh();
  const Strategy& s = rep.best.strategy;
  json j;
  j["model"] = meta.model;
  j["mode"] = mode_name(meta.mode);
  j["batch"] = meta.batch;
  j["cluster"] = {{"nodes", cluster.nodes},
                  {"devices_per_node", cluster.devices_per_node},
                  {"description", cluster.describe()},
                  {"intra_node_calibration", cluster.intra.calibration},
                  {"inter_node_calibration", cluster.inter.calibration}};
  if (!cluster.host.source.empty())
    j["cluster"]["host_overheads"] = {{"calibration", cluster.host.source},
                                      {"dispatch_us", cluster.host.dispatch_us},
                                      {"compute_contention", cluster.host.compute_contention},
                                      {"weight_stream_gbytes_per_s", cluster.host.weight_stream_gbytes_per_s},
                                      {"cache_bytes", cluster.host.cache_bytes},
                                      {"blocking_collectives", cluster.host.blocking_collectives}};
  json axes = json::array(), devices = json::array();
  for (int a = 0; a < mesh.num_axes(); ++a)
    axes.push_back({{"name", mesh.axes_text({a})}, {"size", mesh.axis(a).size},
                    {"link", mesh.axis(a).inter_node ? "inter_node" : "intra_node"}});
  for (int d = 0; d < mesh.devices(); ++d)
    devices.push_back({{"rank", d}, {"node", d / cluster.devices_per_node}, {"local", d % cluster.devices_per_node},
                       {"coords", mesh.coords(d)}});
  j["mesh"] = {{"devices", mesh.devices()}, {"axes", axes}, {"ranks", devices}};
  j["predicted_step_ms"] = rep.best.sim.step_ms;
  j["predicted"] = result_json(rep.best.sim);
  j["data_parallel_step_ms"] = rep.data_parallel.sim.step_ms;
  j["data_parallel"] = result_json(rep.data_parallel.sim);
  j["speedup_vs_data_parallel"] = rep.data_parallel.sim.step_ms / rep.best.sim.step_ms;
  if (rep.megatron) {
    j["megatron_step_ms"] = rep.megatron->sim.step_ms;
    j["megatron"] = result_json(rep.megatron->sim);
  }
  j["search"] = {{"algorithm", meta.algorithm},     {"seed", meta.seed},          {"steps", rep.steps},
                 {"accepted", rep.accepted},        {"graphs_rewritten", rep.graphs}, {"stop_reason", rep.stop_reason},
                 {"seconds", rep.seconds},          {"mcmc_seconds", rep.mcmc_seconds},
                 {"mcmc_start_step_ms", rep.start_ms},
                 {"incremental_simulation_us", rep.incremental_us},
                 {"full_simulation_us", rep.full_us}};
  json rules = json::object();
  for (const auto& [name, count] : rep.best.rules_applied) rules[name] = count;
  j["rules_applied"] = rules;
  json ops = json::array(), moves = json::array();
  for (int i = 0; i < pg.size(); ++i) {
    const Node& n = pg.node(i);
    const OpConfig& c = pg.config(i, s[static_cast<size_t>(i)]);
    json degrees = json::array();
    for (size_t p = 0; p < c.axes.size(); ++p)
      degrees.push_back({{"kind", std::string(1, pg.spec(i).dims[p].kind)}, {"degree", mesh.group_size(c.axes[p])},
                         {"mesh_axes", c.axes[p]}});
    json outs = json::array();
    for (int o = 0; o < static_cast<int>(n.num_outputs()); ++o)
      outs.push_back({{"tensor", tensor_name(n, o)}, {"layout", layout_json(pg.output_layout(i, c, o), mesh, pg.out_dims(i, o))}});
    ops.push_back({{"name", n.name()}, {"op", n.op_type()}, {"config", pg.config_text(i, c)}, {"dims", degrees},
                   {"outputs", outs}});
    for (int k = 0; k < static_cast<int>(pg.operands(i).size()); ++k) {
      const Operand& o = pg.operands(i)[static_cast<size_t>(k)];
      if (o.kind != Operand::Kind::Op) continue;
      const Layout from = pg.output_layout(o.index, pg.config(o.index, s[static_cast<size_t>(o.index)]), o.output);
      const Layout to = pg.input_layout(i, c, k);
      if (from == to) continue;
      json steps = json::array();
      for (const CommStep& st : redistribute(from, to, pg.out_dims(o.index, o.output), mesh)) steps.push_back(step_json(st, mesh));
      moves.push_back({{"tensor", tensor_name(pg.node(o.index), o.output)}, {"to", n.name()}, {"input", k},
                       {"from_layout", layout_text(from, mesh)}, {"to_layout", layout_text(to, mesh)}, {"steps", steps}});
    }
  }
  for (const auto& [p, o] : pg.graph_outputs()) {
    const Layout from = pg.output_layout(p, pg.config(p, s[static_cast<size_t>(p)]), o);
    const Layout to = Layout::replicated(pg.out_dims(p, o).size());
    if (from == to) continue;
    json steps = json::array();
    for (const CommStep& st : redistribute(from, to, pg.out_dims(p, o), mesh)) steps.push_back(step_json(st, mesh));
    moves.push_back({{"tensor", tensor_name(pg.node(p), o)}, {"to", "graph output"}, {"from_layout", layout_text(from, mesh)},
                     {"to_layout", layout_text(to, mesh)}, {"steps", steps}});
  }
  j["operators"] = ops;
  j["parallel_ops"] = moves;
  j["graph"] = "graph.onnx";
  json ranks = json::array();
  export_onnx_file(pg.graph(), (std::filesystem::path(dir) / "graph.onnx").string());
  if (rank_graphs) {
    for (int r = 0; r < mesh.devices(); ++r) {
      const std::string file = "rank" + std::to_string(r) + ".onnx";
      export_onnx_file(lower_rank(pg, s, r), (std::filesystem::path(dir) / file).string());
      ranks.push_back(file);
    }
  }
  j["rank_graphs"] = ranks;
  j["sharding_annotations"] =
      "not written: Debian's libonnx (1.12, IR 8) has no NodeProto 'configuration' field (ONNX IR 11)";
  const std::string text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  write_text((std::filesystem::path(dir) / "plan.json").string(), text);
  return text;
}

LoadedPlan load_plan(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "plan.json").string();
  std::ifstream f(path);
  require(f.good(), "cannot read plan '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  json j;
  try {
    j = json::parse(ss.str());
  } catch (const json::exception& e) {
    throw Error("plan '" + path + "': " + e.what());
  }
  LoadedPlan p;
  p.dir = dir;
  try {
    p.devices = j.at("mesh").at("devices").get<int>();
    for (const auto& r : j.at("rank_graphs")) p.rank_files.push_back((std::filesystem::path(dir) / r.get<std::string>()).string());
    p.graph_file = (std::filesystem::path(dir) / j.at("graph").get<std::string>()).string();
    p.predicted_step_ms = j.at("predicted_step_ms").get<double>();
    p.mode = j.at("mode").get<std::string>();
  } catch (const json::exception& e) {
    throw Error("plan '" + path + "': " + e.what());
  }
  require(static_cast<int>(p.rank_files.size()) == p.devices,
          "plan '" + path + "' has no rank graphs (written with --skip-rank-graphs?)");
  return p;
}

}  // namespace isomer::parallel
