#include "ir/shape.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "ir/error.h"
#include "ir/human_bytes.h"
#include "ir/invalid_node.h"
#include "ir/shape_overflow.h"

namespace isomer {

Shape make_shape(const std::vector<int64_t>& dims) { return Shape(dims.begin(), dims.end()); }

bool is_static(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](const Dim& d) { return d.is_static(); });
}

std::vector<int64_t> static_dims(const Shape& s, const std::string& what) {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const Dim& d : s) {
    require(d.is_static(), what + " " + to_string(s) + " has a dynamic dimension; fix it with --input-shape");
    out.push_back(d.value);
  }
  return out;
}

int64_t checked_num_elements(const std::vector<int64_t>& dims, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : dims) require(d >= 0, what + " has a negative dimension in " + to_string(dims));
  for (int64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n))
      throw ShapeOverflow(what + " " + to_string(dims) + " has more elements than fit in 64 bits");
  return n;
}

int64_t checked_num_bytes(const std::vector<int64_t>& dims, size_t elem_bytes, const std::string& what) {
  int64_t bytes = 0;
  if (__builtin_mul_overflow(checked_num_elements(dims, what), static_cast<int64_t>(elem_bytes), &bytes))
    throw ShapeOverflow(what + " " + to_string(dims) + " has more bytes than fit in 64 bits");
  return bytes;
}

uint64_t max_tensor_bytes() {
  static const uint64_t limit = [] {
    if (const char* env = std::getenv("ISOMER_MAX_TENSOR_BYTES")) {
      char* end = nullptr;
      unsigned long long v = std::strtoull(env, &end, 10);
      if (end != env && v > 0) return static_cast<uint64_t>(v);
    }
    uint64_t phys = UINT64_MAX;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page > 0) phys = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
    rlimit rl{};
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) phys = std::min<uint64_t>(phys, rl.rlim_cur);
    return phys;
  }();
  return limit;
}

std::string human_bytes(long double b) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (b >= 1024 && u < 6) b /= 1024, ++u;
  char buf[64];
  std::snprintf(buf, sizeof buf, u ? "%.1Lf %s" : "%.0Lf %s", b, units[u]);
  return buf;
}

int64_t require_allocatable(const std::vector<int64_t>& dims, size_t elem_bytes, const std::string& what) {
  const int64_t n = checked_num_elements(dims, what);
  long double bytes = static_cast<long double>(n) * static_cast<long double>(elem_bytes);
  require(bytes <= static_cast<long double>(max_tensor_bytes()),
          what + " " + to_string(dims) + " needs " + human_bytes(bytes) + ", more than the " +
              human_bytes(static_cast<long double>(max_tensor_bytes())) + " this process may allocate");
  return n;
}

std::optional<int64_t> num_elements(const Shape& s) {
  int64_t n = 1;
  for (const Dim& d : s) {
    if (!d.is_static()) return std::nullopt;
    n *= d.value;
  }
  return n;
}

int64_t num_elements(const std::vector<int64_t>& dims) { return num_elements(dims, 0, dims.size()); }

int64_t num_elements(const std::vector<int64_t>& dims, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= dims[i];
  return n;
}

std::string to_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    if (s[i].is_static())
      out += std::to_string(s[i].value);
    else
      out += s[i].symbol.empty() ? "?" : s[i].symbol;
  }
  return out + "]";
}

std::string to_string(const std::vector<int64_t>& dims) { return to_string(make_shape(dims)); }

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim one(1);
    const Dim& da = i < rank - a.size() ? one : a[i - (rank - a.size())];
    const Dim& db = i < rank - b.size() ? one : b[i - (rank - b.size())];
    if (da == db || db == one) {
      out[i] = da;
    } else if (da == one) {
      out[i] = db;
    } else if (da.is_static() && db.is_static()) {
      throw Error("cannot broadcast shapes " + to_string(a) + " and " + to_string(b));
    } else {
      // One side symbolic: the static side (if not 1) wins, else unknown.
      out[i] = da.is_static() ? da : db.is_static() ? db : Dim::unknown();
    }
  }
  return out;
}

std::vector<int64_t> broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  return static_dims(broadcast_shapes(make_shape(a), make_shape(b)));
}

int64_t normalize_axis(int64_t axis, int64_t rank, const std::string& what) {
  require_valid(axis >= -rank && axis < std::max<int64_t>(rank, 1),
                what + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::string to_string(const TensorType& t) {
  return std::string(dtype_name(t.dtype)) + to_string(t.shape);
}

}  // namespace isomer
