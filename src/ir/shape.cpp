#include "ir/shape.h"

#include <algorithm>

#include "ir/error.h"

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
  require(axis >= -rank && axis < std::max<int64_t>(rank, 1),
          what + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::string to_string(const TensorType& t) {
  return std::string(dtype_name(t.dtype)) + to_string(t.shape);
}

}  // namespace isomer
