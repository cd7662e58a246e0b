#pragma once
// The examples every `feedscope ... --help` ends with, as git's and py-spy's do. Each is a
// command a user can copy; tests/cli/docs_commands_test.cc parses every one of them.
#include <string>
#include <utility>
#include <vector>

namespace CLI {
class App;
}

namespace feedscope {

// (subcommand path, examples): "" is the program itself, "make-dataset images" a nested one.
// Each example is a comment line (# ...) and a command line.
const std::vector<std::pair<std::string, std::string>>& help_examples();

// Sets each registered subcommand's help footer to its "Examples:" block. Call after every
// subcommand is added; a subcommand without examples keeps no footer.
void add_help_examples(CLI::App& app);

}  // namespace feedscope
