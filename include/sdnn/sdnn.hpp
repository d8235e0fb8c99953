// sdnn/sdnn.hpp - the umbrella header.
//
// Includes everything that compiles with a plain C++17 compiler; when compiled by a
// CUDA compiler (__CUDACC__), also the device definitions: device containers, kernels, plans,
// vendor baselines and the device members of the layers and pipelines. The classes are the
// same either way (core/config.hpp, SDNN_HAS_CUDA): including this header from a .cu that uses
// a layer or pipeline type is what defines that type's device members for the program.
#pragma once

#include "sdnn/core/config.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/coo.hpp"
#include "sdnn/formats/ell.hpp"
#include "sdnn/formats/tiled_dense.hpp"
#include "sdnn/formats/convert.hpp"
#include "sdnn/formats/stats.hpp"
#include "sdnn/layers/layer.hpp"
#include "sdnn/io/challenge_tsv.hpp"
#include "sdnn/io/mnist_idx.hpp"
#include "sdnn/io/matrix_market.hpp"
#include "sdnn/data/radixnet.hpp"
#include "sdnn/data/challenge_inputs.hpp"
#include "sdnn/reference/challenge.hpp"
#include "sdnn/formats/conv_shape.hpp"
#include "sdnn/ops/prune.hpp"
#include "sdnn/formats/conv_weights.hpp"
#include "sdnn/reference/conv.hpp"
#include "sdnn/policies/conv.hpp"
#include "sdnn/ops/conv.hpp"
#include "sdnn/policies/dense_sparse.hpp"
#include "sdnn/ops/dense_sparse.hpp"
#include "sdnn/core/plan.hpp"
#include "sdnn/layers/sparse_linear.hpp"
#include "sdnn/pipeline/sequential.hpp"
#include "sdnn/pipeline/challenge.hpp"
#include "sdnn/policies/gemm.hpp"
#include "sdnn/policies/spmm.hpp"
#include "sdnn/policies/automatic.hpp"
#include "sdnn/reference/gemm.hpp"
#include "sdnn/reference/spmm.hpp"
#include "sdnn/ops/gemm.hpp"
#include "sdnn/ops/spmm.hpp"

#if defined(__CUDACC__)
#include "sdnn/ops/dense_sparse.cuh"
#include "sdnn/ops/rows.cuh"
#include "sdnn/kernels/epilogue.cuh"
#include "sdnn/layers/sparse_linear.cuh"
#include "sdnn/pipeline/sequential.cuh"
#include "sdnn/pipeline/challenge.cuh"
#include "sdnn/kernels/radixnet.cuh"
#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/formats/copy.cuh"
#include "sdnn/ops/convert.cuh"
#include "sdnn/ops/stats.cuh"
#include "sdnn/ops/prune.cuh"
#include "sdnn/ops/conv.cuh"
#include "sdnn/layers/sparse_conv.cuh"
#include "sdnn/vendor/cublas.cuh"
#include "sdnn/vendor/cusparse.cuh"
#include "sdnn/ops/gemm.cuh"
#include "sdnn/ops/spmm.cuh"
#if defined(SDNN_HAS_CUDNN)
#include "sdnn/layers/cudnn_conv.cuh"
#endif
#endif
