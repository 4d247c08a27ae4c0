#pragma once
// Parallel tensors: how a tensor lies on the device mesh. Each dimension has a size
// and is split over a list of mesh axes (its degree is the product of their sizes;
// block index in mixed radix, first axis major). Over the remaining axes the tensor
// has a replica dimension of one of two kinds: copies (every device of the group
// holds the same block) or partial sums (the blocks add up to the tensor).
//
// Moving a tensor from one layout to another is a short sequence of steps, each a
// local slice or one collective over a set of axes (Unity's Repartition, Reduce and
// Combine): slice what the target splits and the source holds whole, sum the
// partial sums (a reduce-scatter where the target splits a dimension over exactly
// those axes, else an all-reduce), gather what the target no longer splits, slice
// the rest. The simulator prices these steps and run-plan executes them, so what is
// predicted is what runs.
#include <cstdint>
#include <string>
#include <vector>

#include "ir/shape.h"
#include "parallel/machine.h"

namespace isomer::parallel {

struct Layout {
  std::vector<std::vector<int>> dims;  // per tensor dimension: the mesh axes splitting it
  std::vector<int> partial;            // mesh axes over which the blocks are partial sums (sorted)

  static Layout replicated(size_t rank) { return {std::vector<std::vector<int>>(rank), {}}; }
  bool operator==(const Layout& o) const { return dims == o.dims && partial == o.partial; }
  bool operator!=(const Layout& o) const { return !(*this == o); }
  // Every mesh axis the layout splits a dimension over or sums over.
  std::vector<int> used_axes() const;
  bool uses(int axis) const;
  size_t hash() const;
};

// "[S(n0),_,S(d0 d1)] partial(d2)" for reports; `mesh` names the axes.
std::string layout_text(const Layout& l, const Mesh& mesh);

// The block one device holds: each dim divided by its degree. Throws Error if a
// degree does not divide its dim.
std::vector<int64_t> local_dims(const std::vector<int64_t>& dims, const Layout& l, const Mesh& mesh);
// Where a device's block starts, per dim.
std::vector<int64_t> block_offsets(const std::vector<int64_t>& dims, const Layout& l, const Mesh& mesh, int device);

struct CommStep {
  enum class Kind { Slice, AllReduce, AllGather, ReduceScatter } kind = Kind::Slice;
  std::vector<int> axes;  // the group (Slice: the axes the dim is further cut by)
  int dim = -1;           // the tensor dim gathered, scattered or sliced (-1 for all-reduce)
  std::vector<int64_t> local_before, local_after;  // one device's block dims around the step
  Layout after;           // the layout the step leaves
};
const char* step_name(CommStep::Kind k);

// The steps from `from` to `to` for a tensor of global `dims`. Both layouts must fit
// the tensor (ranks equal, degrees dividing dims); `to` has no partial sums.
std::vector<CommStep> redistribute(const Layout& from, const Layout& to, const std::vector<int64_t>& dims,
                                   const Mesh& mesh);

}  // namespace isomer::parallel
