// examples/graph_challenge/cli.hpp - the command-line parser of the graph_challenge example.
//
// Header-only, C++17, POSIX, no dependency (the GPU machine has no package registry, so no
// CLI11); tested by tests/host/test_cli.cpp. It knows:
//
//   parser      a program with subcommands; the command named "" is the one run when the first
//               argument is not a command name (graph_challenge's built-in default).
//   command     its options, a one-line summary, a description and an epilog (for --help).
//   option      --name VALUE or --name=VALUE; a flag (--name, no value); an integer (64-bit,
//               range-checked), a real (finite, range-checked; an underflow is a number), or
//               text (optionally one of a list of choices); required, or with a default;
//               an optional extra check.
//   result      what was given: command, values (typed accessors), or a request for help.
//
// Every mistake on the command line throws cli::usage_error naming the option and the value:
// an unknown option (with a "did you mean" when one is close), a stray positional value, a
// missing or empty value, an option given twice, a value out of range or not a number. -h,
// --help (anywhere after the command) and `help [COMMAND]` ask for help instead.
//
// Beside the parser: checks of input and output paths before any work (check_input_file,
// check_output_file, check_output_dir, make_dirs), a progress line for long steps that is
// drawn only when the stream is a terminal (progress), and strip_location, which drops the
// " [file.hpp:123]" that sdnn::error appends to its messages, for messages shown to users.
#pragma once

#include <sdnn/core/error.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cli {

// A message for the user: says what is wrong, never where in the source.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A bad command line. command() is the subcommand it concerns ("" = the default command), so
// the caller can point to the right --help.
class usage_error : public error {
 public:
  usage_error(std::string const& message, std::string command) : error(message), command_(std::move(command)) {}
  std::string const& command() const noexcept { return command_; }

 private:
  std::string command_;
};

namespace detail {
using ::sdnn::detail::concat;  // sdnn/core/error.hpp
}  // namespace detail

// ---------------------------------------------------------------------------------------
// Number parsing: the whole string, nothing else (no spaces, no trailing characters).

// A decimal integer with an optional sign. false: not an integer; sets *overflow when the
// digits are an integer that does not fit in 64 bits.
inline bool parse_int64(std::string const& s, std::int64_t& out, bool* overflow = nullptr) {
  if (overflow) *overflow = false;
  std::size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (i == s.size()) return false;
  std::uint64_t v = 0;
  bool big = false;
  std::uint64_t const limit = neg ? std::uint64_t(1) << 63 : std::uint64_t(std::numeric_limits<std::int64_t>::max());
  for (; i < s.size(); ++i) {
    unsigned const d = static_cast<unsigned>(s[i] - '0');
    if (d > 9) return false;
    if (!big && v > (limit - d) / 10) big = true;
    if (!big) v = v * 10 + d;
  }
  if (big) {
    if (overflow) *overflow = true;
    return false;
  }
  out = neg ? static_cast<std::int64_t>(0 - v) : static_cast<std::int64_t>(v);
  return true;
}

// A decimal unsigned integer (optional '+'), 0 .. 2^64 - 1.
inline bool parse_uint64(std::string const& s, std::uint64_t& out, bool* overflow = nullptr) {
  if (overflow) *overflow = false;
  std::size_t i = 0;
  if (i < s.size() && s[i] == '+') ++i;
  if (i == s.size()) return false;
  std::uint64_t v = 0;
  bool big = false;
  for (; i < s.size(); ++i) {
    unsigned const d = static_cast<unsigned>(s[i] - '0');
    if (d > 9) return false;
    if (!big && v > (std::numeric_limits<std::uint64_t>::max() - d) / 10) big = true;
    if (!big) v = v * 10 + d;
  }
  if (big) {
    if (overflow) *overflow = true;
    return false;
  }
  out = v;
  return true;
}

// A finite decimal number ("0.5", "-3", "1e-3"). A value too small for a double (1e-400)
// underflows to 0 or a subnormal and is accepted: it is a number. false: not a number, NaN
// or Inf, or too large for a double (sets *overflow).
inline bool parse_real(std::string const& s, double& out, bool* overflow = nullptr) {
  if (overflow) *overflow = false;
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)  // decimal only: no "inf", "nan", hex floats
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E'))
      return false;
  char* end = nullptr;
  errno = 0;
  double const v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return false;
  if (errno == ERANGE && std::isinf(v)) {
    if (overflow) *overflow = true;
    return false;
  }
  if (!std::isfinite(v)) return false;
  out = v;
  return true;
}

// Levenshtein distance (for "did you mean").
inline std::size_t edit_distance(std::string const& a, std::string const& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    prev.swap(cur);
  }
  return prev[b.size()];
}

// The candidate closest to `given` when it is close enough to be a typo (at most 2 edits, and
// fewer than half the letters), or the only candidate that `given` is a prefix of; else "".
inline std::string suggest(std::string const& given, std::vector<std::string> const& candidates) {
  std::string best;
  std::size_t best_d = std::numeric_limits<std::size_t>::max();
  for (auto const& c : candidates) {
    std::size_t const d = edit_distance(given, c);
    if (d < best_d) best_d = d, best = c;
  }
  if (!best.empty() && best_d <= 2 && best_d * 2 < std::max(given.size(), best.size())) return best;
  std::string prefix_of;
  int n = 0;
  for (auto const& c : candidates)
    if (!given.empty() && c.compare(0, given.size(), given) == 0) prefix_of = c, ++n;
  return n == 1 ? prefix_of : std::string();
}

// Word-wraps `text` to `width` columns; continuation lines start with `indent` spaces. A
// '\x01' is a space that is not a break.
inline std::string wrap(std::string const& text, std::size_t first_column, std::size_t indent, std::size_t width = 100) {
  std::string out, word;
  std::size_t col = first_column;
  std::istringstream in(text);
  bool first = true;
  while (in >> word) {
    if (!first && col + 1 + word.size() > width) {
      out += "\n" + std::string(indent, ' ');
      col = indent;
    } else if (!first) {
      out += ' ';
      ++col;
    }
    out += word;
    col += word.size();
    first = false;
  }
  std::replace(out.begin(), out.end(), '\x01', ' ');
  return out;
}

// ---------------------------------------------------------------------------------------
// Options and commands.

enum class value_kind { flag, integer, real, text };

struct option {
  std::string name;     // without the leading "--"
  std::string metavar;  // shown after the name in help ("N", "DIR"); empty for a flag
  std::string help_text;
  value_kind kind = value_kind::text;
  bool is_required = false;
  std::optional<std::string> default_value;  // used when the option is absent (validated like a given value)
  std::string default_note;                  // help's "default: ..." when no default_value is set
  std::int64_t min_int = std::numeric_limits<std::int64_t>::min(), max_int = std::numeric_limits<std::int64_t>::max();
  double min_real = -std::numeric_limits<double>::max(), max_real = std::numeric_limits<double>::max();
  std::vector<std::string> choices;                        // text: the accepted values (empty: any)
  std::function<std::string(std::string const&)> checker;  // extra check: returns what is wrong, or ""

  // Builder (each returns *this).
  option& help(std::string h) { return help_text = std::move(h), *this; }
  option& flag() { return kind = value_kind::flag, metavar.clear(), *this; }
  option& integer(std::int64_t lo = std::numeric_limits<std::int64_t>::min(),
                  std::int64_t hi = std::numeric_limits<std::int64_t>::max()) {
    return kind = value_kind::integer, min_int = lo, max_int = hi, *this;
  }
  option& real(double lo = -std::numeric_limits<double>::max(), double hi = std::numeric_limits<double>::max()) {
    return kind = value_kind::real, min_real = lo, max_real = hi, *this;
  }
  option& text() { return kind = value_kind::text, *this; }
  option& one_of(std::vector<std::string> c) { return kind = value_kind::text, choices = std::move(c), *this; }
  option& required() { return is_required = true, *this; }
  option& default_to(std::string v) { return default_value = std::move(v), *this; }
  option& default_is(std::string note) { return default_note = std::move(note), *this; }
  option& check(std::function<std::string(std::string const&)> f) { return checker = std::move(f), *this; }

  // "--name METAVAR"
  std::string signature() const { return "--" + name + (metavar.empty() ? "" : " " + metavar); }
};

class command {
 public:
  command(std::string name, std::string summary) : name_(std::move(name)), summary_(std::move(summary)) {}

  // Adds --name (metavar shown in help: "N", "DIR"); configure it through the returned option.
  option& opt(std::string const& name, std::string const& metavar = "VALUE") {
    if (name.empty() || name == "help" || find(name))
      throw std::logic_error("cli: option '--" + name + "' is declared twice or reserved");
    options_.emplace_back();
    options_.back().name = name;
    options_.back().metavar = metavar;
    return options_.back();
  }
  command& description(std::string d) { return description_ = std::move(d), *this; }
  command& epilog(std::string e) { return epilog_ = std::move(e), *this; }

  std::string const& name() const noexcept { return name_; }
  std::string const& summary() const noexcept { return summary_; }
  std::deque<option> const& options() const noexcept { return options_; }
  option const* find(std::string const& name) const {
    for (auto const& o : options_)
      if (o.name == name) return &o;
    return nullptr;
  }
  std::vector<std::string> option_names() const {
    std::vector<std::string> n;
    for (auto const& o : options_) n.push_back(o.name);
    return n;
  }

  // "graph_challenge infer --neurons N ... [options]"
  std::string usage(std::string const& program) const {
    std::string u = program + (name_.empty() ? "" : " " + name_);
    bool optional = false;
    for (auto const& o : options_) {
      if (o.is_required) u += " " + o.signature();
      else optional = true;
    }
    return u + (optional ? " [options]" : "");
  }

  // The options block: one entry per option with its default (or "required"), then -h.
  std::string options_help() const {
    std::size_t w = std::string("-h, --help").size();
    for (auto const& o : options_) w = std::max(w, o.signature().size());
    w += 2;
    std::string out;
    auto entry = [&](std::string const& sig, std::string text) {
      std::string line = "  " + sig + std::string(w - sig.size(), ' ');
      out += line + wrap(text, line.size(), w + 2) + "\n";
    };
    for (auto const& o : options_) {
      std::string text = o.help_text;
      if (!o.choices.empty()) {
        text += !text.empty() && text.back() == '.' ? " One of:" : "; one of:";
        for (std::size_t i = 0; i < o.choices.size(); ++i) text += (i ? ", " : " ") + o.choices[i];
      }
      // '\x01': a space wrap() does not break at ("(default: X)" stays on one line when short).
      std::string def = o.default_value ? *o.default_value : o.default_note;
      if (def.size() <= 30) std::replace(def.begin(), def.end(), ' ', '\x01');
      if (o.is_required) text += " (required)";
      else if (!def.empty()) text += " (default:\x01" + def + ")";
      entry(o.signature(), text);
    }
    entry("-h, --help", "show this help and exit");
    return out;
  }

  std::string help(std::string const& program) const {
    std::string h = "usage: " + usage(program) + "\n";
    if (!description_.empty()) h += "\n" + wrap(description_, 0, 0) + "\n";
    h += "\noptions:\n" + options_help();
    if (!epilog_.empty()) h += "\n" + epilog_ + (epilog_.back() == '\n' ? "" : "\n");
    return h;
  }

  // The value of option o as given (or its default): checked, or a usage_error.
  void validate(option const& o, std::string const& value) const {
    std::string const who = "--" + o.name;
    auto fail = [&](auto const&... what) { throw usage_error(detail::concat(who, ": ", what...), name_); };
    if (o.kind == value_kind::flag) return;
    if (value.empty()) fail("needs a value (", o.metavar, "), got an empty one");
    if (o.kind == value_kind::integer) {
      std::int64_t v = 0;
      bool overflow = false;
      if (!parse_int64(value, v, &overflow)) {
        if (overflow) fail("'", value, "' is out of range: expected an integer in [", o.min_int, ", ", o.max_int, "]");
        fail("'", value, "' is not an integer");
      }
      if (v < o.min_int || v > o.max_int)
        fail("'", value, "' is out of range: expected an integer in [", o.min_int, ", ", o.max_int, "]");
    } else if (o.kind == value_kind::real) {
      double v = 0;
      bool overflow = false;
      if (!parse_real(value, v, &overflow)) {
        if (overflow) fail("'", value, "' is too large (out of the range of a double)");
        fail("'", value, "' is not a finite decimal number");
      }
      if (v < o.min_real || v > o.max_real)
        fail("'", value, "' is out of range: expected a number in [", o.min_real, ", ", o.max_real, "]");
    } else if (!o.choices.empty() && std::find(o.choices.begin(), o.choices.end(), value) == o.choices.end()) {
      std::string const s = suggest(value, o.choices);
      std::string list;
      for (std::size_t i = 0; i < o.choices.size(); ++i) list += (i ? ", " : "") + o.choices[i];
      fail("'", value, "' is not one of ", list, s.empty() ? "" : " (did you mean " + s + "?)");
    }
    if (o.checker) {
      std::string const why = o.checker(value);
      if (!why.empty()) fail("'", value, "' ", why);
    }
  }

 private:
  std::string name_, summary_, description_, epilog_;
  std::deque<option> options_;  // a deque: opt()'s references stay valid while more are added
};

// What parse() found.
class result {
 public:
  std::string command;  // "" = the default command
  bool help = false;    // -h / --help / `help`: print help_text, exit 0
  std::string help_text;

  // Given on the command line (a default does not count).
  bool has(std::string const& name) const { return given_.count(name) != 0; }
  // The value given, else the default. Asking for an option that has neither, or that the
  // command does not declare, is a programming error (std::logic_error).
  std::string text(std::string const& name) const {
    declared(name);
    auto it = given_.find(name);
    if (it != given_.end()) return it->second;
    auto d = defaults_.find(name);
    if (d != defaults_.end()) return d->second;
    throw std::logic_error("cli: option --" + name + " of '" + command + "' has no value and no default");
  }
  std::int64_t integer(std::string const& name) const {
    std::int64_t v = 0;
    if (!parse_int64(text(name), v)) throw std::logic_error("cli: --" + name + " is not an integer option");
    return v;
  }
  double real(std::string const& name) const {
    double v = 0;
    if (!parse_real(text(name), v)) throw std::logic_error("cli: --" + name + " is not a real option");
    return v;
  }
  bool flag(std::string const& name) const { return declared(name), has(name); }

 private:
  friend class parser;
  void declared(std::string const& name) const {
    if (!declared_.count(name)) throw std::logic_error("cli: '" + command + "' has no option --" + name);
  }
  std::map<std::string, std::string> given_, defaults_;
  std::map<std::string, bool> declared_;
};

class parser {
 public:
  parser(std::string program, std::string description)
      : program_(std::move(program)), description_(std::move(description)) {}

  // name "" = the default command (run when the first argument is not a command name).
  command& add(std::string const& name, std::string const& summary) {
    if (find(name)) throw std::logic_error("cli: command '" + name + "' is declared twice");
    commands_.emplace_back(name, summary);
    return commands_.back();
  }
  parser& epilog(std::string e) { return epilog_ = std::move(e), *this; }

  std::string const& program() const noexcept { return program_; }
  command const* find(std::string const& name) const {
    for (auto const& c : commands_)
      if (c.name() == name) return &c;
    return nullptr;
  }

  // "'infer'" or "the default command"
  static std::string label(std::string const& command) {
    return command.empty() ? "the default command" : "'" + command + "'";
  }

  // The program's help: usage, the commands, the default command's options, the epilog.
  std::string help() const {
    std::string h = "usage: " + program_ + " [COMMAND] [options]\n       " + program_ +
                    " COMMAND --help    (the options of one command)\n";
    if (!description_.empty()) h += "\n" + wrap(description_, 0, 0) + "\n";
    h += "\ncommands:\n";
    std::size_t w = 6;
    for (auto const& c : commands_) w = std::max(w, c.name().size());
    w += 2;
    for (auto const& c : commands_) {
      std::string const n = c.name().empty() ? "(none)" : c.name();
      std::string line = "  " + n + std::string(w - n.size(), ' ');
      h += line + wrap(c.summary(), line.size(), w + 2) + "\n";
    }
    if (command const* d = find("")) h += "\noptions of the default command (no COMMAND):\n" + d->options_help();
    if (!epilog_.empty()) h += "\n" + epilog_ + (epilog_.back() == '\n' ? "" : "\n");
    return h;
  }
  std::string help(std::string const& command_name) const {
    if (command_name.empty()) return help();
    command const* c = find(command_name);
    if (!c) throw std::logic_error("cli: no command '" + command_name + "'");
    return c->help(program_);
  }

  result parse(int argc, char const* const* argv) const {
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
    return parse(args);
  }

  // args: without the program name.
  result parse(std::vector<std::string> const& args) const {
    result r;
    std::size_t i = 0;
    // The command: the first argument when it does not start with '-'.
    if (!args.empty() && !args[0].empty() && args[0][0] != '-') {
      if (args[0] == "help") {  // `help [COMMAND]`
        r.help = true;
        if (args.size() > 2) throw usage_error("help: expected at most one COMMAND, got '" + args[2] + "'", "");
        std::string const c = args.size() == 2 ? args[1] : "";
        if (!c.empty() && !find(c)) unknown_command(c);
        r.command = c;
        r.help_text = help(c);
        return r;
      }
      // The default command takes no positional value either: a leading word is a command.
      if (!find(args[0])) unknown_command(args[0]);
      r.command = args[0];
      ++i;
    } else if (!find("")) {
      throw usage_error("expected a COMMAND (" + command_list() + ")", "");
    }
    command const& cmd = *find(r.command);
    for (auto const& o : cmd.options()) {
      r.declared_[o.name] = true;
      if (o.default_value) r.defaults_[o.name] = *o.default_value;
    }
    // Help wins over everything else on the line.
    for (std::size_t k = i; k < args.size(); ++k)
      if (args[k] == "-h" || args[k] == "--help") {
        r.help = true;
        r.help_text = help(r.command);
        return r;
      }

    for (; i < args.size(); ++i) {
      std::string const& a = args[i];
      if (a.size() < 3 || a.compare(0, 2, "--") != 0) {
        if (a.size() >= 2 && a[0] == '-' && a != "--") unknown_option(cmd, a);  // "-x", "-policy"
        throw usage_error(detail::concat("unexpected argument '", a, "' for ", label(cmd.name()),
                                         " (every value follows its option, e.g. --name VALUE)"),
                          cmd.name());
      }
      std::string name = a.substr(2), value;
      bool inline_value = false;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        inline_value = true;
      }
      option const* o = cmd.find(name);
      if (!o) unknown_option(cmd, "--" + name);
      if (r.given_.count(name))
        throw usage_error(detail::concat("--", name, " is given twice"), cmd.name());
      if (o->kind == value_kind::flag) {
        if (inline_value)
          throw usage_error(detail::concat("--", name, " is a switch and takes no value, got '", a, "'"), cmd.name());
        r.given_[name] = "";
        continue;
      }
      if (!inline_value) {
        // The next argument is the value, unless it is missing or another option ("--x").
        if (i + 1 >= args.size() || (args[i + 1].size() >= 2 && args[i + 1].compare(0, 2, "--") == 0))
          throw usage_error(detail::concat("--", name, " needs a value (", o->signature(), ")"), cmd.name());
        value = args[++i];
      }
      cmd.validate(*o, value);
      r.given_[name] = value;
    }

    std::string missing;
    for (auto const& o : cmd.options())
      if (o.is_required && !r.given_.count(o.name)) missing += (missing.empty() ? "" : ", ") + o.signature();
    if (!missing.empty())
      throw usage_error("missing required option" + std::string(missing.find(',') != std::string::npos ? "s" : "") +
                            " for " + label(cmd.name()) + ": " + missing,
                        cmd.name());
    for (auto const& o : cmd.options())  // defaults are checked too: a bad one is a programming error
      if (o.default_value && !r.given_.count(o.name)) {
        try {
          cmd.validate(o, *o.default_value);
        } catch (usage_error const& e) {
          throw std::logic_error(std::string("cli: bad default: ") + e.what());
        }
      }
    return r;
  }

 private:
  std::string command_list() const {
    std::string s;
    for (auto const& c : commands_)
      if (!c.name().empty()) s += (s.empty() ? "" : ", ") + c.name();
    return s;
  }
  [[noreturn]] void unknown_command(std::string const& c) const {
    std::vector<std::string> names;
    for (auto const& x : commands_)
      if (!x.name().empty()) names.push_back(x.name());
    std::string const s = suggest(c, names);
    throw usage_error(detail::concat("unknown command '", c, "' (commands: ", command_list(),
                                     find("") ? "; none for the default command" : "", ")",
                                     s.empty() ? "" : "; did you mean " + s + "?"),
                      "");
  }
  [[noreturn]] void unknown_option(command const& cmd, std::string const& given) const {
    auto const start = given.find_first_not_of('-');
    std::string const bare = start == std::string::npos ? std::string() : given.substr(start);
    std::string hint;
    std::string const s = suggest(bare, cmd.option_names());
    if (!s.empty()) {
      hint = " (did you mean --" + s + "?)";
    } else {  // an option of other commands?
      std::string others;
      for (auto const& c : commands_)
        if (&c != &cmd && c.find(bare)) others += (others.empty() ? "" : ", ") + label(c.name());
      if (!others.empty()) hint = " (--" + bare + " is an option of " + others + ")";
    }
    throw usage_error(detail::concat("unknown option '", given, "' for ", label(cmd.name()), hint), cmd.name());
  }

  std::string program_, description_, epilog_;
  std::deque<command> commands_;
};

// ---------------------------------------------------------------------------------------
// Paths, checked before any work. Each throws cli::error naming `what` (e.g. "--truth") and
// the path. Writability is tested by doing (creating and removing a probe file), so it is
// also right for root and for read-only file systems.

namespace detail {
inline std::string why(int err) { return std::strerror(err); }
inline std::string parent_of(std::string const& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  auto const slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}
// Creates and removes a probe file in dir; "" when that worked, else the reason.
inline std::string probe_write(std::string const& dir) {
  std::string const probe = dir + "/.cli_write_probe_" + std::to_string(static_cast<long>(::getpid()));
  int const fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return why(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}
}  // namespace detail

// An existing, readable regular file (or something readable that is not a directory, such
// as a FIFO).
inline void check_input_file(std::string const& path, std::string const& what) {
  if (path.empty()) throw error(what + ": the path is empty");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    int const e = errno;
    if (e == ENOENT) throw error(what + ": '" + path + "' does not exist");
    throw error(what + ": cannot access '" + path + "': " + detail::why(e));
  }
  if (S_ISDIR(st.st_mode)) throw error(what + ": '" + path + "' is a directory, expected a file");
  if (::access(path.c_str(), R_OK) != 0) throw error(what + ": cannot read '" + path + "': " + detail::why(errno));
}

inline void check_input_dir(std::string const& path, std::string const& what) {
  if (path.empty()) throw error(what + ": the path is empty");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    int const e = errno;
    if (e == ENOENT) throw error(what + ": directory '" + path + "' does not exist");
    throw error(what + ": cannot access '" + path + "': " + detail::why(e));
  }
  if (!S_ISDIR(st.st_mode)) throw error(what + ": '" + path + "' is not a directory");
}

// A file that can be written: an existing writable file (opened for writing, not truncated),
// or a new file in an existing writable directory (created and removed again).
inline void check_output_file(std::string const& path, std::string const& what) {
  if (path.empty()) throw error(what + ": the path is empty");
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw error(what + ": '" + path + "' is a directory, expected a file");
    int const fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd < 0) throw error(what + ": cannot write '" + path + "': " + detail::why(errno));
    ::close(fd);
    return;
  }
  if (errno != ENOENT && errno != ENOTDIR) throw error(what + ": cannot access '" + path + "': " + detail::why(errno));
  std::string const dir = detail::parent_of(path);
  if (::stat(dir.c_str(), &st) != 0) {
    int const e = errno;
    throw error(what + ": cannot write '" + path + "': directory '" + dir + "' " +
                (e == ENOENT ? std::string("does not exist") : detail::why(e)));
  }
  if (!S_ISDIR(st.st_mode)) throw error(what + ": cannot write '" + path + "': '" + dir + "' is not a directory");
  int const fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) throw error(what + ": cannot write '" + path + "': " + detail::why(errno));
  ::close(fd);
  ::unlink(path.c_str());
}

// A directory that exists and is writable, or that make_dirs can create: its nearest existing
// ancestor is a writable directory. Creates nothing.
inline void check_output_dir(std::string const& path, std::string const& what) {
  if (path.empty()) throw error(what + ": the path is empty");
  std::string p = path;
  struct stat st;
  while (::stat(p.c_str(), &st) != 0) {
    if (errno != ENOENT && errno != ENOTDIR) throw error(what + ": cannot access '" + p + "': " + detail::why(errno));
    std::string const up = detail::parent_of(p);
    if (up == p) break;
    p = up;
  }
  if (!S_ISDIR(st.st_mode))
    throw error(what + ": '" + p + "' is not a directory" + (p == path ? "" : " (in '" + path + "')"));
  std::string const w = detail::probe_write(p);
  if (!w.empty()) throw error(what + ": cannot write in '" + p + "': " + w);
}

// mkdir -p.
inline void make_dirs(std::string const& path, std::string const& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) throw error(what + ": '" + path + "' is not a directory");
    return;
  }
  std::string const up = detail::parent_of(path);
  if (up != path) make_dirs(up, what);
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
    throw error(what + ": cannot create directory '" + path + "': " + detail::why(errno));
}

// ---------------------------------------------------------------------------------------
// Messages from the library, for users.

// Drops the trailing " [some/file.hpp:123]" that sdnn::error appends (the source location of
// the check): users get what is wrong, not where in sdnn's source it was noticed.
inline std::string strip_location(std::string what) {
  if (what.empty() || what.back() != ']') return what;
  auto const open = what.rfind(" [");
  if (open == std::string::npos) return what;
  auto const colon = what.rfind(':');
  if (colon == std::string::npos || colon < open) return what;
  std::string const line = what.substr(colon + 1, what.size() - colon - 2);
  if (line.empty() || line.find_first_not_of("0123456789") != std::string::npos) return what;
  what.erase(open);
  return what;
}

// ---------------------------------------------------------------------------------------
// Progress of a long step: "\r  reading layer 37/120" redrawn in place, erased when done.
// Drawn only when `out` is a terminal (or when asked with enabled = true); redirected output
// gets nothing. Redraws at most every min_interval seconds (and always at the last step).
class progress {
 public:
  progress(std::string what, std::int64_t total, std::FILE* out = stderr, int enabled = -1, double min_interval = 0.1)
      : what_(std::move(what)),
        total_(total),
        out_(out),
        enabled_(enabled < 0 ? (out != nullptr && ::isatty(::fileno(out)) == 1) : enabled != 0),
        min_interval_(min_interval) {}
  progress(progress const&) = delete;
  progress& operator=(progress const&) = delete;
  ~progress() { finish(); }

  bool enabled() const noexcept { return enabled_; }

  // `done` of total steps are done. At done == total the line is erased.
  void step(std::int64_t done) {
    if (!enabled_) return;
    auto const now = std::chrono::steady_clock::now();
    if (done < total_ && drawn_ && std::chrono::duration<double>(now - last_).count() < min_interval_) return;
    last_ = now;
    std::string const line = detail::concat("  ", what_, " ", done, "/", total_);
    std::string pad(width_ > line.size() ? width_ - line.size() : 0, ' ');
    std::fprintf(out_, "\r%s%s", line.c_str(), pad.c_str());
    std::fflush(out_);
    width_ = std::max(width_, line.size());
    drawn_ = true;
    if (done >= total_) finish();
  }
  // Erases the line (if one was drawn).
  void finish() {
    if (!enabled_ || !drawn_) return;
    std::fprintf(out_, "\r%s\r", std::string(width_, ' ').c_str());
    std::fflush(out_);
    drawn_ = false;
  }

 private:
  std::string what_;
  std::int64_t total_;
  std::FILE* out_;
  bool enabled_;
  double min_interval_;
  bool drawn_ = false;
  std::size_t width_ = 0;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace cli
