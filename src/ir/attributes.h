#pragma once
// Operator attributes: a small sorted map from name to a value. Sorted so that
// printing, hashing and comparison are deterministic.
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ir/tensor.h"

namespace isomer {

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                               std::vector<std::string>, Tensor>;

bool attr_equal(const AttrValue& a, const AttrValue& b);
size_t attr_hash(const AttrValue& v);

class Attributes {
 public:
  Attributes() = default;
  Attributes(std::initializer_list<std::pair<std::string, AttrValue>> init);

  bool has(const std::string& name) const;
  const AttrValue* find(const std::string& name) const;
  void set(const std::string& name, AttrValue value);
  void erase(const std::string& name);

  // Typed getters. With a default, a missing attribute yields the default; without
  // one, it is an Error. A present attribute of the wrong kind is always an Error.
  int64_t get_int(const std::string& name) const;
  int64_t get_int(const std::string& name, int64_t dflt) const;
  double get_float(const std::string& name) const;
  double get_float(const std::string& name, double dflt) const;
  std::string get_string(const std::string& name) const;
  std::string get_string(const std::string& name, const std::string& dflt) const;
  std::vector<int64_t> get_ints(const std::string& name) const;
  std::vector<int64_t> get_ints(const std::string& name, const std::vector<int64_t>& dflt) const;
  std::vector<double> get_floats(const std::string& name, const std::vector<double>& dflt) const;
  const Tensor& get_tensor(const std::string& name) const;

  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  size_t hash() const;
  bool operator==(const Attributes& o) const;

 private:
  std::vector<std::pair<std::string, AttrValue>> items_;  // sorted by name
};

}  // namespace isomer
