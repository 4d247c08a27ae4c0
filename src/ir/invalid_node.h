#pragma once
// A node that breaks its operator's definition (a hidden_size that is not positive, a
// blocksize that does not divide the extent), as opposed to a form isomer does not
// handle: the importer refuses it instead of keeping it opaque, also where libonnx's
// shape inference, older or laxer, does not object (thrown by shape rules, kept by
// Node::make_op).
#include <string>

#include "ir/error.h"

namespace isomer {

class InvalidNode : public Error {
 public:
  explicit InvalidNode(const std::string& message) : Error(message) {}
};

// Throws InvalidNode(message) when `condition` is false: for shape rules' checks of
// what ONNX defines, never for isomer's own limitations.
inline void require_valid(bool condition, const std::string& message) {
  if (!condition) throw InvalidNode(message);
}

}  // namespace isomer
