// The convolution layers the conv benchmarks share (bench_conv.cu, bench_conv_quantized.cu).
#pragma once

#include <string>
#include <vector>

#include <sdnn/conv/shape.hpp>

namespace sdnn_bench {

struct named_conv {
  std::string name;
  sdnn::conv::conv_shape s;
};

// The 3x3 convolutions of VGG-16 (stride 1, pad 1), named vgg_<C>x<H>_<K>.
inline std::vector<named_conv> vgg16_layers() {
  std::vector<named_conv> v;
  int const vgg[9][3] = {{3, 224, 64},   {64, 224, 64},  {64, 112, 128}, {128, 112, 128}, {128, 56, 256},
                         {256, 56, 256}, {256, 28, 512}, {512, 28, 512}, {512, 14, 512}};
  for (auto const& l : vgg)
    v.push_back({"vgg_" + std::to_string(l[0]) + "x" + std::to_string(l[1]) + "_" + std::to_string(l[2]),
                 sdnn::conv::conv_shape::conv2d(l[0], l[1], l[1], l[2], 3, 3, 1, 1)});
  return v;
}

}  // namespace sdnn_bench
