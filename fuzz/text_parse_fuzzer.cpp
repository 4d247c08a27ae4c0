// libFuzzer harness: arbitrary text as a graph. Parsing must either succeed or throw
// isomer::Error; a parsed graph must print, and the printed text must parse back to
// the same graph (the format "prints and parses every graph exactly").
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ir/error.h"
#include "ir/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  isomer::Graph g;
  try {
    g = isomer::parse_graph(text);
  } catch (const isomer::Error&) {
    return 0;
  }
  std::string printed = isomer::print_graph(g);
  isomer::Graph back;
  try {
    back = isomer::parse_graph(printed);
  } catch (const isomer::Error& e) {
    std::fprintf(stderr, "printed graph does not parse: %s\n%s\n", e.what(), printed.c_str());
    std::abort();
  }
  if (!isomer::same_graph(g, back) || isomer::print_graph(back) != printed) {
    std::fprintf(stderr, "print/parse round trip changed the graph:\n%s\n", printed.c_str());
    std::abort();
  }
  return 0;
}
