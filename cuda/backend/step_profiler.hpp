// Device-side timing of forward passes with CUDA events. Always: the busy time of each step (an event
// before its first and after its last operation), whose sum against wall time tells how long the GPU sat
// idle between steps. Detailed (--cuda-profile, CudaKernelOptions::profile) also each phase of the step
// (attention, each GEMM, ...), summed over the run separately for decode-only steps (every sequence one
// row) and steps with prefill rows, and printed to stderr when the backend is destroyed.
#pragma once
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

namespace cbatch {

class StepProfiler {
 public:
  explicit StepProfiler(bool detailed);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // Marks the start of a step / the end of the phase `name` (phases only when profiling is on).
  void begin_step(cudaStream_t stream, bool decode_only);
  void phase(const char* name, cudaStream_t stream);
  // Waits for everything enqueued on the stream so far (the step's one synchronization) and adds this
  // step's times.
  void end_step(cudaStream_t stream);
  double busy_seconds() const { return busy_ms_ * 1e-3; }

 private:
  cudaEvent_t next_event();

  bool detailed_ = false;
  std::vector<cudaEvent_t> pool_;                  // reusable events, one per mark of a step
  std::vector<std::pair<const char*, cudaEvent_t>> marks_;  // (phase that ends here, event) of this step
  struct Totals {                                  // summed over the steps of one kind
    std::map<std::string, double> phase_ms;
    double busy_ms = 0;
    long steps = 0;
  };
  Totals totals_[2];                               // [0] steps with prefill rows, [1] decode-only steps
  bool decode_only_ = false;                       // the kind of the step being timed
  double busy_ms_ = 0;
};

}  // namespace cbatch
