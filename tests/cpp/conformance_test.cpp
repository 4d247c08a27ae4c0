// Conformance over Debian's libonnx-testdata: every model is imported, exported,
// checked by onnx::checker, re-imported and exported again (the two exports must be
// byte-identical and the two graphs the same). Models isomer can evaluate (no opaque
// nodes) run on their test_data_set_* inputs and must reproduce the expected outputs.
//
// Cases that fail are listed with their reason in tests/conformance/known_failures.txt;
// a listed case that passes fails the test too, so the list stays honest. Set
// ISOMER_CONFORMANCE_VERBOSE=1 to print every failure in the list's format.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "eval/evaluator.h"
#include "ir/error.h"
#include "onnx/onnx_io.h"

namespace isomer {
namespace {

namespace fs = std::filesystem;

const fs::path kTestData = ONNX_TESTDATA_DIR;
const fs::path kKnownFailures = fs::path(ISOMER_SOURCE_DIR) / "tests/conformance/known_failures.txt";

struct Outcome {
  bool round_tripped = false;
  bool evaluated = false;
  bool matched = false;
  std::string failure;  // empty: the case passes
};

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  require(in.good(), "cannot open " + path.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Tensor load_tensor(const fs::path& path) {
  onnx::TensorProto t;
  require(t.ParseFromString(read_bytes(path)), path.filename().string() + " is not a TensorProto");
  return tensor_from_proto(t, path.parent_path().string());
}

// The test data stores bfloat16 tensors as uint16 bit patterns (numpy has no bfloat16).
Tensor as_type(const Tensor& t, DType wanted) {
  if (t.dtype() == DType::UInt16 && wanted == DType::BFloat16) return Tensor(wanted, t.dims(), t.bytes());
  return t;
}

// input_0.pb, input_1.pb, ... (or output_*) in numeric order.
std::vector<fs::path> numbered_files(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (size_t i = 0;; ++i) {
    fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    files.push_back(p);
  }
  return files;
}

std::vector<fs::path> sorted_subdirs(const fs::path& dir, const std::string& prefix = "") {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Empty if `got` matches `want`: rtol 1e-3 / atol 1e-4 for floats (1e-2 / 1e-3 for
// 16-bit floats), exact for integers and bools.
std::string compare(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype())
    return "type " + std::string(dtype_name(got.dtype())) + ", expected " + std::string(dtype_name(want.dtype()));
  if (got.dims() != want.dims()) return "shape " + to_string(got.dims()) + ", expected " + to_string(want.dims());
  if (!is_numeric(got.dtype())) return got.same_as(want) ? "" : "values differ";
  const bool half = got.dtype() == DType::Float16 || got.dtype() == DType::BFloat16;
  const double rtol = half ? 1e-2 : 1e-3, atol = half ? 1e-3 : 1e-4;
  for (int64_t i = 0; i < got.numel(); ++i) {
    bool ok;
    if (is_float(got.dtype())) {
      double a = got.f64_at(i), b = want.f64_at(i);
      ok = (std::isnan(a) && std::isnan(b)) || a == b || std::fabs(a - b) <= atol + rtol * std::fabs(b);
      if (!ok)
        return "element " + std::to_string(i) + " is " + std::to_string(a) + ", expected " + std::to_string(b);
    } else {
      ok = got.i64_at(i) == want.i64_at(i);
      if (!ok)
        return "element " + std::to_string(i) + " is " + std::to_string(got.i64_at(i)) + ", expected " +
               std::to_string(want.i64_at(i));
    }
  }
  return "";
}

Outcome run_case(const fs::path& dir) {
  Outcome o;
  std::string stage = "import";
  try {
    Graph first = import_onnx_file((dir / "model.onnx").string());
    stage = "export";
    const std::string bytes = export_onnx_bytes(first);
    stage = "checker";
    check_onnx_model(bytes);
    stage = "re-import";
    Graph second = import_onnx_bytes(bytes, dir.string());
    stage = "second export";
    if (export_onnx_bytes(second) != bytes) {
      o.failure = "the two exports differ";
      return o;
    }
    if (!same_graph(first, second)) {
      o.failure = "the re-imported graph differs from the first";
      return o;
    }
    o.round_tripped = true;
    if (!is_evaluable(first)) return o;
    o.evaluated = true;
    for (const fs::path& set : sorted_subdirs(dir, "test_data_set_")) {
      stage = "evaluate " + set.filename().string();
      std::vector<Tensor> inputs;
      for (const fs::path& p : numbered_files(set, "input_")) {
        const size_t i = inputs.size();
        Tensor t = load_tensor(p);
        inputs.push_back(i < first.inputs().size() ? as_type(t, first.inputs()[i]->output_types()[0].dtype) : t);
      }
      // Inputs the data set does not give take their default values (initializers
      // the graph also lists as inputs, as simple/test_sequence_model7's pos_at), as
      // ONNX Runtime runs them.
      const std::vector<std::pair<std::string, Tensor>> defaults = input_defaults(first);
      for (size_t i = inputs.size(); i < first.inputs().size(); ++i)
        for (const auto& [name, value] : defaults)
          if (name == first.inputs()[i]->name()) inputs.push_back(value);
      std::vector<Tensor> outputs = evaluate(first, inputs);
      std::vector<fs::path> expected = numbered_files(set, "output_");
      require(expected.size() == outputs.size(), "graph has " + std::to_string(outputs.size()) +
                                                     " outputs, the data set " + std::to_string(expected.size()));
      for (size_t i = 0; i < expected.size(); ++i) {
        std::string diff = compare(outputs[i], as_type(load_tensor(expected[i]), outputs[i].dtype()));
        if (!diff.empty()) {
          o.failure = set.filename().string() + ": output " + std::to_string(i) + " ('" + first.output_names()[i] +
                      "') " + diff;
          return o;
        }
      }
    }
    o.matched = true;
  } catch (const std::exception& e) {
    o.failure = stage + ": " + e.what();
  }
  return o;
}

// id ("node/test_abs") -> reason, from the known failures file.
std::map<std::string, std::string> known_failures() {
  std::map<std::string, std::string> out;
  std::ifstream in(kKnownFailures);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t colon = line.find(':');
    std::string id = line.substr(0, colon);
    while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back()))) id.pop_back();
    out[id] = colon == std::string::npos ? "" : line.substr(colon + 1);
  }
  return out;
}

void run_suite(const std::string& suite) {
  const fs::path root = kTestData / suite;
  std::vector<fs::path> cases;
  for (const fs::path& dir : sorted_subdirs(root))
    if (fs::exists(dir / "model.onnx")) cases.push_back(dir);
  if (cases.empty()) GTEST_SKIP() << "no test data in " << root;

  // Cases are independent; run them on all cores.
  std::vector<Outcome> outcomes(cases.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  const unsigned n_threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned t = 0; t < n_threads; ++t)
    workers.emplace_back([&] {
      for (size_t i; (i = next++) < cases.size();) outcomes[i] = run_case(cases[i]);
    });
  for (auto& w : workers) w.join();

  const auto known = known_failures();
  const bool verbose = std::getenv("ISOMER_CONFORMANCE_VERBOSE") != nullptr;
  size_t round_tripped = 0, evaluated = 0, matched = 0, failed = 0, listed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Outcome& o = outcomes[i];
    const std::string id = suite + "/" + cases[i].filename().string();
    round_tripped += o.round_tripped;
    evaluated += o.evaluated;
    matched += o.matched;
    const bool is_known = known.count(id) > 0;
    if (!o.failure.empty()) {
      ++failed;
      listed += is_known;
      if (verbose) std::cout << id << ": " << o.failure << "\n";
      if (!is_known) ADD_FAILURE() << id << " fails and is not in known_failures.txt: " << o.failure;
    } else if (is_known) {
      ADD_FAILURE() << id << " passes now: remove it from known_failures.txt";
    }
  }
  std::cout << "[conformance] " << suite << ": " << cases.size() << " models, " << round_tripped
            << " round-tripped, " << evaluated << " evaluated, " << matched << " matched; " << failed
            << " failing (" << listed << " listed as known)\n";
}

TEST(Conformance, Node) { run_suite("node"); }
TEST(Conformance, PytorchConverted) { run_suite("pytorch-converted"); }
TEST(Conformance, PytorchOperator) { run_suite("pytorch-operator"); }
TEST(Conformance, Simple) { run_suite("simple"); }

TEST(Conformance, KnownFailuresNameRealCases) {
  for (const auto& [id, reason] : known_failures()) {
    EXPECT_TRUE(fs::exists(kTestData / id / "model.onnx")) << id << " in known_failures.txt is not a test case";
    EXPECT_FALSE(reason.empty()) << id << " in known_failures.txt needs a reason";
  }
}

}  // namespace
}  // namespace isomer
