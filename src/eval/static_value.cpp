#include "eval/static_value.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "ir/error.h"
#include "ops/op.h"

namespace isomer {

namespace {

constexpr int kMaxDepth = 16;  // a shape computation is a few operators deep

struct Folder {
  std::unordered_map<const Node*, std::optional<std::vector<Tensor>>> memo;

  // A value that only its dims decide (the input of Shape or Size): zeros of its
  // static dims, the smallest element type, when that stays small.
  static std::optional<Tensor> placeholder(const Value& v) {
    const Shape& s = v.type().shape;
    if (!is_static(s)) return std::nullopt;
    std::vector<int64_t> dims = static_dims(s);
    int64_t n = 0;
    try {
      n = checked_num_elements(dims, "a shape");
    } catch (const Error&) {
      return std::nullopt;
    }
    if (n > (int64_t{1} << 24)) return std::nullopt;
    return Tensor(DType::UInt8, std::move(dims), Bytes(std::string(static_cast<size_t>(n), '\0')));
  }

  std::optional<Tensor> value(const Value& v, int depth) {
    if (!v.present()) return std::nullopt;
    if (const Tensor* t = v.constant()) return *t;
    const Node& n = *v.node;
    if (n.kind() != NodeKind::Op || depth > kMaxDepth) return std::nullopt;
    auto it = memo.find(&n);
    if (it == memo.end()) it = memo.emplace(&n, outputs(n, depth)).first;
    if (!it->second || v.index >= it->second->size()) return std::nullopt;
    return (*it->second)[v.index];
  }

  std::optional<std::vector<Tensor>> outputs(const Node& n, int depth) {
    const OpDef& op = *n.op();
    if (!op.props.deterministic || !op.eval) return std::nullopt;
    for (const TensorType& t : n.output_types()) {
      const std::optional<int64_t> numel = num_elements(t.shape);
      if (!numel || *numel > kStaticValueElements) return std::nullopt;
    }
    const bool dims_only = op.lower == Lowering::ShapeOf;
    std::vector<Tensor> args;
    for (const Value& in : n.inputs()) {
      if (!in.present()) {
        args.emplace_back();
        continue;
      }
      std::optional<Tensor> t = dims_only ? placeholder(in) : value(in, depth + 1);
      if (!t) return std::nullopt;
      args.push_back(std::move(*t));
    }
    try {
      std::vector<Tensor> out = op.eval(EvalContext{n.attrs(), args, n.num_outputs()});
      if (out.size() != n.num_outputs()) return std::nullopt;
      return out;
    } catch (const Error&) {
      return std::nullopt;  // values the operator refuses: not static after all
    }
  }
};

}  // namespace

std::optional<Tensor> static_value(const Value& v) { return Folder{}.value(v, 0); }

}  // namespace isomer
