// `run --data-parallel-size D`: D child processes of cbatch itself, child i answering shard i/D into its
// own output file and summary beside the requested output (OUT.shard-i-of-D.jsonl), then one merge into
// the requested output. On CUDA each child sees one GPU (CUDA_VISIBLE_DEVICES, taken from the parent's
// list when it has one); on the CPU the --threads are split among the children. SIGINT/SIGTERM are
// forwarded to the children (who run in their own process group, so a terminal's Ctrl-C reaches them
// once), and a child dies with the parent (PR_SET_PDEATHSIG). A child that fails is reported with its
// shard and exit status and nothing is merged; `--resume` resumes every child's shard file.
#pragma once
#include <string>

#include "cmd/run_plan.hpp"

namespace cbatch {

struct DataParallelRun {
  int size = 2;
  std::string prompts;
  std::string output;
  std::string summary;   // the merged summary ("" = none)
  std::string trace;     // each child writes TRACE.shard-i-of-D.jsonl ("" = none)
  Device device = Device::kCpu;  // the parent's plan's: each child on its own GPU, or its share of the threads
  int threads = 0;       // --threads (0 = all cores)
  bool quiet = false;
};

// Returns the process exit status (as run's; 1 when a child failed).
int run_data_parallel(const DataParallelRun& run);

}  // namespace cbatch
