#include "ir/attributes.h"

#include <algorithm>
#include <functional>

#include "ir/error.h"

namespace isomer {

bool attr_equal(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Tensor>)
          return x.same_as(std::get<Tensor>(b));
        else
          return x == std::get<T>(b);
      },
      a);
}

size_t attr_hash(const AttrValue& v) {
  size_t h = v.index() * 0x9e3779b97f4a7c15ULL;
  auto mix = [&h](size_t x) { h = (h ^ x) * 1099511628211ULL; };
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          mix(std::hash<int64_t>{}(x));
        } else if constexpr (std::is_same_v<T, double>) {
          mix(std::hash<double>{}(x));
        } else if constexpr (std::is_same_v<T, std::string>) {
          mix(std::hash<std::string>{}(x));
        } else if constexpr (std::is_same_v<T, Tensor>) {
          mix(x.hash());
        } else {
          for (const auto& e : x) mix(std::hash<std::decay_t<decltype(e)>>{}(e));
        }
      },
      v);
  return h;
}

Attributes::Attributes(std::initializer_list<std::pair<std::string, AttrValue>> init) {
  for (const auto& [k, v] : init) set(k, v);
}

const AttrValue* Attributes::find(const std::string& name) const {
  auto it = std::lower_bound(items_.begin(), items_.end(), name,
                             [](const auto& item, const std::string& n) { return item.first < n; });
  return it != items_.end() && it->first == name ? &it->second : nullptr;
}

bool Attributes::has(const std::string& name) const { return find(name) != nullptr; }

void Attributes::set(const std::string& name, AttrValue value) {
  auto it = std::lower_bound(items_.begin(), items_.end(), name,
                             [](const auto& item, const std::string& n) { return item.first < n; });
  if (it != items_.end() && it->first == name)
    it->second = std::move(value);
  else
    items_.insert(it, {name, std::move(value)});
}

void Attributes::erase(const std::string& name) {
  std::erase_if(items_, [&](const auto& item) { return item.first == name; });
}

namespace {
template <class T>
const T& typed(const Attributes& attrs, const std::string& name, const char* kind) {
  const AttrValue* v = attrs.find(name);
  require(v != nullptr, "missing attribute '" + name + "'");
  const T* t = std::get_if<T>(v);
  require(t != nullptr, "attribute '" + name + "' is not " + kind);
  return *t;
}
}  // namespace

int64_t Attributes::get_int(const std::string& name) const { return typed<int64_t>(*this, name, "an int"); }
int64_t Attributes::get_int(const std::string& name, int64_t dflt) const {
  return has(name) ? get_int(name) : dflt;
}
double Attributes::get_float(const std::string& name) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<int64_t>(*v)) return static_cast<double>(std::get<int64_t>(*v));
  return typed<double>(*this, name, "a float");
}
double Attributes::get_float(const std::string& name, double dflt) const {
  return has(name) ? get_float(name) : dflt;
}
std::string Attributes::get_string(const std::string& name) const {
  return typed<std::string>(*this, name, "a string");
}
std::string Attributes::get_string(const std::string& name, const std::string& dflt) const {
  return has(name) ? get_string(name) : dflt;
}
std::vector<int64_t> Attributes::get_ints(const std::string& name) const {
  return typed<std::vector<int64_t>>(*this, name, "a list of ints");
}
std::vector<int64_t> Attributes::get_ints(const std::string& name, const std::vector<int64_t>& dflt) const {
  return has(name) ? get_ints(name) : dflt;
}
std::vector<double> Attributes::get_floats(const std::string& name, const std::vector<double>& dflt) const {
  return has(name) ? typed<std::vector<double>>(*this, name, "a list of floats") : dflt;
}
const Tensor& Attributes::get_tensor(const std::string& name) const {
  return typed<Tensor>(*this, name, "a tensor");
}

size_t Attributes::hash() const {
  size_t h = 0;
  for (const auto& [k, v] : items_) h = (h * 31) ^ std::hash<std::string>{}(k) ^ (attr_hash(v) << 1);
  return h;
}

bool Attributes::operator==(const Attributes& o) const {
  if (items_.size() != o.items_.size()) return false;
  for (size_t i = 0; i < items_.size(); ++i)
    if (items_[i].first != o.items_[i].first || !attr_equal(items_[i].second, o.items_[i].second)) return false;
  return true;
}

}  // namespace isomer
