// The whole CUDA backend against the CPU reference model on a small random model (GQA, head_dim 64,
// vocab 1000) over three steps: (1) prefill chunks, one of them the first part of a longer prompt;
// (2) that prompt's continuation chunk plus decodes; (3) decodes plus a padding row with slot -1.
// The families (one model per feature of ModelConfig's description: biases, q/k norms, Gemma 2 and 3,
// sliding windows, longrope, yarn) against the CPU backend, the reference of every family feature, with
// every attention kernel; mixture-of-experts layers (with and without a shared expert) likewise, and the
// step's experts_touched against the CPU's. Also: the argmax path, draws on the device (CudaKernelOptions::
// device_sampling, the default), batch validation, and the "does not fit" errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "cuda/backend/cuda_backend.hpp"
#include "tests/engine/step_io.hpp"
#include "engine/base/error.hpp"
#include "engine/cpu/cpu_backend.hpp"
#include "engine/model/kv_groups.hpp"
#include "engine/sample/radix_sampling.hpp"
#include "tests/cuda/moe_quant_case.hpp"
#include "tests/cuda/reference.hpp"
#include "tests/cuda/reference_model.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {

namespace {

constexpr int kBlockSize = 16;
constexpr int kNumBlocks = 24;
constexpr int kMaxBlocksPerSeq = 4;

TensorView random_tensor(const std::string& name, int64_t rows, int64_t cols, uint64_t seed, float scale,
                         float offset) {
  TensorView t;
  t.name = name;
  t.rows = rows;
  t.cols = cols;
  t.is_random = true;
  t.random = RandomInit{seed, scale, offset};
  return t;
}

Model make_model(int num_layers, bool tied, RopeLayout layout, int head_dim = 64) {
  Model m;
  m.format = "dummy";
  m.weight_dtype = "random";
  ModelConfig& c = m.config;
  c.dim = 256;
  c.hidden_dim = 300;
  c.num_layers = num_layers;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = head_dim;
  c.vocab_size = 1000;
  c.max_context = 64;
  c.rms_eps = 1e-5f;
  c.rope_theta = 500000.0f;
  c.rope_scaling.type = layout == RopeLayout::kHalves ? RopeScalingType::kLlama3 : RopeScalingType::kNone;
  c.rope_scaling.factor = 8.0f;
  c.rope_scaling.original_max_position = 32;
  c.rope_layout = layout;
  c.tied_embeddings = tied;
  uint64_t seed = 1000;
  // Uniform [-1, 1) * sqrt(3 / in) has unit variance per input: activations stay O(1).
  auto linear = [&](const std::string& name, int out, int in) {
    return random_tensor(name, out, in, seed++, std::sqrt(3.0f / static_cast<float>(in)), 0.0f);
  };
  auto norm = [&](const std::string& name) { return random_tensor(name, 1, c.dim, seed++, 0.2f, 1.0f); };
  ModelTensors& t = m.tensors;
  t[ModelTensor::kEmbedding] = random_tensor("token_embd", c.vocab_size, c.dim, seed++, 1.0f, 0.0f);
  for (int l = 0; l < num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerTensors layer;  // no family tensors
    layer[LayerTensor::kAttnNorm] = norm(p + "attn_norm");
    layer[LayerTensor::kWq] = linear(p + "wq", c.q_dim(), c.dim);
    layer[LayerTensor::kWk] = linear(p + "wk", c.kv_dim(), c.dim);
    layer[LayerTensor::kWv] = linear(p + "wv", c.kv_dim(), c.dim);
    layer[LayerTensor::kWo] = linear(p + "wo", c.dim, c.q_dim());
    layer[LayerTensor::kFfnNorm] = norm(p + "ffn_norm");
    layer[LayerTensor::kGate] = linear(p + "w_gate", c.hidden_dim, c.dim);
    layer[LayerTensor::kUp] = linear(p + "w_up", c.hidden_dim, c.dim);
    layer[LayerTensor::kDown] = linear(p + "w_down", c.dim, c.hidden_dim);
    t.layers.push_back(std::move(layer));
  }
  t[ModelTensor::kFinalNorm] = norm("output_norm");
  t[ModelTensor::kLmHead] = tied ? t[ModelTensor::kEmbedding] : linear("output", c.vocab_size, c.dim);
  return m;
}

// One sequence's part of a step: rows at positions first_pos .. first_pos + num_rows - 1.
struct StepSeq {
  std::vector<int32_t> table;  // physical blocks
  int first_pos;
  int num_rows;
  bool sample;                 // its last row's logits are wanted
  bool padding;                // static-mode padding: slot -1, position already cached
};

// Blocks each KV group's tables may take: group g's are group 0's plus g * kNumBlocks (kv_groups.hpp).
constexpr int kMaxKvGroups = 3;

RaggedBatch make_batch(const std::vector<StepSeq>& seqs, std::mt19937& rng, int vocab, int num_kv_groups) {
  RaggedBatch b;
  b.max_blocks_per_seq = kMaxBlocksPerSeq;
  b.query_start.push_back(0);
  for (const StepSeq& s : seqs) {
    for (int i = 0; i < s.num_rows; ++i) {
      const int pos = s.first_pos + i;
      b.token_ids.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab)));
      b.positions.push_back(pos);
      b.slot_mapping.push_back(s.padding ? -1 : s.table[pos / kBlockSize] * kBlockSize + pos % kBlockSize);
    }
    b.query_start.push_back(b.num_tokens());
    b.seq_lens.push_back(s.first_pos + s.num_rows);
    for (int j = 0; j < kMaxBlocksPerSeq; ++j) b.block_tables.push_back(j < static_cast<int>(s.table.size()) ? s.table[j] : -1);
    if (s.sample) b.logits_rows.push_back(b.num_tokens() - 1);
    b.max_seq_len = std::max(b.max_seq_len, s.first_pos + s.num_rows);
    b.max_query_len = std::max(b.max_query_len, s.num_rows);
  }
  REQUIRE(num_kv_groups <= kMaxKvGroups);
  const std::vector<int32_t> slots = b.slot_mapping, tables = b.block_tables;
  for (int g = 1; g < num_kv_groups; ++g) {  // no two groups share a page
    for (int32_t slot : slots) b.slot_mapping.push_back(slot < 0 ? -1 : slot + g * kNumBlocks * kBlockSize);
    for (int32_t block : tables) b.block_tables.push_back(block < 0 ? -1 : block + g * kNumBlocks);
  }
  b.num_kv_groups = num_kv_groups;
  return b;
}

// Step 1: prefill 20 of S0's 35 prompt tokens, all of S1 (13) and S2 (5). Step 2: S0's remaining 15
// tokens (crossing a block boundary) and decodes of S1, S2. Step 3: decodes of all three plus a padding
// row that repeats S1's position 7 through S1's block table.
std::vector<RaggedBatch> scenario(const ModelConfig& config) {
  const int vocab = config.vocab_size, groups = kv_groups(config).num_groups();
  const std::vector<int32_t> t0 = {5, 2, 9, 14}, t1 = {7, 0}, t2 = {3};
  std::mt19937 rng(7);
  std::vector<RaggedBatch> steps;
  steps.push_back(make_batch({{t0, 0, 20, false, false}, {t1, 0, 13, true, false}, {t2, 0, 5, true, false}}, rng, vocab, groups));
  steps.push_back(make_batch({{t0, 20, 15, true, false}, {t1, 13, 1, true, false}, {t2, 5, 1, true, false}}, rng, vocab, groups));
  steps.push_back(make_batch({{t0, 35, 1, true, false},
                              {t1, 14, 1, true, false},
                              {t2, 6, 1, true, false},
                              {t1, 7, 1, true, true}},
                             rng, vocab, groups));
  return steps;
}

CudaBackendOptions small_options(ComputeDType dtype, const CudaKernelOptions& kernels = {}) {
  CudaBackendOptions o;
  o.dtype = dtype;
  o.kernels = kernels;
  o.max_batch_tokens = 64;
  o.max_num_seqs = 8;
  o.max_context = 64;
  return o;
}

// The logits of a step by a reference: the double-precision Llama model of reference_model.hpp, or the CPU
// backend (fp32), which implements every family feature.
class StepReference {
 public:
  StepReference(const Model& model, bool use_cpu_backend) {
    if (use_cpu_backend) {
      CpuBackendOptions options;
      options.num_threads = 2;
      options.max_batch_tokens = 64;
      cpu_ = make_cpu_backend(model, options);
      cpu_->allocate_kv_cache(KvCacheSpec{kNumBlocks * kMaxKvGroups, kBlockSize});
    } else {
      llama_ = std::make_unique<ReferenceModel>(model, kNumBlocks, kBlockSize);
    }
  }
  std::vector<double> forward(const RaggedBatch& batch) {
    if (llama_) return llama_->forward(batch);
    StepIo out;
    out.want_logits = true;
    cpu_->forward(batch, out, out);
    return std::vector<double>(out.logits.begin(), out.logits.end());
  }

 private:
  std::unique_ptr<ReferenceModel> llama_;
  std::unique_ptr<Backend> cpu_;
};

// Runs the scenario on the backend and the reference; checks logits within `tol` and, where the
// reference's top two logits are apart by more than 10 tol rms(logits), the same argmax. Also checks that the argmax path
// returns exactly the argmax of the logits path (each step run twice: rewriting the same k and v).
void check_scenario(const Model& model, ComputeDType dtype, double tol, bool cpu_reference = false,
                    const CudaKernelOptions& kernels = {}) {
  std::unique_ptr<Backend> backend = make_cuda_backend(model, small_options(dtype, kernels));
  CHECK(backend->traits().device_name.rfind("cuda:", 0) == 0);
  CHECK(backend->max_kv_blocks(kBlockSize) >= kNumBlocks);
  backend->allocate_kv_cache(KvCacheSpec{kNumBlocks * kMaxKvGroups, kBlockSize});
  StepReference reference(model, cpu_reference);
  const int vocab = model.config.vocab_size;
  int step_index = 0;
  for (const RaggedBatch& batch : scenario(model.config)) {
    ++step_index;
    CAPTURE(step_index);
    const std::vector<double> ref = reference.forward(batch);
    StepIo out;
    out.want_logits = true;
    backend->forward(batch, out, out);
    REQUIRE(out.logits.size() == static_cast<size_t>(batch.num_logits()) * vocab);
    const double err = rel_error(out.logits, ref);
    MESSAGE("step " << step_index << " logits relative error " << err);
    CHECK(err < tol);

    StepIo ids;
    ids.want_logits = false;
    backend->forward(batch, ids, ids);
    REQUIRE(ids.token_ids.size() == static_cast<size_t>(batch.num_logits()));
    for (int i = 0; i < batch.num_logits(); ++i) {
      const float* row = out.logits.data() + static_cast<size_t>(i) * vocab;
      CHECK(ids.token_ids[i] == argmax_ref(row, vocab));
      std::vector<double> ref_row(ref.begin() + static_cast<long>(i) * vocab, ref.begin() + static_cast<long>(i + 1) * vocab);
      std::vector<double> sorted = ref_row;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
      double sum_sq = 0.0;
      for (double v : ref_row) sum_sq += v * v;
      const double rms = std::sqrt(sum_sq / vocab);
      if (sorted[0] - sorted[1] > 10.0 * tol * rms) {  // a clear winner: any backend within tol agrees
        const auto best = std::max_element(ref_row.begin(), ref_row.end()) - ref_row.begin();
        CHECK(ids.token_ids[i] == best);
      }
    }
  }
}

}  // namespace

TEST_CASE("CUDA backend fp32 matches the CPU reference over chunked prefill, decode and padding") {
  check_scenario(make_model(3, false, RopeLayout::kHalves), ComputeDType::kF32, 1e-4);
}

TEST_CASE("CUDA backend fp32 with tied embeddings and adjacent-pair RoPE") {
  check_scenario(make_model(2, true, RopeLayout::kAdjacentPairs), ComputeDType::kF32, 1e-4);
}

TEST_CASE("CUDA backend bf16 and fp16 stay close to the fp32 reference") {
  const Model model = make_model(3, false, RopeLayout::kHalves);
  check_scenario(model, ComputeDType::kBF16, 3e-2);  // bf16 weights and activations: about 1e-2 expected
  check_scenario(model, ComputeDType::kF16, 5e-3);   // fp16: about 1e-3 expected
}

// One model per family feature: make_model's Llama with the description and the tensors of a family.
enum class Family { kQwen2, kQwen3, kGemma2, kGemma3, kMistral, kPhi3Longrope, kYarn };

const char* family_name(Family f) {
  switch (f) {
    case Family::kQwen2: return "qwen2 (q/k/v biases)";
    case Family::kQwen3: return "qwen3 (q/k norms)";
    case Family::kGemma2: return "gemma2 (1 + w norms, sandwich norms, GeGLU, embedding and query scales, softcaps, "
                                 "windows on even layers)";
    case Family::kGemma3: return "gemma3 (q/k norms, sandwich norms, GeGLU, windows and a local RoPE base on 2 of 3 "
                                 "layers, linear RoPE scaling)";
    case Family::kMistral: return "mistral (a window on every layer)";
    case Family::kPhi3Longrope: return "phi3 (longrope from position 16 on, attention factor)";
    case Family::kYarn: return "yarn RoPE scaling (attention factor)";
  }
  return "";
}

// make_model's Llama without RoPE scaling, tied as Gemma's: what each family model adds its feature to.
Model family_base_model(Family family, int head_dim = 64) {
  Model m = make_model(3, family == Family::kGemma2 || family == Family::kGemma3, RopeLayout::kHalves, head_dim);
  m.config.rope_scaling = RopeScaling{};
  return m;
}

Model make_family_model(Family family, int head_dim = 64) {
  Model m = family_base_model(family, head_dim);
  ModelConfig& c = m.config;
  c.architecture = family_name(family);
  uint64_t seed = 5000;
  auto vector = [&](const std::string& name, int n, float scale, float offset) {
    return random_tensor(name, 1, n, seed++, scale, offset);
  };
  for (int l = 0; l < c.num_layers; ++l) {
    LayerTensors& t = m.tensors.layers[static_cast<size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    if (family == Family::kQwen2) {
      t[LayerTensor::kBq] = vector(p + "attn_q.bias", c.q_dim(), 0.5f, 0.0f);
      t[LayerTensor::kBk] = vector(p + "attn_k.bias", c.kv_dim(), 0.5f, 0.0f);
      t[LayerTensor::kBv] = vector(p + "attn_v.bias", c.kv_dim(), 0.5f, 0.0f);
    }
    if (family == Family::kQwen3 || family == Family::kGemma3) {
      t[LayerTensor::kQNorm] = vector(p + "attn_q_norm", c.head_dim, 0.2f, family == Family::kGemma3 ? 0.0f : 1.0f);
      t[LayerTensor::kKNorm] = vector(p + "attn_k_norm", c.head_dim, 0.2f, family == Family::kGemma3 ? 0.0f : 1.0f);
    }
    if (family == Family::kGemma2 || family == Family::kGemma3) {
      t[LayerTensor::kPostAttnNorm] = vector(p + "post_attention_norm", c.dim, 0.2f, 0.0f);  // (1 + w): offset below
      t[LayerTensor::kPostFfnNorm] = vector(p + "post_ffw_norm", c.dim, 0.2f, 0.0f);
      for (TensorView* norm : {&t[LayerTensor::kAttnNorm], &t[LayerTensor::kFfnNorm]}) norm->random.offset = 0.0f;
    }
  }
  switch (family) {
    case Family::kQwen2: c.qkv_bias = true; break;
    case Family::kQwen3: c.qk_norm = true; break;
    case Family::kGemma2:
    case Family::kGemma3:
      c.norm_offset = 1.0f;
      c.sandwich_norms = true;
      c.activation = Activation::kGeluTanh;
      c.embedding_scale = std::sqrt(static_cast<float>(c.dim));
      m.tensors[ModelTensor::kEmbedding].random.scale = 1.0f / std::sqrt(static_cast<float>(c.dim));  // rows of unit rms after it
      m.tensors[ModelTensor::kLmHead] = m.tensors[ModelTensor::kEmbedding];
      m.tensors[ModelTensor::kFinalNorm].random.offset = 0.0f;
      if (family == Family::kGemma2) {
        c.attn_scale = 0.1f;
        c.attn_softcap = 2.0f;   // the scores here are O(1): a small cap bends them
        c.final_softcap = 3.0f;
        c.layer_window = {8, 0, 8};
      } else {
        c.qk_norm = true;
        c.layer_window = {8, 8, 0};
        c.rope_theta_local = 10000.0f;
        c.rope_scaling.type = RopeScalingType::kLinear;
        c.rope_scaling.factor = 8.0f;
      }
      break;
    case Family::kMistral: c.layer_window = {12, 12, 12}; break;
    case Family::kPhi3Longrope: {
      c.rope_scaling.type = RopeScalingType::kLongrope;
      c.rope_scaling.original_max_position = 16;
      c.rope_scaling.attention_factor = 1.19f;
      for (int i = 0; i < c.head_dim / 2; ++i) {
        c.rope_scaling.short_factor.push_back(1.0f + 0.05f * static_cast<float>(i));
        c.rope_scaling.long_factor.push_back(2.0f + 0.5f * static_cast<float>(i));
      }
      break;
    }
    case Family::kYarn:
      c.rope_scaling.type = RopeScalingType::kYarn;
      c.rope_scaling.factor = 4.0f;
      c.rope_scaling.original_max_position = 16;
      c.rope_scaling.attention_factor = 1.1f;
      break;
  }
  return m;
}

constexpr Family kFamilies[] = {Family::kQwen2,   Family::kQwen3,        Family::kGemma2, Family::kGemma3,
                                Family::kMistral, Family::kPhi3Longrope, Family::kYarn};

TEST_CASE("CUDA backend runs every family as the CPU backend does (fp32, bf16, fp16)") {
  for (const Family family : kFamilies) {
    const Model model = make_family_model(family);
    CAPTURE(family_name(family));
    check_scenario(model, ComputeDType::kF32, 1e-4, true);
    check_scenario(model, ComputeDType::kBF16, 3e-2, true);
    check_scenario(model, ComputeDType::kF16, 5e-3, true);
  }
}

TEST_CASE("CUDA backend runs Gemma's head_dim 256 on the CUDA-core attention kernels (fp32, bf16, fp16)") {
  for (const Family family : {Family::kGemma3, Family::kGemma2}) {
    const Model model = make_family_model(family, 256);
    CAPTURE(family_name(family));
    check_scenario(model, ComputeDType::kF32, 1e-4, true);
    check_scenario(model, ComputeDType::kBF16, 3e-2, true);
    check_scenario(model, ComputeDType::kF16, 5e-3, true);
  }
}

TEST_CASE("the family models differ from their Llama base (each family test checks its feature)" *
          doctest::test_suite("host")) {
  for (const Family family : kFamilies) {
    const Model model = make_family_model(family);
    CAPTURE(family_name(family));
    const Model base = family_base_model(family);
    StepReference family_ref(model, true), llama_ref(base, true);
    const std::vector<RaggedBatch> steps = scenario(model.config), base_steps = scenario(base.config);  // same tokens
    double worst = 1e30;
    for (size_t i = 0; i < steps.size(); ++i) {  // steps 2 and 3 pass position 16 (longrope) and the windows
      const std::vector<double> a = family_ref.forward(steps[i]), b = llama_ref.forward(base_steps[i]);
      worst = std::min(worst, rel_error(std::vector<float>(a.begin(), a.end()), b));
    }
    CHECK(worst > 1e-3);
  }
}

// make_model's Llama with layers 0 and 2 sparse: 8 experts of width 96, top 2, the router scaled up so that
// rows pick different experts with clear gaps. qwen2_moe: a shared expert with its sigmoid gate, the top-2
// probabilities not renormalised; else renormalised (Qwen3-MoE, Mixtral).
Model make_moe_model(bool shared_expert) {
  Model m = make_model(3, false, RopeLayout::kHalves);
  ModelConfig& c = m.config;
  c.architecture = shared_expert ? "qwen2_moe" : "qwen3_moe";
  c.num_experts = 8;
  c.experts_per_token = 2;
  c.expert_hidden_dim = 96;
  c.shared_expert_hidden_dim = shared_expert ? 128 : 0;
  c.norm_topk_prob = !shared_expert;
  c.layer_sparse = {1, 0, 1};
  uint64_t seed = 7000;
  auto linear = [&](const std::string& name, int out, int in, float gain = 1.0f) {
    return random_tensor(name, out, in, seed++, gain * std::sqrt(3.0f / static_cast<float>(in)), 0.0f);
  };
  for (int l : {0, 2}) {
    LayerTensors& t = m.tensors.layers[static_cast<size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    t[LayerTensor::kGate] = t[LayerTensor::kUp] = t[LayerTensor::kDown] = TensorView{};
    t[LayerTensor::kRouter] = linear(p + "ffn_gate_inp", c.num_experts, c.dim, 4.0f);
    for (int e = 0; e < c.num_experts; ++e) {
      const std::string q = p + "expert." + std::to_string(e) + ".";
      ExpertTensors& x = t.experts.emplace_back();  // no biases
      x[ExpertTensor::kGate] = linear(q + "gate", c.expert_hidden_dim, c.dim);
      x[ExpertTensor::kUp] = linear(q + "up", c.expert_hidden_dim, c.dim);
      x[ExpertTensor::kDown] = linear(q + "down", c.dim, c.expert_hidden_dim);
    }
    if (shared_expert) {
      const int sw = c.shared_expert_hidden_dim;
      t[LayerTensor::kSharedGate] = linear(p + "shexp.gate", sw, c.dim);
      t[LayerTensor::kSharedUp] = linear(p + "shexp.up", sw, c.dim);
      t[LayerTensor::kSharedDown] = linear(p + "shexp.down", c.dim, sw);
      t[LayerTensor::kSharedExpertGate] = random_tensor(p + "shexp.gate_inp", 1, c.dim, seed++, 0.2f, 0.0f);
    }
  }
  return m;
}

// make_moe_model's top-2 MoE with gpt-oss's features: attention sinks, q/k/v and o biases, a window of 8 on
// layers 0 and 2, the top-k-then-softmax router with a router bias, expert biases and the clamped SwiGLU
// (a limit of 1.5, which the O(1) activations here reach). without_sinks: the same model without its sinks
// and o bias (the host test below checks that both matter).
Model make_gpt_oss_model(bool without_sinks = false) {
  Model m = make_moe_model(false);
  ModelConfig& c = m.config;
  c.architecture = "gpt-oss";
  c.qkv_bias = true;
  c.attn_sinks = c.o_bias = !without_sinks;
  c.layer_window = {8, 0, 8};
  c.moe_router = MoeRouter::kTopkSoftmax;
  c.router_bias = c.expert_bias = true;
  c.activation = Activation::kSwigluClamped;
  c.swiglu_limit = 1.5f;
  c.swiglu_alpha = 1.702f;
  uint64_t seed = 9000;
  auto vector = [&](const std::string& name, int n, float scale, float offset) {
    return random_tensor(name, 1, n, seed++, scale, offset);
  };
  for (int l = 0; l < c.num_layers; ++l) {
    LayerTensors& t = m.tensors.layers[static_cast<size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    t[LayerTensor::kBq] = vector(p + "attn_q.bias", c.q_dim(), 0.5f, 0.0f);
    t[LayerTensor::kBk] = vector(p + "attn_k.bias", c.kv_dim(), 0.5f, 0.0f);
    t[LayerTensor::kBv] = vector(p + "attn_v.bias", c.kv_dim(), 0.5f, 0.0f);
    if (!without_sinks) {
      t[LayerTensor::kBo] = vector(p + "attn_output.bias", c.dim, 0.5f, 0.0f);
      t[LayerTensor::kSinks] = vector(p + "attn_sinks", c.num_heads, 2.0f, 1.0f);  // -1 to 3 against O(1) scores
    }
    if (!c.is_sparse(l)) continue;
    t[LayerTensor::kRouterBias] = vector(p + "ffn_gate_inp.bias", c.num_experts, 1.0f, 0.0f);
    for (int e = 0; e < c.num_experts; ++e) {
      ExpertTensors& x = t.experts[static_cast<size_t>(e)];
      const std::string q = p + "expert." + std::to_string(e) + ".";
      x[ExpertTensor::kGateBias] = vector(q + "gate.bias", c.expert_hidden_dim, 0.3f, 0.0f);
      x[ExpertTensor::kUpBias] = vector(q + "up.bias", c.expert_hidden_dim, 0.3f, 0.0f);
      x[ExpertTensor::kDownBias] = vector(q + "down.bias", c.dim, 0.3f, 0.0f);
    }
  }
  return m;
}

// The message of the Error that making a CUDA backend of the model throws ("" if none).
std::string make_error(const Model& model, const CudaBackendOptions& options = small_options(ComputeDType::kBF16)) {
  try {
    make_cuda_backend(model, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("CUDA backend refuses what its kernels lack with a clear message, before touching the device" *
          doctest::test_suite("host")) {
  Model wide = make_family_model(Family::kGemma3);  // checked before the device is opened
  wide.config.head_dim = 192;
  const std::string wide_error = make_error(wide);
  CAPTURE(wide_error);
  CHECK(wide_error.find("'s head_dim 192: the attention kernels take multiples of 16 up to 128, 256 and 512") !=
        std::string::npos);
  Model windows = make_family_model(Family::kMistral);
  windows.config.num_layers = 5;
  windows.config.layer_window = {4, 8, 16, 32, 0};
  CHECK(make_error(windows).find("different sliding windows") != std::string::npos);
  CHECK(make_error(make_gpt_oss_model()).find("does not support") == std::string::npos);  // sinks, biases
  Model many = make_moe_model(false);
  many.config.num_experts = 512;  // Qwen3-Next's
  CHECK(make_error(many).find("does not support") == std::string::npos);
  many.config.num_experts = 600;
  CHECK(make_error(many).find("600 experts") != std::string::npos);
  CudaBackendOptions fp8 = small_options(ComputeDType::kBF16);
  fp8.fp8_weights = true;
  CHECK(make_error(make_moe_model(true), fp8).find("mixture-of-experts") == std::string::npos);  // FP8 experts
  // Hybrid models: Qwen3.5's gated DeltaNet layers, gated and partially rotated attention, and Qwen3-Next's
  // projections grouped by key head (put in Qwen3.5's order at upload) pass the checks; a conv past the
  // kernels' taps is refused by name.
  auto make_hybrid = [] {
    Model hybrid = make_family_model(Family::kQwen3);
    hybrid.config.layer_kinds.assign(static_cast<size_t>(hybrid.config.num_layers), LayerKind::kDeltaNet);
    hybrid.config.layer_kinds.back() = LayerKind::kAttention;
    hybrid.config.deltanet = DeltaNetSizes{2, 4, 16, 16, 4};
    hybrid.config.attn_output_gate = true;
    hybrid.config.rotary_dim = hybrid.config.head_dim / 2;
    return hybrid;
  };
  CHECK(make_error(make_hybrid()).find("does not support") == std::string::npos);
  Model grouped = make_hybrid();
  grouped.config.deltanet.grouped_qkvz = grouped.config.deltanet.grouped_ba = true;
  CHECK(make_error(grouped).find("does not support") == std::string::npos);
  Model long_conv = make_hybrid();
  long_conv.config.deltanet.conv_kernel = 9;
  CHECK(make_error(long_conv).find("a DeltaNet conv of 9 taps") != std::string::npos);
  // LFM2's short convs and Mamba-2 layers pass (up to the kernels' taps, heads a multiple of the groups).
  Model lfm2 = make_family_model(Family::kQwen3);
  lfm2.config.layer_kinds.assign(static_cast<size_t>(lfm2.config.num_layers), LayerKind::kShortConv);
  lfm2.config.layer_kinds.back() = LayerKind::kAttention;
  lfm2.config.short_conv_kernel = 3;
  CHECK(make_error(lfm2).find("does not support") == std::string::npos);
  lfm2.config.short_conv_kernel = 9;
  CHECK(make_error(lfm2).find("a short conv of 9 taps") != std::string::npos);
  Model mamba = make_family_model(Family::kQwen3);
  mamba.config.layer_kinds.assign(static_cast<size_t>(mamba.config.num_layers), LayerKind::kMamba2);
  mamba.config.mamba = Mamba2Sizes{4, 16, 16, 2, 4};
  CHECK(make_error(mamba).find("does not support") == std::string::npos);
  mamba.config.mamba.conv_kernel = 9;
  CHECK(make_error(mamba).find("a Mamba-2 conv of 9 taps") != std::string::npos);
  mamba.config.mamba = Mamba2Sizes{4, 16, 16, 3, 4};
  CHECK(make_error(mamba).find("Mamba-2 sizes (4 heads of 16, state 16, 3 groups") != std::string::npos);
  // Nemotron-H's single-sublayer layers (Mamba-2, MLP alone, attention) with relu^2 MLPs, and Granite's
  // multipliers, pass; a plain FFN of another activation is still an encoder's, relu^2 experts are refused.
  Model nemotron = make_family_model(Family::kQwen3);
  const LayerKind pattern[] = {LayerKind::kMamba2, LayerKind::kMlp, LayerKind::kAttention};
  nemotron.config.layer_kinds.clear();
  for (int l = 0; l < nemotron.config.num_layers; ++l) nemotron.config.layer_kinds.push_back(pattern[l % 3]);
  nemotron.config.mamba = Mamba2Sizes{4, 16, 16, 2, 4};
  nemotron.config.single_sublayer = true;
  nemotron.config.gated_ffn = false;
  nemotron.config.activation = Activation::kRelu2;
  nemotron.config.residual_scale = 0.22f;
  nemotron.config.logit_divisor = 8.0f;
  CHECK(make_error(nemotron).find("does not support") == std::string::npos);
  nemotron.config.o_bias = true;  // the final norm would have to add a mixer's bias
  CHECK(make_error(nemotron).find("o bias on layers without an FFN") != std::string::npos);
  nemotron.config.o_bias = false;
  nemotron.config.activation = Activation::kGeluTanh;
  CHECK(make_error(nemotron).find("does not support encoder models") != std::string::npos);
  Model relu2_experts = make_moe_model(false);
  relu2_experts.config.gated_ffn = false;
  relu2_experts.config.activation = Activation::kRelu2;
  CHECK(make_error(relu2_experts).find("ungated (relu^2) experts") != std::string::npos);
  // Gemma 4: per-layer inputs, layer scalars, the V norm, values that are the keys, shared K/V, double-wide
  // FFNs, proportional RoPE and the MoE block beside the dense MLP pass the checks, and so do global layers of
  // their own head size and K/V heads: the real checkpoints' shape (sliding 256 over 8 K/V heads, global 512
  // over 2) too. A head size the kernels lack is refused by name, with its layer.
  auto make_gemma4 = [] {
    Model gemma4 = make_family_model(Family::kGemma3);
    gemma4.config.architecture = "gemma4";
    gemma4.config.global_head_dim = gemma4.config.head_dim;
    gemma4.config.layer_kv_source.resize(static_cast<size_t>(gemma4.config.num_layers));
    for (int l = 0; l < gemma4.config.num_layers; ++l) gemma4.config.layer_kv_source[static_cast<size_t>(l)] = l;
    gemma4.config.layer_kv_source.back() = 0;
    gemma4.config.per_layer_dim = 8;
    gemma4.config.double_wide_shared = true;
    gemma4.config.global_values_are_keys = gemma4.config.value_norm = gemma4.config.layer_scalar = true;
    gemma4.config.global_rope_fraction = 0.25f;
    gemma4.config.experts_beside_dense = true;
    return gemma4;
  };
  CHECK(make_error(make_gemma4()).find("does not support") == std::string::npos);
  Model gemma4 = make_gemma4();
  REQUIRE(gemma4.config.has_window());  // some layers are global, some sliding
  gemma4.config.global_head_dim = 2 * gemma4.config.head_dim;
  gemma4.config.global_kv_heads = 1;
  CHECK(make_error(gemma4).find("does not support") == std::string::npos);
  Model real_shape = make_gemma4();
  real_shape.config.num_heads = 16;
  real_shape.config.num_kv_heads = 8;
  real_shape.config.head_dim = 256;
  real_shape.config.global_head_dim = 512;
  real_shape.config.global_kv_heads = 2;
  CHECK(make_error(real_shape).find("does not support") == std::string::npos);
  real_shape.config.global_head_dim = 384;
  int global_layer = 0;
  while (!real_shape.config.is_global(global_layer)) ++global_layer;
  CHECK(make_error(real_shape).find("does not support gemma4's layer " + std::to_string(global_layer) +
                                    ": head_dim 384") != std::string::npos);
  real_shape.config.global_head_dim = 512;
  real_shape.config.global_kv_heads = 3;  // 16 q heads over 3
  CHECK(make_error(real_shape).find("16 query heads over 3 kv heads") != std::string::npos);
}

TEST_CASE("CUDA backend accepts every example model's family (checked before the device is opened)" *
          doctest::test_suite("host")) {
  if (cuda_device_count() > 0) {  // a GPU would get the whole model uploaded: gpu_check.sh's benches run them
    MESSAGE("skipped where a GPU is present");
    return;
  }
  // The source tree's path (not __FILE__, which a compiler cache may make relative to the build directory).
  const std::string models = std::string(CBATCH_SOURCE_DIR) + "/examples/models/";
  for (const char* name : {"llama-3.1-8b", "qwen2.5-7b", "qwen3-8b", "gemma-3-4b", "mistral-7b", "phi-3-mini-4k",
                           "qwen3-30b-a3b", "gpt-oss-20b"}) {
    CAPTURE(name);
    const Model model = load_model(ModelSource{"dummy:" + models + name + ".json", "", 0});
    const std::string error = make_error(model);
    CHECK(error != "");  // no device here
    CHECK(error.find("does not support") == std::string::npos);
  }
}

// Each choice of decode attention kernel (CudaKernelOptions::decode), and its name for CAPTURE.
constexpr std::pair<DecodeAttention, const char*> kDecodeChoices[] = {
    {DecodeAttention::kStream, "stream"},
    {DecodeAttention::kTensorCores16, "tensor-cores-16"},
    {DecodeAttention::kCudaCores, "cuda-cores"},
    {DecodeAttention::kPaged, "paged"}};

CudaKernelOptions decode_kernel(DecodeAttention decode) {
  CudaKernelOptions kernels;
  kernels.decode = decode;
  return kernels;
}

CudaKernelOptions prefill_on_cuda_cores() {
  CudaKernelOptions kernels;
  kernels.prefill_tensor_cores = false;
  return kernels;
}

TEST_CASE("CUDA backend runs mixture-of-experts layers as the CPU backend does (fp32; bf16, fp16 loosely)") {
  for (bool shared_expert : {false, true}) {
    const Model model = make_moe_model(shared_expert);
    CAPTURE(model.config.architecture);
    check_scenario(model, ComputeDType::kF32, 1e-4, true);
    // In 16 bits a row whose router gap is near zero may pick another expert than the CPU's fp32 router:
    // loose, but a wrong expert, weight or un-permute everywhere is an error of order 1.
    check_scenario(model, ComputeDType::kBF16, 0.1, true);
    check_scenario(model, ComputeDType::kF16, 0.1, true);
  }
}

// --cuda-kernel moe-gemm=loop: the expert products as one cuBLAS GEMM per expert segment instead of grouped GEMMs.
TEST_CASE("CUDA backend runs mixture-of-experts layers with a GEMM per expert (moe-gemm=loop) as the CPU backend "
          "does") {
  CudaKernelOptions loop;
  loop.grouped_moe_gemm = false;
  for (bool shared_expert : {false, true}) {
    const Model model = make_moe_model(shared_expert);
    CAPTURE(model.config.architecture);
    check_scenario(model, ComputeDType::kF32, 1e-4, true, loop);
    check_scenario(model, ComputeDType::kBF16, 0.1, true, loop);
  }
}

TEST_CASE("CUDA backend runs OLMoE's q/k norms over the whole projections as the CPU backend does") {
  Model model = make_moe_model(false);
  ModelConfig& c = model.config;
  c.architecture = "olmoe";
  c.norm_topk_prob = false;
  c.qk_norm = c.qk_norm_whole = true;
  uint64_t seed = 9500;
  for (int l = 0; l < c.num_layers; ++l) {
    LayerTensors& t = model.tensors.layers[static_cast<size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    t[LayerTensor::kQNorm] = random_tensor(p + "attn_q_norm", 1, c.q_dim(), seed++, 0.5f, 1.0f);  // weights 0.5 .. 1.5
    t[LayerTensor::kKNorm] = random_tensor(p + "attn_k_norm", 1, c.kv_dim(), seed++, 0.5f, 1.0f);
  }
  check_scenario(model, ComputeDType::kF32, 1e-4, true);
  check_scenario(model, ComputeDType::kBF16, 0.1, true);
}

TEST_CASE("CUDA backend runs gpt-oss's sinks, biases, windows and MoE as the CPU backend does (fp32; 16 bits "
          "loosely)") {
  const Model model = make_gpt_oss_model();
  check_scenario(model, ComputeDType::kF32, 1e-4, true);
  check_scenario(model, ComputeDType::kBF16, 0.1, true);
  check_scenario(model, ComputeDType::kF16, 0.1, true);
  // Every attention kernel with the sinks: each decode kernel, and the CUDA-core kernel for the prefill tiles.
  for (const auto& [decode, name] : kDecodeChoices) {
    CAPTURE(name);
    check_scenario(model, ComputeDType::kBF16, 0.1, true, decode_kernel(decode));
  }
  check_scenario(model, ComputeDType::kBF16, 0.1, true, prefill_on_cuda_cores());
}

// make_gpt_oss_model with its experts stored as MXFP4 blocks (scales 2^-6 .. 2^-4: weights of the size the
// random ones have), as a gpt-oss GGUF holds them; the blocks live in the model's storage.
Model make_gpt_oss_mxfp4_model() {
  Model m = make_gpt_oss_model();
  const ModelConfig& c = m.config;
  auto blocks = std::make_shared<std::vector<std::vector<uint8_t>>>();
  uint32_t seed = 9700;
  auto mxfp4 = [&](const TensorView& like) {
    blocks->push_back(make_quant_experts(QuantFormat::kMxfp4, 1, static_cast<int>(like.rows),
                                         static_cast<int>(like.cols), seed++, 121, 2).bytes);
    TensorView t;
    t.name = like.name;
    t.dtype = DType::kMXFP4;
    t.rows = like.rows;
    t.cols = like.cols;
    t.data = blocks->back().data();
    return t;
  };
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.is_sparse(l)) continue;
    for (ExpertTensors& e : m.tensors.layers[static_cast<size_t>(l)].experts) {
      for (ExpertTensor kind : {ExpertTensor::kGate, ExpertTensor::kUp, ExpertTensor::kDown}) e[kind] = mxfp4(e[kind]);
    }
  }
  m.storage = std::make_shared<std::pair<std::shared_ptr<const void>, decltype(blocks)>>(m.storage, blocks);
  return m;
}

// Runs scenario()'s steps on a CUDA backend (dtype) and a CPU backend of the same model, and hands each
// step's two outputs to check.
void for_each_step_with_cpu(const Model& model, ComputeDType dtype,
                            const std::function<void(const StepIo& gpu, const StepIo& cpu)>& check,
                            const CudaKernelOptions& kernels = {}) {
  std::unique_ptr<Backend> backend = make_cuda_backend(model, small_options(dtype, kernels));
  backend->allocate_kv_cache(KvCacheSpec{kNumBlocks * kMaxKvGroups, kBlockSize});
  CpuBackendOptions options;
  options.num_threads = 2;
  options.max_batch_tokens = 64;
  std::unique_ptr<Backend> cpu_backend = make_cpu_backend(model, options);
  cpu_backend->allocate_kv_cache(KvCacheSpec{kNumBlocks * kMaxKvGroups, kBlockSize});
  for (const RaggedBatch& batch : scenario(model.config)) {
    StepIo gpu_out, cpu_out;
    backend->forward(batch, gpu_out, gpu_out);
    cpu_backend->forward(batch, cpu_out, cpu_out);
    check(gpu_out, cpu_out);
  }
}

// The MXFP4 experts stay MXFP4 on the device (moe_quant_gemm, no host wait) and, with moe-experts=dequant
// (CudaKernelOptions::quantized_experts false), are decoded to T for cuBLAS; both against the CPU backend on
// the same blocks, loosely in 16 bits
// as the gpt-oss test above (a near-tie in the router may flip), and experts_touched as the CPU counts it.
TEST_CASE("CUDA backend runs gpt-oss's MXFP4 experts in MXFP4 (and decoded, moe-experts=dequant) as the CPU "
          "backend does") {
  const Model model = make_gpt_oss_mxfp4_model();
  for (const bool quantized : {true, false}) {
    CAPTURE(quantized);
    CudaKernelOptions kernels;
    kernels.quantized_experts = quantized;
    check_scenario(model, ComputeDType::kBF16, 0.1, true, kernels);
    check_scenario(model, ComputeDType::kF16, 0.1, true, kernels);
    const auto same_touched = [](const StepIo& gpu_out, const StepIo& cpu_out) {
      CHECK(gpu_out.experts_touched == cpu_out.experts_touched);
    };
    for_each_step_with_cpu(model, ComputeDType::kBF16, same_touched, kernels);
  }
}

// --dummy-dtype mxfp4 on a tiny gpt-oss-like dummy config: the experts' blocks generated on the device are the
// CPU's (random_weights.hpp), kept MXFP4 (moe_quant_gemm) or, with moe-experts=dequant or in fp32,
// decoded to T; logits against the CPU backend as the MXFP4 case above (fp32 tightly: the same values), and
// the cost model's expert bytes per weight as kept (17/32 in MXFP4, 2 in bf16, 4 in fp32).
TEST_CASE("CUDA backend runs a dummy model's MXFP4 experts (--dummy-dtype mxfp4) as the CPU backend does") {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("cbatch_dummy_mxfp4_" + std::to_string(::getpid()) + ".json")).string();
  {
    std::ofstream config(path);
    config << R"({"model_type": "gpt_oss", "hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4,
      "num_key_value_heads": 2, "head_dim": 16, "num_local_experts": 8, "num_experts_per_tok": 2,
      "experts_per_token": 2, "sliding_window": 8, "num_hidden_layers": 3, "swiglu_limit": 7.0,
      "layer_types": ["sliding_attention", "full_attention", "sliding_attention"], "attention_bias": true,
      "vocab_size": 320, "max_position_embeddings": 1024, "bos_token_id": 1, "eos_token_id": 2})";
  }
  ModelSource source{"dummy:" + path, "", 4};
  source.dummy_dtype = DType::kMXFP4;
  const Model model = load_model(source);
  std::filesystem::remove(path);
  check_scenario(model, ComputeDType::kF32, 1e-4, true);
  CHECK(make_cuda_backend(model, small_options(ComputeDType::kF32))->traits().expert_bytes_per_param == 4.0);
  for (const bool quantized : {true, false}) {
    CAPTURE(quantized);
    CudaKernelOptions kernels;
    kernels.quantized_experts = quantized;
    check_scenario(model, ComputeDType::kBF16, 0.1, true, kernels);
    check_scenario(model, ComputeDType::kF16, 0.1, true, kernels);
    const double bytes =
        make_cuda_backend(model, small_options(ComputeDType::kBF16, kernels))->traits().expert_bytes_per_param;
    CHECK(bytes == (quantized ? 17.0 / 32.0 : 2.0));
  }
}

// --quantization fp8 on the gpt-oss test model: the dense linears and every expert in FP8 (the experts with a
// scale per row, no host wait), against the same model in bf16. The bound is test_fp8_backend.cpp's for a
// small model (E4M3's 2^-4 relative rounding of weights and activations, several times over: 0.15).
TEST_CASE("CUDA backend with --quantization fp8 runs gpt-oss's experts in FP8 close to bf16") {
  const Model model = make_gpt_oss_model();
  CudaBackendOptions fp8 = small_options(ComputeDType::kBF16);
  fp8.fp8_weights = true;
  std::unique_ptr<Backend> quantized = make_cuda_backend(model, fp8);
  std::unique_ptr<Backend> bf16 = make_cuda_backend(model, small_options(ComputeDType::kBF16));
  quantized->allocate_kv_cache(KvCacheSpec{kNumBlocks * kMaxKvGroups, kBlockSize});
  bf16->allocate_kv_cache(KvCacheSpec{kNumBlocks * kMaxKvGroups, kBlockSize});
  for (const RaggedBatch& batch : scenario(model.config)) {
    StepIo a, b;
    a.want_logits = b.want_logits = true;
    quantized->forward(batch, a, a);
    bf16->forward(batch, b, b);
    const double err = rel_error(a.logits, std::vector<double>(b.logits.begin(), b.logits.end()));
    MESSAGE("fp8 against bf16: logits relative error " << err);
    CHECK(err < 0.15);
    CHECK(a.experts_touched >= 2 * model.config.experts_per_token);  // counted after the step, not at a wait
    CHECK(a.experts_touched <= 2 * model.config.num_experts);
  }
}

TEST_CASE("the gpt-oss test model's sinks and o bias change its logits (its CUDA test checks them)" *
          doctest::test_suite("host")) {
  StepReference with(make_gpt_oss_model(), true), without(make_gpt_oss_model(true), true);
  double worst = 1e30;
  for (const RaggedBatch& batch : scenario(make_gpt_oss_model().config)) {
    const std::vector<double> a = with.forward(batch), b = without.forward(batch);
    worst = std::min(worst, rel_error(std::vector<float>(a.begin(), a.end()), b));
  }
  CHECK(worst > 0.1);
}

TEST_CASE("CUDA backend fills experts_touched: the distinct experts a step's rows picked, per sparse layer") {
  const Model model = make_moe_model(false);
  for_each_step_with_cpu(model, ComputeDType::kF32, [](const StepIo& gpu_out, const StepIo& cpu_out) {
    CHECK(gpu_out.experts_touched == cpu_out.experts_touched);
    CHECK(gpu_out.experts_touched >= 2 * 2);  // two sparse layers, at least top_k each
    CHECK(gpu_out.experts_touched <= 2 * 8);
  });
}

TEST_CASE("CUDA backend bf16 and fp16 with the CUDA-core prefill attention (prefill=off)") {
  const Model model = make_model(3, false, RopeLayout::kHalves);
  check_scenario(model, ComputeDType::kBF16, 3e-2, false, prefill_on_cuda_cores());
  check_scenario(model, ComputeDType::kF16, 5e-3, false, prefill_on_cuda_cores());
}

TEST_CASE("CUDA backend bf16 and fp16 with each decode attention kernel") {
  const Model model = make_model(3, false, RopeLayout::kHalves);
  for (const auto& [decode, name] : kDecodeChoices) {
    CAPTURE(name);
    check_scenario(model, ComputeDType::kBF16, 3e-2, false, decode_kernel(decode));
    check_scenario(model, ComputeDType::kF16, 5e-3, false, decode_kernel(decode));
  }
}

TEST_CASE("CUDA backend runs the families through every attention kernel (bf16, fp16)") {
  for (const auto& [decode, name] : kDecodeChoices) {
    CAPTURE(name);
    for (const Family family : {Family::kGemma2, Family::kGemma3, Family::kMistral}) {
      CAPTURE(family_name(family));
      check_scenario(make_family_model(family), ComputeDType::kBF16, 3e-2, true, decode_kernel(decode));
      check_scenario(make_family_model(family), ComputeDType::kF16, 5e-3, true, decode_kernel(decode));
    }
  }
  for (const Family family : {Family::kGemma2, Family::kGemma3, Family::kMistral}) {  // CUDA-core prefill tiles
    CAPTURE(family_name(family));
    check_scenario(make_family_model(family), ComputeDType::kBF16, 3e-2, true, prefill_on_cuda_cores());
  }
}

TEST_CASE("CUDA backend with device sampling draws each row's token from the logits it computes") {
  const Model model = make_model(3, false, RopeLayout::kHalves);
  const int vocab = model.config.vocab_size;
  std::unique_ptr<Backend> backend = make_cuda_backend(model, small_options(ComputeDType::kBF16));
  CudaKernelOptions host;
  host.device_sampling = false;
  std::unique_ptr<Backend> host_sampling = make_cuda_backend(model, small_options(ComputeDType::kBF16, host));
  CHECK(backend->traits().samples_on_device);
  CHECK(!host_sampling->traits().samples_on_device);
  backend->allocate_kv_cache(KvCacheSpec{kNumBlocks * kMaxKvGroups, kBlockSize});
  host_sampling->allocate_kv_cache(KvCacheSpec{kNumBlocks * kMaxKvGroups, kBlockSize});
  for (const RaggedBatch& batch : scenario(model.config)) {
    StepIo out;
    out.want_logits = true;
    backend->forward(batch, out, out);
    StepIo drawn;
    drawn.want_logits = false;
    for (int i = 0; i < batch.num_logits(); ++i) {  // greedy, penalized, top-p and top-k rows
      RowSampling row;
      row.temperature = i % 4 == 0 ? 0.0f : 0.7f + 0.2f * static_cast<float>(i);
      row.top_p = i % 4 == 2 ? 0.8f : 1.0f;
      row.top_k = i % 4 == 3 ? 40 : -1;
      row.uniform = 0.13 + 0.21 * i;
      if (i % 2 == 1) {  // penalize the row's current top tokens, so the penalties change the draw
        row.repetition_penalty = 1.5f;
        row.frequency_penalty = 2.0f;
        row.presence_penalty = 1.0f;
        row.penalty_begin = static_cast<int32_t>(drawn.penalty_tokens.size());
        const float* logits = out.logits.data() + static_cast<size_t>(i) * vocab;
        const int32_t top = static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
        drawn.penalty_tokens.push_back({top, 3});
        drawn.penalty_tokens.push_back({(top + 1) % vocab, 0});
        row.penalty_end = static_cast<int32_t>(drawn.penalty_tokens.size());
      }
      drawn.sampling.push_back(row);
    }
    backend->forward(batch, drawn, drawn);  // the same k and v rewritten: the same logits
    REQUIRE(drawn.token_ids.size() == static_cast<size_t>(batch.num_logits()));
    for (int i = 0; i < batch.num_logits(); ++i) {
      std::vector<float> row(out.logits.begin() + static_cast<long>(i) * vocab,
                             out.logits.begin() + static_cast<long>(i + 1) * vocab);
      const RowSampling& sampling = drawn.sampling[static_cast<size_t>(i)];
      apply_penalty_tokens(row.data(), vocab, sampling, drawn.penalty_tokens.data());
      radix_sampling::HostRowOps ops(row.data(), vocab);
      CAPTURE(i);
      CHECK(drawn.token_ids[i] == radix_sampling::sample_row(ops, sampling, vocab));
    }
    StepIo bad = drawn;  // a row whose penalty range runs past the list
    bad.sampling.back().penalty_end = static_cast<int32_t>(bad.penalty_tokens.size()) + 1;
    CHECK_THROWS_AS(backend->forward(batch, bad, bad), Error);
    StepIo bad_mask = drawn;  // a row whose mask words are not in the step's list
    bad_mask.sampling.back().mask_offset = 0;
    CHECK_THROWS_AS(backend->forward(batch, bad_mask, bad_mask), Error);
    CHECK_THROWS_AS(host_sampling->forward(batch, drawn, drawn), Error);  // asked for draws it does not make
  }
}

TEST_CASE("CUDA backend reports its KV block size and rejects bad batches") {
  const Model model = make_model(2, false, RopeLayout::kHalves);
  std::unique_ptr<Backend> backend = make_cuda_backend(model, small_options(ComputeDType::kBF16));
  CHECK(backend->kv_block_bytes(16) == int64_t{2} * 2 * 16 * model.config.kv_dim() * 2);
  const std::vector<RaggedBatch> steps = scenario(model.config);
  StepIo out;
  CHECK_THROWS_AS(backend->forward(steps[0], out, out), Error);  // no KV cache yet
  backend->allocate_kv_cache(KvCacheSpec{kNumBlocks * kMaxKvGroups, kBlockSize});

  RaggedBatch bad_token = steps[0];
  bad_token.token_ids[3] = model.config.vocab_size;
  CHECK_THROWS_AS(backend->forward(bad_token, out, out), Error);

  RaggedBatch bad_slot = steps[0];
  bad_slot.slot_mapping[0] = kNumBlocks * kBlockSize;
  CHECK_THROWS_AS(backend->forward(bad_slot, out, out), Error);

  RaggedBatch too_long = steps[0];
  for (int i = 0; i < 64; ++i) {  // past max_batch_tokens = 64
    too_long.token_ids.push_back(1);
    too_long.positions.push_back(0);
    too_long.slot_mapping.push_back(-1);
  }
  too_long.query_start.back() = too_long.num_tokens();
  CHECK_THROWS_AS(backend->forward(too_long, out, out), Error);

  backend->forward(steps[0], out, out);  // still usable after the rejected batches
  CHECK(out.logits.size() == static_cast<size_t>(steps[0].num_logits()) * model.config.vocab_size);
}

TEST_CASE("CUDA backend says so when the KV cache or the model does not fit") {
  const Model model = make_model(2, false, RopeLayout::kHalves);
  CudaBackendOptions huge_context = small_options(ComputeDType::kBF16);
  huge_context.max_context = 1 << 30;  // one sequence would need terabytes of KV cache
  CHECK_THROWS_AS(make_cuda_backend(model, huge_context)->max_kv_blocks(kBlockSize), Error);

  CudaBackendOptions tiny_share = small_options(ComputeDType::kBF16);
  tiny_share.gpu_memory_utilization = 0.001f;  // less than the CUDA context itself takes
  CHECK_THROWS_AS(make_cuda_backend(model, tiny_share)->max_kv_blocks(kBlockSize), Error);

  Model giant = make_model(0, true, RopeLayout::kHalves);
  giant.config.vocab_size = 1 << 22;
  giant.config.dim = 1 << 16;
  giant.config.num_heads = 512;
  giant.config.num_kv_heads = 512;
  giant.config.head_dim = 128;
  giant.tensors[ModelTensor::kEmbedding] = random_tensor("token_embd", giant.config.vocab_size, giant.config.dim, 1, 1.0f, 0.0f);
  giant.tensors[ModelTensor::kLmHead] = giant.tensors[ModelTensor::kEmbedding];
  giant.tensors[ModelTensor::kFinalNorm] = random_tensor("output_norm", 1, giant.config.dim, 2, 0.1f, 1.0f);
  CHECK_THROWS_AS(make_cuda_backend(giant, small_options(ComputeDType::kBF16)), Error);  // 512 GiB of embedding
}

// --kv-cache-dtype fp8 (compute capability 8.9 and up): a block takes half the bytes of bf16's, and every
// step's logits stay near those of the same backend with a bf16 cache, with each decode kernel that has an
// FP8 build and with the CUDA-core prefill attention. The bound is loose, from the math: E4M3 rounds each k
// and v by up to 2^-4 relative (about 2.5% rms), which the attention averages and the residual stream
// dilutes; the statistics are printed. fp32 is refused by name.
TEST_CASE("CUDA backend with an FP8 KV cache: half the bytes a block, logits near the bf16 cache's") {
  if (cuda_compute_capability(0) < 89) {
    MESSAGE("skipped: --kv-cache-dtype fp8 needs compute capability 8.9 (this GPU: " << cuda_device_description(0)
                                                                                     << ")");
    return;
  }
  const Model model = make_model(3, false, RopeLayout::kHalves);
  CudaBackendOptions fp8 = small_options(ComputeDType::kBF16);
  fp8.fp8_kv_cache = true;
  const std::pair<CudaKernelOptions, const char*> choices[] = {
      {decode_kernel(DecodeAttention::kStream), "decode=stream"},
      {decode_kernel(DecodeAttention::kTensorCores16), "decode=tensor-cores-16"},
      {decode_kernel(DecodeAttention::kCudaCores), "decode=cuda-cores"},
      {prefill_on_cuda_cores(), "prefill=off"}};
  for (const auto& [kernels, name] : choices) {
    CAPTURE(name);
    fp8.kernels = kernels;
    std::unique_ptr<Backend> bf16 = make_cuda_backend(model, small_options(ComputeDType::kBF16, kernels));
    std::unique_ptr<Backend> fp8_backend = make_cuda_backend(model, fp8);
    CHECK(2 * fp8_backend->kv_block_bytes(kBlockSize) == bf16->kv_block_bytes(kBlockSize));
    CHECK(fp8_backend->traits().kv_bytes_per_elem == 1.0);
    bf16->allocate_kv_cache(KvCacheSpec{kNumBlocks * kMaxKvGroups, kBlockSize});
    fp8_backend->allocate_kv_cache(KvCacheSpec{kNumBlocks * kMaxKvGroups, kBlockSize});
    const int vocab = model.config.vocab_size;
    for (const RaggedBatch& batch : scenario(model.config)) {
      StepIo want, got;
      want.want_logits = got.want_logits = true;
      bf16->forward(batch, want, want);
      fp8_backend->forward(batch, got, got);
      const std::vector<double> ref(want.logits.begin(), want.logits.end());
      double max_diff = 0.0;
      int same_argmax = 0;
      for (size_t i = 0; i < got.logits.size(); ++i) max_diff = std::max(max_diff, std::abs(got.logits[i] - ref[i]));
      for (int r = 0; r < batch.num_logits(); ++r) {
        same_argmax += argmax_ref(got.logits.data() + static_cast<size_t>(r) * vocab, vocab) ==
                       argmax_ref(want.logits.data() + static_cast<size_t>(r) * vocab, vocab);
      }
      const double err = rel_error(got.logits, ref);
      MESSAGE("fp8 vs bf16 cache: logits relative error " << err << ", max |diff| " << max_diff << ", argmax "
                                                          << same_argmax << "/" << batch.num_logits());
      CHECK(err < 0.1);
    }
  }
  fp8.kernels = {};
  fp8.dtype = ComputeDType::kF32;
  CHECK(make_error(model, fp8).find("--kv-cache-dtype fp8 needs --dtype bf16 or fp16") != std::string::npos);
}

}  // namespace cbatch::test
