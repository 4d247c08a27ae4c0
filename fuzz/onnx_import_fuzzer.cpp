// libFuzzer harness: arbitrary bytes as an ONNX model. Import must either succeed or
// throw isomer::Error; an imported graph must export and print. Anything else (a
// crash, a sanitizer report, another exception type, a leak, running out of memory on
// a small input) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ir/error.h"
#include "ir/text.h"
#include "onnx/onnx_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  isomer::Graph g;
  try {
    // External data is looked up under a directory that does not exist: a model must
    // not reach files elsewhere, and a missing file must be an Error.
    g = isomer::import_onnx_bytes(bytes, "/nonexistent/isomer-fuzz");
  } catch (const isomer::Error&) {
    return 0;
  }
  try {
    (void)isomer::print_graph(g);
    (void)isomer::export_onnx_bytes(g);
  } catch (const isomer::Error&) {
    // Some imported graphs cannot be written at their opset; refusing is fine.
  }
  return 0;
}
