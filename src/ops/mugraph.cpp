// MuGraph: a fused region found by the μGraph search (src/mugraph). Its meaning is
// its body, the original subgraph: shapes, float semantics and everything the
// verifiers read come from the body; the runtime runs the generated kernel.
#include "eval/evaluator.h"
#include "ir/error.h"
#include "mugraph/region.h"
#include "ops/op.h"

namespace isomer {

namespace {

std::vector<TensorType> infer_mugraph(const InferContext& ctx) {
  auto r = mugraph::fused_region(ctx.attrs);
  const Graph& body = r->body;
  require(ctx.inputs.size() == body.inputs().size(),
          "MuGraph has " + std::to_string(ctx.inputs.size()) + " inputs, its body " +
              std::to_string(body.inputs().size()));
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const TensorType& want = body.inputs()[i]->output_types()[0];
    const TensorType& got = ctx.inputs[i];
    require(got.dtype == want.dtype && got.shape.size() == want.shape.size(),
            "MuGraph input " + std::to_string(i) + " is " + to_string(got.shape) + ", its body takes " +
                to_string(want.shape));
    for (size_t d = 0; d < got.shape.size(); ++d)
      require(!got.shape[d].is_static() || !want.shape[d].is_static() || got.shape[d] == want.shape[d],
              "MuGraph input " + std::to_string(i) + " is " + to_string(got.shape) + ", its body takes " +
                  to_string(want.shape));
  }
  std::vector<TensorType> out;
  for (const Value& v : body.outputs()) out.push_back(v.type());
  return out;
}

std::vector<Tensor> eval_mugraph(const EvalContext& ctx) {
  auto r = mugraph::fused_region(ctx.attrs);
  return evaluate(r->body, std::vector<Tensor>(ctx.inputs.begin(), ctx.inputs.end()));
}

}  // namespace

OpDef def_MuGraph() {
  OpDef d;
  d.name = "MuGraph";
  d.onnx_domain = mugraph::kDomain;
  d.min_inputs = 1;
  d.max_inputs = -1;
  d.attributes = {{"body", "string"}, {"kernel", "string"}};
  d.infer = infer_mugraph;
  d.eval = eval_mugraph;
  d.lower = Lowering::MuGraph;
  return d;
}

}  // namespace isomer
