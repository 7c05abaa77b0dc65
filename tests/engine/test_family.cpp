// Model families: config.json fields of each family become the right ModelConfig description (windows
// per layer, RoPE bases and scaling, norms, scales), unsupported architectures get one clear error, and
// the CPU forward really applies a sliding window (positions inside it see the full-attention values).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "tests/engine/step_io.hpp"
#include "engine/cpu/cpu_backend.hpp"
#include "engine/model/family.hpp"
#include "engine/model/model.hpp"
#include "test_files.hpp"

namespace cbatch {
namespace {

using test::TempFile;

// A small config.json of `model_type` with extra fields (JSON members, comma-led).
std::string tiny_config(const std::string& model_type, const std::string& extra, int num_layers = 12) {
  return R"({"model_type": ")" + model_type + R"(", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": )" +
         std::to_string(num_layers) + R"(, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300,
            "max_position_embeddings": 256)" + extra + "}";
}

Model load_config(const std::string& json) {
  const TempFile file(json);
  return load_model(ModelSource{"dummy:" + file.path(), "", 7});
}

std::string load_error(const std::string& json) {
  try {
    load_config(json);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("family: Gemma 3 from config.json: pattern of windows, local RoPE base, (1 + w) norms, scales") {
  const Model m = load_config(tiny_config("gemma3_text", R"(, "head_dim": 32, "sliding_window": 8,
      "query_pre_attn_scalar": 64, "rope_theta": 1000000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0})"));
  const ModelConfig& c = m.config;
  CHECK(c.architecture == "gemma3");
  CHECK(c.head_dim == 32);
  CHECK(c.norm_offset == 1.0f);
  CHECK(c.qk_norm);
  CHECK(c.sandwich_norms);
  CHECK(c.activation == Activation::kGeluTanh);
  CHECK(c.tied_embeddings);  // Gemma ties by default
  CHECK(c.embedding_scale == doctest::Approx(8.0));
  CHECK(c.query_scale() == doctest::Approx(0.125));
  for (int l = 0; l < 12; ++l) CHECK(c.window(l) == (l == 5 || l == 11 ? 0 : 8));
  CHECK(c.uses_local_rope(0));
  CHECK(!c.uses_local_rope(5));
  float global[16], local[16];
  rope_inv_freq(c, global, false);
  rope_inv_freq(c, local, true);
  for (int i = 0; i < 16; ++i) {
    CHECK(global[i] == doctest::Approx(std::pow(1e6, -i / 16.0) / 8.0).epsilon(1e-5));
    CHECK(local[i] == doctest::Approx(std::pow(1e4, -i / 16.0)).epsilon(1e-5));
  }
  CHECK(m.tensors.layers[0][LayerTensor::kPostAttnNorm].cols == 64);
  CHECK(m.tensors.layers[0][LayerTensor::kQNorm].cols == 32);
}

TEST_CASE("family: windows per layer from layer_types, Gemma 2's even layers, Qwen's max_window_layers") {
  const Model typed = load_config(tiny_config("gemma3_text", R"(, "sliding_window": 4, "layer_types":
      ["full_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
       "full_attention", "full_attention", "full_attention", "full_attention", "full_attention",
       "full_attention", "sliding_attention"])"));
  CHECK(typed.config.layer_window == std::vector<int>{0, 4, 0, 4, 4, 0, 0, 0, 0, 0, 0, 4});
  const Model gemma2 = load_config(tiny_config("gemma2", R"(, "sliding_window": 16, "attn_logit_softcapping": 50.0,
      "final_logit_softcapping": 30.0)"));
  CHECK(gemma2.config.window(0) == 16);
  CHECK(gemma2.config.window(1) == 0);
  CHECK(gemma2.config.attn_softcap == 50.0f);
  CHECK(gemma2.config.final_softcap == 30.0f);
  CHECK(!gemma2.config.qk_norm);
  const Model qwen_off = load_config(tiny_config("qwen2", R"(, "sliding_window": 16, "max_window_layers": 4)"));
  CHECK(!qwen_off.config.has_window());  // use_sliding_window defaults to false
  CHECK(qwen_off.config.qkv_bias);
  CHECK(qwen_off.tensors.layers[0][LayerTensor::kBk].cols == 32);
  const Model qwen_on = load_config(tiny_config("qwen2", R"(, "sliding_window": 16, "max_window_layers": 4,
      "use_sliding_window": true)"));
  for (int l = 0; l < 12; ++l) CHECK(qwen_on.config.window(l) == (l >= 4 ? 16 : 0));
  const Model mistral = load_config(tiny_config("mistral", R"(, "sliding_window": null)"));
  CHECK(!mistral.config.has_window());
}

TEST_CASE("family: yarn and longrope frequencies") {
  const Model yarn = load_config(tiny_config("qwen3", R"(, "head_dim": 128, "rope_theta": 10000.0,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096})"));
  std::vector<float> freq(64), plain(64);
  rope_inv_freq(yarn.config, freq.data());
  for (int i = 0; i < 64; ++i) plain[i] = static_cast<float>(std::pow(10000.0, -i / 64.0));
  // Correction range for beta 32 and 1 over 4096 positions: dims up to 20 keep their frequency, from 46 on
  // they are divided by the factor, the ramp between.
  for (int i = 0; i <= 20; ++i) CHECK(freq[i] == doctest::Approx(plain[i]).epsilon(1e-6));
  for (int i = 46; i < 64; ++i) CHECK(freq[i] == doctest::Approx(plain[i] / 4).epsilon(1e-6));
  CHECK(freq[33] < plain[33]);
  CHECK(freq[33] > plain[33] / 4);
  CHECK(rope_attention_factor(yarn.config, false) == doctest::Approx(0.1 * std::log(4.0) + 1.0));

  std::string factors_short = "[", factors_long = "[";
  for (int i = 0; i < 8; ++i) {
    factors_short += std::string(i ? ", " : "") + "1.0";
    factors_long += std::string(i ? ", " : "") + std::to_string(2 + i);
  }
  const Model phi = load_config(tiny_config("phi3", R"(, "original_max_position_embeddings": 64,
      "rope_scaling": {"type": "longrope", "short_factor": )" + factors_short + "], \"long_factor\": " + factors_long + "]}"));
  std::vector<float> short_freq(8), long_freq(8);
  rope_inv_freq(phi.config, short_freq.data(), false, false);
  rope_inv_freq(phi.config, long_freq.data(), false, true);
  for (int i = 0; i < 8; ++i) CHECK(long_freq[i] == doctest::Approx(short_freq[i] / (2 + i)));
  CHECK(rope_attention_factor(phi.config, false) == doctest::Approx(std::sqrt(1 + std::log(4.0) / std::log(64.0))));
}

TEST_CASE("family: SmolLM3's NoPE layers from no_rope_layers or the interval, its defaults, and bad lists") {
  const Model interval = load_config(tiny_config("smollm3", ""));
  const ModelConfig& c = interval.config;
  CHECK(c.architecture == "smollm3");
  CHECK(c.rope_layout == RopeLayout::kHalves);
  CHECK(c.tied_embeddings);              // SmolLM3Config ties by default
  CHECK(c.rope_theta == 2000000.0f);     // and its rope_theta default
  for (int l = 0; l < 12; ++l) CHECK(c.is_nope(l) == (l % 4 == 3));  // no_rope_layer_interval 4
  CHECK(c.features().find("NoPE) on 3 of 12 layers") != std::string::npos);
  const Model every3 = load_config(tiny_config("smollm3", R"(, "no_rope_layer_interval": 3)", 6));
  CHECK(every3.config.layer_nope == std::vector<uint8_t>{0, 0, 1, 0, 0, 1});
  const Model listed = load_config(tiny_config("smollm3", R"(, "no_rope_layers": [0, 1, 1, 0, 1],
      "tie_word_embeddings": false, "rope_theta": 5000000.0, "use_sliding_window": false, "sliding_window": null,
      "rope_scaling": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 128})", 5));
  CHECK(listed.config.layer_nope == std::vector<uint8_t>{1, 0, 0, 1, 0});
  CHECK(!listed.config.tied_embeddings);
  CHECK(listed.config.rope_scaling.type == RopeScalingType::kYarn);
  CHECK(rope_attention_factor(listed.config, false) == doctest::Approx(0.1 * std::log(2.0) + 1.0));
  CHECK(load_config(tiny_config("llama", "")).config.layer_nope.empty());  // Llama: every layer rotates
  // A list of the wrong length or with other values than 0 and 1 names the key.
  for (const char* bad : {R"(, "no_rope_layers": [1, 1, 0])", R"(, "no_rope_layers": [1, 1, 2, 0, 1])",
                          R"(, "no_rope_layers": [1, 1, true, 0, 1])", R"(, "no_rope_layers": "1110")"}) {
    CAPTURE(bad);
    CHECK(load_error(tiny_config("smollm3", bad, 5)).find("no_rope_layers") != std::string::npos);
  }
  CHECK(load_error(tiny_config("smollm3", R"(, "no_rope_layer_interval": 0)")).find("no_rope_layer_interval") !=
        std::string::npos);
  CHECK(load_error(tiny_config("smollm3", R"(, "use_sliding_window": true, "sliding_window": 64)"))
            .find("use_sliding_window") != std::string::npos);
  // The example config: SmolLM3-3B's shape (3.08B parameters, tied), and --dummy-layers keeps the first flags.
  ModelSource example{"dummy:" + test::source_path("examples/models/smollm3-3b.json"), "", 0};
  const Model full = load_model(example);
  CHECK(full.config.num_parameters() == 3075098624);
  CHECK(std::count(full.config.layer_nope.begin(), full.config.layer_nope.end(), 1) == 9);
  example.dummy_layers = 4;
  CHECK(load_model(example).config.layer_nope == std::vector<uint8_t>{0, 0, 0, 1});
}

TEST_CASE("family: a NoPE layer skips the rotation on the CPU") {
  // The same dummy weights (drawn from the seed, not the config) with the one layer NoPE or RoPE: at position
  // 0 the rotation is the identity, so the logits agree; from position 1 on they differ.
  const Model nope = load_config(tiny_config("smollm3", R"(, "no_rope_layers": [0])", 1));
  const Model rope = load_config(tiny_config("smollm3", R"(, "no_rope_layers": [1])", 1));
  std::vector<std::vector<float>> logits;
  for (const Model* m : {&nope, &rope}) {
    auto backend = make_cpu_backend(*m, {});
    backend->allocate_kv_cache({4, 4});
    RaggedBatch b;
    b.query_start = {0, 3};
    for (int p = 0; p < 3; ++p) {
      b.token_ids.push_back(5 + 31 * p);
      b.positions.push_back(p);
      b.slot_mapping.push_back(p);
      b.logits_rows.push_back(p);
    }
    b.seq_lens = {3};
    b.max_seq_len = 3;
    b.max_blocks_per_seq = 1;
    b.block_tables = {0};
    StepIo out;
    backend->forward(b, out, out);
    logits.push_back(out.logits);
  }
  const auto row = [&](int model, int r) {
    const auto begin = logits[model].begin() + r * nope.config.vocab_size;
    return std::vector<float>(begin, begin + nope.config.vocab_size);
  };
  CHECK(row(0, 0) == row(1, 0));
  CHECK(row(0, 1) != row(1, 1));
  CHECK(row(0, 2) != row(1, 2));
}

TEST_CASE("family: unsupported architectures and features name themselves and the supported ones") {
  const std::string moe = load_error(tiny_config("deepseek_v3", ""));
  CHECK(moe.find("'deepseek_v3'") != std::string::npos);
  CHECK(moe.find("mixture-of-experts") != std::string::npos);
  CHECK(moe.find("supported: llama, mistral, qwen2, qwen3, gemma2, gemma3, phi3, mixtral, qwen2moe, qwen3moe, olmoe") !=
        std::string::npos);
  CHECK(load_error(tiny_config("gpt_neox", "")).find("'gpt_neox' is not supported") != std::string::npos);
  CHECK(load_error(tiny_config("llama", R"(, "hidden_act": "relu")")).find("hidden_act") != std::string::npos);
  CHECK(load_error(tiny_config("phi3", R"(, "partial_rotary_factor": 0.75)")).find("partial_rotary_factor") !=
        std::string::npos);
  CHECK(load_error(tiny_config("gemma3_text", R"(, "sliding_window": 8, "layer_types": ["full_attention"])"))
            .find("one entry per layer") != std::string::npos);
}

TEST_CASE("family: the CPU forward masks keys older than the window, and only those") {
  const Model windowed = load_config(tiny_config("mistral", R"(, "sliding_window": 5)", 2));
  const Model full = load_config(tiny_config("mistral", R"(, "sliding_window": null)", 2));
  REQUIRE(windowed.config.num_layers == 2);
  REQUIRE(windowed.config.window(1) == 5);
  const int n = 12, vocab = windowed.config.vocab_size;
  std::vector<std::vector<float>> logits;
  for (const Model* m : {&windowed, &full}) {
    auto backend = make_cpu_backend(*m, {});
    backend->allocate_kv_cache({8, 4});
    RaggedBatch b;
    b.query_start = {0, n};
    for (int p = 0; p < n; ++p) {
      b.token_ids.push_back(3 + (p * 37) % 290);
      b.positions.push_back(p);
      b.slot_mapping.push_back(p);  // blocks 0, 1, 2 in order
      b.logits_rows.push_back(p);
    }
    b.seq_lens = {n};
    b.max_seq_len = n;
    b.max_blocks_per_seq = 3;
    b.block_tables = {0, 1, 2};
    StepIo out;
    backend->forward(b, out, out);
    logits.push_back(out.logits);
  }
  for (int p = 0; p < n; ++p) {
    CAPTURE(p);
    bool same = true;
    for (int v = 0; v < vocab; ++v) same = same && logits[0][p * vocab + v] == logits[1][p * vocab + v];
    CHECK(same == (p < 5));  // a query at p < window sees every key either way
  }
}

}  // namespace cbatch

namespace cbatch {

TEST_CASE("family: transformers 5 configs (rope_parameters), Gemma 2's default softcaps, Qwen's default window layers") {
  const Model flat = load_config(tiny_config("qwen3", R"(, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0})"));
  CHECK(flat.config.rope_theta == 1000000.0f);
  const Model per_type = load_config(tiny_config("gemma3_text", R"(, "sliding_window": 8, "rope_parameters": {
      "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})"));
  CHECK(per_type.config.rope_theta == 1000000.0f);
  CHECK(per_type.config.rope_theta_local == 10000.0f);
  CHECK(per_type.config.rope_scaling.type == RopeScalingType::kLinear);
  CHECK(per_type.config.rope_scaling.factor == 8.0f);
  const Model absent = load_config(tiny_config("gemma2", ""));
  CHECK(absent.config.attn_softcap == 50.0f);
  CHECK(absent.config.final_softcap == 30.0f);
  const Model none = load_config(tiny_config("gemma2", R"(, "attn_logit_softcapping": null, "final_logit_softcapping": null)"));
  CHECK(none.config.attn_softcap == 0.0f);
  CHECK(none.config.final_softcap == 0.0f);
  const Model qwen = load_config(tiny_config("qwen2", R"(, "sliding_window": 16, "use_sliding_window": true)", 30));
  CHECK(qwen.config.window(27) == 0);
  CHECK(qwen.config.window(28) == 16);
}

}  // namespace cbatch
