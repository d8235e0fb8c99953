// sdnn/linear/policy/spmm.hpp - policy tags for sparse products.
//
//   sparse x dense:  C[M x N] = epilogue(A_sparse[M x K] * B[K x N])   (ops::spmm)
//   dense x sparse:  C[M x N] = epilogue(A[M x K] * W_sparse[K x N])   (ops::spmm_dense_sparse)
// Every tag is an empty type; ops dispatch on (executor, policy); the host executor runs
// the reference for every policy. The empty-row wrapper of linear/policy/gemm.hpp
// (skip_empty_rows<Inner, skip_by>) also wraps the CSR policies here.
#pragma once

#include "sdnn/core/config.hpp"
#include "sdnn/linear/policy/cusparse_alg.hpp"
#include "sdnn/linear/policy/gemm.hpp"

namespace sdnn::policy {

// CSR, one warp per (row, column slab): the warp stages 32 (col, value) pairs with one
// coalesced load, broadcasts them by shuffle and streams the matching B rows with
// 16-byte loads; a slab is 32 lanes x 16 bytes x SlabVectors columns. Rows of any
// length; empty rows cost one epilogue store.
// RowsInX = true orders the grid (row groups, slabs): blocks running together share a
// column slab of B instead of a row of A.
template <int SlabVectors = 2, int WarpsPerBlock = 4, bool RowsInX = false>
struct csr_row_split {
  static constexpr int slab_vectors = SlabVectors, warps = WarpsPerBlock;
  static constexpr bool rows_in_x = RowsInX;
  static_assert(SlabVectors >= 1 && SlabVectors <= 4, "csr_row_split: 1..4 vectors per lane");
};

// CSR with B staged in shared memory: one block (8 warps) per (RowsPerBlock rows, column
// slab); K is walked in chunks of KChunk rows of B, each chunk's B tile is loaded once into
// shared memory and reused by every nonzero of the block's rows in that chunk (about
// RowsPerBlock * density uses per element instead of one). Pays off when rows are dense
// enough to share chunks (see linear/policy/automatic.hpp).
template <int RowsPerBlock = 32, int KChunk = 64>
struct csr_staged_b {
  static constexpr int rows_per_block = RowsPerBlock, k_chunk = KChunk;
  static_assert(RowsPerBlock % 8 == 0 && RowsPerBlock <= 128, "csr_staged_b: 8..128 rows, a multiple of 8");
  static_assert(KChunk % 8 == 0 && KChunk * 32 % 256 == 0 && KChunk <= 96, "csr_staged_b: KChunk in 8..96 step 8");
};

// CSR in panel order (linear/kernel/spmm_csr_panels.cuh): at plan time A's nonzeros are sorted
// on the device into (block of 8 * RowsPerWarp rows, chunk of KChunk columns, warp)
// segments; a block (8 warps) walks K chunk by chunk, copies each chunk's B tile (KChunk x
// one column slab of 32 lanes x SlabVectors x 16 bytes) and entries into shared memory with
// cp.async, double-buffered, and every nonzero of its rows in the chunk reads B from there
// (about 8 * RowsPerWarp * density uses per B element instead of one). Accumulators for
// the warp's RowsPerWarp rows stay in registers; the epilogue is fused. The plan owns the
// reordered copy of A (8 bytes per nonzero). Registers hold RowsPerWarp x SlabVectors x 4
// (float) / x 8 (__half) accumulators per lane: keep that <= 64.
template <int RowsPerWarp = 16, int KChunk = 64, int SlabVectors = 1>
struct csr_panels {
  static constexpr int rows_per_warp = RowsPerWarp, k_chunk = KChunk, slab_vectors = SlabVectors;
  static_assert(RowsPerWarp >= 1 && RowsPerWarp <= 32, "csr_panels: 1..32 rows per warp");
  static_assert(SlabVectors == 1 || SlabVectors == 2, "csr_panels: 1 or 2 vectors per lane");
  static_assert(KChunk >= 8 && KChunk % 8 == 0 && KChunk * SlabVectors <= 128,
                "csr_panels: KChunk a multiple of 8, KChunk * SlabVectors <= 128");
};

// CSR, nnz-balanced: the nonzeros are cut into equal shares (ranges by nnz, not by rows;
// the first row of each share is found at plan time with thrust::lower_bound on row_ptr);
// one warp per share and column slab. Many short rows share a warp and a long row is
// spread over many warps. Rows inside a share get the epilogue fused; rows cut by a share
// boundary leave float partial sums in a small carry (2 rows of N per share), which a
// fix-up pass adds in share order (deterministic), then applies the epilogue. Empty rows
// get epi(0). See the nnz-split notes in linear/kernel/spmm_csr.cuh.
template <int SlabVectors = 2, int WarpsPerBlock = 4>
struct csr_nnz_balanced {
  static constexpr int slab_vectors = SlabVectors, warps = WarpsPerBlock;
};

// ELL (column-major slots), one warp per (row, column slab); stops at the first padding
// slot of a row.
template <int SlabVectors = 2, int WarpsPerBlock = 4>
struct ell_row_split {
  static constexpr int slab_vectors = SlabVectors, warps = WarpsPerBlock;
};

// COO (canonical, row-sorted), nnz-split: each warp takes a fixed chunk of entries (at
// least EntriesPerWarp; the plan grows chunks when there would be more than fill the GPU)
// and accumulates runs of equal rows in registers. Whole rows get the epilogue and are
// stored directly; the partial first/last row of a chunk goes to a small float carry (2
// rows of N per chunk) and a fix-up pass adds the partials in chunk order (deterministic,
// no atomics) and applies the epilogue. Balanced by construction; the same machinery as
// csr_nnz_balanced (linear/kernel/spmm_coo.cuh, spmm_csr.cuh).
template <int EntriesPerWarp = 256, int SlabVectors = 2>
struct coo_nnz_split {
  static constexpr int entries_per_warp = EntriesPerWarp, slab_vectors = SlabVectors;
};

// Tiled-dense (block-sparse, dense tiles): one block per (tile row, column slab);
// each stored tile and the matching B slab go through shared memory and are multiplied
// densely.
struct tiled_dense_spmm {};

// Dense x sparse (Y * W, W sparse): see linear/policy/dense_sparse.hpp (csc_gather, csc_tiled).

// cuSPARSE SpMM (linear/vendor/cusparse.cuh), one tag per algorithm (cusparse_alg, declared in
// linear/policy/cusparse_alg.hpp). The external buffer is allocated once per plan and reused
// (cusparse_buffer::reuse), or sized, allocated and freed on every run
// (cusparse_buffer::per_call: the "buffer per call" baseline of the seed paper; the one policy
// whose run() allocates, since that cost is what it measures).
enum class cusparse_buffer { reuse, per_call };
template <cusparse_alg Alg = cusparse_alg::default_alg, cusparse_buffer Buffer = cusparse_buffer::reuse>
struct cusparse_spmm {
  static constexpr cusparse_alg alg = Alg;
  static constexpr cusparse_buffer buffer = Buffer;
};

template <class P>
inline constexpr bool is_cusparse_v = false;
template <cusparse_alg A, cusparse_buffer B>
inline constexpr bool is_cusparse_v<cusparse_spmm<A, B>> = true;
template <class I, skip_by B>
inline constexpr bool is_cusparse_v<skip_empty_rows<I, B>> = is_cusparse_v<I>;

// policy::automatic (declared in linear/policy/gemm.hpp) also serves the CSR products.

}  // namespace sdnn::policy
