// The graph_challenge example's command-line parser (examples/graph_challenge/cli.hpp):
// help lists every option with its default; unknown options, stray values, missing and
// repeated options are refused with a message naming them; --opt=value and --opt value;
// 64-bit integers range-checked (never truncated); reals (an underflow is a number); path
// checks; the progress line; sdnn's source locations dropped from user messages.
#include "sdnn_catch.hpp"

#include "../../examples/graph_challenge/cli.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

bool has(std::string const& s, std::string const& part) { return s.find(part) != std::string::npos; }

// A program shaped like graph_challenge: a default command and two subcommands.
cli::parser make_test_parser() {
  cli::parser p("prog", "A test program.");
  auto& d = p.add("", "the default run");
  d.opt("mnist", "IDX").text().default_to("digits.idx").help("the digits file");
  auto& infer = p.add("infer", "infers");
  infer.opt("neurons", "N").integer(1, 65536).required().help("neurons per layer");
  infer.opt("layers", "L").integer(1, 2147483647).required().help("number of layers");
  infer.opt("policy", "NAME").one_of({"tiled16", "tiled32", "gather8"}).default_to("tiled16").help("kernel policy");
  infer.opt("batch", "B").integer(0).default_to("0").help("rows per batch; 0 = automatic");
  infer.opt("categories", "OUT").text().default_is("not written").help("output file");
  infer.opt("scale", "X").real(0, 10).default_to("1").help("a factor, no unit");
  infer.opt("verbose").flag().help("print more");
  auto& gen = p.add("generate", "writes");
  gen.opt("images", "K").integer(1, 1000).default_to("5").help("images to write (count)");
  gen.opt("seed", "S").text().default_to("0").check([](std::string const& v) {
    std::uint64_t s = 0;
    return v == "official" || cli::parse_uint64(v, s) ? std::string() : std::string("is neither 'official' nor an unsigned 64-bit integer");
  });
  return p;
}

cli::result parse(std::vector<std::string> const& args) { return make_test_parser().parse(args); }

// The message of the usage_error that parsing args throws ("" when it does not throw).
std::string usage_message(std::vector<std::string> const& args) {
  try {
    parse(args);
  } catch (cli::usage_error const& e) {
    return e.what();
  }
  return "";
}

std::string temp_dir() {
  char tmpl[] = "/tmp/sdnn_test_cli_XXXXXX";
  char* d = ::mkdtemp(tmpl);
  REQUIRE(d != nullptr);
  return d;
}

}  // namespace

TEST_CASE("cli: help lists every option with its default, per command and for the program", "[cli]") {
  auto const p = make_test_parser();
  std::string const h = p.help("infer");
  INFO(h);
  for (auto const& o : p.find("infer")->options()) CHECK(has(h, "--" + o.name));
  CHECK(has(h, "usage: prog infer --neurons N --layers L [options]"));
  CHECK(has(h, "--neurons N"));
  CHECK(has(h, "neurons per layer (required)"));
  CHECK(has(h, "(default: tiled16)"));
  CHECK(has(h, "kernel policy; one of: tiled16, tiled32, gather8 (default: tiled16)"));
  CHECK(has(h, "rows per batch; 0 = automatic (default: 0)"));
  CHECK(has(h, "output file (default: not written)"));
  CHECK(has(h, "-h, --help"));

  std::string const top = p.help();
  INFO(top);
  CHECK(has(top, "usage: prog [COMMAND] [options]"));
  CHECK(has(top, "infer"));
  CHECK(has(top, "generate"));
  CHECK(has(top, "--mnist IDX"));
  CHECK(has(top, "(default: digits.idx)"));

  for (auto const& args : std::vector<std::vector<std::string>>{
           {"infer", "--help"}, {"infer", "-h"}, {"infer", "--neurons", "1", "--help"}, {"help", "infer"}}) {
    auto const r = parse(args);
    CHECK(r.help);
    CHECK(r.command == "infer");
    CHECK(r.help_text == h);
  }
  for (auto const& args : std::vector<std::vector<std::string>>{{"--help"}, {"-h"}, {"help"}}) {
    auto const r = parse(args);
    CHECK(r.help);
    CHECK(r.command.empty());
    CHECK(r.help_text == top);
  }
  // Help wins over a mistake on the same line.
  CHECK(parse({"infer", "--polcy", "x", "--help"}).help);
}

TEST_CASE("cli: --opt=value and --opt value give the same values; defaults fill the rest", "[cli]") {
  auto const a = parse({"infer", "--neurons=1024", "--layers", "120", "--policy=gather8", "--verbose"});
  auto const b = parse({"infer", "--neurons", "1024", "--layers=120", "--policy", "gather8", "--verbose"});
  for (auto const* r : {&a, &b}) {
    CHECK(r->command == "infer");
    CHECK_FALSE(r->help);
    CHECK(r->integer("neurons") == 1024);
    CHECK(r->integer("layers") == 120);
    CHECK(r->text("policy") == "gather8");
    CHECK(r->has("policy"));
    CHECK(r->flag("verbose"));
    CHECK_FALSE(r->has("batch"));
    CHECK(r->integer("batch") == 0);  // the default
    CHECK(r->real("scale") == 1.0);
    CHECK_FALSE(r->has("categories"));
  }
  // A value may start with '-' (then the range check speaks) or contain '='.
  CHECK(parse({"infer", "--neurons", "1", "--layers", "1", "--categories", "-odd=name"}).text("categories") ==
        "-odd=name");
  CHECK(parse({"infer", "--neurons", "1", "--layers", "1", "--categories=a=b"}).text("categories") == "a=b");
  auto const d = parse({"--mnist", "x.idx"});
  CHECK(d.command.empty());
  CHECK(d.text("mnist") == "x.idx");
  CHECK(parse({}).text("mnist") == "digits.idx");
  // Asking for an option the command does not declare is a programming error.
  CHECK_THROWS_AS(d.text("neurons"), std::logic_error);
}

TEST_CASE("cli: unknown options and commands are refused, with a suggestion", "[cli]") {
  std::string m = usage_message({"infer", "--polcy", "foo", "--neurons", "1", "--layers", "1"});
  CHECK(m == "unknown option '--polcy' for 'infer' (did you mean --policy?)");
  m = usage_message({"infer", "--neurons", "1", "--layers", "1", "--zzzzzz", "1"});
  CHECK(m == "unknown option '--zzzzzz' for 'infer'");
  m = usage_message({"infer", "--neurons", "1", "--layers", "1", "--policy=tiled61"});
  CHECK(has(m, "--policy: 'tiled61' is not one of tiled16, tiled32, gather8"));
  // An option of another command: the default command uses only --mnist.
  m = usage_message({"--neurons", "1024"});
  CHECK(m == "unknown option '--neurons' for the default command (--neurons is an option of 'infer')");
  m = usage_message({"--images", "3"});
  CHECK(has(m, "(--images is an option of 'generate')"));
  m = usage_message({"-x"});
  CHECK(has(m, "unknown option '-x'"));
  m = usage_message({"infr"});
  CHECK(has(m, "unknown command 'infr'"));
  CHECK(has(m, "did you mean infer?"));
  // A flag takes no value.
  m = usage_message({"infer", "--neurons", "1", "--layers", "1", "--verbose=1"});
  CHECK(has(m, "--verbose is a switch and takes no value"));
  // The usage error says which command's help to show.
  try {
    parse({"generate", "--bogus", "1"});
    FAIL("no throw");
  } catch (cli::usage_error const& e) {
    CHECK(e.command() == "generate");
  }
}

TEST_CASE("cli: stray values, missing and repeated options", "[cli]") {
  std::string m = usage_message({"infer", "--neurons", "1", "--layers", "1", "foo"});
  CHECK(has(m, "unexpected argument 'foo' for 'infer'"));
  m = usage_message({"infer", "--neurons", "1", "2", "--layers", "1"});
  CHECK(has(m, "unexpected argument '2' for 'infer'"));
  m = usage_message({"--mnist", "a", "b"});
  CHECK(has(m, "unexpected argument 'b' for the default command"));
  m = usage_message({"infer", "--neurons", "1", "--layers", "1", "--"});
  CHECK(has(m, "unexpected argument '--'"));
  m = usage_message({"infer", "--layers", "1"});
  CHECK(m == "missing required option for 'infer': --neurons N");
  m = usage_message({"infer"});
  CHECK(m == "missing required options for 'infer': --neurons N, --layers L");
  m = usage_message({"infer", "--neurons", "1", "--layers"});
  CHECK(m == "--layers needs a value (--layers L)");
  m = usage_message({"infer", "--neurons", "--layers", "1"});
  CHECK(m == "--neurons needs a value (--neurons N)");
  m = usage_message({"infer", "--neurons=", "--layers", "1"});
  CHECK(has(m, "--neurons: needs a value (N), got an empty one"));
  m = usage_message({"infer", "--neurons", "1", "--neurons", "2", "--layers", "1"});
  CHECK(m == "--neurons is given twice");
}

TEST_CASE("cli: integers are 64-bit and range-checked, never truncated", "[cli]") {
  // 2^32 + 1 and 2^32 + 1024 used to be read as 1 and 1024.
  std::string m = usage_message({"infer", "--neurons", "1", "--layers", "4294967297"});
  CHECK(m == "--layers: '4294967297' is out of range: expected an integer in [1, 2147483647]");
  m = usage_message({"infer", "--neurons", "4294968320", "--layers", "1"});
  CHECK(m == "--neurons: '4294968320' is out of range: expected an integer in [1, 65536]");
  m = usage_message({"infer", "--neurons", "1", "--layers", "0"});
  CHECK(has(m, "'0' is out of range"));
  m = usage_message({"generate", "--images", "-5"});
  CHECK(m == "--images: '-5' is out of range: expected an integer in [1, 1000]");
  m = usage_message({"infer", "--neurons", "1", "--layers", "99999999999999999999999"});
  CHECK(has(m, "is out of range"));
  for (std::string bad : {"abc", "12abc", "1.5", " 12", "12 ", "0x10", "1e3", "+", "-"}) {
    m = usage_message({"infer", "--neurons", "1", "--layers", bad});
    INFO(bad);
    CHECK(m == "--layers: '" + bad + "' is not an integer");
  }
  CHECK(parse({"infer", "--neurons", "+7", "--layers", "2147483647"}).integer("layers") == 2147483647);
  CHECK(parse({"infer", "--neurons", "7", "--layers", "1", "--batch", "9223372036854775807"}).integer("batch") ==
        9223372036854775807LL);

  std::int64_t v = 0;
  bool overflow = false;
  CHECK(cli::parse_int64("-9223372036854775808", v));
  CHECK(v == std::numeric_limits<std::int64_t>::min());
  CHECK_FALSE(cli::parse_int64("9223372036854775808", v, &overflow));
  CHECK(overflow);
  CHECK_FALSE(cli::parse_int64("abc", v, &overflow));
  CHECK_FALSE(overflow);
  std::uint64_t u = 0;
  CHECK(cli::parse_uint64("18446744073709551615", u));
  CHECK(u == std::numeric_limits<std::uint64_t>::max());
  CHECK_FALSE(cli::parse_uint64("18446744073709551616", u, &overflow));
  CHECK(overflow);
  CHECK_FALSE(cli::parse_uint64("-1", u));
}

TEST_CASE("cli: text values with a check (a seed that is not a number is refused)", "[cli]") {
  CHECK(parse({"generate", "--seed", "official"}).text("seed") == "official");
  CHECK(parse({"generate", "--seed=18446744073709551615"}).text("seed") == "18446744073709551615");
  std::string const m = usage_message({"generate", "--seed", "abc"});
  CHECK(m == "--seed: 'abc' is neither 'official' nor an unsigned 64-bit integer");
}

TEST_CASE("cli: reals: finite decimals; an underflow is a number, an overflow is not", "[cli]") {
  double x = -1;
  CHECK(cli::parse_real("1e-50", x));
  CHECK(x == 1e-50);
  CHECK(cli::parse_real("1e-400", x));  // below the smallest subnormal: 0, still a number
  CHECK(x == 0.0);
  CHECK(cli::parse_real("4e-320", x));  // subnormal
  CHECK(x > 0.0);
  CHECK(cli::parse_real("-2.5E3", x));
  CHECK(x == -2500.0);
  bool overflow = false;
  CHECK_FALSE(cli::parse_real("1e400", x, &overflow));
  CHECK(overflow);
  for (std::string bad : {"nan", "inf", "-inf", "abc", "1.5x", "", " 1", "0x1p3"}) {
    INFO(bad);
    CHECK_FALSE(cli::parse_real(bad, x, &overflow));
    CHECK_FALSE(overflow);
  }
  auto base = std::vector<std::string>{"infer", "--neurons", "1", "--layers", "1", "--scale"};
  auto with = [&](std::string v) {
    auto a = base;
    a.push_back(v);
    return a;
  };
  CHECK(parse(with("1e-50")).real("scale") == 1e-50);
  CHECK(usage_message(with("1e400")) == "--scale: '1e400' is too large (out of the range of a double)");
  CHECK(usage_message(with("nan")) == "--scale: 'nan' is not a finite decimal number");
  CHECK(has(usage_message(with("11")), "--scale: '11' is out of range: expected a number in [0, 10]"));
}

TEST_CASE("cli: did-you-mean suggestions", "[cli]") {
  std::vector<std::string> const names = {"policy", "neurons", "layers", "categories"};
  CHECK(cli::suggest("polcy", names) == "policy");
  CHECK(cli::suggest("nuerons", names) == "neurons");
  CHECK(cli::suggest("categ", names) == "categories");  // a unique prefix
  CHECK(cli::suggest("xyz", names).empty());
  CHECK(cli::suggest("a", names).empty());
  CHECK(cli::edit_distance("kitten", "sitting") == 3);
}

TEST_CASE("cli: input and output paths are checked before any work", "[cli]") {
  std::string const dir = temp_dir();
  std::string const file = dir + "/in.txt";
  std::ofstream(file) << "1\n";

  CHECK_NOTHROW(cli::check_input_file(file, "--truth"));
  auto message = [](auto&& f) {
    try {
      f();
    } catch (cli::error const& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(message([&] { cli::check_input_file(dir, "--truth"); }) ==
        "--truth: '" + dir + "' is a directory, expected a file");
  CHECK(message([&] { cli::check_input_file(dir + "/nope", "--truth"); }) ==
        "--truth: '" + dir + "/nope' does not exist");
  CHECK(message([&] { cli::check_input_dir(file, "--weights"); }) == "--weights: '" + file + "' is not a directory");
  CHECK_NOTHROW(cli::check_input_dir(dir, "--weights"));

  // Output file: an existing file is left as it was; a new one is not left behind.
  CHECK_NOTHROW(cli::check_output_file(file, "--categories"));
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  CHECK(line == "1");
  CHECK_NOTHROW(cli::check_output_file(dir + "/new.txt", "--categories"));
  CHECK(::access((dir + "/new.txt").c_str(), F_OK) != 0);
  CHECK(message([&] { cli::check_output_file(dir, "--categories"); }) ==
        "--categories: '" + dir + "' is a directory, expected a file");
  CHECK(message([&] { cli::check_output_file(dir + "/no/such/x.txt", "--categories"); }) ==
        "--categories: cannot write '" + dir + "/no/such/x.txt': directory '" + dir + "/no/such' does not exist");
  CHECK(has(message([&] { cli::check_output_file(file + "/x.txt", "--categories"); }), "is not a directory"));

  // Output directory: a missing one is fine when its nearest existing ancestor is writable;
  // nothing is created until make_dirs.
  CHECK_NOTHROW(cli::check_output_dir(dir + "/a/b", "--out"));
  CHECK(::access((dir + "/a").c_str(), F_OK) != 0);
  CHECK(has(message([&] { cli::check_output_dir(file + "/sub", "--out"); }), "'" + file + "' is not a directory"));
  CHECK(message([&] { cli::check_output_dir(file, "--out"); }) == "--out: '" + file + "' is not a directory");
  cli::make_dirs(dir + "/a/b", "--out");
  struct stat st;
  REQUIRE(::stat((dir + "/a/b").c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK_NOTHROW(cli::check_output_dir(dir + "/a/b", "--out"));
  // No probe file is left behind.
  std::string const listing_cmd = "ls -A '" + dir + "/a/b' | wc -l";
  std::FILE* ls = ::popen(listing_cmd.c_str(), "r");
  REQUIRE(ls != nullptr);
  int count = -1;
  REQUIRE(std::fscanf(ls, "%d", &count) == 1);
  ::pclose(ls);
  CHECK(count == 0);

  std::string const cleanup = "rm -rf '" + dir + "'";
  CHECK(std::system(cleanup.c_str()) == 0);
}

TEST_CASE("cli: strip_location drops sdnn's ' [file:line]' and nothing else", "[cli]") {
  CHECK(cli::strip_location("io: 'x.tsv' line 3: bad [/src/include/sdnn/challenge/tsv.hpp:64]") ==
        "io: 'x.tsv' line 3: bad");
  CHECK(cli::strip_location("no location here") == "no location here");
  CHECK(cli::strip_location("a list [1, 2]") == "a list [1, 2]");
  CHECK(cli::strip_location("range [a:b]") == "range [a:b]");
  CHECK(cli::strip_location("") == "");
}

TEST_CASE("cli: progress draws on a terminal only, and erases its line", "[cli]") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  {
    cli::progress p("reading layer", 3, f, /*enabled=*/1, /*min_interval=*/0);
    CHECK(p.enabled());
    for (int i = 1; i <= 3; ++i) p.step(i);
  }
  std::rewind(f);
  std::string out;
  for (int c; (c = std::fgetc(f)) != EOF;) out += static_cast<char>(c);
  std::fclose(f);
  CHECK(has(out, "\r  reading layer 1/3"));
  CHECK(has(out, "\r  reading layer 3/3"));
  CHECK(out.back() == '\r');  // erased: the next output starts at column 0
  CHECK(has(out, "\r" + std::string(std::string("  reading layer 3/3").size(), ' ') + "\r"));

  std::FILE* g = std::tmpfile();  // a file is not a terminal: nothing is drawn
  REQUIRE(g != nullptr);
  {
    cli::progress p("reading layer", 3, g);
    CHECK_FALSE(p.enabled());
    for (int i = 1; i <= 3; ++i) p.step(i);
  }
  CHECK(std::ftell(g) == 0);
  std::fclose(g);
}
