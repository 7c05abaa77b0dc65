// One request's life in the engine: its tokens (prompt then generated), how many of them have K/V in the
// cache, its block tables (one per KV group), and the timestamps its metrics come from. Owned by the engine;
// the scheduler holds pointers. Invariant: num_computed <= tokens.size(), and the block tables cover
// num_computed slots (a windowed group's only the blocks its window still reads).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/constrain/token_automaton.hpp"
#include "engine/core/block_manager.hpp"
#include "engine/base/request.hpp"
#include "engine/base/request_result.hpp"

namespace cbatch {

enum class FinishReason : uint8_t { kNone, kStop, kLength };

// A block boundary where a hybrid model's sequence saves its recurrent state (state_snapshots.hpp): after its
// first num_blocks blocks, whose prefix-cache name is `hash`.
struct SnapshotPoint {
  int num_blocks = 0;
  BlockHash hash;
};

// The n completions of one request (n for each prompt of a list of prompts): filled as its samples
// finish, written out when the last one does.
struct SampleGroup {
  explicit SampleGroup(int n) : outputs(static_cast<size_t>(n)), remaining(n) {}
  std::vector<SampleOutput> outputs;  // (prompts * n) by sample index
  int remaining;
  int prompt_tokens = 0;              // summed over the prompts (each counted once, not per sample)
  int cached_tokens = 0;              // likewise
  int completion_tokens = 0;
  int64_t first_token_ns = 0;         // the earliest sample's first token
};

// The inputs of one embedding request: each runs as a sequence of its own; the vectors are gathered here
// and written as one line when the last one is done.
struct EmbeddingGroup {
  explicit EmbeddingGroup(int n) : vectors(static_cast<size_t>(n)), remaining(n) {}
  std::vector<std::vector<float>> vectors;  // (inputs) by input index
  int remaining;
  int prompt_tokens = 0;                    // summed over the inputs done so far
};

struct Sequence {
  // The request, shared by all its sequences (a list's prompts, the n samples, an embedding line's inputs):
  // its sampling parameters, stops, constraint and documents are held once per line, not per sequence.
  // Its prompt_ids, prompt_list and embedding_inputs are empty: each sequence's prompt is in `tokens`.
  std::shared_ptr<const Request> request;
  uint64_t rng_seed = 0;              // this sample's draws (the request's seed, or one derived per sample)
  int prompt_index = 0;               // which prompt of a list of prompts this sequence is
  int second_segment = 0;             // first prompt position of token type 1; 0: one segment (all type 0)
  std::vector<int32_t> tokens;        // (num_prompt_tokens + generated)
  int num_prompt_tokens = 0;
  int max_total_tokens = 0;           // min(prompt + max_tokens, model context)
  int num_computed = 0;               // tokens whose K/V are in the cache
  BlockTables block_tables;           // (groups, blocks) physical KV block ids, -1 where freed
  int32_t state_slot = -1;            // its recurrent-state slot while running (hybrid models), else -1
  int32_t restore_snapshot = -1;      // the state snapshot it restores at its admission's step, else -1
  std::vector<SnapshotPoint> snapshot_points;  // (ascending) boundaries where it saves its state, not reached yet
  std::vector<BlockHash> block_hashes;  // (full computed blocks) prefix-cache names, prefix caching only
  std::vector<BlockHash> prompt_hashes;  // (full blocks of the prompt but its last token) their names, made once
  int num_cached_tokens = -1;         // prompt tokens the prefix cache served at first admission (-1: not yet)
  int sample_index = 0;               // which of the request's n completions this sequence is
  int pending_samples = 1;            // sequences it stands for: n until its prompt is computed, then 1
  std::shared_ptr<SampleGroup> group;  // the request's completions, when n > 1 (shared by its samples)
  std::shared_ptr<Constraint> constraint;  // structured output: the automaton, shared by a run's equal ones
  int32_t constraint_state = 0;        // its state after the generated tokens so far
  // Under a reasoning parser: the constraint waits here while the model thinks, and moves to
  // `constraint` (from its start state) once the thinking ends; sampling is free before.
  std::shared_ptr<Constraint> constraint_after_thinking;
  int64_t admit_order = -1;           // increases with each admission (preemption picks the largest)
  int num_preemptions = 0;
  FinishReason finish_reason = FinishReason::kNone;
  double score = 0;                   // a score request: softmax(yes, no)[yes] at the last prompt position
  std::vector<TokenLogprob> logprobs;         // (generated) when the request asks logprobs
  // (prompt positions 1.. scored so far) when it asks prompt_logprobs; shared by the n > 1 samples forked
  // from it (the prompt is scored by then), so a fork copies no entries.
  std::shared_ptr<std::vector<TokenLogprob>> prompt_logprobs;
  std::vector<float> embedding;       // an embedding input's vector once computed (pooled, normalised)
  std::shared_ptr<EmbeddingGroup> embedding_group;  // the request's inputs, for an embedding request
  int embedding_index = 0;            // which of them this sequence is

  // Output text state: decoded bytes of generated tokens, and how many of them were already final
  // (not the possible start of a stop string).
  std::string text;
  int64_t arrival_ns = 0;
  int64_t first_token_ns = 0;         // 0 until the first token is sampled
  int64_t first_step = -1;            // engine step of the first scheduled chunk
  int64_t finish_step = -1;

  int num_tokens() const { return static_cast<int>(tokens.size()); }
  std::span<const int32_t> prompt() const { return std::span<const int32_t>(tokens).first(static_cast<size_t>(num_prompt_tokens)); }
  int num_generated() const { return num_tokens() - num_prompt_tokens; }
  int num_uncomputed() const { return num_tokens() - num_computed; }
  bool is_finished() const { return finish_reason != FinishReason::kNone; }
  int num_prompt_logprobs() const { return prompt_logprobs ? static_cast<int>(prompt_logprobs->size()) : 0; }
};

// The engine's live sequences, owned here; the scheduler and the step hold raw pointers to them.
using SequenceTable = std::unordered_map<const Sequence*, std::unique_ptr<Sequence>>;

}  // namespace cbatch
