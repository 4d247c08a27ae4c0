// isomer's MPI plugin: the few MPI calls isomer makes, behind the C interface of
// parallel/mpi_api.h. Built only where Open MPI is installed; loaded by
// parallel/comm.cpp when a command needs MPI.
#include <mpi.h>

#include <vector>

#include "parallel/mpi_api.h"

namespace {

MPI_Datatype type_of(int dtype) {
  switch (dtype) {
    case ISOMER_MPI_FLOAT64: return MPI_DOUBLE;
    case ISOMER_MPI_INT64: return MPI_INT64_T;
    default: return MPI_FLOAT;
  }
}

int init() {
  int done = 0;
  MPI_Initialized(&done);
  if (done) return 0;
  int provided = 0;
  return MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS ? 0 : 1;
}

int finalize() {
  int done = 0;
  MPI_Finalized(&done);
  return done ? 0 : MPI_Finalize();
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

void* split(int color, int key) {
  auto* c = new MPI_Comm;
  if (MPI_Comm_split(MPI_COMM_WORLD, color, key, c) != MPI_SUCCESS) {
    delete c;
    return nullptr;
  }
  return c;
}

int all_reduce_sum(void* comm, void* data, long long count, int dtype) {
  return MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), type_of(dtype), MPI_SUM,
                       *static_cast<MPI_Comm*>(comm));
}

int all_gather(void* comm, const void* in, long long bytes, void* out) {
  return MPI_Allgather(in, static_cast<int>(bytes), MPI_BYTE, out, static_cast<int>(bytes), MPI_BYTE,
                       *static_cast<MPI_Comm*>(comm));
}

int reduce_scatter_sum(void* comm, const void* in, void* out, long long count, int dtype) {
  return MPI_Reduce_scatter_block(in, out, static_cast<int>(count), type_of(dtype), MPI_SUM,
                                  *static_cast<MPI_Comm*>(comm));
}

int all_gather_v(const void* in, long long bytes, const long long* sizes, void* out) {
  const int n = world_size();
  std::vector<int> counts(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
  long long at = 0;
  for (int k = 0; k < n; ++k) {
    counts[static_cast<size_t>(k)] = static_cast<int>(sizes[k]);
    displs[static_cast<size_t>(k)] = static_cast<int>(at);
    at += sizes[k];
  }
  return MPI_Allgatherv(in, static_cast<int>(bytes), MPI_BYTE, out, counts.data(), displs.data(), MPI_BYTE,
                        MPI_COMM_WORLD);
}

int barrier() { return MPI_Barrier(MPI_COMM_WORLD); }

double wtime() { return MPI_Wtime(); }

const char* library_version() {
  static char text[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(text, &len);
  return text;
}

const IsomerMpiApi kApi = {ISOMER_MPI_API_VERSION, init,      finalize,     world_rank, world_size,
                           split,                  all_reduce_sum, all_gather, reduce_scatter_sum,
                           all_gather_v,           barrier,   wtime,        library_version};

}  // namespace

extern "C" __attribute__((visibility("default"))) const IsomerMpiApi* isomer_mpi_api(void) { return &kApi; }
