// The subcommands of cbatch. Each registers its options on the CLI11 app and returns a runner that
// gives the process exit status (0 ok, 2 some requests failed, 1 fatal, 130/143 interrupted).
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace cbatch {

struct Command {
  CLI::App* app = nullptr;          // the subcommand
  std::function<int()> run;         // called after a successful parse when the subcommand was given
};

Command add_run_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_tokenize_command(CLI::App& app);
Command add_inspect_command(CLI::App& app);
Command add_merge_command(CLI::App& app);

}  // namespace cbatch
