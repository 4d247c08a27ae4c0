// `isomer mugraph emit-cuda MODEL.onnx --out DIR`: the model's μGraph regions as
// CUDA kernels (mugraph/cuda_emit.h). Per region, DIR/<name>.cu (the kernel and its
// C launcher) and DIR/<name>_in<k>.bin for each input the model fixes (raw float32,
// row-major: masks, scales); DIR/manifest.json lists every region's launcher,
// launch shape, inputs (model names, dims, constant files) and outputs.
//
// `isomer mugraph rank MODEL.onnx`: every region of the rewritten graph searched as
// `optimize --mugraph` does, with more of its ranking timed (--candidates), each timed kernel's predicted
// and measured time and Spearman's rank correlation of the two: how well the cost
// model orders the kernels it chooses among.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "ir/error.h"
#include "mugraph/cuda_emit.h"
#include "mugraph/fuse.h"
#include "onnx/onnx_io.h"
#include "pipeline/optimize.h"

namespace isomer::cli {

namespace {

struct EmitCudaArgs {
  std::string model, out;
  std::vector<std::string> input_shapes;
  double seconds = 30;
  int64_t rows = 32, chunk = 64, sms = 132, splits = 0, min_tiles = 0, min_blocks = 0;
};

std::string dims_json(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  require(f.good(), "cannot write '" + path.string() + "'");
}

int run_emit_cuda(const EmitCudaArgs& a) {
  ImportOptions io;
  io.input_shapes = input_shapes_from_flags(a.input_shapes);
  Graph g = import_onnx_file(a.model, io);
  mugraph::CudaEmitOptions opts;
  opts.search_seconds = a.seconds;
  opts.tiling.max_rows = a.rows;
  opts.tiling.chunk = a.chunk;
  opts.tiling.sms = a.sms;
  opts.tiling.splits = a.splits;
  opts.tiling.min_tiles = a.min_tiles;
  opts.tiling.min_blocks = a.min_blocks;
  opts.progress = [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
  std::vector<mugraph::CudaRegion> regions = mugraph::cuda_regions(g, opts);
  std::filesystem::path dir(a.out);
  std::filesystem::create_directories(dir);
  std::ostringstream m;
  m << "{\n  \"model\": \"" << json_escape(a.model) << "\",\n  \"regions\": [";
  for (size_t r = 0; r < regions.size(); ++r) {
    const mugraph::CudaRegion& cr = regions[r];
    const mugraph::CudaKernel& k = cr.kernel;
    write_text(dir / (k.name + ".cu"), k.source);
    m << (r ? ",\n" : "\n") << "    {\"name\": \"" << k.name << "\", \"source\": \"" << k.name << ".cu\", \"launcher\": \""
      << k.name << "_launch\", \"ops\": \"" << json_escape(cr.ops) << "\", \"kernel\": \"" << json_escape(cr.kernel_summary)
      << "\", \"cpu_kernel\": \"" << json_escape(cr.cpu_summary) << "\", \"structure\": \""
      << json_escape(cr.structure) << "\", \"field_check\": \"" << json_escape(cr.field_check)
      << "\", \"skip_table\": " << (cr.skips ? "true" : "false") << ", \"blocks\": " << k.blocks
      << ", \"threads\": " << k.threads << ", \"smem_bytes\": " << k.smem_bytes << ",\n     \"inputs\": [";
    for (size_t i = 0; i < cr.inputs.size(); ++i) {
      const mugraph::CudaRegionInput& in = cr.inputs[i];
      m << (i ? ", " : "") << "{\"name\": \"" << json_escape(in.name) << "\", \"dims\": " << dims_json(in.dims)
        << ", \"dtype\": \"" << (in.dtype == DType::Bool ? "bool" : "float32") << "\"";
      if (!in.constant.empty()) {
        const std::string file = k.name + "_in" + std::to_string(i) + ".bin";
        std::ofstream f(dir / file, std::ios::binary);
        f.write(reinterpret_cast<const char*>(in.constant.data()),
                static_cast<std::streamsize>(in.constant.size() * sizeof(float)));
        require(f.good(), "cannot write '" + (dir / file).string() + "'");
        m << ", \"constant\": \"" << file << "\"";
      }
      m << "}";
    }
    m << "],\n     \"outputs\": [";
    for (size_t i = 0; i < cr.output_dims.size(); ++i)
      m << (i ? ", " : "") << "{\"name\": \"" << json_escape(cr.output_name) << "\", \"dims\": " << dims_json(cr.output_dims[i])
        << ", \"dtype\": \"float32\"}";
    m << "]}";
    std::printf("%s: %s\n  %s (%lld blocks of %d threads, %zu bytes of shared memory%s)\n", k.name.c_str(),
                cr.ops.c_str(), cr.kernel_summary.c_str(), static_cast<long long>(k.blocks), k.threads, k.smem_bytes,
                cr.skips ? ", skip table" : "");
  }
  m << "\n  ]\n}\n";
  write_text(dir / "manifest.json", m.str());
  std::printf("wrote %zu region kernels and %s\n", regions.size(), (dir / "manifest.json").string().c_str());
  return 0;
}

struct RankArgs {
  std::string model;
  std::vector<std::string> input_shapes;
  int threads = 1, rounds = 7;
  size_t candidates = 12, states = 0;
};

int run_rank(const RankArgs& a) {
  ImportOptions io;
  io.input_shapes = input_shapes_from_flags(a.input_shapes);
  // The graph the fusion sees in `optimize` (its rewrites fold a mask's Where into a
  // constant the skip table reads).
  OptimizeOptions oo;
  oo.threads = a.threads;
  Graph g = rewrite_graph(import_onnx_file(a.model, io), oo, nullptr, nullptr, nullptr);
  mugraph::FuseOptions fo;
  fo.threads = a.threads;
  fo.candidates = a.candidates;
  fo.rounds = a.rounds;
  fo.search_states = a.states;
  fo.progress = [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
  mugraph::FuseReport report;
  mugraph::fuse_regions(g, fo, &report);
  for (const mugraph::RegionOutcome& r : report.regions) {
    std::printf("%s (%s): ", r.sink.c_str(), r.ops.c_str());
    if (r.timed == 0) {
      std::printf("nothing timed: %s\n", r.reason.c_str());
      continue;
    }
    std::printf("%zu kernels timed (%s), Spearman %.2f, unfused %.3f ms\n", r.timed, r.clock.c_str(),
                r.rank_correlation, r.unfused_ms);
    std::istringstream pm(r.predicted_vs_measured);
    std::string pair;
    for (size_t k = 0; k < r.timed_kernels.size() && pm >> pair; ++k)
      std::printf("  %-15s ms  %s\n", pair.c_str(), r.timed_kernels[k].c_str());
  }
  return 0;
}

}  // namespace

void add_mugraph_command(CLI::App& app) {
  CLI::App* mg = app.add_subcommand("mugraph", "μGraph kernels outside optimize");
  mg->require_subcommand(1);
  auto a = std::make_shared<EmitCudaArgs>();
  CLI::App* e = mg->add_subcommand("emit-cuda", "write the model's μGraph regions as CUDA kernels with C launchers");
  e->add_option("model", a->model, "model (.onnx)")->required();
  e->add_option("--out", a->out, "directory for the .cu files, constant inputs and manifest.json")->required();
  e->add_option("--input-shape", a->input_shapes, "fix an input's dims (repeatable)");
  e->add_option("--mugraph-seconds", a->seconds, "search seconds per loop choice of one region, a safety net past the state bound (default 30)");
  e->add_option("--rows", a->rows, "most output rows a block shares operand chunks across (default 32)");
  e->add_option("--chunk", a->chunk, "the reduction loop's chunk (default 64; 4x where a block has under 4 rows and the loop is not split)");
  e->add_option("--sms", a->sms, "multiprocessors of the target GPU: a grid of fewer tiles splits its loop (default 132, H100/H200)");
  e->add_option("--splits", a->splits, "split the reduction loop into this many runs combined after (default 0: from --sms; 1: never)");
  e->add_option("--min-tiles", a->min_tiles, "with a loop: fewest tiles (before a split) a larger tile of rows may leave (default 0: half of --sms)");
  e->add_option("--min-blocks", a->min_blocks, "fewest blocks (tiles x splits) a larger tile of rows may leave otherwise (default 0: two a multiprocessor)");
  e->callback([a] { set_action([a] { return naming_model(a->model, [a] { return run_emit_cuda(*a); }); }); });
  auto r = std::make_shared<RankArgs>();
  CLI::App* rk = mg->add_subcommand("rank", "time more of each region's ranked kernels: predicted vs measured, Spearman");
  rk->add_option("model", r->model, "model (.onnx)")->required();
  rk->add_option("--input-shape", r->input_shapes, "fix an input's dims (repeatable)");
  rk->add_option("--threads", r->threads, "threads of the timing runs (default 1)");
  rk->add_option("--candidates", r->candidates, "kernels timed per region: the best half by the cost model, then a spread over the rest (default 12)");
  rk->add_option("--rounds", r->rounds, "interleaved timing rounds (default 7)");
  rk->add_option("--mugraph-states", r->states, "search states per loop choice (default 5000)");
  rk->callback([r] { set_action([r] { return naming_model(r->model, [r] { return run_rank(*r); }); }); });
}

}  // namespace isomer::cli
