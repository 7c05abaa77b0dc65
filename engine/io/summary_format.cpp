#include "engine/io/summary_format.hpp"

#include <cstdio>
#include <map>
#include <utility>

#include "engine/io/json_writer.hpp"

namespace cbatch {

std::string format_summary_text(const RunSummary& s) {
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "requests: %lld ok, %lld failed%s\n"
                "tokens: %lld prompt, %lld generated in %.2f s: %.1f output tok/s, %.1f total tok/s\n"
                "steps: %lld, mean budget use %.3f, padding fraction %.3f, preemptions %lld, peak KV blocks %d/%d\n"
                "latency: TTFT p50 %.1f ms p99 %.1f ms, end-to-end p50 %.1f ms p99 %.1f ms\n"
                "prefix cache: %lld tokens served to %lld admissions, hit rate %.3f\n",
                static_cast<long long>(s.requests_ok), static_cast<long long>(s.requests_failed),
                s.interrupted ? " (interrupted)" : "", static_cast<long long>(s.prompt_tokens),
                static_cast<long long>(s.output_tokens), s.wall_s, s.output_tokens_per_s(), s.total_tokens_per_s(),
                static_cast<long long>(s.steps), s.mean_budget_use, s.padding_fraction,
                static_cast<long long>(s.preemptions), s.peak_kv_blocks, s.kv_blocks_total, s.ttft_ms_p50,
                s.ttft_ms_p99, s.e2e_ms_p50, s.e2e_ms_p99, static_cast<long long>(s.cached_tokens),
                static_cast<long long>(s.prefix_hits), s.prefix_cache_hit_rate());
  std::string text = buf;
  if (s.kv_group_windows.size() > 1) {  // per kind of group: how many groups, their peak blocks summed
    std::map<int, std::pair<int, int>> kinds;  // window -> (groups, peak blocks)
    for (size_t g = 0; g < s.kv_group_windows.size(); ++g) {
      auto& [groups, peak] = kinds[s.kv_group_windows[g]];
      ++groups;
      peak += g < s.peak_kv_group_blocks.size() ? s.peak_kv_group_blocks[g] : 0;
    }
    text += "KV groups of " + std::to_string(s.kv_layers_per_block) + " layers:";
    for (const auto& [window, kind] : kinds) {
      text += (window == 0 ? " full" : " window " + std::to_string(window)) + " x" + std::to_string(kind.first) +
              " peak " + std::to_string(kind.second) + " blocks;";
    }
    std::snprintf(buf, sizeof(buf), " a block %lld bytes, %.2f MB at the peak\n", static_cast<long long>(s.kv_block_bytes),
                  static_cast<double>(s.kv_block_bytes) * s.peak_kv_blocks / 1e6);
    text += buf;
  }
  if (s.state_slots_total > 0) {
    std::snprintf(buf, sizeof(buf), "state cache: peak %d/%d slots of %.2f MB (recurrent layers)\n", s.peak_state_slots,
                  s.state_slots_total, static_cast<double>(s.state_slot_bytes) / 1e6);
    text += buf;
  }
  if (s.state_snapshots_total > 0) {
    std::snprintf(buf, sizeof(buf),
                  "state snapshots: %d of %.2f MB (%.2f MB), %lld saved, %lld restored, %lld evicted\n",
                  s.state_snapshots_total, static_cast<double>(s.state_slot_bytes) / 1e6,
                  static_cast<double>(s.state_slot_bytes) * s.state_snapshots_total / 1e6,
                  static_cast<long long>(s.state_snapshots_saved), static_cast<long long>(s.state_snapshots_restored),
                  static_cast<long long>(s.state_snapshots_evicted));
    text += buf;
  }
  if (s.prefix_caching_off_for_state) {
    text += "note: prefix caching is off for this model: this backend keeps no snapshots of its recurrent state "
            "(or --state-snapshots 0)\n";
  }
  if (s.resumed_ok + s.resumed_failed > 0) {
    std::snprintf(buf, sizeof(buf),
                  "resumed: %lld ok and %lld failed already in the output file; in all %lld ok, %lld failed\n",
                  static_cast<long long>(s.resumed_ok), static_cast<long long>(s.resumed_failed),
                  static_cast<long long>(s.requests_ok + s.resumed_ok),
                  static_cast<long long>(s.requests_failed + s.resumed_failed));
    text += buf;
  }
  return text;
}

void write_throughput_fields(JsonWriter& w, const RunSummary& s) {
  w.key("prompt_tokens").int64(s.prompt_tokens);
  w.key("output_tokens").int64(s.output_tokens);
  w.key("wall_s").number(s.wall_s, 4);
  w.key("output_tokens_per_s").number(s.output_tokens_per_s(), 2);
  w.key("total_tokens_per_s").number(s.total_tokens_per_s(), 2);
  w.key("requests_per_s").number(s.requests_per_s(), 3);
  w.key("steps").int64(s.steps);
  w.key("mean_budget_use").number(s.mean_budget_use, 4);
  w.key("padding_fraction").number(s.padding_fraction, 4);
  w.key("preemptions").int64(s.preemptions);
  w.key("cached_tokens").int64(s.cached_tokens);
  w.key("prefix_hits").int64(s.prefix_hits);
  w.key("prefix_cache_hit_rate").number(s.prefix_cache_hit_rate(), 4);
  w.key("constrained_rows").int64(s.constrained_rows);
  w.key("mask_s").number(s.mask_s, 4);
  w.key("ttft_ms_p50").number(s.ttft_ms_p50, 3);
  w.key("ttft_ms_p99").number(s.ttft_ms_p99, 3);
  w.key("e2e_ms_p50").number(s.e2e_ms_p50, 3);
  w.key("e2e_ms_p99").number(s.e2e_ms_p99, 3);
}

void write_kv_fields(JsonWriter& w, const RunSummary& s) {
  w.key("peak_kv_blocks").int64(s.peak_kv_blocks);
  w.key("kv_blocks_total").int64(s.kv_blocks_total);
  w.key("kv_block_bytes").int64(s.kv_block_bytes);
  w.key("peak_kv_bytes").int64(s.kv_block_bytes * s.peak_kv_blocks);
  w.key("peak_num_seqs").int64(s.peak_num_seqs);
  w.key("kv_layers_per_block").int64(s.kv_layers_per_block);
  w.key("kv_groups").begin_array();
  for (size_t g = 0; g < s.kv_group_windows.size(); ++g) {
    w.begin_object();
    w.key("window").int64(s.kv_group_windows[g]);
    w.key("peak_blocks").int64(g < s.peak_kv_group_blocks.size() ? s.peak_kv_group_blocks[g] : 0);
    w.end_object();
  }
  w.end_array();
}

void write_state_fields(JsonWriter& w, const RunSummary& s) {
  w.key("peak_state_slots").int64(s.peak_state_slots);
  w.key("state_slots_total").int64(s.state_slots_total);
  w.key("state_slot_bytes").int64(s.state_slot_bytes);
  w.key("state_bytes").int64(s.state_slot_bytes * s.state_slots_total);
}

namespace {

void write_shard(JsonWriter& w, const ShardProvenance& p) {
  w.key("shard").begin_object();
  w.key("index").int64(p.shard.index);
  w.key("count").int64(p.shard.count);
  w.key("input").string(p.input);
  w.key("input_bytes").int64(p.fingerprint.bytes);
  w.key("input_hash").string(p.fingerprint.hash);
  w.key("output").string(p.output);
  w.end_object();
}

}  // namespace

std::string format_summary_json(const RunSummary& s, std::string_view mode, std::string_view device,
                                const ShardProvenance* shard) {
  JsonWriter w;
  w.begin_object();
  w.key("mode").string(mode);
  w.key("device").string(device);
  w.key("requests_ok").int64(s.requests_ok);
  w.key("requests_failed").int64(s.requests_failed);
  w.key("interrupted").boolean(s.interrupted);
  w.key("resumed_ok").int64(s.resumed_ok);
  w.key("resumed_failed").int64(s.resumed_failed);
  write_throughput_fields(w, s);
  write_kv_fields(w, s);
  if (s.weight_bytes > 0) w.key("weight_bytes").int64(s.weight_bytes);
  if (s.state_slots_total > 0) {  // a hybrid model's recurrent-state slots
    write_state_fields(w, s);
    w.key("prefix_caching").string(s.prefix_caching_off_for_state ? "off (recurrent state)"
                                   : s.state_snapshots_total > 0 ? "on (state snapshots)" : "off");
    w.key("state_snapshots_total").int64(s.state_snapshots_total);
    w.key("state_snapshot_bytes").int64(s.state_slot_bytes * s.state_snapshots_total);
    w.key("state_snapshots_saved").int64(s.state_snapshots_saved);
    w.key("state_snapshots_restored").int64(s.state_snapshots_restored);
    w.key("state_snapshots_evicted").int64(s.state_snapshots_evicted);
  }
  if (shard != nullptr) write_shard(w, *shard);
  w.end_object();
  return w.take() + "\n";
}

}  // namespace cbatch
