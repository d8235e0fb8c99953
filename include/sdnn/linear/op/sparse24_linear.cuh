// sdnn/linear/op/sparse24_linear.cuh - the device plan of the 2:4 sparse linear layer on mma.sp
// (sm_80+) and, in sm_90a builds with SDNN_SPARSE24_WGMMA=1, wgmma.sp on sm_90; following
// core/plan.hpp:
//
//   ops::sparse24_linear_plan<T, Out, Policy> p(w, exec, opt);   W padded, metadata put in mma.sp
//                                                                order, one upload on exec.stream
//   p.run(exec, x, y, epi, ws = {})                             Y[N x M] = epi(X[N x K] W^T), any N
//   p.run_x(exec, xs, n, y, epi, ws = {})                       the same with another X operand, e.g.
//                                                                a convolution's input as its im2col
//
// Refused before any launch (sdnn::error): W not 2:4, a GPU below sm_80 or without these kernels.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "sdnn/core/arch.hpp"
#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/numeric.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/core/tma.cuh"
#include "sdnn/formats/sparse24.hpp"
#include "sdnn/linear/kernel/sparse24_mma.cuh"
#include "sdnn/linear/op/sparse24_linear.hpp"
#include "sdnn/linear/policy/sparse24.hpp"

namespace sdnn::ops {

namespace detail {
template <class... Tiles>
struct sparse24_tile_list {
  static constexpr int size = sizeof...(Tiles);
};
template <class P>
struct sparse24_tiles_of {
  using type = sparse24_tile_list<P>;
};
template <>
struct sparse24_tiles_of<policy::sparse24_auto> {  // indexed by policy::sparse24_choice
#if SDNN_SPARSE24_WGMMA
  using type = sparse24_tile_list<policy::sparse24_tile_n8, policy::sparse24_tile_n32, policy::sparse24_tile_n64,
                                  policy::sparse24_auto_mid, policy::sparse24_auto_large, policy::sparse24_tile_w_n64,
                                  policy::sparse24_auto_w_mid, policy::sparse24_auto_w_large, policy::sparse24_tile_ws_n32,
                                  policy::sparse24_tile_ws_n64, policy::sparse24_auto_ws_mid,
                                  policy::sparse24_auto_ws_large>;
#else
  using type = sparse24_tile_list<policy::sparse24_tile_n8, policy::sparse24_tile_n32, policy::sparse24_tile_n64,
                                  policy::sparse24_auto_mid, policy::sparse24_auto_large>;
#endif
};
template <int I, class L>
struct sparse24_tile_at;
template <int I, class First, class... Rest>
struct sparse24_tile_at<I, sparse24_tile_list<First, Rest...>> {
  using type = typename sparse24_tile_at<I - 1, sparse24_tile_list<Rest...>>::type;
};
template <class First, class... Rest>
struct sparse24_tile_at<0, sparse24_tile_list<First, Rest...>> {
  using type = First;
};
template <class Tile>
struct tile_tag {
  using type = Tile;
};

// How a run covers the output: whole tiles first, then the tiles of the last partial wave split
// along K (kernels::sparse24_args) into at most `target` CTAs (slots, the resident CTAs, unless a
// smaller target is given). Invariant: (tiles - full_tiles) * splits <= target <= slots, which
// bounds the workspace by slots x BM x BN floats whatever N is.
struct sparse24_schedule {
  int tiles = 0, full_tiles = 0, splits = 1, k_tiles_per_split = 0, units = 0, n_tiles = 0;
};
// k: W's columns; a tile takes ceil(k / bk) steps (the kernel skips steps wholly in the padding).
inline sparse24_schedule sparse24_make_schedule(std::int64_t m, std::int64_t n, int k, int bm, int bn, int bk,
                                                int slots, int target = 0) {
  constexpr int min_steps = 4;   // BK steps per split: below this the pipeline never fills
  constexpr int max_splits = 16;
  sparse24_schedule s;
  s.n_tiles = static_cast<int>((n + bn - 1) / bn);
  s.tiles = static_cast<int>((m + bm - 1) / bm) * s.n_tiles;
  int const k_tiles = (k + bk - 1) / bk, rem = s.tiles % slots;
  target = target > 0 ? std::min(target, slots) : slots;
  int splits = rem == 0 ? 1 : std::min({target / rem, k_tiles / min_steps, max_splits});
  if (splits > 1) {
    int const per = (k_tiles + splits - 1) / splits;
    splits = (k_tiles + per - 1) / per;  // no empty split
    s.k_tiles_per_split = per;
  }
  if (splits <= 1) {
    s.full_tiles = s.units = s.tiles;
    s.k_tiles_per_split = k_tiles;
    return s;
  }
  s.splits = splits;
  s.full_tiles = s.tiles - rem;
  s.units = s.full_tiles + rem * splits;
  return s;
}
}  // namespace detail

// run() is const, enqueues on exec.stream, never allocates, frees or synchronises. The workspace holds
// the float partials of K splits and one counter per split tile; counters are zero between runs (the
// plan's own workspace is zeroed once at construction and every run leaves it zero; a caller's
// workspace is zeroed by a cudaMemsetAsync in each run that splits K). X and Y may have any leading
// dimension and alignment: X rows not 16-byte aligned are staged with 2-byte loads (slower), and Y is
// then stored element by element.
template <class T, class Out, class Policy>
class sparse24_linear_plan {
  static_assert(is_16bit_float_v<T>,
                "sparse24_linear_plan: T must be sdnn::bf16 or sdnn::fp16, the value types the mma.sp kernels are "
                "compiled for");
  static_assert(std::is_same_v<Out, T> || std::is_same_v<Out, float>, "sparse24_linear_plan: Out must be T or float");
  static_assert(std::is_same_v<Policy, policy::sparse24_auto> || policy::is_sparse24_tile_v<Policy>,
                "sparse24_linear_plan: Policy must be policy::sparse24_auto or a policy::sparse24_tile<...>");

  using NT = native_t<T>;
  using NOut = native_t<Out>;
  using tiles_t = typename detail::sparse24_tiles_of<Policy>::type;
  static constexpr int n_tiles_kinds = tiles_t::size;
  // The unaligned-X path runs the first (smallest) tile of the list.
  using fallback_tile = typename detail::sparse24_tile_at<0, tiles_t>::type;

 public:
  using value_type = T;
  using output_type = Out;
  using policy_type = Policy;

  // Whether a plan can be made for W (m x k) on the current GPU (queries the device).
  static plan_status can_implement(std::int64_t m, std::int64_t k) {
    if (auto st = sparse24_linear_can_implement(m, k); !st) return st;
    arch const a = ::sdnn::detail::current_arch();
    if (a < arch{8, 0})
      return plan_status::failure(::sdnn::detail::concat("sparse24_linear: the current GPU is sm_", a.sm(),
                                                         "; mma.sp (2:4 sparse tensor cores) needs sm_80 or newer"));
    if constexpr (policy::is_sparse24_tile_v<Policy>) {
      if (Policy::wgmma && !(policy::sparse24_wgmma_built && a == arch{9, 0}))
        return plan_status::failure(::sdnn::detail::concat(
            "sparse24_linear: a wgmma.sp tile needs an sm_90 GPU and a build for sm_90a with SDNN_SPARSE24_WGMMA=1 "
            "(this GPU is sm_",
            a.sm(), ")"));
    }
    return {};
  }
  // The same, and W's layout (sparse24_matrix::validate: the first bad row and group).
  static plan_status can_implement(sparse24_matrix<T> const& w) {
    try {
      w.validate();
    } catch (error const& e) {
      return plan_status::failure(e.what());
    }
    return can_implement(w.rows(), w.cols());
  }

  // W: M x K on the host, 2:4 (validated). Pads it, reorders its metadata for mma.sp and uploads
  // both once on exec.stream; returns once the host data has been read (pageable copies are
  // staged). Also sets the kernels' shared-memory limits and reads their occupancy.
  sparse24_linear_plan(sparse24_matrix<T> const& w, cuda_exec exec, plan_options opt = {})
      : m_(checked(w).rows()), k_(w.cols()), own_workspace_(opt.own_workspace), runs_(exec) {
    build(w, runs_.owned(exec));  // every buffer bound to the plan's stream record (core/plan.cuh)
  }
  // W: M x K dense on the host, which must already be 2:4 (sparse24_from_dense refuses otherwise,
  // naming the first offending row and group, before anything reaches the device).
  sparse24_linear_plan(dense_view<T const> w_dense, cuda_exec exec, plan_options opt = {})
      : sparse24_linear_plan(sparse24_from_dense(w_dense), exec, opt) {}

  sparse24_linear_plan(sparse24_linear_plan&&) noexcept = default;
  sparse24_linear_plan& operator=(sparse24_linear_plan&&) noexcept = default;

  std::int64_t out_features() const noexcept { return m_; }
  std::int64_t in_features() const noexcept { return k_; }
  // Scratch of run(): K-split partials and counters, bounded independently of N.
  std::size_t workspace_bytes() const noexcept { return ws_bytes_; }

  // Y[N x M] = epi(X[N x K] W^T); x and y device views (any leading dimension >= their columns);
  // epi.bias, when set, is a device pointer to M floats.
  void run(cuda_exec exec, dense_view<T const> x, dense_view<Out> y, basic_epilogue<float> const& epi,
           workspace ws = {}) const {
    SDNN_EXPECTS_DIMS(x.cols == k_ && y.cols == m_ && y.rows == x.rows, "sparse24_linear_plan: X is ", x.rows, " x ",
                      x.cols, ", W is ", m_, " x ", k_, ", Y is ", y.rows, " x ", y.cols, " (need X N x ", k_,
                      ", Y N x ", m_, ")");
    SDNN_EXPECTS(x.rows <= 1 || x.ld >= x.cols, "sparse24_linear_plan: leading dimensions must be >= the column counts; X's is ",
                 x.ld, " for ", x.cols, " columns");
    SDNN_EXPECTS(x.rows == 0 || m_ == 0 || x.data != nullptr || k_ == 0, "sparse24_linear_plan: null X data");
    std::int64_t const x_ld = x.rows > 1 ? x.ld : x.cols;  // one row: its leading dimension is unused
    bool const aligned = x_ld % 8 == 0 && (reinterpret_cast<std::uintptr_t>(x.data) & 15) == 0;
    run_x(exec, kernels::tc_rows_x<T>{x.data, x_ld, aligned}, x.rows, y, epi, ws);
  }

  // The same product with another X operand of n rows and in_features() columns (XSrc: one of
  // linear/arch/tc_x_operand.cuh, e.g. kernels::tc_im2col_x: a convolution as an implicit GEMM);
  // y: n x out_features(). An operand whose 16-byte copies are off (xs.vec false) runs the first
  // (smallest) tile. prepare_x<XSrc>() reads, once at plan time, how many CTAs of each tile fit an
  // SM with this operand (the schedule's waves); without it the dense rows' counts are used.
  template <class XSrc>
  void run_x(cuda_exec exec, XSrc const& xs, std::int64_t n, dense_view<Out> y, basic_epilogue<float> const& epi,
             workspace ws = {}) const {
    SDNN_EXPECTS_DIMS(y.cols == m_ && y.rows == n, "sparse24_linear_plan: Y is ", y.rows, " x ", y.cols, ", need ", n,
                      " x ", m_);
    SDNN_EXPECTS(n <= std::numeric_limits<std::int32_t>::max() - 256, "sparse24_linear_plan: ", n,
                 " rows of X exceed the kernel's int indexing");
    SDNN_EXPECTS(y.rows <= 1 || y.ld >= y.cols, "sparse24_linear_plan: leading dimensions must be >= the column counts; Y's is ",
                 y.ld, " for ", y.cols, " columns");
    SDNN_EXPECTS(n == 0 || m_ == 0 || y.data != nullptr, "sparse24_linear_plan: null Y data");
    runs_.note(exec);
    if (n == 0 || m_ == 0) return;
    if (!xs.vec) return launch(detail::tile_tag<fallback_tile>{}, xs, -1, exec, n, y, epi, ws);
    if constexpr (std::is_same_v<Policy, policy::sparse24_auto>) {
      // Tensor maps read dense rows (xs.vec: 16-byte aligned) and a convolution's input whose
      // channels come in whole 64-column steps.
      bool const tma_x = k_ > 0 && tma_operand(xs, n);
      int const i =  // < n_tiles_kinds
          static_cast<int>(policy::sparse24_pick(arch_, n, policy::sparse24_wgmma_built, tma_x, m_));
      with_tile(i, [&](auto tag) { launch(tag, xs, i, exec, n, y, epi, ws); });
    } else {
      launch(detail::tile_tag<typename detail::sparse24_tile_at<0, tiles_t>::type>{}, xs, 0, exec, n, y, epi, ws);
    }
  }
  template <class XSrc>
  void prepare_x() {
    prepare_all<XSrc>(std::make_index_sequence<n_tiles_kinds>{});
  }

  // What the plan holds and which tiles it may run.
  std::string describe() const {
    std::string s = ::sdnn::detail::concat("sparse24_linear_plan<", value_type_name<T>(), " -> ",
                                           value_type_name<Out>(), ">: W ", m_, " x ", k_, " 2:4 (padded to ", m_pad_,
                                           " x ", k_pad_, "), ", values_.size() * sizeof(T) + meta_.size() * 4,
                                           " bytes on the device (values + metadata); sm_", arch_.sm(), ", ", sms_,
                                           " SMs; tiles:");
    describe_tiles(s, std::make_index_sequence<n_tiles_kinds>{});
    return s + ::sdnn::detail::concat("; workspace ", ws_bytes_, " bytes");
  }
  // The tile and schedule a run of n rows uses (X aligned; tma_x: an operand the tensor maps can read,
  // as dense rows are, see run_x).
  std::string describe_run(std::int64_t n, bool tma_x = true) const {
    bool const tma = tma_x && k_ > 0;
    int i = 0;
    if constexpr (std::is_same_v<Policy, policy::sparse24_auto>)
      i = static_cast<int>(policy::sparse24_pick(arch_, n, policy::sparse24_wgmma_built, tma, m_));
    std::string s;
    with_tile(i, [&](auto tag) {
      using Tile = typename decltype(tag)::type;
      auto const sc = detail::sparse24_make_schedule(m_, n, static_cast<int>(k_), Tile::bm, Tile::bn, Tile::bk,
                                                     slots_[i], split_target<Tile>(slots_[i]));
      s = ::sdnn::detail::concat(tile_name<Tile>(), " tiles ", sc.tiles, " splits ", sc.splits, " ctas ", sc.units,
                                 " (", slots_[i] / sms_, "/SM)",
                                 Tile::warp_specialized ? (tma ? ", X through a tensor map" : ", X gathered") : "");
    });
    return s;
  }

 private:
  static sparse24_matrix<T> const& checked(sparse24_matrix<T> const& w) {
    w.validate();  // names the first bad row and group
    return ::sdnn::detail::implementable(can_implement(w.rows(), w.cols()), w);
  }

  template <class Tile>
  static std::string tile_name() {
    return ::sdnn::detail::concat(Tile::bm, "x", Tile::bn, "x", Tile::bk, " w", Tile::warps_m, "x", Tile::warps_n, " s",
                                  Tile::stages, Tile::wgmma ? " wgmma" : "", Tile::warp_specialized ? " ws" : "");
  }
  template <std::size_t... I>
  void describe_tiles(std::string& s, std::index_sequence<I...>) const {
    ((s += ::sdnn::detail::concat(" [", tile_name<typename detail::sparse24_tile_at<int(I), tiles_t>::type>(), ", ",
                                  slots_[I] / sms_, " CTAs/SM]")),
     ...);
  }
  template <class F>
  void with_tile(int i, F&& f) const {
    with_tile_impl(i, f, std::make_index_sequence<n_tiles_kinds>{});
  }
  template <class F, std::size_t... I>
  void with_tile_impl(int i, F& f, std::index_sequence<I...>) const {
    ((i == int(I) ? (f(detail::tile_tag<typename detail::sparse24_tile_at<int(I), tiles_t>::type>{}), 0) : 0), ...);
  }

  // The CTAs the last wave's split tiles may fill: the n8 tile's split units stream W, and two of
  // them on one SM share its bandwidth, so they fill the SMs, not the resident slots (tuning table).
  template <class Tile>
  int split_target(int slots) const {
    if constexpr (std::is_same_v<Tile, policy::sparse24_tile_n8>)
      return std::min(slots, sms_ * policy::sparse24_n8_split_ctas_per_sm);
    else return slots;
  }
  template <class Tile, class XSrc>
  static auto kernel() {
    return &kernels::sparse24_mma_kernel<NT, NOut, Tile, XSrc>;
  }
  // Raises the kernel's dynamic shared memory limit for the occupancy query; returns its resident
  // CTAs per SM. The launch raises it again for its own copy of the kernel (core/cuda.cuh).
  template <class Tile, class XSrc>
  static int prepare() {
    constexpr int smem = kernels::sparse24_smem_bytes<Tile>();
    auto const fn = kernel<Tile, XSrc>();
    ::sdnn::detail::allow_dynamic_smem(fn, smem);
    int occ = 0;
    SDNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, fn, Tile::threads, smem));
    SDNN_EXPECTS(occ > 0, "sparse24_linear_plan: tile ", tile_name<Tile>(), " (", smem,
                 " bytes of shared memory) does not fit an SM of this GPU");
    return occ;
  }
  // The resident CTAs of every tile on the whole GPU with X operand XSrc (the fallback tile's
  // count, kept apart, is the same kernel's: it runs operands without 16-byte copies). Where a
  // second operand is prepared, the smaller count is kept (the workspace was sized by the first).
  template <class XSrc, std::size_t... I>
  void prepare_all(std::index_sequence<I...>) {
    auto keep = [&](int& slots, int now) { slots = slots > 0 ? std::min(slots, now) : now; };
    (keep(slots_[I], sms_ * prepare<typename detail::sparse24_tile_at<int(I), tiles_t>::type, XSrc>()), ...);
    keep(fallback_slots_, sms_ * prepare<fallback_tile, XSrc>());
  }
  template <class Tile>
  static std::size_t workspace_for(int slots) {
    using sdnn::detail::workspace_carver;
    return workspace_carver::bytes_of<int>(static_cast<std::size_t>(slots)) +
           workspace_carver::bytes_of<float>(static_cast<std::size_t>(slots) * Tile::bm * Tile::bn);
  }
  template <std::size_t... I>
  std::size_t workspace_all(std::index_sequence<I...>) const {
    std::size_t b = workspace_for<fallback_tile>(fallback_slots_);
    ((b = std::max(b, workspace_for<typename detail::sparse24_tile_at<int(I), tiles_t>::type>(slots_[I]))), ...);
    return b;
  }

  void build(sparse24_matrix<T> const& w, cuda_exec exec) {
    m_pad_ = (m_ + kernels::sparse24_m_align - 1) / kernels::sparse24_m_align * kernels::sparse24_m_align;
    k_pad_ = (k_ + kernels::sparse24_k_align - 1) / kernels::sparse24_k_align * kernels::sparse24_k_align;
    auto const kept = static_cast<std::size_t>(k_pad_ / 2);
    // Values: [m_pad x k_pad/2], row r's kept values first, zeros after (padding groups and rows).
    host_buffer<T> vals(static_cast<std::size_t>(m_pad_) * kept);  // value-initialised: zero bits
    for (std::int64_t r = 0; r < m_; ++r)
      std::copy(w.values().data() + r * w.kept_per_row(), w.values().data() + (r + 1) * w.kept_per_row(),
                vals.data() + static_cast<std::size_t>(r) * kept);
    // Metadata: [m_pad/16][k_pad/64][32 lanes] words in the mma.sp register layout
    // (kernels::sparse24_meta_lane); padding groups keep positions (0, 1) with zero values.
    std::int64_t const kb64 = k_pad_ / 64, groups = w.groups_per_row();
    host_buffer<std::uint32_t> words(static_cast<std::size_t>(m_pad_ / 16 * kb64 * 32));
    auto nib = [&](std::int64_t r, std::int64_t g) -> std::uint32_t {
      return r < m_ && g < groups ? w.nibble(r, g) : ::sdnn::detail::sparse24_nibble(0, 1);
    };
    for (std::int64_t mb = 0; mb < m_pad_ / 16; ++mb)
      for (std::int64_t kb = 0; kb < kb64; ++kb)
        for (int lane = 0; lane < 32; ++lane) {
          std::uint32_t v = 0;
          for (int c = 0; c < 4; ++c) {
            std::int64_t const g = kb * 16 + kernels::sparse24_meta_lane::group(lane, c);
            v |= nib(mb * 16 + kernels::sparse24_meta_lane::row(lane, 0), g) << (4 * c);
            v |= nib(mb * 16 + kernels::sparse24_meta_lane::row(lane, 1), g) << (16 + 4 * c);
          }
          words[static_cast<std::size_t>((mb * kb64 + kb) * 32 + lane)] = v;
        }
    values_ = to_device(vals.data(), vals.size(), exec);
    meta_ = to_device(words.data(), words.size(), exec);

    arch_ = ::sdnn::detail::current_arch();
    if (arch_ == arch{9, 0}) build_tma(std::make_index_sequence<n_tiles_kinds>{});  // the only GPUs running them
    sms_ = ::sdnn::detail::sm_count();
    prepare_all<kernels::tc_rows_x<T>>(std::make_index_sequence<n_tiles_kinds>{});
    ws_bytes_ = workspace_all(std::make_index_sequence<n_tiles_kinds>{});
    if (own_workspace_) {
      own_ = buffer<unsigned char, device_space>(ws_bytes_, exec);
      SDNN_CUDA_CHECK(cudaMemsetAsync(own_.data(), 0, ws_bytes_, exec.stream));  // the split counters
    }
  }

  // Tensor maps of W's values and metadata for the warp-specialized tiles (sparse24_tma_x).
  template <std::size_t... I>
  void build_tma(std::index_sequence<I...>) {
    (build_tma_one<I>(), ...);
  }
  template <std::size_t I>
  void build_tma_one() {
    using Tile = typename detail::sparse24_tile_at<int(I), tiles_t>::type;
    if constexpr (Tile::warp_specialized) {
      if (k_pad_ == 0) return;
      using ::sdnn::detail::make_tma_2d;
      tma_a_[I] = make_tma_2d(values_.data(), 2, std::uint64_t(m_pad_), std::uint64_t(k_pad_ / 2), std::uint64_t(k_pad_),
                              Tile::bm, Tile::bk / 2, CU_TENSOR_MAP_SWIZZLE_64B);
      tma_e_[I] = make_tma_2d(meta_.data(), 4, std::uint64_t(m_pad_ / 16), std::uint64_t(k_pad_ / 2),
                              std::uint64_t(k_pad_) * 2, Tile::bm / 16, Tile::bk / 2, CU_TENSOR_MAP_SWIZZLE_NONE);
    }
  }

  // Whether X can be read through a tensor map by the warp-specialized tiles: dense aligned rows, or
  // a convolution's NHWC input where a 64-column step lies in one tap (kernels::sparse24_im2col_channels).
  template <class XSrc>
  bool tma_operand(XSrc const& xs, std::int64_t n) const {
    if constexpr (std::is_same_v<XSrc, kernels::tc_rows_x<T>>) return xs.vec;
    else if constexpr (std::is_same_v<XSrc, kernels::tc_im2col_x<T>>)
      return kernels::im2col_tma_geometry(xs, n, k_, kernels::sparse24_im2col_channels).encodable();
    else {
      (void)xs;
      (void)n;
      return false;
    }
  }

  // index: the tile's place in the plan's list, -1 for the fallback tile.
  template <class Tile, class XSrc>
  void launch(detail::tile_tag<Tile>, XSrc const& xs, int index, cuda_exec exec, std::int64_t n, dense_view<Out> y,
              basic_epilogue<float> const& epi, workspace ws) const {
    int const slots = index >= 0 ? slots_[std::size_t(index)] : fallback_slots_;
    auto const sc = detail::sparse24_make_schedule(m_, n, static_cast<int>(k_), Tile::bm, Tile::bn, Tile::bk, slots,
                                                   split_target<Tile>(slots));
    kernels::sparse24_args a;
    a.values = values_.data();
    a.meta = meta_.data();
    a.y = y.data;
    a.y_ld = y.rows > 1 ? y.ld : y.cols;
    a.y_vec = kernels::staged_rows_vec(y.data, a.y_ld, sizeof(Out));
    a.m = static_cast<int>(m_);
    a.n = static_cast<int>(n);
    a.k = static_cast<int>(k_);
    a.k_pad = k_pad_;
    a.n_tiles = sc.n_tiles;
    a.full_tiles = sc.full_tiles;
    a.splits = sc.splits;
    a.k_tiles_per_split = sc.k_tiles_per_split;
    a.epi = epi;
    if (sc.splits > 1) {
      workspace const w = ::sdnn::detail::plan_workspace(ws, own_, ws_bytes_, "sparse24_linear_plan");
      ::sdnn::detail::workspace_carver cv(w);
      auto const slots_used = static_cast<std::size_t>(sc.tiles - sc.full_tiles);
      a.counters = cv.take<int>(static_cast<std::size_t>(slots));
      a.partial = cv.take<float>(static_cast<std::size_t>(slots) * Tile::bm * Tile::bn);
      SDNN_EXPECTS(a.counters && a.partial, "sparse24_linear_plan: workspace of ", w.bytes, " bytes, need ",
                   ws_bytes_);
      if (ws.data != nullptr)  // a caller's workspace: its counters start at zero only if we say so
        SDNN_CUDA_CHECK(cudaMemsetAsync(a.counters, 0, slots_used * sizeof(int), exec.stream));
    }
    // One launch for the operand op (the X operand itself, or tensor maps standing for it); the
    // shared-memory limit is raised again for this copy of the kernel (prepare() may be another
    // unit's copy).
    auto const go = [&](auto const& op) {
      constexpr int smem = kernels::sparse24_smem_bytes<Tile>();
      auto const fn = kernel<Tile, std::decay_t<decltype(op)>>();
      ::sdnn::detail::allow_dynamic_smem(fn, smem);
      fn<<<sc.units, Tile::threads, smem, exec.stream>>>(a, op);
      SDNN_CUDA_CHECK_LAUNCH();
    };
    if constexpr (Tile::warp_specialized && std::is_same_v<XSrc, kernels::tc_rows_x<T>>) {
      // Dense, 16-byte aligned X rows: the whole stage through tensor maps (one per run for X).
      if (xs.vec && index >= 0 && k_ > 0)
        return go(kernels::sparse24_tma_x{tma_a_[std::size_t(index)], tma_e_[std::size_t(index)],
                                          {::sdnn::detail::make_tma_2d(xs.x, 2, std::uint64_t(n), std::uint64_t(k_),
                                                                       std::uint64_t(xs.ldx) * 2, Tile::bn, Tile::bk,
                                                                       CU_TENSOR_MAP_SWIZZLE_128B)}});
    }
    if constexpr (Tile::warp_specialized && std::is_same_v<XSrc, kernels::tc_im2col_x<T>>) {
      // A convolution's input through an im2col map: a stage's BN output pixels x BK channels.
      static_assert(Tile::bk == kernels::sparse24_im2col_channels, "sparse24: an im2col step is one tap's channels");
      auto const geo = kernels::im2col_tma_geometry(xs, n, k_, kernels::sparse24_im2col_channels);
      if (geo.encodable() && index >= 0 && k_ > 0)
        return go(kernels::sparse24_tma<kernels::tc_tma_im2col_x>{
            tma_a_[std::size_t(index)], tma_e_[std::size_t(index)],
            kernels::make_tc_tma_im2col_x(xs, geo, Tile::bn, Tile::bk, CU_TENSOR_MAP_SWIZZLE_128B)});
    }
    go(xs);
  }

  std::int64_t m_ = 0, k_ = 0;
  int m_pad_ = 0, k_pad_ = 0;
  arch arch_{};
  int sms_ = 1;
  std::array<int, n_tiles_kinds> slots_{};  // resident CTAs of each tile on the whole GPU
  int fallback_slots_ = 0;
  bool own_workspace_ = true;
  std::size_t ws_bytes_ = 0;
  buffer<T, device_space> values_;            // [m_pad x k_pad/2]
  buffer<std::uint32_t, device_space> meta_;  // [m_pad/16][k_pad/64][32]
  buffer<unsigned char, device_space> own_;   // the plan's own workspace (plan_options::own_workspace)
  std::array<CUtensorMap, n_tiles_kinds> tma_a_{}, tma_e_{};  // warp-specialized tiles: W's values, metadata
  ::sdnn::detail::run_streams runs_;          // the streams its buffers wait for when released
};

}  // namespace sdnn::ops
