#include "parallel/comm.h"

#include <dlfcn.h>
#include <unistd.h>

#include <barrier>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include "ir/error.h"
#include "parallel/mpi_api.h"

namespace isomer::parallel {

namespace {

template <class T>
void add_into(T* dst, const T* src, size_t n) {
  for (size_t k = 0; k < n; ++k) dst[k] += src[k];
}

void add_typed(void* dst, const void* src, size_t n, DType dtype) {
  switch (dtype) {
    case DType::Float32: add_into(static_cast<float*>(dst), static_cast<const float*>(src), n); break;
    case DType::Float64: add_into(static_cast<double*>(dst), static_cast<const double*>(src), n); break;
    case DType::Int64: add_into(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), n); break;
    default: throw Error("collectives sum float32, float64 or int64 tensors, not " + std::string(dtype_name(dtype)));
  }
}

size_t position_in(const std::vector<int>& group, int rank) {
  for (size_t k = 0; k < group.size(); ++k)
    if (group[k] == rank) return k;
  throw Error("rank " + std::to_string(rank) + " is not in its collective's group");
}

// ---- MPI through the plugin ------------------------------------------------------------

struct Plugin {
  const IsomerMpiApi* api = nullptr;
  int users = 0;
  std::mutex mutex;
};

Plugin& plugin() {
  static Plugin p;
  return p;
}

std::string exe_dir() {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "" : p.parent_path().string();
}

const IsomerMpiApi* load_plugin() {
  std::vector<std::string> tried;
  std::vector<std::string> paths;
  if (const char* env = std::getenv("ISOMER_MPI_PLUGIN")) paths.push_back(env);
  if (std::string dir = exe_dir(); !dir.empty()) paths.push_back(dir + "/libisomer_mpi.so");
  paths.push_back("libisomer_mpi.so");
  std::string errors;
  for (const std::string& path : paths) {
    // RTLD_GLOBAL: Open MPI's own components resolve symbols of libmpi.
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      errors += (errors.empty() ? " " : "; ") + path + ": " + dlerror();
      continue;
    }
    auto fn = reinterpret_cast<const IsomerMpiApi* (*)()>(dlsym(h, "isomer_mpi_api"));
    require(fn != nullptr, path + " is not isomer's MPI plugin (no isomer_mpi_api)");
    const IsomerMpiApi* api = fn();
    require(api && api->version == ISOMER_MPI_API_VERSION, path + ": MPI plugin of another isomer version");
    return api;
  }
  throw Error("this command needs MPI, and isomer's MPI plugin (libisomer_mpi.so, built where Open MPI's "
              "libopenmpi-dev is installed: `make deps build`) could not be loaded:" + errors);
}

int checked_int(size_t n, const char* what) {
  require(n <= static_cast<size_t>(INT_MAX), std::string(what) + ": message of " + std::to_string(n) +
                                                  " elements is over MPI's int count limit");
  return static_cast<int>(n);
}

int mpi_dtype(DType d) {
  switch (d) {
    case DType::Float32: return ISOMER_MPI_FLOAT32;
    case DType::Float64: return ISOMER_MPI_FLOAT64;
    case DType::Int64: return ISOMER_MPI_INT64;
    default: throw Error("collectives sum float32, float64 or int64 tensors, not " + std::string(dtype_name(d)));
  }
}

class MpiCommunicator : public Communicator {
 public:
  explicit MpiCommunicator(const IsomerMpiApi* api) : api_(api), rank_(api->world_rank()), size_(api->world_size()) {}
  ~MpiCommunicator() override {
    Plugin& p = plugin();
    std::lock_guard<std::mutex> lock(p.mutex);
    if (--p.users == 0) api_->finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return api_->library_version(); }

  void all_reduce_sum(const std::vector<int>& group, void* data, size_t count, DType dtype) override {
    if (group.size() <= 1) return;
    check(api_->all_reduce_sum(comm(group), data, checked_int(count, "all-reduce"), mpi_dtype(dtype)), "MPI_Allreduce");
  }
  void all_gather(const std::vector<int>& group, const void* in, size_t bytes, void* out) override {
    if (group.size() <= 1) {
      std::memcpy(out, in, bytes);
      return;
    }
    check(api_->all_gather(comm(group), in, checked_int(bytes, "all-gather"), out), "MPI_Allgather");
  }
  void reduce_scatter_sum(const std::vector<int>& group, const void* in, void* out, size_t count,
                          DType dtype) override {
    if (group.size() <= 1) {
      std::memcpy(out, in, count * dtype_size(dtype));
      return;
    }
    check(api_->reduce_scatter_sum(comm(group), in, out, checked_int(count, "reduce-scatter"), mpi_dtype(dtype)),
          "MPI_Reduce_scatter_block");
  }
  std::vector<std::string> all_gather_strings(const std::string& mine) override {
    std::vector<long long> sizes(static_cast<size_t>(size_));
    long long own = static_cast<long long>(mine.size());
    std::vector<int> world(static_cast<size_t>(size_));
    for (int k = 0; k < size_; ++k) world[static_cast<size_t>(k)] = k;
    all_gather(world, &own, sizeof own, sizes.data());
    long long total = 0;
    for (long long s : sizes) total += s;
    std::string all(static_cast<size_t>(total), '\0');
    check(api_->all_gather_v(mine.data(), own, sizes.data(), all.data()), "MPI_Allgatherv");
    std::vector<std::string> out;
    size_t at = 0;
    for (long long s : sizes) {
      out.push_back(all.substr(at, static_cast<size_t>(s)));
      at += static_cast<size_t>(s);
    }
    return out;
  }
  void barrier() override { check(api_->barrier(), "MPI_Barrier"); }
  double wtime() const override { return api_->wtime(); }

 private:
  void* comm(const std::vector<int>& group) {
    auto it = comms_.find(group);
    if (it != comms_.end()) return it->second;
    // Every rank reaches its group's first collective together (see comm.h): the split is collective.
    void* c = api_->split(group.front(), static_cast<int>(position_in(group, rank_)));
    require(c != nullptr, "MPI_Comm_split failed");
    return comms_.emplace(group, c).first->second;
  }
  static void check(int rc, const char* what) { require(rc == 0, std::string(what) + " failed (error " + std::to_string(rc) + ")"); }

  const IsomerMpiApi* api_;
  int rank_, size_;
  std::map<std::vector<int>, void*> comms_;
};

}  // namespace

std::unique_ptr<Communicator> mpi_communicator() {
  Plugin& p = plugin();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (!p.api) {
    const IsomerMpiApi* api = load_plugin();
    require(api->init() == 0, "MPI_Init failed");
    p.api = api;
  }
  ++p.users;
  return std::make_unique<MpiCommunicator>(p.api);
}

bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

// ---- ranks as threads -------------------------------------------------------------------

struct LocalGroup::Shared {
  explicit Shared(int n) : n(n), sync(n), in(static_cast<size_t>(n)), strings(static_cast<size_t>(n)) {}
  int n;
  std::barrier<> sync;
  std::vector<const void*> in;
  std::vector<const std::string*> strings;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

namespace {

class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup::Shared> s, int rank) : s_(std::move(s)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return s_->n; }
  std::string name() const override { return "threads"; }

  void all_reduce_sum(const std::vector<int>& group, void* data, size_t count, DType dtype) override {
    const size_t bytes = count * dtype_size(dtype);
    s_->in[static_cast<size_t>(rank_)] = data;
    s_->sync.arrive_and_wait();
    std::string sum(bytes, '\0');
    for (int r : group) add_typed(sum.data(), s_->in[static_cast<size_t>(r)], count, dtype);
    s_->sync.arrive_and_wait();  // everyone has read before anyone writes
    std::memcpy(data, sum.data(), bytes);
  }
  void all_gather(const std::vector<int>& group, const void* in, size_t bytes, void* out) override {
    s_->in[static_cast<size_t>(rank_)] = in;
    s_->sync.arrive_and_wait();
    for (size_t k = 0; k < group.size(); ++k)
      std::memcpy(static_cast<char*>(out) + k * bytes, s_->in[static_cast<size_t>(group[k])], bytes);
    s_->sync.arrive_and_wait();
  }
  void reduce_scatter_sum(const std::vector<int>& group, const void* in, void* out, size_t count,
                          DType dtype) override {
    const size_t bytes = count * dtype_size(dtype), k = position_in(group, rank_);
    s_->in[static_cast<size_t>(rank_)] = in;
    s_->sync.arrive_and_wait();
    std::memset(out, 0, bytes);
    for (int r : group) add_typed(out, static_cast<const char*>(s_->in[static_cast<size_t>(r)]) + k * bytes, count, dtype);
    s_->sync.arrive_and_wait();
  }
  std::vector<std::string> all_gather_strings(const std::string& mine) override {
    s_->strings[static_cast<size_t>(rank_)] = &mine;
    s_->sync.arrive_and_wait();
    std::vector<std::string> out;
    for (const std::string* s : s_->strings) out.push_back(*s);
    s_->sync.arrive_and_wait();
    return out;
  }
  void barrier() override { s_->sync.arrive_and_wait(); }
  double wtime() const override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - s_->start).count();
  }

 private:
  std::shared_ptr<LocalGroup::Shared> s_;
  int rank_;
};

}  // namespace

LocalGroup::LocalGroup(int n) : shared_(std::make_shared<Shared>(n)) {
  require(n >= 1, "a group needs at least one rank");
  for (int k = 0; k < n; ++k) comms_.push_back(std::make_unique<LocalCommunicator>(shared_, k));
}

LocalGroup::~LocalGroup() = default;

Communicator& LocalGroup::rank(int k) { return *comms_.at(static_cast<size_t>(k)); }

int LocalGroup::size() const { return static_cast<int>(comms_.size()); }

}  // namespace isomer::parallel
