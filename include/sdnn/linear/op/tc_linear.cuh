// sdnn/linear/op/tc_linear.cuh - ops::tc_linear_plan<Policy, T>: the tensor-core linear layer
// (linear/op/tc_linear.hpp) under the plan protocol of core/plan.hpp, and the uploads of the
// block_sparse / tile_offsets formats. The constructor checks (can_implement, this GPU's
// architecture), uploads W once on exec.stream (blocks with their 16-byte pieces swizzled, see
// kernels::tc_swizzle16), builds the streaming schedule (tile_offsets and square blocks) and
// sizes the workspace of the K split / stream partials; run() picks the shape for N (tuning
// table: streaming up to stream_n_max, else the small / large tiles; blocks 32 wide on sm_90 from
// tma_n_min on, the TMA kernel where X can be read through a tensor map), checks its operands and
// enqueues one kernel; it never allocates, frees or synchronises.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/core/tma.cuh"
#include "sdnn/linear/kernel/tc_block_direct.cuh"
#include "sdnn/linear/kernel/tc_block_tma.cuh"
#include "sdnn/linear/kernel/tc_spmm.cuh"
#include "sdnn/linear/kernel/tc_stream.cuh"
#include "sdnn/linear/op/tc_linear.hpp"
#include "sdnn/linear/op/tc_stream_schedule.hpp"

namespace sdnn {

// Device copies of the tensor-core weight formats, enqueued on exec.stream (the host matrix may
// be destroyed when these return: CUDA stages pageable copies).
template <class T>
block_sparse_matrix<T, device_space> to_device(block_sparse_matrix<T, host_space> const& a, cuda_exec exec) {
  block_sparse_matrix<T, device_space> d(a.rows(), a.cols(), a.block_rows(), a.block_cols(), a.nnzb(), exec);
  copy(d.row_ptr(), a.row_ptr(), exec);
  copy(d.col_idx(), a.col_idx(), exec);
  copy(d.values(), a.values(), exec);
  return d;
}
template <class T>
tile_offsets_matrix<T, device_space> to_device(tile_offsets_matrix<T, host_space> const& a, cuda_exec exec) {
  tile_offsets_matrix<T, device_space> d(a.rows(), a.cols(), a.tile_rows(), a.tile_cols(), a.ntiles(), a.data().size(),
                                         exec);
  copy(d.tile_ptr(), a.tile_ptr(), exec);
  copy(d.tile_col(), a.tile_col(), exec);
  copy(d.tile_offset(), a.tile_offset(), exec);
  copy(d.data(), a.data(), exec);
  return d;
}

}  // namespace sdnn

namespace sdnn::ops {

namespace detail {
template <class Policy, class T>
struct tc_weights;
template <class T>
struct tc_weights<policy::tc_dense_mma, T> {
  using type = dense_matrix<T>;
};
template <class T>
struct tc_weights<policy::tc_block_sparse_mma, T> {
  using type = block_sparse_matrix<T>;
};
template <class T>
struct tc_weights<policy::tc_tile_offsets_mma, T> {
  using type = tile_offsets_matrix<T>;
};

// The tile shapes (and store) the tiled kernels run with X operand XSrc: the policy's own
// (Tiles::small / large) unless the operand's header specializes this (conv/op/tc_conv.cuh: the
// im2col operand of a convolution has its own large shapes). Only `large` may differ: the K
// split, and so the workspace, belongs to the small shape.
template <class XSrc, class Tiles>
struct tc_x_tiles {
  using base = Tiles;
  using small = typename Tiles::small;
  using large = typename Tiles::large;
  // Eight outputs a store where Y allows it. Off for the linear layer until its benchmark grid
  // (and the automatic plan's cost model fitted to it) is measured again with it.
  static constexpr bool vector_store = false;
};

// f(std::integral_constant<int, BR>, std::integral_constant<int, BC>) for a compiled block shape.
template <class F>
void with_block_shape(int br, int bc, F&& f) {
  auto col = [&](auto BR) {
    switch (bc) {
      case 16: return f(BR, std::integral_constant<int, 16>{});
      case 32: return f(BR, std::integral_constant<int, 32>{});
      default: return f(BR, std::integral_constant<int, 64>{});
    }
  };
  switch (br) {
    case 16: return col(std::integral_constant<int, 16>{});
    case 32: return col(std::integral_constant<int, 32>{});
    default: return col(std::integral_constant<int, 64>{});
  }
}
}  // namespace detail

template <class Policy, class T>
class tc_linear_plan {
  static_assert(is_16bit_float_v<T>, "tc_linear_plan: T must be sdnn::bf16 or sdnn::fp16 (the compiled value types)");
  static constexpr bool dense = std::is_same_v<Policy, policy::tc_dense_mma>;
  static constexpr bool blocks = std::is_same_v<Policy, policy::tc_block_sparse_mma>;
  static constexpr bool tiles = std::is_same_v<Policy, policy::tc_tile_offsets_mma>;
  static_assert(dense || blocks || tiles, "tc_linear_plan: Policy must be tc_dense_mma, tc_block_sparse_mma or "
                                          "tc_tile_offsets_mma");

 public:
  using value_type = T;
  using policy_type = Policy;
  using weights_type = typename detail::tc_weights<Policy, T>::type;

  // What one run launches.
  struct launch_shape {
    bool large = false;
    bool stream = false;  // the streaming kernel (tc_stream.cuh): bm x bk units, bn batch rows a pass
    bool direct = false;  // the direct kernel (tc_block_direct.cuh): one block row x bn batch rows a block
    bool tma = false;     // the TMA kernel (tc_block_tma.cuh): one block row x bn rows of X a block
    int bm = 0, bn = 0, bk = 0, stages = 0, threads = 0, smem = 0;
    int panels = 0, ntiles = 0, splits = 1;
    int ctas = 0, passes = 1;   // stream: blocks (one wave) and passes of bn rows
    std::size_t counters = 0;   // int32 counters the run needs
    std::size_t workspace = 0;  // bytes: counters + split / stream partials
  };

  // Checks the weights' shape and this GPU (sm_80 or newer), uploads W once on exec.stream
  // (dense: padded to a multiple of 8 columns), sizes (and by default allocates and zeroes) the
  // workspace of the small shape's K split for N up to plan_options::max_rows (0: the tuning
  // table's split_n_max; larger N never splits, so needs none). `shape` forces a tile
  // shape for every N (the benchmarks and tests).
  tc_linear_plan(weights_type const& w, cuda_exec exec, plan_options opt = {},
                 policy::tc_shape shape = policy::tc_shape::automatic)
      : shape_(shape), runs_(exec) {
    exec = runs_.owned(exec);  // every buffer below waits for the plan's streams when released
    arch_ = ::sdnn::detail::current_arch();
    tuning_ = policy::tc_tuning_for(arch_);
    if constexpr (dense) {
      ::sdnn::detail::implementable(tc_linear_can_implement(Policy{}, w.rows(), w.cols(), arch_), 0);
      m_ = static_cast<std::int32_t>(w.rows());
      k_ = static_cast<std::int32_t>(w.cols());
      ldw_ = (std::int64_t(k_) + 7) / 8 * 8;
      std::vector<T> padded(std::size_t(m_) * std::size_t(ldw_), T(0.0f));
      for (std::int64_t i = 0; i < m_; ++i)
        std::copy(w.data() + i * k_, w.data() + (i + 1) * k_, padded.begin() + i * ldw_);
      dense_w_ = to_device(padded.data(), padded.size(), exec);
      stored_bytes_ = padded.size() * sizeof(T);
    } else if constexpr (blocks) {
      ::sdnn::detail::implementable(
          tc_linear_can_implement(Policy{}, w.rows(), w.cols(), w.block_rows(), w.block_cols(), arch_), 0);
      validate(w);
      m_ = w.rows();
      k_ = w.cols();
      br_ = w.block_rows();
      bc_ = w.block_cols();
      nnz_ = w.nnzb();
      max_row_blocks_ = 0;
      for (std::int32_t r = 0; r < w.row_blocks(); ++r)
        max_row_blocks_ = std::max(max_row_blocks_, w.row_ptr()[r + 1] - w.row_ptr()[r]);
      {  // the device copy holds each block's 16-byte pieces swizzled (kernels::tc_swizzle16)
        block_sparse_matrix<T> sw(w.rows(), w.cols(), br_, bc_, nnz_);
        std::copy(w.row_ptr().begin(), w.row_ptr().end(), sw.row_ptr().begin());
        std::copy(w.col_idx().begin(), w.col_idx().end(), sw.col_idx().begin());
        std::size_t const bs = std::size_t(br_) * std::size_t(bc_);
        for (std::size_t b = 0; b < std::size_t(nnz_); ++b)
          for (int i = 0; i < int(bs / 8); ++i)
            std::copy(w.values().begin() + b * bs + 8 * i, w.values().begin() + b * bs + 8 * i + 8,
                      sw.values().begin() + b * bs + 8 * kernels::tc_swizzle16(i));
        bsr_ = to_device(sw, exec);
      }
      stored_bytes_ = w.values().size() * sizeof(T) + 4 * (w.row_ptr().size() + w.col_idx().size());
    } else {
      ::sdnn::detail::implementable(
          tc_linear_can_implement(Policy{}, w.rows(), w.cols(), w.tile_rows(), w.tile_cols(), arch_), 0);
      validate(w);
      m_ = w.rows();
      k_ = w.cols();
      nnz_ = w.ntiles();
      max_row_blocks_ = 0;
      for (std::int32_t r = 0; r < w.row_tiles(); ++r)
        max_row_blocks_ = std::max(max_row_blocks_, w.tile_ptr()[r + 1] - w.tile_ptr()[r]);
      {  // the device copy holds each position byte q as kernels::tc_pos_swizzle(q)
        tile_offsets_matrix<T> sw(w.rows(), w.cols(), w.tile_rows(), w.tile_cols(), w.ntiles(), w.data().size());
        std::copy(w.tile_ptr().begin(), w.tile_ptr().end(), sw.tile_ptr().begin());
        std::copy(w.tile_col().begin(), w.tile_col().end(), sw.tile_col().begin());
        std::copy(w.tile_offset().begin(), w.tile_offset().end(), sw.tile_offset().begin());
        std::copy(w.data().begin(), w.data().end(), sw.data().begin());
        std::uint32_t const S = std::uint32_t(w.view().subtiles());
        for (std::int32_t t = 0; t < w.ntiles(); ++t) {
          std::uint8_t* rec = sw.data().data() + std::size_t(w.tile_offset()[std::size_t(t)]) * 16;
          std::uint32_t const nnz = ::sdnn::detail::read_u16(rec + 2 * S);
          std::uint8_t* pos = rec + tile_record::header_bytes(S) + tile_record::value_bytes(nnz, sizeof(T));
          for (std::uint32_t i = 0; i < nnz; ++i) pos[i] = std::uint8_t(kernels::tc_pos_swizzle(pos[i]));
        }
        tiles_ = to_device(sw, exec);
      }
      stored_bytes_ = w.bytes();
    }
    prepare_kernels();
    if constexpr (!dense) {
      if (stream_ok()) build_schedule(w, exec);
    }
    // The counters (at the start of the workspace, the same region for every N) and the
    // partials of every N up to max_rows that splits K or streams.
    std::int64_t const rows = opt.max_rows > 0 ? opt.max_rows : tuning_.small_n_max;
    std::int64_t const stream_max = shape_ == policy::tc_shape::stream ? rows : tuning_.stream_n_max;
    std::int64_t const n_ws = std::min<std::int64_t>(rows, std::max<std::int64_t>(tuning_.split_n_max, stream_max));
    std::size_t counters = 0;
    for (std::int64_t n = 1; n <= n_ws; ++n)
      counters = std::max({counters, shape_for(n, false, false).counters, shape_for(n, true, false).counters});
    counters_bytes_ = ::sdnn::detail::workspace_carver::bytes_of<std::int32_t>(counters);
    for (std::int64_t n = 1; n <= n_ws; ++n)
      ws_bytes_ = std::max({ws_bytes_, shape_for(n, false, false).workspace, shape_for(n, true, false).workspace});
    if (opt.own_workspace && ws_bytes_) {
      ws_ = buffer<unsigned char, device_space>(ws_bytes_, exec);
      SDNN_CUDA_CHECK(cudaMemsetAsync(ws_.data(), 0, ws_bytes_, exec.stream));  // the split counters start at 0
    }
  }

  tc_linear_plan(tc_linear_plan&&) noexcept = default;
  tc_linear_plan& operator=(tc_linear_plan&&) noexcept = default;

  static constexpr char const* name() { return Policy::name; }
  std::int64_t out_features() const noexcept { return m_; }
  std::int64_t in_features() const noexcept { return k_; }
  std::size_t weight_bytes() const noexcept { return stored_bytes_; }
  // Scratch of run() (split partials and counters), for N up to max_rows.
  std::size_t workspace_bytes() const noexcept { return ws_bytes_; }

  // The shape, split and workspace of a run with n rows (tiled_only: of run_x, which never streams;
  // x_tma: X can be read through a tensor map, so the TMA kernel may run; the TMA kernel needs no
  // workspace, and a run whose X cannot takes the shape it would have without it).
  template <class XSrc = kernels::tc_rows_x<T>>
  launch_shape shape_for(std::int64_t n, bool tiled_only = false, bool x_tma = true) const {
    launch_shape s;
    with_tiles([&](auto tiles_tag) {
      fill_shape<detail::tc_x_tiles<XSrc, decltype(tiles_tag)>>(s, n, tiled_only, x_tma);
    });
    return s;
  }

  // What the plan runs, and for n > 0 what a run with n rows launches.
  // XSrc: the X operand of the runs described (another than dense rows: run_x's shapes).
  template <class XSrc = kernels::tc_rows_x<T>>
  std::string describe(std::int64_t n = 0) const {
    std::string d = ::sdnn::detail::concat(name(), "<", value_type_name<T>(), ">: W ", m_, " x ", k_);
    if constexpr (blocks) d += ::sdnn::detail::concat(", ", br_, " x ", bc_, " blocks, ", nnz_, " stored");
    if constexpr (tiles) d += ::sdnn::detail::concat(", 64 x 64 tiles, ", nnz_, " stored");
    d += ::sdnn::detail::concat(", ", stored_bytes_, " bytes on the device; sm_", arch_.sm(), " table '", tuning_.gpu,
                                "', small shape for N <= ", tuning_.small_n_max);
    if (stream_ok() && std::is_same_v<XSrc, kernels::tc_rows_x<T>>)
      d += ::sdnn::detail::concat(", streaming for N <= ", tuning_.stream_n_max, " (", sched_.ctas, " blocks x ",
                                  sched_.warps, " warps)");
    if (n > 0) {
      auto const s = shape_for<XSrc>(n, !std::is_same_v<XSrc, kernels::tc_rows_x<T>>);
      if (s.direct)
        d += ::sdnn::detail::concat("; N = ", n, ": direct, ", s.bn, " rows x ", s.threads / 32, " warps a block; grid ",
                                    s.panels, " panels x ", s.ntiles, " n-tiles");
      else if (s.tma)
        d += ::sdnn::detail::concat("; N = ", n, ": tma, ", s.bm, " features x ", s.bn, " rows a block, ", s.stages,
                                    " stages, ", s.threads, " threads, ", s.smem, " B shared; grid ", s.panels,
                                    " block rows x ", s.ntiles, " row tiles (where X can be read through a tensor map)");
      else if (s.stream)
        d += ::sdnn::detail::concat("; N = ", n, ": stream, units ", s.bm, " x ", s.bk, ", ", s.bn, " rows x ", s.passes,
                                    " passes, ", s.threads, " threads, ", s.smem, " B shared, ", s.stages,
                                    " chunks in flight per warp; grid ", s.ctas, " blocks over ", s.panels, " panels");
      else
        d += ::sdnn::detail::concat("; N = ", n, ": ", s.large ? "large" : "small", " tile ", s.bm, " x ", s.bn, " x ",
                                    s.bk, ", ", s.stages, " stages, ", s.threads, " threads, ", s.smem,
                                    " B shared; grid ", s.panels, " panels x ", s.ntiles, " n-tiles x ", s.splits,
                                    " K splits");
    }
    return d;
  }

  // y = epi(x W^T) on exec.stream. Out: T or float. epi.bias: device memory, [out_features].
  // With a caller-supplied workspace, run() first zeroes its split counters (a memset on
  // exec.stream); the plan's own workspace is zeroed once and left zeroed by every run.
  template <class Out>
  void run(cuda_exec exec, dense_view<T const> x, dense_view<Out> y, basic_epilogue<float> const& epi,
           workspace ws = {}) const {
    detail::check_tc_run(name(), m_, k_, x, y);
    bool const x_tma = reinterpret_cast<std::uintptr_t>(x.data) % 16 == 0 && x.ld % 8 == 0;
    launch_shape const s = shape_for(x.rows, false, x_tma);
    workspace const w = begin_run(s, x.rows, ws, exec);
    if (x.rows == 0 || m_ == 0) return;
    if constexpr (blocks) {
      if (s.tma) {
        with_tma_tile(s.bn, [&](auto tile) {
          using Cfg = decltype(tile);
          kernels::tc_tma_rows_x xs{::sdnn::detail::make_tma_2d(x.data, 2, std::uint64_t(x.rows), std::uint64_t(k_),
                                                                std::uint64_t(x.ld) * 2, Cfg::bx, 32,
                                                                CU_TENSOR_MAP_SWIZZLE_64B)};
          run_tma<Cfg>(s, exec, xs, x.rows, y, epi);
        });
        return;
      }
    }
    if (s.direct) {
      run_direct(s, exec, x, y, epi);
      return;
    }
    if (s.stream) {
      run_stream(s, exec, x, y, epi, w);
      return;
    }
    kernels::tc_rows_x<T> const xs{x.data, x.ld, reinterpret_cast<std::uintptr_t>(x.data) % 16 == 0 && x.ld % 8 == 0};
    run_tiled(s, exec, xs, x.rows, y, epi, w);
  }

  // The tiled kernels with another X operand of n rows and in_features() columns (e.g.
  // kernels::tc_im2col_x: a convolution as an implicit GEMM); y: n x out_features(). Never the
  // streaming kernel. prepare_x<XSrc>() checks once, at plan time, that the operand's tiles fit
  // this GPU's shared memory; the operand's extents are the caller's to check.
  template <class XSrc>
  void prepare_x() const {
    int const optin = optin_smem();
    with_tiles([&](auto tiles_tag) {
      using Tiles = detail::tc_x_tiles<XSrc, decltype(tiles_tag)>;
      prepare<typename Tiles::small, XSrc>(optin);
      prepare<typename Tiles::large, XSrc>(optin);
    });
  }
  template <class XSrc, class Out>
  void run_x(cuda_exec exec, XSrc const& xs, std::int64_t n, dense_view<Out> y, basic_epilogue<float> const& epi,
             workspace ws = {}) const {
    SDNN_EXPECTS_DIMS(n >= 0 && n <= std::numeric_limits<std::int32_t>::max() && y.rows == n && y.cols == m_,
                      name(), ": Y must be ", n, " x ", m_, ", got ", y.rows, " x ", y.cols);
    SDNN_EXPECTS(y.ld >= y.cols && (y.data != nullptr || n == 0), name(), ": bad Y view");
    auto const geo = tma_geometry(xs, n);
    launch_shape const s = shape_for<XSrc>(n, true, geo.encodable());
    workspace const w = begin_run(s, n, ws, exec);
    if (n == 0 || m_ == 0) return;
    if constexpr (blocks && std::is_same_v<XSrc, kernels::tc_im2col_x<T>>) {
      if (s.tma) {
        with_tma_tile(s.bn, [&](auto tile) {
          using Cfg = decltype(tile);
          auto const ts = kernels::make_tc_tma_im2col_x(xs, geo, Cfg::bx, 32, CU_TENSOR_MAP_SWIZZLE_64B);
          run_tma<Cfg>(s, exec, ts, n, y, epi);
        });
        return;
      }
    }
    run_tiled(s, exec, xs, n, y, epi, w);
  }

  // run_x for a convolution followed by a 2x2 stride-2 max-pool, the pool fused into the TMA
  // block kernel's epilogue (kernels::tc_tma_pool): y is the pooled output, one row per pooled
  // pixel (batch x OH/2 x OW/2, an odd last row or column dropped) of out_features(). Its bits are
  // those of run_x followed by conv::detail::nhwc_max_pool2x2. pools_x(xs, n) says whether a run
  // with this operand can (the TMA kernel would run: blocks 32 wide on sm_90, an input a tensor map
  // can read); a run where it cannot is refused before any launch.
  bool pools_x(kernels::tc_im2col_x<T> const& xs, std::int64_t n) const {
    ::sdnn::detail::tma_conv_geometry geo;
    return pool_shape(xs, n, geo).tma;
  }
  template <class Out>
  void run_x_pool2x2(cuda_exec exec, kernels::tc_im2col_x<T> const& xs, std::int64_t n, dense_view<Out> y,
                     basic_epilogue<float> const& epi) const {
    std::int64_t const oh = xs.div_oh.d, ow = xs.div_ow.d, images = oh * ow > 0 ? n / (oh * ow) : 0;
    std::int64_t const pooled = images * (oh / 2) * (ow / 2);
    SDNN_EXPECTS_DIMS(y.rows == pooled && y.cols == m_, name(), ": the pooled Y must be ", pooled, " x ", m_, ", got ",
                      y.rows, " x ", y.cols);
    SDNN_EXPECTS(y.ld >= y.cols && (y.data != nullptr || pooled == 0), name(), ": bad Y view");
    if (pooled == 0 || m_ == 0) return;
    ::sdnn::detail::tma_conv_geometry geo;
    launch_shape const s = pool_shape(xs, n, geo);
    SDNN_EXPECTS(s.tma, name(),
                 ": the 2x2 pool is fused only into the TMA block kernel (blocks 32 wide, sm_90, an input "
                 "16-byte aligned with whole images a tensor map can read); run_x and pool instead");
    if constexpr (blocks) {
      with_tma_tile(s.bn, [&](auto tile) {
        using Cfg = decltype(tile);
        auto const pool = kernels::make_tc_tma_pool(int(oh), int(ow), Cfg::bx);
        auto const ts = kernels::make_tc_tma_im2col_x(xs, geo, pool.split ? Cfg::bx / 2 : Cfg::bx, 32,
                                                      CU_TENSOR_MAP_SWIZZLE_64B);
        run_tma<Cfg, true>(s, exec, ts, n, y, epi, pool, images * pool.tiles_w * pool.tiles_h);
      });
    }
  }

 private:
  using dense_src = kernels::tc_dense_source<T>;
  using block_src = kernels::tc_block_source<T>;
  using tile_src = kernels::tc_tile_offsets_source<T>;
  template <class Cfg>
  using source_for = std::conditional_t<dense, dense_src, std::conditional_t<blocks, block_src, tile_src>>;

  // The workspace of a run of n rows with shape s (checked against the plan's or the caller's),
  // the run's stream noted; a caller's workspace gets its split counters zeroed on that stream.
  workspace begin_run(launch_shape const& s, std::int64_t n, workspace ws, cuda_exec exec) const {
    workspace w{};
    if (s.workspace) {
      SDNN_EXPECTS(ws.data != nullptr || ws_.size() >= s.workspace, name(), ": a run of ", n,
                   " rows needs a workspace of ", s.workspace, " bytes; the plan was sized for ", ws_.size(),
                   " (plan_options::max_rows)");
      w = ::sdnn::detail::plan_workspace(ws, ws_, s.workspace, name());
    }
    runs_.note(exec);
    if (n > 0 && m_ > 0 && ws.data != nullptr && s.workspace)
      SDNN_CUDA_CHECK(cudaMemsetAsync(w.data, 0, counter_bytes(s), exec.stream));
    return w;
  }

  template <class F>
  void with_tiles(F&& f) const {
    if constexpr (dense) f(policy::tc_dense_tiles{});
    else if constexpr (tiles) f(policy::tc_tile_offsets_tiles{});
    else
      detail::with_block_shape(br_, bc_, [&](auto BR, auto BC) {
        f(policy::tc_block_tiles<decltype(BR)::value, decltype(BC)::value>{});
      });
  }
  static int optin_smem() {
    int dev = 0, optin = 0;
    SDNN_CUDA_CHECK(cudaGetDevice(&dev));
    SDNN_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    return optin;
  }

  // One launch of the tiled kernel for shape s (not streaming) over X operand xs of n rows.
  template <class XSrc, class Out>
  void run_tiled(launch_shape const& s, cuda_exec exec, XSrc const& xs, std::int64_t n, dense_view<Out> y,
                 basic_epilogue<float> const& epi, workspace w) const {
    auto fill = [&](auto& p) {
      p.xs = xs;
      p.y = y.data;
      p.ldy = y.ld;
      p.y_float = std::is_same_v<Out, float>;
      p.y_vec = reinterpret_cast<std::uintptr_t>(y.data) % 16 == 0 && y.ld % 8 == 0 && m_ % 8 == 0;
      p.M = m_;
      p.N = static_cast<std::int32_t>(n);
      p.K = k_;
      p.epi = epi;
      p.panels = s.panels;
      p.ntiles = s.ntiles;
      p.splits = s.splits;
      p.counters = static_cast<std::int32_t*>(w.data);
      p.partial = s.splits > 1 ? reinterpret_cast<float*>(static_cast<unsigned char*>(w.data) + counter_bytes(s)) : nullptr;
    };
    if constexpr (dense) {
      kernels::tc_spmm_params<T, dense_src, XSrc> p{};
      p.src = {dense_w_.data(), ldw_, m_, k_};
      fill(p);
      launch<policy::tc_dense_tiles>(s, p, exec);
    } else if constexpr (blocks) {
      kernels::tc_spmm_params<T, block_src, XSrc> p{};
      auto const v = bsr_.view();
      p.src = {v.row_ptr, v.col_idx, v.values};
      fill(p);
      detail::with_block_shape(br_, bc_, [&](auto BR, auto BC) {
        launch<policy::tc_block_tiles<decltype(BR)::value, decltype(BC)::value>>(s, p, exec);
      });
    } else {
      kernels::tc_spmm_params<T, tile_src, XSrc> p{};
      auto const v = tiles_.view();
      p.src = {v.tile_ptr, v.tile_col, v.tile_offset, v.data};
      fill(p);
      launch<policy::tc_tile_offsets_tiles>(s, p, exec);
    }
  }

  // The im2col operand's geometry as a tensor map sees it; encodable() is false where the TMA
  // kernel cannot read it: an operand that is not a convolution's, unaligned, C not a multiple of
  // 32 (a block's 32 columns must lie in one tap), or outside TMA's limits.
  template <class XSrc>
  ::sdnn::detail::tma_conv_geometry tma_geometry(XSrc const& xs, std::int64_t n) const {
    if constexpr (std::is_same_v<XSrc, kernels::tc_im2col_x<T>>) return kernels::im2col_tma_geometry(xs, n, k_, 32);
    else {
      (void)xs;
      (void)n;
      return {};
    }
  }

  // The launch of a pooled run (run_x_pool2x2) of n rows of xs, and xs's geometry (geo): s.tma is
  // false where the TMA kernel cannot take it.
  launch_shape pool_shape(kernels::tc_im2col_x<T> const& xs, std::int64_t n,
                          ::sdnn::detail::tma_conv_geometry& geo) const {
    if (n <= 0 || n > std::numeric_limits<std::int32_t>::max()) return {};
    geo = tma_geometry(xs, n);
    if (!geo.encodable()) return {};
    return shape_for<kernels::tc_im2col_x<T>>(n, true, true);
  }

  // The TMA kernel: blocks 32 wide on sm_90 and newer, forced or from the tuning table's
  // tma_n_min on, where X can be read through a tensor map (x_tma).
  bool tma_ok(std::int64_t n, bool x_tma) const {
    if constexpr (!blocks) {
      (void)n;
      (void)x_tma;
      return false;
    } else {
      if (!x_tma || bc_ != 32 || !(arch{9, 0} <= arch_) || n <= 0) return false;
      if (shape_ == policy::tc_shape::tma) return true;
      return shape_ == policy::tc_shape::automatic && tuning_.tma_n_min > 0 && n >= tuning_.tma_n_min;
    }
  }
  // The TMA tile with bx rows of X (launch_shape::bn): the wide one where compiled and chosen.
  template <class F>
  void with_tma_tile(int bx, F&& f) const {
    detail::with_block_shape(br_, 32, [&](auto BR, auto) {
      using Tiles = policy::tc_block_tiles<decltype(BR)::value, 32>;
      if constexpr (Tiles::has_tma_wide) {
        if (bx == Tiles::tma_wide::bx) {
          f(typename Tiles::tma_wide{});
          return;
        }
      }
      f(typename Tiles::tma{});
    });
  }
  // Whether n rows of X take the wide TMA tile: at least tma_wide_units_min_ units at its rows a
  // tile (the narrow tile wins on fewer). That is 0 unless the wide tile is compiled for this
  // block height and fits this GPU, so with_tma_tile(256) gives the wide tile here.
  bool tma_wide(std::int64_t n) const {
    bool wide = false;
    if (tma_wide_units_min_ > 0)
      with_tma_tile(256, [&](auto tile) {
        using Cfg = decltype(tile);
        wide = (std::int64_t(m_) + Cfg::br - 1) / Cfg::br * ((n + Cfg::bx - 1) / Cfg::bx) >= tma_wide_units_min_;
      });
    return wide;
  }
  // pool, tiles: the fused pool's tiling and its tiles (Pool), instead of s.ntiles.
  template <class Cfg, bool Pool = false, class XSrc, class Out>
  void run_tma(launch_shape const& s, cuda_exec exec, XSrc const& xs, std::int64_t n, dense_view<Out> y,
               basic_epilogue<float> const& epi, kernels::tc_tma_pool const& pool = {}, std::int64_t tiles = 0) const {
    auto const v = bsr_.view();
    kernels::tc_block_tma_params<T> p{};
    p.w = tma_w_;
    p.row_ptr = v.row_ptr;
    p.col_idx = v.col_idx;
    p.y = y.data;
    p.y_ld = y.ld;
    p.y_vec = kernels::staged_rows_vec(y.data, y.ld, sizeof(Out));
    p.m = m_;
    p.n = static_cast<std::int32_t>(n);
    p.row_blocks = s.panels;
    p.epi = epi;
    p.pool = pool;
    std::int64_t const grid = std::int64_t(s.panels) * (Pool ? tiles : s.ntiles);
    SDNN_EXPECTS(grid <= std::numeric_limits<std::int32_t>::max(), name(), ": grid of ", grid, " blocks");
    auto const kern = kernels::tc_block_tma_kernel<Cfg, T, Out, XSrc, Pool>;
    ::sdnn::detail::allow_dynamic_smem(kern, Cfg::smem);  // here, by the launch: see core/cuda.cuh
    kern<<<static_cast<unsigned>(grid), Cfg::threads, Cfg::smem, exec.stream>>>(p, xs);
    SDNN_CUDA_CHECK_LAUNCH();
  }

  // The split counters: the same region for every N (a run with another N must find them zero).
  std::size_t counter_bytes(launch_shape const&) const { return counters_bytes_; }

  // The streaming kernel: tile_offsets, and blocks whose compiled shapes include it (square).
  bool stream_ok() const {
    if constexpr (tiles) return true;
    else if constexpr (blocks) return br_ == bc_;
    else return false;
  }
  template <class F>
  void with_stream_tiles(F&& f) const {
    if constexpr (tiles) f(policy::tc_tile_offsets_tiles{});
    else if constexpr (blocks)
      detail::with_block_shape(br_, bc_, [&](auto BR, auto BC) {
        using Tiles = policy::tc_block_tiles<decltype(BR)::value, decltype(BC)::value>;
        if constexpr (Tiles::has_stream) f(Tiles{});
      });
  }
  template <class Tiles, class F>
  static void with_stream_bn(int bn, F&& f) {
    if (bn == 8) f(typename Tiles::template stream<8>{});
    else f(typename Tiles::template stream<32>{});
  }

  // The schedule of the streaming kernel (ops/tc_stream_schedule.hpp), on the device.
  template <class Wt>
  void build_schedule(Wt const& w, cuda_exec exec) {
    with_stream_tiles([&](auto tiles_tag) {
      using Cfg = typename decltype(tiles_tag)::template stream<32>;
      std::int64_t const unit_cost = tuning_.stream_unit_cost;
      if constexpr (tiles) {
        auto const* off = w.tile_offset().data();
        sched_ = detail::build_tc_stream_schedule(
            w.row_tiles(), w.tile_ptr().data(), [&](std::int64_t u) { return std::int64_t(off[u + 1] - off[u]) * 16; },
            [&](std::int64_t u) { return off[u]; }, stream_ctas_, Cfg::Warps, unit_cost);
      } else if constexpr (blocks) {
        std::int64_t const unit = std::int64_t(Cfg::BR) * Cfg::BC * 2;
        sched_ = detail::build_tc_stream_schedule(
            w.row_blocks(), w.row_ptr().data(), [&](std::int64_t) { return unit; },
            [&](std::int64_t u) { return std::uint32_t(u * (unit / 16)); }, stream_ctas_, Cfg::Warps, unit_cost);
      }
    });
    sched_dev_ = to_device(sched_.data.data(), sched_.data.size(), exec);
  }

  template <class Cfg>
  void fill_stream(launch_shape& s, std::int64_t n) const {
    s.stream = true;
    s.bm = Cfg::BR;
    s.bk = Cfg::BC;
    s.bn = Cfg::BN;
    s.stages = Cfg::Ring / Cfg::Chunk;
    s.threads = Cfg::threads;
    s.smem = kernels::tc_stream_smem<Cfg, tiles>::total;
    s.panels = sched_.panels;
    s.ntiles = 1;
    s.ctas = sched_.ctas;
    s.passes = static_cast<int>(std::max<std::int64_t>(1, (n + Cfg::BN - 1) / Cfg::BN));
    s.counters = std::size_t(s.passes) * std::size_t(s.panels);
    s.workspace = counters_bytes_ + ::sdnn::detail::workspace_carver::bytes_of<float>(
                                        std::size_t(s.passes) * std::size_t(s.ctas) * 2 * Cfg::BR * Cfg::BN);
  }

  // The direct kernel serves 32 x 32 blocks when forced, or automatically for N up to the tuning
  // table's direct_n_max and while the work (stored blocks x 128-row batch tiles) is at most its
  // direct_work_max: there the pipelined kernels' fixed costs dominate.
  bool direct_ok(std::int64_t n) const {
    if (br_ != 32 || bc_ != 32) return false;
    if (shape_ == policy::tc_shape::direct) return true;
    return shape_ == policy::tc_shape::automatic &&
           (n <= tuning_.direct_n_max || std::int64_t(nnz_) * ((n + 127) / 128) <= tuning_.direct_work_max);
  }
  // The direct kernel's compiled shapes: 8 warps over a row's blocks for N <= 8, 2 warps of 16 rows
  // x 4 groups for N <= 32, else 4 warps of 32 rows along the batch x 2 groups. The first two hold
  // 3 thread blocks an SM (at most 85 registers; 72 and no spill with nvcc 13.0), so 344 block rows
  // (11008 outputs) fit one wave: measured on H100 against 2 an SM (88 registers, 1.3 waves) and
  // against one 32-row warp x 4 groups (128 registers), 0.82-0.87x the time at N <= 8 on 11008 x 4096
  // (0.99-1.02x where the grid already fit) and 0.82-0.98x at N = 16 and 32 on every shape
  // (tc_linear_notes.md, v11).
  template <class F>
  static void with_direct_cfg(std::int64_t n, F&& f) {
    if (n <= 8) f(kernels::tc_direct_tile<1, 8, 1, 3>{});
    else if (n <= 32) f(kernels::tc_direct_tile<2, 4, 2, 3>{});
    else f(kernels::tc_direct_tile<4, 2, 4>{});
  }

  // The fields the direct and the streaming kernels' parameters share: X (read as 32-bit pairs
  // where its address, ld and K allow), Y, the extents and the epilogue.
  template <class P, class Out>
  void set_row_operands(P& p, dense_view<T const> x, dense_view<Out> y, basic_epilogue<float> const& epi) const {
    p.x = x.data;
    p.ldx = x.ld;
    p.x_pair = reinterpret_cast<std::uintptr_t>(x.data) % 4 == 0 && x.ld % 2 == 0 && k_ % 2 == 0;
    p.y = y.data;
    p.ldy = y.ld;
    p.y_float = std::is_same_v<Out, float>;
    p.M = m_;
    p.N = static_cast<std::int32_t>(x.rows);
    p.K = k_;
    p.epi = epi;
  }
  template <class Out>
  void run_direct(launch_shape const& s, cuda_exec exec, dense_view<T const> x, dense_view<Out> y,
                  basic_epilogue<float> const& epi) const {
    SDNN_EXPECTS(s.ntiles <= 65535, name(), ": ", x.rows, " rows need ", s.ntiles, " batch tiles of ", s.bn,
                 ", more than a grid's 65535");
    auto const v = bsr_.view();
    kernels::tc_direct_params<T> p{};
    p.row_ptr = v.row_ptr;
    p.col_idx = v.col_idx;
    p.values = v.values;
    set_row_operands(p, x, y, epi);
    with_direct_cfg(x.rows, [&](auto cfg_tag) {
      using Cfg = decltype(cfg_tag);
      dim3 const grid(static_cast<unsigned>(s.panels), static_cast<unsigned>(s.ntiles));
      kernels::tc_block_direct_kernel<Cfg, T><<<grid, Cfg::threads, Cfg::smem, exec.stream>>>(p);
      SDNN_CUDA_CHECK_LAUNCH();
    });
  }

  template <class Out>
  void run_stream(launch_shape const& s, cuda_exec exec, dense_view<T const> x, dense_view<Out> y,
                  basic_epilogue<float> const& epi, workspace w) const {
    auto go = [&](auto src, auto cfg_tag) {
      using Cfg = decltype(cfg_tag);
      using Src = decltype(src);
      kernels::tc_stream_params<T, Src> p{};
      p.src = src;
      set_row_operands(p, x, y, epi);
      p.panels = sched_.panels;
      p.passes = s.passes;
      p.sched = sched_dev_.data();
      p.warp_begin = sched_.warp_begin;
      p.warp_panel = sched_.warp_panel;
      p.warp_off = sched_.warp_off;
      p.cta_panel = sched_.cta_panel;
      p.panel_cta = sched_.panel_cta;
      p.empty = sched_.empty;
      p.n_empty = sched_.n_empty;
      p.counters = static_cast<std::int32_t*>(w.data);
      p.partial = reinterpret_cast<float*>(static_cast<unsigned char*>(w.data) + counters_bytes_);
      auto const kern = kernels::tc_stream_kernel<Cfg, T, Src>;
      constexpr int smem = kernels::tc_stream_smem<Cfg, tiles>::total;
      ::sdnn::detail::allow_dynamic_smem(kern, smem);  // here, by the launch: see core/cuda.cuh
      kern<<<static_cast<unsigned>(sched_.ctas), Cfg::threads, smem, exec.stream>>>(p);
      SDNN_CUDA_CHECK_LAUNCH();
    };
    with_stream_tiles([&](auto tiles_tag) {
      using Tiles = decltype(tiles_tag);
      with_stream_bn<Tiles>(s.bn, [&](auto cfg_tag) {
        if constexpr (tiles) {
          auto const v = tiles_.view();
          go(kernels::tc_tile_offsets_source<T>{v.tile_ptr, v.tile_col, v.tile_offset, v.data}, cfg_tag);
        } else {
          auto const v = bsr_.view();
          go(kernels::tc_block_source<T>{v.row_ptr, v.col_idx, v.values}, cfg_tag);
        }
      });
    });
  }

  // The small shape's resident blocks (and the stream grid) from occupancy queries, which need the
  // kernels' shared-memory limit raised; each launch raises it again for its own copy of the
  // kernel (core/cuda.cuh says why).
  void prepare_kernels() {
    int const optin = optin_smem();
    if constexpr (blocks) {
      // The TMA kernel's map of the stored blocks (nnzb * br rows of 64 bytes, copied verbatim).
      if (bc_ == 32 && nnz_ > 0 && arch{9, 0} <= arch_) {
        with_tma_tile(128, [&](auto tile) {
          using Cfg = decltype(tile);
          SDNN_EXPECTS(Cfg::smem <= optin, name(), ": the TMA kernel needs ", Cfg::smem,
                       " bytes of shared memory per block, this GPU allows ", optin);
          tma_w_ = ::sdnn::detail::make_tma_2d(bsr_.view().values, 2, std::uint64_t(nnz_) * std::uint64_t(br_), 32, 64,
                                               std::uint32_t(br_), 32, CU_TENSOR_MAP_SWIZZLE_NONE);
        });
        // The wide tile from the tuning table's units per SM on, where it is compiled and fits.
        detail::with_block_shape(br_, 32, [&](auto BR, auto) {
          using Tiles = policy::tc_block_tiles<decltype(BR)::value, 32>;
          if constexpr (Tiles::has_tma_wide) {
            if (Tiles::tma_wide::smem <= optin)
              tma_wide_units_min_ = std::int64_t(tuning_.tma_wide_units_per_sm) * ::sdnn::detail::sm_count();
          }
        });
      }
    }
    with_tiles([&](auto tiles_tag) {
      using Tiles = decltype(tiles_tag);
      small_slots_ = prepare<typename Tiles::small>(optin) * ::sdnn::detail::sm_count();
      prepare<typename Tiles::large>(optin);
    });
    with_stream_tiles([&](auto tiles_tag) {
      using Tiles = decltype(tiles_tag);
      int per_sm = 1 << 20;
      for (int bn : {8, 32})
        with_stream_bn<Tiles>(bn, [&](auto cfg_tag) {
          using Cfg = decltype(cfg_tag);
          using Src = std::conditional_t<tiles, tile_src, block_src>;
          constexpr int smem = kernels::tc_stream_smem<Cfg, tiles>::total;
          SDNN_EXPECTS(smem <= optin, name(), ": the streaming shape needs ", smem,
                       " bytes of shared memory per block, this GPU allows ", optin);
          auto kern = kernels::tc_stream_kernel<Cfg, T, Src>;
          ::sdnn::detail::allow_dynamic_smem(kern, smem);
          int b = 0;
          SDNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kern, Cfg::threads, smem));
          per_sm = std::min(per_sm, std::max(b, 1));
        });
      stream_ctas_ = per_sm * ::sdnn::detail::sm_count();
    });
  }
  template <class Cfg, class XSrc = kernels::tc_rows_x<T>>
  int prepare(int optin) const {
    using Src = source_for<Cfg>;
    constexpr int smem = kernels::tc_smem<Cfg, Src>::total;
    SDNN_EXPECTS(smem <= optin, name(), ": the ", Cfg::BM, " x ", Cfg::BN, " x ", Cfg::BK, " tile needs ", smem,
                 " bytes of shared memory per block, this GPU allows ", optin);
    auto kern = kernels::tc_spmm_kernel<Cfg, T, Src, XSrc>;
    ::sdnn::detail::allow_dynamic_smem(kern, smem);
    int per_sm = 0;
    SDNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, Cfg::threads, smem));
    return std::max(per_sm, 1);
  }

  template <class XTiles>
  void fill_shape(launch_shape& s, std::int64_t n, bool tiled_only, bool x_tma) const {
    using Tiles = typename XTiles::base;
    if constexpr (blocks) {
      if constexpr (Tiles::has_tma) {
        if (tma_ok(n, x_tma)) {
          with_tma_tile(tma_wide(n) ? 256 : 128, [&](auto tile) {
            using Cfg = decltype(tile);
            s.tma = true;
            s.bm = Cfg::br;
            s.bn = Cfg::bx;
            s.bk = Cfg::bk;
            s.stages = Cfg::stages;
            s.threads = Cfg::threads;
            s.smem = Cfg::smem;
            s.panels = static_cast<int>((std::int64_t(m_) + Cfg::br - 1) / Cfg::br);
            s.ntiles = static_cast<int>((n + Cfg::bx - 1) / Cfg::bx);
          });
          return;
        }
      }
      if (!tiled_only && direct_ok(n)) {
        with_direct_cfg(n, [&](auto cfg_tag) {
          using Cfg = decltype(cfg_tag);
          s.direct = true;
          s.bm = 32;
          s.bk = 32;
          s.bn = Cfg::BN;
          s.threads = Cfg::threads;
          s.smem = Cfg::smem;
          s.panels = static_cast<int>((std::int64_t(m_) + 31) / 32);
          s.ntiles = static_cast<int>(std::max<std::int64_t>(1, (n + Cfg::BN - 1) / Cfg::BN));
        });
        return;
      }
    }
    if constexpr (!dense) {
      if (!tiled_only && stream_ok() && (shape_ == policy::tc_shape::stream ||
                          (shape_ == policy::tc_shape::automatic && n <= tuning_.stream_n_max))) {
        if constexpr (Tiles::has_stream) {
          if (policy::tc_stream_bn(n) == 8) fill_stream<typename Tiles::template stream<8>>(s, n);
          else fill_stream<typename Tiles::template stream<32>>(s, n);
          return;
        }
      }
    }
    bool const large = shape_ == policy::tc_shape::large ||
                       (shape_ != policy::tc_shape::small && n > tuning_.small_n_max);
    auto set = [&](auto cfg_tag) {
      using Cfg = decltype(cfg_tag);
      s.large = large;
      s.bm = Cfg::BM;
      s.bn = Cfg::BN;
      s.bk = Cfg::BK;
      s.stages = Cfg::Stages;
      s.threads = Cfg::threads;
      s.smem = kernels::tc_smem<Cfg, source_for<Cfg>>::total;
      s.panels = static_cast<int>((std::int64_t(m_) + Cfg::BM - 1) / Cfg::BM);
      s.ntiles = static_cast<int>(std::max<std::int64_t>(1, (n + Cfg::BN - 1) / Cfg::BN));
      std::int64_t const kblocks = dense ? (std::int64_t(k_) + Cfg::BK - 1) / Cfg::BK : max_row_blocks_;
      s.splits = large || n > tuning_.split_n_max
                     ? 1
                     : policy::tc_choose_splits(std::int64_t(s.panels) * s.ntiles, small_slots_, kblocks, tuning_);
      s.counters = s.splits > 1 ? std::size_t(s.panels) * std::size_t(s.ntiles) : 0;
      s.workspace = s.splits > 1 ? counter_bytes(s) + ::sdnn::detail::workspace_carver::bytes_of<float>(
                                                          std::size_t(s.splits) * std::size_t(n) * std::size_t(m_))
                                 : 0;
    };
    if (large) set(typename XTiles::large{});
    else set(typename XTiles::small{});
  }

  template <class PolicyTiles, class P>
  void launch(launch_shape const& s, P p, cuda_exec exec) const {
    using XSrc = std::remove_const_t<decltype(p.xs)>;
    using Tiles = detail::tc_x_tiles<XSrc, PolicyTiles>;
    p.y_vec = p.y_vec && Tiles::vector_store;
    auto go = [&](auto cfg_tag) {
      using Cfg = decltype(cfg_tag);
      using Src = source_for<Cfg>;
      std::int64_t const grid = std::int64_t(s.panels) * s.ntiles * s.splits;
      SDNN_EXPECTS(grid <= std::numeric_limits<std::int32_t>::max(), name(), ": grid of ", grid, " blocks");
      auto const kern = kernels::tc_spmm_kernel<Cfg, T, Src, XSrc>;
      constexpr int smem = kernels::tc_smem<Cfg, Src>::total;
      ::sdnn::detail::allow_dynamic_smem(kern, smem);  // here, by the launch: see core/cuda.cuh
      kern<<<static_cast<unsigned>(grid), Cfg::threads, smem, exec.stream>>>(p);
      SDNN_CUDA_CHECK_LAUNCH();
    };
    if (s.large) go(typename Tiles::large{});
    else go(typename Tiles::small{});
  }

  policy::tc_shape shape_ = policy::tc_shape::automatic;
  arch arch_{};
  policy::tc_tuning tuning_{};
  std::int64_t tma_wide_units_min_ = 0;  // the wide TMA tile from this many units on (0: never; tma_wide)
  std::int32_t m_ = 0, k_ = 0, br_ = 0, bc_ = 0, nnz_ = 0, max_row_blocks_ = 0;
  std::int64_t ldw_ = 0;
  std::int64_t small_slots_ = 1;
  int stream_ctas_ = 1;
  std::size_t stored_bytes_ = 0, ws_bytes_ = 0, counters_bytes_ = 0;
  detail::tc_stream_schedule sched_;
  buffer<std::int32_t, device_space> sched_dev_;
  buffer<T, device_space> dense_w_;
  block_sparse_matrix<T, device_space> bsr_;
  tile_offsets_matrix<T, device_space> tiles_;
  CUtensorMap tma_w_{};  // blocks 32 wide on sm_90: the TMA kernel's map of the stored blocks
  buffer<unsigned char, device_space> ws_;
  ::sdnn::detail::run_streams runs_;  // the streams its buffers wait for when released (core/plan.cuh)
};

}  // namespace sdnn::ops
