#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "onnx/onnx_io.h"

namespace isomer::cli {

// Registers every subcommand on `app`.
void add_commands(CLI::App& app);
// Runs the subcommand the user chose; returns the exit code.
int run_selected(CLI::App& app);
// A subcommand's callback calls this with what to run once parsing has succeeded.
void set_action(std::function<int()> action);

// Runs `action` for the model file `model`: a failure whose message does not name the
// file already is rethrown as an Error that does ("model.onnx: ..."), and running out of
// memory becomes such an Error too, so every failure of `optimize` and `run` names
// the file, the node (where the message has one) and the reason.
int naming_model(const std::string& model, const std::function<int()>& action);

// The --input-shape flags ("name:1,3,224,224", repeatable) as ImportOptions::input_shapes.
std::map<std::string, std::vector<int64_t>> input_shapes_from_flags(const std::vector<std::string>& specs);

// The model file imported again with the dims of its open inputs fixed as `shapes`
// says (check/open_dims.h: the runtime fuses where shapes are static); nullopt where
// `shapes` is empty or the fixed dims do not import (the model then runs as written,
// its dims bound).
std::optional<Graph> import_fixed(const std::string& path, ImportOptions io,
                                  const std::map<std::string, std::vector<int64_t>>& shapes);

// `g` (imported from `path` with `io`) imported again fixed at the extents drawn inputs
// give its open dims (drawn_bindings: by name, else all 1 where the named ones do not
// import), or `g` where none is open or neither imports. `extents` gets the extents.
Graph import_at_drawn_extents(const std::string& path, const ImportOptions& io, Graph g,
                              std::map<std::string, int64_t>* extents);

// Refuses, before any work, an output path (given with `flag`) that is a directory or
// whose folder does not exist or is not a folder.
void require_output_path(const std::string& path, const std::string& flag);

// `s` inside a JSON string: quotes and backslashes escaped, control characters dropped.
std::string json_escape(const std::string& s);

// Subcommands defined in their own files (cli/<name>_cmd.cpp).
void add_optimize_command(CLI::App& app);  // optimize_cmd.cpp
void add_run_command(CLI::App& app);   // run_cmd.cpp
void add_cost_command(CLI::App& app);  // cost_cmd.cpp
void add_rules_command(CLI::App& app); // rules_cmd.cpp
void add_mugraph_command(CLI::App& app);  // mugraph_cmd.cpp: `mugraph emit-cuda`
// `parallelize`, `run-plan`, `calibrate` (parallel_cmd.cpp).
void add_parallel_commands(CLI::App& app);
// `rules generate`, added to the `rules` subcommand (generate_cmd.cpp).
void add_rules_generate_command(CLI::App& rules);

}  // namespace isomer::cli
