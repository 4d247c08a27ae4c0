#pragma once
// The C interface of isomer's MPI plugin (libisomer_mpi.so, built from
// src/parallel/mpi/ against Debian's Open MPI). isomer itself does not link MPI:
// the commands that need it (run-plan, calibrate, rules generate --mpi) load the
// plugin at run time (parallel/comm.h), so every other command runs on machines
// without Open MPI. Plain C types only, so the plugin and isomer need not agree on
// a C++ ABI.
#ifdef __cplusplus
extern "C" {
#endif

enum { ISOMER_MPI_API_VERSION = 1 };
enum { ISOMER_MPI_FLOAT32 = 0, ISOMER_MPI_FLOAT64 = 1, ISOMER_MPI_INT64 = 2 };

struct IsomerMpiApi {
  int version;
  // MPI_Init_thread (funneled); 0 on success.
  int (*init)(void);
  int (*finalize)(void);
  int (*world_rank)(void);
  int (*world_size)(void);
  // MPI_Comm_split of the world (collective over every rank): a communicator handle.
  void* (*split)(int color, int key);
  int (*all_reduce_sum)(void* comm, void* data, long long count, int dtype);
  // `bytes` from every member, concatenated in member order into `out`.
  int (*all_gather)(void* comm, const void* in, long long bytes, void* out);
  // `in` holds one block of `count` elements per member; member k gets the sum of the k-th blocks.
  int (*reduce_scatter_sum)(void* comm, const void* in, void* out, long long count, int dtype);
  // Over the world: every rank's `bytes` (sizes[k] each), concatenated in rank order.
  int (*all_gather_v)(const void* in, long long bytes, const long long* sizes, void* out);
  int (*barrier)(void);
  double (*wtime)(void);
  const char* (*library_version)(void);
};

// The plugin's one exported symbol.
const struct IsomerMpiApi* isomer_mpi_api(void);

#ifdef __cplusplus
}
#endif
