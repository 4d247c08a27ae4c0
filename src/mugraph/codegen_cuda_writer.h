#pragma once
// The CUDA generator's plan of a block (where each op's tile lives) and the writer
// of its kernels' text; internal to codegen_cuda.cpp, which asks for the plan's
// shared memory and the kernels' text. Defined in codegen_cuda_writer.cpp, the
// 2-D register-tile contractions in cuda_contraction.cpp.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "mugraph/codegen_cuda.h"

namespace isomer::mugraph::cuda_detail {

inline bool has(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }
inline std::string str(int64_t v) { return std::to_string(v); }

constexpr int kWarps = kCudaThreads / 32;

// Where each op's tile lives: shared memory (a dense array over its axes at the
// phase's largest extents, the innermost row padded by one float when it is a
// multiple of 32 banks) or nowhere (inlined into its users; inputs read in place).
struct Layout {
  bool smem = false;
  size_t offset = 0;  // floats
  std::vector<int64_t> stride;  // per axis of the op
};

struct CudaPlan {
  const Program& p;
  const BlockGraph& g;
  std::vector<std::vector<int>> users;
  std::vector<Layout> lay;
  // Per op: the accumulator a loop contraction or sum adds its result to in its
  // own store (its only user; no tile of its own), else -1.
  std::vector<int> into_acc;
  // The loop's row sum of the stabilized exp that goes straight into an
  // accumulator (softmax's denominator): summed by the warp that computes the row's
  // exps (warp_rows_exp), -1 none.
  int row_sum = -1;
  bool stab_loop = false;
  std::vector<int64_t> stab_ext;
  size_t m_off = 0, fac_off = 0, red_off = 0, total = 0;  // floats

  CudaPlan(const Program& prog, const BlockGraph& graph);

  size_t bytes() const { return total * sizeof(float); }
};

// Which kernel of a block graph: the whole of it, or with a split loop, the runs of
// chunks (a block per tile and split, writing its accumulators and maxima to global
// scratch) and the combine (a block per tile: the rescaled sum, Post, outputs).
enum class Part { Whole, Runs, Combine };

const char* kernel_suffix(Part part);

// Writes a kernel's text.
class CudaWriter {
 public:
  CudaWriter(const CudaPlan& k, const std::vector<uint8_t>& skip) : k_(k), p_(k.p), g_(k.g), skip_(skip) {}

  // The text of a kernel of the block graph (its `name` and part's suffix).
  std::string kernel(const std::string& name, Part part);

  // Global scratch of a split loop: each (tile, split)'s accumulators (their
  // shared-memory layout) and running maxima.
  std::string scratch_text(const std::string& name) const;

  // The skip table baked in (causal masks), or "".
  std::string skip_table_text(const std::string& name) const;

 private:
  // The loop over chunks (a split's run of them in the runs kernel), accumulators
  // and running maxima in shared memory; the runs kernel ends by storing them.
  void loop(const std::string& name, Part part);

  // The splits' accumulators into shared memory: the largest of their maxima, each
  // split's accumulators rescaled by exp(m_split - m)^scale and summed (a split
  // that ran no chunk has m_split = -inf and adds nothing), as the interpreter's
  // combine.
  void combine(const std::string& name);

  void line(const std::string& s) { body_ << std::string(static_cast<size_t>(2 * depth_), ' ') << s << "\n"; }

  std::string ext_expr(int a, Phase ph) const;
  std::string gidx(int a, Phase ph) const;
  std::string smem_off(int i) const;
  std::string smem_ref(int i) const { return "S" + str(i) + "[" + smem_off(i) + "]"; }
  // Floats op i's shared-memory tile spans.
  int64_t smem_size(int i) const;
  int64_t stab_size() const;
  std::string stab_off() const;
  static std::string power(const std::string& f, int k);

  // Input op i's element at the current indices: its address, its value.
  std::string global_ptr(int i) const;
  std::string global(int i) const;

  // Op i's value at the current indices.
  std::string val(int i) const;
  std::string expr(int i) const;

  // Defines i<a> for `axes` (row-major, innermost last) from a flat index `e`.
  void decompose(const std::string& e, const std::vector<int>& axes, Phase ph);
  std::string count(const std::vector<int>& axes, Phase ph) const;

  // A loop over `axes` (indices i<a>) spread over the block's threads; `sync`
  // ends it with a barrier.
  void for_each(const std::vector<int>& /*unused*/, const std::vector<int>& axes, Phase ph,
                const std::function<void()>& body, bool sync);

  // `axes` by decreasing stride in `t` (a loop nest with the unit stride innermost).
  std::vector<int> by_stride(std::vector<int> axes, const IoTensor& t) const;

  // Stride of atom a in op o's shared-memory tile (0: not an axis of it).
  int64_t sstride(int o, int a) const;

  // A contraction of two shared-memory tiles over one atom k: a thread sums a
  // register tile of TJ indices of the outer output atoms (rows) x UI of the
  // innermost (x), 4 k at a time; an operand whose tile runs along k is read as a
  // float4 a row, the one over x, where it runs along x, as a float4 across its UI
  // indices (then a thread's x indices are adjacent, else UI apart); so a shared
  // load serves 4 or more FMAs (a 4x4 tile: 8 float4 loads for 64 FMAs). false:
  // not this shape (one operand over x and no other atom of the block's, the other
  // without x; threads that divide x's tile).
  // (cuda_contraction.cpp)
  bool tiled_contraction(int i, const std::vector<int>& args, const std::string& scale,
                         const std::function<std::string(const std::string&)>& store);
  // `body` for each output of the thread's register tile: j < tj outer indices
  // (mg_g + j * groups, those past mg_ny skipped), u < ui inner ones (i<x> = xi),
  // their i<atom> defined.
  void thread_tile(const std::vector<int>& outer, int x, Phase ph, int64_t tj, int64_t groups, int64_t ui,
                   const std::string& xi, const std::function<void()>& body);

  static int64_t max_count(const CudaPlan& k, const std::vector<int>& axes, Phase ph);

  // store = reduce over `red` of `term` for every index of `out` (sum, or max).
  // `store(v)`: the statement that stores the value v of the current output index.
  void reduction(const std::vector<int>& out, const std::vector<int>& red, Phase ph, const std::function<std::string()>& term,
                 const std::function<std::string(const std::string&)>& store, bool is_max, const std::string& scale = "");

  void compute(int i);

  // An input tile into shared memory, threads along the input's unit stride
  // (coalesced reads).
  void stage(int i, bool sync);

  // The loop's rescale of accumulator i before a chunk is added (" * fac^scale"), or "".
  std::string acc_factor(int i) const;

  // exp(x - m), m the running maximum of x over its atoms outside stab_axes.
  void stabilized_exp(int i);

  // exp(x - m) a warp per shift index (a row): the maximum by a warp shuffle (in
  // the loop: the chunk's, then the new running maximum and rescale factor), then
  // the row's exps, with no block barrier between (the row is the warp's).
  void warp_rows_exp(int i, const std::vector<int>& red);

  const CudaPlan& k_;
  const Program& p_;
  const BlockGraph& g_;
  const std::vector<uint8_t>& skip_;
  std::ostringstream body_;
  int depth_ = 1;
};

}  // namespace isomer::mugraph::cuda_detail
