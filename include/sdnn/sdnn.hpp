// sdnn/sdnn.hpp - the umbrella header: every public header of sdnn.
//
// With a plain C++17 compiler it includes every .hpp (formats, references, host plans, layers,
// pipelines, the Graph Challenge application, dist); compiled by a CUDA compiler (__CUDACC__) also
// every device header (.cuh). The classes are the same either way (core/config.hpp): including
// this header from a .cu that uses a layer or pipeline type defines its device members. Headers
// behind an optional dependency need its target: dist/mpi.hpp (sdnn::mpi), the cuDNN baseline
// (sdnn::cudnn). scripts/check_layering.py checks that every header is reachable from here.
#pragma once

#include "sdnn/core/arch.hpp"
#include "sdnn/core/config.hpp"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/fast_divmod.hpp"
#include "sdnn/core/memory.hpp"
#include "sdnn/core/numeric.hpp"
#include "sdnn/core/plan.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/core/weight_placement.hpp"

#include "sdnn/formats/convert.hpp"
#include "sdnn/formats/coo.hpp"
#include "sdnn/formats/csc_tiles.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/ell.hpp"
#include "sdnn/formats/quantized.hpp"
#include "sdnn/formats/sparse24.hpp"
#include "sdnn/formats/block_sparse.hpp"
#include "sdnn/formats/tile_offsets.hpp"
#include "sdnn/formats/stats.hpp"
#include "sdnn/formats/tiled_dense.hpp"

#include "sdnn/io/file_stream.hpp"
#include "sdnn/io/matrix_market.hpp"
#include "sdnn/io/mnist_idx.hpp"
#include "sdnn/io/triplets.hpp"

#include "sdnn/layers/layer.hpp"

#include "sdnn/linear/sparse_linear.hpp"
#include "sdnn/linear/tc_linear_layer.hpp"
#include "sdnn/linear/op/dense_sparse.hpp"
#include "sdnn/linear/op/gemm.hpp"
#include "sdnn/linear/op/quantized_spmm.hpp"
#include "sdnn/linear/op/sparse24_linear.hpp"
#include "sdnn/linear/op/spmm.hpp"
#include "sdnn/linear/op/tc_auto.hpp"
#include "sdnn/linear/op/tc_linear.hpp"
#include "sdnn/linear/policy/automatic.hpp"
#include "sdnn/linear/policy/cusparse_alg.hpp"
#include "sdnn/linear/policy/dense_sparse.hpp"
#include "sdnn/linear/policy/gemm.hpp"
#include "sdnn/linear/policy/sparse24.hpp"
#include "sdnn/linear/policy/spmm.hpp"
#include "sdnn/linear/policy/tc_auto.hpp"
#include "sdnn/linear/policy/tensor_core.hpp"
#include "sdnn/linear/policy/tuning.hpp"
#include "sdnn/linear/reference/gemm.hpp"
#include "sdnn/linear/reference/sparse24.hpp"
#include "sdnn/linear/reference/spmm.hpp"
#include "sdnn/linear/reference/tc_linear.hpp"
#include "sdnn/linear/vendor/sparse24_vendor.hpp"

#include "sdnn/conv/filter_removal.hpp"
#include "sdnn/conv/gemm_weights.hpp"
#include "sdnn/conv/nhwc.hpp"
#include "sdnn/conv/pruned_weights.hpp"
#include "sdnn/conv/quantized_weights.hpp"
#include "sdnn/conv/shape.hpp"
#include "sdnn/conv/weights.hpp"
#include "sdnn/conv/op/direct_sparse.hpp"
#include "sdnn/conv/op/tc_conv.hpp"
#include "sdnn/conv/policy/direct_sparse.hpp"
#include "sdnn/conv/policy/tc_conv.hpp"
#include "sdnn/conv/reference/conv2d_nhwc.hpp"
#include "sdnn/conv/reference/convolution.hpp"
#include "sdnn/conv/reference/quantized.hpp"

#include "sdnn/train/op/backward.hpp"
#include "sdnn/train/op/prune_sparse24.hpp"
#include "sdnn/train/op/prune_structured.hpp"
#include "sdnn/train/op/prune_uniform.hpp"
#include "sdnn/train/reference/backward.hpp"

#include "sdnn/pipeline/sequential.hpp"
#include "sdnn/pipeline/weight_store.hpp"

#include "sdnn/challenge/distinct_inputs.hpp"
#include "sdnn/challenge/engine.hpp"
#include "sdnn/challenge/engine_layout.hpp"
#include "sdnn/challenge/engine_layout_build.hpp"
#include "sdnn/challenge/inputs.hpp"
#include "sdnn/challenge/official_1024_permutations.hpp"
#include "sdnn/challenge/pipeline.hpp"
#include "sdnn/challenge/radixnet.hpp"
#include "sdnn/challenge/reference.hpp"
#include "sdnn/challenge/structure.hpp"
#include "sdnn/challenge/tsv.hpp"

#include "sdnn/dist/categories.hpp"
#include "sdnn/dist/partition.hpp"
#include "sdnn/dist/signature.hpp"
#include "sdnn/dist/timing.hpp"

#if defined(SDNN_HAS_MPI) && SDNN_HAS_MPI
#include "sdnn/dist/mpi.hpp"
#endif

#if defined(__CUDACC__)
#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/numeric.cuh"
#include "sdnn/core/plan.cuh"

#include "sdnn/formats/convert.cuh"
#include "sdnn/formats/copy.cuh"
#include "sdnn/formats/stats.cuh"

#include "sdnn/linear/sparse_linear.cuh"
#include "sdnn/linear/tc_linear_layer.cuh"
#include "sdnn/linear/op/dense_sparse.cuh"
#include "sdnn/linear/op/gemm.cuh"
#include "sdnn/linear/op/quantized_spmm.cuh"
#include "sdnn/linear/op/row_skip.cuh"
#include "sdnn/linear/op/rows.cuh"
#include "sdnn/linear/op/sparse24_linear.cuh"
#include "sdnn/linear/op/spmm.cuh"
#include "sdnn/linear/op/tc_auto.cuh"
#include "sdnn/linear/op/tc_linear.cuh"
#include "sdnn/linear/vendor/cublas.cuh"
#include "sdnn/linear/vendor/cusparse.cuh"
#include "sdnn/linear/vendor/cusparse_blocked_ell.cuh"
#include "sdnn/linear/vendor/cusparselt.cuh"

#include "sdnn/conv/cudnn_conv.cuh"
#include "sdnn/conv/sparse_conv.cuh"
#include "sdnn/conv/op/direct_sparse.cuh"
#include "sdnn/conv/op/direct_sparse_quantized.cuh"
#include "sdnn/conv/op/conv16_auto.cuh"
#include "sdnn/conv/op/tc_conv.cuh"
#include "sdnn/conv/kernel/nhwc_epilogue.cuh"
#include "sdnn/conv/vendor/cudnn.cuh"
#include "sdnn/conv/vendor/cudnn16.cuh"

#include "sdnn/train/op/backward.cuh"
#include "sdnn/train/op/prune_uniform.cuh"

#include "sdnn/pipeline/sequential.cuh"
#include "sdnn/pipeline/weight_store.cuh"

#include "sdnn/challenge/engine.cuh"
#include "sdnn/challenge/kernel/radixnet.cuh"
#include "sdnn/challenge/pipeline.cuh"
#endif
