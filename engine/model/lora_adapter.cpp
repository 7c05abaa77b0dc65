// Loading LoRA adapters (lora_adapter.hpp). PEFT tensor names: base_model.model.model.layers.N.self_attn.
// q_proj.lora_A.weight (A) and .lora_B.weight (B); GGUF (llama.cpp's convert_lora_to_gguf): blk.N.attn_q.
// weight.lora_a (ggml ne [in, rank], i.e. (rank, in) row-major) and .lora_b ((rows, rank)), with
// general.type "adapter", adapter.type "lora" and adapter.lora.alpha.
#include "engine/model/lora_adapter.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>

#include "engine/base/error.hpp"
#include "engine/base/json_file.hpp"
#include "engine/model/deltanet_layout.hpp"
#include "engine/model/family.hpp"
#include "engine/model/gguf.hpp"
#include "engine/model/lora_targets.hpp"
#include "engine/model/safetensors.hpp"
#include "engine/model/tensor.hpp"

namespace cbatch {
namespace {

std::vector<float> to_f32(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  tensor_rows_to_f32(t, 0, t.rows, out.data());
  return out;
}

// B (rows, rank) of a q or k target from `from`'s head row order to `to`'s: adjacent pairs hold row
// h * hd + 2j + i where halves hold h * hd + i * hd / 2 + j (llama.cpp's permute of `llama` q/k).
void reorder_rope_rows(std::vector<float>& b, int64_t rows, int rank, int head_dim, RopeLayout from, RopeLayout to) {
  if (from == to) return;
  const std::vector<float> src = b;
  const int half = head_dim / 2;
  for (int64_t h = 0; h < rows / head_dim; ++h) {
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < half; ++j) {
        const int64_t pairs = h * head_dim + 2 * j + i, halves = h * head_dim + i * half + j;
        const int64_t dst_row = to == RopeLayout::kAdjacentPairs ? pairs : halves;
        const int64_t src_row = to == RopeLayout::kAdjacentPairs ? halves : pairs;
        std::copy_n(&src[static_cast<size_t>(src_row * rank)], rank, &b[static_cast<size_t>(dst_row * rank)]);
      }
    }
  }
}

// A DeltaNet pair's value heads from the adapter's order to the base's (lora_targets.hpp ValueHeadRows): B's
// rows [begin, begin + num_v_heads * width), or A's columns, moved a head at a time.
void reorder_value_heads(LoraPair& p, const ValueHeadRows& v, const DeltaNetSizes& d, bool base_tiled) {
  const std::vector<int32_t> sources = value_head_sources(d, v.adapter_tiled, base_tiled);
  const int64_t n = v.inputs ? p.rank : 1;       // rows moved alike: A's every row, or B once
  const int64_t stride = v.inputs ? p.in_features : p.rank;  // floats per row of A, or per row of B
  const int64_t run = v.inputs ? v.width : v.width * p.rank;  // floats per value head in one row (A) or in B
  std::vector<float>& m = v.inputs ? p.a : p.b;
  const std::vector<float> src = m;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = v.inputs ? i * stride : v.begin * stride;
    for (size_t h = 0; h < sources.size(); ++h) {
      const int64_t to = row + static_cast<int64_t>(h) * run, from = row + sources[h] * run;
      std::copy_n(&src[static_cast<size_t>(from)], run, &m[static_cast<size_t>(to)]);
    }
  }
}

// One module's A and B as the file holds them, before the checks.
struct RawPair {
  std::optional<TensorView> a;
  std::optional<TensorView> b;
};

class PairBuilder {
 public:
  PairBuilder(const LoraModuleArg& arg, const ModelConfig& base, int max_rank, bool gguf, RopeLayout layout)
      : arg_(arg), base_(base), max_rank_(max_rank), gguf_(gguf), layout_(layout) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw Error("LoRA adapter '" + arg_.name + "' (" + arg_.path + "): " + problem);
  }

  // A pair, or nullopt for a module the layer never uses (a note says which and why).
  std::optional<LoraPair> build(int layer, const std::string& module, const RawPair& raw, float alpha, bool rslora,
                                std::vector<std::string>& notes) const {
    const std::string where = "layer " + std::to_string(layer) + " " + module;
    LoraTarget slot;
    try {
      slot = resolve_lora_target(module, layer, gguf_, base_);
    } catch (const Error& e) {
      fail(e.what());
    }
    if (!raw.a || !raw.b) fail(where + ": " + (raw.a ? "lora_B" : "lora_A") + " is missing");
    if (!slot.unused.empty()) {
      notes.push_back(slot.unused);
      return std::nullopt;
    }
    const TensorView& a = *raw.a;
    const TensorView& b = *raw.b;
    const int64_t rank = a.rows;
    if (a.cols != slot.in_features || b.rows != slot.rows || b.cols != rank) {
      fail(where + ": shapes A (" + std::to_string(a.rows) + ", " + std::to_string(a.cols) + ") and B (" +
           std::to_string(b.rows) + ", " + std::to_string(b.cols) + ") do not match the base's (" +
           std::to_string(slot.rows) + ", " + std::to_string(slot.in_features) + ") projection in " +
           std::string(layer_kind_name(base_.layer_kind(layer))) + " layer " + std::to_string(layer));
    }
    if (rank < 1 || rank > max_rank_) {
      fail(where + ": rank " + std::to_string(rank) + " is above --max-lora-rank " + std::to_string(max_rank_));
    }
    LoraPair p;
    p.module = module;
    p.layer = layer;
    p.product = slot.product;
    p.row_offset = slot.row_offset;
    p.rows = slot.rows;
    p.in_features = slot.in_features;
    p.rank = static_cast<int>(rank);
    p.scale = alpha / (rslora ? std::sqrt(static_cast<float>(p.rank)) : static_cast<float>(p.rank));
    p.a = to_f32(a);
    p.b = to_f32(b);
    if (slot.rope_rows && layout_ != base_.rope_layout) {
      if (base_.attn_output_gate && p.row_offset == 0) {
        fail(where + ": the gated q rows cannot be put in another RoPE row order");
      }
      reorder_rope_rows(p.b, p.rows, p.rank, slot.head_dim, layout_, base_.rope_layout);
    }
    if (slot.value_heads.reorder) reorder_value_heads(p, slot.value_heads, base_.deltanet, base_.deltanet.tiled_heads);
    return p;
  }

 private:
  const LoraModuleArg& arg_;
  const ModelConfig& base_;
  int max_rank_;
  bool gguf_;
  RopeLayout layout_;  // the adapter's q/k row order
};

// "<prefix>N.self_attn.q_proj" -> (N, "self_attn.q_proj") for the first of `prefixes` the name starts with;
// nullopt for other names.
std::optional<std::pair<int, std::string>> split_layer_name(std::string_view name,
                                                            std::initializer_list<std::string_view> prefixes) {
  const std::string_view* prefix = std::find_if(prefixes.begin(), prefixes.end(),
                                                [&](std::string_view p) { return name.starts_with(p); });
  if (prefix == prefixes.end()) return std::nullopt;
  name.remove_prefix(prefix->size());
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  int layer = 0;
  for (char ch : name.substr(0, dot)) {
    if (ch < '0' || ch > '9' || layer > 1000000) return std::nullopt;
    layer = layer * 10 + (ch - '0');
  }
  return std::make_pair(layer, std::string(name.substr(dot + 1)));
}

LoraAdapter load_peft(const LoraModuleArg& arg, const ModelConfig& base, int max_rank) {
  const std::string dir = arg.path;
  PairBuilder builder(arg, base, max_rank, false, RopeLayout::kHalves);
  const std::string config_path = dir + "/adapter_config.json";
  const std::string weights_path = dir + "/adapter_model.safetensors";
  if (!std::filesystem::exists(config_path)) builder.fail("no adapter_config.json in the directory");
  if (!std::filesystem::exists(weights_path)) builder.fail("no adapter_model.safetensors in the directory");
  LoraAdapter adapter;
  float alpha = 0;
  int config_rank = 0;
  bool rslora = false;
  try {
    const JsonFile file(config_path);
    const JsonFields f = file.fields();
    const std::string peft_type = f.get_string("peft_type", "LORA");
    if (peft_type != "LORA") builder.fail("peft_type '" + peft_type + "' is not LORA");
    config_rank = f.get_size("r");
    alpha = static_cast<float>(f.get_number("lora_alpha", config_rank));
    rslora = f.get_bool("use_rslora", false);
    adapter.base_model = f.get_string("base_model_name_or_path", "");
    for (const char* key : {"rank_pattern", "alpha_pattern"}) {
      if (f.has(key) && f.members(key).size() > 0) builder.fail(std::string(key) + " (per-module ranks) is not supported");
    }
    if (f.get_bool("use_dora", false)) builder.fail("DoRA adapters (use_dora) are not supported");
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.rfind("LoRA adapter", 0) == 0) throw;
    builder.fail(message);
  }
  if (config_rank > max_rank) {
    builder.fail("rank " + std::to_string(config_rank) + " is above --max-lora-rank " + std::to_string(max_rank));
  }
  std::map<std::pair<int, std::string>, RawPair> raw;
  try {
    const SafetensorsFile weights(weights_path);
    for (const auto& [name, entry] : weights.tensors()) {
      std::string_view n = name;
      const bool is_a = n.ends_with(".lora_A.weight"), is_b = n.ends_with(".lora_B.weight");
      if (!is_a && !is_b) builder.fail("tensor '" + name + "' is not a LoRA A or B weight (only those are supported)");
      n.remove_suffix(std::string_view(".lora_A.weight").size());
      // PEFT wraps the model's own names: model.layers (decoders), model.language_model.layers (Qwen3.5's
      // and Gemma 4's multimodal checkpoints), backbone.layers (Nemotron-H).
      const auto key = split_layer_name(n, {"base_model.model.model.layers.", "base_model.model.model.language_model.layers.",
                                            "base_model.model.backbone.layers."});
      if (!key) builder.fail("tensor '" + name + "' is not a layer projection's LoRA weight");
      (is_a ? raw[*key].a : raw[*key].b) = weights.view(name);
    }
    // The views point into the mapping: convert them while it lives.
    for (const auto& [key, pair] : raw) {
      // The config's r sets the scale (PEFT's scaling = lora_alpha / r), the tensors their own rank.
      std::optional<LoraPair> p = builder.build(key.first, key.second, pair, alpha, rslora, adapter.notes);
      if (!p) continue;
      p->scale = alpha / (rslora ? std::sqrt(static_cast<float>(config_rank)) : static_cast<float>(config_rank));
      adapter.pairs.push_back(std::move(*p));
    }
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.rfind("LoRA adapter", 0) == 0) throw;
    builder.fail(message);
  }
  adapter.format = "peft";
  return adapter;
}

LoraAdapter load_gguf(const LoraModuleArg& arg, const ModelConfig& base, int max_rank) {
  const Family* family = find_family(base.architecture);
  const RopeLayout layout = family ? family->gguf_rope_layout : RopeLayout::kHalves;
  PairBuilder builder(arg, base, max_rank, true, layout);
  LoraAdapter adapter;
  try {
    const GgufFile gguf(arg.path);
    const std::string type = gguf.get_string("general.type", "");
    if (type != "adapter") builder.fail("general.type is '" + type + "', not 'adapter' (is it a model, not a LoRA?)");
    const std::string adapter_type = gguf.get_string("adapter.type", "");
    if (adapter_type != "lora") builder.fail("adapter.type is '" + adapter_type + "', not 'lora'");
    const std::string arch = gguf.get_string("general.architecture", "");
    if (arch != base.architecture) {
      builder.fail("an adapter for architecture '" + arch + "', but the base model is '" + base.architecture + "'");
    }
    adapter.base_model = gguf.get_string("general.basename", "");
    const float alpha = static_cast<float>(gguf.get_float("adapter.lora.alpha", 0.0));
    std::map<std::pair<int, std::string>, RawPair> raw;
    for (const GgufTensorInfo& info : gguf.tensors()) {
      std::string_view n = info.name;
      const bool is_a = n.ends_with(".weight.lora_a"), is_b = n.ends_with(".weight.lora_b");
      if (!is_a && !is_b) builder.fail("tensor '" + info.name + "' is not a lora_a or lora_b weight");
      n.remove_suffix(std::string_view(".weight.lora_a").size());
      const auto key = split_layer_name(n, {"blk."});
      if (!key) builder.fail("tensor '" + info.name + "' is not a layer projection's LoRA weight");
      (is_a ? raw[*key].a : raw[*key].b) = gguf.tensor_view(info);
    }
    for (const auto& [key, pair] : raw) {
      std::optional<LoraPair> p = builder.build(key.first, key.second, pair, alpha, false, adapter.notes);
      if (!p) continue;
      if (alpha == 0.0f) p->scale = 1.0f;  // llama.cpp: no alpha means scale 1
      adapter.pairs.push_back(std::move(*p));
    }
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.rfind("LoRA adapter", 0) == 0) throw;
    builder.fail(message);
  }
  adapter.format = "gguf";
  return adapter;
}

std::string lower(std::string text) {
  for (char& ch : text) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return text;
}

// Whether an adapter's base_model_name_or_path ("org/Model-1B") names the model at `base_path`: the same
// path, or one file name contains the other's last component, case aside ("model-1b.q4_0.gguf").
bool names_same_model(const std::string& named, const std::string& base_path) {
  if (named == base_path) return true;
  const std::string a = lower(std::filesystem::path(named).filename().string());
  const std::string b = lower(std::filesystem::path(base_path).filename().string());
  return !a.empty() && !b.empty() && (a.find(b) != std::string::npos || b.find(a) != std::string::npos);
}

}  // namespace

LoraModuleArg parse_lora_module(std::string_view arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == arg.size()) {
    throw Error("--lora-modules '" + std::string(arg) + "': expected NAME=PATH");
  }
  return {std::string(arg.substr(0, eq)), std::string(arg.substr(eq + 1))};
}

LoraAdapter load_lora_adapter(const LoraModuleArg& arg, const ModelConfig& base, int max_rank) {
  std::error_code ec;
  if (!std::filesystem::exists(arg.path, ec)) {
    throw Error("LoRA adapter '" + arg.name + "' (" + arg.path + "): no such file or directory");
  }
  LoraAdapter adapter = std::filesystem::is_directory(arg.path, ec) ? load_peft(arg, base, max_rank)
                                                                   : load_gguf(arg, base, max_rank);
  adapter.name = arg.name;
  adapter.path = arg.path;
  if (adapter.pairs.empty()) throw Error("LoRA adapter '" + arg.name + "' (" + arg.path + "): it holds no LoRA weights");
  for (const LoraPair& p : adapter.pairs) adapter.rank = std::max(adapter.rank, p.rank);
  return adapter;
}

std::vector<LoraAdapter> load_lora_adapters(const std::vector<std::string>& args, const ModelConfig& base,
                                            const std::string& base_path, int max_rank,
                                            std::vector<std::string>& warnings) {
  std::vector<LoraAdapter> adapters;
  const std::string base_name = std::filesystem::path(base_path).filename().string();
  for (const std::string& text : args) {
    const LoraModuleArg arg = parse_lora_module(text);
    for (const LoraAdapter& earlier : adapters) {
      if (earlier.name == arg.name) throw Error("LoRA adapter '" + arg.name + "' (" + arg.path + "): the name is given twice in --lora-modules");
    }
    if (arg.name == base_name || arg.name == base_path) {
      throw Error("LoRA adapter '" + arg.name + "' (" + arg.path + "): the name is the base model's (requests naming it get no adapter)");
    }
    adapters.push_back(load_lora_adapter(arg, base, max_rank));
    for (const std::string& note : adapters.back().notes) warnings.push_back("LoRA adapter '" + arg.name + "': " + note);
    const std::string& named = adapters.back().base_model;
    if (!named.empty() && !names_same_model(named, base_path)) {
      warnings.push_back("LoRA adapter '" + arg.name + "' was trained on '" + named + "', not on '" + base_path + "'");
    }
  }
  return adapters;
}

}  // namespace cbatch
