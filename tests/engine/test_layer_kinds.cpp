// Layer kinds from the files' spellings (engine/model/layer_kinds.hpp) and through config.json.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "engine/base/error.hpp"
#include "engine/model/hf_config.hpp"
#include "engine/model/layer_kinds.hpp"

using namespace cbatch;

namespace {

constexpr LayerKind kA = LayerKind::kAttention, kD = LayerKind::kDeltaNet, kC = LayerKind::kShortConv,
                    kM = LayerKind::kMamba2, kP = LayerKind::kMlp;

// config.json of a tiny Qwen3.5 text model with `extra` fields (JSON members, leading comma) and its
// linear_num_value_heads, in a fresh directory.
std::string write_config(const std::string& name, const std::string& extra, int value_heads = 4) {
  const auto dir = std::filesystem::temp_directory_path() / ("cbatch-layer-kinds-" + name);
  std::filesystem::create_directories(dir);
  const auto path = dir / "config.json";
  std::ofstream(path) << R"({"model_type": "qwen3_5_text", "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 300,
    "linear_num_key_heads": 2, "linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4,
    "linear_num_value_heads": )" + std::to_string(value_heads) + extra + "}";
  return path.string();
}

std::string error_of(const std::string& path) {
  try {
    read_hf_config(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A config.json of `fields` (JSON members) in a fresh directory.
std::string write_json(const std::string& name, const std::string& fields) {
  const auto dir = std::filesystem::temp_directory_path() / ("cbatch-layer-kinds-" + name);
  std::filesystem::create_directories(dir);
  const auto path = dir / "config.json";
  std::ofstream(path) << "{" + fields + "}";
  return path.string();
}

constexpr const char* kLfm2 = R"("model_type": "lfm2", "hidden_size": 64, "intermediate_size": 144,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300, "conv_L_cache": 3,
    "block_auto_adjust_ff_dim": true, "block_ffn_dim_multiplier": 1.0, "block_multiple_of": 32)";
constexpr const char* kNemotron = R"("model_type": "nemotron_h", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 300,
    "mamba_num_heads": 8, "mamba_head_dim": 16, "ssm_state_size": 16, "n_groups": 2, "conv_kernel": 4)";
constexpr const char* kGranite = R"("model_type": "granitemoehybrid", "hidden_size": 64, "intermediate_size": 32,
    "shared_intermediate_size": 96, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
    "vocab_size": 300, "mamba_n_heads": 8, "mamba_d_head": 16, "mamba_d_state": 16, "mamba_d_conv": 4,
    "position_embedding_type": "nope", "layer_types": ["mamba", "attention", "mamba"])";

}  // namespace

TEST_CASE("layer kinds: layer_types values, full_attention_interval, GGUF recurrent flags") {
  CHECK(layer_kind_of_type("linear_attention", kD) == kD);
  CHECK(layer_kind_of_type("full_attention", kD) == kA);
  CHECK_FALSE(layer_kind_of_type("mamba", kD).has_value());
  CHECK_FALSE(layer_kind_of_type("conv", kD).has_value());
  CHECK_FALSE(layer_kind_of_type("sliding_attention", kD).has_value());
  CHECK(supported_layer_types(kD) == "linear_attention, full_attention, attention");
  CHECK(layer_kinds_from_interval(8, 4) == std::vector<LayerKind>{kD, kD, kD, kA, kD, kD, kD, kA});
  CHECK(layer_kinds_from_interval(3, 1) == std::vector<LayerKind>{kA, kA, kA});
  // The flags cover the MTP blocks too, which are not generation layers.
  CHECK(layer_kinds_from_recurrent_flags({1, 0, 1, 0, 0}, 4) == std::vector<LayerKind>{kD, kA, kD, kA});
  CHECK(layer_kinds_from_recurrent_flags({1, 0}, 4).empty());
  CHECK(layer_kind_name(kD) == "gated DeltaNet");
}

TEST_CASE("layer kinds of the short-conv and Mamba-2 families: their type names, the pattern, GGUF arrays") {
  // linear_attention names the family's recurrent kind (transformers 5's Granite configs); the Hub's names too.
  CHECK(layer_kind_of_type("linear_attention", kM) == kM);
  CHECK(layer_kind_of_type("mamba", kM) == kM);
  CHECK(layer_kind_of_type("attention", kM) == kA);
  CHECK_FALSE(layer_kind_of_type("conv", kM).has_value());
  CHECK(layer_kind_of_type("conv", kC) == kC);
  CHECK(layer_kind_of_type("full_attention", kC) == kA);
  CHECK_FALSE(layer_kind_of_type("mamba", kC).has_value());
  CHECK(supported_layer_types(kC) == "linear_attention, full_attention, attention, conv");
  size_t bad_at = 99;
  CHECK(layer_kinds_from_pattern("M-*-M-", &bad_at) == std::vector<LayerKind>{kM, kP, kA, kP, kM, kP});
  CHECK_FALSE(layer_kinds_from_pattern("M-E*", &bad_at).has_value());
  CHECK(bad_at == 2);
  // head_count_kv per layer: 0 is recurrent; Nemotron-H's feed_forward_length marks its MLP layers.
  CHECK(layer_kinds_from_kv_heads({0, 2, 0, 0, 2}, {}, kC, 5) == std::vector<LayerKind>{kC, kA, kC, kC, kA});
  CHECK(layer_kinds_from_kv_heads({0, 0, 2, 0}, {0, 128, 0, 128}, kM, 4) == std::vector<LayerKind>{kM, kP, kA, kP});
  CHECK(layer_kinds_from_kv_heads({0, 2}, {}, kM, 3).empty());
  CHECK(layer_kinds_from_kv_heads({0, 2, 0}, {0, 1}, kM, 3).empty());
  CHECK(layer_kind_name(kC) == "short conv");
  CHECK(layer_kind_name(kM) == "Mamba-2");
  CHECK(layer_kind_name(kP) == "MLP");
}

TEST_CASE("short-conv and Mamba-2 configs: kinds, sizes, what a state slot keeps, errors naming the key") {
  const ModelConfig lfm2 = read_hf_config(write_json("lfm2", std::string(kLfm2) +
      R"(, "layer_types": ["conv", "full_attention", "conv", "conv"])")).config;
  CHECK(lfm2.layer_kinds == std::vector<LayerKind>{kC, kA, kC, kC});
  CHECK(lfm2.hidden_dim == 96);  // int(2 * 144 / 3) = 96, a multiple of 32
  CHECK(lfm2.tied_embeddings);
  CHECK(lfm2.layer_state(0).conv_floats == 2 * 64);
  CHECK(lfm2.layer_state(0).recurrent_floats == 0);
  CHECK(lfm2.layer_state(1).conv_floats == 0);
  CHECK(lfm2.has_recurrent_layers());
  const ModelConfig by_index = read_hf_config(write_json("lfm2-idx", std::string(kLfm2) + R"(, "full_attn_idxs": [3])")).config;
  CHECK(by_index.layer_kinds == std::vector<LayerKind>{kC, kC, kC, kA});
  const ModelConfig nemotron = read_hf_config(write_json("nemotron", std::string(kNemotron) +
      R"(, "hybrid_override_pattern": "M-*-")")).config;
  CHECK(nemotron.layer_kinds == std::vector<LayerKind>{kM, kP, kA, kP});
  CHECK(nemotron.single_sublayer);
  CHECK(!nemotron.has_ffn(0));
  CHECK(nemotron.has_ffn(1));
  CHECK(!nemotron.has_mixer(1));
  CHECK(nemotron.activation == Activation::kRelu2);
  CHECK(nemotron.mamba.conv_dim() == 128 + 2 * 2 * 16);
  CHECK(nemotron.mamba.in_proj_dim() == 128 + 192 + 8);
  CHECK(nemotron.layer_state(0).conv_floats == 3 * 192);
  CHECK(nemotron.layer_state(0).recurrent_floats == 128 * 16);
  CHECK(nemotron.is_nope(2));
  CHECK(nemotron.mamba.dt_min == doctest::Approx(0.001));
  const ModelConfig granite = read_hf_config(write_json("granite", std::string(kGranite) +
      R"(, "mamba_n_groups": 2, "residual_multiplier": 0.5, "logits_scaling": 2.5)")).config;
  CHECK(granite.layer_kinds == std::vector<LayerKind>{kM, kA, kM});
  CHECK(granite.hidden_dim == 96);  // no experts: the shared MLP alone
  CHECK(granite.residual_scale == 0.5f);
  CHECK(granite.logit_divisor == 2.5f);
  CHECK(granite.is_nope(1));
  const std::string pattern = error_of(write_json("nemotron-bad", std::string(kNemotron) + R"(, "hybrid_override_pattern": "M-E-")"));
  CHECK(pattern.find("hybrid_override_pattern") != std::string::npos);
  CHECK(pattern.find("'E'") != std::string::npos);
  CHECK(error_of(write_json("nemotron-len", std::string(kNemotron) + R"(, "hybrid_override_pattern": "M-")"))
            .find("hybrid_override_pattern") != std::string::npos);
  const std::string groups = error_of(write_json("granite-groups", std::string(kGranite) + R"(, "mamba_n_groups": 3)"));
  CHECK(groups.find("mamba_n_heads") != std::string::npos);
  CHECK(error_of(write_json("lfm2-type", std::string(kLfm2) + R"(, "layer_types": ["conv", "mamba", "conv", "conv"])"))
            .find("'mamba'") != std::string::npos);
}

TEST_CASE("layer kinds through config.json: the list, the interval, and errors naming the key") {
  const ModelConfig listed = read_hf_config(write_config(
      "list", R"(, "layer_types": ["linear_attention", "full_attention", "full_attention", "linear_attention"])")).config;
  CHECK(listed.layer_kinds == std::vector<LayerKind>{kD, kA, kA, kD});
  CHECK(listed.num_attention_layers() == 2);
  CHECK(listed.attention_index(2) == 1);
  CHECK(listed.attention_index(3) == 2);
  CHECK(listed.has_recurrent_layers());
  CHECK(listed.deltanet.conv_dim() == 2 * 2 * 16 + 4 * 16);
  CHECK(listed.deltanet.key_head_of(3) == 1);  // grouped: value heads 2, 3 read key head 1
  CHECK(listed.rotary_dims() == 8);            // the family's default factor 0.25 of head_dim 32
  CHECK(listed.norm_offset == 1.0f);
  const ModelConfig every_second = read_hf_config(write_config("interval", R"(, "full_attention_interval": 2)")).config;
  CHECK(every_second.layer_kinds == std::vector<LayerKind>{kD, kA, kD, kA});
  CHECK(read_hf_config(write_config("default", "")).config.layer_kinds == std::vector<LayerKind>{kD, kD, kD, kA});
  const std::string unknown =
      error_of(write_config("unknown", R"(, "layer_types": ["linear_attention", "mamba", "full_attention", "full_attention"])"));
  CHECK(unknown.find("layer_types") != std::string::npos);
  CHECK(unknown.find("'mamba'") != std::string::npos);
  CHECK(error_of(write_config("short", R"(, "layer_types": ["full_attention"])")).find("layer_types") != std::string::npos);
  CHECK(error_of(write_config("heads", "", 3)).find("linear_num_value_heads") !=
        std::string::npos);
  CHECK(error_of(write_config("rotary", R"(, "partial_rotary_factor": 0.01)")).find("partial_rotary_factor") !=
        std::string::npos);
}

TEST_CASE("Gemma 4's shared K/V: each shared layer reads the last earlier layer of its kind, the cache holds none") {
  const std::vector<int> windows = {8, 8, 0, 8, 8, 0};
  CHECK(shared_kv_sources(windows, 6, 0, "key").empty());
  CHECK(shared_kv_sources(windows, 6, 2, "key") == std::vector<int>{0, 1, 2, 3, 3, 2});
  CHECK_THROWS_WITH(shared_kv_sources(windows, 6, 6, "'f': num_kv_shared_layers"),
                    doctest::Contains("'f': num_kv_shared_layers = 6 must be below the layer count 6"));
  CHECK_THROWS_WITH(shared_kv_sources(windows, 6, 5, "key"), doctest::Contains("leaves layer 2 no earlier layer of its kind"));
  ModelConfig c;
  c.num_layers = 6;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.global_head_dim = 32;
  c.global_kv_heads = 1;
  c.layer_window = windows;
  c.layer_kv_source = shared_kv_sources(windows, 6, 2, "key");
  CHECK(c.num_attention_layers() == 4);
  CHECK(!c.has_recurrent_layers());
  CHECK(c.kv_dim_of(0) == 32);
  CHECK(c.kv_dim_of(2) == 32);  // 1 head of 32
  CHECK(c.q_dim_of(2) == 128);
  CHECK(c.kv_slot_values() == 3 * 32 + 32);  // layers 0, 1, 2, 3 only
  CHECK(c.kv_values_before(3) == 96);
  CHECK(c.kv_values_before(4) == c.kv_values_before(3));  // layer 4 reads layer 3's cache
  CHECK(c.kv_values_before(5) == c.kv_values_before(2));
  CHECK(c.attention_index(5) == 2);
  CHECK(!c.writes_kv(4));
  c.hidden_dim = 48;
  c.double_wide_shared = true;
  CHECK(c.hidden_of(3) == 48);
  CHECK(c.hidden_of(4) == 96);
}

TEST_CASE("Gemma 4's config.json: the global layers from global_head_dim or transformers 5's per_layer_config") {
  const auto dir = std::filesystem::temp_directory_path() / "cbatch-layer-kinds-gemma4";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "config.json").string();
  const std::string base = R"({"model_type": "gemma4_text", "hidden_size": 64, "intermediate_size": 48,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 300,
    "sliding_window": 8, "attention_k_eq_v": true, "num_kv_shared_layers": 1, "hidden_size_per_layer_input": 8,
    "vocab_size_per_layer_input": 300,
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"],
    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
      "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}})";
  std::ofstream(path) << base + R"(, "global_head_dim": 32, "num_global_key_value_heads": 1})";
  ModelConfig c = read_hf_config(path).config;
  CHECK(c.architecture == "gemma4");
  CHECK(c.global_head_dim == 32);
  CHECK(c.global_kv_heads == 1);
  CHECK(c.global_rope_fraction == 0.25f);
  CHECK(c.rope_theta_local == 10000.0f);
  CHECK(c.norm_offset == 0.0f);
  CHECK(c.query_scale() == 1.0f);
  CHECK(c.kv_source(3) == 2);
  CHECK(c.per_layer_dim == 8);
  std::ofstream(path) << base + R"(, "per_layer_config": {"1": {"head_dim": 32, "num_key_value_heads": 1}}})";
  c = read_hf_config(path).config;
  CHECK(c.global_head_dim == 32);
  CHECK(c.global_kv_heads == 1);
  std::ofstream(path) << base + R"(, "enable_moe_block": true, "num_experts": 4, "top_k_experts": 5})";
  CHECK(error_of(path).find("top_k_experts") != std::string::npos);
}
