#include "runtime/delegate.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_map>

#include "check/compare.h"
#include "onnx/onnx_io.h"
#include "runtime/compiler.h"

extern char** environ;

namespace isomer::runtime {

namespace {

// The helper: frames are a 4-byte little-endian length, a JSON header, then the
// binary blobs the header's "lens" announce. Stdout is the protocol's, so
// anything printed goes to stderr (the log) instead.
const char* kWorkerScript = R"PY(
import json, os, struct, sys
import numpy as np
import onnxruntime as ort
sock_in = os.fdopen(os.dup(0), "rb")
sock_out = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)
TYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
         9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}
CODES = {np.dtype(v): k for k, v in TYPES.items()}

def read(n):
    b = bytearray()
    while len(b) < n:
        c = sock_in.read(n - len(b))
        if not c:
            sys.exit(0)
        b += c
    return bytes(b)

def reply(h, blobs=()):
    data = json.dumps(h).encode()
    sock_out.write(struct.pack("<I", len(data)) + data)
    for b in blobs:
        sock_out.write(b)
    sock_out.flush()

sessions = []
reply({"ok": True, "version": ort.__version__})
while True:
    h = json.loads(read(struct.unpack("<I", read(4))[0]))
    blobs = [read(n) for n in h.get("lens", [])]
    try:
        if h["op"] == "load":
            so = ort.SessionOptions()
            so.intra_op_num_threads = h["threads"]
            so.inter_op_num_threads = 1
            # isomer's threads run right after: ONNX Runtime's must not spin.
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
            s = ort.InferenceSession(blobs[0], so, providers=["CPUExecutionProvider"])
            # Output types from runs on inputs of the planned shapes: all zeros, all
            # ones, and distinct values in [0, 1) (integers: 0, 1, 2, 0, ...); a later
            # run that fails (ones as indices, say) is left out.
            probes = []
            for fill in ("zeros", "ones", "distinct"):
                feeds = {}
                for i, t, d in zip(s.get_inputs(), h["dtypes"], h["dims"]):
                    n = int(np.prod(d))
                    v = {"zeros": np.zeros(n), "ones": np.ones(n),
                         "distinct": (np.arange(n) % 3 if np.dtype(TYPES[t]).kind in "iub" else
                                      np.random.default_rng(n).permutation(n) / max(n, 1))}[fill]
                    feeds[i.name] = v.astype(TYPES[t]).reshape(d)
                try:
                    probes.append([[CODES.get(r.dtype, 0), list(np.shape(r))] for r in s.run(None, feeds)])
                except Exception:
                    if not probes:
                        raise
            sessions.append(s)
            reply({"ok": True, "id": len(sessions) - 1, "probes": probes})
        else:
            s = sessions[h["id"]]
            feeds = {i.name: np.frombuffer(b, dtype=TYPES[t]).reshape(d)
                     for i, b, t, d in zip(s.get_inputs(), blobs, h["dtypes"], h["dims"])}
            res = [np.asarray(r, order="C") for r in s.run(None, feeds)]  # 0-d stays 0-d
            reply({"ok": True, "dtypes": [CODES.get(r.dtype, 0) for r in res], "dims": [list(r.shape) for r in res],
                   "lens": [r.nbytes for r in res]}, [r.tobytes() for r in res])
    except Exception as e:
        lines = [l for l in str(e).splitlines() if l.strip()]
        reply({"ok": False, "error": lines[-1] if lines else type(e).__name__})
)PY";

// FNV-1a: a hash that stays the same across builds (cost database signatures).
uint64_t stable_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

}  // namespace

std::shared_ptr<OrtWorker> OrtWorker::get() {
  static std::mutex mu;
  static std::shared_ptr<OrtWorker> worker;
  static std::string failed;  // why the first start failed: not tried again
  std::lock_guard<std::mutex> lock(mu);
  if (worker) return worker;
  require(failed.empty(), failed);
  try {
    worker = start();
  } catch (const Error& e) {
    failed = std::string("ONNX Runtime is not available (") + e.what() + ")";
    throw Error(failed);
  }
  return worker;
}

std::shared_ptr<OrtWorker> OrtWorker::start() {
  namespace fs = std::filesystem;
  std::string dir = (fs::temp_directory_path() / "isomer-ort-worker-XXXXXX").string();
  require(::mkdtemp(dir.data()) != nullptr, "cannot create a temporary directory for the ONNX Runtime helper");
  std::string script = dir + "/worker.py";
  std::ofstream(script) << kWorkerScript;
  std::shared_ptr<OrtWorker> w(new OrtWorker());
  w->log_path_ = dir + "/log.txt";
  int sv[2];
  require(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0,
          std::string("socketpair: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, w->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::string python = find_python();
  std::vector<char*> argv = {python.data(), script.data(), nullptr};
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, python.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(sv[1]);
  if (rc != 0) {
    ::close(sv[0]);
    throw Error("cannot start " + python + " for ONNX Runtime: " + std::strerror(rc));
  }
  w->fd_ = sv[0];
  w->pid_ = pid;
  w->version_ = nlohmann::json::parse(w->receive_header()).value("version", "");
  std::error_code ec;
  fs::remove(script, ec);  // read by now; the log stays for error messages
  return w;
}

OrtWorker::~OrtWorker() {
  if (fd_ >= 0) ::close(fd_);  // the helper reads end-of-file and exits
  if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  std::error_code ec;
  if (!log_path_.empty()) std::filesystem::remove_all(std::filesystem::path(log_path_).parent_path(), ec);
}

void OrtWorker::died(const std::string& doing) {
  std::string last = last_log_line(log_path_);
  throw Error(find_python() + " stopped while " + doing + (last.empty() ? "" : ": " + last));
}

void OrtWorker::send(const std::string& header, const std::vector<std::pair<const char*, size_t>>& blobs) {
  uint32_t n = static_cast<uint32_t>(header.size());
  char len[4] = {static_cast<char>(n), static_cast<char>(n >> 8), static_cast<char>(n >> 16),
                 static_cast<char>(n >> 24)};
  std::vector<std::pair<const char*, size_t>> parts = {{len, 4}, {header.data(), header.size()}};
  parts.insert(parts.end(), blobs.begin(), blobs.end());
  for (auto [p, size] : parts)
    while (size > 0) {
      ssize_t k = ::send(fd_, p, size, MSG_NOSIGNAL);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) died("reading a request");
      p += k;
      size -= static_cast<size_t>(k);
    }
}

void OrtWorker::receive_exact(char* to, size_t n) {
  while (n > 0) {
    ssize_t k = ::recv(fd_, to, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) died("answering");
    to += k;
    n -= static_cast<size_t>(k);
  }
}

std::string OrtWorker::receive_header() {
  unsigned char len[4];
  receive_exact(reinterpret_cast<char*>(len), 4);
  std::string h(len[0] | len[1] << 8 | len[2] << 16 | static_cast<uint32_t>(len[3]) << 24, '\0');
  receive_exact(h.data(), h.size());
  return h;
}

int OrtWorker::load(const std::string& model_bytes, int threads, const std::vector<TensorType>& inputs,
                    std::vector<std::vector<TensorType>>* probes) {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json h = {{"op", "load"}, {"threads", threads}, {"lens", {model_bytes.size()}}};
  h["dtypes"] = nlohmann::json::array();
  h["dims"] = nlohmann::json::array();
  for (const TensorType& t : inputs) {
    h["dtypes"].push_back(static_cast<int>(t.dtype));
    h["dims"].push_back(static_dims(t.shape));
  }
  send(h.dump(), {{model_bytes.data(), model_bytes.size()}});
  nlohmann::json r = nlohmann::json::parse(receive_header());
  require(r.value("ok", false), r.value("error", "ONNX Runtime refused the model"));
  for (const auto& probe : r.at("probes")) {
    probes->emplace_back();
    for (const auto& out : probe)
      probes->back().push_back({static_cast<DType>(out[0].get<int>()), make_shape(out[1].get<std::vector<int64_t>>())});
  }
  return r.at("id").get<int>();
}

void OrtWorker::run(int id, const std::vector<Buffer>& inputs, const std::vector<Buffer>& outputs,
                    const std::string& who) {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json h = {{"op", "run"}, {"id", id}};
  std::vector<std::pair<const char*, size_t>> blobs;
  for (const Buffer& b : inputs) {
    h["dtypes"].push_back(static_cast<int>(b.dtype));
    h["dims"].push_back(b.dims);
    h["lens"].push_back(b.bytes);
    blobs.emplace_back(b.data, b.bytes);
  }
  send(h.dump(), blobs);
  nlohmann::json r = nlohmann::json::parse(receive_header());
  if (!r.value("ok", false)) throw Error(who + " on ONNX Runtime: " + r.value("error", "failed"));
  std::vector<size_t> lens = r.at("lens").get<std::vector<size_t>>();
  std::vector<int> dtypes = r.at("dtypes").get<std::vector<int>>();
  std::vector<std::vector<int64_t>> dims = r.at("dims").get<std::vector<std::vector<int64_t>>>();
  std::string mismatch;
  for (size_t k = 0; k < lens.size(); ++k) {
    bool fits = k < outputs.size() && dtypes[k] == static_cast<int>(outputs[k].dtype) && dims[k] == outputs[k].dims &&
                lens[k] == outputs[k].bytes;
    if (fits) {
      receive_exact(outputs[k].data, lens[k]);
      continue;
    }
    std::string skip(lens[k], '\0');  // keep the stream in step before failing
    receive_exact(skip.data(), skip.size());
    if (mismatch.empty() && k < outputs.size())
      mismatch = "output " + std::to_string(k) + " came back as " + to_string(make_shape(dims[k])) +
                 " where the runtime planned " + to_string(make_shape(outputs[k].dims)) + " of " +
                 std::string(dtype_name(outputs[k].dtype));
  }
  if (mismatch.empty() && lens.size() != outputs.size())
    mismatch = std::to_string(lens.size()) + " outputs came back, " + std::to_string(outputs.size()) + " planned";
  if (!mismatch.empty()) throw DelegatedShapeError(who + " on ONNX Runtime: " + mismatch);
}

void lower_delegated(Compiler& c, const Node& n) {
  const std::string who = describe(n);
  // The one-node model: constant inputs as initializers, the others as inputs at
  // their concrete types, named as in the source (a subgraph may refer to them).
  GraphBuilder b(/*dedupe=*/false);
  std::unordered_map<Value, Value, ValueHash> seen;
  std::vector<Value> sub_inputs;
  std::vector<int> ids;
  std::vector<RtValue> in_types;
  std::set<std::string> names;
  uint64_t constants_hash = 0;  // the constant inputs are part of what is timed
  for (size_t k = 0; k < n.inputs().size(); ++k) {
    const Value& v = n.inputs()[k];
    if (!v.present() || seen.count(v)) {
      sub_inputs.push_back(v.present() ? seen[v] : v);
      continue;
    }
    int id = c.id(v);
    const RtValue& r = c.val(id);
    std::string name = v.node->kind() == NodeKind::Input ? v.node->name()
                       : v.index < v.node->output_names().size() ? v.node->output_names()[v.index]
                                                                 : "";
    if (name.empty() || !names.insert(name).second) name = "input" + std::to_string(k);
    names.insert(name);
    Value s;
    if (r.known) {
      s = b.constant(*r.known, name);
      constants_hash = constants_hash * 31 + stable_hash(r.known->bytes());
    } else {
      require(dtype_size(r.dtype) > 0, who + ": input " + std::to_string(k) + " has type " + std::string(dtype_name(r.dtype)) +
                                           ", which cannot be sent to ONNX Runtime");
      s = b.input(name, TensorType{r.dtype, make_shape(r.dims)});
      ids.push_back(c.as_plain(id));
      in_types.push_back(c.val(ids.back()));
    }
    seen[v] = s;
    sub_inputs.push_back(s);
  }
  // Its output types are ONNX Runtime's to tell (the imported ones may hold
  // symbolic dims): none are written into the model.
  OpaqueInfo info = *n.opaque();
  info.onnx_output_types.assign(n.num_outputs(), std::string());
  std::vector<Value> outs = b.opaque(std::move(info), sub_inputs, n.output_types(), n.name(), n.output_names());
  std::vector<std::string> out_names;
  for (size_t k = 0; k < outs.size(); ++k) out_names.push_back("output" + std::to_string(k));
  std::string bytes;
  try {
    bytes = export_onnx_bytes(b.finish(outs, out_names, c.graph().info()));
  } catch (const Error& e) {
    throw Error(who + ": cannot be made into a model of its own for ONNX Runtime (" + e.what() + ")");
  }
  std::shared_ptr<OrtWorker> worker;
  try {
    worker = OrtWorker::get();
  } catch (const Error& e) {
    throw Error(who + " is an operator isomer does not understand (opaque), and " + e.what());
  }
  std::vector<TensorType> probe_inputs;
  for (const RtValue& r : in_types) probe_inputs.push_back({r.dtype, make_shape(r.dims)});
  std::vector<std::vector<TensorType>> probes;
  int handle = -1;
  try {
    handle = worker->load(bytes, c.opts().threads, probe_inputs, &probes);
  } catch (const Error& e) {
    throw Error(who + ": ONNX Runtime " + worker->version() + " cannot run it (" + e.what() + ")");
  }
  // The buffers are planned from the probes' output types: they must not depend on
  // the data (NonZero's do), and every run checks that they did not.
  const std::vector<TensorType>& types = probes.front();
  for (size_t p = 1; p < probes.size(); ++p)
    for (size_t k = 0; k < types.size() && k < probes[p].size(); ++k)
      if (probes[p][k] != types[k])
        throw Error(who + ": its output shapes depend on the data (output " + std::to_string(k) + ": " +
                    to_string(types[k]) + " on zeros, " + to_string(probes[p][k]) + " on " +
                    (p == 1 ? "ones" : "distinct values") + "), so the runtime cannot plan them");
  require(types.size() == n.num_outputs(), who + ": ONNX Runtime gives " + std::to_string(types.size()) +
                                               " outputs, the model names " + std::to_string(n.num_outputs()));
  std::vector<int> out_ids;
  std::vector<RtValue> out_types;
  for (size_t k = 0; k < types.size(); ++k) {
    require(dtype_size(types[k].dtype) > 0, who + ": output " + std::to_string(k) + " has a type (" +
                                                to_string(types[k]) + ") the runtime cannot hold");
    std::vector<int64_t> dims = static_dims(types[k].shape);
    auto type = dnnl_type(types[k].dtype);
    int id = c.new_value(types[k].dtype, dims, type ? plain_md(dims, *type) : md_t(), n.name());
    c.bind(n.output(static_cast<uint32_t>(k)), id);
    out_ids.push_back(id);
    out_types.push_back(c.val(id));
  }
  RtStep s;
  s.info.kind = "onnxruntime";
  s.info.label = n.name();
  s.info.ops = {n.op_type()};
  std::ostringstream sig;
  sig << "ort " << (n.opaque()->domain.empty() ? "" : n.opaque()->domain + ".") << n.op_type() << " p" << std::hex
      << stable_hash(n.opaque()->node_proto) << " c" << constants_hash << std::dec;
  for (const RtValue& r : in_types) sig << " " << dtype_name(r.dtype) << to_string(r.dims);
  s.info.signature = sig.str();
  for (const RtValue& r : in_types) s.info.bytes += static_cast<double>(r.bytes);
  for (const RtValue& r : out_types) s.info.bytes += static_cast<double>(r.bytes);
  s.info.flops = s.info.bytes / 4;
  s.reads = ids;
  s.writes = out_ids;
  s.make_fn = [worker, handle, ids, in_types, out_ids, out_types, who](const std::function<char*(int)>& data) {
    std::vector<OrtWorker::Buffer> in, out;
    for (size_t k = 0; k < ids.size(); ++k)
      in.push_back({in_types[k].dtype, in_types[k].dims, data(ids[k]), in_types[k].bytes});
    for (size_t k = 0; k < out_ids.size(); ++k)
      out.push_back({out_types[k].dtype, out_types[k].dims, data(out_ids[k]), out_types[k].bytes});
    return std::function<void()>([worker, handle, in, out, who] { worker->run(handle, in, out, who); });
  };
  c.add_step(std::move(s));
}

}  // namespace isomer::runtime
