#include "cuda/backend/step_profiler.hpp"

#include <cstdio>

#include "cuda/common/cuda_check.hpp"

namespace cbatch {

StepProfiler::StepProfiler(bool detailed) : detailed_(detailed) {}

StepProfiler::~StepProfiler() {
  if (detailed_ && totals_[0].steps + totals_[1].steps > 0) {
    std::fprintf(stderr, "[cbatch] CUDA profile: %ld steps, %.1f ms busy\n", totals_[0].steps + totals_[1].steps,
                 busy_ms_);
    for (int kind : {1, 0}) {
      const Totals& t = totals_[kind];
      if (t.steps == 0) continue;
      std::fprintf(stderr, "[cbatch]  %s: %ld steps, %.1f ms (%.1f%% of busy), %.3f ms a step\n",
                   kind == 1 ? "decode-only steps" : "steps with prefill rows", t.steps, t.busy_ms,
                   100.0 * t.busy_ms / busy_ms_, t.busy_ms / static_cast<double>(t.steps));
      for (const auto& [name, ms] : t.phase_ms) {
        std::fprintf(stderr, "[cbatch]   %-14s %10.1f ms %5.1f%%\n", name.c_str(), ms, 100.0 * ms / t.busy_ms);
      }
    }
  }
  for (cudaEvent_t e : pool_) cudaEventDestroy(e);
}

cudaEvent_t StepProfiler::next_event() {
  if (marks_.size() == pool_.size()) {
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreate(&e));
    pool_.push_back(e);
  }
  return pool_[marks_.size()];
}

void StepProfiler::begin_step(cudaStream_t stream, bool decode_only) {
  marks_.clear();
  decode_only_ = decode_only;
  cudaEvent_t e = next_event();
  CUDA_CHECK(cudaEventRecord(e, stream));
  marks_.emplace_back("", e);
}

void StepProfiler::phase(const char* name, cudaStream_t stream) {
  if (!detailed_) return;
  cudaEvent_t e = next_event();
  CUDA_CHECK(cudaEventRecord(e, stream));
  marks_.emplace_back(name, e);
}

void StepProfiler::end_step(cudaStream_t stream) {
  if (marks_.empty()) {  // no begin_step: still the step's synchronization point
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }
  cudaEvent_t e = next_event();
  CUDA_CHECK(cudaEventRecord(e, stream));
  marks_.emplace_back("pick+copy", e);  // argmax or draws, and the ids (or logits) back
  CUDA_CHECK(cudaEventSynchronize(e));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, marks_.front().second, marks_.back().second));
  busy_ms_ += ms;
  if (detailed_) {
    Totals& t = totals_[decode_only_ ? 1 : 0];
    t.busy_ms += ms;
    ++t.steps;
    for (size_t i = 1; i < marks_.size(); ++i) {
      CUDA_CHECK(cudaEventElapsedTime(&ms, marks_[i - 1].second, marks_[i].second));
      t.phase_ms[marks_[i].first] += ms;
    }
  }
  marks_.clear();
}

}  // namespace cbatch
