#pragma once
// One exception type for every user-facing failure. Deep code throws it with a
// message that names what is wrong; the CLI and the Python module catch it at the
// boundary and print the message (never a crash, never a partial output).
#include <stdexcept>
#include <string>

namespace isomer {

// `message` with its control characters but newline and tab written as \xNN: a name
// read from a hostile file may hold a NUL, which would end the message where it
// stands (what() is a C string), or a terminal escape.
inline std::string printable_message(const std::string& message) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(message.size());
  for (unsigned char c : message) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(printable_message(message)) {}
};

// Throws Error(message) when `condition` is false. Used for validating input,
// never for internal invariants with side effects.
inline void require(bool condition, const std::string& message) {
  if (!condition) throw Error(message);
}

}  // namespace isomer
