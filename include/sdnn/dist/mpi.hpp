// sdnn/dist/mpi.hpp - the collectives of a distributed run over MPI (host only).
//
// Needs MPI: link the CMake target sdnn::mpi (sdnn::sdnn + MPI::MPI_CXX, SDNN_HAS_MPI=1; built
// when find_package(MPI COMPONENTS CXX) finds an MPI, e.g. `apt-get install libopenmpi-dev`).
// The rest of sdnn/dist (partition, categories, signature, timing) needs no MPI. Only the C API
// of MPI is used (OpenMPI, MPICH, ...); the program owns MPI_Init / MPI_Finalize. Failure, never
// a hang: every helper returns on every rank or throws a collective_error on every rank, with the
// same message. A whole run, and why no rank waits forever: docs/foundation.md#distributed-runs.
#pragma once

#if !defined(SDNN_HAS_MPI) || !SDNN_HAS_MPI
#error "sdnn/dist/mpi.hpp needs MPI: link the CMake target sdnn::mpi (built when CMake finds MPI; apt-get install libopenmpi-dev)"
#endif

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API only: no deprecated C++ bindings
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/dist/categories.hpp"
#include "sdnn/dist/partition.hpp"
#include "sdnn/dist/signature.hpp"
#include "sdnn/dist/timing.hpp"

namespace sdnn::dist::mpi {

// Thrown on every rank of the communicator with the same message: each helper decides from data
// all ranks hold after the same collective calls, so every rank reaches the same verdict.
class collective_error : public ::sdnn::error {
 public:
  using ::sdnn::error::error;
};

// The ranks disagree on a signature (check_agreement).
class mismatch_error : public collective_error {
 public:
  using collective_error::collective_error;
};

// Local work failed on at least one rank (collective_step).
class rank_failure : public collective_error {
 public:
  rank_failure(std::string const& what, int first_failed_rank, int failed_ranks)
      : collective_error(what), first_(first_failed_rank), count_(failed_ranks) {}
  int first_failed_rank() const noexcept { return first_; }
  int failed_ranks() const noexcept { return count_; }

 private:
  int first_, count_;
};

namespace detail {
[[noreturn]] inline void throw_mpi(char const* call, int status, char const* file, int line) {
  char text[MPI_MAX_ERROR_STRING + 1] = {};
  int len = 0;
  if (MPI_Error_string(status, text, &len) != MPI_SUCCESS) std::snprintf(text, sizeof text, "MPI error %d", status);
  throw ::sdnn::library_error("MPI", call, status, text, file, line);
}
}  // namespace detail

#define SDNN_MPI_CHECK(call)                                                                    \
  do {                                                                                          \
    int const sdnn_mpi_status_ = (call);                                                        \
    if (sdnn_mpi_status_ != MPI_SUCCESS)                                                        \
      ::sdnn::dist::mpi::detail::throw_mpi(#call, sdnn_mpi_status_, __FILE__, __LINE__);        \
  } while (0)

inline int rank(MPI_Comm comm) {
  int r = 0;
  SDNN_MPI_CHECK(MPI_Comm_rank(comm, &r));
  return r;
}
inline int size(MPI_Comm comm) {
  int s = 0;
  SDNN_MPI_CHECK(MPI_Comm_size(comm, &s));
  return s;
}

namespace detail {
// Broadcasts root's text (at most 64 KiB of it) to every rank.
inline std::string broadcast_text(MPI_Comm comm, std::string text, int root) {
  constexpr std::size_t limit = 1u << 16;
  if (text.size() > limit) text.resize(limit);
  unsigned long long len = text.size();
  SDNN_MPI_CHECK(MPI_Bcast(&len, 1, MPI_UNSIGNED_LONG_LONG, root, comm));
  text.resize(static_cast<std::size_t>(len));
  if (len != 0) SDNN_MPI_CHECK(MPI_Bcast(text.data(), static_cast<int>(len), MPI_CHAR, root, comm));
  return text;
}

// "0, 2, 5-7" (at most `shown` ranges, then "and N more ranks").
inline std::string rank_list(std::vector<int> const& ranks) {
  std::string out;
  std::size_t i = 0, ranges = 0;
  constexpr std::size_t shown = 8;
  while (i < ranks.size() && ranges < shown) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
    ++ranges;
  }
  if (i < ranks.size()) out += " and " + std::to_string(ranks.size() - i) + " more ranks";
  return out;
}

// For each distinct value (in order of the first rank holding it): the ranks holding it.
inline std::string describe_values(std::vector<std::uint64_t> const& per_rank, field_kind kind) {
  std::vector<std::pair<std::uint64_t, std::vector<int>>> groups;
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    auto it = groups.begin();
    while (it != groups.end() && it->first != per_rank[r]) ++it;
    if (it == groups.end()) {
      groups.push_back({per_rank[r], {}});
      it = groups.end() - 1;
    }
    it->second.push_back(static_cast<int>(r));
  }
  std::string out;
  for (auto const& g : groups) {
    if (!out.empty()) out += "; ";
    out += format_field(kind, g.first) + (g.second.size() == 1 ? " on rank " : " on ranks ") + rank_list(g.second);
  }
  return out;
}
}  // namespace detail

// Runs the local work `step` on every rank (reading, building, computing), then agrees on the
// outcome: if it threw on any rank, every rank throws rank_failure naming the first failing rank
// and its message. `step` must not make MPI calls on comm: a rank that throws in the middle of
// one would leave the others waiting in it.
template <class Step>
void collective_step(MPI_Comm comm, char const* what, Step&& step) {
  bool ok = true;
  std::string message;
  try {
    step();
  } catch (std::exception const& e) {
    ok = false;
    message = e.what();
  } catch (...) {
    ok = false;
    message = "an exception that is not a std::exception";
  }
  int const me = rank(comm), ranks = size(comm);
  int const mine[2] = {ok ? ranks : me, ok ? 0 : 1};
  int first = ranks, failed = 0;
  SDNN_MPI_CHECK(MPI_Allreduce(&mine[0], &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == ranks) return;  // every rank succeeded
  SDNN_MPI_CHECK(MPI_Allreduce(&mine[1], &failed, 1, MPI_INT, MPI_SUM, comm));
  std::string const text = detail::broadcast_text(comm, message, first);
  throw rank_failure(::sdnn::detail::concat(what, " failed on rank ", first,
                                            failed > 1 ? " (and on " + std::to_string(failed - 1) + (failed == 2 ? " other rank)" : " other ranks)") : "",
                                            ": ", text),
                     first, failed);
}

// Every rank must hold the same signature (same fields, same values). MPI_Allreduce of the
// fields' min and max: any field that differs (or a different list of fields) makes every rank
// throw mismatch_error naming each differing field and which ranks hold which value.
inline void check_agreement(MPI_Comm comm, signature const& sig) {
  int const ranks = size(comm);
  auto const& fields = sig.fields();
  // The layout first: the number of fields and their names and kinds. Min of x and of ~x
  // gives min and max in one reduction.
  std::uint64_t const count = fields.size(), layout = sig.layout_hash();
  std::uint64_t const lay[4] = {count, layout, ~count, ~layout};
  std::uint64_t lay_min[4] = {};
  SDNN_MPI_CHECK(MPI_Allreduce(lay, lay_min, 4, MPI_UINT64_T, MPI_MIN, comm));
  if (lay_min[0] != ~lay_min[2] || lay_min[1] != ~lay_min[3]) {
    std::uint64_t const mine[2] = {count, layout};
    std::vector<std::uint64_t> all(2 * static_cast<std::size_t>(ranks));
    SDNN_MPI_CHECK(MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, comm));
    std::vector<std::uint64_t> layouts(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) layouts[static_cast<std::size_t>(r)] = all[2 * static_cast<std::size_t>(r) + 1];
    throw mismatch_error("dist: the ranks built different signatures (other fields or field names; layout " +
                         detail::describe_values(layouts, field_kind::hash) + ")");
  }
  std::size_t const n = fields.size();
  std::vector<std::uint64_t> v(2 * n), v_min(2 * n);
  for (std::size_t k = 0; k < n; ++k) {
    v[k] = fields[k].value;
    v[n + k] = ~fields[k].value;
  }
  if (n != 0) SDNN_MPI_CHECK(MPI_Allreduce(v.data(), v_min.data(), static_cast<int>(2 * n), MPI_UINT64_T, MPI_MIN, comm));
  std::vector<std::size_t> differ;
  for (std::size_t k = 0; k < n; ++k)
    if (v_min[k] != ~v_min[n + k]) differ.push_back(k);
  if (differ.empty()) return;
  std::vector<std::uint64_t> all(n * static_cast<std::size_t>(ranks));
  SDNN_MPI_CHECK(MPI_Allgather(v.data(), static_cast<int>(n), MPI_UINT64_T, all.data(), static_cast<int>(n),
                               MPI_UINT64_T, comm));
  std::string msg = "dist: the ranks disagree on the problem (" + std::to_string(differ.size()) + " of " +
                    std::to_string(n) + " fields differ):";
  for (std::size_t k : differ) {
    std::vector<std::uint64_t> per_rank(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) per_rank[static_cast<std::size_t>(r)] = all[static_cast<std::size_t>(r) * n + k];
    msg += " " + fields[k].name + ": " + detail::describe_values(per_rank, fields[k].kind) + ".";
  }
  throw mismatch_error(msg);
}

// root's partition on every rank. Throws collective_error on every rank when its number of
// parts is not the communicator's size.
inline partition broadcast_partition(MPI_Comm comm, partition const& p, int root = 0) {
  long long parts = p.parts();
  SDNN_MPI_CHECK(MPI_Bcast(&parts, 1, MPI_LONG_LONG, root, comm));
  int const ranks = size(comm);
  if (parts != ranks)
    throw collective_error(::sdnn::detail::concat("dist: rank ", root, "'s partition has ", parts, " parts for ", ranks,
                                                  " ranks"));
  std::vector<std::int64_t> off = rank(comm) == root ? p.offsets() : std::vector<std::int64_t>(static_cast<std::size_t>(parts) + 1);
  SDNN_MPI_CHECK(MPI_Bcast(off.data(), static_cast<int>(off.size()), MPI_INT64_T, root, comm));
  return partition(std::move(off));
}

// Every rank's global 1-based category ids (ascending; dist::to_global_ids) to root
// (MPI_Allgather of the counts as int64, MPI_Gatherv of the ids as MPI_INT64_T), which returns
// them merged and checked by dist::merge_categories (ascending, no duplicates; with `blocks`,
// each rank's ids in its block) and broadcasts the verdict; the other ranks return an empty
// list. A bad list throws collective_error on every rank. MPI_Gatherv counts are int: more than
// INT_MAX ids in all is refused (every rank knows the counts, so every rank throws).
inline std::vector<std::int64_t> gather_categories(MPI_Comm comm, std::vector<std::int64_t> const& mine,
                                                   partition const* blocks = nullptr, int root = 0) {
  int const ranks = size(comm), me = rank(comm);
  std::int64_t const n = static_cast<std::int64_t>(mine.size());
  std::vector<std::int64_t> counts(static_cast<std::size_t>(ranks));
  SDNN_MPI_CHECK(MPI_Allgather(&n, 1, MPI_INT64_T, counts.data(), 1, MPI_INT64_T, comm));
  std::int64_t total = 0;
  for (std::int64_t c : counts) total += c;
  if (total > INT_MAX)
    throw collective_error(::sdnn::detail::concat("dist::gather_categories: ", total,
                                                  " ids in all exceed MPI_Gatherv's int counts (", INT_MAX, ")"));
  std::vector<int> recv_counts, displs;
  std::vector<std::int64_t> all;
  if (me == root) {
    recv_counts.resize(static_cast<std::size_t>(ranks));
    displs.resize(static_cast<std::size_t>(ranks));
    int off = 0;
    for (int r = 0; r < ranks; ++r) {
      recv_counts[static_cast<std::size_t>(r)] = static_cast<int>(counts[static_cast<std::size_t>(r)]);
      displs[static_cast<std::size_t>(r)] = off;
      off += recv_counts[static_cast<std::size_t>(r)];
    }
    all.resize(static_cast<std::size_t>(total));
  }
  SDNN_MPI_CHECK(MPI_Gatherv(mine.data(), static_cast<int>(n), MPI_INT64_T, all.data(), recv_counts.data(),
                             displs.data(), MPI_INT64_T, root, comm));
  std::string problem;
  std::vector<std::int64_t> merged;
  if (me == root) {
    try {
      merged = merge_categories(std::move(all), counts, blocks);
    } catch (std::exception const& e) {
      problem = e.what();
    }
  }
  int bad = problem.empty() ? 0 : 1;
  SDNN_MPI_CHECK(MPI_Bcast(&bad, 1, MPI_INT, root, comm));
  if (bad) throw collective_error("dist::gather_categories: " + detail::broadcast_text(comm, problem, root));
  return merged;
}

// Every rank's seconds on root (one per rank, in rank order); empty elsewhere.
inline std::vector<double> gather_times(MPI_Comm comm, double seconds, int root = 0) {
  std::vector<double> all;
  if (rank(comm) == root) all.resize(static_cast<std::size_t>(size(comm)));
  SDNN_MPI_CHECK(MPI_Gather(&seconds, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, root, comm));
  return all;
}

// Every rank's count on root; empty elsewhere (for timing_report's inputs column).
inline std::vector<std::int64_t> gather_counts(MPI_Comm comm, std::int64_t count, int root = 0) {
  std::vector<std::int64_t> all;
  if (rank(comm) == root) all.resize(static_cast<std::size_t>(size(comm)));
  SDNN_MPI_CHECK(MPI_Gather(&count, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, root, comm));
  return all;
}

// Runs body() and returns the exit status: 0; or, on a collective_error, "program: rank R: error:
// ..." on stderr on every rank and 1 (each rank then finalizes and exits non-zero); any other
// exception was seen by one rank only, which prints it and calls MPI_Abort (mpiexec then ends
// every rank, non-zero). A failed MPI call throws library_error ("MPI: `call` failed: ...") when
// the communicator's error handler returns errors; under MPI's default handler
// (MPI_ERRORS_ARE_FATAL) MPI aborts the job itself.
template <class Body>
int run_guarded(MPI_Comm comm, char const* program, Body&& body) {
  int me = -1;
  MPI_Comm_rank(comm, &me);
  try {
    body();
    return 0;
  } catch (collective_error const& e) {
    std::fprintf(stderr, "%s: rank %d: error: %s\n", program, me, e.what());
    std::fflush(stderr);
    return 1;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "%s: rank %d: error (on this rank only; aborting every rank): %s\n", program, me, e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: rank %d: error (on this rank only; aborting every rank): unknown exception\n", program, me);
  }
  std::fflush(stderr);
  MPI_Abort(comm, 1);
  return 1;
}

}  // namespace sdnn::dist::mpi
