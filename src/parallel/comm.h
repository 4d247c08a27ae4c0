#pragma once
// Communication between the ranks that run a plan. Two implementations:
//  - MPI (Open MPI, through the plugin of parallel/mpi_api.h, loaded at run time:
//    the only part of isomer that needs MPI), one process per rank under mpirun;
//  - LocalGroup: n ranks as n threads of one process, for tests and for checking a
//    plan of any size on one machine without MPI.
// Collectives name their group as the world ranks in block order (position k holds
// block k); every rank of the world calls every collective, in the same order (each
// in its own group), as rank graphs do (parallel/lower.h).
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace isomer::parallel {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;
  // Sums `count` elements of `data` (float32, float64 or int64) over the group, in place.
  virtual void all_reduce_sum(const std::vector<int>& group, void* data, size_t count, DType dtype) = 0;
  // Concatenates every member's `bytes` bytes in group order into `out`.
  virtual void all_gather(const std::vector<int>& group, const void* in, size_t bytes, void* out) = 0;
  // `in`: one block of `count` elements per member, in group order; member k gets in
  // `out` the sum of everyone's k-th blocks.
  virtual void reduce_scatter_sum(const std::vector<int>& group, const void* in, void* out, size_t count,
                                  DType dtype) = 0;
  // Every rank's string, in rank order (the world).
  virtual std::vector<std::string> all_gather_strings(const std::string& mine) = 0;
  virtual void barrier() = 0;
  virtual double wtime() const = 0;  // seconds
};

// Loads the MPI plugin and initializes MPI (once per process); finalizes when the
// last communicator goes. Throws Error saying what is missing when the plugin or
// Open MPI cannot be loaded. The plugin is looked for in $ISOMER_MPI_PLUGIN, then
// beside the isomer executable, then on the library path.
std::unique_ptr<Communicator> mpi_communicator();
// True if the process was started by an MPI launcher (OMPI_COMM_WORLD_SIZE, PMI_SIZE...).
bool launched_by_mpirun();

// `n` ranks in one process: communicator k is for the thread that plays rank k.
class LocalGroup {
 public:
  explicit LocalGroup(int n);
  ~LocalGroup();
  Communicator& rank(int k);
  int size() const;

  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Communicator>> comms_;
};

}  // namespace isomer::parallel
