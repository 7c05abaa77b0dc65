// The parent of a data-parallel run: plans the children (shard, files, GPU or threads, arguments),
// starts them with fork/execve of /proc/self/exe, waits, forwards a stop signal, then merges.
#include "cmd/data_parallel.hpp"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "cmd/merge_shards.hpp"
#include "cmd/signals.hpp"
#include "engine/base/error.hpp"
#include "engine/base/file_type.hpp"
#include "engine/base/replaced_file.hpp"
#include "engine/scale/child_args.hpp"
#include "engine/scale/shard_summary.hpp"

#ifdef CBATCH_HAVE_CUDA
#include "cuda/backend/cuda_backend.hpp"
#endif

extern char** environ;

namespace cbatch {
namespace {

struct Child {
  ShardSpec shard;
  std::string output;
  std::vector<std::string> args;  // argv[1..]
  std::vector<std::string> env;   // the whole environment
  pid_t pid = -1;
  int status = 0;
};

// This process's own arguments, without argv[0] (read back so that every option passes to the children).
std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t start = 0; start < all.size();) {
    const size_t end = all.find('\0', start);
    args.push_back(all.substr(start, end - start));
    start = end == std::string::npos ? all.size() : end + 1;
  }
  if (args.empty()) throw Error("cannot read this process's arguments from /proc/self/cmdline");
  args.erase(args.begin());
  return args;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

// The GPUs the children get, one each; empty when the run is on the CPU. Throws when D are not visible.
std::vector<std::string> child_gpus(const DataParallelRun& r) {
  if (r.device == Device::kCpu) return {};
  int count = 0;
#ifdef CBATCH_HAVE_CUDA
  count = cuda_device_count();
#endif
  if (count < r.size) {
    throw Error("--data-parallel-size " + std::to_string(r.size) + ": only " + std::to_string(count) +
                " CUDA devices are visible (one process per GPU; use --device cpu for CPU processes)");
  }
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::vector<std::string> gpus = visible != nullptr && *visible != '\0' ? split_list(visible) : std::vector<std::string>{};
  for (int i = static_cast<int>(gpus.size()); i < r.size; ++i) gpus.push_back(std::to_string(i));
  gpus.resize(static_cast<size_t>(r.size));
  return gpus;
}

int threads_per_child(const DataParallelRun& r) {
  const int total = r.threads > 0 ? r.threads : static_cast<int>(std::thread::hardware_concurrency());
  if (total < r.size) {
    throw Error("--data-parallel-size " + std::to_string(r.size) + " on the CPU splits --threads among the "
                "processes, but there are only " + std::to_string(total) + " threads (" +
                (r.threads > 0 ? "--threads" : "cores") + "): give each process at least one");
  }
  return total / r.size;
}

// This process's environment with `name` set to `value` (unchanged when value is empty).
std::vector<std::string> environment_with(const std::string& name, const std::string& value) {
  std::vector<std::string> env;
  const std::string prefix = name + "=";
  for (char** e = environ; *e != nullptr; ++e) {
    if (value.empty() || std::strncmp(*e, prefix.c_str(), prefix.size()) != 0) env.emplace_back(*e);
  }
  if (!value.empty()) env.push_back(prefix + value);
  return env;
}

std::vector<Child> plan_children(const DataParallelRun& r) {
  const std::vector<std::string> gpus = child_gpus(r);
  const int threads = gpus.empty() ? threads_per_child(r) : r.threads;
  const std::vector<std::string> args = own_arguments();
  std::vector<Child> children;
  for (int i = 0; i < r.size; ++i) {
    Child c;
    c.shard = {i, r.size};
    c.output = shard_file_path(r.output, c.shard);
    const ChildPlan plan{c.shard, c.output, default_summary_path(c.output),
                         r.trace.empty() ? "" : shard_file_path(r.trace, c.shard), threads};
    c.args = child_arguments(args, plan);
    c.env = environment_with("CUDA_VISIBLE_DEVICES", gpus.empty() ? "" : gpus[static_cast<size_t>(i)]);
    children.push_back(std::move(c));
  }
  return children;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void start(Child& c) {
  std::vector<std::string> argv = c.args;
  argv.insert(argv.begin(), "cbatch");
  std::vector<char*> c_argv = c_strings(argv);
  std::vector<char*> c_env = c_strings(c.env);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("cannot start a child process: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);                          // the terminal's Ctrl-C reaches the parent only; it forwards
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);       // and the child stops when the parent dies
    if (::getppid() != parent) ::_exit(1);
    ::execve("/proc/self/exe", c_argv.data(), c_env.data());
    ::_exit(127);
  }
  c.pid = pid;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

// Waits for every child, forwarding a stop signal once; returns the signal that came (0 if none).
int wait_all(std::vector<Child>& children, const std::atomic<int>& stop) {
  size_t running = children.size();
  int forwarded = 0;
  while (running > 0) {
    if (stop.load() != 0 && forwarded == 0) {
      forwarded = stop.load();
      for (const Child& c : children) {
        if (c.pid > 0) ::kill(c.pid, forwarded);
      }
    }
    for (Child& c : children) {
      if (c.pid <= 0) continue;
      const pid_t done = ::waitpid(c.pid, &c.status, WNOHANG);
      if (done == c.pid) {
        c.pid = 0;
        --running;
      }
    }
    if (running > 0) ::usleep(50 * 1000);
  }
  return forwarded;
}

}  // namespace

int run_data_parallel(const DataParallelRun& r) {
  if (r.output == "-") throw Error("--data-parallel-size needs an output file (-o OUT.jsonl): each process writes its own shard before the merge");
  if (r.prompts == "-") throw Error("--data-parallel-size needs the prompts as a file: the processes cannot share standard input");
  // What would stop the merge at the end is refused before any process starts.
  require_regular_file(r.prompts, "--data-parallel-size: every process reads the prompts file, so it must be a regular file");
  replacement_target(r.output);
  std::vector<Child> children = plan_children(r);
  const std::atomic<int>& stop = install_stop_signals();
  for (Child& c : children) start(c);
  if (!r.quiet) std::fprintf(stderr, "[cbatch] data parallel: %d processes, shard files %s ...\n", r.size, children[0].output.c_str());
  const int signal = wait_all(children, stop);
  bool failed = false;
  for (const Child& c : children) {
    const bool ok = WIFEXITED(c.status) && (WEXITSTATUS(c.status) == 0 || WEXITSTATUS(c.status) == 2);
    if (ok) continue;
    failed = true;
    std::fprintf(stderr, "cbatch: shard %s (%s) %s\n", c.shard.name().c_str(), c.output.c_str(), describe_status(c.status).c_str());
  }
  if (signal != 0) return 128 + signal;
  if (failed) {
    std::fprintf(stderr, "cbatch: nothing merged; rerun with --resume to finish the failed shards\n");
    return 1;
  }
  MergeSources sources;
  sources.input = r.prompts;
  for (const Child& c : children) {
    sources.shards.push_back(c.output);
    sources.summaries.push_back(default_summary_path(c.output));
  }
  return merge_and_report(sources, r.output, r.summary, r.quiet);
}

}  // namespace cbatch
