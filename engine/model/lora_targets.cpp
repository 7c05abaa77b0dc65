// LoRA targets from the tensor table (lora_targets.hpp).
#include "engine/model/lora_targets.hpp"

#include <optional>
#include <vector>

#include "engine/base/error.hpp"
#include "engine/model/family.hpp"
#include "engine/model/layer_tensors.hpp"

namespace cbatch {
namespace {

// The products the backends add adapters to, by the first row of the product.
std::optional<LoraProduct> lora_product_of(LayerTensor joins) {
  switch (joins) {
    case LayerTensor::kWq: return LoraProduct::kQkv;
    case LayerTensor::kWo: return LoraProduct::kO;
    case LayerTensor::kGate: return LoraProduct::kGateUp;
    case LayerTensor::kDown: return LoraProduct::kDown;
    case LayerTensor::kSsmQkv: return LoraProduct::kSsmQkvz;
    case LayerTensor::kSsmBeta: return LoraProduct::kSsmBa;
    case LayerTensor::kSsmOut: return LoraProduct::kSsmOut;
    case LayerTensor::kShortConvIn: return LoraProduct::kShortConvIn;
    case LayerTensor::kShortConvOut: return LoraProduct::kShortConvOut;
    case LayerTensor::kMambaIn: return LoraProduct::kMambaIn;
    case LayerTensor::kMambaOut: return LoraProduct::kMambaOut;
    default: return std::nullopt;
  }
}

bool spelled(const Spellings& names, std::string_view module) {
  for (std::string_view name : names) {
    if (!name.empty() && name.size() == module.size() + 7 && name.starts_with(module) && name.ends_with(".weight")) {
      return true;
    }
  }
  return false;
}

std::string layer_words(int layer, const ModelConfig& c) {
  return "layer " + std::to_string(layer) + " (" + std::string(layer_kind_name(c.layer_kind(layer))) + ")";
}

// Whether the base reads a fused row's tensor as its product (Phi-3's qkv_proj / gate_up_proj and llama.cpp's
// Phi-3 ffn_up; Qwen3-Next's grouped in_proj_qkvz / in_proj_ba; Granite's shared_mlp.input_linear).
bool fused_applies(const FusedTensorRow& f, const ModelConfig& c) {
  if (f.product == LayerProduct::kSsmQkvz) return c.deltanet.grouped_qkvz;
  if (f.product == LayerProduct::kSsmBa) return c.deltanet.grouped_ba;
  if (f.hf == "shared_mlp.input_linear.weight") return true;
  const Family* family = find_family(c.architecture);
  return family != nullptr && family->fused_projections;
}

// (rows of the product before `kind`, rows of the whole product) in the layer; kind == joins' first row for a
// fused tensor's offset 0.
std::pair<int64_t, int64_t> product_rows(LayerTensor joins, LayerTensor kind, int layer, const ModelConfig& c) {
  int64_t before = 0, total = 0;
  for (const LayerTensorRow& row : layer_tensor_rows()) {
    if (row.joins != joins || !row.present(c, layer)) continue;
    const int64_t rows = size_of(row.shape.rows, c, layer);
    if (static_cast<int>(row.kind) < static_cast<int>(kind)) before += rows;
    total += rows;
  }
  return {before, total};
}

// A DeltaNet module's value heads in the adapter's order and the base's: a PEFT adapter's are Hugging Face's
// (grouped by key head), a GGUF LoRA's llama.cpp's (tiled where its converter tiles them, Qwen3.5); the
// base's DeltaNetSizes::tiled_heads. Where they differ, the unfused modules' value-head rows (or out_proj's
// inputs) are put in the base's order at load; Qwen3-Next's fused rows, grouped by key head, are never tiled.
ValueHeadRows deltanet_value_heads(LayerTensor kind, bool fused, bool gguf, const ModelConfig& c,
                                   const std::string& where) {
  const DeltaNetSizes& d = c.deltanet;
  const Family* family = find_family(c.architecture);
  ValueHeadRows v;
  v.adapter_tiled = gguf && family != nullptr && family->gguf_tiled_value_heads;
  const bool qkvz = kind == LayerTensor::kSsmQkv || kind == LayerTensor::kSsmZ;
  const bool ba = kind == LayerTensor::kSsmBeta || kind == LayerTensor::kSsmAlpha;
  if (!fused && ((qkvz && d.grouped_qkvz) || (ba && d.grouped_ba))) {
    throw Error(where + ": the base's DeltaNet input rows are grouped by key head (in_proj_qkvz, in_proj_ba): "
                "an adapter on them targets those fused modules");
  }
  if (v.adapter_tiled == d.tiled_heads || d.num_v_heads == d.num_k_heads) return v;
  if (fused) throw Error(where + ": the adapter's fused DeltaNet rows are not in the base's value-head order");
  v.reorder = true;
  v.inputs = kind == LayerTensor::kSsmOut;
  v.begin = kind == LayerTensor::kSsmQkv ? 2 * int64_t{d.key_dim()} : 0;
  v.width = ba ? 1 : d.v_head_dim;
  return v;
}

LoraTarget target_of(LayerTensor joins, LayerTensor kind, bool fused, int layer, const ModelConfig& c) {
  const std::optional<LoraProduct> product = lora_product_of(joins);
  const auto [before, total] = product_rows(joins, fused ? joins : kind, layer, c);
  LoraTarget t;
  t.product = *product;
  t.row_offset = fused ? 0 : before;
  t.rows = fused ? total : size_of(layer_row(kind).shape.rows, c, layer);
  t.in_features = size_of(layer_row(fused ? joins : kind).shape.cols, c, layer);
  t.rope_rows = !fused && (kind == LayerTensor::kWq || kind == LayerTensor::kWk);
  t.head_dim = c.is_attention(layer) ? c.head_dim_of(layer) : 0;
  return t;
}

}  // namespace

LoraTarget resolve_lora_target(std::string_view module, int layer, bool gguf, const ModelConfig& c) {
  const std::string where = "layer " + std::to_string(layer) + " " + std::string(module);
  if (layer < 0 || layer >= c.num_layers) {
    throw Error(where + ": the base model has " + std::to_string(c.num_layers) + " layers");
  }
  // A row spelled so, present in this layer; else the first one spelled so, to say why it is absent.
  const LayerTensorRow* named = nullptr;
  const LayerTensorRow* present = nullptr;
  for (const LayerTensorRow& row : layer_tensor_rows()) {
    if (!spelled(gguf ? row.gguf : row.hf, module)) continue;
    if (named == nullptr) named = &row;
    if (present == nullptr && row.present(c, layer)) present = &row;
  }
  // Phi-3's GGUF ffn_up holds gate|up: the fused row goes first where the family fuses.
  bool fused_named = false;
  for (const FusedTensorRow& f : fused_tensor_rows()) {
    const std::string_view name = gguf ? f.gguf : f.hf;
    if (name.empty() || name != std::string(module) + ".weight") continue;
    fused_named = true;
    if (!fused_applies(f, c)) continue;
    const LayerTensorRow& first = layer_row(f.product);
    const auto [before, total] = product_rows(f.product, f.product, layer, c);
    if (total == 0) continue;
    if (first.role == Role::kSharedExpert) {
      throw Error(where + ": LoRA on the experts (routed or shared) is not applied; adapt the attention and mixer "
                  "projections");
    }
    ValueHeadRows value_heads;
    if (f.product == LayerProduct::kSsmQkvz || f.product == LayerProduct::kSsmBa) {
      value_heads = deltanet_value_heads(f.product, true, gguf, c, where);
    }
    LoraTarget t = target_of(f.product, f.product, true, layer, c);
    t.value_heads = value_heads;
    return t;
  }
  if (named == nullptr && fused_named) {
    throw Error(where + ": the " + c.architecture + " base model has no such projection (its product is not fused)");
  }
  if (named == nullptr) {
    throw Error("target module '" + std::string(module) + "' (" + where + ") is not one cbatch adapts (attention, "
                "MLP and recurrent mixer projections: q, k, v, o, gate, up, down, in_proj, out_proj)");
  }
  if (present == nullptr) {
    const bool is_kv = named->kind == LayerTensor::kWk || named->kind == LayerTensor::kWv;
    const bool shared_kv = is_kv && c.is_attention(layer) && !c.writes_kv(layer);
    if (shared_kv) {  // transformers' checkpoints keep these weights, and never use them
      LoraTarget t;
      t.unused = where + " is skipped: the layer reads layer " + std::to_string(c.kv_source(layer)) +
                 "'s K/V, so its own k_proj and v_proj are never used (an adapter on them changes nothing)";
      return t;
    }
    if (named->kind == LayerTensor::kWv && c.is_attention(layer) && c.values_are_keys(layer)) {
      throw Error(where + ": the layer's values are its keys (attention_k_eq_v), it has no v projection");
    }
    throw Error(where + ": " + layer_words(layer, c) + " of the " + c.architecture +
                " base model has no such projection");
  }
  if (present->role == Role::kSharedExpert || present->role == Role::kRouter) {
    throw Error(where + ": LoRA on the experts and routers (the " + std::string(present->label) +
                ") is not applied; adapt the attention, MLP and mixer projections");
  }
  if (present->role != Role::kProjection || !lora_product_of(present->joins)) {
    throw Error(where + ": cbatch does not apply LoRA to the " + std::string(present->label));
  }
  ValueHeadRows value_heads;
  if (present->joins == LayerTensor::kSsmQkv || present->joins == LayerTensor::kSsmBeta ||
      present->joins == LayerTensor::kSsmOut) {
    value_heads = deltanet_value_heads(present->kind, false, gguf, c, where);
  }
  LoraTarget t = target_of(present->joins, present->kind, false, layer, c);
  t.value_heads = value_heads;
  return t;
}

}  // namespace cbatch
