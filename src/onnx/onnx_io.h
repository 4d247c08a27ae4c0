#pragma once
// ONNX import and export (through Debian's libonnx protobuf classes), for every IR
// version and opset current onnx writes (onnx_versions.h says how, with an older
// libonnx).
//
// Import takes the model as written: one IR node per ONNX node (no merging; CSE is
// a separate pass), ONNX Constant nodes and initializers as constants (of element
// types isomer does not compute with, such as float8 or int4: opaque Constant nodes,
// written back as initializers), and every node isomer does not understand (other
// domains, unknown operators, subgraphs, forms the operator table cannot express) as
// an opaque node that round-trips verbatim. Export writes a model that passes
// onnx::checker, deterministic byte for byte, with the model-level facts (ModelInfo)
// of the source, at its IR version and opsets.
//
// An initializer that is also listed as a graph input (IR 4 on) is the default value
// of an input the user may override, as ONNX Runtime treats it: import makes it a
// graph input, not a constant, and keeps its value (input_defaults) for export to
// write back and for runs that do not feed it. ImportOptions::freeze_overridable_inputs
// takes such initializers for constants instead (the optimized model then loses those
// inputs); IR 3 and older list every initializer as an input, and they stay constants.
#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"

namespace isomer {

struct ImportOptions {
  // Fixes the dims of graph inputs (dynamic or not): name -> full shape.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Initializers listed as graph inputs become constants (see above).
  bool freeze_overridable_inputs = false;
};

struct ImportStats {
  size_t onnx_nodes = 0;                             // nodes of the main graph
  std::map<std::string, size_t> onnx_histogram;      // op_type -> count in the main graph
  size_t opaque_nodes = 0;                           // nodes kept opaque
  std::vector<std::string> opaque_reasons;           // "node 'x' (Foo): why"
  size_t inlined_calls = 0;                          // calls of model-local functions inlined
  std::vector<std::string> frozen_inputs;            // overridable inputs taken for constants
};

// Throws Error with one line naming the file, node and reason on bad input.
Graph import_onnx_file(const std::string& path, const ImportOptions& opts = {}, ImportStats* stats = nullptr);
// `base_dir`: the directory external data locations are relative to; "" for a model
// without one (bytes from memory), whose external data is refused with a message.
Graph import_onnx_bytes(const std::string& bytes, const std::string& base_dir, const ImportOptions& opts = {},
                        ImportStats* stats = nullptr);

struct ExportOptions {
  bool external_data = false;               // force external data
  size_t external_threshold_bytes = 1024;   // tensors at least this large go to the data file
};

// What export_onnx_file wrote.
struct ExportedFiles {
  uint64_t model_bytes = 0;
  std::string data_path;    // the external data file ("" when every tensor is inline)
  uint64_t data_bytes = 0;  // its size
  std::string describe() const;  // "m.onnx (2.4 MB) and its external data m.onnx.data (4401.7 MB)"
};

// Writes `path` (and `path`.data when external data is used: forced, or when the
// constants would not fit in one protobuf). Writes temporary files and renames
// them, so a failed export leaves no partial file and keeps an existing one.
ExportedFiles export_onnx_file(const Graph& g, const std::string& path, const ExportOptions& opts = {});
// The serialized model, all data inline.
std::string export_onnx_bytes(const Graph& g);

// The default values of `g`'s overridable inputs (see above), by input name, in the
// graph's input order; empty for most models.
std::vector<std::pair<std::string, Tensor>> input_defaults(const Graph& g);

// TensorProto -> Tensor: raw_data, typed fields, external data relative to base_dir.
Tensor tensor_from_proto(const onnx::TensorProto& t, const std::string& base_dir);
// Tensor -> TensorProto (raw_data; strings as string_data). Does not set the name.
void tensor_to_proto(const Tensor& t, onnx::TensorProto* out);

// Runs libonnx's onnx::checker::check_model; throws Error with the checker's message.
// Debian's libonnx 1.12 checks IR versions up to 8 and opsets up to 17 only; models of
// newer versions are checked with the onnx Python package in the tests.
void check_onnx_model(const std::string& bytes);
// Same for a model file (also checks that its external data files exist).
void check_onnx_file(const std::string& path);

}  // namespace isomer
