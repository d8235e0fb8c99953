// sdnn/conv/policy/direct_sparse.hpp - tag types selecting a convolution algorithm.
#pragma once

namespace sdnn::policy {

// Direct sparse convolution (Escoin-style, uniform-nnz rows; conv/kernel/direct_sparse.cuh,
// planned in conv/op/direct_sparse.hpp, run by conv/op/direct_sparse.cuh).
// One block computes a range of output channels, KGroup at a time per slot, over an output
// tile for SubBatch images:
//   - the input window (a chunk of channels at a time) is staged in shared memory, the
//     images interleaved so one vector load feeds SubBatch FMAs; each chunk's entries
//     (offset, weight) are read by every thread of the block, a broadcast served by L1, and
//     each weight is reused across the SubBatch images and the block's pixels;
//   - each thread keeps KGroup x Pixels x SubBatch partial sums in registers (across the
//     channel chunks too when direct_conv_config::sums_in_registers, the default);
//   - output writes are coalesced along the row, bias + ReLU fused into the store.
// The block shape (threads along x/y, channels per chunk) is a run-time choice made at
// plan time (tuning run) or forced by the user (direct_conv_config).
template <int SubBatch, int KGroup = 8, int Pixels = 8 / SubBatch>
struct direct_sparse_conv {
  static constexpr int sub_batch = SubBatch, k_group = KGroup, pixels = Pixels;
  static_assert(SubBatch == 2 || SubBatch == 4 || SubBatch == 8, "direct_sparse_conv: SubBatch must be 2, 4 or 8");
  static_assert(KGroup >= 1 && KGroup <= 32, "direct_sparse_conv: KGroup must be in [1, 32]");
  static_assert(Pixels >= 1 && Pixels <= 8, "direct_sparse_conv: Pixels must be in [1, 8]");
  static_assert(KGroup * Pixels * SubBatch <= 128, "direct_sparse_conv: too many register accumulators");
};

// Dense convolution through cuDNN (the baseline; conv/vendor/cudnn.cuh).
struct cudnn_conv {};

}  // namespace sdnn::policy
