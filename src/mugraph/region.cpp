#include "mugraph/region.h"

#include <cstdio>
#include <map>

#include "ir/error.h"
#include "ir/text.h"

namespace isomer::mugraph {

namespace {

uint64_t fnv(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

std::string FusedRegion::function_name() const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(fnv(body_text)));
  return std::string("MuGraph_") + buf;
}

std::shared_ptr<const FusedRegion> fused_region(const std::string& body, const std::string& kernel) {
  static std::mutex m;
  static std::map<std::pair<std::string, std::string>, std::shared_ptr<const FusedRegion>> cache;
  {
    std::lock_guard<std::mutex> lock(m);
    auto it = cache.find({body, kernel});
    if (it != cache.end()) return it->second;
  }
  auto r = std::make_shared<FusedRegion>();
  r->body_text = body;
  r->kernel_text = kernel;
  try {
    r->body = parse_graph(body);
  } catch (const Error& e) {
    throw Error(std::string("MuGraph body does not parse: ") + e.what());
  }
  try {
    auto p = std::make_shared<Program>(from_body(r->body));
    r->program = p;
    if (!kernel.empty()) r->kernel = std::make_shared<BlockGraph>(parse_block_graph(*p, kernel));
    else r->error = "no kernel";
  } catch (const Error& e) {
    r->error = e.what();
  }
  std::lock_guard<std::mutex> lock(m);
  if (cache.size() > 256) cache.clear();
  return cache.emplace(std::make_pair(body, kernel), r).first->second;
}

std::shared_ptr<const FusedRegion> fused_region(const Attributes& attrs) {
  return fused_region(attrs.get_string("body"), attrs.get_string("kernel", ""));
}

std::vector<Value> make_fused_node(GraphBuilder& b, const Graph& body, const std::string& kernel,
                                   const std::vector<Value>& inputs, const std::string& name) {
  Attributes a;
  a.set("body", print_graph(body));
  a.set("kernel", kernel);
  return b.op("MuGraph", inputs, a, body.outputs().size(), name);
}

}  // namespace isomer::mugraph
