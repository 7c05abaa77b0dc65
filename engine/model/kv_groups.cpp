// Grouping layers by what they keep in the KV cache (kv_groups.hpp).
#include "engine/model/kv_groups.hpp"

#include <algorithm>
#include <map>
#include <numeric>

namespace cbatch {

std::vector<int> KvGroups::windows() const {
  std::vector<int> w;
  for (const KvGroup& g : groups) w.push_back(g.window);
  return w;
}

int64_t KvGroups::pages_for_tokens(int64_t num_tokens, int block_size, int64_t chunk_tokens) const {
  const int64_t all = (num_tokens + block_size - 1) / block_size;
  int64_t pages = 0;
  for (const KvGroup& g : groups) {
    pages += g.window > 0 ? std::min(all, window_span_blocks(g.window, block_size, chunk_tokens)) : all;
  }
  return pages;
}

int64_t window_span_blocks(int window, int block_size, int64_t chunk_tokens) {
  return (window - 1 + chunk_tokens + block_size - 1) / block_size + 1;
}

std::string KvGroups::describe() const {
  std::map<int, int> by_window;
  for (const KvGroup& g : groups) ++by_window[g.window];
  std::string s = std::to_string(num_groups()) + (num_groups() == 1 ? " group" : " groups") + " of " +
                  std::to_string(layers_per_page) + (layers_per_page == 1 ? " layer:" : " layers:");
  for (const auto& [window, count] : by_window) {
    s += " " + std::to_string(count) + (window == 0 ? " full" : " window " + std::to_string(window)) + ",";
  }
  s.pop_back();
  return s;
}

KvGroups kv_groups(const ModelConfig& config) {
  KvGroups kv;
  kv.layer_group.assign(static_cast<size_t>(config.num_layers), -1);
  kv.layer_slot.assign(static_cast<size_t>(config.num_layers), -1);
  std::map<int, std::vector<int>> kinds;  // window -> attention layers that write K/V (0: full first)
  for (int l = 0; l < config.num_layers; ++l) {
    if (!config.is_attention(l) || !config.writes_kv(l)) continue;
    kinds[config.window(l)].push_back(l);
    kv.slot_values = std::max(kv.slot_values, config.kv_dim_of(l));
  }
  int per_page = 0;
  for (const auto& [window, layers] : kinds) per_page = std::gcd(per_page, static_cast<int>(layers.size()));
  kv.layers_per_page = per_page;
  for (const auto& [window, layers] : kinds) {
    for (size_t first = 0; first < layers.size(); first += static_cast<size_t>(per_page)) {
      KvGroup group{window, std::vector<int>(layers.begin() + static_cast<std::ptrdiff_t>(first),
                                             layers.begin() + static_cast<std::ptrdiff_t>(first) + per_page)};
      for (int slot = 0; slot < per_page; ++slot) {
        kv.layer_group[static_cast<size_t>(group.layers[static_cast<size_t>(slot)])] = kv.num_groups();
        kv.layer_slot[static_cast<size_t>(group.layers[static_cast<size_t>(slot)])] = slot;
      }
      kv.groups.push_back(std::move(group));
    }
  }
  // Shared layers: the source's group and slot (the source is an earlier layer of the same window).
  for (int l = 0; l < config.num_layers; ++l) {
    if (!config.is_attention(l) || config.writes_kv(l)) continue;
    const auto source = static_cast<size_t>(config.kv_source(l));
    kv.layer_group[static_cast<size_t>(l)] = kv.layer_group[source];
    kv.layer_slot[static_cast<size_t>(l)] = kv.layer_slot[source];
  }
  return kv;
}

}  // namespace cbatch
