// sdnn/linear/op/csr_gather.cuh - ops::csr_gather_plan<T, Out>: Y[N x M] = epi(X[N x K] W^T) with
// W unstructured-sparse in packed CSR (formats/packed_csr.hpp), on the CUDA cores, for small
// batches: one launch of linear/kernel/csr_gather.cuh per 16 rows of X (each reads all of W again).
// It moves the fewest bytes of the unstructured paths from about 80 % sparsity on (4 per nonzero)
// and does a fused multiply-add per nonzero and row of X; the automatic layer runs it up to 16
// rows. Under the plan protocol of core/plan.hpp: the constructor checks,
// uploads on exec.stream and sizes the workspace; run() only enqueues.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "sdnn/core/arch.hpp"
#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/formats/packed_csr.hpp"
#include "sdnn/linear/kernel/csr_gather.cuh"
#include "sdnn/linear/op/tc_linear.hpp"

namespace sdnn::ops {

// The workspace holds the float partial sums of column ranges (K over what shared memory holds at
// a launch's width: over 12288 columns at 5-8 rows, over 4096 at 9-16 on an H100); none is needed
// otherwise. Runs on several streams at once need a workspace each (the caller's).
template <class T, class Out = T>
class csr_gather_plan {
  static_assert(is_16bit_float_v<T>, "csr_gather_plan: T must be sdnn::bf16 or sdnn::fp16");
  static_assert(std::is_same_v<Out, T> || std::is_same_v<Out, float>, "csr_gather_plan: Out must be T or float");
  static constexpr int warps = 32;     // per block, one block an SM
  static constexpr int rows_max = 16;  // rows of X a launch, at most (nb_max_: what this GPU holds)
  static constexpr int row_cost = 32;  // a row's fold and store, in nonzeros (the warps' balance)

 public:
  using value_type = T;
  using output_type = Out;

  // Refused: M over int32, K over 65536 (the entries' 16-bit columns), a GPU below sm_80.
  static plan_status can_implement(std::int64_t m, std::int64_t k, arch a = {}) {
    if (m < 0 || k < 0 || m > std::numeric_limits<std::int32_t>::max() || k > packed_csr_matrix<T>::max_cols)
      return plan_status::failure(::sdnn::detail::concat("csr_gather_plan: W is ", m, " x ", k,
                                                         "; M must be in [0, 2^31) and K in [0, ",
                                                         packed_csr_matrix<T>::max_cols, "] (16-bit columns)"));
    if (a.major != 0 && a < arch{8, 0})
      return plan_status::failure(
          ::sdnn::detail::concat("csr_gather_plan: needs sm_80 or newer; this GPU is sm_", a.sm()));
    return {};
  }

  csr_gather_plan(packed_csr_matrix<T> const& w, cuda_exec exec, plan_options opt = {})
      : m_(w.rows()), k_(w.cols()), nnz_(w.nnz()), runs_(exec) {
    ::sdnn::detail::implementable(can_implement(m_, k_, ::sdnn::detail::current_arch()), 0);
    panels_ = w.panels();
    int dev = 0, optin = 0;
    SDNN_CUDA_CHECK(cudaGetDevice(&dev));
    SDNN_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    // Per width NB = 1, 2, .. 16: the panels one block stages (none fits: that width is not used).
    for (int i = 0; (1 << i) <= rows_max; ++i) {
      std::int64_t const panel_bytes = packed_csr_matrix<T>::panel * (std::int64_t(1) << i) * 2;
      // (the zero column after the range: NB * 2 bytes more)
      range_panels_[i] = int(std::min<std::int64_t>(panels_, (optin - 64) / panel_bytes));
      if (range_panels_[i] >= 1) nb_max_ = 1 << i;
    }
    SDNN_EXPECTS(nb_max_ >= 1, "csr_gather_plan: this GPU's ", optin,
                 " bytes of shared memory a block hold no 4096-column panel");
    blocks_ = ::sdnn::detail::sm_count();
    for (int i = 0; (1 << i) <= nb_max_; ++i) {
      int const ranges = ranges_of(1 << i);
      if (ranges > 1) ws_bytes_ = std::max(ws_bytes_, std::size_t(ranges) * std::size_t(1 << i) * std::size_t(m_) * 4);
    }
    // Each warp a contiguous run of rows of about equal cost (nonzeros + row_cost a row).
    std::int64_t const n_warps = std::int64_t(blocks_) * warps;
    std::vector<std::int32_t> wr(static_cast<std::size_t>(n_warps + 1), static_cast<std::int32_t>(m_));
    auto const& st = w.starts();
    auto cost_to = [&](std::int64_t r) { return double(st[std::size_t(r * panels_)]) + double(row_cost) * double(r); };
    double const total = cost_to(m_);
    std::int64_t r = 0;
    for (std::int64_t i = 0; i < n_warps; ++i) {
      double const goal = total * double(i) / double(n_warps);
      while (r < m_ && cost_to(r) < goal) ++r;
      wr[std::size_t(i)] = static_cast<std::int32_t>(r);
    }
    cuda_exec const own = runs_.owned(exec);
    std::vector<std::uint32_t> ent = w.entries();
    ent.resize((ent.size() + 3) / 4 * 4 + 4, 0u);  // 16-byte loads of 4-aligned groups; never empty
    entries_ = to_device(ent.data(), ent.size(), own);
    starts_ = to_device(st.data(), st.size(), own);
    warp_rows_ = to_device(wr.data(), wr.size(), own);
    if (opt.own_workspace && ws_bytes_ > 0) own_ws_ = buffer<unsigned char, device_space>(ws_bytes_, own);
    // (to_device stages pageable copies before it returns: ent and wr may go)
  }
  csr_gather_plan(dense_view<T const> w, cuda_exec exec, plan_options opt = {})
      : csr_gather_plan(checked(w), exec, opt) {}
  csr_gather_plan(csr_gather_plan&&) noexcept = default;
  csr_gather_plan& operator=(csr_gather_plan&&) noexcept = default;

  std::int64_t out_features() const noexcept { return m_; }
  std::int64_t in_features() const noexcept { return k_; }
  std::int64_t nnz() const noexcept { return nnz_; }
  std::size_t workspace_bytes() const noexcept { return ws_bytes_; }
  std::size_t weight_bytes() const noexcept { return std::size_t(nnz_) * 4 + starts_.size() * 4; }
  std::string describe(std::int64_t n = 0) const {
    std::string d = ::sdnn::detail::concat("csr_gather_plan<", value_type_name<T>(), " -> ", value_type_name<Out>(),
                                           ">: W ", m_, " x ", k_, ", ", nnz_, " nonzeros in packed CSR, ",
                                           weight_bytes(), " bytes on the device; ", blocks_, " blocks of ", warps,
                                           " warps; workspace ", ws_bytes_, " bytes");
    if (n > 0) {
      int const nb = width_of(std::min<std::int64_t>(n, nb_max_));
      d += ::sdnn::detail::concat("; N = ", n, ": ", (n + nb_max_ - 1) / nb_max_, " launch(es), ", ranges_of(nb),
                                  " column range(s) at ", nb, " rows");
    }
    return d;
  }

  // y = epi(x W^T) on exec.stream; epi.bias: device memory, M floats. Any N (in launches of 16
  // rows, fewer where shared memory holds no panel that wide), any leading dimensions and alignment
  // of the element types.
  void run(cuda_exec exec, dense_view<T const> x, dense_view<Out> y, basic_epilogue<float> const& epi = {},
           workspace ws = {}) const {
    detail::check_tc_run("csr_gather_plan", m_, k_, x, y);
    runs_.note(exec);
    if (x.rows == 0 || m_ == 0) return;
    std::int64_t const ldx = x.rows > 1 ? x.ld : x.cols, ldy = y.rows > 1 ? y.ld : y.cols;
    kernels::csr_gather_args a;
    a.entries = entries_.data();
    a.starts = starts_.data();
    a.warp_rows = warp_rows_.data();
    a.ldx = ldx;
    a.ldy = ldy;
    a.y_float = std::is_same_v<Out, float>;
    a.m = static_cast<std::int32_t>(m_);
    a.k = static_cast<std::int32_t>(k_);
    a.panels = static_cast<std::int32_t>(panels_);
    a.epi = epi;
    // The first launch is the widest: it needs the most column ranges.
    float* const partial =
        ranges_of(width_of(std::min<std::int64_t>(nb_max_, x.rows))) > 1
            ? static_cast<float*>(::sdnn::detail::plan_workspace(ws, own_ws_, ws_bytes_, "csr_gather_plan").data)
            : nullptr;
    for (std::int64_t r0 = 0; r0 < x.rows; r0 += nb_max_) {
      std::int64_t const rows = std::min<std::int64_t>(nb_max_, x.rows - r0);
      int const nb = width_of(rows);
      int const ranges = ranges_of(nb);
      a.x = reinterpret_cast<std::uint16_t const*>(x.data + r0 * ldx);
      a.y = y.data + r0 * ldy;
      a.n = static_cast<std::int32_t>(rows);
      a.range_panels = range_panels_[log2_of(nb)];
      a.partial = ranges > 1 ? partial : nullptr;
      launch(nb, ranges, a, exec);
      if (ranges > 1) {
        unsigned const fb = static_cast<unsigned>((rows * m_ + 255) / 256);
        kernels::csr_gather_finish<T><<<fb, 256, 0, exec.stream>>>(a, ranges);
        SDNN_CUDA_CHECK_LAUNCH();
      }
    }
  }

 private:
  static packed_csr_matrix<T> checked(dense_view<T const> w) {
    ::sdnn::detail::implementable(can_implement(w.rows, w.cols), 0);
    return packed_csr_from_dense(w);
  }
  static int log2_of(int nb) { return nb <= 1 ? 0 : nb <= 2 ? 1 : nb <= 4 ? 2 : nb <= 8 ? 3 : 4; }
  // The launch width for rows <= nb_max_ rows (run() cuts a batch so): the next power of two.
  int width_of(std::int64_t rows) const { return std::min(nb_max_, 1 << log2_of(int(rows))); }
  int ranges_of(int nb) const {
    int const rp = range_panels_[log2_of(nb)];
    return int((panels_ + rp - 1) / rp);
  }
  std::size_t smem_of(int nb) const {
    std::int64_t const cols =
        std::min<std::int64_t>(k_, std::int64_t(range_panels_[log2_of(nb)]) * packed_csr_matrix<T>::panel);
    return std::size_t(cols + 1) * std::size_t(nb) * 2;  // and the zero column
  }
  template <int NB>
  void launch_nb(int ranges, kernels::csr_gather_args const& a, cuda_exec exec) const {
    auto const kern = kernels::csr_gather_kernel<T, NB, warps>;
    std::size_t const smem = smem_of(NB);
    ::sdnn::detail::allow_dynamic_smem(kern, smem);
    kern<<<dim3(unsigned(blocks_), unsigned(ranges)), warps * 32, smem, exec.stream>>>(a);
    SDNN_CUDA_CHECK_LAUNCH();
  }
  void launch(int nb, int ranges, kernels::csr_gather_args const& a, cuda_exec exec) const {
    switch (nb) {
      case 1: return launch_nb<1>(ranges, a, exec);
      case 2: return launch_nb<2>(ranges, a, exec);
      case 4: return launch_nb<4>(ranges, a, exec);
      case 8: return launch_nb<8>(ranges, a, exec);
      default: return launch_nb<16>(ranges, a, exec);
    }
  }

  std::int64_t m_ = 0, k_ = 0, nnz_ = 0, panels_ = 1;
  int range_panels_[5] = {0, 0, 0, 0, 0};
  int nb_max_ = 0, blocks_ = 1;
  std::size_t ws_bytes_ = 0;
  buffer<std::uint32_t, device_space> entries_, starts_;
  buffer<std::int32_t, device_space> warp_rows_;
  buffer<unsigned char, device_space> own_ws_;
  ::sdnn::detail::run_streams runs_;
};

}  // namespace sdnn::ops
