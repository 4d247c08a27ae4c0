#include "cli/onnxruntime.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "check/compare.h"
#include "ir/error.h"

namespace isomer::cli {

namespace {

// argv[1]: a JSON request (see OrtRequest); writes the outputs as .npz and a JSON
// result with the version, the output names in order and the timed runs.
const char* kScript = R"PY(
import json, sys, time
import numpy as np
import onnxruntime as ort
req = json.load(open(sys.argv[1]))

def session(optimize):
    so = ort.SessionOptions()
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if req["threads"] > 0:
        so.intra_op_num_threads = req["threads"]
        so.inter_op_num_threads = 1
    return ort.InferenceSession(req["model"], so, providers=["CPUExecutionProvider"])

sess = session(True)
given = np.load(req["inputs"])
feeds = {i.name: given[i.name] for i in sess.get_inputs()}
ref = session(False) if req["reference_outputs"] else sess
outs = ref.run(None, feeds)
names = [o.name for o in ref.get_outputs()]
np.savez(req["outputs"], **dict(zip(names, outs)))
ms = []
if req["bench"]:
    for _ in range(req["warmup"]):
        sess.run(None, feeds)
    for _ in range(max(req["repeat"], 1)):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        ms.append((time.perf_counter() - t0) * 1e3)
json.dump({"version": ort.__version__, "outputs": names, "ms": ms}, open(req["result"], "w"))
)PY";

std::string shell_quoted(const std::string& s) {
  std::string o = "'";
  for (char ch : s) o += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return o + "'";
}

// A private temporary directory, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "isomer-ort-XXXXXX").string();
    require(::mkdtemp(pattern.data()) != nullptr, "cannot create a temporary directory under " +
                                                      std::filesystem::temp_directory_path().string());
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

OrtResult run_onnxruntime(const OrtRequest& r) {
  TempDir dir;
  const std::string script = (dir.path / "run.py").string(), request = (dir.path / "request.json").string(),
                    inputs = (dir.path / "in.npz").string(), outputs = (dir.path / "out.npz").string(),
                    result = (dir.path / "result.json").string(), log = (dir.path / "log.txt").string();
  runtime::write_npz(inputs, r.inputs);
  std::ofstream(script) << kScript;
  nlohmann::json j = {{"model", std::filesystem::absolute(r.model).string()},
                      {"inputs", inputs},
                      {"outputs", outputs},
                      {"result", result},
                      {"reference_outputs", r.reference_outputs},
                      {"bench", r.bench},
                      {"warmup", r.warmup},
                      {"repeat", r.repeat},
                      {"threads", r.threads}};
  std::ofstream(request) << j.dump();
  std::string cmd = shell_quoted(find_python()) + " " + shell_quoted(script) + " " + shell_quoted(request) +
                    " >" + shell_quoted(log) + " 2>&1";
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::string last = last_log_line(log);
    throw Error(last.empty() ? "python exited with status " + std::to_string(rc) : last);
  }
  nlohmann::json res;
  try {
    res = nlohmann::json::parse(std::ifstream(result));
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("unreadable result from ONNX Runtime: ") + e.what());
  }
  OrtResult out;
  out.version = res.value("version", "");
  out.ms = res.value("ms", std::vector<double>{});
  runtime::NamedTensors arrays = runtime::read_npz(outputs);
  for (const std::string& name : res.value("outputs", std::vector<std::string>{}))
    for (auto& [n, t] : arrays)
      if (n == name) out.outputs.emplace_back(n, t);
  return out;
}

}  // namespace isomer::cli
