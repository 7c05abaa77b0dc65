// Reading a shard's summary back with JsonFile (errors name the file and field) and merging counters.
#include "engine/scale/shard_summary.hpp"

#include <algorithm>

#include "engine/base/error.hpp"
#include "engine/base/json_file.hpp"

namespace cbatch {

std::string default_summary_path(const std::string& output) {
  const std::string suffix = ".jsonl";
  if (output.size() > suffix.size() && output.ends_with(suffix)) {
    return output.substr(0, output.size() - suffix.size()) + ".summary.json";
  }
  return output + ".summary.json";
}

namespace {

ShardProvenance read_provenance(const JsonFields& fields) {
  const JsonFields shard = fields.object("shard");
  ShardProvenance p;
  p.shard.index = static_cast<int>(shard.get_int("index"));
  p.shard.count = static_cast<int>(shard.get_int("count"));
  if (p.shard.count < 1 || p.shard.index < 0 || p.shard.index >= p.shard.count) {
    shard.fail("index", "shard " + p.shard.name() + " is not a shard (0 <= index < count)");
  }
  p.input = shard.get_string("input");
  p.fingerprint.bytes = shard.get_int("input_bytes");
  p.fingerprint.hash = shard.get_string("input_hash");
  p.output = shard.get_string("output");
  return p;
}

// What a shard held in memory: KV groups, recurrent-state slots, weights. A field a summary lacks (written
// by an older cbatch) stays 0.
void read_memory_fields(const JsonFields& f, RunSummary& s) {
  auto optional_int = [&](const char* key) { return f.has(key) ? f.get_int(key) : int64_t{0}; };
  s.kv_block_bytes = optional_int("kv_block_bytes");
  s.peak_num_seqs = static_cast<int>(optional_int("peak_num_seqs"));
  s.kv_layers_per_block = static_cast<int>(optional_int("kv_layers_per_block"));
  if (f.has("kv_groups")) {
    size_t g = 0;
    for (simdjson::dom::element value : f.array("kv_groups")) {
      const JsonFields group = f.item("kv_groups", g++, value);
      s.kv_group_windows.push_back(static_cast<int>(group.get_int("window")));
      s.peak_kv_group_blocks.push_back(static_cast<int>(group.get_int("peak_blocks")));
    }
  }
  s.weight_bytes = optional_int("weight_bytes");
  s.peak_state_slots = static_cast<int>(optional_int("peak_state_slots"));
  s.state_slots_total = static_cast<int>(optional_int("state_slots_total"));
  s.state_slot_bytes = optional_int("state_slot_bytes");
  s.prefix_caching_off_for_state = f.get_string("prefix_caching", "") == "off (recurrent state)";
  s.state_snapshots_total = static_cast<int>(optional_int("state_snapshots_total"));
  s.state_snapshots_saved = optional_int("state_snapshots_saved");
  s.state_snapshots_restored = optional_int("state_snapshots_restored");
  s.state_snapshots_evicted = optional_int("state_snapshots_evicted");
  s.prefix_hits = optional_int("prefix_hits");
}

RunSummary read_counters(const JsonFields& f) {
  RunSummary s;
  s.wall_s = f.get_number("wall_s", 0);
  s.steps = f.get_int("steps");
  s.mean_budget_use = f.get_number("mean_budget_use", 0);
  s.padding_fraction = f.get_number("padding_fraction", 0);
  s.preemptions = f.get_int("preemptions");
  s.cached_tokens = f.get_int("cached_tokens");
  const double hit_rate = f.get_number("prefix_cache_hit_rate", 0);
  // The summary records the hit rate, not the computed prefill tokens it came from.
  s.prefill_tokens = hit_rate > 0 ? static_cast<int64_t>(s.cached_tokens / hit_rate + 0.5) - s.cached_tokens : 0;
  s.constrained_rows = f.get_int("constrained_rows");
  s.mask_s = f.get_number("mask_s", 0);
  s.peak_kv_blocks = static_cast<int>(f.get_int("peak_kv_blocks"));
  s.kv_blocks_total = static_cast<int>(f.get_int("kv_blocks_total"));
  s.interrupted = f.get_bool("interrupted", false);
  read_memory_fields(f, s);
  return s;
}

}  // namespace

ShardSummary read_shard_summary(const std::string& path) {
  const JsonFile file(path);
  const JsonFields fields = file.fields();
  if (!fields.has("shard")) {
    throw Error("'" + path + "' has no \"shard\" object: it is not the summary of a sharded run (--shard I/N --summary FILE)");
  }
  ShardSummary summary;
  summary.path = path;
  summary.provenance = read_provenance(fields);
  summary.mode = fields.get_string("mode", "");
  summary.device = fields.get_string("device", "");
  summary.run = read_counters(fields);
  return summary;
}

namespace {

// Each shard ran on its own memory: the merged figures are the largest shard's, group by group; the
// snapshot and hit counters are summed.
void merge_memory_fields(const RunSummary& s, RunSummary& m) {
  m.kv_block_bytes = std::max(m.kv_block_bytes, s.kv_block_bytes);
  m.peak_num_seqs = std::max(m.peak_num_seqs, s.peak_num_seqs);
  m.kv_layers_per_block = std::max(m.kv_layers_per_block, s.kv_layers_per_block);
  if (m.kv_group_windows.empty()) m.kv_group_windows = s.kv_group_windows;
  if (m.peak_kv_group_blocks.size() < s.peak_kv_group_blocks.size()) {
    m.peak_kv_group_blocks.resize(s.peak_kv_group_blocks.size(), 0);
  }
  for (size_t g = 0; g < s.peak_kv_group_blocks.size(); ++g) {
    m.peak_kv_group_blocks[g] = std::max(m.peak_kv_group_blocks[g], s.peak_kv_group_blocks[g]);
  }
  m.weight_bytes = std::max(m.weight_bytes, s.weight_bytes);
  m.peak_state_slots = std::max(m.peak_state_slots, s.peak_state_slots);
  m.state_slots_total = std::max(m.state_slots_total, s.state_slots_total);
  m.state_slot_bytes = std::max(m.state_slot_bytes, s.state_slot_bytes);
  m.prefix_caching_off_for_state = m.prefix_caching_off_for_state || s.prefix_caching_off_for_state;
  m.state_snapshots_total = std::max(m.state_snapshots_total, s.state_snapshots_total);
  // What the shards' prefix caches did: summed.
  m.state_snapshots_saved += s.state_snapshots_saved;
  m.state_snapshots_restored += s.state_snapshots_restored;
  m.state_snapshots_evicted += s.state_snapshots_evicted;
  m.prefix_hits += s.prefix_hits;
}

}  // namespace

RunSummary merge_run_counters(const std::vector<ShardSummary>& summaries) {
  RunSummary m;
  double budget_sum = 0, padding_sum = 0;
  for (const ShardSummary& shard : summaries) {
    const RunSummary& s = shard.run;
    m.wall_s = std::max(m.wall_s, s.wall_s);
    m.steps += s.steps;
    budget_sum += s.mean_budget_use * static_cast<double>(s.steps);
    padding_sum += s.padding_fraction * static_cast<double>(s.steps);
    m.preemptions += s.preemptions;
    m.cached_tokens += s.cached_tokens;
    m.prefill_tokens += s.prefill_tokens;
    m.constrained_rows += s.constrained_rows;
    m.mask_s += s.mask_s;
    m.peak_kv_blocks = std::max(m.peak_kv_blocks, s.peak_kv_blocks);
    m.kv_blocks_total = std::max(m.kv_blocks_total, s.kv_blocks_total);
    m.interrupted = m.interrupted || s.interrupted;
    merge_memory_fields(s, m);
  }
  if (m.steps > 0) {
    m.mean_budget_use = budget_sum / static_cast<double>(m.steps);
    m.padding_fraction = padding_sum / static_cast<double>(m.steps);
  }
  return m;
}

}  // namespace cbatch
