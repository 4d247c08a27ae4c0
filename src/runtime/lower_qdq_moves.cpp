// Data movement between a DequantizeLinear and a QuantizeLinear of the same
// parameters moves the integers. ONNX Runtime's static quantizer puts a Q/DQ pair
// on every tensor, so a BERT's head split reads
//
//   q_y = Q(Transpose(DQ(Q(Reshape(DQ(q_x))))))
//
// with one scale and zero point throughout. Q(DQ(x)) is x exactly for a scalar
// scale and zero point and Q writing x's type: (x - z) s / s rounds back to x - z
// (its error is far below a half), and x is in Q's range. An operator that only
// moves or picks elements (a view, a Slice, a Gather, an Expand) commutes with
// both, so q_y is that operator on q_x: no step at all for a view, one byte per
// element for a gather, where run as written each pair was two passes over the
// tensor (ONNX Runtime drops such pairs too, moving the integers).
#include <set>
#include <string>

#include "runtime/lower_quant.h"

namespace isomer::runtime {

namespace {

// Operators that only move, pick or repeat the elements of their input 0 (the
// other inputs say which): on the integers they give the integers of the result.
bool moves_elements(const Node& n) {
  if (n.kind() != NodeKind::Op || n.num_outputs() != 1) return false;
  static const std::set<std::string> ops = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
                                            "Identity", "Slice", "Gather", "Expand"};
  return ops.count(n.op_type()) > 0;
}

// From `first` (reading the dequantized value), the movers each read only by the
// next, ending at a QuantizeLinear of `params` writing type t; empty if not so.
std::vector<const Node*> chain_to_quantize(Compiler& c, const Node* first, std::pair<float, int32_t> params, DType t) {
  std::vector<const Node*> chain;
  const Node* m = first;
  for (size_t hops = 0; m && hops < 16; ++hops) {
    if (!c.takeable(*m) || m->kind() != NodeKind::Op) return {};
    if (m->op_type() == "QuantizeLinear") {
      if (m->output_types()[0].dtype != t || c.is_output(m->output(0)) || scalar_quant_params(c, *m) != params)
        return {};
      chain.push_back(m);
      return chain;
    }
    if (!moves_elements(*m) || c.is_output(m->output(0))) return {};
    chain.push_back(m);
    m = c.sole_consumer(m->output(0));
    if (m && m->inputs()[0] != chain.back()->output(0)) return {};
  }
  return {};
}

}  // namespace

bool lower_qdq_views(Compiler& c, const Node& dq) {
  const Value out = dq.output(0);
  if (!c.opts().fuse || c.consumers(out).empty()) return false;
  const DType t = dq.inputs()[0].type().dtype;
  if (t != DType::UInt8 && t != DType::Int8) return false;
  const auto params = scalar_quant_params(c, dq);
  if (!params || !(params->first > 0)) return false;
  std::vector<std::vector<const Node*>> chains;
  bool all = !c.is_output(out);
  for (const auto& [m, index] : c.consumers(out)) {
    std::vector<const Node*> chain = index == 0 ? chain_to_quantize(c, m, *params, t) : std::vector<const Node*>{};
    all = all && !chain.empty();
    if (!chain.empty()) chains.push_back(std::move(chain));
  }
  if (chains.empty()) return false;
  // The dequantized value stands for the integers while the chains are lowered:
  // each view then regroups or permutes them, and each QuantizeLinear's result is
  // the last view. Where other readers remain, the DequantizeLinear then runs for
  // them and binds its float result in place of the integers.
  c.bind(out, c.id(dq.inputs()[0]));
  for (const auto& chain : chains) {
    if (c.lowered(*chain.front())) continue;  // a node reading it twice
    // Each by its own lowering (a view, a gather step; the reference kernel where
    // it has none), which reads the integers.
    for (size_t i = 0; i + 1 < chain.size(); ++i) c.lower_producer(chain[i]->output(0));
    const Node& q = *chain.back();
    c.bind(q.output(0), c.id(q.inputs()[0]));
    c.mark_done(q);
  }
  return all;
}

}  // namespace isomer::runtime
