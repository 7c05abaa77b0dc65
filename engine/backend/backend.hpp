// The interface between the engine and an executor (CPU or CUDA). A backend owns the weights in its
// compute format and the paged KV cache; the engine hands it one RaggedBatch per step and receives the
// logits of the sampling rows, or only their next token ids: the argmax when every row samples greedily,
// or the draws of a backend that samples on its device (so a GPU copies back a few bytes per step).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/sample/logprobs.hpp"
#include "engine/sample/radix_sampling.hpp"
#include "engine/backend/ragged_batch.hpp"
#include "engine/backend/roofline.hpp"

namespace cbatch {

// Derived from EngineConfig and the backend's memory, never written back into the config.
struct KvCacheSpec {
  int num_blocks = 0;
  int block_size = 16;     // tokens per block
};

struct StepOutput {
  bool want_logits = true;            // set by the engine before forward()
  std::vector<RowSampling> sampling;  // (num_logits) or empty, set by the engine: see token_ids
  std::vector<PenaltyToken> penalty_tokens;  // the penalized rows' tokens (RowSampling::penalty_begin/end)
  // The constrained rows' allowed tokens (engine/sample/token_mask.hpp), token_mask_words(vocab) words a
  // row from its RowSampling::mask_offset: applied before penalties and the draw.
  std::vector<uint64_t> token_mask;
  std::vector<float> logits;          // (num_logits, vocab) when want_logits
  // (num_logits) when !want_logits: with `sampling` empty the argmax (ties go to the lowest id), else each
  // row's draw under its RowSampling (only asked of a backend that samples_on_device()).
  std::vector<int32_t> token_ids;
  // Set by the engine: rows whose log-softmax the backend reduces to k values each (empty for steps
  // without logprob requests; only asked of a backend that answers_logprob_queries()); and the answers.
  std::vector<LogprobQuery> logprob_queries;
  int logprob_width = 0;              // the largest k of the queries
  LogprobAnswers logprobs;            // (logprob_queries) set by the backend
  // Set by the backend for a mixture of experts: the distinct experts the step's rows picked, summed over
  // the sparse layers (the experts whose weights it read); -1 for a dense model.
  int experts_touched = -1;
  // (num_pooled, ModelConfig::pooled_width()) the pooled final hidden states of RaggedBatch::pooled_seqs,
  // before any normalisation; a cross-encoder's classifier logits instead.
  std::vector<float> pooled;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // "cpu" or "cuda:<GPU name>".
  virtual std::string device_name() const = 0;
  // KV bytes per block (all layers, K and V) in this backend's cache dtype.
  virtual int64_t kv_block_bytes(int block_size) const = 0;
  // Blocks that fit the memory this backend may give the cache (after weights and workspace).
  virtual int64_t max_kv_blocks(int block_size) const = 0;
  virtual void allocate_kv_cache(const KvCacheSpec& spec) = 0;
  // Runs the model on the batch. batch.num_tokens() <= the max_batch_tokens it was built for.
  virtual void forward(const RaggedBatch& batch, StepOutput& out) = 0;
  // Draws sampled rows itself (StepOutput::sampling) instead of returning their logits.
  virtual bool samples_on_device() const { return false; }
  // Answers StepOutput::logprob_queries (prompt logprobs need it; without it, rows that ask logprobs
  // come back as logits and the host reduces them).
  virtual bool answers_logprob_queries() const { return false; }
  // Fills StepOutput::pooled for RaggedBatch::pooled_seqs (embedding requests need it).
  virtual bool pools_embeddings() const { return false; }
  // Bytes per weight parameter and per KV element as this backend stores them (for the cost model).
  virtual double weight_bytes_per_param() const { return 4.0; }
  // The same for routed experts (stored apart: MXFP4 or FP8 experts beside T weights).
  virtual double expert_bytes_per_param() const { return weight_bytes_per_param(); }
  virtual double kv_bytes_per_elem() const { return 4.0; }
  // Measured copy bandwidth and matrix throughput (bench's roofline); invalid where not measured.
  virtual DevicePeaks measure_peaks() { return {}; }
  // Seconds the device spent executing steps so far (0 where not measured, e.g. the CPU).
  virtual double device_busy_seconds() const { return 0; }
};

}  // namespace cbatch
