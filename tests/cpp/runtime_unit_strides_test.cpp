// The strides every value's extent-1 axes get (runtime/unit_strides.cpp,
// canonical_unit_strides): those oneDNN's own format tag for the layout of the
// other axes gives them, whatever strides the value came with. oneDNN matches a
// layout to its fast kernels by every stride (its descriptors' equality ignores
// these), so each case compares the strides themselves.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/compiler.h"

namespace isomer::runtime {
namespace {

using tag = dnnl::memory::format_tag;

std::vector<int64_t> strides(const md_t& md) {
  const auto& d = md.data;
  return {d.format_desc.blocking.strides, d.format_desc.blocking.strides + d.ndims};
}

// `dims` laid out as `layout`, its extent-1 axes' strides replaced by `given`
// (0: kept), canonicalised: the tag's own strides.
void expect_tag_strides(const std::vector<int64_t>& dims, tag layout, const std::vector<int64_t>& given) {
  const md_t want(to_dims(dims), dnnl::memory::data_type::f32, layout);
  dnnl_memory_desc_t odd = want.data;
  for (size_t i = 0; i < dims.size(); ++i)
    if (given[i]) odd.format_desc.blocking.strides[i] = given[i];
  EXPECT_EQ(strides(canonical_unit_strides(md_t(odd))), strides(want)) << describe_md(md_t(odd));
}

TEST(RuntimeUnitStrides, ChannelsLastOfBatchOne) {
  expect_tag_strides({1, 16, 32, 32}, tag::nhwc, {16, 0, 0, 0});  // SwiftFormer's permuted view
  expect_tag_strides({1, 16, 32, 32}, tag::nhwc, {0, 0, 0, 0});
  expect_tag_strides({1, 16, 8, 4, 4}, tag::ndhwc, {1, 0, 0, 0, 0});
}

TEST(RuntimeUnitStrides, ChannelsLastWithUnitSpatialAxes) {
  expect_tag_strides({2, 16, 1, 32}, tag::nhwc, {0, 0, 1, 0});     // between batch and width
  expect_tag_strides({2, 16, 32, 1}, tag::nhwc, {0, 0, 0, 1});     // after height, before channels
  expect_tag_strides({2, 16, 1, 1, 8}, tag::ndhwc, {0, 0, 1, 1, 0});
}

TEST(RuntimeUnitStrides, PlainAndTransposed) {
  expect_tag_strides({1, 16, 1, 32}, tag::nchw, {16, 0, 16, 0});
  expect_tag_strides({1, 64, 48}, tag::acb, {48, 0, 0});  // a transposed matrix of a batch of 1
}

TEST(RuntimeUnitStrides, ChannelBlocks) {
  // A Concat of two one-block parts took the first part's batch stride.
  expect_tag_strides({1, 32, 17, 19}, tag::nChw16c, {5168, 0, 0, 0});
  expect_tag_strides({1, 16, 17, 19}, tag::nChw16c, {16, 16, 0, 0});  // one block: channels of outer extent 1
}

TEST(RuntimeUnitStrides, ATagsLayoutIsKept) {
  // [1, C, 1, 1] is exactly both plain and channels last: it keeps the one it has,
  // which the layout oneDNN picks for a consumer's output follows.
  for (tag layout : {tag::nhwc, tag::nchw, tag::nChw16c}) {
    const md_t md(to_dims({1, 256, 1, 1}), dnnl::memory::data_type::f32, layout);
    EXPECT_EQ(strides(canonical_unit_strides(md)), strides(md)) << describe_md(md);
  }
}

TEST(RuntimeUnitStrides, ViewsKeepTheirOtherStrides) {
  // Channels 0-7 of a channels-last [1, 16, 4, 5]: only the batch stride changes.
  dnnl_memory_desc_t part = md_t(to_dims({1, 8, 4, 5}), dnnl::memory::data_type::f32, to_dims({8, 1, 80, 16})).data;
  EXPECT_EQ(strides(canonical_unit_strides(md_t(part))), (std::vector<int64_t>{320, 1, 80, 16}));
}

}  // namespace
}  // namespace isomer::runtime
