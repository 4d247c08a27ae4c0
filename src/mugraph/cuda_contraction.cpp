// CudaWriter's 2-D register-tile contractions (see codegen_cuda_writer.h).
#include "mugraph/codegen_cuda_writer.h"

namespace isomer::mugraph::cuda_detail {

bool CudaWriter::tiled_contraction(int i, const std::vector<int>& args, const std::string& scale,
                                   const std::function<std::string(const std::string&)>& store) {
  const BOp& op = g_.ops[static_cast<size_t>(i)];
  const Phase ph = op.phase;
  if (args.size() != 2 || op.reduce.size() != 1 || op.axes.size() < 2) return false;
  const int k = op.reduce[0], x = op.axes.back();
  const std::vector<int> outer(op.axes.begin(), op.axes.end() - 1);
  const int64_t nx = g_.tile_extent(p_, x, ph), ny = max_count(k_, outer, ph);
  if (nx * ny < kCudaThreads) return false;
  // A ragged last chunk along x: the threads past its end sum stale values and
  // store nothing.
  const bool x_ragged = ext_expr(x, ph) != str(nx);
  int xo = -1, yo = -1;
  for (int a : args) {
    if (!k_.lay[static_cast<size_t>(a)].smem || !has(g_.ops[static_cast<size_t>(a)].axes, k)) return false;
    (has(g_.ops[static_cast<size_t>(a)].axes, x) ? xo : yo) = a;
  }
  if (xo < 0 || yo < 0) return false;
  for (int a : g_.ops[static_cast<size_t>(xo)].axes)
    if (a != x && a != k && g_.tile_extent(p_, a, ph) != 1) return false;
  const int64_t sxx = sstride(xo, x), sxk = sstride(xo, k), syk = sstride(yo, k);
  bool y_rows4 = syk == 1;  // float4 along k, a row of Y
  for (int a : g_.ops[static_cast<size_t>(yo)].axes) y_rows4 = y_rows4 && (a == k || sstride(yo, a) % 4 == 0);
  const bool x_rows4 = sxk == 1 && sxx % 4 == 0;  // float4 along k, a row of X
  // The thread tile with the fewest shared loads a FMA, every output in one pass.
  int64_t ui = 0, xt = 0, groups = 0, tj = 0;
  double best = 1e30;
  for (int64_t u : {4, 2, 1}) {
    if (nx % u != 0 || kCudaThreads % (nx / u) != 0) continue;
    const int64_t t = nx / u, gr = kCudaThreads / t, j = (ny + gr - 1) / gr;
    if (u * j > 16) continue;
    const bool x_cols = !x_rows4 && sxx == 1 && u > 1 && sxk % u == 0;  // float<u> along x
    const double loads = (y_rows4 ? j : 4 * j) + (x_rows4 ? u : x_cols ? 4 : 4 * u);
    if (loads / static_cast<double>(4 * u * j) < best) best = loads / static_cast<double>(4 * u * j), ui = u, xt = t, groups = gr, tj = j;
  }
  if (ui == 0) return false;
  const bool x_cols = !x_rows4 && sxx == 1 && ui > 1 && sxk % ui == 0;
  const std::string X = "S" + str(xo), Y = "S" + str(yo), U = str(ui), J = str(tj), nk = count({k}, ph);
  // x of the thread's u-th index, and its offset in X's tile.
  const std::string xi = x_cols ? "mg_x * " + U + " + u" : "mg_x + u * " + str(xt);
  line("{");
  ++depth_;
  line("const int mg_x = threadIdx.x % " + str(xt) + ", mg_g = threadIdx.x / " + str(xt) + ";");
  line("const int mg_ny = " + count(outer, ph) + ";");
  line("int mg_yo[" + J + "];  // Y's row offsets");
  line("#pragma unroll");
  line("for (int j = 0; j < " + J + "; ++j) {");
  ++depth_;
  decompose("min(mg_g + j * " + str(groups) + ", mg_ny - 1)", outer, ph);
  std::string yoff;
  for (int a : g_.ops[static_cast<size_t>(yo)].axes)
    if (a != k) yoff += (yoff.empty() ? "" : " + ") + ("i" + str(a)) + " * " + str(sstride(yo, a));
  line("mg_yo[j] = " + (yoff.empty() ? std::string("0") : yoff) + ";");
  --depth_;
  line("}");
  line("const float* const mg_xp = " + X + " + (" + (x_cols ? "mg_x * " + U : "mg_x") + ") * " + str(sxx) + ";");
  const std::string ustep = x_cols ? str(sxx) : str(xt * sxx);
  line("float mg_a[" + J + "][" + U + "];");
  line("#pragma unroll");
  line("for (int j = 0; j < " + J + "; ++j)");
  line("  for (int u = 0; u < " + U + "; ++u) mg_a[j][u] = 0.f;");
  line("int mg_k = 0;");
  line("#pragma unroll 2");
  line("for (; mg_k + 4 <= " + nk + "; mg_k += 4) {");
  ++depth_;
  line("float mg_yv[" + J + "][4], mg_xv[" + U + "][4];");
  line("#pragma unroll");
  if (y_rows4) {
    line("for (int j = 0; j < " + J + "; ++j) mg_ld<4>(mg_yv[j], " + Y + " + mg_yo[j] + mg_k);");
  } else {
    line("for (int j = 0; j < " + J + "; ++j)");
    line("  for (int kk = 0; kk < 4; ++kk) mg_yv[j][kk] = " + Y + "[mg_yo[j] + (mg_k + kk) * " + str(syk) + "];");
  }
  line("#pragma unroll");
  if (x_rows4) {
    line("for (int u = 0; u < " + U + "; ++u) mg_ld<4>(mg_xv[u], mg_xp + u * " + ustep + " + mg_k);");
  } else if (x_cols) {
    line("for (int kk = 0; kk < 4; ++kk) {");
    line("  float mg_t[" + U + "];");
    line("  mg_ld<" + U + ">(mg_t, mg_xp + (mg_k + kk) * " + str(sxk) + ");");
    line("  for (int u = 0; u < " + U + "; ++u) mg_xv[u][kk] = mg_t[u];");
    line("}");
  } else {
    line("for (int u = 0; u < " + U + "; ++u)");
    line("  for (int kk = 0; kk < 4; ++kk) mg_xv[u][kk] = mg_xp[u * " + ustep + " + (mg_k + kk) * " + str(sxk) + "];");
  }
  line("#pragma unroll");
  line("for (int kk = 0; kk < 4; ++kk)");
  line("  for (int j = 0; j < " + J + "; ++j)");
  line("    for (int u = 0; u < " + U + "; ++u) mg_a[j][u] += mg_yv[j][kk] * mg_xv[u][kk];");
  --depth_;
  line("}");
  const int64_t kmax = g_.tile_extent(p_, k, ph);
  if (nk != str(kmax) || kmax % 4 != 0) {
    line("for (; mg_k < " + nk + "; ++mg_k)");
    line("  for (int j = 0; j < " + J + "; ++j)");
    line("    for (int u = 0; u < " + U + "; ++u)");
    line("      mg_a[j][u] += " + Y + "[mg_yo[j] + mg_k * " + str(syk) + "] * mg_xp[u * " + ustep + " + mg_k * " + str(sxk) + "];");
  }
  thread_tile(outer, x, ph, tj, groups, ui, xi, [&] {
    line((x_ragged ? "if (i" + str(x) + " < " + ext_expr(x, ph) + ") " : std::string()) + store(scale + "mg_a[j][u]"));
  });
  --depth_;
  line("}");
  line("__syncthreads();");
  return true;
}

void CudaWriter::thread_tile(const std::vector<int>& outer, int x, Phase ph, int64_t tj, int64_t groups, int64_t ui,
                             const std::string& xi, const std::function<void()>& body) {
  line("#pragma unroll");
  line("for (int j = 0; j < " + str(tj) + "; ++j) {");
  ++depth_;
  line("const int mg_y = mg_g + j * " + str(groups) + ";");
  line("if (mg_y < mg_ny) {");
  ++depth_;
  decompose("mg_y", outer, ph);
  line("#pragma unroll");
  line("for (int u = 0; u < " + str(ui) + "; ++u) {");
  ++depth_;
  line("const int i" + str(x) + " = " + xi + ";");
  body();
  --depth_;
  line("}");
  --depth_;
  line("}");
  --depth_;
  line("}");
}

}  // namespace isomer::mugraph::cuda_detail
