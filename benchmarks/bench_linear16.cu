// bench_linear16: the grid benchmark of the 16-bit sparse linear layer Y[N x M] = X[N x K] W^T
// (bf16 in, float accumulation, bf16 out, no epilogue): every sdnn path, every vendor baseline and
// the automatic plan in one process, over 4 shapes x N 1..2048 x dense / unstructured / 32 x 32
// blocks / 2:4, L2 flushed, median of CUDA-event timings. One JSON line per (point, path) and a
// "summary" line per point (family "linear16"); benchmarks/plot_linear16.py draws the heat maps.
// The options, the paths, the timing and the fields are described above `struct options`.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <sdnn/core/memory.cuh>
#include <sdnn/formats/block_sparse.hpp>
#include <sdnn/formats/sparse24.hpp>
#include <sdnn/formats/tile_offsets.hpp>
#include <sdnn/linear/op/sparse24_linear.cuh>
#include <sdnn/linear/op/spmm.cuh>
#include <sdnn/linear/op/csr_gather.cuh>
#include <sdnn/linear/op/tc_bitmap.cuh>
#include <sdnn/linear/op/tc_linear.cuh>
#include <sdnn/train/op/prune_sparse24.hpp>
#if SDNN_HAS_CUSPARSELT
#include <sdnn/linear/vendor/cusparselt.cuh>
#endif
#if SDNN_HAS_CUSPARSELT
#define BENCH16_HAS_CUSPARSELT 1
#else
#define BENCH16_HAS_CUSPARSELT 0
#endif
#if __has_include(<sdnn/linear/op/tc_auto.cuh>)
#include <sdnn/linear/op/tc_auto.cuh>
#define BENCH16_HAS_AUTO 1
#else
#define BENCH16_HAS_AUTO 0
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_json.cuh"

using namespace sdnn;

namespace {

constexpr double kHbmPeak = 3.35e12, kTcPeak = 989e12;  // H100 SXM datasheet: HBM3, dense bf16
constexpr double kCheckTol = 2e-2;

// ---------------------------------------------------------------------------------------------
// Options

struct shape {
  std::int64_t m = 0, k = 0;
};
std::string shape_name(shape s) { return std::to_string(s.m) + "x" + std::to_string(s.k); }

char const* const kPaths[] = {"cublas_bf16",       "cublas_fp16",       "cublas_tf32",       "tc_dense_mma",
                              "tc_tile_offsets",   "tc_bitmap",         "csr_gather",        "tc_block32",
                              "sparse24",          "cusparselt",        "cusparse_csr_bf16", "cusparse_bsr_bf16",
                              "sdnn_csr_float",    "automatic",         "automatic_tuned"};

// Options, paths, timing and output of bench_linear16.
//
// Grid (defaults; each list can be overridden):
//   W shapes   11008x4096, 4096x11008, 8192x8192, 4096x4096          --shapes=MxK,MxK
//   N          1, 8, 32, 128, 512, 2048                             --n=1,8
//   unstructured, fraction of zeros at random positions: 0.5 0.7 0.9 0.95 0.99   --unstructured=0.9 (empty: none)
//   32 x 32 blocks, fraction of empty blocks (random): 0.75 0.9        --blocked=0.9 (empty: none)
//   2:4 along K (magnitude pruning of a dense random W)             --sparse24=0|1
//   dense: structure "dense" holds the dense paths (always) and automatic on the dense W (--dense=0: not)
//   --paths=name,name (only these; cublas_bf16, the baseline, always runs), --reps=20, --warmup=3,
//   --budget=0.25 (seconds per measurement, see below), --check=0|1 (rel_err against cuBLAS),
//   --csr-float-max-n=128, --bitmap-max-n=128, --gather-max-n=128,
//   --quick (11008x4096; N 8, 32, 2048; unstructured 0.9; blocks 0.9; 2:4).
//   --flush=dirty|clean (how L2 is flushed before a timed launch, see Timing), --floors=1|0 (read floors).
//   SDNN_COMMIT (env): the commit recorded in every line ("unknown" if unset).
//
// Paths (exact names):
//   cublas_bf16      dense W bf16, cublasGemmEx TN, CUBLAS_COMPUTE_32F: the baseline of every speedup;
//                    measured once per (shape, N) on a dense random W (its time does not depend on
//                    the zeros) and reused for every structure of that shape
//   cublas_fp16      the same on fp16 copies; cublas_tf32: float W, X, Y, CUBLAS_COMPUTE_32F_FAST_TF32
//   tc_dense_mma     ops::tc_linear_plan<policy::tc_dense_mma, bf16>                (once per (shape, N))
//   tc_tile_offsets  ops::tc_linear_plan<policy::tc_tile_offsets_mma, bf16>          (unstructured, blocks)
//   tc_bitmap        ops::tc_bitmap_plan<bf16>, 16 x 16 bitmap tiles, N <= --bitmap-max-n   (unstructured, blocks)
//   csr_gather       ops::csr_gather_plan<bf16>, packed CSR on the CUDA cores, N <= --gather-max-n
//                    (unstructured, blocks)
//   tc_block32       ops::tc_linear_plan<policy::tc_block_sparse_mma, bf16>, 32 x 32 (blocks; unstructured 99 %)
//   sparse24         ops::sparse24_linear_plan<bf16>                                 (2:4)
//   cusparselt       vendor::cusparselt_linear<bf16>, a plan per N (with SDNN_HAS_CUSPARSELT; 2:4). Where it
//                    refuses N, N rounded up to 16 runs and the line says so (n_run, note)
//   cusparse_csr_bf16  cusparseSpMM, W CSR (bf16 values, int32 indices), CUSPARSE_SPMM_ALG_DEFAULT, compute
//                    32F: Y^T = W X^T with B = X as K x N column-major (ld K), C = Y as M x N column-major
//                    (ld M), i.e. our row-major X and Y untouched                    (unstructured, blocks)
//   cusparse_bsr_bf16  the same with W BSR (32 x 32 row-major blocks), CUSPARSE_SPMM_BSR_ALG1     (blocks)
//   sdnn_csr_float   ops::csr_spmm_plan<policy::automatic, float, int>: C[M x N] = A B with A = W (float
//                    CSR, M x K), B = X^T (float, K x N row-major, transposed once per N outside the
//                    timing) and C = Y^T (float, M x N row-major): the orientation the op offers; N <= 128
//   automatic        ops::tc_auto_linear_plan<bf16> (linear/op/tc_auto.cuh; compiled when that header
//                    exists), no tune(); automatic_tuned: a second plan after tune(exec, {every grid N}),
//                    called once per W (its seconds: tune_s). Both on every structure, dense included;
//                    their lines carry the chosen path and the plan's reason; w_bytes is what the chosen
//                    path stores (from this W's plans where built, else estimated from its structure);
//                    timed before the other paths of a point, ahead of the slow cuSPARSE baselines
// A refusal (a cuSPARSE status, a plan that cannot be made) is a JSON line with "error"; the run goes on.
//
// Timing: one untimed launch, one flushed timed probe, the rest of the warm-up (3 launches in all),
// then the median of --reps launches, each between two CUDA events after an L2 flush outside the
// events: --flush=dirty (the default) memsets twice the L2, which leaves about an L2 of dirty lines
// that the timed launch writes back as it reads; --flush=clean reads twice the L2 with a kernel,
// which leaves clean lines, as a network's previous layer reading its weights would. Measurement
// budget: a launch slower than budget / reps (12.5 ms with the defaults, > 30x cuBLAS everywhere in
// this grid) gets floor(budget / probe) reps, at least 5, and no further warm-up; its line says
// "reps" and "reps_reduced". --budget=0: always --reps.
// Fields: time_us (median), min_us, max_us, reps, speedup_vs_cublas_bf16, w_bytes (W as that path
// stores it), pct_hbm ((w_bytes + X + Y) / time / 3.35e12), pct_tc (2 M K N / time / 989e12), rel_err
// (||Y - Y_ref|| / ||Y_ref||, Y_ref = cuBLAS bf16 on the same W), check (ok / FAIL above 2e-2), flush,
// floor_us (--floors=1: the median time, timed the same way, of one read of `bytes` bytes by a plain
// streaming kernel, 16-byte loads over every SM: what a launch that only moved this path's bytes
// took here) and floor_ratio (time_us / floor_us).
// Summary lines: fastest (over the paths computing the bf16 layer: cuBLAS bf16, the sdnn tensor-core
// plans, cuSPARSELt, cuSPARSE; the shape's dense paths count at every structure), fastest_any (fp16,
// tf32 and float too), best_sdnn (tc_*, csr_gather, sparse24, sdnn_csr_float), and
// automatic[_tuned]_vs_fastest.
// Weights are built once per (shape, structure), reused across N and freed before the next one.
struct options {
  std::vector<shape> shapes{{11008, 4096}, {4096, 11008}, {8192, 8192}, {4096, 4096}};
  std::vector<std::int64_t> ns{1, 8, 32, 128, 512, 2048};
  std::vector<double> unstructured{0.5, 0.7, 0.9, 0.95, 0.99};
  std::vector<double> blocked{0.75, 0.9};
  bool sparse24 = true, dense = true, check = true;
  std::set<std::string> paths;  // empty: all
  int reps = 20, warmup = 3, min_reps = 5;
  double budget_s = 0.25;
  std::int64_t csr_float_max_n = 128;
  std::int64_t bitmap_max_n = 128;  // tc_bitmap re-reads W per 32 rows: small N only
  std::int64_t gather_max_n = 128;  // csr_gather re-reads W per 16 rows
  std::string commit = "unknown";
  bool clean_flush = false;  // --flush=clean
  bool floors = true;        // --floors
  bool want(std::string const& p) const { return p == "cublas_bf16" || paths.empty() || paths.count(p) > 0; }
};
options g_opt;

std::vector<std::string> split(std::string const& v, char sep) {
  std::vector<std::string> out;
  std::size_t a = 0;
  while (a <= v.size()) {
    std::size_t b = v.find(sep, a);
    if (b == std::string::npos) b = v.size();
    if (b > a) out.push_back(v.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

[[noreturn]] void usage(std::string const& why) {
  std::fprintf(stderr,
               "bench_linear16: %s\n"
               "usage: bench_linear16 [--quick] [--shapes=MxK,..] [--n=1,8,..] [--unstructured=0.9,..] "
               "[--blocked=0.9,..] [--sparse24=0|1] [--dense=0|1] [--paths=name,..] [--reps=20] [--warmup=3] "
               "[--budget=0.25] [--check=0|1] [--csr-float-max-n=128] [--bitmap-max-n=128] [--gather-max-n=128] "
               "[--flush=dirty|clean] [--floors=1|0]\n",
               why.c_str());
  std::exit(why == "help" ? 0 : 2);
}

void parse(int argc, char** argv) {
  // --quick first, so that explicit lists override it whatever the order.
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--quick") {
      g_opt.shapes = {{11008, 4096}};
      g_opt.ns = {8, 32, 2048};
      g_opt.unstructured = {0.9};
      g_opt.blocked = {0.9};
    }
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    if (a == "--quick") continue;
    if (a == "--help" || a == "-h") usage("help");
    auto const eq = a.find('=');
    if (a.compare(0, 2, "--") != 0 || eq == std::string::npos) usage("unknown argument '" + a + "'");
    std::string const key = a.substr(2, eq - 2), val = a.substr(eq + 1);
    try {
      if (key == "shapes") {
        g_opt.shapes.clear();
        for (auto const& item : split(val, ',')) {
          auto const x = item.find('x');
          if (x == std::string::npos) usage("a shape is MxK, got '" + item + "'");
          g_opt.shapes.push_back({std::stoll(item.substr(0, x)), std::stoll(item.substr(x + 1))});
        }
      } else if (key == "n") {
        g_opt.ns.clear();
        for (auto const& item : split(val, ',')) g_opt.ns.push_back(std::stoll(item));
      } else if (key == "unstructured" || key == "blocked") {
        auto& v = key == "unstructured" ? g_opt.unstructured : g_opt.blocked;
        v.clear();
        for (auto const& item : split(val, ',')) v.push_back(std::stod(item));
      } else if (key == "sparse24") {
        g_opt.sparse24 = std::stoi(val) != 0;
      } else if (key == "dense") {
        g_opt.dense = std::stoi(val) != 0;
      } else if (key == "check") {
        g_opt.check = std::stoi(val) != 0;
      } else if (key == "paths") {
        g_opt.paths.clear();
        for (auto const& item : split(val, ',')) {
          if (std::find_if(std::begin(kPaths), std::end(kPaths), [&](char const* p) { return item == p; }) ==
              std::end(kPaths))
            usage("unknown path '" + item + "'");
          g_opt.paths.insert(item);
        }
      } else if (key == "reps") {
        g_opt.reps = std::max(1, std::stoi(val));
      } else if (key == "warmup") {
        g_opt.warmup = std::max(0, std::stoi(val));
      } else if (key == "budget") {
        g_opt.budget_s = std::stod(val);
      } else if (key == "csr-float-max-n") {
        g_opt.csr_float_max_n = std::stoll(val);
      } else if (key == "bitmap-max-n") {
        g_opt.bitmap_max_n = std::stoll(val);
      } else if (key == "gather-max-n") {
        g_opt.gather_max_n = std::stoll(val);
      } else if (key == "flush") {
        if (val != "dirty" && val != "clean") usage("--flush is dirty or clean, got '" + val + "'");
        g_opt.clean_flush = val == "clean";
      } else if (key == "floors") {
        g_opt.floors = std::stoi(val) != 0;
      } else {
        usage("unknown option '--" + key + "'");
      }
    } catch (std::logic_error const&) {  // stoi / stod on a bad value
      usage("bad value in '" + a + "'");
    }
  }
  for (auto s : g_opt.shapes)
    if (s.m <= 0 || s.k <= 0 || s.m % 32 || s.k % 32) usage("shapes must be positive multiples of 32: " + shape_name(s));
  for (auto n : g_opt.ns)
    if (n <= 0) usage("N must be positive");
  if (g_opt.ns.empty() || g_opt.shapes.empty()) usage("no N or no shape");
  g_opt.min_reps = std::min(g_opt.min_reps, g_opt.reps);
  if (char const* c = std::getenv("SDNN_COMMIT"); c && *c) g_opt.commit = c;
}

// ---------------------------------------------------------------------------------------------
// Errors of the vendor libraries: thrown, caught per path, recorded as the line's "error".

#define B16_CUBLAS(call)                                                                                    \
  do {                                                                                                      \
    cublasStatus_t st_ = (call);                                                                            \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                       \
      throw std::runtime_error(std::string("cuBLAS: ") + #call + ": " + cublasGetStatusName(st_));          \
  } while (0)
#define B16_CUSPARSE(call)                                                                                  \
  do {                                                                                                      \
    cusparseStatus_t st_ = (call);                                                                          \
    if (st_ != CUSPARSE_STATUS_SUCCESS)                                                                     \
      throw std::runtime_error(std::string("cuSPARSE: ") + #call + ": " + cusparseGetErrorName(st_) + " (" + \
                               cusparseGetErrorString(st_) + ")");                                          \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Host: parallel helpers, generators (O(M K), xorshift, chunks of 64 rows each seeded on its own,
// so the matrices do not depend on the thread count), structure statistics, CSR.

unsigned n_threads() {
  static unsigned const t = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  return t;
}

// f(c) for every c in [0, count), over n_threads() threads.
template <class F>
void parallel_for(std::int64_t count, F const& f) {
  std::atomic<std::int64_t> next{0};
  auto work = [&] {
    for (std::int64_t c; (c = next.fetch_add(1)) < count;) f(c);
  };
  std::vector<std::thread> th;
  for (unsigned t = 1; t < n_threads(); ++t) th.emplace_back(work);
  work();
  for (auto& t : th) t.join();
}

struct xorshift {
  std::uint64_t s;
  explicit xorshift(std::uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {
    if (!s) s = 1;
    for (int i = 0; i < 4; ++i) next();
  }
  std::uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  float value() {  // in (-1, -0.01] u [0.01, 1): never zero in bf16
    float v = float(uniform() * 2.0 - 1.0);
    return v + (v >= 0 ? 0.01f : -0.01f);
  }
};

constexpr std::int64_t kChunk = 64;  // rows per generator chunk

// kind: 0 dense, 1 unstructured (sparsity = zeros), 2 blocks of 32 x 32 (sparsity = empty blocks).
dense_matrix<bf16> generate(shape s, int kind, double sparsity, std::uint64_t seed) {
  dense_matrix<bf16> w(s.m, s.k);
  std::vector<char> keep;
  std::int64_t const cb = s.k / 32;
  if (kind == 2) {
    xorshift r(seed ^ 0xB10C);
    keep.resize(std::size_t((s.m / 32) * cb));
    for (auto& kf : keep) kf = r.uniform() >= sparsity;
  }
  bf16* const data = w.data();
  parallel_for((s.m + kChunk - 1) / kChunk, [&](std::int64_t c) {
    xorshift r(seed * 1000003ull + std::uint64_t(c));
    std::int64_t const i1 = std::min(s.m, (c + 1) * kChunk);
    for (std::int64_t i = c * kChunk; i < i1; ++i) {
      bf16* row = data + i * s.k;
      if (kind == 1) {
        for (std::int64_t j = 0; j < s.k; ++j) row[j] = r.uniform() < sparsity ? bf16(0.f) : bf16(r.value());
      } else if (kind == 2) {
        char const* kr = keep.data() + (i / 32) * cb;
        for (std::int64_t j = 0; j < s.k; ++j) row[j] = kr[j / 32] ? bf16(r.value()) : bf16(0.f);
      } else {
        for (std::int64_t j = 0; j < s.k; ++j) row[j] = bf16(r.value());
      }
    }
  });
  return w;
}

bool nz(bf16 v) { return (v.bits & 0x7FFFu) != 0; }  // -0 is a zero, as the formats count it

// What the automatic layer reads of W, counted here for the lines (and the byte estimates).
struct weight_stats {
  std::int64_t nnz = 0, blocks32 = 0, blocks32_total = 0, tiles64 = 0, tiles64_total = 0;
  std::int64_t pairs = 0;  // aligned column pairs holding a nonzero (tc_bitmap's stored pairs)
};
weight_stats stats_of(dense_matrix<bf16> const& w) {
  std::int64_t const m = w.rows(), k = w.cols(), kb = k / 32, kt = (k + 63) / 64;
  std::atomic<std::int64_t> nnz{0}, b32{0}, t64{0}, pr{0};
  parallel_for((m + 63) / 64, [&](std::int64_t c) {  // 64 rows: one tile row, two block rows
    std::vector<char> blk(std::size_t(2 * kb), 0), tile(std::size_t(kt), 0);
    std::int64_t local = 0, lpairs = 0;
    std::int64_t const i1 = std::min(m, (c + 1) * 64);
    for (std::int64_t i = c * 64; i < i1; ++i) {
      bf16 const* row = w.data() + i * k;
      char* b = blk.data() + ((i / 32) % 2) * kb;
      for (std::int64_t j = 0; j < k; ++j)
        if (nz(row[j])) ++local, b[j / 32] = 1, tile[std::size_t(j / 64)] = 1;
      for (std::int64_t j = 0; j < k; j += 2) lpairs += nz(row[j]) || (j + 1 < k && nz(row[j + 1]));
    }
    nnz += local;
    pr += lpairs;
    b32 += std::count(blk.begin(), blk.end(), 1);
    t64 += std::count(tile.begin(), tile.end(), 1);
  });
  weight_stats st;
  st.nnz = nnz;
  st.blocks32 = b32;
  st.blocks32_total = ((m + 31) / 32) * kb;
  st.tiles64 = t64;
  st.tiles64_total = ((m + 63) / 64) * kt;
  st.pairs = pr;
  return st;
}

struct host_csr {
  std::vector<std::int32_t> row_ptr, col_idx;
  std::vector<bf16> v16;
  std::vector<float> v32;
};
host_csr csr_of(dense_matrix<bf16> const& w, bool with_float) {
  std::int64_t const m = w.rows(), k = w.cols();
  host_csr h;
  h.row_ptr.assign(std::size_t(m + 1), 0);
  parallel_for(m, [&](std::int64_t i) {
    bf16 const* row = w.data() + i * k;
    std::int32_t c = 0;
    for (std::int64_t j = 0; j < k; ++j) c += nz(row[j]);
    h.row_ptr[std::size_t(i + 1)] = c;
  });
  for (std::int64_t i = 0; i < m; ++i) {
    if (std::int64_t(h.row_ptr[std::size_t(i)]) + h.row_ptr[std::size_t(i + 1)] > 2147483647ll)
      throw std::runtime_error("CSR: more than 2^31 - 1 nonzeros");
    h.row_ptr[std::size_t(i + 1)] += h.row_ptr[std::size_t(i)];
  }
  std::size_t const nnz = std::size_t(h.row_ptr.back());
  h.col_idx.resize(nnz);
  h.v16.resize(nnz);
  if (with_float) h.v32.resize(nnz);
  parallel_for(m, [&](std::int64_t i) {
    bf16 const* row = w.data() + i * k;
    std::size_t at = std::size_t(h.row_ptr[std::size_t(i)]);
    for (std::int64_t j = 0; j < k; ++j)
      if (nz(row[j])) {
        h.col_idx[at] = std::int32_t(j);
        h.v16[at] = row[j];
        if (with_float) h.v32[at] = float(row[j]);
        ++at;
      }
  });
  return h;
}

// ---------------------------------------------------------------------------------------------
// JSON lines: the shared writer (bench_json.cuh: strings escaped, non-finite numbers as null) with
// this program's time of day and commit.

using sdnn_bench::json_line;
using sdnn_bench::machine;
using sdnn_bench::utc_time;
json_line result_line() {
  json_line j("linear16");
  j.str("utc", utc_time()).str("commit", g_opt.commit).str("flush", g_opt.clean_flush ? "clean" : "dirty");
  return j;
}

// ---------------------------------------------------------------------------------------------
// Device: the stream, handles, L2 flush, timing.

struct device_ctx {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cusparseHandle_t sparse = nullptr;
  buffer<unsigned char, device_space> flush;
  buffer<unsigned char, device_space> sp_ws;  // cuSPARSE's SpMM buffer, grown as needed
  buffer<unsigned char, device_space> floor_src;  // what the read floors read, grown as needed
  buffer<unsigned, device_space> sink;            // the read kernel's never-taken store
  std::map<std::int64_t, double> floors;          // read floor (s) by bytes / 64 KiB
  int read_grid = 0;
  cudaEvent_t a = nullptr, b = nullptr;
  int turn = 0;
};
device_ctx* g_dev = nullptr;
cuda_exec exec() { return cuda_exec{g_dev->stream}; }

struct timing {
  double med_s = 0, min_s = 0, max_s = 0;
  int reps = 0;
  bool reduced = false;
};

// One read of n 16-byte words, four independent loads a thread in flight; the xor of what it read
// is stored only if it equals a constant, so that the loads are not dropped (the flush buffer and
// the floor source are memset to bytes whose xor over 16-byte words is 0).
__global__ void bench16_read(uint4 const* __restrict__ p, std::size_t n, unsigned* sink) {
  std::size_t const stride = std::size_t(gridDim.x) * blockDim.x;
  std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 const a = __ldg(p + i), b = __ldg(p + i + stride), c = __ldg(p + i + 2 * stride), d = __ldg(p + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    uint4 const a = __ldg(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}
void read_bytes(unsigned char const* p, std::size_t bytes) {
  bench16_read<<<g_dev->read_grid, 256, 0, g_dev->stream>>>(reinterpret_cast<uint4 const*>(p), bytes / 16,
                                                            g_dev->sink.data());
  SDNN_CUDA_CHECK(cudaGetLastError());
}

void flush_l2() {
  if (g_opt.clean_flush) read_bytes(g_dev->flush.data(), g_dev->flush.size());
  else SDNN_CUDA_CHECK(cudaMemsetAsync(g_dev->flush.data(), ++g_dev->turn & 0xFF, g_dev->flush.size(), g_dev->stream));
}
template <class F>
double timed_once(F& f) {
  flush_l2();
  SDNN_CUDA_CHECK(cudaEventRecord(g_dev->a, g_dev->stream));
  f();
  SDNN_CUDA_CHECK(cudaEventRecord(g_dev->b, g_dev->stream));
  SDNN_CUDA_CHECK(cudaEventSynchronize(g_dev->b));
  float ms = 0;
  SDNN_CUDA_CHECK(cudaEventElapsedTime(&ms, g_dev->a, g_dev->b));
  return double(ms) * 1e-3;
}

// See the header: untimed launch, timed probe, rest of the warm-up, median of reps flushed launches.
template <class F>
timing measure(F&& f) {
  timing t;
  f();  // first launch untimed: lazy module loading, first-touch of the plan's buffers
  SDNN_CUDA_CHECK(cudaStreamSynchronize(g_dev->stream));
  double const probe = timed_once(f);
  int reps = g_opt.reps, warm = std::max(0, g_opt.warmup - 2);
  if (g_opt.budget_s > 0 && probe * reps > g_opt.budget_s) {
    reps = std::max(g_opt.min_reps, int(g_opt.budget_s / probe));
    t.reduced = reps < g_opt.reps;
    warm = 0;
  }
  for (int i = 0; i < warm; ++i) f();
  std::vector<double> s(std::size_t(reps), 0.0);
  for (auto& v : s) v = timed_once(f);
  std::sort(s.begin(), s.end());
  std::size_t const h = s.size() / 2;
  t.med_s = s.size() % 2 ? s[h] : 0.5 * (s[h - 1] + s[h]);
  t.min_s = s.front();
  t.max_s = s.back();
  t.reps = reps;
  return t;
}

// The read floor of `bytes` bytes (rounded up to 64 KiB), measured once per size: see the header.
double read_floor_s(double bytes) {
  std::int64_t const key = std::int64_t(std::ceil(bytes / 65536.0));
  if (key <= 0) return 0.0;
  auto it = g_dev->floors.find(key);
  if (it != g_dev->floors.end()) return it->second;
  std::size_t const n = std::size_t(key) * 65536;
  if (g_dev->floor_src.size() < n) {
    SDNN_CUDA_CHECK(cudaStreamSynchronize(g_dev->stream));
    g_dev->floor_src = {};
    g_dev->floor_src = buffer<unsigned char, device_space>(n, exec());
    SDNN_CUDA_CHECK(cudaMemsetAsync(g_dev->floor_src.data(), 0x5a, n, g_dev->stream));
  }
  unsigned char const* src = g_dev->floor_src.data();
  double const s = measure([&] { read_bytes(src, n); }).med_s;
  g_dev->floors[key] = s;
  return s;
}

// ---------------------------------------------------------------------------------------------
// One shape's data: X (bf16, fp16, float; X^T float per N for sdnn_csr_float), Y, the dense W.

enum class out_kind { bf16_nm, fp16_nm, f32_nm, f32_mn };  // Y row-major in bf16 / fp16 / float; Y^T float

struct shape_ctx {
  shape s;
  std::int64_t nmax = 0;
  std::vector<bf16> x_host;  // nmax x k
  buffer<bf16, device_space> x16;
  buffer<fp16, device_space> xh;
  buffer<float, device_space> x32;
  std::map<std::int64_t, buffer<float, device_space>> xt32;  // N -> X^T (K x N row-major)
  buffer<unsigned char, device_space> y;                     // nmax x m floats: every path's output
  dense_matrix<bf16> w_host;                                 // dense random W (the dense paths)
  buffer<bf16, device_space> w16;
  buffer<fp16, device_space> wh;
  buffer<float, device_space> w32;
  std::unique_ptr<ops::tc_linear_plan<policy::tc_dense_mma, bf16>> dense_plan;
  std::string dense_plan_error;

  dense_view<bf16 const> xv(std::int64_t n) const { return {n, s.k, s.k, x16.data()}; }
  dense_view<bf16> yv(std::int64_t n) { return {n, s.m, s.m, reinterpret_cast<bf16*>(y.data())}; }
  float* y32() { return reinterpret_cast<float*>(y.data()); }
};

float const* xt_for(shape_ctx& sc, std::int64_t n) {
  auto it = sc.xt32.find(n);
  if (it != sc.xt32.end()) return it->second.data();
  std::vector<float> t(std::size_t(sc.s.k * n));
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < sc.s.k; ++c) t[std::size_t(c * n + r)] = float(sc.x_host[std::size_t(r * sc.s.k + c)]);
  auto& b = sc.xt32[n] = to_device(t.data(), t.size(), exec());
  SDNN_CUDA_CHECK(cudaStreamSynchronize(g_dev->stream));
  return b.data();
}

std::unique_ptr<shape_ctx> make_shape(shape s) {
  auto sc = std::make_unique<shape_ctx>();
  sc->s = s;
  sc->nmax = *std::max_element(g_opt.ns.begin(), g_opt.ns.end());
  auto const e = exec();
  std::size_t const nx = std::size_t(sc->nmax * s.k), nw = std::size_t(s.m * s.k);
  sc->x_host.resize(nx);
  {
    xorshift r(7);
    for (auto& v : sc->x_host) v = bf16(float(r.uniform() * 2.0 - 1.0));
  }
  sc->x16 = to_device(sc->x_host.data(), nx, e);
  {
    std::vector<fp16> h(nx);
    std::vector<float> f(nx);
    for (std::size_t i = 0; i < nx; ++i) f[i] = float(sc->x_host[i]), h[i] = fp16(f[i]);
    sc->xh = to_device(h.data(), nx, e);
    sc->x32 = to_device(f.data(), nx, e);
  }
  sc->y = buffer<unsigned char, device_space>(std::size_t(sc->nmax * s.m) * sizeof(float), e);
  sc->w_host = generate(s, 0, 0.0, 1000 + std::uint64_t(s.m) * 7 + std::uint64_t(s.k));
  sc->w16 = to_device(sc->w_host.data(), nw, e);
  {
    std::vector<fp16> h(nw);
    std::vector<float> f(nw);
    bf16 const* w = sc->w_host.data();
    parallel_for(std::int64_t((nw + 65535) / 65536), [&](std::int64_t c) {
      std::size_t const i1 = std::min(nw, std::size_t(c + 1) * 65536);
      for (std::size_t i = std::size_t(c) * 65536; i < i1; ++i) f[i] = float(w[i]), h[i] = fp16(f[i]);
    });
    sc->wh = to_device(h.data(), nw, e);
    sc->w32 = to_device(f.data(), nw, e);
  }
  if (g_opt.want("tc_dense_mma")) {
    try {
      sc->dense_plan = std::make_unique<ops::tc_linear_plan<policy::tc_dense_mma, bf16>>(sc->w_host, e);
    } catch (std::exception const& err) {
      sc->dense_plan_error = err.what();
      cudaGetLastError();
    }
  }
  SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
  return sc;
}

void cublas_bf16(shape_ctx& sc, bf16 const* w, std::int64_t n) {
  float const alpha = 1.f, beta = 0.f;
  B16_CUBLAS(cublasGemmEx(g_dev->blas, CUBLAS_OP_T, CUBLAS_OP_N, int(sc.s.m), int(n), int(sc.s.k), &alpha, w,
                          CUDA_R_16BF, int(sc.s.k), sc.x16.data(), CUDA_R_16BF, int(sc.s.k), &beta, sc.y.data(),
                          CUDA_R_16BF, int(sc.s.m), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// ---------------------------------------------------------------------------------------------
// A grid point and the results of its paths.

struct result {
  std::string path;
  bool ok = false;
  std::string error;
  timing t;
  double w_bytes = 0;
  int io_bytes = 2;  // bytes per X / Y element
  out_kind out = out_kind::bf16_nm;
  double rel_err = -1;
  std::string chosen, reason, detail, note;
  double tune_s = -1;
  std::int64_t n_run = 0;
};

struct point {
  shape_ctx* sc = nullptr;
  std::string structure;
  double sparsity = 0, zeros = 0;
  std::int64_t n = 0;
  std::vector<float> ref;  // cuBLAS bf16 on this point's W: n x m (empty: no check)
  double cublas_s = 0;     // cublas_bf16 at (shape, n)
  weight_stats st;         // W's structure (the fields the automatic plan's cost model reads)
};

std::vector<float> download(void const* p, out_kind k, std::size_t count) {
  std::vector<float> f(count);
  cudaStream_t const s = g_dev->stream;
  if (k == out_kind::bf16_nm || k == out_kind::fp16_nm) {
    std::vector<std::uint16_t> h(count);
    SDNN_CUDA_CHECK(cudaMemcpyAsync(h.data(), p, count * 2, cudaMemcpyDeviceToHost, s));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
    for (std::size_t i = 0; i < count; ++i) {
      f[i] = k == out_kind::bf16_nm ? float(bf16::from_bits(h[i])) : float(fp16::from_bits(h[i]));
    }
  } else {
    SDNN_CUDA_CHECK(cudaMemcpyAsync(f.data(), p, count * 4, cudaMemcpyDeviceToHost, s));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  return f;
}

void compute_ref(point& p, bf16 const* w_dev) {
  if (!g_opt.check) return;
  SDNN_CUDA_CHECK(cudaMemsetAsync(p.sc->y.data(), 0xFF, p.sc->y.size(), g_dev->stream));
  cublas_bf16(*p.sc, w_dev, p.n);
  p.ref = download(p.sc->y.data(), out_kind::bf16_nm, std::size_t(p.n * p.sc->s.m));
}

double rel_err(point const& p, out_kind k, std::int64_t n_run) {
  std::int64_t const m = p.sc->s.m, n = p.n;
  std::size_t const count = std::size_t((k == out_kind::f32_mn ? n_run : n) * m);
  auto const y = download(p.sc->y.data(), k, count);
  double num = 0, den = 0;
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < m; ++c) {
      double const ref = p.ref[std::size_t(r * m + c)];
      double const v = k == out_kind::f32_mn ? y[std::size_t(c * n_run + r)] : y[std::size_t(r * m + c)];
      num += (v - ref) * (v - ref);
      den += ref * ref;
    }
  return den > 0 ? std::sqrt(num / den) : (num > 0 ? 1.0 : 0.0);  // NaN (unwritten output) stays NaN
}

json_line point_line(point const& p, std::string const& path) {
  json_line j = result_line();
  j.str("shape", shape_name(p.sc->s)).num("m", double(p.sc->s.m)).num("k", double(p.sc->s.k));
  j.str("structure", p.structure).num("sparsity", p.sparsity).num("zeros", p.zeros).num("n", double(p.n));
  j.str("path", path);
  j.num("nnz", double(p.st.nnz)).num("tiles64", double(p.st.tiles64)).num("blocks32", double(p.st.blocks32));
  j.num("pairs", double(p.st.pairs));
  return j;
}

void emit(point const& p, result const& r) {
  json_line j = point_line(p, r.path);
  if (!r.ok) {
    j.str("error", r.error);
    if (!r.note.empty()) j.str("note", r.note);
    j.emit();
    return;
  }
  double const m = double(p.sc->s.m), k = double(p.sc->s.k), n = double(p.n), t = r.t.med_s;
  double const bytes = r.w_bytes + double(r.io_bytes) * n * (k + m);
  j.num("time_us", t * 1e6).num("min_us", r.t.min_s * 1e6).num("max_us", r.t.max_s * 1e6).num("reps", r.t.reps);
  if (r.t.reduced) j.num("reps_reduced", 1);
  j.num("speedup_vs_cublas_bf16", p.cublas_s > 0 ? p.cublas_s / t : 0.0);
  j.num("w_bytes", r.w_bytes).num("bytes", bytes).num("pct_hbm", 100.0 * bytes / t / kHbmPeak);
  j.num("pct_tc", 100.0 * 2.0 * m * k * n / t / kTcPeak);
  if (g_opt.floors && bytes > 0) {
    double const f = read_floor_s(bytes);
    j.num("floor_us", f * 1e6).num("floor_ratio", f > 0 ? t / f : 0.0);
  }
  if (r.rel_err >= 0 || std::isnan(r.rel_err))
    j.num("rel_err", r.rel_err).str("check", r.rel_err <= kCheckTol ? "ok" : "FAIL");
  if (!r.chosen.empty()) j.str("chosen", r.chosen);
  if (!r.reason.empty()) j.str("reason", r.reason);
  if (r.tune_s >= 0) j.num("tune_s", r.tune_s);
  if (r.n_run && r.n_run != p.n) j.num("n_run", double(r.n_run));
  if (!r.note.empty()) j.str("note", r.note);
  if (!r.detail.empty()) j.str("detail", r.detail);
  j.emit();
}

// Runs one path: body(r) fills r (timing, bytes, output kind, extras) or throws (a refusal).
template <class Body>
result run_path(point& p, std::string const& name, Body&& body) {
  result r;
  r.path = name;
  r.n_run = p.n;
  try {
    SDNN_CUDA_CHECK(cudaMemsetAsync(p.sc->y.data(), 0xFF, p.sc->y.size(), g_dev->stream));  // NaN: unwritten
    body(r);
    r.ok = true;
    if (!p.ref.empty()) r.rel_err = rel_err(p, r.out, r.n_run);
  } catch (std::exception const& err) {
    r.ok = false;
    r.error = err.what();
    cudaGetLastError();  // a refusal leaves no sticky error; a fault would (and fail the next call)
  }
  emit(p, r);
  return r;
}

bool is_sdnn(std::string const& p) {
  return p == "tc_dense_mma" || p == "tc_tile_offsets" || p == "tc_bitmap" || p == "csr_gather" || p == "tc_block32" ||
         p == "sparse24" || p == "sdnn_csr_float";
}
bool is_bf16_path(std::string const& p) {  // computes the bf16 layer (the candidates of "fastest")
  return p == "cublas_bf16" || p == "tc_dense_mma" || p == "tc_tile_offsets" || p == "tc_bitmap" || p == "csr_gather" ||
         p == "tc_block32" || p == "sparse24" || p == "cusparselt" || p == "cusparse_csr_bf16" || p == "cusparse_bsr_bf16";
}

double g_t0 = 0;
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The summary line of a point: `all` = this point's results and the shape's dense ones at this N.
void summarize(point const& p, std::vector<result> const& all) {
  result const *fast = nullptr, *fast_any = nullptr, *best_sdnn = nullptr, *au = nullptr, *aut = nullptr;
  bool fail = false;
  for (auto const& r : all) {
    if (!r.ok) continue;
    if (std::isnan(r.rel_err) || r.rel_err > kCheckTol) fail = true;
    if (r.path == "automatic") au = &r;
    if (r.path == "automatic_tuned") aut = &r;
    if (r.path == "automatic" || r.path == "automatic_tuned") continue;
    if (!fast_any || r.t.med_s < fast_any->t.med_s) fast_any = &r;
    if (is_bf16_path(r.path) && (!fast || r.t.med_s < fast->t.med_s)) fast = &r;
    if (is_sdnn(r.path) && (!best_sdnn || r.t.med_s < best_sdnn->t.med_s)) best_sdnn = &r;
  }
  json_line j = point_line(p, "summary");
  j.num("cublas_bf16_us", p.cublas_s * 1e6);
  if (fast)
    j.str("fastest", fast->path).num("fastest_us", fast->t.med_s * 1e6).num("fastest_speedup", p.cublas_s / fast->t.med_s);
  if (fast_any) j.str("fastest_any", fast_any->path).num("fastest_any_us", fast_any->t.med_s * 1e6);
  if (best_sdnn)
    j.str("best_sdnn", best_sdnn->path)
        .num("best_sdnn_us", best_sdnn->t.med_s * 1e6)
        .num("best_sdnn_speedup", p.cublas_s / best_sdnn->t.med_s);
  auto add_auto = [&](result const* a, std::string const& key) {
    if (!a) return;
    j.str(key + "_chosen", a->chosen).num(key + "_us", a->t.med_s * 1e6);
    j.num(key + "_speedup", p.cublas_s / a->t.med_s);
    if (fast) j.num(key + "_vs_fastest", a->t.med_s / fast->t.med_s);
  };
  add_auto(au, "automatic");
  add_auto(aut, "automatic_tuned");
  if (fail) j.str("check", "FAIL");
  j.emit();
  // Progress, one line per point.
  char head[160];
  std::snprintf(head, sizeof head, "[%7.1f s] %s %s %g%% N=%lld:", now_s() - g_t0, shape_name(p.sc->s).c_str(),
                p.structure.c_str(), p.sparsity * 100, static_cast<long long>(p.n));
  std::string line = head;
  char buf[200];
  std::snprintf(buf, sizeof buf, " cublas_bf16 %.1f us", p.cublas_s * 1e6);
  line += buf;
  if (fast) {
    std::snprintf(buf, sizeof buf, "; fastest %s %.1f us (%.2fx)", fast->path.c_str(), fast->t.med_s * 1e6,
                  p.cublas_s / fast->t.med_s);
    line += buf;
  }
  if (best_sdnn && best_sdnn != fast) {
    std::snprintf(buf, sizeof buf, "; best sdnn %s %.2fx", best_sdnn->path.c_str(), p.cublas_s / best_sdnn->t.med_s);
    line += buf;
  }
  if (au && fast) {
    std::snprintf(buf, sizeof buf, "; automatic %s %.2f of fastest", au->chosen.c_str(), au->t.med_s / fast->t.med_s);
    line += buf;
  }
  if (aut && fast) {
    std::snprintf(buf, sizeof buf, "; tuned %s %.2f", aut->chosen.c_str(), aut->t.med_s / fast->t.med_s);
    line += buf;
  }
  int errors = 0;
  for (auto const& r : all) errors += !r.ok;
  if (errors) line += "; " + std::to_string(errors) + " refused";
  if (fail) line += "; CHECK FAILED";
  std::fprintf(stderr, "%s\n", line.c_str());
}

// ---------------------------------------------------------------------------------------------
// The automatic plans (tc_auto.cuh), when compiled.

#if BENCH16_HAS_AUTO
struct auto_plans {
  std::unique_ptr<ops::tc_auto_linear_plan<bf16>> plain, tuned;
  std::string plain_error, tuned_error;
  double tune_s = -1;
};
// The plans (tune: false leaves the tuned one untuned, for tune_auto once the host threads are done).
// Both are made before any tune() of this W: tune() fills a process-wide cache per (GPU, structure)
// that later plans of the same structure read at construction, and `automatic` must stay the
// cost model's choice.
auto_plans make_auto(dense_matrix<bf16> const& w, bool tune = true);
void tune_auto(auto_plans& a) {
  if (!a.tuned) return;
  double const t0 = now_s();
  try {
    a.tuned->tune(exec(), std::vector<std::int64_t>(g_opt.ns.begin(), g_opt.ns.end()));
    a.tune_s = now_s() - t0;
  } catch (std::exception const& e) {
    a.tuned_error = std::string("tune: ") + e.what();
    a.tuned.reset();
    cudaGetLastError();
  }
  SDNN_CUDA_CHECK(cudaStreamSynchronize(g_dev->stream));
}
auto_plans make_auto(dense_matrix<bf16> const& w, bool tune) {
  auto_plans a;
  ops::tc_auto_options opt;
  opt.max_rows = *std::max_element(g_opt.ns.begin(), g_opt.ns.end());
  auto make = [&](std::unique_ptr<ops::tc_auto_linear_plan<bf16>>& p, std::string& err) {
    try {
      p = std::make_unique<ops::tc_auto_linear_plan<bf16>>(w.view(), exec(), opt);
    } catch (std::exception const& e) {
      err = e.what();
      cudaGetLastError();
    }
  };
  if (g_opt.want("automatic")) make(a.plain, a.plain_error);
  if (g_opt.want("automatic_tuned")) make(a.tuned, a.tuned_error);
  SDNN_CUDA_CHECK(cudaStreamSynchronize(g_dev->stream));
  if (tune) tune_auto(a);
  return a;
}
#endif

// W bytes of a path the automatic layer chose, for its pct_hbm: what that path stores (measured
// from this structure's plans where built, else estimated from the structure).
struct byte_table {
  double dense = 0, block32 = -1, tiles = -1, s24 = 0, bitmap = -1, gather = -1;
};
double chosen_bytes(byte_table const& b, weight_stats const& st, shape s, std::string const& chosen) {
  if (chosen == "tc_block32")
    return b.block32 >= 0 ? b.block32 : double(st.blocks32) * (32 * 32 * 2 + 4) + double(s.m / 32 + 1) * 4;
  if (chosen == "tc_tile_offsets")  // 2 B value + 1 B position per nonzero, 34 B record header, 8 B index per tile
    return b.tiles >= 0 ? b.tiles : double(st.nnz) * 3 + double(st.tiles64) * (34 + 8);
  if (chosen == "tc_bitmap")  // 32 B per 16 x 16 tile, 4 B per stored pair
    return b.bitmap >= 0 ? b.bitmap : double((s.m + 15) / 16 * ((s.k + 63) / 64 * 4)) * 32 + double(st.pairs) * 4;
  if (chosen == "csr_gather")  // 4 B per nonzero, 4 B per row and 4096-column panel
    return b.gather >= 0 ? b.gather : double(st.nnz) * 4 + double(s.m * ((s.k + 4095) / 4096) + 1) * 4;
  if (chosen == "sparse24" || chosen == "cusparselt") return b.s24;  // cuSPARSELt: the same 2:4 bytes, about
  return b.dense;
}

template <class Auto>
void run_auto_paths(point& p, [[maybe_unused]] Auto& a, [[maybe_unused]] byte_table const& bt,
                    [[maybe_unused]] weight_stats const& st, [[maybe_unused]] std::vector<result>& out) {
#if BENCH16_HAS_AUTO
  auto one = [&](std::unique_ptr<ops::tc_auto_linear_plan<bf16>>& plan, std::string const& err,
                 std::string const& name, bool tuned) {
    if (!g_opt.want(name)) return;
    out.push_back(run_path(p, name, [&](result& r) {
      if (!plan) throw std::runtime_error("plan not made: " + err);
      auto const x = p.sc->xv(p.n);
      auto const y = p.sc->yv(p.n);
      r.t = measure([&] { plan->run(exec(), x, y, epilogue_none<float>()); });
      r.chosen = policy::tc_path_name(plan->path(p.n));
      r.reason = plan->reason(p.n);
      r.w_bytes = chosen_bytes(bt, st, p.sc->s, r.chosen);
      if (tuned) r.tune_s = a.tune_s;
    }));
  };
  one(a.plain, a.plain_error, "automatic", false);
  one(a.tuned, a.tuned_error, "automatic_tuned", true);
#endif
}

// ---------------------------------------------------------------------------------------------
// The dense point of a shape: the dense paths (once per (shape, N)) and automatic on the dense W.

std::map<std::int64_t, std::vector<result>> run_dense(shape_ctx& sc) {
  std::map<std::int64_t, std::vector<result>> dense_results;
  shape const s = sc.s;
  double const mk = double(s.m) * double(s.k);
#if BENCH16_HAS_AUTO
  auto_plans ap;
  if (g_opt.dense) ap = make_auto(sc.w_host);
#else
  int ap = 0;
#endif
  weight_stats st;
  st.nnz = s.m * s.k;
  st.blocks32 = st.blocks32_total = (s.m / 32) * (s.k / 32);
  st.tiles64 = st.tiles64_total = ((s.m + 63) / 64) * ((s.k + 63) / 64);
  st.pairs = s.m * ((s.k + 1) / 2);
  byte_table bt;
  bt.dense = 2 * mk;
  for (std::int64_t n : g_opt.ns) {
    point p;
    p.sc = &sc;
    p.structure = "dense";
    p.n = n;
    p.st = st;
    compute_ref(p, sc.w16.data());
    std::vector<result> rs;
    float const alpha = 1.f, beta = 0.f;
    int const M = int(s.m), N = int(n), K = int(s.k);
    {  // the baseline first: every speedup is relative to it
      result r;
      r.path = "cublas_bf16";
      r.n_run = n;
      SDNN_CUDA_CHECK(cudaMemsetAsync(sc.y.data(), 0xFF, sc.y.size(), g_dev->stream));
      r.t = measure([&] { cublas_bf16(sc, sc.w16.data(), n); });
      r.ok = true;
      r.w_bytes = 2 * mk;
      if (!p.ref.empty()) r.rel_err = rel_err(p, out_kind::bf16_nm, n);
      p.cublas_s = r.t.med_s;
      emit(p, r);
      rs.push_back(r);
    }
    if (g_opt.want("cublas_fp16"))
      rs.push_back(run_path(p, "cublas_fp16", [&](result& r) {
        r.t = measure([&] {
          B16_CUBLAS(cublasGemmEx(g_dev->blas, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &alpha, sc.wh.data(), CUDA_R_16F, K,
                                  sc.xh.data(), CUDA_R_16F, K, &beta, sc.y.data(), CUDA_R_16F, M, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
        });
        r.w_bytes = 2 * mk;
        r.out = out_kind::fp16_nm;
      }));
    if (g_opt.want("cublas_tf32"))
      rs.push_back(run_path(p, "cublas_tf32", [&](result& r) {
        r.t = measure([&] {
          B16_CUBLAS(cublasGemmEx(g_dev->blas, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &alpha, sc.w32.data(), CUDA_R_32F, K,
                                  sc.x32.data(), CUDA_R_32F, K, &beta, sc.y.data(), CUDA_R_32F, M,
                                  CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
        });
        r.w_bytes = 4 * mk;
        r.io_bytes = 4;
        r.out = out_kind::f32_nm;
      }));
    if (g_opt.want("tc_dense_mma"))
      rs.push_back(run_path(p, "tc_dense_mma", [&](result& r) {
        if (!sc.dense_plan) throw std::runtime_error("plan not made: " + sc.dense_plan_error);
        auto const x = sc.xv(n);
        auto const y = sc.yv(n);
        r.t = measure([&] { sc.dense_plan->run(exec(), x, y, epilogue_none<float>()); });
        r.w_bytes = double(sc.dense_plan->weight_bytes());
        r.detail = sc.dense_plan->describe(n);
      }));
    dense_results[n] = rs;
    if (g_opt.dense) run_auto_paths(p, ap, bt, st, rs);
    summarize(p, rs);
  }
  return dense_results;
}

// ---------------------------------------------------------------------------------------------
// A structured W: built once, every path over every N, then freed.

struct structure_spec {
  std::string kind;  // unstructured, blocks32, 2:4
  double sparsity = 0;
};

struct cusparse_mat {
  cusparseConstSpMatDescr_t d = nullptr;
  ~cusparse_mat() {
    if (d) cusparseDestroySpMat(d);
  }
};
struct cusparse_dn {
  cusparseConstDnMatDescr_t b = nullptr;
  cusparseDnMatDescr_t c = nullptr;
  ~cusparse_dn() {
    if (b) cusparseDestroyDnMat(b);
    if (c) cusparseDestroyDnMat(c);
  }
};

// Y^T[M x N] = W[M x K] X^T[K x N] by cusparseSpMM: X (row-major N x K) is B as K x N column-major,
// ld K; Y (row-major N x M) is C as M x N column-major, ld M. Buffer size queried per N.
timing time_cusparse(shape_ctx& sc, cusparseConstSpMatDescr_t a, std::int64_t n, cusparseSpMMAlg_t alg) {
  cusparse_dn dn;
  B16_CUSPARSE(cusparseCreateConstDnMat(&dn.b, sc.s.k, n, sc.s.k, sc.x16.data(), CUDA_R_16BF, CUSPARSE_ORDER_COL));
  B16_CUSPARSE(cusparseCreateDnMat(&dn.c, sc.s.m, n, sc.s.m, sc.y.data(), CUDA_R_16BF, CUSPARSE_ORDER_COL));
  float const alpha = 1.f, beta = 0.f;
  std::size_t bytes = 0;
  B16_CUSPARSE(cusparseSpMM_bufferSize(g_dev->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                       &alpha, a, dn.b, &beta, dn.c, CUDA_R_32F, alg, &bytes));
  if (bytes > g_dev->sp_ws.size()) {
    SDNN_CUDA_CHECK(cudaStreamSynchronize(g_dev->stream));
    g_dev->sp_ws = buffer<unsigned char, device_space>(bytes, exec());
  }
  void* ws = g_dev->sp_ws.size() ? g_dev->sp_ws.data() : nullptr;
  return measure([&] {
    B16_CUSPARSE(cusparseSpMM(g_dev->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                              &alpha, a, dn.b, &beta, dn.c, CUDA_R_32F, alg, ws));
  });
}

void run_structure(shape_ctx& sc, structure_spec const& spec, std::map<std::int64_t, std::vector<result>> const& dense) {
  shape const s = sc.s;
  double const mk = double(s.m) * double(s.k);
  double const t_build0 = now_s();
  auto const e = exec();
  bool const unstructured = spec.kind == "unstructured", blocks = spec.kind == "blocks32", s24 = spec.kind == "2:4";
  bool const any_n_csr_float =
      std::any_of(g_opt.ns.begin(), g_opt.ns.end(), [](std::int64_t n) { return n <= g_opt.csr_float_max_n; });
  bool const do_tiles = (unstructured || blocks) && g_opt.want("tc_tile_offsets");
  bool const do_bitmap = (unstructured || blocks) && g_opt.want("tc_bitmap") &&
                         std::any_of(g_opt.ns.begin(), g_opt.ns.end(), [](std::int64_t n) { return n <= g_opt.bitmap_max_n; });
  bool const do_gather = (unstructured || blocks) && g_opt.want("csr_gather") &&
                         std::any_of(g_opt.ns.begin(), g_opt.ns.end(), [](std::int64_t n) { return n <= g_opt.gather_max_n; });
  bool const do_blocks = (blocks || (unstructured && spec.sparsity >= 0.985)) && g_opt.want("tc_block32");
  bool const do_s24 = s24 && g_opt.want("sparse24");
  [[maybe_unused]] bool const do_lt = s24 && g_opt.want("cusparselt") && BENCH16_HAS_CUSPARSELT;
  bool const do_csr = (unstructured || blocks) && g_opt.want("cusparse_csr_bf16");
  bool const do_bsr = blocks && g_opt.want("cusparse_bsr_bf16");
  bool const do_csr_float = (unstructured || blocks) && g_opt.want("sdnn_csr_float") && any_n_csr_float;

  // The host W and its formats (built concurrently).
  std::uint64_t const seed = std::uint64_t(s.m) * 131 + std::uint64_t(s.k) * 7 + std::uint64_t(spec.sparsity * 10000) +
                             (unstructured ? 11 : blocks ? 22 : 33);
  dense_matrix<bf16> w;
  sparse24_matrix<bf16> w24;
  if (s24) {
    auto const d = generate(s, 0, 0.0, seed);
    w24 = ops::prune_sparse24(d.view());
    w = to_dense(w24);
  } else {
    w = generate(s, unstructured ? 1 : 2, spec.sparsity, seed);
  }
  auto f_stats = std::async(std::launch::async, [&] { return stats_of(w); });
  auto f_tiles = std::async(std::launch::async, [&] {
    return do_tiles ? tile_offsets_from_dense(w.view()) : tile_offsets_matrix<bf16>{};
  });
  auto f_blocks = std::async(std::launch::async, [&] {
    return do_blocks || do_bsr ? block_sparse_from_dense(w.view(), 32, 32) : block_sparse_matrix<bf16>{};
  });
  auto f_csr = std::async(std::launch::async, [&] { return do_csr || do_csr_float ? csr_of(w, do_csr_float) : host_csr{}; });
  // The automatic plans meanwhile (their host work overlaps the threads above); tuned after them.
#if BENCH16_HAS_AUTO
  auto_plans ap = make_auto(w, false);
#else
  int ap = 0;
#endif
  weight_stats const st = f_stats.get();
  double const zeros = 1.0 - double(st.nnz) / mk;

  // Device copies and plans; a plan that cannot be made is each N's error line.
  buffer<bf16, device_space> w_dev = to_device(w.data(), w.size(), e);  // the reference (and cuSPARSELt's W)
  byte_table bt;
  bt.dense = 2 * mk;
  bt.s24 = mk + mk / 8;  // kept values + 2-bit positions
  std::unique_ptr<ops::tc_linear_plan<policy::tc_tile_offsets_mma, bf16>> tiles_plan;
  std::unique_ptr<ops::tc_linear_plan<policy::tc_block_sparse_mma, bf16>> block_plan;
  std::unique_ptr<ops::tc_bitmap_plan<bf16>> bitmap_plan;
  std::unique_ptr<ops::csr_gather_plan<bf16>> gather_plan;
  std::unique_ptr<ops::sparse24_linear_plan<bf16>> s24_plan;
  std::string tiles_err, block_err, s24_err, bitmap_err, gather_err;
  auto try_make = [&](auto&& make, std::string& err) {
    try {
      make();
    } catch (std::exception const& x) {
      err = x.what();
      cudaGetLastError();
    }
  };
  {
    auto t = f_tiles.get();
    if (do_tiles)
      try_make([&] { tiles_plan = std::make_unique<ops::tc_linear_plan<policy::tc_tile_offsets_mma, bf16>>(t, e); },
               tiles_err);
    if (tiles_plan) bt.tiles = double(tiles_plan->weight_bytes());
    SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));  // the host copy may go
  }
  if (do_bitmap)
    try_make([&] { bitmap_plan = std::make_unique<ops::tc_bitmap_plan<bf16>>(std::as_const(w).view(), e); }, bitmap_err);
  if (bitmap_plan) bt.bitmap = double(bitmap_plan->weight_bytes());
  if (do_gather)
    try_make([&] { gather_plan = std::make_unique<ops::csr_gather_plan<bf16>>(std::as_const(w).view(), e); }, gather_err);
  if (gather_plan) bt.gather = double(gather_plan->weight_bytes());
  block_sparse_matrix<bf16> bsr_host = f_blocks.get();
  if (do_blocks)
    try_make([&] { block_plan = std::make_unique<ops::tc_linear_plan<policy::tc_block_sparse_mma, bf16>>(bsr_host, e); },
             block_err);
  if (block_plan) bt.block32 = double(block_plan->weight_bytes());
  if (do_s24) try_make([&] { s24_plan = std::make_unique<ops::sparse24_linear_plan<bf16>>(w24, e); }, s24_err);

  // cuSPARSE: CSR (bf16 values; the float values of sdnn_csr_float share its indices) and BSR.
  host_csr hc = f_csr.get();
  std::int64_t const nnz = std::int64_t(hc.col_idx.size());
  buffer<std::int32_t, device_space> rp, ci, brp, bci;
  buffer<bf16, device_space> v16, bv;
  buffer<float, device_space> v32;
  cusparse_mat csr_d, bsr_d;
  std::string csr_err, bsr_err;
  if (do_csr || do_csr_float) {
    rp = to_device(hc.row_ptr.data(), hc.row_ptr.size(), e);
    ci = to_device(hc.col_idx.data(), hc.col_idx.size(), e);
    if (do_csr) v16 = to_device(hc.v16.data(), hc.v16.size(), e);
    if (do_csr_float) v32 = to_device(hc.v32.data(), hc.v32.size(), e);
    if (do_csr)
      try_make(
          [&] {
            B16_CUSPARSE(cusparseCreateConstCsr(&csr_d.d, s.m, s.k, nnz, rp.data(), ci.data(), v16.data(),
                                                CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                                CUDA_R_16BF));
          },
          csr_err);
  }
  std::int64_t const nnzb = bsr_host.nnzb();
  if (do_bsr) {
    brp = to_device(bsr_host.row_ptr().data(), bsr_host.row_ptr().size(), e);
    bci = to_device(bsr_host.col_idx().data(), bsr_host.col_idx().size(), e);
    bv = to_device(bsr_host.values().data(), bsr_host.values().size(), e);
    try_make(
        [&] {
          B16_CUSPARSE(cusparseCreateConstBsr(&bsr_d.d, s.m / 32, s.k / 32, nnzb, 32, 32, brp.data(), bci.data(),
                                              bv.data(), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                              CUSPARSE_INDEX_BASE_ZERO, CUDA_R_16BF, CUSPARSE_ORDER_ROW));
        },
        bsr_err);
  }
#if BENCH16_HAS_AUTO
  tune_auto(ap);  // measures: after the host threads, with every other plan of this W built
#endif
  SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
  w = dense_matrix<bf16>{};  // the host copies go; the device ones stay for every N
  w24 = sparse24_matrix<bf16>{};
  bsr_host = block_sparse_matrix<bf16>{};
  hc = host_csr{};
  std::fprintf(stderr, "[%7.1f s] %s %s %g%%: built in %.1f s (zeros %.4f, %lld nonzeros, %lld of %lld blocks, %lld of %lld tiles)\n",
               now_s() - g_t0, shape_name(s).c_str(), spec.kind.c_str(), spec.sparsity * 100, now_s() - t_build0,
               zeros, static_cast<long long>(st.nnz), static_cast<long long>(st.blocks32),
               static_cast<long long>(st.blocks32_total), static_cast<long long>(st.tiles64),
               static_cast<long long>(st.tiles64_total));

  for (std::int64_t n : g_opt.ns) {
    point p;
    p.sc = &sc;
    p.structure = spec.kind;
    p.sparsity = spec.sparsity;
    p.zeros = zeros;
    p.n = n;
    p.st = st;
    std::vector<result> rs = dense.at(n);  // the dense paths of this (shape, N): in "fastest", not re-emitted
    for (auto const& r : rs)
      if (r.path == "cublas_bf16") p.cublas_s = r.t.med_s;
    compute_ref(p, w_dev.data());
    auto const x = sc.xv(n);
    auto const y = sc.yv(n);
    auto plan_path = [&](std::string const& name, auto const& plan, std::string const& err) {
      rs.push_back(run_path(p, name, [&](result& r) {
        if (!plan) throw std::runtime_error("plan not made: " + err);
        r.t = measure([&] { plan->run(exec(), x, y, epilogue_none<float>()); });
        r.w_bytes = double(plan->weight_bytes());
        r.detail = plan->describe(n);
      }));
    };
    // The automatic layer first: after cuSPARSE's CSR baseline (up to 45 ms a call at N = 8) one of
    // its timings ran 1.25x slower than the same kernel timed just before that baseline.
    run_auto_paths(p, ap, bt, st, rs);
    if (do_tiles) plan_path("tc_tile_offsets", tiles_plan, tiles_err);
    if (do_bitmap && n <= g_opt.bitmap_max_n) plan_path("tc_bitmap", bitmap_plan, bitmap_err);
    if (do_gather && n <= g_opt.gather_max_n) plan_path("csr_gather", gather_plan, gather_err);
    if (do_blocks) plan_path("tc_block32", block_plan, block_err);
    if (do_s24)
      rs.push_back(run_path(p, "sparse24", [&](result& r) {
        if (!s24_plan) throw std::runtime_error("plan not made: " + s24_err);
        r.t = measure([&] { s24_plan->run(exec(), x, y, epilogue_none<float>()); });
        r.w_bytes = bt.s24;
        r.detail = s24_plan->describe_run(n);
      }));
#if BENCH16_HAS_CUSPARSELT
    if (do_lt)
      rs.push_back(run_path(p, "cusparselt", [&](result& r) {
        dense_view<bf16 const> const wv{s.m, s.k, s.k, w_dev.data()};
        std::unique_ptr<vendor::cusparselt_linear<bf16>> lt;
        std::int64_t nr = n;
        try {
          lt = std::make_unique<vendor::cusparselt_linear<bf16>>(wv, n, exec());
        } catch (std::exception const& err) {
          cudaGetLastError();
          nr = (n + 15) / 16 * 16;  // cuSPARSELt's size rules: N rounded up to 16
          r.note = std::string("N = ") + std::to_string(n) + " refused (" + err.what() + "); N = " +
                   std::to_string(nr) + " ran";
          if (nr == n || nr > sc.nmax) throw;
          lt = std::make_unique<vendor::cusparselt_linear<bf16>>(wv, nr, exec());
        }
        r.n_run = nr;
        auto const xr = sc.xv(nr);
        auto const yr = sc.yv(nr);
        r.t = measure([&] { lt->run(exec(), xr, yr); });
        r.w_bytes = double(lt->compressed_bytes());
        r.detail = "ALG_DEFAULT + MatmulSearch";
      }));
#endif
    if (do_csr)
      rs.push_back(run_path(p, "cusparse_csr_bf16", [&](result& r) {
        if (!csr_d.d) throw std::runtime_error(csr_err);
        r.t = time_cusparse(sc, csr_d.d, n, CUSPARSE_SPMM_ALG_DEFAULT);
        r.w_bytes = double(nnz) * 6 + double(s.m + 1) * 4;
        r.detail = "CSR int32, CUSPARSE_SPMM_ALG_DEFAULT, B = X col-major K x N, C = Y col-major M x N";
      }));
    if (do_bsr)
      rs.push_back(run_path(p, "cusparse_bsr_bf16", [&](result& r) {
        if (!bsr_d.d) throw std::runtime_error(bsr_err);
        r.t = time_cusparse(sc, bsr_d.d, n, CUSPARSE_SPMM_BSR_ALG1);
        r.w_bytes = double(nnzb) * (32 * 32 * 2 + 4) + double(s.m / 32 + 1) * 4;
        r.detail = "BSR 32x32 row-major blocks, int32, CUSPARSE_SPMM_BSR_ALG1";
      }));
    if (do_csr_float && n <= g_opt.csr_float_max_n)
      rs.push_back(run_path(p, "sdnn_csr_float", [&](result& r) {
        csr_view<float, int> const a{int(s.m), int(s.k), int(nnz), rp.data(), ci.data(), v32.data()};
        dense_view<float const> const b{s.k, n, n, xt_for(sc, n)};
        dense_view<float> const c{s.m, n, n, sc.y32()};
        ops::csr_spmm_plan<policy::automatic, float, int> plan(a, b, c, exec());
        r.t = measure([&] { plan.run(exec(), b, c, epilogue_none<float>()); });
        r.w_bytes = double(nnz) * 8 + double(s.m + 1) * 4;
        r.io_bytes = 4;
        r.out = out_kind::f32_mn;
        r.chosen = policy::choice_name(plan.choice());
        r.reason = plan.reason();
        r.detail = "C = W X^T: A = W float CSR, B = X^T K x N, C = Y^T M x N (transposes not timed)";
      }));
    summarize(p, rs);
  }
  SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));  // everything below is freed on return
}

}  // namespace

int main(int argc, char** argv) {
  parse(argc, argv);
  g_t0 = now_s();
  try {
    device_ctx dev;
    g_dev = &dev;
    SDNN_CUDA_CHECK(cudaStreamCreate(&dev.stream));
    B16_CUBLAS(cublasCreate(&dev.blas));
    B16_CUBLAS(cublasSetStream(dev.blas, dev.stream));
    B16_CUSPARSE(cusparseCreate(&dev.sparse));
    B16_CUSPARSE(cusparseSetStream(dev.sparse, dev.stream));
    SDNN_CUDA_CHECK(cudaEventCreate(&dev.a));
    SDNN_CUDA_CHECK(cudaEventCreate(&dev.b));
    {
      int d = 0, l2 = 0;
      SDNN_CUDA_CHECK(cudaGetDevice(&d));
      SDNN_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, d));
      dev.flush = buffer<unsigned char, device_space>(std::size_t(2) * std::size_t(std::max(l2, 1 << 20)), exec());
      SDNN_CUDA_CHECK(cudaMemsetAsync(dev.flush.data(), 0x5a, dev.flush.size(), dev.stream));
      dev.sink = buffer<unsigned, device_space>(1, exec());
      int sms = 0, per_sm = 0;
      SDNN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d));
      SDNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, bench16_read, 256, 0));
      dev.read_grid = sms * std::max(per_sm, 1);
    }
    auto const& mi = machine();
    std::fprintf(stderr,
                 "bench_linear16: %s, CUDA %s (driver %s), %s, commit %s; automatic %s, cuSPARSELt %s; %u host "
                 "threads\n",
                 mi.gpu.c_str(), mi.cuda_runtime.c_str(), mi.cuda_driver.c_str(), mi.date.c_str(), g_opt.commit.c_str(),
                 BENCH16_HAS_AUTO ? "compiled" : "not compiled (no linear/op/tc_auto.cuh)",
                 BENCH16_HAS_CUSPARSELT ? "compiled" : "not compiled", n_threads());
    std::vector<structure_spec> specs;
    for (double sp : g_opt.unstructured) specs.push_back({"unstructured", sp});
    for (double sp : g_opt.blocked) specs.push_back({"blocks32", sp});
    if (g_opt.sparse24) specs.push_back({"2:4", 0.5});
    for (shape s : g_opt.shapes) {
      double const t0 = now_s();
      auto sc = make_shape(s);
      std::fprintf(stderr, "[%7.1f s] %s: shape data in %.1f s\n", now_s() - g_t0, shape_name(s).c_str(), now_s() - t0);
      auto const dense = run_dense(*sc);
      for (auto const& spec : specs) run_structure(*sc, spec, dense);
      SDNN_CUDA_CHECK(cudaStreamSynchronize(dev.stream));
    }
    SDNN_CUDA_CHECK(cudaStreamSynchronize(dev.stream));
    dev.flush = {};
    dev.sp_ws = {};
    dev.floor_src = {};
    dev.sink = {};
    SDNN_CUDA_CHECK(cudaStreamSynchronize(dev.stream));
    cusparseDestroy(dev.sparse);
    cublasDestroy(dev.blas);
    cudaEventDestroy(dev.a);
    cudaEventDestroy(dev.b);
    g_dev = nullptr;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "bench_linear16: fatal: %s\n", e.what());
    std::fprintf(stderr, "bench_linear16: elapsed %.1f s\n", now_s() - g_t0);
    return 1;
  }
  std::fprintf(stderr, "bench_linear16: elapsed %.1f s\n", now_s() - g_t0);
  return 0;
}
