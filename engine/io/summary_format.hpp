// The end-of-run summary: a few human lines for stderr, and the same numbers as JSON (--summary).
#pragma once
#include <string>

#include "engine/core/run_stats.hpp"
#include "engine/io/input_fingerprint.hpp"
#include "engine/io/shard_spec.hpp"

namespace cbatch {

class JsonWriter;

std::string format_summary_text(const RunSummary& summary);
// The throughput and latency fields that the summary and every bench result share.
void write_throughput_fields(JsonWriter& w, const RunSummary& summary);
// The KV cache's fields: peak and total blocks, a block's bytes, the peak's bytes, the groups (window and
// peak blocks each) and the most sequences one step ran.
void write_kv_fields(JsonWriter& w, const RunSummary& summary);
// A hybrid model's recurrent-state slots: the most held in a step, the pool, one slot's bytes, the pool's bytes.
void write_state_fields(JsonWriter& w, const RunSummary& summary);

// What a sharded run records in its summary for `merge`: which shard of which input it answered, and where.
struct ShardProvenance {
  ShardSpec shard;
  std::string input;               // the prompts file as given
  InputFingerprint fingerprint;    // of the prompts file
  std::string output;              // the shard's output file as given
};

// shard: also writes a "shard" object (index, count, input, input_bytes, input_hash, output).
std::string format_summary_json(const RunSummary& summary, std::string_view mode, std::string_view device,
                                const ShardProvenance* shard = nullptr);

}  // namespace cbatch
