// The spellings of layer kinds in the model files (layer_kinds.hpp).
#include "engine/model/layer_kinds.hpp"

#include "engine/base/error.hpp"

namespace cbatch {
namespace {

struct TypeName {
  std::string_view type;
  LayerKind kind;
};

// transformers' names (Qwen3.5, Qwen3-Next).
constexpr TypeName kLayerTypes[] = {
    {"linear_attention", LayerKind::kDeltaNet},
    {"full_attention", LayerKind::kAttention},
};

}  // namespace

std::optional<LayerKind> layer_kind_of_type(std::string_view type) {
  for (const TypeName& t : kLayerTypes) {
    if (t.type == type) return t.kind;
  }
  return std::nullopt;
}

std::string supported_layer_types() {
  std::string out;
  for (const TypeName& t : kLayerTypes) out += (out.empty() ? "" : ", ") + std::string(t.type);
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

std::string_view layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::kAttention: return "attention";
    case LayerKind::kDeltaNet: return "gated DeltaNet";
  }
  return "?";
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
