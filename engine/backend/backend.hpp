// The interface between the engine and an executor (CPU or CUDA), one way: the engine hands a step's
// RaggedBatch and its StepRequest (read-only), the backend fills a StepResult: the logits of the sampling
// rows, or only their next token ids (the argmax when every row samples greedily, or the draws of a backend
// that samples on its device, so a GPU copies back a few bytes per step). What a backend is and can do is
// one BackendTraits, read once. A backend owns the weights in its compute format, the paged KV cache and,
// for a hybrid model, the recurrent-state slots.
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
  int num_state_slots = 0;  // recurrent-state slots (a hybrid model's; 0 without recurrent layers)
  // State snapshots of the prefix cache (state_snapshots.hpp): slots num_state_slots.. of the same pool, only
  // ever copied to and from (RaggedBatch::state_copies); 0 without prefix caching of recurrent state.
  int num_state_snapshots = 0;
};

// What the engine asks of one step besides its batch; the backend only reads it.
struct StepRequest {
  // Whether the step returns the logits of its sampling rows (StepResult::logits); else their token ids.
  bool want_logits = true;
  // (num_logits) or empty: each row's parameters when a backend that samples_on_device draws it (else the
  // ids are the argmax, ties to the lowest id).
  std::vector<RowSampling> sampling;
  std::vector<PenaltyToken> penalty_tokens;  // the penalized rows' tokens (RowSampling::penalty_begin/end)
  // The constrained rows' allowed tokens (engine/sample/token_mask.hpp), token_mask_words(vocab) words a
  // row from its RowSampling::mask_offset: applied before penalties and the draw.
  std::vector<uint64_t> token_mask;
  // Rows whose log-softmax the backend reduces to k values each (empty for steps without logprob
  // requests; only asked of a backend that answers_logprob_queries), and the largest k.
  std::vector<LogprobQuery> logprob_queries;
  int logprob_width = 0;
};

// What the backend returns for one step.
struct StepResult {
  std::vector<float> logits;          // (num_logits, vocab) when the request wants logits
  std::vector<int32_t> token_ids;     // (num_logits) when it does not: the argmax, or each row's draw
  LogprobAnswers logprobs;            // (StepRequest::logprob_queries)
  // A mixture of experts: the distinct experts the step's rows picked, summed over the sparse layers (the
  // experts whose weights it read); -1 for a dense model.
  int experts_touched = -1;
  // (num_pooled, ModelConfig::pooled_width()) the pooled final hidden states of RaggedBatch::pooled_seqs,
  // before any normalisation; a cross-encoder's classifier logits instead.
  std::vector<float> pooled;

  // Empties it for the next step, keeping the buffers' memory.
  void clear() {
    logits.clear();
    token_ids.clear();
    logprobs.resize(0, 0);
    experts_touched = -1;
    pooled.clear();
  }
};

// What a backend is and can do, fixed once it is built; the engine reads it once.
struct BackendTraits {
  std::string device_name = "cpu";     // "cpu" or "cuda:<GPU name>"
  bool samples_on_device = false;      // draws sampled rows itself (StepRequest::sampling)
  // Answers StepRequest::logprob_queries (prompt logprobs need it; without it, rows that ask logprobs come
  // back as logits and the host reduces them).
  bool answers_logprob_queries = false;
  bool pools_embeddings = false;       // fills StepResult::pooled (embedding requests need it)
  // Bytes per weight parameter, per routed-expert parameter and per KV element as the backend stores
  // them (the cost model's).
  double weight_bytes_per_param = 4.0;
  double expert_bytes_per_param = 4.0;
  double kv_bytes_per_elem = 4.0;
  // Bytes the backend holds its weight matrices in (packed panels, routed experts included; 0: not
  // counted). The summary's weight_bytes.
  int64_t weight_bytes = 0;
  // Lines for the load log: how the backend holds the model where it has a choice (the CUDA backend: which
  // linear weights stay in their blocks).
  std::vector<std::string> notes;
  // Runs recurrent layers (a hybrid model's gated DeltaNet) with their per-sequence state slots; a backend
  // without it is refused a hybrid model before anything runs.
  bool runs_recurrent_layers = false;
  // Holds KvCacheSpec::num_state_snapshots slots beyond the running ones, within max_state_slots(), and runs
  // the state copies into and out of them: a hybrid model's prefix caching needs it.
  bool keeps_state_snapshots = false;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const BackendTraits& traits() const = 0;
  // KV bytes per block (all layers, K and V) in this backend's cache dtype.
  virtual int64_t kv_block_bytes(int block_size) const = 0;
  // Blocks that fit the memory this backend may give the cache (after weights and workspace).
  virtual int64_t max_kv_blocks(int block_size) const = 0;
  // Bytes of one sequence's recurrent state (every recurrent layer's), and the slots that fit the memory this
  // backend gives them (running slots and state snapshots together): 0 for a model without recurrent layers.
  virtual int64_t state_slot_bytes() const { return 0; }
  virtual int64_t max_state_slots() const { return 0; }
  // The KV blocks and, for a hybrid model, the state slots (zeroed).
  virtual void allocate_kv_cache(const KvCacheSpec& spec) = 0;
  // Runs the model on the batch. batch.num_tokens() <= the max_batch_tokens it was built for.
  virtual void forward(const RaggedBatch& batch, const StepRequest& request, StepResult& result) = 0;
  // Measured copy bandwidth and matrix throughput (bench's roofline); invalid where not measured.
  virtual DevicePeaks measure_peaks() { return {}; }
  // Seconds the device spent executing steps so far (0 where not measured, e.g. the CPU).
  virtual double device_busy_seconds() const { return 0; }
};

}  // namespace cbatch
