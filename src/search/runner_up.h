#pragma once
// The runner-up extractions of a result the paired run (or its whole price) rejected.
//
// An extraction usually carries several independent rewrites: NasRNN b1's sum merge
// with a Gemm-bias refold riding along on a 5% e-node saving that was timing noise.
// When the result loses against its input, one losing rewrite threw away the others'
// wins and the search kept the input (session 28). The chosen e-nodes that rules made
// are grouped where one reads another (a merge's weight Concat, its product, its Split
// and projections are one group); each group is then banned in turn (its e-nodes priced
// kInfiniteCost) and the region extracted again, so the next-best extractions that
// leave out one rewrite can be judged as the first was.
#include <cstdint>
#include <utility>
#include <vector>

#include "egraph/egraph.h"
#include "egraph/extract.h"

namespace isomer {

// E-nodes as (class, index in the class).
using ENodeRefs = std::vector<std::pair<eg::ClassId, uint32_t>>;

// The chosen e-nodes of `ex` below `roots` that a rule made (origin != 0, operators
// and projections), grouped into connected parts of the chosen graph. In the order of
// their least class id, each sorted: the same extraction gives the same groups.
std::vector<ENodeRefs> rewrite_groups(const eg::EGraph& g, const eg::Extraction& ex,
                                      const std::vector<eg::ClassId>& roots);

// `costs` with every e-node of `banned` priced kInfiniteCost (never chosen).
eg::CostTable banning(const eg::CostTable& costs, const eg::EGraph& g, const ENodeRefs& banned);

}  // namespace isomer
