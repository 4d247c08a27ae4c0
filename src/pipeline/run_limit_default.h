#pragma once
// How long one of optimize's own runs of a model may take (ir/run_limit.h).
#include "ir/graph.h"

namespace isomer {

// 20 times what a slow machine (10^9 multiply-adds or elements a second, 10^8 weight
// bytes a second, 0.1 ms a node) would need for the main graph's static work, at least
// 10 s. A Loop counts as its node alone: its trip count is what the limit does not
// trust, and a body that runs to a count of 10^9 must not hang `optimize`.
double default_run_limit_seconds(const Graph& g);

}  // namespace isomer
