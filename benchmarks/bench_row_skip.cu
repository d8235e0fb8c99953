// bench_row_skip: empty-row skipping for dense and sparse products.
//   dense:  C = A * B with a fraction of A's rows all zero; sdnn tiled GEMM without
//           skipping vs skip_empty_rows_mask (per-row counts) vs skip_empty_rows_compact
//           (cub::DevicePartition live rows + epilogue fill of empty rows); the skip
//           forms' timings INCLUDE computing A's row counts and the partition every call
//           (A is an activation that changes per call). cuBLAS SGEMM on the same A is the
//           vendor baseline (it cannot skip).
//   sparse: CSR A (90 % sparse) with a fraction of empty rows: row-split vs the compacted
//           live-row list (plan-time partition; weights are static) vs cuSPARSE.
//   dense x sparse (the DNN case Y * W): Y with a fraction of dead (all-zero) rows times a
//           90 %-sparse W in CSC: kernels::dense_csc_spmm over all rows vs over the live
//           rows, the partition of Y recomputed every call.
// Axes: empty-row fraction {0, 50, 90, 99} %, sizes 4096 and 8192 (--quick: 4096, 0/90 %).
// Output: Google Benchmark (--benchmark_out) and JSON lines with time, GFLOP/s of the
// useful work, the speedup over the same kernel without skipping and the ratio to the
// vendor ($SDNN_BENCH_JSON or stdout).
#include "bench_util.cuh"

#include <sdnn/sdnn.hpp>
#include <sdnn/linear/op/gemm.cuh>
#include <sdnn/linear/op/spmm.cuh>

#include <cmath>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace sdnn;

namespace {
using sdnn_bench::stream;
using sdnn_bench::utc_time;
bool g_quick = false;
std::map<std::string, double> g_plain, g_vendor;


struct dense_problem {
  std::int64_t n = 0;
  double empty = -1;
  buffer<float, device_space> a, b, c;
};
dense_problem& dense(std::int64_t n, double empty) {
  static dense_problem p;
  if (p.n != n || p.empty != empty) {
    cuda_exec e{stream()};
    p = dense_problem{};
    p.n = n, p.empty = empty;
    std::vector<float> h(static_cast<std::size_t>(n * n));
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> v(-3, 3);
    std::uniform_real_distribution<double> u(0, 1);
    for (std::int64_t i = 0; i < n; ++i) {
      bool const dead = u(rng) < empty;
      for (std::int64_t j = 0; j < n; ++j) h[i * n + j] = dead ? 0.f : static_cast<float>(v(rng) | 1);
    }
    p.a = buffer<float, device_space>(h.size(), e);
    p.b = buffer<float, device_space>(h.size(), e);
    p.c = buffer<float, device_space>(h.size(), e);
    SDNN_CUDA_CHECK(cudaMemcpyAsync(p.a.data(), h.data(), h.size() * 4, cudaMemcpyHostToDevice, e.stream));
    for (auto& x : h) x = static_cast<float>(v(rng));
    SDNN_CUDA_CHECK(cudaMemcpyAsync(p.b.data(), h.data(), h.size() * 4, cudaMemcpyHostToDevice, e.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
  }
  return p;
}

// `group` names the kernel a skipping variant is compared with: its no-skip timing is
// stored under (cfg, group) by the variant registered with plain = true.
void emit(benchmark::State& st, char const* family, std::string const& cfg, std::string const& kernel, double t,
          double flops, std::int64_t m, std::int64_t k, std::int64_t n, double empty, double sparsity, bool vendor,
          bool plain, std::string const& group = "") {
  st.counters["GFLOPs"] = flops / t * 1e-9;
  std::string const pkey = cfg + "#" + group;
  if (vendor) g_vendor[cfg] = t;
  if (plain) g_plain[pkey] = t;
  sdnn_bench::json_line j(family);
  j.str("utc", utc_time()).str("config", cfg).str("kernel", kernel).str("value_type", "float");
  j.num("m", m).num("k", k).num("n", n).num("empty_rows", empty).num("sparsity", sparsity);
  j.num("vendor", vendor ? 1 : 0).num("time_ms", t * 1e3).num("gflops", flops / t * 1e-9);
  if (!vendor && g_vendor.count(cfg)) {
    j.num("baseline_ms", g_vendor[cfg] * 1e3).num("speedup_vs_vendor", g_vendor[cfg] / t);
    st.counters["x_vendor"] = g_vendor[cfg] / t;
  }
  if (!vendor && !plain && g_plain.count(pkey)) {
    j.num("speedup_vs_no_skip", g_plain[pkey] / t).str("no_skip_kernel", group.empty() ? "default" : group);
    st.counters["x_noskip"] = g_plain[pkey] / t;
  }
  j.emit();
}

template <class Policy>
void reg_dense(std::int64_t n, double empty, std::string const& name, bool vendor, bool plain,
               std::string const& group = "") {
  std::string const cfg = "gemm/n" + std::to_string(n) + "/empty" + std::to_string(static_cast<int>(empty * 100 + .5));
  benchmark::RegisterBenchmark((cfg + "/" + name).c_str(), [=](benchmark::State& st) {
    auto& p = dense(n, empty);
    cuda_exec e{stream()};
    dense_view<float const> a{n, n, n, p.a.data()}, b{n, n, n, p.b.data()};
    dense_view<float> c{n, n, n, p.c.data()};
    double const t =
        sdnn_bench::run_manual(st, [&] { ops::gemm(e, Policy{}, a, b, c, epilogue_none<float>()); }, e.stream, 5);
    emit(st, "row_skip", cfg, name, t, 2.0 * n * n * n * (1.0 - empty), n, n, n, empty, 0, vendor, plain, group);
  })->UseManualTime()->Iterations(3)->Unit(benchmark::kMicrosecond);
}

struct sparse_problem {
  double empty = -1;
  std::unique_ptr<csr_matrix<float, int, device_space>> a;  // device containers need a stream
  buffer<float, device_space> b, c;
};
constexpr std::int64_t sp_m = 4096, sp_k = 4096, sp_n = 1024;
sparse_problem& sparse(double empty) {
  static sparse_problem p;
  if (p.empty != empty) {
    cuda_exec e{stream()};
    p = sparse_problem{};
    p.empty = empty;
    std::mt19937_64 rng(9);
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<int> rp{0}, ci;
    double const lq = std::log1p(-0.1);  // 90 % sparse live rows
    for (std::int64_t i = 0; i < sp_m; ++i) {
      if (u(rng) >= empty)
        for (std::int64_t j = static_cast<std::int64_t>(std::log(1 - u(rng)) / lq); j < sp_k;
             j += 1 + static_cast<std::int64_t>(std::log(1 - u(rng)) / lq))
          ci.push_back(static_cast<int>(j));
      rp.push_back(static_cast<int>(ci.size()));
    }
    std::vector<float> v(ci.size(), 1.f);
    p.a = std::make_unique<csr_matrix<float, int, device_space>>(static_cast<int>(sp_m), static_cast<int>(sp_k),
                                                                 static_cast<int>(ci.size()), e);
    SDNN_CUDA_CHECK(cudaMemcpyAsync(p.a->row_ptr().data(), rp.data(), rp.size() * 4, cudaMemcpyHostToDevice, e.stream));
    if (!ci.empty()) {
      SDNN_CUDA_CHECK(cudaMemcpyAsync(p.a->col_idx().data(), ci.data(), ci.size() * 4, cudaMemcpyHostToDevice, e.stream));
      SDNN_CUDA_CHECK(cudaMemcpyAsync(p.a->values().data(), v.data(), v.size() * 4, cudaMemcpyHostToDevice, e.stream));
    }
    std::vector<float> hb(static_cast<std::size_t>(sp_k * sp_n), 1.f);
    p.b = buffer<float, device_space>(hb.size(), e);
    p.c = buffer<float, device_space>(static_cast<std::size_t>(sp_m * sp_n), e);
    SDNN_CUDA_CHECK(cudaMemcpyAsync(p.b.data(), hb.data(), hb.size() * 4, cudaMemcpyHostToDevice, e.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
  }
  return p;
}

template <class Policy>
void reg_sparse(double empty, std::string const& name, bool vendor, bool plain) {
  std::string const cfg = "csr90/m4096k4096n1024/empty" + std::to_string(static_cast<int>(empty * 100 + .5));
  benchmark::RegisterBenchmark((cfg + "/" + name).c_str(), [=](benchmark::State& st) {
    auto& p = sparse(empty);
    cuda_exec e{stream()};
    dense_view<float const> b{sp_k, sp_n, sp_n, p.b.data()};
    dense_view<float> c{sp_m, sp_n, sp_n, p.c.data()};
    ops::csr_spmm_plan<Policy, float, int> plan(p.a->view(), b, c, e);
    double const t = sdnn_bench::run_manual(st, [&] { plan.run(e, b, c, epilogue_none<float>()); }, e.stream, 10);
    emit(st, "row_skip", cfg, name, t, 2.0 * p.a->nnz() * sp_n, sp_m, sp_k, sp_n, empty, 0.9, vendor, plain);
  })->UseManualTime()->Iterations(3)->Unit(benchmark::kMicrosecond);
}
// Dense x sparse, the DNN case Y * W: Y (4096 inputs x 4096 features) has a fraction of
// all-zero rows (dead inputs), W (4096 x 4096, 90 % sparse) is given in CSC. The no-skip
// form runs kernels::dense_csc_spmm over every row; the skip form computes Y's row counts
// and the live/empty partition EVERY call (Y is an activation), runs the same kernel over
// the live-row list and writes epi(0) into the empty rows.
struct dense_sparse_problem {
  double empty = -1;
  std::unique_ptr<csr_matrix<float, int, device_space>> wt;  // W^T as CSR = W in CSC
  buffer<float, device_space> y, c;
};
constexpr std::int64_t ds_m = 4096, ds_k = 4096, ds_n = 4096;
dense_sparse_problem& dense_sparse(double empty) {
  static dense_sparse_problem p;
  if (p.empty != empty) {
    cuda_exec e{stream()};
    p = dense_sparse_problem{};
    p.empty = empty;
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<int> rp{0}, ci;
    double const lq = std::log1p(-0.1);
    for (std::int64_t i = 0; i < ds_n; ++i) {
      for (std::int64_t j = static_cast<std::int64_t>(std::log(1 - u(rng)) / lq); j < ds_k;
           j += 1 + static_cast<std::int64_t>(std::log(1 - u(rng)) / lq))
        ci.push_back(static_cast<int>(j));
      rp.push_back(static_cast<int>(ci.size()));
    }
    std::vector<float> v(ci.size(), 1.f);
    p.wt = std::make_unique<csr_matrix<float, int, device_space>>(static_cast<int>(ds_n), static_cast<int>(ds_k),
                                                                  static_cast<int>(ci.size()), e);
    SDNN_CUDA_CHECK(cudaMemcpyAsync(p.wt->row_ptr().data(), rp.data(), rp.size() * 4, cudaMemcpyHostToDevice, e.stream));
    SDNN_CUDA_CHECK(cudaMemcpyAsync(p.wt->col_idx().data(), ci.data(), ci.size() * 4, cudaMemcpyHostToDevice, e.stream));
    SDNN_CUDA_CHECK(cudaMemcpyAsync(p.wt->values().data(), v.data(), v.size() * 4, cudaMemcpyHostToDevice, e.stream));
    std::vector<float> hy(static_cast<std::size_t>(ds_m * ds_k));
    std::uniform_int_distribution<int> val(-3, 3);
    for (std::int64_t i = 0; i < ds_m; ++i) {
      bool const dead = u(rng) < empty;
      for (std::int64_t j = 0; j < ds_k; ++j) hy[i * ds_k + j] = dead ? 0.f : static_cast<float>(val(rng) | 1);
    }
    p.y = buffer<float, device_space>(hy.size(), e);
    p.c = buffer<float, device_space>(static_cast<std::size_t>(ds_m * ds_n), e);
    SDNN_CUDA_CHECK(cudaMemcpyAsync(p.y.data(), hy.data(), hy.size() * 4, cudaMemcpyHostToDevice, e.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
  }
  return p;
}

void reg_dense_sparse(double empty, bool skip) {
  std::string const cfg =
      "dense_x_csc90/m4096k4096n4096/empty" + std::to_string(static_cast<int>(empty * 100 + .5));
  std::string const name = skip ? "sdnn_dense_csc_skip_compact" : "sdnn_dense_csc_no_skip";
  benchmark::RegisterBenchmark((cfg + "/" + name).c_str(), [=](benchmark::State& st) {
    auto& p = dense_sparse(empty);
    cuda_exec e{stream()};
    dense_view<float const> y{ds_m, ds_k, ds_k, p.y.data()};
    dense_view<float> c{ds_m, ds_n, ds_n, p.c.data()};
    auto const epi = epilogue_none<float>();
    double const t = sdnn_bench::run_manual(
        st,
        [&] {
          if (skip) {
            ops::row_skip_plan<int> rows(y, e);
            kernels::dense_csc_spmm(y, p.wt->view(), c, epi, rows.row_list(), rows.num_live(), static_cast<int>(ds_m),
                                    e);
            rows.fill_empty_rows(c, epi, e);
          } else {
            kernels::dense_csc_spmm(y, p.wt->view(), c, epi, static_cast<int const*>(nullptr),
                                    static_cast<int const*>(nullptr), static_cast<int>(ds_m), e);
          }
        },
        e.stream, 10);
    emit(st, "row_skip", cfg, name, t, 2.0 * p.wt->nnz() * ds_m * (1.0 - empty), ds_m, ds_k, ds_n, empty, 0.9,
         false, !skip, "dense_csc");
  })->UseManualTime()->Iterations(3)->Unit(benchmark::kMicrosecond);
}
}  // namespace

int main(int argc, char** argv) {
  g_quick = sdnn_bench::take_flag(argc, argv, "--quick");
  std::vector<double> fr = g_quick ? std::vector<double>{0.0, 0.9} : std::vector<double>{0.0, 0.5, 0.9, 0.99};
  std::vector<std::int64_t> sizes = g_quick ? std::vector<std::int64_t>{4096} : std::vector<std::int64_t>{4096, 8192};
  for (auto n : sizes)
    for (double f : fr) {
      reg_dense<policy::cublas_gemm>(n, f, "cublas_sgemm", true, false);
      reg_dense<policy::tiled_gemm<>>(n, f, "sdnn_tiled_no_skip", false, true);
      reg_dense<policy::skip_empty_rows_mask<policy::tiled_gemm<>>>(n, f, "sdnn_tiled_skip_mask", false, false);
      reg_dense<policy::skip_empty_rows_compact<policy::tiled_gemm<>>>(n, f, "sdnn_tiled_skip_compact", false, false);
      reg_dense<policy::tiled_gemm<64, 64, 8>>(n, f, "sdnn_tiled64_no_skip", false, true, "tiled64");
      reg_dense<policy::skip_empty_rows_compact<policy::tiled_gemm<64, 64, 8>>>(n, f, "sdnn_tiled64_skip_compact",
                                                                                false, false, "tiled64");
      reg_dense<policy::automatic>(n, f, "sdnn_automatic", false, false);
    }
  for (double f : fr) {
    reg_sparse<policy::cusparse_spmm<policy::cusparse_alg::csr_alg2>>(f, "cusparse_csr_alg2", true, false);
    reg_sparse<policy::csr_row_split<>>(f, "sdnn_csr_row_split_no_skip", false, true);
    reg_sparse<policy::skip_empty_rows_compact<policy::csr_row_split<>>>(f, "sdnn_csr_skip_compact", false, false);
    reg_sparse<policy::csr_nnz_balanced<>>(f, "sdnn_csr_nnz_balanced", false, false);
    reg_sparse<policy::csr_staged_b<>>(f, "sdnn_csr_staged_b", false, false);
    reg_sparse<policy::automatic>(f, "sdnn_automatic", false, false);
  }
  for (double f : fr) {
    reg_dense_sparse(f, false);
    reg_dense_sparse(f, true);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
