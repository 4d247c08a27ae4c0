#pragma once
// The one line a failure is reported in, by the CLI and the Python module alike.
#include <string>

#include "ir/error.h"

namespace isomer {

// `what` (an Error's message) as one line: a newline in it (from a name read out of a
// hostile file) is written as \x0a, as Error writes the other control characters.
inline std::string one_line_message(const char* what) {
  std::string out;
  for (char c : printable_message(what)) out += c == '\n' ? std::string("\\x0a") : std::string(1, c);
  return out;
}

}  // namespace isomer
