#pragma once
// One exception type for every user-facing failure. Deep code throws it with a
// message that names what is wrong; the CLI and the Python module catch it at the
// boundary and print the message (never a crash, never a partial output).
#include <stdexcept>
#include <string>

namespace isomer {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Throws Error(message) when `condition` is false. Used for validating input,
// never for internal invariants with side effects.
inline void require(bool condition, const std::string& message) {
  if (!condition) throw Error(message);
}

}  // namespace isomer
