// Mixtures of experts on the CPU: the routing rules (softmax then top-k, renormalised or not, ties to the
// lower expert id; gpt-oss's top-k of the logits then a softmax over those k), the clamped SwiGLU,
// grouping by expert (a batch gives each row the bits that row alone gets, and the float64 sum of its
// experts), the families' MoE fields from config.json, and bad files refused with a message
// naming the key or tensor (hand-built GGUFs whose expert tensors are missing or misshapen).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/base/thread_pool.hpp"
#include "engine/cpu/cpu_moe.hpp"
#include "engine/cpu/cpu_ops.hpp"
#include "engine/model/model.hpp"
#include "engine/model/quant_blocks.hpp"
#include "test_blocks.hpp"
#include "test_files.hpp"

namespace cbatch {
namespace {

using test::error_of;
using test::TempFile;

PackedMatrix pack(const std::vector<float>& w, int64_t n, int64_t k, ThreadPool& pool) {
  return PackedMatrix(n, k, [&](int64_t row, int64_t count, float* out) {
    std::memcpy(out, &w[static_cast<size_t>(row * k)], static_cast<size_t>(count * k) * sizeof(float));
  }, pool);
}

std::vector<float> random_floats(std::mt19937& rng, size_t n, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Random experts of width `width` (and a shared one of width shared_width when > 0), kept as fp32 too.
struct MoeCase {
  int dim = 16, width = 24, shared_width = 0;
  MoeRouting routing{6, 2, true};
  std::vector<float> router;                         // (E, dim)
  std::vector<std::vector<float>> gate_up, down;     // (E) of (2 * width, dim), (dim, width)
  std::vector<float> shared_gate_up, shared_down, shared_gate;
  CpuLayer weights;

  MoeCase(int shared, ThreadPool& pool, uint32_t seed) : shared_width(shared) {
    std::mt19937 rng(seed);
    const int e = routing.num_experts;
    router = random_floats(rng, static_cast<size_t>(e * dim), 1.0f);
    weights.matrices[LayerTensor::kRouter] = pack(router, e, dim, pool);
    for (int i = 0; i < e; ++i) {
      gate_up.push_back(random_floats(rng, static_cast<size_t>(2 * width * dim), 0.4f));
      down.push_back(random_floats(rng, static_cast<size_t>(dim * width), 0.3f));
      CpuExpert& expert = weights.experts.emplace_back();
      expert.matrices[ExpertProduct::kGateUp] = pack(gate_up.back(), 2 * width, dim, pool);
      expert.matrices[ExpertTensor::kDown] = pack(down.back(), dim, width, pool);
    }
    if (shared > 0) {
      shared_gate_up = random_floats(rng, static_cast<size_t>(2 * shared * dim), 0.4f);
      shared_down = random_floats(rng, static_cast<size_t>(dim * shared), 0.3f);
      shared_gate = random_floats(rng, static_cast<size_t>(dim), 0.5f);
      weights.matrices[LayerProduct::kSharedGateUp] = pack(shared_gate_up, 2 * shared, dim, pool);
      weights.matrices[LayerTensor::kSharedDown] = pack(shared_down, dim, shared, pool);
      weights.vectors[LayerTensor::kSharedExpertGate] = shared_gate;
    }
  }

  // One SwiGLU FFN in float64.
  static std::vector<double> ffn64(const float* x, const std::vector<float>& gu, const std::vector<float>& dn, int dim,
                                   int width) {
    std::vector<double> hidden(static_cast<size_t>(width)), out(static_cast<size_t>(dim), 0.0);
    for (int j = 0; j < width; ++j) {
      double g = 0, u = 0;
      for (int i = 0; i < dim; ++i) g += double(gu[j * dim + i]) * x[i], u += double(gu[(width + j) * dim + i]) * x[i];
      hidden[j] = g / (1.0 + std::exp(-g)) * u;
    }
    for (int i = 0; i < dim; ++i) {
      for (int j = 0; j < width; ++j) out[i] += double(dn[i * width + j]) * hidden[j];
    }
    return out;
  }

  // The layer's output for one row in float64: softmax over all experts, top-k, optional renormalising.
  std::vector<double> reference(const float* x) const {
    const int e = routing.num_experts;
    std::vector<double> logits(static_cast<size_t>(e)), probs(static_cast<size_t>(e));
    double sum = 0;
    for (int j = 0; j < e; ++j) {
      for (int i = 0; i < dim; ++i) logits[j] += double(router[j * dim + i]) * x[i];
    }
    for (int j = 0; j < e; ++j) sum += probs[j] = std::exp(logits[j]);
    std::vector<int> order(static_cast<size_t>(e));
    for (int j = 0; j < e; ++j) order[j] = j;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
    double picked = 0;
    for (int k = 0; k < routing.top_k; ++k) picked += probs[order[k]] / sum;
    std::vector<double> out(static_cast<size_t>(dim), 0.0);
    for (int k = 0; k < routing.top_k; ++k) {
      const double w = probs[order[k]] / sum / (routing.renormalize ? picked : 1.0);
      const std::vector<double> y = ffn64(x, gate_up[order[k]], down[order[k]], dim, width);
      for (int i = 0; i < dim; ++i) out[i] += w * y[i];
    }
    if (shared_width > 0) {
      double g = 0;
      for (int i = 0; i < dim; ++i) g += double(shared_gate[i]) * x[i];
      const std::vector<double> y = ffn64(x, shared_gate_up, shared_down, dim, shared_width);
      for (int i = 0; i < dim; ++i) out[i] += y[i] / (1.0 + std::exp(-g));
    }
    return out;
  }
};

}  // namespace

TEST_CASE("moe: routing is softmax then top-k, renormalised when asked, a tie going to the lower expert id") {
  const float logits[5] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l));
  int32_t experts[3];
  float weights[3];
  route_row(logits, MoeRouting{5, 3, false}, experts, weights);
  CHECK(experts[0] == 1);  // ties with expert 3: the lower id first
  CHECK(experts[1] == 3);
  CHECK(experts[2] == 4);
  CHECK(weights[0] == doctest::Approx(std::exp(2.0) / sum));
  CHECK(weights[2] == doctest::Approx(std::exp(1.0) / sum));
  route_row(logits, MoeRouting{5, 3, true}, experts, weights);
  const double picked = 2 * std::exp(2.0) + std::exp(1.0);
  CHECK(weights[0] == doctest::Approx(std::exp(2.0) / picked));
  CHECK(weights[1] == doctest::Approx(std::exp(2.0) / picked));
  CHECK(weights[2] == doctest::Approx(std::exp(1.0) / picked));
  CHECK(weights[0] + weights[1] + weights[2] == doctest::Approx(1.0));
  const float flat[4] = {0.25f, 0.25f, 0.25f, 0.25f};  // all tied: experts 0 and 1
  route_row(flat, MoeRouting{4, 2, false}, experts, weights);
  CHECK(experts[0] == 0);
  CHECK(experts[1] == 1);
  CHECK(weights[1] == doctest::Approx(0.25));
}

TEST_CASE("moe: gpt-oss routing takes the top k logits, then a softmax over those k only") {
  const float logits[5] = {0.5f, 2.0f, -1.0f, 3.0f, 1.0f};
  int32_t experts[2];
  float weights[2];
  for (bool renormalize : {false, true}) {  // renormalising a softmax over k changes nothing
    route_row(logits, MoeRouting{5, 2, renormalize, MoeRouter::kTopkSoftmax}, experts, weights);
    CHECK(experts[0] == 3);
    CHECK(experts[1] == 1);
    const double picked = std::exp(3.0) + std::exp(2.0);  // experts 0, 2 and 4 are not in the denominator
    CHECK(weights[0] == doctest::Approx(std::exp(3.0) / picked));
    CHECK(weights[1] == doctest::Approx(std::exp(2.0) / picked));
  }
  route_row(logits, MoeRouting{5, 2, false}, experts, weights);  // the other rule on the same logits
  CHECK(weights[0] + weights[1] < 0.9f);
}

TEST_CASE("moe: the clamped SwiGLU clamps gate above, up on both sides, and adds 1 to up") {
  const float limit = 7.0f, alpha = 1.702f;
  const std::vector<float> gate = {-9.0f, -1.0f, 0.0f, 0.5f, 6.9f, 7.5f, 30.0f, 2.0f};
  const std::vector<float> up = {0.3f, 9.0f, 1.0f, -9.0f, -2.0f, 0.0f, 7.0f, -7.5f};
  std::vector<float> gate_up(gate);
  gate_up.insert(gate_up.end(), up.begin(), up.end());
  std::vector<float> out(gate.size());
  const GluParams glu{Activation::kSwigluClamped, limit, alpha};
  gated_ffn_row(gate_up.data(), out.data(), static_cast<int>(gate.size()), glu);
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = std::min<double>(gate[i], limit), u = std::clamp<double>(up[i], -limit, limit);
    const double want = (u + 1.0) * g / (1.0 + std::exp(-alpha * g));
    CHECK(out[i] == doctest::Approx(want).epsilon(1e-6));
  }
  CHECK(out[5] == out[6] * 1.0f / 8.0f);  // gate 7.5 and 30 both clamp to 7; up 0 and 7 give factors 1 and 8
}

TEST_CASE("moe: picks grouped by expert in row order; an expert nobody picked has none") {
  const int32_t experts[] = {2, 0, 0, 3, 2, 3};  // rows 0..2, top-2
  const ExpertGroups g = group_by_expert(experts, 3, MoeRouting{5, 2, false});
  CHECK(g.offsets == std::vector<int32_t>{0, 2, 2, 4, 6, 6});
  CHECK(g.entries == std::vector<int32_t>{1, 2, 0, 4, 3, 5});
}

TEST_CASE("moe: a batch grouped by expert gives every row the bits of that row alone, and the float64 value") {
  ThreadPool pool(2);
  for (int shared : {0, 20}) {
    for (bool renormalize : {false, true}) {
      MoeCase m(shared, pool, 17 + shared + renormalize);
      m.routing.renormalize = renormalize;
      const int rows = 23;
      std::mt19937 rng(5);
      const std::vector<float> h = random_floats(rng, static_cast<size_t>(rows * m.dim), 1.0f);
      std::vector<float> batch(h.size()), alone(static_cast<size_t>(m.dim));
      MoeScratch scratch;
      const int touched = moe_ffn(h.data(), rows, m.dim, m.weights, m.routing, Activation::kSilu, pool, scratch,
                                  batch.data());
      std::vector<int> used(static_cast<size_t>(m.routing.num_experts), 0);
      for (int r = 0; r < rows; ++r) {
        CHECK(moe_ffn(&h[r * m.dim], 1, m.dim, m.weights, m.routing, Activation::kSilu, pool, scratch, alone.data()) ==
              m.routing.top_k);
        CHECK(std::memcmp(alone.data(), &batch[r * m.dim], m.dim * sizeof(float)) == 0);
        const std::vector<double> want = m.reference(&h[r * m.dim]);
        for (int i = 0; i < m.dim; ++i) CHECK(batch[r * m.dim + i] == doctest::Approx(want[i]).epsilon(1e-4));
        for (int k = 0; k < m.routing.top_k; ++k) used[scratch.experts[k]] = 1;
      }
      int num_used = 0;
      for (int u : used) num_used += u;
      CHECK(num_used >= 4);  // the rows really spread over the experts
      CHECK(touched == num_used);  // the distinct experts the batch's rows picked
    }
  }
}

namespace {

// Random experts stored in `dtype` blocks, packed three ways: int8 panels (--cpu-precision fast), blocked
// panels (exact), and fp32 panels of the blocks' values. Q8_0 quantizes random floats; another type's
// blocks are random bytes with sane scales (test_blocks.hpp), Q4_K's at 256 values a row (its block).
struct QuantizedExperts {
  MoeRouting routing{6, 2, true};
  DType dtype;
  int dim, width;
  CpuLayer int8, blocked, f32;

  QuantizedExperts(ThreadPool& pool, uint32_t seed, DType type = DType::kQ8_0)
      : dtype(type), dim(static_cast<int>(dtype_block_elems(type)) * 2), width(dim) {
    std::mt19937 rng(seed);
    const int e = routing.num_experts;
    const std::vector<float> router = random_floats(rng, static_cast<size_t>(e * dim), 1.0f);
    for (CpuLayer* w : {&int8, &blocked, &f32}) w->matrices[LayerTensor::kRouter] = pack(router, e, dim, pool);
    for (int i = 0; i < e; ++i) {
      add(rng, 2 * width, dim, 0.4f, pool, true);
      add(rng, dim, width, 0.3f, pool, false);
    }
  }

  // One expert matrix (n, k) in dtype blocks: each form's next expert's gate|up, or its down.
  void add(std::mt19937& rng, int64_t n, int64_t k, float scale, ThreadPool& pool, bool gate_up) {
    const int64_t stride = row_bytes(dtype, k);
    std::vector<uint8_t> blocks = testing::random_blocks(dtype, n, k, static_cast<unsigned>(rng()));
    std::vector<float> values(static_cast<size_t>(n * k));
    for (int64_t r = 0; r < n; ++r) {
      uint8_t* row = &blocks[static_cast<size_t>(r * stride)];
      if (dtype == DType::kQ8_0) quantize_q8_0(random_floats(rng, static_cast<size_t>(k), scale).data(), k, row);
      dequantize_blocks(dtype, row, k / dtype_block_elems(dtype), &values[static_cast<size_t>(r * k)]);
    }
    auto rows = [&](int64_t r) { return &blocks[static_cast<size_t>(r * stride)]; };
    for (CpuLayer* w : {&int8, &blocked, &f32}) {
      if (gate_up) w->experts.emplace_back();
    }
    const ExpertTensor kind = gate_up ? ExpertProduct::kGateUp : ExpertTensor::kDown;
    int8.experts.back().matrices[kind] = PackedMatrix(n, k, dtype, rows, pool, true);
    blocked.experts.back().matrices[kind] = PackedMatrix(n, k, dtype, rows, pool, false);
    f32.experts.back().matrices[kind] = pack(values, n, k, pool);
  }
};

}  // namespace

TEST_CASE("moe: quantized experts (Q8_0; Q4_K, whose activations go in 256-blocks), an expert's rows split "
          "across threads, give every row the bits of that row alone") {
  ThreadPool pool(2);
  for (DType dtype : {DType::kQ8_0, DType::kQ4_K}) {
    CAPTURE(dtype_name(dtype));
    QuantizedExperts q(pool, 29, dtype);
    const int rows = 64, dim = q.dim;  // 128 picks over 6 experts: more than one unit each
    std::mt19937 rng(7);
    const std::vector<float> h = random_floats(rng, static_cast<size_t>(rows * dim), 1.0f);
    std::vector<float> exact(h.size()), f32(h.size());
    MoeScratch scratch;
    moe_ffn(h.data(), rows, dim, q.blocked, q.routing, Activation::kSilu, pool, scratch, exact.data());
    moe_ffn(h.data(), rows, dim, q.f32, q.routing, Activation::kSilu, pool, scratch, f32.data());
    CHECK(std::memcmp(exact.data(), f32.data(), exact.size() * sizeof(float)) == 0);  // the blocks' fp32 values
    double err = 0, norm = 0;
    for (const CpuLayer* w : {&q.int8, &q.blocked}) {
      std::vector<float> batch(h.size()), alone(static_cast<size_t>(dim));
      CHECK(moe_ffn(h.data(), rows, dim, *w, q.routing, Activation::kSilu, pool, scratch, batch.data()) == 6);
      for (int r = 0; r < rows; ++r) {
        moe_ffn(&h[r * dim], 1, dim, *w, q.routing, Activation::kSilu, pool, scratch, alone.data());
        CHECK(std::memcmp(alone.data(), &batch[r * dim], dim * sizeof(float)) == 0);
      }
      for (size_t i = 0; i < h.size(); ++i) {
        err += (batch[i] - exact[i]) * (batch[i] - exact[i]);
        norm += static_cast<double>(exact[i]) * exact[i];
      }
    }
    MESSAGE(dtype_name(dtype) << ": int8 experts vs exact, normwise relative error " << std::sqrt(err / norm));
    CHECK(norm > 0);
    CHECK(std::sqrt(err / norm) < 0.05);  // 8-bit activations (the blocked path adds nothing)
  }
}

namespace {

// A qwen3moe GGUF of one layer with float32 zero tensors: `tensors` (name, ggml dims), the metadata of
// `expert_count` and `used` experts, nothing of a tokenizer (the expert checks come first).
std::string moe_gguf(const std::vector<std::pair<std::string, std::vector<uint64_t>>>& tensors, int64_t expert_count,
                     int64_t used) {
  std::string b = "GGUF";
  auto put = [&](auto v) { b.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  auto str = [&](const std::string& s) { put(uint64_t(s.size())), b += s; };
  auto kv_u32 = [&](const std::string& k, uint32_t v) { str(k), put(uint32_t(4)), put(v); };
  const std::vector<std::pair<std::string, uint32_t>> keys = {
      {"qwen3moe.embedding_length", 8}, {"qwen3moe.feed_forward_length", 16}, {"qwen3moe.block_count", 1},
      {"qwen3moe.attention.head_count", 2}, {"qwen3moe.attention.head_count_kv", 2},
      {"qwen3moe.context_length", 32}, {"qwen3moe.vocab_size", 8}, {"qwen3moe.expert_count", uint32_t(expert_count)},
      {"qwen3moe.expert_used_count", uint32_t(used)}, {"qwen3moe.expert_feed_forward_length", 4}};
  put(uint32_t(3));
  put(uint64_t(tensors.size()));
  put(uint64_t(keys.size() + 1));
  str("general.architecture"), put(uint32_t(8)), str("qwen3moe");
  for (const auto& [k, v] : keys) kv_u32(k, v);
  uint64_t offset = 0;
  for (const auto& [name, dims] : tensors) {
    str(name);
    put(uint32_t(dims.size()));
    uint64_t n = 1;
    for (uint64_t d : dims) put(d), n *= d;
    put(uint32_t(0));  // F32
    put(offset);
    offset += (n * 4 + 31) / 32 * 32;
  }
  b.resize((b.size() + 31) / 32 * 32, '\0');
  b.resize(b.size() + offset, '\0');
  return b;
}

// The tensors of that one-layer model (dim 8, 2 heads of 4, experts of width 4), expert tensors last.
std::vector<std::pair<std::string, std::vector<uint64_t>>> moe_tensors(uint64_t experts) {
  return {{"token_embd.weight", {8, 8}},        {"blk.0.attn_norm.weight", {8}},
          {"blk.0.attn_q.weight", {8, 8}},      {"blk.0.attn_k.weight", {8, 8}},
          {"blk.0.attn_v.weight", {8, 8}},      {"blk.0.attn_output.weight", {8, 8}},
          {"blk.0.ffn_norm.weight", {8}},       {"blk.0.attn_q_norm.weight", {4}},
          {"blk.0.attn_k_norm.weight", {4}},    {"output_norm.weight", {8}},
          {"blk.0.ffn_gate_inp.weight", {8, experts}}, {"blk.0.ffn_gate_exps.weight", {8, 4, experts}},
          {"blk.0.ffn_up_exps.weight", {8, 4, experts}}, {"blk.0.ffn_down_exps.weight", {4, 8, experts}}};
}

std::string gguf_error(const std::string& bytes) {
  const TempFile file(bytes);
  return error_of([&] { load_model(ModelSource{file.path(), "", 0}); });
}

std::string config_error(const std::string& json) {
  const TempFile file(json);
  return error_of([&] { load_model(ModelSource{"dummy:" + file.path(), "", 0}); });
}

Model load_config(const std::string& json) {
  const TempFile file(json);
  return load_model(ModelSource{"dummy:" + file.path(), "", 3});
}

std::string moe_config(const std::string& model_type, const std::string& extra) {
  return R"({"model_type": ")" + model_type + R"(", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 4,
             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 64)" +
         extra + "}";
}

}  // namespace

TEST_CASE("moe: config.json of each family: experts, sparse layers, the routing rule, shared expert, q/k norm") {
  const Model qwen2 = load_config(moe_config("qwen2_moe", R"(, "num_experts": 8, "num_experts_per_tok": 2,
      "moe_intermediate_size": 16, "shared_expert_intermediate_size": 24, "decoder_sparse_step": 2, "mlp_only_layers": [3])"));
  const ModelConfig& c = qwen2.config;
  CHECK(c.architecture == "qwen2moe");
  CHECK(c.qkv_bias);
  CHECK((c.num_experts == 8 && c.experts_per_token == 2 && c.expert_hidden_dim == 16));
  CHECK(c.shared_expert_hidden_dim == 24);
  CHECK(!c.norm_topk_prob);  // transformers' default
  CHECK(c.layer_sparse == std::vector<uint8_t>{0, 1, 0, 0});  // (l + 1) % 2 == 0, minus mlp_only_layers
  CHECK(qwen2.tensors.layers[1].experts.size() == 8);
  CHECK(qwen2.tensors.layers[0][LayerTensor::kRouter].empty());
  const std::string mixtral = R"(, "num_local_experts": 4, "num_experts_per_tok": 2, "norm_topk_prob": false)";
  CHECK(load_config(moe_config("mixtral", mixtral)).config.norm_topk_prob);  // Mixtral always renormalises
  CHECK(load_config(moe_config("mixtral", mixtral)).config.expert_hidden_dim == 48);
  const std::string qwen3 = R"(, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8)";
  CHECK(!load_config(moe_config("qwen3_moe", qwen3)).config.norm_topk_prob);
  CHECK(load_config(moe_config("qwen3_moe", qwen3 + R"(, "norm_topk_prob": true)")).config.norm_topk_prob);
  const ModelConfig olmoe = load_config(moe_config("olmoe", R"(, "num_experts": 4, "num_experts_per_tok": 2)")).config;
  CHECK((olmoe.qk_norm && olmoe.qk_norm_whole));
  CHECK(olmoe.features().find("whole projection") != std::string::npos);
}

TEST_CASE("moe: bad expert counts and expert tensors are refused naming the key or tensor") {
  const std::string top = config_error(moe_config("qwen3_moe", R"(, "num_experts": 4, "num_experts_per_tok": 5)"));
  CHECK(top.find("num_experts_per_tok") != std::string::npos);
  CHECK(config_error(moe_config("qwen3_moe", R"(, "num_experts": 4, "num_experts_per_tok": 0)"))
            .find("num_experts_per_tok") != std::string::npos);
  CHECK(config_error(moe_config("qwen2_moe", R"(, "num_experts": 4, "num_experts_per_tok": 1)"))
            .find("shared_expert_intermediate_size") != std::string::npos);
  CHECK(config_error(moe_config("olmoe", R"(, "num_experts": 4, "num_experts_per_tok": 1, "clip_qkv": 8.0)"))
            .find("clip_qkv") != std::string::npos);

  CHECK(gguf_error(moe_gguf(moe_tensors(4), 4, 5)).find("qwen3moe.expert_used_count") != std::string::npos);
  CHECK(gguf_error(moe_gguf(moe_tensors(4), 4, 0)).find("qwen3moe.expert_used_count") != std::string::npos);
  // The file's tensors hold 3 experts, its expert_count says 4.
  const std::string count = gguf_error(moe_gguf(moe_tensors(3), 4, 2));
  CHECK(count.find("'blk.0.ffn_gate_exps.weight'") != std::string::npos);
  CHECK(count.find("expert_count 4") != std::string::npos);
  auto without = [](const std::string& name) {
    auto t = moe_tensors(4);
    std::erase_if(t, [&](const auto& p) { return p.first == name; });
    return t;
  };
  CHECK(gguf_error(moe_gguf(without("blk.0.ffn_up_exps.weight"), 4, 2)).find("'blk.0.ffn_up_exps.weight' is missing") !=
        std::string::npos);
  CHECK(gguf_error(moe_gguf(without("blk.0.ffn_gate_inp.weight"), 4, 2)).find("'blk.0.ffn_gate_inp.weight' is missing") !=
        std::string::npos);
  auto down_wrong = moe_tensors(4);
  down_wrong.back().second = {8, 4, 4};  // down stored like gate: (dim, width) transposed
  CHECK(gguf_error(moe_gguf(down_wrong, 4, 2)).find("'blk.0.ffn_down_exps.weight' has dims [8, 4, 4]") !=
        std::string::npos);
}

}  // namespace cbatch
