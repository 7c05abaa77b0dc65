#include <doctest/doctest.h>

#include "engine/backend/roofline.hpp"

using namespace cbatch;

namespace {

// Two layers of dim 8, FFN 16, 2 heads of 4 sharing one KV head, a vocabulary of 10, tied embeddings.
ModelConfig two_layer_config() {
  ModelConfig c;
  c.dim = 8;
  c.hidden_dim = 16;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 4;
  c.vocab_size = 10;
  c.tied_embeddings = true;
  return c;
}

}  // namespace

TEST_CASE("cost model counts weights once, each sequence's KV once, and useful rows only") {
  ModelConfig c = two_layer_config();
  // per layer: 2*8 norms + 8*8 q + 2*8*4 k,v + 8*8 o + 3*8*16 ffn = 16 + 64 + 64 + 64 + 384 = 592
  const double layer_params = 2 * 592.0;
  CostModel model(c, 2.0, 2.0);
  RaggedBatch b;
  b.token_ids = {1, 2, 3, 4};
  b.positions = {0, 1, 5, 5};
  b.slot_mapping = {0, 1, 9, -1};  // the last row is padding
  b.query_start = {0, 2, 4};
  b.seq_lens = {2, 6};
  b.logits_rows = {1, 2};
  const StepCost cost = model.step_cost(b);
  const double kv_per_token = 2.0 * 2 * 4 * 2.0;  // K and V, 2 layers, kv_dim 4, 2 bytes
  CHECK(cost.bytes == doctest::Approx((layer_params + 8) * 2 + 80 * 2 + 8 * kv_per_token + 3 * kv_per_token));
  const double attention = 4.0 * 2 * 2 * 4 * (1 + 2 + 6);
  CHECK(cost.flops == doctest::Approx(2 * layer_params * 3 + 2 * 10 * 8 * 2 + attention));
  CHECK(CostModel::roofline_seconds(cost, {cost.bytes, cost.flops * 4}) == doctest::Approx(1.0));
  CHECK(CostModel::roofline_seconds(cost, {}) == 0);
}

TEST_CASE("cost model reads only the experts a step touched, and a row multiplies by its top k") {
  ModelConfig c = two_layer_config();
  c.num_experts = 4;
  c.experts_per_token = 2;
  c.expert_hidden_dim = 6;
  c.layer_sparse = {1, 0};  // layer 0: router (4 x 8) and 4 experts of 3 x 8 x 6 = 144; layer 1 dense
  // attention 208 a layer (norms 16, q 64, k and v 64, o 64), the router 32, the dense FFN 384
  const double always = 2 * 208.0 + 32 + 384 + 8;  // with the final norm
  CostModel model(c, 2.0, 2.0);
  RaggedBatch b;
  b.token_ids = {1, 2, 3};
  b.positions = {0, 1, 2};
  b.slot_mapping = {0, 1, 2};
  b.query_start = {0, 3};
  b.seq_lens = {3};
  b.logits_rows = {2};
  const double rest = 80 * 2 + 3 * (2.0 * 2 * 4 * 2.0) * 2;  // head, KV read and written (3 tokens each)
  CHECK(model.step_cost(b, 3).bytes == doctest::Approx((always + 3 * 144) * 2 + rest));
  CHECK(model.step_cost(b, 0).bytes == doctest::Approx(always * 2 + rest));
  CHECK(model.step_cost(b).bytes == doctest::Approx((always + 4 * 144) * 2 + rest));  // unknown: every expert
  CHECK(model.step_cost(b, 3).expert_bytes == doctest::Approx(3 * 144 * 2.0));
  // Experts stored apart (MXFP4 blocks beside 2-byte weights): the expert part only at 17/32 byte a weight.
  CostModel mxfp4(c, 2.0, 2.0, 17.0 / 32.0);
  CHECK(mxfp4.step_cost(b, 3).expert_bytes == doctest::Approx(3 * 144 * 17.0 / 32.0));
  CHECK(mxfp4.step_cost(b, 3).bytes == doctest::Approx(always * 2 + 3 * 144 * 17.0 / 32.0 + rest));
  CHECK(mxfp4.step_cost(b, 3).flops == model.step_cost(b, 3).flops);
  const double attention = 4.0 * 2 * 2 * 4 * (1 + 2 + 3);
  const double row_params = always - 8 + 2 * 144;
  CHECK(model.step_cost(b, 3).flops == doctest::Approx(2 * row_params * 3 + 2 * 10 * 8 + attention));
}
