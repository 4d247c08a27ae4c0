#pragma once
// A shape whose element count (or byte count) does not fit in 64 bits: never a form
// to keep opaque, always a bad model (thrown by checked_num_elements and Node::make_op).
#include <string>

#include "ir/error.h"

namespace isomer {

class ShapeOverflow : public Error {
 public:
  explicit ShapeOverflow(const std::string& message) : Error(message) {}
};

}  // namespace isomer
