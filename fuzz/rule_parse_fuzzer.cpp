// libFuzzer harness: arbitrary text as a rule file. Parsing must either succeed or
// throw isomer::Error (never crash, hang or allocate without bound); a parsed rule
// set must print, and the printed text must parse back and print identically (rule
// files round-trip exactly, verdict lines included).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ir/error.h"
#include "rules/rule.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  isomer::RuleSet set;
  try {
    set = isomer::parse_rules(text, "<fuzz>");
  } catch (const isomer::Error&) {
    return 0;
  }
  std::string printed = isomer::print_rules(set);
  std::string again;
  try {
    again = isomer::print_rules(isomer::parse_rules(printed, "<printed>"));
  } catch (const isomer::Error& e) {
    std::fprintf(stderr, "printed rules do not parse: %s\n%s\n", e.what(), printed.c_str());
    std::abort();
  }
  if (again != printed) {
    std::fprintf(stderr, "print/parse round trip changed the rules:\n%s\n---\n%s\n", printed.c_str(), again.c_str());
    std::abort();
  }
  return 0;
}
