// The commands the documentation shows are commands the program takes. Every `feedscope ...` line
// in a code block of README.md and docs/**/*.md, and every example a `--help` ends with, goes
// through feedscope_main's check-only mode: the parser and the value checks the program itself
// uses, so a renamed option or a narrowed range cannot leave the docs behind.
//
// A line is a command where its first word (after `$ ` and VAR=value words) is `feedscope` or a
// path ending in `/feedscope`; a trailing `\` continues it. Output goes in ```text blocks, which
// are not read. Before `--` (after it the words are
// the user's program) the synopsis notation is read: `[...]` is optional and is included, `a | b`
// inside brackets and `a|b` inside a word are alternatives, each checked in turn; `...` and the
// words `options` and `bounds` stand for more options and are dropped; and the placeholders in
// kPlaceholders stand for values. At the top level, `|`, `>`, `&&` and `;` end the command, `#`
// starts a comment.
#include "cli/feedscope_main.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "exporters/console_report.h"
#include "profiler/bottleneck_names.h"
#include "profiler/stage_accumulator.h"

namespace feedscope {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = FEEDSCOPE_SOURCE_DIR;

// Placeholder -> a value the option accepts. Only whole words before `--` are replaced.
const std::map<std::string, std::string> kPlaceholders = {
    {"N", "2"},
    {"S", "10"},
    {"F", "10"},
    {"B", "4096"},
    {"K", "10"},
    {"Q", "90"},
    {"R", "0.01"},
    {"U", "samples/s"},
    {"D", "/tmp/feedscope-report"},
    {"A", "127.0.0.1:9464"},
    {"HOST:PORT", "127.0.0.1:9464"},
    {"SECONDS", "10"},
    {"PID", "4242"},
    {"WxH", "64x48"},
    {"SHARE:WxH", "0.02:128x96"},
    {"REGEX", "([0-9.]+) samples/s"},
    {"FILE.yaml", "configs/demo.yaml"},
    {"synthetic:SHAPE", "synthetic:3x32x32"},
};
const std::set<std::string> kDropped = {"...", "options", "bounds"};

struct Command {
  std::string where;  // file:line
  std::string text;
  std::vector<std::string> words;  // shell words, quotes removed; `[`, `]`, `|` kept as marks
  std::vector<bool> quoted;        // a quoted word is never notation
};

// Shell words of a line: '...' and "..." quoting, a backslash escape outside them. Stops at a
// top-level comment. Notation characters outside quotes ([ ] |) are kept in the words.
void split_words(const std::string& line, Command& c) {
  std::string word;
  bool in_word = false, any_quote = false;
  const auto end_word = [&] {
    if (in_word) c.words.push_back(word), c.quoted.push_back(any_quote);
    word.clear();
    in_word = any_quote = false;
  };
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (ch == ' ' || ch == '\t') {
      end_word();
    } else if (ch == '#' && !in_word) {
      break;
    } else if (ch == '\'' || ch == '"') {
      const std::size_t close = line.find(ch, i + 1);
      if (close == std::string::npos) throw std::runtime_error("unbalanced quote in: " + line);
      word += line.substr(i + 1, close - i - 1);
      in_word = any_quote = true;
      i = close;
    } else if (ch == '\\' && i + 1 < line.size()) {
      word += line[++i];
      in_word = true;
    } else {
      word += ch;
      in_word = true;
    }
  }
  end_word();
}

bool is_feedscope(const std::string& word) {
  return word == "feedscope" || (word.size() > 10 && word.substr(word.size() - 10) == "/feedscope");
}

bool is_assignment(const std::string& word) {
  return std::regex_match(word, std::regex("[A-Za-z_][A-Za-z0-9_]*=.*"));
}

// The command in a line of a code block, or nothing.
std::optional<Command> command_in(const std::string& line, const std::string& where) {
  std::string text = line;
  const std::size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return std::nullopt;
  text = text.substr(first);
  if (text.rfind("$ ", 0) == 0) text = text.substr(2);
  Command c;
  c.where = where;
  c.text = text;
  split_words(text, c);
  std::size_t start = 0;
  while (start < c.words.size() && !c.quoted[start] && is_assignment(c.words[start])) ++start;
  if (start == c.words.size() || !is_feedscope(c.words[start])) return std::nullopt;
  c.words.erase(c.words.begin(), c.words.begin() + static_cast<std::ptrdiff_t>(start));
  c.quoted.erase(c.quoted.begin(), c.quoted.begin() + static_cast<std::ptrdiff_t>(start));
  c.words.front() = "feedscope";
  return c;
}

// Code blocks of a Markdown file that hold shell lines: no language, sh, bash or shell, and the
// `$ ` lines of a console block. A program's output goes in a `text` block, which is not read.
std::vector<Command> commands_in_markdown(const fs::path& file) {
  std::ifstream in(file);
  std::vector<Command> out;
  bool in_block = false, shell = false, console = false;
  std::string pending;
  int pending_line = 0, n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    const std::size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line.compare(first, 3, "```") == 0) {
      const std::string lang = line.substr(first + 3);
      if (!in_block) {
        console = lang == "console";
        shell = console || lang.empty() || lang == "sh" || lang == "bash" || lang == "shell";
      }
      in_block = !in_block;
      pending.clear();
      continue;
    }
    if (!in_block || !shell) continue;
    if (pending.empty()) {
      pending_line = n;
      if (console && line.rfind("$ ", 0) != 0) continue;
    }
    if (!line.empty() && line.back() == '\\') {
      pending += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    pending += line;
    const std::string where =
        fs::relative(file, kSource).string() + ":" + std::to_string(pending_line);
    if (auto c = command_in(pending, where)) out.push_back(*c);
    pending.clear();
  }
  return out;
}

// The synopsis notation of the words before `--`, as a tree: a sequence of words and optional
// groups; a group (and the top level) holds alternatives separated by `|`.
struct Node;
using Sequence = std::vector<Node>;
struct Node {
  std::string word;                    // a word, or
  std::vector<Sequence> alternatives;  // a group of alternatives (brackets or a|b in a word)
  bool group = false;
};

// Splits notation marks off the unquoted words: "[--prefetch" -> "[", "--prefetch".
std::vector<std::string> marks_apart(const Command& c, std::size_t end) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < end; ++i) {
    std::string w = c.words[i];
    if (c.quoted[i]) {
      out.push_back("\x01" + w);  // never notation
      continue;
    }
    while (!w.empty() && w.front() == '[') out.push_back("["), w.erase(0, 1);
    std::size_t closes = 0;
    while (!w.empty() && w.back() == ']') ++closes, w.pop_back();
    if (!w.empty()) out.push_back(w);
    for (std::size_t k = 0; k < closes; ++k) out.push_back("]");
  }
  return out;
}

// Reads words up to the group's `]` (nested) or the command's end (the top level, where `|` is
// a pipe and `>`, `&&`, `;` end the command too). A group's `|` separates its alternatives.
std::vector<Sequence> parse_group(const std::vector<std::string>& marks, std::size_t& i,
                                  bool nested) {
  std::vector<Sequence> alternatives(1);
  while (i < marks.size()) {
    const std::string& m = marks[i++];
    Sequence& seq = alternatives.back();
    if (m == "]") {
      if (!nested) throw std::runtime_error("a ] without its [");
      return alternatives;
    }
    if (m == "|" && nested) {
      alternatives.emplace_back();
    } else if (m == "[") {
      seq.push_back(Node{"", parse_group(marks, i, true), true});
    } else if (m.front() == '\x01') {
      seq.push_back(Node{m.substr(1), {}, false});
    } else if (!nested && (m == "|" || m == "&&" || m == ";" || m == "&" ||
                           m.find('>') != std::string::npos)) {
      i = marks.size();
    } else if (m.find('|') != std::string::npos) {  // a|b|c: alternative values
      Node choice{"", {}, true};
      std::stringstream parts(m);
      for (std::string part; std::getline(parts, part, '|');)
        choice.alternatives.push_back({Node{part, {}, false}});
      seq.push_back(choice);
    } else {
      seq.push_back(Node{m, {}, false});
    }
  }
  if (nested) throw std::runtime_error("a [ without its ]");
  return alternatives;
}

std::size_t most_alternatives(const Sequence& seq) {
  std::size_t most = 1;
  for (const Node& n : seq) {
    if (!n.group) continue;
    most = std::max(most, n.alternatives.size());
    for (const Sequence& s : n.alternatives) most = std::max(most, most_alternatives(s));
  }
  return most;
}

// Variant k takes alternative min(k, count - 1) of every choice, so every alternative is checked.
void expand(const Sequence& seq, std::size_t k, std::vector<std::string>& out) {
  for (const Node& n : seq) {
    if (!n.group) {
      if (kDropped.count(n.word)) continue;
      const auto p = kPlaceholders.find(n.word);
      out.push_back(p == kPlaceholders.end() ? n.word : p->second);
      continue;
    }
    expand(n.alternatives[std::min(k, n.alternatives.size() - 1)], k, out);
  }
}

std::vector<std::vector<std::string>> variants(const Command& c) {
  const auto dashes = std::find(c.words.begin(), c.words.end(), "--");
  const std::size_t split = static_cast<std::size_t>(dashes - c.words.begin());
  const std::vector<std::string> marks = marks_apart(c, split);
  std::size_t i = 0;
  const Sequence seq = parse_group(marks, i, false).front();
  std::vector<std::vector<std::string>> out;
  for (std::size_t k = 0; k < most_alternatives(seq); ++k) {
    std::vector<std::string> words;
    expand(seq, k, words);
    if (dashes != c.words.end())
      words.insert(words.end(), dashes, c.words.end());  // the program's words, as they are
    out.push_back(words);
  }
  return out;
}

struct Checked {
  int code = 0;
  std::string out, err;
};

Checked check(std::vector<std::string> words, bool check_only = true) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::ostringstream out, err;
  CommandLineMode mode;
  mode.check_only = check_only;
  mode.out = &out;
  mode.err = &err;
  const int code = feedscope_main(static_cast<int>(words.size()), argv.data(), mode);
  return {code, out.str(), err.str()};
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// Each variant of each command parses; returns how many were checked.
std::size_t expect_parse(const std::vector<Command>& commands) {
  std::size_t checked = 0;
  for (const Command& c : commands) {
    std::vector<std::vector<std::string>> all;
    try {
      all = variants(c);
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.where << ": cannot read the notation (" << e.what() << "): " << c.text;
      continue;
    }
    for (const auto& words : all) {
      const Checked r = check(words);
      ++checked;
      EXPECT_EQ(r.code, 0) << c.where << ": " << c.text << "\n  checked as: " << joined(words)
                           << "\n  " << r.err << r.out;
    }
  }
  return checked;
}

std::vector<fs::path> documentation_files() {
  std::vector<fs::path> files = {kSource / "README.md"};
  for (const auto& entry : fs::recursive_directory_iterator(kSource / "docs"))
    if (entry.is_regular_file() && entry.path().extension() == ".md") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

class DocsCommandsTest : public ::testing::Test {
 protected:
  // `--config configs/demo.yaml` and the like are read from the checkout, as the docs run them.
  void SetUp() override {
    previous_ = fs::current_path();
    fs::current_path(kSource);
  }
  void TearDown() override { fs::current_path(previous_); }

 private:
  fs::path previous_;
};

TEST_F(DocsCommandsTest, EveryCommandInTheReadmeAndTheGuideParses) {
  std::size_t commands = 0, readme = 0;
  for (const fs::path& file : documentation_files()) {
    const std::vector<Command> found = commands_in_markdown(file);
    commands += found.size();
    if (file.filename() == "README.md" && file.parent_path() == kSource) readme = found.size();
    expect_parse(found);
  }
  // The README shows each use with its command; an empty list means the reader above broke.
  EXPECT_GE(readme, 8u);
  EXPECT_GE(commands, 30u);
}

TEST_F(DocsCommandsTest, TheCheckerRejectsWhatTheProgramRejects) {
  // So a passing docs test means something: unknown options, bad values and unknown
  // subcommands fail in check-only mode as they fail for real, and notation expands.
  EXPECT_EQ(check({"feedscope", "run", "--num-workers", "2"}).code, 0);
  EXPECT_EQ(check({"feedscope", "run", "--num-wrokers", "2"}).code, 2);
  EXPECT_EQ(check({"feedscope", "run", "--num-workers", "many"}).code, 2);
  EXPECT_EQ(check({"feedscope", "run", "--dataset", "imgs:/x"}).code, 2);
  EXPECT_EQ(check({"feedscope", "sweep", "--num-workers", "0,x"}).code, 2);
  EXPECT_EQ(check({"feedscope", "tune", "--num-workers", "0,1"}).code, 2);
  EXPECT_EQ(check({"feedscope", "frobnicate"}).code, 2);
  EXPECT_EQ(check({"feedscope", "watch", "--throughput-unit", "fps", "--", "true"}).code, 2);
  EXPECT_EQ(check({"feedscope", "watch", "--throughput-pattern", "no group", "--", "true"}).code,
            2);
  EXPECT_EQ(check({"feedscope", "watch", "--duration", "5"}).code, 2);  // no program
  EXPECT_EQ(
      check({"feedscope", "make-dataset", "images", "--out", "/x", "--count", "1", "--size", "big"})
          .code,
      2);
  EXPECT_EQ(check({"feedscope", "run", "--steps", "5", "--duration", "5"}).code, 2);

  const auto c = command_in(
      "FOO=1 ./build/cli/feedscope sweep --num-workers N [--prefetch 1,2] "
      "[--steps N | --duration S] --pin-memory on|off -- python3 t.py -j {num_workers}  # x",
      "t:1");
  ASSERT_TRUE(c);
  const auto v = variants(*c);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(joined(v[0]),
            "feedscope sweep --num-workers 2 --prefetch 1,2 --steps 2 --pin-memory on -- python3 "
            "t.py -j {num_workers}");
  EXPECT_EQ(joined(v[1]),
            "feedscope sweep --num-workers 2 --prefetch 1,2 --duration 10 --pin-memory off -- "
            "python3 t.py -j {num_workers}");
  const auto piped = command_in("feedscope run --json | jq .diagnosis", "t:2");
  ASSERT_TRUE(piped);
  EXPECT_EQ(joined(variants(*piped).at(0)), "feedscope run --json");
  EXPECT_FALSE(command_in("python3 bench/corpus.py --feedscope build/cli/feedscope", "t:3"));
}

// The subcommands a help text lists under "Subcommands:".
std::vector<std::string> subcommands_in(const std::string& help) {
  std::vector<std::string> out;
  std::istringstream lines(help);
  bool in_list = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("Subcommands:", 0) == 0) {
      in_list = true;
      continue;
    }
    if (!in_list) continue;
    if (line.empty() || line[0] != ' ') break;
    std::istringstream words(line);
    std::string name;
    words >> name;
    out.push_back(name);
  }
  return out;
}

TEST_F(DocsCommandsTest, EveryHelpEndsWithExamplesThatParse) {
  std::vector<std::vector<std::string>> pending = {{"feedscope"}};
  std::size_t helps = 0;
  while (!pending.empty()) {
    std::vector<std::string> path = pending.back();
    pending.pop_back();
    std::vector<std::string> words = path;
    words.push_back("--help");
    const Checked r = check(words);
    ++helps;
    const std::string name = joined(path);
    ASSERT_EQ(r.code, 0) << name << " --help: " << r.err;
    const std::size_t at = r.out.find("\nExamples:\n");
    ASSERT_NE(at, std::string::npos) << name << " --help has no Examples: block:\n" << r.out;
    std::vector<Command> examples;
    std::istringstream lines(r.out.substr(at + 11));
    for (std::string line; std::getline(lines, line);)
      if (auto c = command_in(line, name + " --help")) examples.push_back(*c);
    EXPECT_FALSE(examples.empty()) << name << " --help: its Examples: block holds no command";
    // Each example is of this subcommand (or, for the program itself, of any).
    for (const Command& c : examples)
      EXPECT_TRUE(std::equal(path.begin(), path.end(), c.words.begin())) << name << ": " << c.text;
    expect_parse(examples);
    for (const std::string& sub : subcommands_in(r.out)) {
      std::vector<std::string> child = path;
      child.push_back(sub);
      pending.push_back(child);
    }
  }
  EXPECT_GE(helps, 12u);  // the program, 7 subcommands, make-dataset's 4 kinds
}

TEST(DocsOutputsTest, TheBottleneckNamesShownAreTheDiagnosisNames) {
  const std::set<std::string> known(kBottleneckNames.begin(), kBottleneckNames.end());
  // The README's table of names lists each of them, and only them.
  std::ifstream in(kSource / "README.md");
  std::set<std::string> in_table;
  bool in_section = false;
  const std::regex row("^\\| `([a-z_]+)` \\|.*");
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line.find("ottleneck") != std::string::npos;
    if (in_section && std::regex_match(line, m, row)) in_table.insert(m[1]);
  }
  EXPECT_EQ(in_table, known) << "README.md's bottleneck table";
  // Every `bottleneck: NAME` an output in the docs shows is one of them.
  const std::regex shown("bottleneck: ([a-z_]+)");
  for (const fs::path& file : documentation_files()) {
    std::ifstream doc(file);
    int n = 0;
    for (std::string line; std::getline(doc, line);) {
      ++n;
      for (auto it = std::sregex_iterator(line.begin(), line.end(), shown);
           it != std::sregex_iterator(); ++it)
        EXPECT_TRUE(known.count((*it)[1]) > 0)
            << fs::relative(file, kSource).string() << ":" << n << " shows bottleneck " << (*it)[1];
    }
  }
}

// The lines of the docs' ```text blocks, with where each is.
std::vector<std::pair<std::string, std::string>> output_lines() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const fs::path& file : documentation_files()) {
    std::ifstream doc(file);
    bool in_text = false;
    int n = 0;
    for (std::string line; std::getline(doc, line);) {
      ++n;
      const std::size_t first = line.find_first_not_of(" \t");
      if (first != std::string::npos && line.compare(first, 3, "```") == 0) {
        in_text = !in_text && line.substr(first + 3) == "text";
        continue;
      }
      if (in_text)
        out.emplace_back(fs::relative(file, kSource).string() + ":" + std::to_string(n), line);
    }
  }
  return out;
}

TEST(DocsOutputsTest, TheConsoleReportsShownHaveTheShapeTheProgramPrints) {
  // A report with a stage, evidence and a recommendation, formatted as the program prints it.
  Report r;
  r.diagnosis.verdict = "v";
  r.diagnosis.bottleneck = "cpu_compute";
  r.diagnosis.evidence = {"e"};
  Recommendation rec;
  rec.action = "a";
  r.diagnosis.recommendations = {rec};
  StageStats s;
  s.name = "step";
  s.count = 1;
  r.stages = {s};
  const std::string printed = format_console_report(r, false);
  std::set<std::string> labels;  // "  bottleneck:", "  evidence:", ...
  std::string header;
  std::istringstream lines(printed);
  for (std::string line; std::getline(lines, line);) {
    const std::regex label("^(  [a-z]+:).*");
    std::smatch m;
    if (std::regex_match(line, m, label)) labels.insert(m[1]);
    if (line.rfind("  stage ", 0) == 0) header = line;
  }
  ASSERT_FALSE(header.empty()) << printed;
  const std::set<std::string> stages(fixed_stage_names().begin(), fixed_stage_names().end());
  bool in_table = false;
  for (const auto& [where, line] : output_lines()) {
    std::smatch m;
    if (std::regex_match(
            line, m,
            std::regex("^(  (bottleneck|throughput|evidence|recommendations|device):).*"))) {
      EXPECT_TRUE(labels.count(m[1]) > 0) << where << ": " << line;
    }
    if (line.rfind("  stage ", 0) == 0) {
      EXPECT_EQ(line, header) << where << ": the stage table's header";
      in_table = true;
      continue;
    }
    if (in_table && std::regex_match(line, m, std::regex("^  ([a-z0-9]+) +[0-9]+ .*"))) {
      EXPECT_TRUE(stages.count(m[1]) > 0) << where << ": stage " << m[1];
      continue;
    }
    in_table = false;
  }
}

}  // namespace
}  // namespace feedscope
