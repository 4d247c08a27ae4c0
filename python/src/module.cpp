// isomer._core: the pybind11 bindings the Python package (python/isomer) is built
// on. They stay thin: models cross the boundary as serialized ONNX bytes, tensors as
// numpy arrays, reports as the CLI's JSON text, and every isomer::Error becomes the
// Python exception isomer.Error with the same message the CLI prints. Convenience
// (ModelProto handling, dtype names, named builder methods) lives in Python.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "check/inputs.h"
#include "check/open_dims.h"
#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/error_line.h"
#include "ir/graph.h"
#include "onnx/onnx_io.h"
#include "ops/op.h"
#include "passes/passes.h"
#include "pipeline/optimize.h"
#include "pipeline/split_run.h"
#include "rules/rule.h"
#include "runtime/one_cpu_per_thread.h"
#include "runtime/runtime.h"
#include "generate/generate.h"
#include "search/search.h"
#include "verify/verify.h"

namespace py = pybind11;

namespace isomer {
namespace {

// ---- rules ----------------------------------------------------------------------


// ---- tensors <-> numpy ----------------------------------------------------------

py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::Float16: return py::dtype("float16");
    case DType::Float32: return py::dtype("float32");
    case DType::Float64: return py::dtype("float64");
    case DType::Int8: return py::dtype("int8");
    case DType::Int16: return py::dtype("int16");
    case DType::Int32: return py::dtype("int32");
    case DType::Int64: return py::dtype("int64");
    case DType::UInt8: return py::dtype("uint8");
    case DType::UInt16: return py::dtype("uint16");
    case DType::UInt32: return py::dtype("uint32");
    case DType::UInt64: return py::dtype("uint64");
    case DType::Bool: return py::dtype("bool");
    default: throw Error("tensors of type " + std::string(dtype_name(t)) + " have no numpy equivalent");
  }
}

// numpy kind + item size -> DType; Undefined when isomer has no such type. Read
// through Python attributes, not pybind11's struct accessors: numpy 2 moved the
// descriptor's item size, and pybind11 2.10 (Debian 12) reads the numpy 1 layout.
DType dtype_of(const py::dtype& d) {
  char kind = py::str(d.attr("kind")).cast<std::string>()[0];
  int size = d.attr("itemsize").cast<int>();
  switch (kind) {
    case 'f': return size == 2 ? DType::Float16 : size == 4 ? DType::Float32 : size == 8 ? DType::Float64 : DType::Undefined;
    case 'i':
      return size == 1 ? DType::Int8 : size == 2 ? DType::Int16 : size == 4 ? DType::Int32 : size == 8 ? DType::Int64
                                                                                                       : DType::Undefined;
    case 'u':
      return size == 1 ? DType::UInt8 : size == 2 ? DType::UInt16 : size == 4 ? DType::UInt32 : size == 8 ? DType::UInt64
                                                                                                          : DType::Undefined;
    case 'b': return DType::Bool;
    default: return DType::Undefined;
  }
}

// The Python side passes arrays in native byte order (x86 and ARM Linux are
// little-endian, which is the layout Tensor keeps); non-contiguous ones are copied.
Tensor tensor_from_array(const py::array& a, const std::string& what) {
  DType t = dtype_of(a.dtype());
  require(t != DType::Undefined, what + ": numpy dtype " + std::string(py::str(a.dtype())) + " is not supported");
  py::array c = py::array::ensure(a, py::array::c_style);
  std::vector<int64_t> dims(c.shape(), c.shape() + c.ndim());
  size_t nbytes = static_cast<size_t>(num_elements(dims)) * dtype_size(t);
  std::string bytes(static_cast<const char*>(c.data()), nbytes);
  return Tensor(t, std::move(dims), std::move(bytes));
}

py::array array_from_tensor(const Tensor& bt) {
  // numpy has no bfloat16: bf16 comes back as float32, which holds every value exactly.
  const Tensor t = bt.dtype() == DType::BFloat16 ? Tensor::from_f64(DType::Float32, bt.dims(), bt.to_f64()) : bt;
  // Explicit C-order strides, for the same numpy 2 reason as in dtype_of.
  std::vector<py::ssize_t> shape(t.dims().begin(), t.dims().end()), strides(shape.size());
  py::ssize_t stride = static_cast<py::ssize_t>(dtype_size(t.dtype()));
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  py::array a(numpy_dtype(t.dtype()), shape, strides);
  if (t.byte_size() > 0) std::memcpy(a.mutable_data(), t.bytes().data(), t.byte_size());
  return a;
}

std::vector<Tensor> tensors_from_arrays(const std::vector<py::array>& arrays, const Graph& g) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < arrays.size(); ++i) {
    std::string what = i < g.inputs().size() ? "input '" + g.inputs()[i]->name() + "'" : "input " + std::to_string(i);
    Tensor t = tensor_from_array(arrays[i], what);
    // A bf16 input is given as float32 (numpy has no bfloat16), rounded as a Cast would.
    if (i < g.inputs().size() && g.inputs()[i]->output_types()[0].dtype == DType::BFloat16 &&
        t.dtype() == DType::Float32)
      t = Tensor::from_f64(DType::BFloat16, t.dims(), t.to_f64());
    out.push_back(std::move(t));
  }
  return out;
}

// ---- shapes and values ----------------------------------------------------------

// A shape as Python sees it: ints for static dims, str for named symbols, None for
// anonymous unknown dims.
py::list shape_to_python(const Shape& s) {
  py::list out;
  for (const Dim& d : s) {
    if (d.is_static())
      out.append(py::int_(d.value));
    else if (!d.symbol.empty())
      out.append(py::str(d.symbol));
    else
      out.append(py::none());
  }
  return out;
}

Shape shape_from_python(const py::sequence& dims, const std::string& what) {
  Shape s;
  for (py::handle h : dims) {
    if (h.is_none()) {
      s.push_back(Dim::unknown());
    } else if (py::isinstance<py::str>(h)) {
      s.push_back(Dim::sym(h.cast<std::string>()));
    } else if (py::isinstance<py::int_>(h) && !py::isinstance<py::bool_>(h)) {
      int64_t v = h.cast<int64_t>();
      require(v >= 0, what + ": dimension " + std::to_string(v) + " is negative");
      s.push_back(Dim(v));
    } else {
      throw Error(what + ": a dimension must be an int, a str (symbolic) or None, not " +
                  std::string(py::str(py::type::of(h).attr("__name__"))));
    }
  }
  return s;
}

py::tuple type_to_python(const std::string& name, const TensorType& t) {
  return py::make_tuple(name, std::string(dtype_name(t.dtype)), shape_to_python(t.shape));
}

// ---- attributes -----------------------------------------------------------------

std::string type_name(py::handle h) { return py::str(py::type::of(h).attr("__name__")); }

bool is_int(py::handle h) { return py::isinstance<py::int_>(h) || py::hasattr(h, "__index__"); }
bool is_number(py::handle h) { return is_int(h) || py::isinstance<py::float_>(h); }

// Converts a Python value to the attribute kind the operator table declares, so a
// user may write pads=(1, 1, 1, 1) or alpha=1 and still get ints / a float.
AttrValue attr_from_python(const OpDef& op, const std::string& name, py::handle value) {
  const AttrSpec* spec = nullptr;
  for (const AttrSpec& s : op.attributes)
    if (s.name == name) spec = &s;
  if (!spec) {
    std::string known;
    for (const AttrSpec& s : op.attributes) known += (known.empty() ? "" : ", ") + std::string(s.name);
    throw Error("operator " + std::string(op.name) + " has no attribute '" + name + "'" +
                (known.empty() ? " (it takes none)" : " (it has: " + known + ")"));
  }
  std::string kind(spec->kind);
  std::string what = "attribute '" + name + "' of " + std::string(op.name);
  auto items = [&]() {
    require(py::isinstance<py::sequence>(value) && !py::isinstance<py::str>(value),
            what + " must be a list of " + kind.substr(0, kind.size() - 1) + "s, not " + type_name(value));
    return value.cast<py::sequence>();
  };
  if (kind == "int") {
    require(is_int(value), what + " must be an int, not " + type_name(value));
    return py::int_(py::reinterpret_borrow<py::object>(value)).cast<int64_t>();
  }
  if (kind == "float") {
    require(is_number(value), what + " must be a float, not " + type_name(value));
    return value.cast<double>();
  }
  if (kind == "string") {
    require(py::isinstance<py::str>(value), what + " must be a str, not " + type_name(value));
    return value.cast<std::string>();
  }
  if (kind == "ints") {
    std::vector<int64_t> out;
    for (py::handle h : items()) {
      require(is_int(h), what + " must be a list of ints; it holds a " + type_name(h));
      out.push_back(py::int_(py::reinterpret_borrow<py::object>(h)).cast<int64_t>());
    }
    return out;
  }
  if (kind == "floats") {
    std::vector<double> out;
    for (py::handle h : items()) {
      require(is_number(h), what + " must be a list of floats; it holds a " + type_name(h));
      out.push_back(h.cast<double>());
    }
    return out;
  }
  if (kind == "strings") {
    std::vector<std::string> out;
    for (py::handle h : items()) {
      require(py::isinstance<py::str>(h), what + " must be a list of strs; it holds a " + type_name(h));
      out.push_back(h.cast<std::string>());
    }
    return out;
  }
  if (kind == "tensor") {
    require(py::isinstance<py::array>(value), what + " must be a numpy array, not " + type_name(value));
    return tensor_from_array(value.cast<py::array>(), what);
  }
  throw Error(what + " has kind '" + kind + "', which the Python builder cannot fill");
}

// ---- models ---------------------------------------------------------------------

// A model given as a path (str) or as serialized bytes.
Graph import_model(const py::object& source, const std::string& base_dir,
                   const std::map<std::string, std::vector<int64_t>>& input_shapes, ImportStats* stats,
                   bool freeze_overridable_inputs = false) {
  ImportOptions opts;
  opts.input_shapes = input_shapes;
  opts.freeze_overridable_inputs = freeze_overridable_inputs;
  if (py::isinstance<py::bytes>(source)) {
    std::string bytes = source.cast<std::string>();
    py::gil_scoped_release release;
    return import_onnx_bytes(bytes, base_dir, opts, stats);
  }
  // A path is bytes on Linux: a str from os.listdir holds the ones that are not UTF-8 as
  // surrogates, which pybind11's UTF-8 conversion refuses; os.fsencode gives them back.
  std::string path = py::module_::import("os").attr("fsencode")(source).cast<std::string>();
  py::gil_scoped_release release;
  return import_onnx_file(path, opts, stats);
}

// Runs the same pipeline as `isomer optimize` (optimize_graph) on an in-memory
// model. Returns (optimized model bytes or None when the check failed, report JSON,
// report text). A failed check is not an exception here: Python raises it with the
// report attached.
py::tuple optimize_model(const py::object& source, const std::string& base_dir, const std::string& input_name,
                         const std::map<std::string, std::vector<int64_t>>& input_shapes, const std::string& search,
                         const std::vector<std::string>& disabled, bool check, uint64_t seed, double tolerance,
                         bool allow_nonfinite, double budget, const std::vector<std::string>& rule_paths,
                         const std::string& cost_model, const std::string& target, int threads, bool guard,
                         const std::map<std::string, py::array>& inputs, const std::string& extractor,
                         bool guard_target_only, bool mugraph, size_t mugraph_states, double mugraph_seconds,
                         bool mugraph_untimed, bool fold_overridable_inputs) {
  ImportStats stats;
  Graph g = import_model(source, base_dir, input_shapes, &stats, fold_overridable_inputs);
  OptimizeOptions opts;
  opts.import.input_shapes = input_shapes;
  opts.import.freeze_overridable_inputs = fold_overridable_inputs;
  std::vector<std::string> templates = template_rule_names();
  for (const std::string& name : disabled) {
    bool is_template = std::find(templates.begin(), templates.end(), name) != templates.end();
    (is_template ? opts.passes.disabled : opts.search_options.disabled).push_back(name);
  }
  opts.search = search;
  opts.search_options.budget_s = budget;
  opts.search_options.extractor = extractor;
  opts.rule_paths = rule_paths;
  opts.cost_model = cost_model;
  opts.check = check;
  opts.allow_nonfinite = allow_nonfinite;
  opts.check_options.seed = seed;
  opts.check_options.tolerance = tolerance;
  opts.target = target;
  opts.threads = threads;
  opts.cost_threads = threads;
  opts.guard = guard;
  opts.guard_options.confirm_other = !guard_target_only;
  opts.mugraph = mugraph;
  opts.mugraph_states = mugraph_states;
  opts.mugraph_seconds = mugraph_seconds;
  opts.mugraph_untimed = mugraph_untimed;
  for (const auto& [name, array] : inputs) opts.inputs.emplace_back(name, tensor_from_array(array, "inputs['" + name + "']"));
  opts.inputs_source = "inputs=";
  std::string model, json, text;
  bool failed = false;
  {
    py::gil_scoped_release release;
    OptimizeResult r = optimize_graph(g, stats, opts);
    r.report.input_path = input_name;
    failed = r.report.check.status == CheckResult::Status::Failed && !r.report.check.engine_fault;
    if (!failed) model = export_onnx_bytes(r.graph);
    json = r.report.to_json();
    text = r.report.to_text();
  }
  py::object out = failed ? py::object(py::none()) : py::object(py::bytes(model));
  return py::make_tuple(out, json, text);
}

std::vector<py::array> evaluate_graph(const Graph& g, const std::vector<py::array>& inputs) {
  std::vector<Tensor> in = tensors_from_arrays(inputs, g);
  std::vector<Tensor> out;
  {
    py::gil_scoped_release release;
    out = evaluate(g, in);
  }
  std::vector<py::array> result;
  for (const Tensor& t : out) result.push_back(array_from_tensor(t));
  return result;
}

// ---- the CPU runtime ---------------------------------------------------------------

std::unique_ptr<runtime::Executable> compile_for(const Graph& g, const std::vector<Tensor>& in, int threads) {
  runtime::RuntimeOptions o;
  o.threads = threads;
  o.bindings = bindings_of(g, in);
  return runtime::compile(g, o);
}

// A model whose later shapes depend on the data (a detector's decoding and
// suppression) runs split, as `isomer run` runs it: the head on the runtime, the
// tail on ONNX Runtime (pipeline/split_run.h).
std::vector<py::array> runtime_run(const Graph& g, const std::vector<py::array>& inputs, int threads) {
  std::vector<Tensor> in = tensors_from_arrays(inputs, g);
  std::vector<Tensor> out;
  {
    py::gil_scoped_release release;
    std::unique_ptr<runtime::Executable> exe;
    std::unique_ptr<SplitExecutable> split;
    try {
      exe = compile_for(g, in, threads);
    } catch (const Error&) {
      runtime::RuntimeOptions o;
      o.threads = threads;
      o.bindings = bindings_of(g, in);
      split = SplitExecutable::make(g, o, threads);
      if (!split) throw;  // why the runtime cannot run it, as before
    }
    if (split) {
      out = split->run(in);
    } else {
      runtime::RunPlacement pinned(*exe);  // as `isomer run --bench` places the team
      out = exe->run(in);
    }
  }
  std::vector<py::array> result;
  for (const Tensor& t : out) result.push_back(array_from_tensor(t));
  return result;
}

// inputs empty: random ones from `seed` that the model can run on (open dims at the
// extents check/open_dims.h names).
py::dict runtime_benchmark(const Graph& g, const std::vector<py::array>& inputs, int threads, int warmup, int repeat,
                           uint64_t seed) {
  ModelInputs drawn;
  if (inputs.empty()) {
    drawn.tensors = seeded_random_inputs(g, seed, importable_drawn_bindings(g));
    use_defaults(g, input_defaults(g), &drawn);
  }
  std::vector<Tensor> in = inputs.empty() ? std::move(drawn.tensors) : tensors_from_arrays(inputs, g);
  runtime::BenchResult r;
  std::map<std::string, size_t> kinds;
  size_t steps = 0;
  std::string placement;
  {
    py::gil_scoped_release release;
    auto exe = compile_for(g, in, threads);
    for (const runtime::StepInfo& s : exe->steps()) ++kinds[s.kind];
    steps = exe->steps().size();
    runtime::RunPlacement pinned(*exe);  // as `isomer run --bench` places the team
    placement = pinned.note();
    r = runtime::benchmark(*exe, in, warmup, repeat);
  }
  py::dict d;
  d["latency_ms_median"] = r.median;
  d["latency_ms_min"] = r.min;
  d["latency_ms_max"] = r.max;
  d["latency_ms_mean"] = r.mean;
  d["latency_ms"] = r.ms;
  d["repeats"] = r.ms.size();
  d["warmup"] = r.warmup;
  d["threads"] = r.threads;
  d["steps"] = steps;
  d["step_kinds"] = kinds;
  d["openmp_waits"] = runtime::openmp_waits();
  d["openmp_threads"] = placement;
  return d;
}

py::bytes graph_to_onnx(const Graph& g) {
  std::string bytes;
  {
    py::gil_scoped_release release;
    bytes = export_onnx_bytes(g);
  }
  return py::bytes(bytes);
}

// ---- the builder ----------------------------------------------------------------

// GraphBuilder plus what Python needs on top: input names are unique, and values
// from another builder are refused (their inputs would not be this graph's inputs).
class PyBuilder {
 public:
  Value input(const std::string& name, const std::string& dtype, const py::sequence& shape) {
    require(!name.empty(), "a graph input needs a name");
    for (const NodePtr& n : builder_.inputs())
      require(n->name() != name, "the graph already has an input named '" + name + "'");
    DType t = dtype_from_name(dtype);
    require(t != DType::Undefined, "input '" + name + "': unknown element type '" + dtype + "'");
    return own(builder_.input(name, TensorType{t, shape_from_python(shape, "input '" + name + "'")}));
  }

  Value constant(const py::array& value, const std::string& name) {
    return own(builder_.constant(tensor_from_array(value, name.empty() ? "constant" : "constant '" + name + "'"), name));
  }

  std::vector<Value> op(const std::string& op_type, const std::vector<std::optional<Value>>& inputs,
                        const py::dict& attrs, size_t num_outputs, const std::string& name) {
    const OpDef& def = get_op(op_type);
    Attributes a;
    for (auto [key, value] : attrs) {
      std::string k = key.cast<std::string>();
      a.set(k, attr_from_python(def, k, value));
    }
    std::vector<Value> in;
    for (const std::optional<Value>& v : inputs) {
      if (v) check_mine(*v, op_type);
      in.push_back(v.value_or(Value{}));
    }
    std::vector<Value> out = builder_.op(op_type, std::move(in), std::move(a), num_outputs, name);
    for (const Value& v : out) own(v);
    return out;
  }

  Graph finish(const std::vector<Value>& outputs, const std::vector<std::string>& names, int64_t opset,
               const std::string& graph_name) {
    require(!outputs.empty(), "the graph has no outputs: mark at least one value with output()");
    for (const Value& v : outputs) check_mine(v, "output()");
    ModelInfo info;
    info.opset_imports = {{"", opset}};
    info.producer_name = "isomer";
    info.producer_version = ISOMER_VERSION;
    info.graph_name = graph_name;
    return builder_.finish(outputs, names, std::move(info));
  }

 private:
  // The builder's table and input list keep these nodes alive, so the addresses stay unique.
  Value own(Value v) {
    mine_.insert(v.node.get());
    return v;
  }
  void check_mine(const Value& v, const std::string& where) const {
    require(!v.present() || mine_.count(v.node.get()),
            where + ": " + to_string(v.type()) + " value from " + v.node->op_type() +
                " belongs to another isomer.Graph");
  }

  GraphBuilder builder_;
  std::unordered_set<const Node*> mine_;
};

std::string describe_value(const Value& v) {
  if (!v.present()) return "Value(omitted)";
  std::string from = v.node->kind() == NodeKind::Input ? "input '" + v.node->name() + "'" : v.node->op_type();
  std::string out = "Value(" + to_string(v.type()) + ", from " + from;
  if (v.node->num_outputs() > 1) out += " output " + std::to_string(v.index);
  return out + ")";
}

}  // namespace
}  // namespace isomer

PYBIND11_MODULE(_core, m) {
  using namespace isomer;
  m.doc() = "isomer's C++ core; use the isomer package, not this module";
  m.attr("__version__") = ISOMER_VERSION;

  // Every user-facing failure in the C++ core is an isomer::Error; it surfaces as
  // isomer.Error (a ValueError: bad input, not a bug) with the CLI's one-line message.
  static py::exception<Error> error_type(m, "Error", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      // A message names files, nodes and values by their bytes, which need not be UTF-8;
      // PyErr_SetString decodes strictly and lost such a message whole.
      const std::string text = one_line_message(e.what());
      py::object message = py::reinterpret_steal<py::object>(
          PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace"));
      PyErr_SetObject(error_type.ptr(), message.ptr());
    }
  });

  py::class_<Value>(m, "Value", "one output of a node in a graph being built")
      .def_property_readonly("dtype", [](const Value& v) { return std::string(dtype_name(v.type().dtype)); })
      .def_property_readonly("shape", [](const Value& v) { return shape_to_python(v.type().shape); })
      .def_property_readonly("op_type", [](const Value& v) { return v.node->op_type(); })
      .def_property_readonly("index", [](const Value& v) { return v.index; })
      .def_property_readonly("name", [](const Value& v) { return v.node->name(); })
      .def("__eq__", [](const Value& a, const Value& b) { return a == b; })
      .def("__hash__", [](const Value& v) { return ValueHash{}(v); })
      .def("__repr__", &describe_value);

  py::class_<Graph>(m, "Graph", "an immutable isomer graph")
      .def_property_readonly("inputs",
                             [](const Graph& g) {
                               py::list out;
                               for (const NodePtr& n : g.inputs()) out.append(type_to_python(n->name(), n->output_types()[0]));
                               return out;
                             })
      .def_property_readonly("input_defaults",
                             [](const Graph& g) {
                               py::dict out;
                               for (const auto& [name, t] : input_defaults(g)) out[py::str(name)] = array_from_tensor(t);
                               return out;
                             })
      .def_property_readonly("outputs",
                             [](const Graph& g) {
                               py::list out;
                               for (size_t i = 0; i < g.outputs().size(); ++i)
                                 out.append(type_to_python(g.output_names()[i], g.outputs()[i].type()));
                               return out;
                             })
      .def_property_readonly("opset", [](const Graph& g) { return g.info().opset(); })
      .def_property_readonly("drawn_input_shapes",
                             [](const Graph& g) { return open_input_shapes(g, importable_drawn_bindings(g)); })
      .def("num_ops", &Graph::num_ops)
      .def("op_histogram", &Graph::op_histogram)
      .def("evaluate", &evaluate_graph, py::arg("inputs"))
      .def("run_on_runtime", &runtime_run, py::arg("inputs"), py::arg("threads"))
      .def("benchmark", &runtime_benchmark, py::arg("inputs"), py::arg("threads"), py::arg("warmup"),
           py::arg("repeat"), py::arg("seed"))
      .def("to_onnx_bytes", &graph_to_onnx)
      .def("is_evaluable", [](const Graph& g) {
        std::string why;
        bool ok = is_evaluable(g, &why);
        return py::make_tuple(ok, why);
      });

  py::class_<PyBuilder>(m, "Builder", "builds a graph node by node through the operator table")
      .def(py::init<>())
      .def("input", &PyBuilder::input, py::arg("name"), py::arg("dtype"), py::arg("shape"))
      .def("constant", &PyBuilder::constant, py::arg("value"), py::arg("name") = "")
      .def("op", &PyBuilder::op, py::arg("op_type"), py::arg("inputs"), py::arg("attrs"), py::arg("num_outputs") = 0,
           py::arg("name") = "")
      .def("finish", &PyBuilder::finish, py::arg("outputs"), py::arg("names"), py::arg("opset"),
           py::arg("graph_name"));

  // Rules: the DSL's RuleSet and Rule, read-only views plus the file text.
  py::class_<Rule>(m, "Rule", "one rewrite rule (read-only)")
      .def_readonly("name", &Rule::name)
      .def_property_readonly("verdict", [](const Rule& r) { return verdict_kind_name(r.verdict.kind); })
      .def_property_readonly("verdict_line", [](const Rule& r) { return print_verdict(r.verdict); })
      .def_property_readonly("reason", [](const Rule& r) { return r.verdict.reason; })
      .def_property_readonly("error_bits", [](const Rule& r) { return r.verdict.error_bits; })
      .def_property_readonly("usable", &Rule::usable)
      .def_property_readonly("vars",
                             [](const Rule& r) {
                               std::vector<std::string> names;
                               for (const RuleVar& v : r.vars) names.push_back(v.name);
                               return names;
                             })
      .def_property_readonly("num_outputs", &Rule::num_outputs)
      .def_property_readonly("text", [](const Rule& r) { return print_rule(r); })
      .def("__str__", [](const Rule& r) { return print_rule(r); })
      .def("__repr__", [](const Rule& r) {
        return "<isomer.Rule " + r.name + ": " + verdict_kind_name(r.verdict.kind) + ">";
      });
  py::class_<RuleSet>(m, "RuleSet", "rules as read from a rule file; str() gives the file text")
      .def(py::init<>())
      .def("__len__", [](const RuleSet& s) { return s.rules.size(); })
      .def(
          "__getitem__",
          [](const RuleSet& s, py::object key) -> const Rule& {
            if (py::isinstance<py::str>(key)) {
              const Rule* r = s.find(key.cast<std::string>());
              if (!r) throw py::key_error("no rule named '" + key.cast<std::string>() + "'");
              return *r;
            }
            long i = key.cast<long>();
            long n = static_cast<long>(s.rules.size());
            if (i < 0) i += n;
            if (i < 0 || i >= n) throw py::index_error("rule index out of range");
            return s.rules[static_cast<size_t>(i)];
          },
          py::return_value_policy::reference_internal)
      .def("__contains__", [](const RuleSet& s, const std::string& name) { return s.find(name) != nullptr; })
      .def_property_readonly("names",
                             [](const RuleSet& s) {
                               std::vector<std::string> names;
                               for (const Rule& r : s.rules) names.push_back(r.name);
                               return names;
                             })
      .def("counts",
           [](const RuleSet& s) {
             std::map<std::string, size_t> c{{"proved", 0}, {"tested", 0}, {"refuted", 0}, {"unknown", 0}, {"none", 0}};
             for (const Rule& r : s.rules) ++c[verdict_kind_name(r.verdict.kind)];
             return c;
           })
      .def_property_readonly("text", [](const RuleSet& s) { return print_rules(s); })
      .def("__str__", [](const RuleSet& s) { return print_rules(s); })
      .def("save",
           [](const RuleSet& s, const std::string& path) {
             std::string text = print_rules(s), tmp = path + ".tmp";
             {
               std::ofstream f(tmp);
               f << text;
               require(f.good(), "cannot write '" + path + "'");
             }
             require(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot write '" + path + "'");
           },
           py::arg("path"))
      .def("__repr__", [](const RuleSet& s) { return "<isomer.RuleSet of " + std::to_string(s.rules.size()) + " rules>"; });
  m.def("load_rules", [](const std::string& path) { return load_rule_files({path}); }, py::arg("path"));
  m.def("parse_rules", [](const std::string& text, const std::string& file) { return parse_rules(text, file); },
        py::arg("text"), py::arg("file") = "<rules>");
  m.def("default_rules_path", &default_rules_path);
  m.def(
      "verify_rules",
      [](const RuleSet& rules, double timeout, int jobs, bool use_z3, uint64_t seed) {
        RuleSet out = rules;
        VerifyOptions o;
        o.timeout_s = timeout;
        o.use_z3 = use_z3;
        o.field.seed = seed;
        py::gil_scoped_release release;
        verify_all(out, o, jobs);
        return out;
      },
      py::arg("rules"), py::arg("timeout"), py::arg("jobs"), py::arg("use_z3"), py::arg("seed"));
  m.def(
      "generate_rules",
      [](int max_ops, const std::vector<std::string>& ops, int jobs, uint64_t seed, double timeout,
         unsigned rlimit, bool keep_implied) {
        gen::GenerateOptions o;
        o.prune_implied = !keep_implied;
        o.max_ops = max_ops;
        o.ops = ops;
        o.jobs = jobs;
        o.seed = seed;
        o.timeout_s = timeout;
        o.rlimit = rlimit;
        gen::GenerateResult r;
        {
          py::gil_scoped_release release;
          r = gen::generate_rules(o);
        }
        py::dict counts, seconds;
        for (const auto& [stage, n] : r.counts) counts[py::str(stage)] = n;
        for (const auto& [stage, s] : r.seconds) seconds[py::str(stage)] = s;
        py::list rejected;
        for (const gen::RuleReport& rep : r.reports)
          if (rep.verdict.kind != Verdict::Kind::Proved && rep.verdict.kind != Verdict::Kind::Tested)
            rejected.append(py::make_tuple(rep.name, verdict_kind_name(rep.verdict.kind), rep.verdict.reason));
        return py::make_tuple(r.rules, counts, seconds, rejected);
      },
      py::arg("max_ops"), py::arg("ops"), py::arg("jobs"), py::arg("seed"), py::arg("timeout"), py::arg("rlimit"),
      py::arg("keep_implied"));

  m.def(
      "load_model",
      [](const py::object& source, const std::string& base_dir,
         const std::map<std::string, std::vector<int64_t>>& input_shapes, bool freeze_overridable_inputs) {
        return import_model(source, base_dir, input_shapes, nullptr, freeze_overridable_inputs);
      },
      py::arg("source"), py::arg("base_dir"), py::arg("input_shapes"), py::arg("freeze_overridable_inputs") = false);
  m.def("optimize_model", &optimize_model, py::arg("source"), py::arg("base_dir"), py::arg("input_name"),
        py::arg("input_shapes"), py::arg("search"), py::arg("disabled"), py::arg("check"), py::arg("seed"),
        py::arg("tolerance"), py::arg("allow_nonfinite"), py::arg("budget"), py::arg("rule_paths"),
        py::arg("cost_model"), py::arg("target"), py::arg("threads"), py::arg("guard"), py::arg("inputs"),
        py::arg("extractor"), py::arg("guard_target_only") = false, py::arg("mugraph") = false,
        py::arg("mugraph_states") = 0, py::arg("mugraph_seconds") = 30.0, py::arg("mugraph_untimed") = false,
        py::arg("fold_overridable_inputs") = false);
  m.def(
      "valid_inputs",
      [](const py::object& source, const std::string& base_dir,
         const std::map<std::string, std::vector<int64_t>>& input_shapes, uint64_t seed) {
        Graph g = import_model(source, base_dir, input_shapes, nullptr);
        ModelInputs in = valid_random_inputs(g, seed, importable_drawn_bindings(g));
        require(in.ok(), in.impossible);
        use_defaults(g, input_defaults(g), &in);
        py::dict arrays;
        for (size_t i = 0; i < in.tensors.size(); ++i)
          arrays[py::str(g.inputs()[i]->name())] = array_from_tensor(in.tensors[i]);
        return py::make_tuple(arrays, in.notes);
      },
      py::arg("source"), py::arg("base_dir"), py::arg("input_shapes"), py::arg("seed"));
  m.def("template_rule_names", &template_rule_names);
  m.def("op_names", [] {
    std::vector<std::string> out;
    for (const OpDef* op : all_ops()) out.emplace_back(op->name);
    return out;
  });
  m.def("op_schema", [](const std::string& name) {
    const OpDef& op = get_op(name);
    py::dict attrs;
    for (const AttrSpec& s : op.attributes) attrs[py::str(std::string(s.name))] = std::string(s.kind);
    py::dict d;
    d["name"] = std::string(op.name);
    d["min_inputs"] = op.min_inputs;
    d["max_inputs"] = op.max_inputs;
    d["attributes"] = attrs;
    return d;
  });
}
