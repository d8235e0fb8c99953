// bench_spmm: sparse x dense products C[M x N] = A_sparse[M x K] * B[K x N] (identity
// epilogue, so the vendor baselines need no extra pass) for every sdnn SpMM policy and
// every cuSPARSE algorithm that accepts the problem, timed in the same process; plus the
// dense x sparse DNN case Y[N x K] * W[K x M] (dense_csc vs cuSPARSE).
//
// Axes: M = K in {1024, 2048, 4096, 8192}, N = 1024 activations, sparsity in {0, 50, 80,
// 90, 95, 99} % (uniform random, Bernoulli per element), value type float / __half, and a
// block-sparse matrix (dense 32 x 32 tiles, 10 % of tiles occupied) for the tiled-dense
// kernel and its vendor counterpart, cuSPARSE Blocked-ELL. B rotates over enough copies
// to exceed twice the L2 cache, so every call streams B from device memory as a fresh
// activation would be.
//
// Output: Google Benchmark (use --benchmark_out=FILE --benchmark_out_format=json) and one
// JSON line per (config, kernel) with GFLOP/s (2 * nnz * N useful flops), time and the
// ratio to the fastest cuSPARSE algorithm of the same config ($SDNN_BENCH_JSON or stdout).
// --quick: M = K = 4096, sparsity 90 and 99 %, float only.
#include "bench_util.cuh"

#include <sdnn/sdnn.hpp>
#include <sdnn/linear/op/spmm.cuh>
#include <sdnn/linear/op/dense_sparse.cuh>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace sdnn;

namespace {
using sdnn_bench::stream;
using sdnn_bench::utc_time;

bool g_quick = false;


template <class T>
char const* type_name() { return std::is_same_v<T, float> ? "float" : "half"; }

// One problem instance on the device, built once per config and shared by its kernels.
template <class T>
struct problem {
  std::int64_t m, k, n;
  double sparsity;
  bool blocks;
  // Device containers need a stream to exist, so they are built in make_problem().
  std::unique_ptr<csr_matrix<T, int, device_space>> a;
  std::unique_ptr<coo_matrix<T, int, device_space>> coo;
  std::unique_ptr<ell_matrix<T, int, device_space>> ell;
  std::unique_ptr<tiled_dense_matrix<T, device_space>> tiled;
  std::vector<buffer<T, device_space>> b;  // rotating copies of B
  buffer<T, device_space> c;
  std::size_t turn = 0;

  dense_view<T const> bview() { return {k, n, n, b[turn].data()}; }
  dense_view<T> cview() { return {m, n, n, c.data()}; }
  void rotate() { turn = (turn + 1) % b.size(); }
};

template <class T>
std::shared_ptr<problem<T>> make_problem(std::int64_t m, std::int64_t k, std::int64_t n, double sparsity, bool blocks,
                                         cuda_exec e) {
  auto p = std::make_shared<problem<T>>();
  p->m = m, p->k = k, p->n = n, p->sparsity = sparsity, p->blocks = blocks;
  std::mt19937_64 rng(42 + m + static_cast<std::uint64_t>(sparsity * 1000));
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<int> rp{0}, ci;
  std::vector<float> v;
  double const density = 1.0 - sparsity;
  std::vector<char> tile_on;
  std::int64_t const gc = (k + 31) / 32;
  if (blocks) {
    tile_on.resize(static_cast<std::size_t>(((m + 31) / 32) * gc));
    for (auto& t : tile_on) t = u(rng) < density;
  }
  ci.reserve(static_cast<std::size_t>(density * m * k * 1.01) + 16);
  for (std::int64_t i = 0; i < m; ++i) {
    if (blocks) {
      for (std::int64_t j = 0; j < k; ++j)
        if (tile_on[(i / 32) * gc + j / 32]) ci.push_back(static_cast<int>(j)), v.push_back(float(1 + (i + j) % 3));
    } else if (density >= 1.0) {
      for (std::int64_t j = 0; j < k; ++j) ci.push_back(static_cast<int>(j)), v.push_back(float(1 + (i + j) % 3));
    } else {
      // Geometric skips: one draw per nonzero instead of one per element.
      double const lq = std::log1p(-density);
      for (std::int64_t j = static_cast<std::int64_t>(std::log(1 - u(rng)) / lq); j < k;
           j += 1 + static_cast<std::int64_t>(std::log(1 - u(rng)) / lq))
        ci.push_back(static_cast<int>(j)), v.push_back(float(1 + (i + j) % 3));
    }
    rp.push_back(static_cast<int>(ci.size()));
  }
  int const nnz = static_cast<int>(ci.size());
  csr_matrix<float, int> h(static_cast<int>(m), static_cast<int>(k), nnz);
  std::copy(rp.begin(), rp.end(), h.row_ptr().begin());
  std::copy(ci.begin(), ci.end(), h.col_idx().begin());
  std::copy(v.begin(), v.end(), h.values().begin());
  auto up = [&](auto const& hb, auto& db) {
    using U = typename std::decay_t<decltype(db)>::value_type;
    std::vector<U> t(hb.size());
    for (std::size_t i = 0; i < hb.size(); ++i) t[i] = value_cast<U>(hb[i]);
    db = buffer<U, device_space>(t.size(), e);
    if (!t.empty()) SDNN_CUDA_CHECK(cudaMemcpyAsync(db.data(), t.data(), t.size() * sizeof(U), cudaMemcpyHostToDevice, e.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
  };
  p->a = std::make_unique<csr_matrix<T, int, device_space>>(h.rows(), h.cols(), nnz, e);
  up(h.row_ptr(), p->a->row_ptr());
  up(h.col_idx(), p->a->col_idx());
  up(h.values(), p->a->values());
  auto const hc = to_coo(h);
  p->coo = std::make_unique<coo_matrix<T, int, device_space>>(h.rows(), h.cols(), nnz, e);
  up(hc.row_idx(), p->coo->row_idx());
  up(hc.col_idx(), p->coo->col_idx());
  up(hc.values(), p->coo->values());
  if (sparsity >= 0.9 || blocks) {  // ELL/tiled only where their storage stays reasonable
    auto const he = to_ell(h);
    p->ell = std::make_unique<ell_matrix<T, int, device_space>>(he.rows(), he.cols(), he.width(), he.nnz(), e);
    up(he.col_idx(), p->ell->col_idx());
    up(he.values(), p->ell->values());
  }
  if (blocks) {
    auto const ht = to_tiled_dense(h, 32, 32);
    p->tiled = std::make_unique<tiled_dense_matrix<T, device_space>>(ht.rows(), ht.cols(), 32, 32, e);
    up(ht.values(), p->tiled->values());
    up(ht.occupied(), p->tiled->occupied());
    up(ht.tile_row_ptr(), p->tiled->tile_row_ptr());
    up(ht.tile_col(), p->tiled->tile_col());
  }
  int dev = 0, l2 = 0;
  SDNN_CUDA_CHECK(cudaGetDevice(&dev));
  SDNN_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  std::size_t const bbytes = static_cast<std::size_t>(k * n) * sizeof(T);
  std::size_t const copies = std::min<std::size_t>(8, std::max<std::size_t>(1, (2 * static_cast<std::size_t>(l2)) / bbytes + 1));
  std::vector<float> hb(static_cast<std::size_t>(k * n));
  std::mt19937 r2(7);
  std::uniform_int_distribution<int> bv(-3, 3);
  for (auto& x : hb) x = static_cast<float>(bv(r2));
  for (std::size_t i = 0; i < copies; ++i) {
    buffer<T, device_space> d;
    up(hb, d);
    p->b.push_back(std::move(d));
  }
  p->c = buffer<T, device_space>(static_cast<std::size_t>(m * n), e);
  SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
  return p;
}

std::map<std::string, double> g_vendor_best;     // config -> fastest cuSPARSE seconds
std::map<std::string, std::string> g_vendor_name;  // config -> its algorithm


// Keeps only the current config's problem alive (device memory).
template <class T>
std::shared_ptr<problem<T>> get_problem(std::int64_t m, std::int64_t k, std::int64_t n, double sp, bool blocks) {
  static std::shared_ptr<problem<T>> cur;
  if (!cur || cur->m != m || cur->k != k || cur->n != n || cur->sparsity != sp || cur->blocks != blocks) {
    cur.reset();
    cur = make_problem<T>(m, k, n, sp, blocks, cuda_exec{stream()});
  }
  return cur;
}

std::string config_name(char const* tn, std::int64_t m, std::int64_t k, std::int64_t n, double sp, bool blocks,
                        char const* kind) {
  return std::string(kind) + "/" + tn + "/m" + std::to_string(m) + "k" + std::to_string(k) + "n" + std::to_string(n) +
         "/sp" + std::to_string(static_cast<int>(sp * 100 + 0.5)) + (blocks ? "/blocks32" : "");
}

// Times `run` (which must enqueue one product on stream()) and reports it.
template <class T>
void report(benchmark::State& st, std::string const& cfg, std::string const& kernel, bool vendor, problem<T>& p,
            std::int64_t nnz, std::function<void()> const& run) {
  cudaStream_t s = stream();
  double const t = sdnn_bench::run_manual(st, [&] { run(); p.rotate(); }, s, 10);
  double const flops = 2.0 * static_cast<double>(nnz) * static_cast<double>(p.n);
  st.counters["GFLOPs"] = flops / t * 1e-9;
  if (vendor) {
    auto it = g_vendor_best.find(cfg);
    if (it == g_vendor_best.end() || t < it->second) g_vendor_best[cfg] = t, g_vendor_name[cfg] = kernel;
  }
  sdnn_bench::json_line j("spmm");
  j.str("utc", utc_time()).str("config", cfg).str("kernel", kernel).str("value_type", type_name<T>());
  j.num("m", p.m).num("k", p.k).num("n", p.n).num("nnz", nnz).num("sparsity", p.sparsity);
  j.num("blocks", p.blocks ? 1 : 0).num("vendor", vendor ? 1 : 0).num("time_ms", t * 1e3);
  j.num("gflops", flops / t * 1e-9);
  auto it = g_vendor_best.find(cfg);
  if (!vendor && it != g_vendor_best.end()) {
    j.str("baseline", g_vendor_name[cfg]).num("baseline_ms", it->second * 1e3).num("speedup_vs_vendor", it->second / t);
    st.counters["x_vendor"] = it->second / t;
  }
  j.emit();
}

template <class T>
void register_config(std::int64_t mk, std::int64_t n, double sp, bool blocks) {
  std::string const cfg = config_name(type_name<T>(), mk, mk, n, sp, blocks, "csr");
  using policy::cusparse_alg;
  // Vendor first, so our kernels can report the ratio to the fastest algorithm.
  std::vector<cusparse_alg> csr_algs{cusparse_alg::default_alg, cusparse_alg::csr_alg1, cusparse_alg::csr_alg2,
                                     cusparse_alg::csr_alg3};
  std::vector<cusparse_alg> coo_algs{cusparse_alg::coo_alg1, cusparse_alg::coo_alg2, cusparse_alg::coo_alg3,
                                     cusparse_alg::coo_alg4};
  for (bool coo : {false, true}) {
    for (auto alg : coo ? coo_algs : csr_algs) {
      if (g_quick && coo && alg != cusparse_alg::coo_alg4) continue;
      std::string const name = std::string("cusparse_") + (coo ? "coo_" : "csr_") + vendor::name_of(alg);
      benchmark::RegisterBenchmark((cfg + "/" + name).c_str(), [=](benchmark::State& st) {
        auto p = get_problem<T>(mk, mk, n, sp, blocks);
        cuda_exec e{stream()};
        // Row-major first (sdnn's layout); algorithms that need column-major are timed so.
        for (bool colmajor : {false, true}) {
          try {
            std::unique_ptr<vendor::cusparse_spmm_plan<T, int>> plan;
            if (coo)
              plan = std::make_unique<vendor::cusparse_spmm_plan<T, int>>(p->coo->view(), p->bview(), p->cview(), alg, e,
                                                                          colmajor);
            else
              plan = std::make_unique<vendor::cusparse_spmm_plan<T, int>>(p->a->view(), p->bview(), p->cview(), alg, e,
                                                                          colmajor);
            plan->run(p->bview(), p->cview(), epilogue_none<float>(), e);
            SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
            report<T>(st, cfg, name + (colmajor ? "_colmajor" : ""), true, *p, p->a->nnz(),
                      [&] { plan->run(p->bview(), p->cview(), epilogue_none<float>(), e); });
            return;
          } catch (sdnn::error const& err) {
            cudaGetLastError();
            if (colmajor) st.SkipWithError(err.what());
          }
        }
      })->UseManualTime()->Iterations(3)->Unit(benchmark::kMicrosecond);
    }
  }
  // cuSPARSE Blocked-ELL on the tiled-dense copy of A (the 32 x 32 tiles are its blocks):
  // the vendor counterpart of sdnn_tiled_dense, registered with the vendor rows so every
  // sdnn row of a block-sparse config reports against the fastest of all of them.
  // Float Blocked-ELL runs on TF32 tensor cores (linear/vendor/cusparse_blocked_ell.cuh): the
  // row name says so, since it is not a strict-float baseline.
  if (blocks) {
    std::string const name =
        std::string("cusparse_blocked_ell_BLOCKED_ELL_ALG1") + (std::is_same_v<T, float> ? "_tf32" : "");
    benchmark::RegisterBenchmark((cfg + "/" + name).c_str(), [=](benchmark::State& st) {
      auto p = get_problem<T>(mk, mk, n, sp, blocks);
      cuda_exec e{stream()};
      try {
        tiled_dense_view<T const> tv = std::as_const(*p->tiled).view();
        ops::tiled_spmm_plan<policy::cusparse_spmm<cusparse_alg::blocked_ell_alg1>, T> plan(tv, p->bview(),
                                                                                           p->cview(), e);
        report<T>(st, cfg, name, true, *p, p->a->nnz(),
                  [&] { plan.run(e, p->bview(), p->cview(), epilogue_none<float>()); });
      } catch (sdnn::error const& err) {
        cudaGetLastError();
        st.SkipWithError(err.what());
      }
    })->UseManualTime()->Iterations(3)->Unit(benchmark::kMicrosecond);
  }
  auto add = [&](std::string const& name, auto make_and_run) {
    benchmark::RegisterBenchmark((cfg + "/" + name).c_str(), [=](benchmark::State& st) {
      auto p = get_problem<T>(mk, mk, n, sp, blocks);
      make_and_run(st, *p, cfg, name);
    })->UseManualTime()->Iterations(3)->Unit(benchmark::kMicrosecond);
  };
  auto csr_policy = [&](std::string const& name, auto pol) {
    using P = decltype(pol);
    add(name, [](benchmark::State& st, problem<T>& p, std::string const& cfg, std::string const& nm) {
      cuda_exec e{stream()};
      ops::csr_spmm_plan<P, T, int> plan(p.a->view(), p.bview(), p.cview(), e);
      report<T>(st, cfg, nm, false, p, p.a->nnz(), [&] { plan.run(e, p.bview(), p.cview(), epilogue_none<float>()); });
    });
  };
  csr_policy("sdnn_csr_row_split_u2", policy::csr_row_split<2, 4>{});
  if (!g_quick) csr_policy("sdnn_csr_row_split_u1", policy::csr_row_split<1, 4>{});
  if (!g_quick) csr_policy("sdnn_csr_row_split_u4", policy::csr_row_split<4, 4>{});
  csr_policy("sdnn_csr_nnz_balanced", policy::csr_nnz_balanced<>{});
  csr_policy("sdnn_csr_staged_b_r32_k64", policy::csr_staged_b<32, 64>{});
  if (!g_quick) csr_policy("sdnn_csr_staged_b_r64_k64", policy::csr_staged_b<64, 64>{});
  // Panel order (plan-time re-sort of A, B tiles through shared memory); accumulators per
  // lane = rows per warp x vectors x 4 (float) / 8 (__half).
  if constexpr (std::is_same_v<T, float>) {
    csr_policy("sdnn_csr_panels_w16_k64_u1", policy::csr_panels<16, 64, 1>{});
    csr_policy("sdnn_csr_panels_w16_k32_u1", policy::csr_panels<16, 32, 1>{});
    csr_policy("sdnn_csr_panels_w8_k64_u2", policy::csr_panels<8, 64, 2>{});
    csr_policy("sdnn_csr_panels_w8_k32_u2", policy::csr_panels<8, 32, 2>{});
    csr_policy("sdnn_csr_panels_w12_k32_u1", policy::csr_panels<12, 32, 1>{});
    csr_policy("sdnn_csr_panels_w12_k64_u1", policy::csr_panels<12, 64, 1>{});
    csr_policy("sdnn_csr_panels_w10_k40_u1", policy::csr_panels<10, 40, 1>{});
    if (!g_quick) csr_policy("sdnn_csr_panels_w8_k32_u1", policy::csr_panels<8, 32, 1>{});
  } else {
    csr_policy("sdnn_csr_panels_w8_k64_u1", policy::csr_panels<8, 64, 1>{});
    csr_policy("sdnn_csr_panels_w8_k32_u1", policy::csr_panels<8, 32, 1>{});
  }
  csr_policy("sdnn_csr_row_split_u2_rows_in_x", policy::csr_row_split<2, 4, true>{});
  csr_policy("sdnn_csr_row_split_u1_rows_in_x", policy::csr_row_split<1, 4, true>{});
  csr_policy("sdnn_csr_row_split_u1_w8_rows_in_x", policy::csr_row_split<1, 8, true>{});
  add("sdnn_automatic", [](benchmark::State& st, problem<T>& p, std::string const& cfg, std::string const& nm) {
    cuda_exec e{stream()};
    ops::csr_spmm_plan<policy::automatic, T, int> plan(p.a->view(), p.bview(), p.cview(), e);
    report<T>(st, cfg, nm + "=" + policy::choice_name(plan.choice()), false, p, p.a->nnz(),
              [&] { plan.run(e, p.bview(), p.cview(), epilogue_none<float>()); });
  });
  add("sdnn_coo_nnz_split", [](benchmark::State& st, problem<T>& p, std::string const& cfg, std::string const& nm) {
    cuda_exec e{stream()};
    ops::coo_spmm_plan<policy::coo_nnz_split<>, T, int> plan(p.coo->view(), p.bview(), p.cview(), e);
    report<T>(st, cfg, nm, false, p, p.a->nnz(), [&] { plan.run(e, p.bview(), p.cview(), epilogue_none<float>()); });
  });
  if (sp >= 0.9 || blocks)
    add("sdnn_ell_row_split", [](benchmark::State& st, problem<T>& p, std::string const& cfg, std::string const& nm) {
      cuda_exec e{stream()};
      ops::ell_spmm_plan<policy::ell_row_split<>, T, int> plan(p.ell->view(), p.bview(), p.cview(), e);
      report<T>(st, cfg, nm, false, p, p.a->nnz(), [&] { plan.run(e, p.bview(), p.cview(), epilogue_none<float>()); });
    });
  if (blocks)
    add("sdnn_tiled_dense", [](benchmark::State& st, problem<T>& p, std::string const& cfg, std::string const& nm) {
      cuda_exec e{stream()};
      tiled_dense_view<T const> tv = std::as_const(*p.tiled).view();
      ops::tiled_spmm_plan<policy::tiled_dense_spmm, T> plan(tv, p.bview(), p.cview(), e);
      report<T>(st, cfg, nm, false, p, p.a->nnz(), [&] { plan.run(e, p.bview(), p.cview(), epilogue_none<float>()); });
    });
}

// Dense x sparse: C[N x M] = Y[N x K] * W[K x M] with W = the config's CSR (K = M here).
template <class T>
void register_dense_sparse(std::int64_t mk, std::int64_t batch, double sp) {
  std::string const cfg = config_name(type_name<T>(), batch, mk, mk, sp, false, "dense_x_csr");
  auto add = [&](std::string const& name, bool vendor_kernel, auto make_and_run) {
    benchmark::RegisterBenchmark((cfg + "/" + name).c_str(), [=](benchmark::State& st) {
      auto p = get_problem<T>(mk, mk, batch, sp, false);  // B buffers (K x batch) reused as Y (batch x K): same size
      cuda_exec e{stream()};
      dense_view<T const> y{batch, mk, mk, p->b[0].data()};
      dense_view<T> c{batch, mk, mk, p->c.data()};
      make_and_run(st, *p, cfg, name, vendor_kernel, y, c, e);
    })->UseManualTime()->Iterations(3)->Unit(benchmark::kMicrosecond);
  };
  add("cusparse_csr_ALG_DEFAULT", true,
      [](benchmark::State& st, problem<T>& p, std::string const& cfg, std::string const& nm, bool v,
         dense_view<T const> y, dense_view<T> c, cuda_exec e) {
        ops::dense_sparse_plan<policy::cusparse_spmm<>, T> plan(p.a->view(), e, plan_options{y.rows, true});
        std::size_t turn = 0;
        report<T>(st, cfg, nm, v, p, p.a->nnz(), [&] {
          dense_view<T const> yy{y.rows, y.cols, y.ld, p.b[turn++ % p.b.size()].data()};
          plan.run(e, yy, c, epilogue_none<float>());
        });
      });
  add("sdnn_dense_csc", false,
      [](benchmark::State& st, problem<T>& p, std::string const& cfg, std::string const& nm, bool v,
         dense_view<T const> y, dense_view<T> c, cuda_exec e) {
        ops::dense_sparse_plan<policy::csc_gather<>, T> plan(p.a->view(), e, plan_options{y.rows, true});
        std::size_t turn = 0;
        report<T>(st, cfg, nm, v, p, p.a->nnz(), [&] {
          dense_view<T const> yy{y.rows, y.cols, y.ld, p.b[turn++ % p.b.size()].data()};
          plan.run(e, yy, c, epilogue_none<float>());
        });
      });
}

}  // namespace

int main(int argc, char** argv) {
  g_quick = sdnn_bench::take_flag(argc, argv, "--quick");
  std::int64_t const n = 1024;
  if (g_quick) {
    for (double sp : {0.9, 0.99}) register_config<float>(4096, n, sp, false);
    register_dense_sparse<float>(4096, n, 0.9);
  } else {
    for (std::int64_t mk : {1024, 2048, 4096, 8192})
      for (double sp : {0.0, 0.5, 0.8, 0.9, 0.95, 0.99}) {
        if (sp == 0.0 && mk > 2048) continue;   // fully dense CSR: the GEMM's job; keep it small
        if (sp < 0.9 && mk > 4096) continue;    // 8192^2 at <= 80 % sparsity: minutes of cuSPARSE COO
        register_config<float>(mk, n, sp, false);
      }
    for (double sp : {0.9, 0.99}) register_config<__half>(4096, n, sp, false);
    register_config<float>(4096, n, 0.9, true);  // 10 % of 32 x 32 tiles occupied, each dense
    for (double sp : {0.9, 0.99}) register_dense_sparse<float>(4096, n, sp);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
