#include <algorithm>
#include <array>
#include <memory>

#include "ir/error.h"
#include "ops/op.h"

namespace isomer {

#define ISOMER_OP(Name) OpDef def_##Name();
#include "ops/op_list.h"
#undef ISOMER_OP

namespace {

struct Table {
  std::vector<std::unique_ptr<OpDef>> defs;
  std::vector<const OpDef*> ptrs;

  Table() {
#define ISOMER_OP(Name) add(def_##Name(), #Name);
#include "ops/op_list.h"
#undef ISOMER_OP
    std::sort(ptrs.begin(), ptrs.end(), [](const OpDef* a, const OpDef* b) { return a->name < b->name; });
  }

  void add(OpDef def, std::string_view listed_as) {
    // An entry must be complete: a half-registered operator is a bug at start-up.
    if (def.name != listed_as || !def.infer || !def.eval)
      throw Error("operator table entry '" + std::string(listed_as) + "' is incomplete");
    defs.push_back(std::make_unique<OpDef>(std::move(def)));
    ptrs.push_back(defs.back().get());
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

const OpDef* find_op(std::string_view name) {
  const auto& ptrs = table().ptrs;
  auto it = std::lower_bound(ptrs.begin(), ptrs.end(), name,
                             [](const OpDef* d, std::string_view n) { return d->name < n; });
  return it != ptrs.end() && (*it)->name == name ? *it : nullptr;
}

const OpDef& get_op(std::string_view name) {
  const OpDef* d = find_op(name);
  require(d != nullptr, "unknown operator '" + std::string(name) + "'");
  return *d;
}

std::span<const OpDef* const> all_ops() { return table().ptrs; }

Attributes canonical_attributes(const Node& n) {
  if (!n.op() || !n.op()->canonical_attrs) return n.attrs();
  std::vector<TensorType> types;
  for (const Value& v : n.inputs()) types.push_back(v.present() ? v.type() : TensorType{});
  return n.op()->canonical_attrs(n.attrs(), types);
}

}  // namespace isomer
