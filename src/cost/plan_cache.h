#pragma once
// What compiling a graph tells the cost model, kept so that a graph priced before
// on this machine is not compiled again to be priced (compiling lays every weight
// out: ResNeXt-50's input took 0.4 s of a 0.56 s warm search to compile, and TASO's
// BERT compiled a model that runs 0.66 s a run twice per search).
//
// A plan is the list of the runtime's steps (their signatures, the nodes they
// compute, their arithmetic) with the bytes of the graph's inputs; it holds no
// time. Step times still come from the step rows of the cost database, looked up
// as for a compiled graph, so a plan never goes stale when a step is measured
// again; a graph with a step that needs timing is compiled as before.
//
// Plans are stored under the machine fingerprint (CPU, threads, oneDNN, runtime
// version) and a key of everything the compilation reads: every node's kind,
// operator, attributes, names, inferred output types, its operands; every
// constant's type and a hash of its data; graph inputs, outputs and opset; the
// runtime options (threads, bindings, switches); the environment variables the
// runtime reads (ISOMER_*, ONEDNN_*, DNNL_*, those that only log or set timing
// excepted); and the build of the binary doing the compiling (its file's size and
// modification time: any rebuild, a runtime change included, starts afresh).
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/runtime.h"

namespace isomer::cost {

struct Plan {
  std::vector<runtime::StepInfo> steps;
  double input_bytes = 0;  // the graph inputs at the dims they were compiled for
  int threads = 0;
};

// The plan of a compiled graph.
Plan plan_of(const Graph& g, const runtime::Executable& exe);

// A hex key of everything `g`'s compiled plan depends on besides the machine (see
// above); empty for a graph whose plan is not kept (opaque operators: they run in
// another process).
std::string plan_key(const Graph& g, const runtime::RuntimeOptions& options);

// Whether a plan is the same every time its key is compiled: not one with a μGraph
// kernel that could not be compiled at that moment and runs interpreted (a later
// compile may load it).
bool plan_keepable(const Plan& p);

// A stored plan and back (nullopt: not one this build wrote).
std::string encode_plan(const Plan& p);
std::optional<Plan> decode_plan(const std::string& bytes);

// What identifies this binary's build (the file its code was loaded from).
const std::string& build_identity();

}  // namespace isomer::cost
