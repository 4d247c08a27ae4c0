// cuda_tiling(): a GPU grid, loop chunk and split for a block graph's structure.
#include <algorithm>

#include "ir/error.h"
#include "mugraph/codegen_cuda.h"

namespace isomer::mugraph {

namespace {

constexpr size_t kSmemBudgetFewBlocks = 200 << 10;  // blocks that run one a multiprocessor anyway

bool has(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

int64_t cuda_global_reads(const Program& p, const BlockGraph& g) {
  int64_t total = 0;
  for (const BOp& op : g.ops) {
    if (op.kind != BKind::Input) continue;
    int64_t n = op.phase == Phase::Pre ? g.splits : 1;
    for (int a : op.axes) n *= p.extent(a);
    for (const GridDim& d : g.grid)
      if (!has(op.axes, d.atom)) n *= (p.extent(d.atom) + d.tile - 1) / d.tile;
    total += n;
  }
  return total;
}

BlockGraph cuda_tiling(const Program& p, const BlockGraph& structure, const CudaTilingOptions& opt) {
  BlockGraph g = structure;
  g.grid.clear();
  std::vector<int> rows = row_atoms(p, g), inner;
  for (const std::vector<IoTensor>* ts : {&p.outputs, &p.inputs})
    for (const IoTensor& t : *ts)
      if (!t.dim_atoms.empty() && !t.dim_atoms.back().empty()) inner.push_back(t.dim_atoms.back().back());
  std::vector<int> growable;
  for (size_t a = 0; a < p.atoms.size(); ++a) {
    const int at = static_cast<int>(a);
    if (at == g.loop_atom || p.extent(at) == 1) continue;
    bool ok = !g.outputs.empty();
    for (const auto& [o, k] : g.outputs) ok = ok && has(g.ops[static_cast<size_t>(o)].axes, at);
    for (const BOp& op : g.ops) ok = ok && !has(op.reduce, at);
    if (!ok || (has(inner, at) && !has(rows, at))) continue;
    g.grid.push_back({at, 1});
    if (!has(rows, at)) growable.push_back(at);
  }
  if (g.loop_atom >= 0) g.chunk = std::min<int64_t>(opt.chunk, p.extent(g.loop_atom));
  auto tile_of = [&](int atom) -> int64_t& {
    for (GridDim& d : g.grid)
      if (d.atom == atom) return d.tile;
    throw Error("μGraph CUDA tiling: no grid dim");
  };
  const int64_t min_blocks = opt.min_blocks > 0 ? opt.min_blocks : 2 * opt.sms;
  const int64_t min_tiles = opt.min_tiles > 0 ? opt.min_tiles : (opt.sms + 1) / 2;
  // The loop's staged inputs over an atom: an atom none of them has (GQA's query
  // heads of a KV head) grows first, so that every row it adds shares the whole
  // chunk (an atom the mask has also brings its own mask rows, and the causal skip
  // is coarser along it); then the atom with the most tiles.
  auto loop_inputs_over = [&](int a) {
    int n = 0;
    for (const BOp& op : g.ops) n += op.kind == BKind::Input && op.phase == Phase::Loop && has(op.axes, a);
    return n;
  };
  auto before = [&](int a, int b) {
    const int na = loop_inputs_over(a), nb = loop_inputs_over(b);
    return na != nb ? na < nb : p.extent(a) / tile_of(a) > p.extent(b) / tile_of(b);
  };
  // The loop's splits for a grid of `tiles`: too few tiles to fill the
  // multiprocessors (decode, ViT) split it into runs for about four blocks a
  // multiprocessor (at most a run a chunk: fit_splits below). A loop of two
  // chunks stays whole: the combine's launch and scratch cost more than the chunk
  // a block saves (H200: GQA 16/4 heads at 128, 128 tiles, 0.0116 ms whole,
  // 0.0134 in 2; BERT 12 heads of 128, 96 tiles, 0.0114 and 0.0124).
  auto splits_for = [&](int64_t tiles) -> int64_t {
    if (g.loop_atom < 0) return 1;
    if (opt.splits > 0) return opt.splits;
    if (tiles >= opt.sms || g.num_chunks(p) <= 2) return 1;
    return (4 * opt.sms + tiles - 1) / tiles;
  };
  // Rows a block, doubled up to max_rows while the grid keeps the multiprocessors
  // busy: with a loop, a tile for every two of them before any split, or two
  // blocks each with its split; without one, two blocks each. A multiprocessor's
  // throughput grows with the rows a staged chunk serves more than with the
  // blocks it runs (H200, rows a block swept: GQA 16/4 heads at 128, 4 rows 0.026
  // ms, 16 rows (128 tiles) 0.0116, 32 rows (64) 0.0154; BERT 12 heads of 128,
  // 16 rows (96) 0.0114, 32 (48) 0.0144; ViT 6 heads of 197, 16 rows (78 tiles
  // split in 4) 0.0187, 32 rows (42, in 4) 0.0233; GQA 32/8 at 256, 16 rows (512)
  // 0.049, 32 (256) 0.039; decode, 4 rows (8 tiles split in 64) 0.0277, 1 row
  // (32 in 16) 0.0316). Not monotonic where a split comes in: the most rows that
  // qualify.
  std::vector<GridDim> chosen = g.grid;
  while (true) {
    int64_t prod = 1;
    for (int a : growable) prod *= tile_of(a);
    int best = -1;
    for (int a : growable)
      if (tile_of(a) * 2 <= p.extent(a) && (best < 0 || before(a, best))) best = a;
    if (best < 0 || prod * 2 > opt.max_rows) break;
    tile_of(best) *= 2;
    const int64_t tiles = g.num_tiles(p), blocks = tiles * std::min(splits_for(tiles), g.num_chunks(p));
    if (g.loop_atom < 0 ? tiles >= min_blocks : tiles >= min_tiles || blocks >= min_blocks) chosen = g.grid;
  }
  g.grid = chosen;
  // Without a loop, short rows: several row-atom indices a block (up to 4096
  // output elements), so that a row's reductions are a warp's, not the block's.
  if (g.loop_atom < 0) {
    auto block_elems = [&] {
      int64_t e = 1;
      for (int a : g.ops[static_cast<size_t>(g.outputs[0].first)].axes) e *= g.tile_extent(p, a, Phase::Pre);
      return e;
    };
    while (!g.outputs.empty()) {
      int best = -1;
      for (int a : rows)
        if (tile_of(a) * 2 <= p.extent(a) && (best < 0 || p.extent(a) / tile_of(a) > p.extent(best) / tile_of(best)))
          best = a;
      if (best < 0 || block_elems() * 2 > 4096) break;
      tile_of(best) *= 2;
      if (g.num_tiles(p) < min_blocks) {
        tile_of(best) /= 2;
        break;
      }
    }
  }
  const int64_t want_splits = splits_for(g.num_tiles(p));
  auto fit_splits = [&] {
    if (g.loop_atom < 0) return;
    const int64_t chunks = g.num_chunks(p), per = (chunks + std::min(want_splits, chunks) - 1) / std::min(want_splits, chunks);
    g.splits = (chunks + per - 1) / per;
  };
  fit_splits();
  // Few rows a block (decode: one query row a head) and no split: longer chunks,
  // so that a chunk's contraction still has an output element a thread.
  int64_t rows_per_block = 1;
  for (int a : growable) rows_per_block *= tile_of(a);
  if (g.loop_atom >= 0 && rows_per_block < 4 && g.splits == 1) g.chunk = std::min<int64_t>(4 * opt.chunk, p.extent(g.loop_atom));
  stabilize(p, g);
  // Fewer blocks than multiprocessors run one a multiprocessor: they may take more.
  const size_t budget = g.num_tiles(p) * g.splits >= min_blocks ? kCudaSmemBudget : kSmemBudgetFewBlocks;
  // Shorter chunks first; fewer rows a block only past what a block may have
  // (whole operands, attention's K and V without a loop, take the same at any).
  while (cuda_smem_bytes(p, g) > budget) {
    if (g.loop_atom >= 0 && g.chunk > 16) {
      g.chunk /= 2;
      fit_splits();
      continue;
    }
    if (cuda_smem_bytes(p, g) <= kCudaSmemLimit) break;
    int best = -1;
    for (int a : growable)
      if (tile_of(a) > 1 && (best < 0 || tile_of(a) > tile_of(best))) best = a;
    if (best < 0) break;
    tile_of(best) /= 2;
  }
  check_block_graph(p, g);
  return g;
}

}  // namespace isomer::mugraph
