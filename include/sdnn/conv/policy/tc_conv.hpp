// sdnn/conv/policy/tc_conv.hpp - the tile shapes of the tensor-core convolution (conv/op/tc_conv.cuh)
// for large pixel counts, per weight format, with the measurement behind each. The small shapes
// (few pixels: a K split across thread blocks) are the linear layer's (linear/policy/tensor_core.hpp).
#pragma once

#include "sdnn/linear/policy/tensor_core.hpp"

namespace sdnn::policy {

// The large tile of the convolution for a linear tile family: by default the linear layer's.
template <class LinearTiles>
struct tc_conv_large {
  using type = typename LinearTiles::large;
};
// Blocks of BR x BC: 8 warps of 32 x 32 (BR = 16: 16 x 32) output channels x pixels, the block's
// BC input channels a k-step; BR x 256 pixels a thread block for BR <= 32, 64 x 128 for BR = 64.
template <int BR, int BC>
struct tc_conv_large<tc_block_tiles<BR, BC>> {
  static constexpr int wm = BR >= 32 ? BR / 32 : 1;
  using type = tc_tile<BR, 256 / wm, BC, 4, wm, 8 / wm, 1>;
};
// Dense: 128 x 128 as the linear layer, 8 warps of 64 x 32.
template <>
struct tc_conv_large<tc_dense_tiles> {
  using type = tc_tile<128, 128, 32, 4, 2, 4, 1>;
};

}  // namespace sdnn::policy
