// cbatch: offline batch inference for Llama-family models. main parses, dispatches, reports. Whatever a
// command printed on standard output is flushed and checked here: a full disk or a failed write is exit 1.
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "cmd/commands.hpp"
#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"
#include "engine/base/text_output.hpp"

#ifdef CBATCH_HAVE_CUDA
#include "cuda/backend/cuda_architectures.hpp"
#include "cuda/backend/cuda_backend.hpp"
#endif

namespace {

std::string version_text() {
  std::string text = std::string("cbatch ") + CBATCH_VERSION + "\n";
#ifdef CBATCH_HAVE_CUDA
  text += "CUDA support: yes (compiled for " + cbatch::describe_cuda_architectures(CBATCH_CUDA_ARCHITECTURES) + ")\n";
  const int count = cbatch::cuda_device_count();
  if (count == 0) text += "CUDA devices: none found\n";
  for (int i = 0; i < count; ++i) text += "CUDA device " + std::to_string(i) + ": " + cbatch::cuda_device_description(i) + "\n";
#else
  text += "CUDA support: no (CPU backend only)\n";
#endif
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cbatch: offline batch inference for Llama-family language models"};
  app.require_subcommand(0, 1);
  // CLI11's messages quote the bad value: bounded like every other message.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    const std::string text = CLI::FailureMessage::simple(a, e);
    return text.size() <= cbatch::kMessageBytes ? text : cbatch::elide(text, cbatch::kMessageBytes) + "\n";
  });
  bool show_version = false;
  app.add_flag("--version", show_version, "print the version and CUDA support");
  const cbatch::Command commands[] = {cbatch::add_run_command(app), cbatch::add_bench_command(app),
                                      cbatch::add_tokenize_command(app), cbatch::add_inspect_command(app),
                                      cbatch::add_merge_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  try {
    if (show_version) {
      std::fputs(version_text().c_str(), stdout);
      cbatch::flush_standard_output();
      return 0;
    }
    for (const cbatch::Command& command : commands) {
      if (!command.app->parsed()) continue;
      const int status = command.run();
      cbatch::flush_standard_output();
      return status;
    }
    std::fputs(app.help().c_str(), stderr);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cbatch: error: %s\n", cbatch::elide(e.what(), cbatch::kMessageBytes).c_str());
    return 1;
  }
}
