#include "check/compare.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "eval/evaluator.h"
#include "ir/error.h"
#include "onnx/onnx_io.h"

namespace isomer {

std::string CheckResult::status_name() const {
  switch (status) {
    case Status::Passed: return "passed";
    case Status::Failed: return "failed";
    case Status::Skipped: return "skipped";
  }
  return "skipped";
}

CheckResult compare_outputs(const std::vector<Tensor>& want, const std::vector<Tensor>& got,
                            const std::vector<std::string>& names, double tolerance) {
  CheckResult r;
  r.status = CheckResult::Status::Passed;
  for (size_t i = 0; i < want.size(); ++i) {
    const std::string& name = i < names.size() ? names[i] : std::to_string(i);
    if (want[i].dims() != got[i].dims() || want[i].dtype() != got[i].dtype()) {
      r.status = CheckResult::Status::Failed;
      r.reason = "output '" + name + "' is " + to_string(got[i].type()) + ", expected " + to_string(want[i].type());
      r.worst_output = name;
      return r;
    }
    if (!is_numeric(want[i].dtype())) continue;
    std::vector<double> a = want[i].to_f64(), b = got[i].to_f64();
    double scale = 0, err = 0;
    bool nan_mismatch = false;
    for (size_t k = 0; k < a.size(); ++k) {
      if (std::isnan(a[k]) || std::isnan(b[k])) {
        nan_mismatch = nan_mismatch || std::isnan(a[k]) != std::isnan(b[k]);
        continue;
      }
      if (std::isinf(a[k]) || std::isinf(b[k])) {
        nan_mismatch = nan_mismatch || a[k] != b[k];
        continue;
      }
      scale = std::max(scale, std::fabs(a[k]));
      err = std::max(err, std::fabs(a[k] - b[k]));
    }
    double rel = err / std::max(scale, 1e-6);
    bool exact = !is_float(want[i].dtype());
    r.max_abs_error = std::max(r.max_abs_error, err);
    if (rel >= r.max_rel_error) {
      r.max_rel_error = rel;
      r.worst_output = name;
    }
    if (nan_mismatch || (exact ? err != 0 : rel > tolerance)) {
      r.status = CheckResult::Status::Failed;
      std::ostringstream msg;
      msg << "output '" << name << "' differs: "
          << (nan_mismatch ? "NaN/Inf in different places" : "max abs error " + std::to_string(err) +
                                                                 ", relative " + std::to_string(rel));
      if (r.reason.empty()) r.reason = msg.str();
    }
  }
  return r;
}

std::string find_python() {
  if (const char* p = std::getenv("ISOMER_PYTHON")) return p;
#ifdef ISOMER_SOURCE_DIR
  std::filesystem::path venv = std::filesystem::path(ISOMER_SOURCE_DIR) / ".venv/bin/python";
  if (std::filesystem::exists(venv)) return venv.string();
#endif
  return "python3";
}

std::string last_log_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

namespace {

// Runs both models with ONNX Runtime on the same random inputs and compares there.
const char* kOrtScript = R"PY(
import json, sys
import numpy as np
import onnxruntime as ort
a_path, b_path, seed, tol, out_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
opts = ort.SessionOptions()
opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
sa = ort.InferenceSession(a_path, opts, providers=["CPUExecutionProvider"])
sb = ort.InferenceSession(b_path, opts, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(seed)
types = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
         "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_, "tensor(uint8)": np.uint8, "tensor(int8)": np.int8}
feeds = {}
for i in sa.get_inputs():
    shape = [d if isinstance(d, int) else 1 for d in i.shape]
    t = types[i.type]
    if np.issubdtype(t, np.floating):
        feeds[i.name] = rng.uniform(-1, 1, size=shape).astype(t)
    elif t == np.bool_:
        feeds[i.name] = rng.integers(0, 2, size=shape).astype(t)
    else:
        feeds[i.name] = rng.integers(0, 4, size=shape).astype(t)
ra = sa.run(None, feeds)
rb = sb.run(None, {k: v for k, v in feeds.items() if k in {i.name for i in sb.get_inputs()}})
res = {"max_abs": 0.0, "max_rel": 0.0, "worst": "", "failed": ""}
for o, x, y in zip(sa.get_outputs(), ra, rb):
    x = np.asarray(x); y = np.asarray(y)
    if x.shape != y.shape:
        res["failed"] = "output '%s' has shape %s, expected %s" % (o.name, y.shape, x.shape); break
    if x.dtype.kind in "fc":
        fin = np.isfinite(x) & np.isfinite(y)
        if (np.isnan(x) != np.isnan(y)).any():
            res["failed"] = "output '%s' has NaN in different places" % o.name
        err = float(np.max(np.abs(x[fin].astype(np.float64) - y[fin]), initial=0.0))
        rel = err / max(float(np.max(np.abs(x[fin]), initial=0.0)), 1e-6)
        exceeded = rel > tol
    else:
        err = float(np.max(np.abs(x.astype(np.int64) - y.astype(np.int64)), initial=0)); rel = err
        exceeded = err != 0
    res["max_abs"] = max(res["max_abs"], err)
    if rel >= res["max_rel"]:
        res["max_rel"], res["worst"] = rel, o.name
    if exceeded and not res["failed"]:
        res["failed"] = "output '%s' differs: max abs error %g, relative %g" % (o.name, err, rel)
json.dump(res, open(out_path, "w"))
)PY";

CheckResult compare_with_onnxruntime(const Graph& original, const Graph& optimized, const CheckOptions& opts) {
  CheckResult r;
  r.method = "onnxruntime";
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("isomer-check-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir};
  export_onnx_file(original, (dir / "a.onnx").string());
  export_onnx_file(optimized, (dir / "b.onnx").string());
  std::ofstream(dir / "check.py") << kOrtScript;
  std::string cmd = "\"" + find_python() + "\" \"" + (dir / "check.py").string() + "\" \"" +
                    (dir / "a.onnx").string() + "\" \"" + (dir / "b.onnx").string() + "\" " +
                    std::to_string(opts.seed) + " " + std::to_string(opts.tolerance) + " \"" +
                    (dir / "result.json").string() + "\" > \"" + (dir / "log.txt").string() + "\" 2>&1";
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::string last = last_log_line((dir / "log.txt").string());
    r.status = CheckResult::Status::Skipped;
    r.reason = "the graph has operators isomer does not evaluate, and ONNX Runtime could not run it (" +
               (last.empty() ? "python exited with " + std::to_string(rc) : last) + ")";
    return r;
  }
  std::ifstream in(dir / "result.json");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string json = ss.str();
  auto number = [&](const std::string& key) {
    size_t p = json.find("\"" + key + "\": ");
    return p == std::string::npos ? 0.0 : std::strtod(json.c_str() + p + key.size() + 4, nullptr);
  };
  auto text = [&](const std::string& key) {
    size_t p = json.find("\"" + key + "\": \"");
    if (p == std::string::npos) return std::string();
    p += key.size() + 5;
    return json.substr(p, json.find('"', p) - p);
  };
  r.max_abs_error = number("max_abs");
  r.max_rel_error = number("max_rel");
  r.worst_output = text("worst");
  r.reason = text("failed");
  r.status = r.reason.empty() ? CheckResult::Status::Passed : CheckResult::Status::Failed;
  return r;
}

}  // namespace

CheckResult compare_graphs(const Graph& original, const Graph& optimized, const CheckOptions& opts) {
  require(original.inputs().size() == optimized.inputs().size() &&
              original.outputs().size() == optimized.outputs().size(),
          "the optimized graph's interface differs from the original's");
  std::string why;
  if (is_evaluable(original, &why) && is_evaluable(optimized)) {
    std::vector<Tensor> inputs = random_inputs(original, opts.seed, opts.bindings);
    std::vector<Tensor> want = evaluate(original, inputs);
    std::vector<Tensor> got = evaluate(optimized, inputs);
    CheckResult r = compare_outputs(want, got, original.output_names(), opts.tolerance);
    r.method = "reference evaluator";
    return r;
  }
  if (opts.allow_onnxruntime) return compare_with_onnxruntime(original, optimized, opts);
  CheckResult r;
  r.reason = why;
  return r;
}

}  // namespace isomer
