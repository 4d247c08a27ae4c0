#pragma once
// A control-flow node's body (If's then_branch/else_branch, Loop's body) as a graph of
// its own, at concrete types, for the runtime to compile (runtime/lower_control.cpp).
// The node itself stays opaque in the IR and is written back verbatim: this is a view
// of its body for running it, never a change to the model.
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace isomer {

// A value the body reads from the enclosing graph: its type there and, where it is
// known when compiling (a weight), its data, which the body then holds as an
// initializer (so that its products pack constant weights as the main graph's do).
struct OuterValue {
  TensorType type;
  const Tensor* known = nullptr;
};

// The names `node_proto`'s subgraphs read from enclosing scopes, in the order of the
// opaque node's implicit inputs (after its NodeProto's inputs).
std::vector<std::string> body_outer_names(const std::string& node_proto);

// Graph attribute `attribute` of `node_proto` (a serialized NodeProto) as a graph whose
// inputs are the body's own inputs at `formal` types, then every outer value of the
// node (body_outer_names order) that is not known, at its type. `outer` has one entry
// per outer name. `info` gives the opsets and local functions. Throws Error naming the
// node and the attribute when the body cannot be made into such a graph.
Graph import_body(const std::string& node_proto, const std::string& attribute, const ModelInfo& info,
                  const std::vector<TensorType>& formal, const std::vector<OuterValue>& outer);

// The dims a body declares for its input `index` (the Loop contract's scalars may be
// declared [] or [1]); nullopt when it declares no shape or a dim is not a number.
std::optional<std::vector<int64_t>> declared_input_dims(const std::string& node_proto, const std::string& attribute,
                                                        int index);

// Integer attributes of `node_proto` (Scan's num_scan_inputs and axes): nullopt / empty
// when the node does not set it.
std::optional<int64_t> node_int_attribute(const std::string& node_proto, const std::string& name);
std::vector<int64_t> node_ints_attribute(const std::string& node_proto, const std::string& name);

// True if `type_proto` (a serialized TypeProto, possibly empty: not inferred) is a tensor
// type or says nothing; false for sequences, optionals and maps.
bool is_tensor_type(const std::string& type_proto);

}  // namespace isomer
