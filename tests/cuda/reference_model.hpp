// A straightforward CPU forward pass of the Llama model in double precision with a paged host KV cache,
// written from the model math in the backend contract, to check the whole CUDA backend against.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/model/model.hpp"
#include "engine/backend/ragged_batch.hpp"
#include "tests/cuda/reference.hpp"

namespace cbatch::test {

class ReferenceModel {
 public:
  ReferenceModel(const Model& model, int num_blocks, int block_size) : c_(model.config) {
    const ModelTensors& t = model.tensors;
    embedding_ = load(t[ModelTensor::kEmbedding]);
    final_norm_ = load(t[ModelTensor::kFinalNorm]);
    lm_head_ = load(t[ModelTensor::kLmHead]);
    for (const LayerTensors& l : t.layers) {
      using enum LayerTensor;
      layers_.push_back({load(l[kAttnNorm]), load(l[kWq]), load(l[kWk]), load(l[kWv]), load(l[kWo]), load(l[kFfnNorm]),
                         load(l[kGate]), load(l[kUp]), load(l[kDown])});
      caches_.emplace_back(num_blocks, block_size, c_.num_kv_heads, c_.head_dim, NAN);
    }
    inv_freq_.resize(static_cast<size_t>(c_.head_dim / 2));
    rope_inv_freq(c_, inv_freq_.data());
  }

  // Logits (num_logits, vocab) of the batch's sampling rows; writes the batch's k and v into the cache.
  std::vector<double> forward(const RaggedBatch& b) {
    const int n = b.num_tokens();
    const int dim = c_.dim;
    std::vector<double> x(static_cast<size_t>(n) * dim);
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < dim; ++i) x[at(r, dim, i)] = embedding_[at(b.token_ids[r], dim, i)];
    }
    for (size_t l = 0; l < layers_.size(); ++l) {
      attention_block(b, layers_[l], caches_[l], x);
      ffn_block(n, layers_[l], x);
    }
    std::vector<double> logits;
    std::vector<double> h(static_cast<size_t>(dim));
    std::vector<double> row(static_cast<size_t>(c_.vocab_size));
    for (int r : b.logits_rows) {
      rmsnorm(&x[at(r, dim, 0)], final_norm_, h.data());
      matvec(lm_head_, h.data(), c_.vocab_size, dim, row.data());
      logits.insert(logits.end(), row.begin(), row.end());
    }
    return logits;
  }

 private:
  struct Layer {
    std::vector<float> attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
  };

  static std::vector<float> load(const TensorView& t) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    tensor_rows_to_f32(t, 0, t.rows, v.data());
    return v;
  }
  static size_t at(int row, int width, int col) { return static_cast<size_t>(row) * width + col; }

  // y (out) = w (out, in) x (in)
  static void matvec(const std::vector<float>& w, const double* x, int out, int in, double* y) {
    for (int o = 0; o < out; ++o) {
      double acc = 0.0;
      for (int i = 0; i < in; ++i) acc += static_cast<double>(w[at(o, in, i)]) * x[i];
      y[o] = acc;
    }
  }

  void rmsnorm(const double* x, const std::vector<float>& w, double* out) const {
    double sum_sq = 0.0;
    for (int i = 0; i < c_.dim; ++i) sum_sq += x[i] * x[i];
    const double inv_rms = 1.0 / std::sqrt(sum_sq / c_.dim + c_.rms_eps);
    for (int i = 0; i < c_.dim; ++i) out[i] = x[i] * inv_rms * w[i];
  }

  void attention_block(const RaggedBatch& b, const Layer& w, HostKvCache& cache, std::vector<double>& x) const {
    const int n = b.num_tokens();
    const int dim = c_.dim, hd = c_.head_dim, q_dim = c_.q_dim(), kv_dim = c_.kv_dim();
    const bool halves = c_.rope_layout == RopeLayout::kHalves;
    std::vector<double> h(static_cast<size_t>(dim)), q(static_cast<size_t>(n) * q_dim), k(static_cast<size_t>(kv_dim)),
        v(static_cast<size_t>(kv_dim));
    // Every row's k and v enter the cache before any row attends.
    for (int r = 0; r < n; ++r) {
      rmsnorm(&x[at(r, dim, 0)], w.attn_norm, h.data());
      double* qr = &q[at(r, q_dim, 0)];
      matvec(w.wq, h.data(), q_dim, dim, qr);
      matvec(w.wk, h.data(), kv_dim, dim, k.data());
      matvec(w.wv, h.data(), kv_dim, dim, v.data());
      for (int head = 0; head < c_.num_heads; ++head) rope_ref(qr + head * hd, hd, b.positions[r], inv_freq_, halves);
      for (int head = 0; head < c_.num_kv_heads; ++head) rope_ref(&k[at(head, hd, 0)], hd, b.positions[r], inv_freq_, halves);
      const int slot = b.slot_mapping[r];
      if (slot < 0) continue;
      for (int head = 0; head < c_.num_kv_heads; ++head) {
        for (int d = 0; d < hd; ++d) {
          cache.k[cache.offset(slot, head) + d] = k[at(head, hd, d)];
          cache.v[cache.offset(slot, head) + d] = v[at(head, hd, d)];
        }
      }
    }
    const int group = c_.num_heads / c_.num_kv_heads;
    std::vector<double> attn(static_cast<size_t>(q_dim)), delta(static_cast<size_t>(dim));
    for (int s = 0; s < b.num_seqs(); ++s) {
      const int32_t* table = b.block_tables.data() + static_cast<size_t>(s) * b.max_blocks_per_seq;
      for (int r = b.query_start[s]; r < b.query_start[s + 1]; ++r) {
        for (int head = 0; head < c_.num_heads; ++head) {
          attention_ref(&q[at(r, q_dim, head * hd)], b.positions[r], table, cache, head / group, &attn[at(head, hd, 0)]);
        }
        matvec(w.wo, attn.data(), dim, q_dim, delta.data());
        for (int i = 0; i < dim; ++i) x[at(r, dim, i)] += delta[i];
      }
    }
  }

  void ffn_block(int n, const Layer& w, std::vector<double>& x) const {
    const int dim = c_.dim, hidden = c_.hidden_dim;
    std::vector<double> h(static_cast<size_t>(dim)), gate(static_cast<size_t>(hidden)), up(static_cast<size_t>(hidden)),
        delta(static_cast<size_t>(dim));
    for (int r = 0; r < n; ++r) {
      rmsnorm(&x[at(r, dim, 0)], w.ffn_norm, h.data());
      matvec(w.w_gate, h.data(), hidden, dim, gate.data());
      matvec(w.w_up, h.data(), hidden, dim, up.data());
      for (int i = 0; i < hidden; ++i) gate[i] = silu_ref(gate[i]) * up[i];
      matvec(w.w_down, gate.data(), dim, hidden, delta.data());
      for (int i = 0; i < dim; ++i) x[at(r, dim, i)] += delta[i];
    }
  }

  const ModelConfig c_;
  std::vector<float> embedding_, final_norm_, lm_head_, inv_freq_;
  std::vector<Layer> layers_;
  std::vector<HostKvCache> caches_;  // one per layer
};

}  // namespace cbatch::test
