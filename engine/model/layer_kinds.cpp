// The spellings of layer kinds in the model files (layer_kinds.hpp).
#include "engine/model/layer_kinds.hpp"

#include "engine/base/error.hpp"

namespace cbatch {
namespace {

struct TypeName {
  std::string_view type;
  std::optional<LayerKind> kind;  // nullopt: the family's recurrent kind
};

// transformers' names: Qwen3.5, Qwen3-Next and transformers 5's Granite 4.0-H (linear_attention is the
// family's recurrent kind), LFM2's conv, the Hub's Granite configs (mamba, attention).
constexpr TypeName kLayerTypes[] = {
    {"linear_attention", std::nullopt},
    {"full_attention", LayerKind::kAttention},
    {"attention", LayerKind::kAttention},
    {"conv", LayerKind::kShortConv},
    {"mamba", LayerKind::kMamba2},
};

std::optional<LayerKind> kind_in(const TypeName& t, LayerKind recurrent) {
  const LayerKind kind = t.kind.value_or(recurrent);
  if (kind == LayerKind::kAttention || kind == recurrent) return kind;
  return std::nullopt;
}

}  // namespace

std::optional<LayerKind> layer_kind_of_type(std::string_view type, LayerKind recurrent) {
  for (const TypeName& t : kLayerTypes) {
    if (t.type == type) return kind_in(t, recurrent);
  }
  return std::nullopt;
}

std::string supported_layer_types(LayerKind recurrent) {
  std::string out;
  for (const TypeName& t : kLayerTypes) {
    if (kind_in(t, recurrent)) out += (out.empty() ? "" : ", ") + std::string(t.type);
  }
  return out;
}

std::vector<LayerKind> layer_kinds_from_interval(int num_layers, int interval) {
  std::vector<LayerKind> kinds;
  for (int i = 0; i < num_layers; ++i) {
    kinds.push_back((i + 1) % interval == 0 ? LayerKind::kAttention : LayerKind::kDeltaNet);
  }
  return kinds;
}

std::vector<LayerKind> layer_kinds_from_recurrent_flags(const std::vector<int64_t>& recurrent, int num_layers) {
  if (static_cast<int64_t>(recurrent.size()) < num_layers) return {};
  std::vector<LayerKind> kinds;
  for (int i = 0; i < num_layers; ++i) {
    kinds.push_back(recurrent[static_cast<size_t>(i)] != 0 ? LayerKind::kDeltaNet : LayerKind::kAttention);
  }
  return kinds;
}

std::optional<std::vector<LayerKind>> layer_kinds_from_pattern(std::string_view pattern, size_t* bad_at) {
  std::vector<LayerKind> kinds;
  for (size_t i = 0; i < pattern.size(); ++i) {
    switch (pattern[i]) {
      case 'M': kinds.push_back(LayerKind::kMamba2); break;
      case '*': kinds.push_back(LayerKind::kAttention); break;
      case '-': kinds.push_back(LayerKind::kMlp); break;
      default: *bad_at = i; return std::nullopt;
    }
  }
  return kinds;
}

std::vector<LayerKind> layer_kinds_from_kv_heads(const std::vector<int64_t>& kv_heads,
                                                 const std::vector<int64_t>& mlp_widths, LayerKind recurrent,
                                                 int num_layers) {
  const auto n = static_cast<size_t>(num_layers);
  if (kv_heads.size() < n || (!mlp_widths.empty() && mlp_widths.size() < n)) return {};
  std::vector<LayerKind> kinds;
  for (size_t i = 0; i < n; ++i) {
    const bool mlp = !mlp_widths.empty() && mlp_widths[i] > 0;
    kinds.push_back(kv_heads[i] > 0 ? LayerKind::kAttention : mlp ? LayerKind::kMlp : recurrent);
  }
  return kinds;
}

std::vector<int> shared_kv_sources(const std::vector<int>& windows, int num_layers, int64_t num_kv_shared,
                                   const std::string& where) {
  if (num_kv_shared == 0) return {};
  if (num_kv_shared < 0 || num_kv_shared >= num_layers) {
    throw Error(where + " = " + std::to_string(num_kv_shared) + " must be below the layer count " + std::to_string(num_layers) +
                " (some layer must keep its own K/V)");
  }
  auto window = [&](int l) { return static_cast<size_t>(l) < windows.size() ? windows[static_cast<size_t>(l)] : 0; };
  const int first_shared = num_layers - static_cast<int>(num_kv_shared);
  std::vector<int> sources(static_cast<size_t>(num_layers));
  for (int l = 0; l < num_layers; ++l) {
    int source = l;
    if (l >= first_shared) {
      source = -1;
      for (int s = first_shared - 1; s >= 0 && source < 0; --s) source = window(s) == window(l) ? s : -1;
      if (source < 0) {
        throw Error(where + " = " + std::to_string(num_kv_shared) + " leaves layer " + std::to_string(l) +
                    " no earlier layer of its kind to read K/V from");
      }
    }
    sources[static_cast<size_t>(l)] = source;
  }
  return sources;
}

}  // namespace cbatch
