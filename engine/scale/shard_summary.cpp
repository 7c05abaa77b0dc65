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
  }
  if (m.steps > 0) {
    m.mean_budget_use = budget_sum / static_cast<double>(m.steps);
    m.padding_fraction = padding_sum / static_cast<double>(m.steps);
  }
  return m;
}

}  // namespace cbatch
