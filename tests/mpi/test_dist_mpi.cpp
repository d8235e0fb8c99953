// sdnn::dist over real MPI ranks (host backend; CTest label `mpi`, run with 2 and 3 ranks).
//
//   test_dist_mpi [agree]            the gathered categories equal a single-process run of the
//                                    host reference, for block and nnz partitions, several input
//                                    counts (ranks with no input included); exit 0 on every rank
//   test_dist_mpi mismatch-weights   the last rank edits one weight: every rank must report the
//                                    disagreement (mismatch_error) and exit non-zero
//   test_dist_mpi mismatch-inputs    the last rank has one input fewer: the same
//   test_dist_mpi local-failure      rank 1 fails to read a file inside a collective_step: every
//                                    rank must report rank 1's error and exit non-zero
//   test_dist_mpi abort              rank 0 throws outside any collective while the others wait
//                                    in one: run_guarded aborts the job (non-zero, no hang)
//   test_dist_mpi bad-category       the last rank reports an id outside its block: every rank
//                                    must report gather_categories' error
// Every rank prints "test_dist_mpi: rank R: error: ..." for the failures (run_guarded);
// tests/mpi/run_mpi.cmake checks that each rank did and that the exit status is non-zero.
#include "dist_test_problem.hpp"

#include <sdnn/dist/mpi.hpp>
#include <sdnn/challenge/tsv.hpp>
#include <sdnn/challenge/reference.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

using namespace sdnn;
namespace dmpi = sdnn::dist::mpi;

namespace {

int failures = 0;

#define CHECK_THAT(cond, ...)                                                                    \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      ++failures;                                                                                \
      std::fprintf(stderr, "test_dist_mpi: rank %d: CHECK failed at line %d: %s: %s\n",          \
                   dmpi::rank(MPI_COMM_WORLD), __LINE__, #cond, sdnn::detail::concat(__VA_ARGS__).c_str()); \
    }                                                                                            \
  } while (0)

// One distributed run of the test problem; returns the categories on rank 0 (empty elsewhere).
std::vector<std::int64_t> distributed_categories(MPI_Comm comm, sdnn_test::dist_problem const& prob, bool by_nnz,
                                                 bool broadcast) {
  int const me = dmpi::rank(comm), ranks = dmpi::size(comm);
  dmpi::check_agreement(comm, dist::network_signature(prob.layers, prob.bias, prob.cap, prob.inputs.rows())
                                  .add_hash("inputs hash", dist::hash_csr(prob.inputs.view())));
  dist::partition p = by_nnz ? dist::nnz_partition(prob.inputs.view(), ranks)
                             : dist::block_partition(prob.inputs.rows(), ranks);
  if (broadcast) {
    dist::partition const got = dmpi::broadcast_partition(comm, me == 0 ? p : dist::partition());
    CHECK_THAT(got == p, "broadcast_partition differs from the local one");
    p = got;
  }
  auto const mine = p.range(me);
  std::vector<std::int64_t> ids;
  dist::stopwatch clock;
  dmpi::collective_step(comm, "inference", [&] {
    auto const y = dist::slice_rows(prob.inputs.view(), mine);
    ids = dist::to_global_ids(
        reference::challenge_categories(reference::challenge_infer(y, prob.layers, prob.bias, prob.cap)), mine);
  });
  auto const times = dmpi::gather_times(comm, clock.seconds());
  auto const counts = dmpi::gather_counts(comm, mine.size());
  if (me == 0) {
    CHECK_THAT(static_cast<int>(times.size()) == ranks, "gather_times: ", times.size(), " times");
    std::int64_t total = 0;
    for (auto c : counts) total += c;
    CHECK_THAT(total == prob.inputs.rows(), "gather_counts adds up to ", total);
    std::fputs(dist::timing_report(times, counts).c_str(), stdout);
  } else {
    CHECK_THAT(times.empty() && counts.empty(), "non-root ranks receive no times");
  }
  return dmpi::gather_categories(comm, ids, &p);
}

void agree(MPI_Comm comm) {
  int const me = dmpi::rank(comm), ranks = dmpi::size(comm);
  for (std::int32_t n : {0, 1, 2, 300, 301}) {
    auto const prob = sdnn_test::make_dist_problem(n);
    for (bool by_nnz : {false, true}) {
      auto const got = distributed_categories(comm, prob, by_nnz, /*broadcast*/ n % 2 == 1);
      if (me == 0) {
        auto const whole =
            reference::challenge_categories(reference::challenge_infer(prob.inputs, prob.layers, prob.bias, prob.cap));
        std::vector<std::int64_t> const expected(whole.begin(), whole.end());
        CHECK_THAT(got == expected, n, " inputs, ", by_nnz ? "nnz" : "block", " partition over ", ranks,
                   " ranks: ", got.size(), " categories gathered, ", expected.size(), " expected");
        if (n == 301) CHECK_THAT(expected.size() > 20 && expected.size() < 280, "trivial problem");
        std::printf("%d inputs, %s partition, %d ranks: %zu categories, equal to one process: %s\n", n,
                    by_nnz ? "nnz" : "block", ranks, got.size(), got == expected ? "yes" : "NO");
      } else {
        CHECK_THAT(got.empty(), "non-root ranks receive no categories");
      }
    }
  }
  int all_failures = 0;
  SDNN_MPI_CHECK(MPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, comm));
  if (all_failures != 0) throw dmpi::collective_error(std::to_string(all_failures) + " checks failed");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm const comm = MPI_COMM_WORLD;
  std::string const mode = argc > 1 ? argv[1] : "agree";
  int const rc = dmpi::run_guarded(comm, "test_dist_mpi", [&] {
    int const me = dmpi::rank(comm), last = dmpi::size(comm) - 1;
    if (mode == "agree") {
      agree(comm);
    } else if (mode == "mismatch-weights" || mode == "mismatch-inputs") {
      bool const fewer = mode == "mismatch-inputs" && me == last;
      auto prob = sdnn_test::make_dist_problem(fewer ? 99 : 100);
      if (mode == "mismatch-weights" && me == last) prob.layers[5].values()[7] = 0.125f;
      distributed_categories(comm, prob, false, false);
    } else if (mode == "local-failure") {
      dmpi::collective_step(comm, "reading the inputs", [&] {
        if (me == 1) io::read_challenge_images("/nonexistent/sdnn-test-inputs.tsv", 256);
      });
    } else if (mode == "abort") {
      if (me == 0) throw std::runtime_error("a bug on rank 0 only");
      int x = 0, y = 0;  // the other ranks wait in a collective rank 0 never joins
      MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, comm);
    } else if (mode == "bad-category") {
      auto const p = dist::block_partition(10, dmpi::size(comm));
      std::vector<std::int64_t> ids;
      if (me == last) ids = {1};  // input 1 belongs to rank 0
      dmpi::gather_categories(comm, ids, &p);
    } else {
      throw dmpi::collective_error("unknown mode '" + mode + "'");
    }
    if (me == 0) std::printf("test_dist_mpi %s: passed on %d ranks\n", mode.c_str(), last + 1);
  });
  MPI_Finalize();
  return rc;
}
