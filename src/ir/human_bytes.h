#pragma once
// Byte counts as messages and reports print them.
#include <string>

namespace isomer {

// "512 bytes", "16.0 MiB", "1.5 TiB" (ir/shape.cpp).
std::string human_bytes(long double bytes);

}  // namespace isomer
