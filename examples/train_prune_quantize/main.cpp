// train_prune_quantize: train a small MLP with sparse CSR layers on the shipped MNIST digits
// (host only), prune it iteratively by magnitude to 90 % and 95 % (unstructured per layer, and
// uniform per row), fine-tune after each step, quantize (half, int8 per layer / per channel,
// 4-bit codebook) and report test accuracy and weight memory as a table (and JSON/markdown).
//
// Every step uses sdnn's host primitives: reference::dense_sparse_spmm (forward),
// ops::sparse_linear_backward (backward), reference::softmax_cross_entropy, reference::sgd_step
// (keeps each CSR pattern), ops::prune_csr_magnitude, quantize_int8 / quantize_codebook4 and
// ops::quantized_dense_sparse_spmm (inference that decodes the weights on the fly).
// Run with --help for the options.
#include <sdnn/core/random.hpp>
#include <sdnn/formats/quantized.hpp>
#include <sdnn/io/mnist_idx.hpp>
#include <sdnn/linear/op/quantized_spmm.hpp>
#include <sdnn/train/op/backward.hpp>
#include <sdnn/linear/reference/spmm.hpp>
#include <sdnn/train/reference/backward.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#ifndef SDNN_EXAMPLE_DATA_DIR
#define SDNN_EXAMPLE_DATA_DIR "tests/data"
#endif

using namespace sdnn;
using csr = csr_matrix<float, std::int32_t>;

namespace {

struct options {
  int hidden = 256;
  int epochs = 4;
  int finetune_epochs = 2;
  int batch = 64;
  double lr = 0.05, finetune_lr = 0.02, momentum = 0.9, weight_decay = 1e-4;
  std::uint64_t seed = 1;
  int train = 8000, test = 2000;
  std::vector<double> schedule{0.5, 0.75, 0.9, 0.95};  // sparsities in order; 0.9 and 0.95 reported
  double min_accuracy = 0;
  std::string data_dir = SDNN_EXAMPLE_DATA_DIR, json, markdown, commit = "unknown", machine = "unknown";
};

void usage() {
  std::cout << "usage: train_prune_quantize [options]\n"
               "  --hidden H            hidden width of the 784-H-H-10 MLP (default 256)\n"
               "  --epochs E            dense training epochs (default 4)\n"
               "  --finetune-epochs F   epochs of fine-tuning after each pruning step (default 2)\n"
               "  --batch B             minibatch size (default 64)\n"
               "  --lr X / --finetune-lr X / --momentum X / --weight-decay X   SGD (0.05 / 0.02 / 0.9 / 1e-4)\n"
               "  --schedule S1,S2,..   pruning sparsities, increasing (default 0.5,0.75,0.9,0.95)\n"
               "  --train N --test N    split of the 10000 shipped digits (default 8000 / 2000)\n"
               "  --seed S              split, init and batch order (default 1)\n"
               "  --min-accuracy A      exit 1 if any reported test accuracy is below A (default 0)\n"
               "  --data DIR            folder of mnist-10k-*-idx*-ubyte.gz (default the shipped tests/data)\n"
               "  --json FILE --markdown FILE   write the results; --commit C --machine M are recorded\n";
}

struct layer {
  csr w;
  std::vector<float> bias, vw, vb;  // velocities
};
struct mlp {
  std::vector<layer> l;
};

csr dense_csr(int in, int out, splitmix64& r) {
  csr w(in, out, in * out);
  float const a = static_cast<float>(std::sqrt(6.0 / in));  // He uniform
  for (int i = 0; i <= in; ++i) w.row_ptr()[i] = i * out;
  for (int i = 0; i < in; ++i)
    for (int j = 0; j < out; ++j) {
      w.col_idx()[i * out + j] = j;
      w.values()[i * out + j] = static_cast<float>((2 * r.uniform() - 1) * a);
    }
  return w;
}

csr copy_csr(csr const& w) {
  csr c(w.rows(), w.cols(), w.nnz());
  std::copy(w.row_ptr().begin(), w.row_ptr().end(), c.row_ptr().begin());
  std::copy(w.col_idx().begin(), w.col_idx().end(), c.col_idx().begin());
  std::copy(w.values().begin(), w.values().end(), c.values().begin());
  return c;
}
mlp copy_mlp(mlp const& m) {
  mlp c;
  for (auto const& x : m.l) c.l.push_back({copy_csr(x.w), x.bias, x.vw, x.vb});
  return c;
}

struct dataset {
  dense_matrix<float> x;  // n x 784 in [0, 1]
  std::vector<int> y;
};

dense_matrix<float> rows_of(dense_matrix<float> const& x, std::vector<std::size_t> const& idx, std::size_t b,
                            std::size_t e) {
  dense_matrix<float> out(static_cast<std::int64_t>(e - b), x.cols());
  for (std::size_t r = b; r < e; ++r)
    std::copy(x.data() + idx[r] * x.cols(), x.data() + (idx[r] + 1) * x.cols(), out.data() + (r - b) * x.cols());
  return out;
}

// One epoch of minibatch SGD; returns the mean training loss.
double train_epoch(mlp& m, dataset const& d, options const& o, double lr, splitmix64& r) {
  std::vector<std::size_t> order(d.y.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  shuffle(order, r);
  reference::sgd_options sgd{lr, o.momentum, o.weight_decay, false};
  reference::sgd_options sgd_bias{lr, o.momentum, 0.0, false};
  std::size_t const L = m.l.size();
  double loss = 0;
  std::size_t batches = 0;
  for (std::size_t b = 0; b < order.size(); b += static_cast<std::size_t>(o.batch), ++batches) {
    std::size_t const e = std::min(order.size(), b + static_cast<std::size_t>(o.batch));
    std::int64_t const B = static_cast<std::int64_t>(e - b);
    std::vector<dense_matrix<float>> act(L + 1), pre(L);
    act[0] = rows_of(d.x, order, b, e);
    std::vector<int> labels(static_cast<std::size_t>(B));
    for (std::size_t k = b; k < e; ++k) labels[k - b] = d.y[order[k]];
    for (std::size_t i = 0; i < L; ++i) {
      auto& ly = m.l[i];
      pre[i] = dense_matrix<float>(B, ly.w.cols());
      act[i + 1] = dense_matrix<float>(B, ly.w.cols());
      dense_matrix<float> const& in = act[i];
      reference::dense_sparse_spmm<float, std::int32_t, float>(in.view(), ly.w.view(), pre[i].view(),
                                                              epilogue_none<float>());
      auto epi = i + 1 < L ? epilogue_relu<float>(ly.bias.data()) : epilogue_none<float>();
      epi.bias = ly.bias.data();
      dense_matrix<float> const& p = pre[i];
      reference::apply_epilogue(p.view(), epi, act[i + 1].view());
    }
    dense_matrix<float> dy(B, 10);
    dense_matrix<float> const& logits = act[L];
    loss += reference::softmax_cross_entropy(logits.view(), labels.data(), dy.view());
    for (std::size_t i = L; i-- > 0;) {
      auto& ly = m.l[i];
      auto epi = i + 1 < L ? epilogue_relu<float>(ly.bias.data()) : epilogue_none<float>();
      epi.bias = ly.bias.data();
      dense_matrix<float> dp(B, ly.w.cols()), dx;
      std::vector<float> dw(static_cast<std::size_t>(ly.w.nnz())), db(ly.bias.size());
      ops::sparse_linear_grads<float> g{dp.view(), dw.data(), db.data(), {}};
      if (i > 0) {
        dx = dense_matrix<float>(B, ly.w.rows());
        g.dx = dx.view();
      }
      dense_matrix<float> const& in = act[i];
      dense_matrix<float> const& p = pre[i];
      dense_matrix<float> const& dyc = dy;
      ops::sparse_linear_backward(host_exec{}, in.view(), p.view(), dyc.view(), ly.w.view(), epi, g);
      reference::sgd_step(ly.w, dw, ly.vw, sgd);
      if (ly.vb.size() != ly.bias.size()) ly.vb.assign(ly.bias.size(), 0.f);
      reference::sgd_step(ly.bias.data(), db.data(), ly.vb.data(), ly.bias.size(), sgd_bias);
      if (i > 0) dy = std::move(dx);
    }
  }
  return loss / double(batches);
}

// The weights of one evaluation: float CSR, or an encoding per layer.
enum class weights_kind { float32, half, int8_layer, int8_channel, codebook4 };
char const* name_of(weights_kind k) {
  switch (k) {
    case weights_kind::float32: return "float";
    case weights_kind::half: return "half";
    case weights_kind::int8_layer: return "int8 per layer";
    case weights_kind::int8_channel: return "int8 per channel";
    case weights_kind::codebook4: return "4-bit codebook";
  }
  return "?";
}

struct eval_result {
  double accuracy = 0;
  std::size_t weight_bytes = 0;
};

// Test accuracy with the layers' weights stored as k (quantized ones decoded on the fly).
eval_result evaluate(mlp const& m, dataset const& d, weights_kind k) {
  std::size_t const L = m.l.size();
  std::vector<csr> fw;
  std::vector<quantized_csr<int8_encoding>> qi;
  std::vector<quantized_csr<codebook4_encoding>> qc;
  eval_result res;
  int8_options io;  // symmetric, MSE-searched clip from the histogram
  io.clip = int8_clip::mse;
  io.granularity = k == weights_kind::int8_channel ? quant_granularity::per_channel : quant_granularity::per_layer;
  for (auto const& ly : m.l) {
    if (k == weights_kind::float32) fw.push_back(copy_csr(ly.w));
    if (k == weights_kind::half) fw.push_back(round_values_to_half(ly.w));
    if (k == weights_kind::int8_layer || k == weights_kind::int8_channel) qi.push_back(quantize_int8(ly.w, io));
    if (k == weights_kind::codebook4) qc.push_back(quantize_codebook4(ly.w));
  }
  for (auto const& w : fw) {
    auto f = footprint(w);
    if (k == weights_kind::half) f.value_bytes /= 2;
    res.weight_bytes += f.total();
  }
  for (auto const& w : qi) res.weight_bytes += footprint(w).total();
  for (auto const& w : qc) res.weight_bytes += footprint(w).total();
  std::int64_t const n = d.x.rows();
  std::size_t correct = 0;
  std::int64_t const chunk = 500;
  for (std::int64_t b = 0; b < n; b += chunk) {
    std::int64_t const B = std::min(chunk, n - b);
    dense_matrix<float> cur(B, d.x.cols());
    std::copy(d.x.data() + b * d.x.cols(), d.x.data() + (b + B) * d.x.cols(), cur.data());
    for (std::size_t i = 0; i < L; ++i) {
      auto const& ly = m.l[i];
      auto epi = i + 1 < L ? epilogue_relu<float>(ly.bias.data()) : epilogue_none<float>();
      epi.bias = ly.bias.data();
      dense_matrix<float> next(B, ly.w.cols());
      dense_matrix<float> const& in = cur;
      if (!fw.empty()) reference::dense_sparse_spmm<float, std::int32_t, float>(in.view(), fw[i].view(), next.view(), epi);
      if (!qi.empty()) ops::quantized_dense_sparse_spmm(host_exec{}, in.view(), qi[i], next.view(), epi);
      if (!qc.empty()) ops::quantized_dense_sparse_spmm(host_exec{}, in.view(), qc[i], next.view(), epi);
      cur = std::move(next);
    }
    dense_matrix<float> const& logits = cur;
    for (std::int64_t r = 0; r < B; ++r)
      if (reference::argmax_row(logits.view(), r) == d.y[static_cast<std::size_t>(b + r)]) ++correct;
  }
  res.accuracy = n ? double(correct) / double(n) : 0.0;
  return res;
}

// Sparsity of the hidden layers (those pruned: all but the last) against their dense size.
double hidden_sparsity(mlp const& m) {
  double stored = 0, dense = 0;
  for (std::size_t i = 0; i + 1 < m.l.size(); ++i) {
    stored += m.l[i].w.nnz();
    dense += double(m.l[i].w.rows()) * m.l[i].w.cols();
  }
  return 1.0 - stored / dense;
}
std::int64_t min_row_nnz(csr const& w) {
  std::int64_t mn = w.cols();
  for (int i = 0; i < w.rows(); ++i) mn = std::min<std::int64_t>(mn, w.row_ptr()[i + 1] - w.row_ptr()[i]);
  return mn;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

struct snapshot {
  std::string name;  // "dense", "90% unstructured", ...
  double target = 0, sparsity = 0;
  mlp model;
};

bool parse(int argc, char** argv, options& o) {
  for (int a = 1; a < argc; ++a) {
    std::string const k = argv[a];
    if (k == "--help" || k == "-h") {
      usage();
      std::exit(0);
    }
    if (a + 1 >= argc) {
      std::cerr << "train_prune_quantize: error: option '" << k << "' needs a value (or is unknown)\n";
      return false;
    }
    std::string const v = argv[++a];
    try {
      if (k == "--hidden") o.hidden = std::stoi(v);
      else if (k == "--epochs") o.epochs = std::stoi(v);
      else if (k == "--finetune-epochs") o.finetune_epochs = std::stoi(v);
      else if (k == "--batch") o.batch = std::stoi(v);
      else if (k == "--lr") o.lr = std::stod(v);
      else if (k == "--finetune-lr") o.finetune_lr = std::stod(v);
      else if (k == "--momentum") o.momentum = std::stod(v);
      else if (k == "--weight-decay") o.weight_decay = std::stod(v);
      else if (k == "--seed") o.seed = std::stoull(v);
      else if (k == "--train") o.train = std::stoi(v);
      else if (k == "--test") o.test = std::stoi(v);
      else if (k == "--min-accuracy") o.min_accuracy = std::stod(v);
      else if (k == "--data") o.data_dir = v;
      else if (k == "--json") o.json = v;
      else if (k == "--markdown") o.markdown = v;
      else if (k == "--commit") o.commit = v;
      else if (k == "--machine") o.machine = v;
      else if (k == "--schedule") {
        o.schedule.clear();
        std::stringstream ss(v);
        std::string item;
        while (std::getline(ss, item, ',')) o.schedule.push_back(std::stod(item));
      } else {
        std::cerr << "train_prune_quantize: error: unknown option '" << k << "'\n";
        return false;
      }
    } catch (std::exception const&) {
      std::cerr << "train_prune_quantize: error: " << k << ": '" << v << "' is not a number\n";
      return false;
    }
  }
  if (o.hidden < 1 || o.batch < 1 || o.epochs < 0 || o.finetune_epochs < 0 || o.train < 1 || o.test < 1 ||
      o.train + o.test > 10000) {
    std::cerr << "train_prune_quantize: error: need hidden, batch, train, test >= 1, epochs >= 0 and "
                 "train + test <= 10000\n";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) try {
  options o;
  if (!parse(argc, argv, o)) return 2;
  auto const t0 = std::chrono::steady_clock::now();
  auto const img = io::read_idx_images(o.data_dir + "/mnist-10k-images-idx3-ubyte.gz");
  auto const lab = io::read_idx_labels(o.data_dir + "/mnist-10k-labels-idx1-ubyte.gz");
  std::int64_t const px = std::int64_t(img.rows) * img.cols;
  splitmix64 rng{o.seed};
  std::vector<std::size_t> perm(static_cast<std::size_t>(img.count));
  for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = i;
  shuffle(perm, rng);
  auto take = [&](std::size_t b, std::size_t n) {
    dataset d;
    d.x = dense_matrix<float>(static_cast<std::int64_t>(n), px);
    for (std::size_t r = 0; r < n; ++r) {
      std::size_t const s = perm[b + r];
      for (std::int64_t c = 0; c < px; ++c)
        d.x.data()[r * px + c] = img.pixels[s * px + c] / 255.0f;
      d.y.push_back(lab[s]);
    }
    return d;
  };
  dataset const train = take(0, static_cast<std::size_t>(o.train));
  dataset const test = take(static_cast<std::size_t>(o.train), static_cast<std::size_t>(o.test));

  mlp m;
  int const widths[] = {static_cast<int>(px), o.hidden, o.hidden, 10};
  for (int i = 0; i < 3; ++i)
    m.l.push_back({dense_csr(widths[i], widths[i + 1], rng), std::vector<float>(widths[i + 1], 0.f), {}, {}});

  std::printf("MLP %d-%d-%d-10 (hidden layers sparse CSR), %d train / %d test digits, batch %d\n", int(px), o.hidden,
              o.hidden, o.train, o.test, o.batch);
  for (int e = 0; e < o.epochs; ++e) {
    double const lr = o.lr * (e + 1 == o.epochs && o.epochs > 1 ? 0.3 : 1.0);
    auto const te = std::chrono::steady_clock::now();
    double const loss = train_epoch(m, train, o, lr, rng);
    double const epoch_s = seconds_since(te);
    std::printf("dense epoch %d: loss %.4f, test accuracy %.4f (epoch %.2f s, %.1f s in all)\n", e + 1, loss,
                evaluate(m, test, weights_kind::float32).accuracy, epoch_s, seconds_since(t0));
    std::fflush(stdout);
  }
  std::vector<snapshot> snaps;
  snaps.push_back({"dense", 0.0, 0.0, copy_mlp(m)});
  for (auto rule : {ops::csr_prune::layer, ops::csr_prune::uniform_rows}) {
    char const* rname = rule == ops::csr_prune::layer ? "unstructured" : "uniform per row";
    mlp s = copy_mlp(m);
    for (double sp : o.schedule) {
      for (std::size_t i = 0; i + 1 < s.l.size(); ++i) {  // the hidden layers; the 10-wide output stays dense
        auto pr = ops::prune_csr_magnitude(s.l[i].w, sp, rule);
        s.l[i].vw = ops::gather_kept(s.l[i].vw, pr.kept);
        s.l[i].w = std::move(pr.w);
      }
      double loss = 0;
      for (int e = 0; e < o.finetune_epochs; ++e) loss = train_epoch(s, train, o, o.finetune_lr, rng);
      double const acc = evaluate(s, test, weights_kind::float32).accuracy;
      std::printf("%s %.0f%%: hidden sparsity %.4f, fine-tune loss %.4f, test accuracy %.4f (%.1f s)\n", rname,
                  sp * 100, hidden_sparsity(s), loss, acc, seconds_since(t0));
      std::fflush(stdout);
      if (std::fabs(sp - 0.9) < 1e-9 || std::fabs(sp - 0.95) < 1e-9) {
        char label[64];
        std::snprintf(label, sizeof label, "%.0f%% %s", sp * 100, rname);
        snaps.push_back({label, sp, hidden_sparsity(s), copy_mlp(s)});
        if (rule == ops::csr_prune::uniform_rows)
          std::printf("  uniform rows: layer 1 min row nnz %lld, max %lld\n", (long long)min_row_nnz(s.l[0].w),
                      (long long)(s.l[0].w.nnz() / s.l[0].w.rows()));
      }
    }
  }

  weights_kind const kinds[] = {weights_kind::float32, weights_kind::half, weights_kind::int8_layer,
                                weights_kind::int8_channel, weights_kind::codebook4};
  std::ostringstream md, js;
  md << "| model | hidden sparsity | float | half | int8 per layer | int8 per channel | 4-bit codebook |\n"
        "|---|---|---|---|---|---|---|\n";
  std::ostringstream mem;
  mem << "| model | float CSR | half CSR | int8 per layer | int8 per channel | 4-bit codebook |\n"
         "|---|---|---|---|---|---|\n";
  js << "{\n  \"command\": \"";
  for (int a = 0; a < argc; ++a) js << (a ? " " : "") << argv[a];
  js << "\",\n  \"commit\": \"" << o.commit << "\",\n  \"machine\": \"" << o.machine << "\",\n"
     << "  \"model\": \"" << px << "-" << o.hidden << "-" << o.hidden << "-10\",\n"
     << "  \"train\": " << o.train << ", \"test\": " << o.test << ", \"seed\": " << o.seed
     << ", \"epochs\": " << o.epochs << ", \"finetune_epochs\": " << o.finetune_epochs << ", \"batch\": " << o.batch
     << ",\n  \"int8\": \"symmetric, clip by MSE search over a 2048-bin histogram\",\n  \"results\": [\n";
  bool ok = true;
  for (std::size_t si = 0; si < snaps.size(); ++si) {
    auto const& s = snaps[si];
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4f", s.sparsity);
    md << "| " << s.name << " | " << buf << " |";
    mem << "| " << s.name << " |";
    js << "    {\"model\": \"" << s.name << "\", \"hidden_sparsity\": " << buf << ", \"weights\": {";
    for (std::size_t ki = 0; ki < 5; ++ki) {
      auto const r = evaluate(s.model, test, kinds[ki]);
      ok = ok && r.accuracy >= o.min_accuracy;
      std::snprintf(buf, sizeof buf, "%.2f %%", 100 * r.accuracy);
      md << " " << buf << " |";
      std::snprintf(buf, sizeof buf, "%.1f KiB", r.weight_bytes / 1024.0);
      mem << " " << buf << " |";
      js << (ki ? ", " : "") << "\"" << name_of(kinds[ki]) << "\": {\"accuracy\": " << r.accuracy
         << ", \"weight_bytes\": " << r.weight_bytes << "}";
    }
    md << "\n";
    mem << "\n";
    js << "}}" << (si + 1 < snaps.size() ? "," : "") << "\n";
  }
  double const total = seconds_since(t0);
  js << "  ],\n  \"seconds\": " << total << "\n}\n";
  std::string const table = "Test accuracy (" + std::to_string(o.test) + " digits):\n\n" + md.str() +
                            "\nWeight memory (all three layers, indices included; biases not counted):\n\n" + mem.str();
  std::cout << "\n" << table << "\ntotal " << total << " s\n";
  if (!o.json.empty()) std::ofstream(o.json) << js.str();
  if (!o.markdown.empty()) std::ofstream(o.markdown) << table;
  if (!ok) {
    std::cerr << "train_prune_quantize: error: an accuracy is below --min-accuracy " << o.min_accuracy << "\n";
    return 1;
  }
  return 0;
} catch (std::exception const& e) {
  std::cerr << "train_prune_quantize: error: " << e.what() << "\n";
  return 2;
}
