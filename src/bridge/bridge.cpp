#include "bridge/bridge.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "ir/run_limit.h"
#include "bridge/ort_bridge_script.h"  // kOrtBridgeScript: ort_bridge.py, embedded by the build

extern char** environ;

namespace isomer::bridge {

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

using json = nlohmann::json;

// The header fields of `inputs` (dtypes, dims, lens; names unless positional) and
// their bytes as blobs.
void add_tensors(json& h, const NamedTensors& inputs, std::vector<std::pair<const char*, size_t>>* blobs) {
  h["names"] = json::array();
  h["dtypes"] = json::array();
  h["dims"] = json::array();
  h["lens"] = json::array();
  for (const auto& [name, t] : inputs) {
    require(dtype_size(t.dtype()) > 0 && t.dtype() != DType::BFloat16,
            "input '" + name + "' has type " + std::string(dtype_name(t.dtype())) +
                ", which cannot be sent to ONNX Runtime");
    h["names"].push_back(name);
    h["dtypes"].push_back(static_cast<int>(t.dtype()));
    h["dims"].push_back(t.dims());
    h["lens"].push_back(t.byte_size());
    blobs->emplace_back(t.bytes().data(), t.byte_size());
  }
}

std::string optimization_level(const SessionOptions& o) {
  require(o.optimization == "none" || o.optimization == "basic" || o.optimization == "extended" ||
              o.optimization == "all",
          "unknown ONNX Runtime optimization level '" + o.optimization + "'");
  return o.optimization;
}

// A path's bytes as hex: a file name need not be UTF-8, and a JSON string holds only UTF-8.
std::string hex_bytes(const std::string& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

}  // namespace

std::shared_ptr<OrtBridge> OrtBridge::shared() {
  static std::mutex mu;
  static std::shared_ptr<OrtBridge> bridge;
  static std::string failed;  // why the first start failed: not tried again
  std::lock_guard<std::mutex> lock(mu);
  if (bridge && bridge->fd_ < 0) bridge.reset();  // abandoned past a run limit: a fresh one
  if (bridge) return bridge;
  require(failed.empty(), failed);
  try {
    bridge = start();
  } catch (const Error& e) {
    failed = std::string("ONNX Runtime is not available (") + e.what() + ")";
    throw Error(failed);
  }
  return bridge;
}

std::shared_ptr<OrtBridge> OrtBridge::start() {
  namespace fs = std::filesystem;
  std::string dir = (fs::temp_directory_path() / "isomer-ort-bridge-XXXXXX").string();
  require(::mkdtemp(dir.data()) != nullptr, "cannot create a temporary directory for the ONNX Runtime helper");
  std::shared_ptr<OrtBridge> b(new OrtBridge());
  b->log_path_ = dir + "/log.txt";
  int sv[2];
  require(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0,
          std::string("socketpair: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, b->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::string python = find_python(), flag = "-c", script = kOrtBridgeScript;
  std::vector<char*> argv = {python.data(), flag.data(), script.data(), nullptr};
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, python.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(sv[1]);
  if (rc != 0) {
    ::close(sv[0]);
    throw Error("cannot start " + python + ": " + std::strerror(rc));
  }
  b->fd_ = sv[0];
  b->pid_ = pid;
  json hello = json::parse(b->receive_header());
  if (!hello.value("ok", false)) throw Error(python + " cannot import onnxruntime: " + hello.value("error", "?"));
  b->version_ = hello.value("version", "");
  return b;
}

OrtBridge::~OrtBridge() {
  if (fd_ >= 0) ::close(fd_);  // the helper reads end-of-file and exits
  if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  std::error_code ec;
  if (!log_path_.empty()) std::filesystem::remove_all(std::filesystem::path(log_path_).parent_path(), ec);
}

void OrtBridge::died(const std::string& doing) {
  std::string last = last_log_line(log_path_);
  throw Error(find_python() + " (the ONNX Runtime helper) stopped while " + doing + (last.empty() ? "" : ": " + last));
}

void OrtBridge::send(const std::string& header, const std::vector<std::pair<const char*, size_t>>& blobs) {
  if (fd_ < 0) died("reading a request");
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

void OrtBridge::wait_for_answer() {
  // Without a run limit (ir/run_limit.h) the helper is waited for as long as it takes.
  for (std::optional<std::chrono::steady_clock::duration> left; (left = run_time_left());) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*left).count();
    if (ms <= 0) {
      // The helper is busy with a run that will not end in time: it goes, and the
      // next use starts a fresh one.
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      ::close(fd_);
      fd_ = pid_ = -1;
      exceed_run_limit();
    }
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1000)));
    if (r > 0 || (r < 0 && errno != EINTR)) return;
  }
}

void OrtBridge::receive_exact(char* to, size_t n) {
  if (fd_ < 0) died("answering");
  // An empty tensor's blob is no bytes: waiting for them would wait for the next
  // reply, which never comes, until the run limit kills the helper.
  if (n == 0) return;
  wait_for_answer();
  while (n > 0) {
    ssize_t k = ::recv(fd_, to, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) died("answering");
    to += k;
    n -= static_cast<size_t>(k);
  }
}

std::string OrtBridge::receive_header() {
  unsigned char len[4];
  receive_exact(reinterpret_cast<char*>(len), 4);
  std::string h(len[0] | len[1] << 8 | len[2] << 16 | static_cast<uint32_t>(len[3]) << 24, '\0');
  receive_exact(h.data(), h.size());
  return h;
}

// One request whose reply carries no blobs; OrtError with ONNX Runtime's message
// when it failed.
std::string OrtBridge::request(const std::string& header, const std::vector<std::pair<const char*, size_t>>& blobs) {
  std::lock_guard<std::mutex> lock(mu_);
  send(header, blobs);
  std::string reply = receive_header();
  json r = json::parse(reply);
  if (!r.value("ok", false)) throw OrtError(r.value("error", "ONNX Runtime failed"));
  return reply;
}

Session OrtBridge::loaded(const std::string& reply) {
  json r = json::parse(reply);
  Session s;
  s.id = r.at("id").get<int>();
  for (const auto& in : r.at("inputs")) {
    s.input_names.push_back(in[0].get<std::string>());
    Shape shape;
    for (int64_t d : in[2].get<std::vector<int64_t>>()) shape.push_back(d >= 0 ? Dim(d) : Dim::unknown());
    s.input_types.push_back({static_cast<DType>(in[1].get<int>()), shape});
  }
  s.output_names = r.at("outputs").get<std::vector<std::string>>();
  if (r.contains("output_types"))
    for (const auto& t : r.at("output_types")) {
      Session::StatedType st;
      st.elem_type = t[0].get<int>();
      st.ranked = !t[1].is_null();
      if (st.ranked)
        for (const auto& d : t[1]) {
          st.dims.push_back(d.is_number_integer() ? d.get<int64_t>() : -1);
          st.symbols.push_back(d.is_string() ? d.get<std::string>() : std::string());
        }
      s.output_types.push_back(std::move(st));
    }
  if (r.contains("probes"))
    for (const auto& probe : r.at("probes")) {
      s.probes.emplace_back();
      for (const auto& out : probe)
        s.probes.back().push_back(
            {static_cast<DType>(out[0].get<int>()), make_shape(out[1].get<std::vector<int64_t>>())});
    }
  return s;
}

Session OrtBridge::load_bytes(const std::string& model, const SessionOptions& opts,
                              const std::vector<TensorType>* probe_inputs) {
  json h = {{"op", "load"},
            {"threads", opts.threads},
            {"optimization", optimization_level(opts)},
            {"spinning", opts.spinning},
            {"lens", {model.size()}}};
  if (probe_inputs) {
    json p = {{"dtypes", json::array()}, {"dims", json::array()}};
    for (const TensorType& t : *probe_inputs) {
      p["dtypes"].push_back(static_cast<int>(t.dtype));
      p["dims"].push_back(static_dims(t.shape, "a probed input's shape"));
    }
    h["probe"] = p;
  }
  return loaded(request(h.dump(), {{model.data(), model.size()}}));
}

Session OrtBridge::load_file(const std::string& path, const SessionOptions& opts) {
  json h = {{"op", "load"},
            {"threads", opts.threads},
            {"optimization", optimization_level(opts)},
            {"spinning", opts.spinning},
            {"model_path_hex", hex_bytes(std::filesystem::absolute(path).string())}};
  return loaded(request(h.dump(), {}));
}

void OrtBridge::free(int id) {
  request(json{{"op", "free"}, {"id", id}}.dump(), {});
  std::lock_guard<std::mutex> lock(mu_);
  run_headers_.erase(id);
}

std::vector<std::pair<std::string, int>> OrtBridge::operators(const std::string& domain) {
  json r = json::parse(request(json{{"op", "operators"}, {"domain", domain}}.dump(), {}));
  return r.at("operators").get<std::vector<std::pair<std::string, int>>>();
}

NamedTensors OrtBridge::run(int id, const NamedTensors& inputs) {
  json h = {{"op", "run"}, {"id", id}};
  std::vector<std::pair<const char*, size_t>> blobs;
  add_tensors(h, inputs, &blobs);
  std::lock_guard<std::mutex> lock(mu_);
  send(h.dump(), blobs);
  json r = json::parse(receive_header());
  if (!r.value("ok", false)) throw OrtError(r.value("error", "ONNX Runtime failed"));
  NamedTensors out;
  std::vector<std::string> names = r.at("names").get<std::vector<std::string>>();
  std::vector<size_t> lens = r.at("lens").get<std::vector<size_t>>();
  for (size_t k = 0; k < lens.size(); ++k) {
    std::string bytes(lens[k], '\0');
    receive_exact(bytes.data(), bytes.size());
    out.emplace_back(names[k], Tensor(static_cast<DType>(r["dtypes"][k].get<int>()),
                                      r["dims"][k].get<std::vector<int64_t>>(), std::move(bytes)));
  }
  return out;
}

std::string OrtBridge::run_into(int id, const std::vector<Buffer>& inputs, const std::vector<Buffer>& outputs) {
  std::lock_guard<std::mutex> lock(mu_);
  // A delegated step sends the same header every run and gets the same one back:
  // both are made and read once (nlohmann's build, dump and parse were a tenth of
  // the round trip), and made again where the inputs' types change.
  RunHeaders& c = run_headers_[id];
  // (A step of no inputs, a node over constants alone, matches a fresh entry's empty
  // list: only a header made before may be sent again.)
  bool same = !c.request.empty() && c.inputs.size() == inputs.size();
  for (size_t k = 0; same && k < inputs.size(); ++k)
    same = c.inputs[k].dtype == inputs[k].dtype && c.inputs[k].dims == inputs[k].dims &&
           c.inputs[k].bytes == inputs[k].bytes;
  if (!same) {
    json h = {{"op", "run"}, {"id", id}, {"dtypes", json::array()}, {"dims", json::array()}, {"lens", json::array()}};
    c.inputs.clear();
    for (const Buffer& b : inputs) {
      h["dtypes"].push_back(static_cast<int>(b.dtype));
      h["dims"].push_back(b.dims);
      h["lens"].push_back(b.bytes);
      c.inputs.push_back({b.dtype, b.dims, nullptr, b.bytes});
    }
    c.request = h.dump();
    c.reply.clear();
  }
  std::vector<std::pair<const char*, size_t>> blobs;
  for (const Buffer& b : inputs) blobs.emplace_back(b.data, b.bytes);
  send(c.request, blobs);
  std::string reply = receive_header();
  if (reply != c.reply) {
    json r = json::parse(reply);
    if (!r.value("ok", false)) throw OrtError(r.value("error", "ONNX Runtime failed"));
    c.lens = r.at("lens").get<std::vector<size_t>>();
    c.dtypes = r.at("dtypes").get<std::vector<int>>();
    c.dims = r.at("dims").get<std::vector<std::vector<int64_t>>>();
    c.reply = std::move(reply);
  }
  const std::vector<size_t>& lens = c.lens;
  const std::vector<int>& dtypes = c.dtypes;
  const std::vector<std::vector<int64_t>>& dims = c.dims;
  std::string mismatch;
  for (size_t k = 0; k < lens.size(); ++k) {
    bool fits = k < outputs.size() && dtypes[k] == static_cast<int>(outputs[k].dtype) && dims[k] == outputs[k].dims &&
                lens[k] == outputs[k].bytes;
    if (fits) {
      receive_exact(outputs[k].data, lens[k]);
      continue;
    }
    std::string skip(lens[k], '\0');  // keep the stream in step before reporting
    receive_exact(skip.data(), skip.size());
    if (mismatch.empty() && k < outputs.size())
      mismatch = "output " + std::to_string(k) + " came back as " + to_string(make_shape(dims[k])) + " of " +
                 std::string(dtype_name(static_cast<DType>(dtypes[k]))) + " where " +
                 to_string(make_shape(outputs[k].dims)) + " of " + std::string(dtype_name(outputs[k].dtype)) +
                 " was expected";
  }
  if (mismatch.empty() && lens.size() != outputs.size())
    mismatch = std::to_string(lens.size()) + " outputs came back, " + std::to_string(outputs.size()) + " expected";
  return mismatch;
}

std::vector<double> OrtBridge::time(int id, const NamedTensors& inputs, int warmup, int repeats, bool processor_clock,
                                    std::string* clock) {
  json h = {{"op", "time"}, {"id", id}, {"warmup", warmup}, {"repeats", repeats},
            {"clock", processor_clock ? "processor" : "wall"}};
  std::vector<std::pair<const char*, size_t>> blobs;
  add_tensors(h, inputs, &blobs);
  json r = json::parse(request(h.dump(), blobs));
  if (clock) *clock = r.value("clock", "wall");
  return r.at("ms").get<std::vector<double>>();
}

}  // namespace isomer::bridge
