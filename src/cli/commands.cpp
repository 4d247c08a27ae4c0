#include "cli/commands.h"

#include <filesystem>
#include <new>
#include <stdexcept>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>

#include "check/open_dims.h"
#include "ir/error.h"
#include "onnx/onnx_io.h"
#include "pipeline/optimize.h"

namespace isomer::cli {

namespace {

// "name:1,3,224,224" -> {"name", {1,3,224,224}}
std::pair<std::string, std::vector<int64_t>> parse_input_shape(const std::string& spec) {
  size_t colon = spec.rfind(':');
  require(colon != std::string::npos && colon > 0, "--input-shape '" + spec + "' must look like name:1,3,224,224");
  std::vector<int64_t> dims;
  std::string rest = spec.substr(colon + 1);
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t comma = rest.find(',', pos);
    std::string item = rest.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    require(!item.empty() && end && *end == '\0' && v >= 0,
            "--input-shape '" + spec + "': '" + item + "' is not a dimension");
    dims.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return {spec.substr(0, colon), dims};
}

struct ConvertArgs {
  std::string input, output;
  std::vector<std::string> input_shapes;
  bool external_data = false;
};

int run_convert(const ConvertArgs& a) {
  ImportOptions opts;
  opts.input_shapes = input_shapes_from_flags(a.input_shapes);
  ImportStats stats;
  Graph g = import_onnx_file(a.input, opts, &stats);
  ExportOptions eo;
  eo.external_data = a.external_data;
  export_onnx_file(g, a.output, eo);
  std::printf("%s: %zu nodes (%zu opaque) -> %s\n", a.input.c_str(), stats.onnx_nodes, stats.opaque_nodes,
              a.output.c_str());
  return 0;
}

struct ShowArgs {
  std::string input;
  std::vector<std::string> input_shapes;
};

int run_show(const ShowArgs& a) {
  ImportOptions opts;
  opts.input_shapes = input_shapes_from_flags(a.input_shapes);
  ImportStats stats;
  Graph g = import_onnx_file(a.input, opts, &stats);
  std::printf("%s: opset %lld, %zu nodes, %zu opaque\n", a.input.c_str(), static_cast<long long>(g.info().opset()),
              stats.onnx_nodes, stats.opaque_nodes);
  for (const NodePtr& in : g.inputs())
    std::printf("  input  %-24s %s\n", in->name().c_str(), to_string(in->output_types()[0]).c_str());
  for (size_t i = 0; i < g.outputs().size(); ++i)
    std::printf("  output %-24s %s\n", g.output_names()[i].c_str(), to_string(g.outputs()[i].type()).c_str());
  for (const auto& [op, n] : summarize(g).histogram) std::printf("  %-30s %zu\n", op.c_str(), n);
  for (const std::string& why : stats.opaque_reasons) std::printf("  opaque: %s\n", why.c_str());
  return 0;
}

std::function<int()> selected;

}  // namespace

std::string json_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) o += ch;
  }
  return o;
}

std::map<std::string, std::vector<int64_t>> input_shapes_from_flags(const std::vector<std::string>& specs) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const std::string& s : specs) {
    auto [name, dims] = parse_input_shape(s);
    // Two flags for one input conflict: neither wins silently.
    require(shapes.emplace(name, dims).second || shapes[name] == dims,
            "--input-shape given twice for '" + name + "', with different dims");
  }
  return shapes;
}

std::optional<Graph> import_fixed(const std::string& path, ImportOptions io,
                                  const std::map<std::string, std::vector<int64_t>>& shapes) {
  if (shapes.empty()) return std::nullopt;
  io.input_shapes.insert(shapes.begin(), shapes.end());
  try {
    return import_onnx_file(path, io);
  } catch (const Error&) {
    return std::nullopt;
  }
}

Graph import_at_drawn_extents(const std::string& path, const ImportOptions& io, Graph g,
                              std::map<std::string, int64_t>* extents) {
  for (bool by_name : {true, false}) {
    *extents = drawn_bindings(g, {}, by_name);
    if (std::optional<Graph> fixed = import_fixed(path, io, open_input_shapes(g, *extents))) return std::move(*fixed);
  }
  return g;
}

void require_output_path(const std::string& path, const std::string& flag) {
  namespace fs = std::filesystem;
  std::error_code ec;
  require(!fs::is_directory(path, ec), flag + " '" + path + "' is a directory, not a file");
  const fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) return;
  const fs::file_type type = fs::status(dir, ec).type();
  require(type != fs::file_type::not_found, flag + " '" + path + "': the folder '" + dir.string() + "' does not exist");
  require(type == fs::file_type::directory, flag + " '" + path + "': '" + dir.string() + "' is not a folder");
}

void set_action(std::function<int()> action) { selected = std::move(action); }

int naming_model(const std::string& model, const std::function<int()>& action) {
  const std::string file = std::filesystem::path(model).filename().string();
  auto named = [&](const std::string& why) {
    return why.find(model) != std::string::npos || (!file.empty() && why.find(file) != std::string::npos)
               ? why
               : model + ": " + why;
  };
  try {
    return action();
  } catch (const Error& e) {
    throw Error(named(e.what()));
  } catch (const std::bad_alloc&) {
    throw Error(named("out of memory (the model asks for more memory than this machine has)"));
  } catch (const std::length_error& e) {
    throw Error(named(std::string("out of memory (the model asks for more memory than this machine has: ") +
                      e.what() + ")"));
  } catch (const CLI::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(named(e.what()));
  }
}

void add_commands(CLI::App& app) {
  add_optimize_command(app);

  auto conv = std::make_shared<ConvertArgs>();
  CLI::App* c = app.add_subcommand("convert", "import and export a model without optimizing (round trip)");
  c->add_option("input", conv->input, "model (.onnx)")->required();
  c->add_option("-o,--output", conv->output, "where to write it")->required();
  c->add_option("--input-shape", conv->input_shapes, "fix an input's dims (repeatable)");
  c->add_flag("--external-data", conv->external_data, "store weights in an external data file");
  c->callback([conv] { set_action([conv] { return naming_model(conv->input, [&] { return run_convert(*conv); }); }); });

  auto show = std::make_shared<ShowArgs>();
  CLI::App* s = app.add_subcommand("show", "summarize a model: inputs, outputs, operators, opaque nodes");
  s->add_option("input", show->input, "model (.onnx)")->required();
  s->add_option("--input-shape", show->input_shapes, "fix an input's dims (repeatable)");
  s->callback([show] { set_action([show] { return naming_model(show->input, [&] { return run_show(*show); }); }); });

  add_run_command(app);
  add_cost_command(app);
  add_rules_command(app);
  add_mugraph_command(app);
  add_parallel_commands(app);
}

int run_selected(CLI::App&) { return selected ? selected() : 2; }

}  // namespace isomer::cli
