// dist_challenge: Sparse DNN Graph Challenge inference split over MPI ranks with sdnn::dist
// (host backend: each rank runs sdnn::reference on its block of inputs).
//
//   mpiexec -n 3 ./build/examples/dist_challenge/dist_challenge [options]
//
// Every rank builds the network and reads the inputs (weights replicated, inputs from a shared
// file system); the ranks check that they agree (dist::mpi::check_agreement: layers, sizes, a
// hash of every weight, bias, cap, input count and an input hash); rank 0 partitions the inputs
// (contiguous blocks, balanced by nonzeros by default) and broadcasts the partition; each rank
// infers its block and times it; rank 0 gathers the categories (MPI_Gatherv, int64 ids), prints
// per-rank times and the imbalance, and compares with --truth. Any failure (a bad option, a
// missing file, ranks that disagree, categories that differ from the truth) is reported on
// every rank and every rank exits 1: no hang, no partial category list.
//
// This is the host side of multi-rank inference. A GPU program makes the same calls and runs
// its device engine where this one calls reference::challenge_infer (one rank per GPU).
#include <sdnn/challenge/radixnet.hpp>
#include <sdnn/dist/categories.hpp>
#include <sdnn/dist/mpi.hpp>
#include <sdnn/dist/partition.hpp>
#include <sdnn/dist/signature.hpp>
#include <sdnn/dist/timing.hpp>
#include <sdnn/challenge/tsv.hpp>
#include <sdnn/challenge/reference.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#ifndef SDNN_EXAMPLE_DATA_DIR
#define SDNN_EXAMPLE_DATA_DIR "tests/data"
#endif

using namespace sdnn;
namespace dmpi = sdnn::dist::mpi;

namespace {

char const* const usage =
    "usage: mpiexec -n P dist_challenge [options]\n"
    "  --images FILE        input images, Graph Challenge TSV (plain or .gz); default: the 1200 shipped\n"
    "                       official images, " SDNN_EXAMPLE_DATA_DIR "/sparse-images-1024-first1200.tsv.gz\n"
    "  --neurons N          neurons per layer (default 1024: the official network; another power of\n"
    "                       two >= 32: a RadiX-Net generated with --seed)\n"
    "  --layers L           number of layers, 1..120 for the official network (default 120)\n"
    "  --seed S             RadiX-Net seed when N != 1024 (default 1)\n"
    "  --bias B             bias (default: the challenge's for 1024, 4096, 16384, 65536 neurons)\n"
    "  --partition KIND     block (equal input counts) or nnz (balanced nonzeros, default)\n"
    "  --truth FILE         categories to compare with (one 1-based id per line); exit 1 if different\n"
    "  --out FILE           write the categories (rank 0)\n"
    "  --help               this text\n";

struct options {
  std::string images = std::string(SDNN_EXAMPLE_DATA_DIR) + "/sparse-images-1024-first1200.tsv.gz";
  std::int64_t neurons = 1024, layers = 120, seed = 1;
  bool has_bias = false;
  float bias = 0;
  std::string partition = "nnz", truth, out;
  bool help = false;
};

std::int64_t parse_int(std::string const& name, std::string const& text, std::int64_t lo, std::int64_t hi) {
  char* end = nullptr;
  errno = 0;
  long long const v = std::strtoll(text.c_str(), &end, 10);
  SDNN_EXPECTS(!text.empty() && *end == '\0' && errno == 0, "--", name, ": '", text, "' is not an integer");
  SDNN_EXPECTS(v >= lo && v <= hi, "--", name, ": ", v, " is out of range [", lo, ", ", hi, "]");
  return v;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      continue;
    }
    SDNN_EXPECTS(arg.rfind("--", 0) == 0, "unexpected argument '", arg, "' (see --help)");
    if (auto eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else {
      SDNN_EXPECTS(i + 1 < argc, "option ", arg, " needs a value (see --help)");
      value = argv[++i];
    }
    std::string const name = arg.substr(2);
    if (name == "images") o.images = value;
    else if (name == "neurons") o.neurons = parse_int(name, value, 32, 1 << 30);
    else if (name == "layers") o.layers = parse_int(name, value, 1, 1 << 20);
    else if (name == "seed") o.seed = parse_int(name, value, 0, std::numeric_limits<std::int64_t>::max());
    else if (name == "bias") {
      char* end = nullptr;
      o.bias = std::strtof(value.c_str(), &end);
      SDNN_EXPECTS(!value.empty() && *end == '\0' && o.bias == o.bias, "--bias: '", value, "' is not a number");
      o.has_bias = true;
    } else if (name == "partition") {
      SDNN_EXPECTS(value == "block" || value == "nnz", "--partition: '", value, "' is neither block nor nnz");
      o.partition = value;
    } else if (name == "truth") o.truth = value;
    else if (name == "out") o.out = value;
    else SDNN_FAIL("unknown option ", arg, " (see --help)");
  }
  SDNN_EXPECTS(o.neurons != 1024 || o.layers <= 120, "--layers: the official network has 120 layers, got ", o.layers);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm const comm = MPI_COMM_WORLD;
  int const rc = dmpi::run_guarded(comm, "dist_challenge", [&] {
    int const me = dmpi::rank(comm), ranks = dmpi::size(comm);
    options o;
    dmpi::collective_step(comm, "reading the options", [&] { o = parse(argc, argv); });
    if (o.help) {
      if (me == 0) std::fputs(usage, stdout);
      return;
    }

    std::vector<csr_matrix<float, std::int32_t>> layers;
    csr_matrix<float, std::int32_t> y;
    float bias = 0;
    float const cap = 32.f;
    std::vector<std::int32_t> truth;
    dist::stopwatch setup;
    dmpi::collective_step(comm, "building the network and reading the inputs", [&] {
      auto const n = static_cast<std::int32_t>(o.neurons);
      bias = o.has_bias ? o.bias : data::challenge_bias(n);
      for (std::int32_t l = 0; l < static_cast<std::int32_t>(o.layers); ++l)
        layers.push_back(n == 1024 ? data::official_1024_layer(l)
                                   : data::radixnet_layer(n, l, static_cast<std::uint64_t>(o.seed)));
      y = io::read_challenge_images(o.images, n);
      if (me == 0 && !o.truth.empty()) truth = io::read_categories(o.truth);
    });
    dmpi::check_agreement(comm, dist::network_signature(layers, bias, cap, y.rows())
                                    .add_hash("inputs hash", dist::hash_csr(y.view())));

    // Rank 0 decides the partition, every rank receives it.
    dist::partition p;
    if (me == 0)
      p = o.partition == "nnz" ? dist::nnz_partition(y.view(), ranks) : dist::block_partition(y.rows(), ranks);
    p = dmpi::broadcast_partition(comm, p);
    dist::input_range const mine = p.range(me);
    double const setup_seconds = setup.seconds();

    std::vector<std::int64_t> ids;
    dist::stopwatch clock;
    dmpi::collective_step(comm, "inference", [&] {
      auto const block = dist::slice_rows(y.view(), mine);
      ids = dist::to_global_ids(reference::challenge_categories(reference::challenge_infer(block, layers, bias, cap)),
                                mine);
    });
    double const seconds = clock.seconds();

    auto const categories = dmpi::gather_categories(comm, ids, &p);
    auto const times = dmpi::gather_times(comm, seconds);
    auto const counts = dmpi::gather_counts(comm, mine.size());
    if (me == 0) {
      std::printf("network:     %lld neurons x %lld layers (%s), bias %g\n", static_cast<long long>(o.neurons),
                  static_cast<long long>(o.layers), o.neurons == 1024 ? "official" : "RadiX-Net", static_cast<double>(bias));
      std::printf("inputs:      %d from %s\n", y.rows(), o.images.c_str());
      std::printf("ranks:       %d, %s partition, ranks agree on the problem (signature checked)\n", ranks,
                  o.partition.c_str());
      std::printf("setup:       %.3f s on rank 0 (network, inputs, agreement, partition)\n", setup_seconds);
      std::printf("categories:  %zu\n", categories.size());
      std::printf("inference per rank (host reference):\n%s", dist::timing_report(times, counts).c_str());
    }
    dmpi::collective_step(comm, "checking and writing the categories", [&] {
      if (me != 0) return;
      if (!o.truth.empty()) {
        std::vector<std::int64_t> const want(truth.begin(), truth.end());
        SDNN_EXPECTS(categories == want, "the ", categories.size(), " categories differ from the ", want.size(),
                     " of ", o.truth);
        std::printf("truth:       MATCH (%zu categories equal %s)\n", want.size(), o.truth.c_str());
      }
      if (!o.out.empty()) {
        std::vector<std::int32_t> out;
        for (auto id : categories) {
          SDNN_EXPECTS(id <= std::numeric_limits<std::int32_t>::max(), "category id ", id, " does not fit the writer");
          out.push_back(static_cast<std::int32_t>(id));
        }
        io::write_categories(o.out, out);
        std::printf("wrote:       %s\n", o.out.c_str());
      }
    });
  });
  MPI_Finalize();
  return rc;
}
