// The rows of the tensor table (layer_tensors.hpp). Names: llama.cpp's GGUF converter, transformers'
// modeling code (Llama and the decoder families, Mixtral's block_sparse_moe, gpt-oss, BERT and XLM-R) and
// llama2.c's run.c.
#include "engine/model/layer_tensors.hpp"

#include <iterator>

namespace cbatch {
namespace {

using enum Size;

bool has_mixer(const ModelConfig& c, int layer) { return c.has_mixer(layer); }
bool has_ffn(const ModelConfig& c, int layer) { return c.has_ffn(layer); }
bool is_attention(const ModelConfig& c, int layer) { return c.is_attention(layer); }
bool is_deltanet(const ModelConfig& c, int layer) { return c.layer_kind(layer) == LayerKind::kDeltaNet; }
bool is_short_conv(const ModelConfig& c, int layer) { return c.layer_kind(layer) == LayerKind::kShortConv; }
bool is_mamba2(const ModelConfig& c, int layer) { return c.layer_kind(layer) == LayerKind::kMamba2; }
bool has_qkv_bias(const ModelConfig& c, int layer) { return c.qkv_bias && c.is_attention(layer); }
bool has_qk_norm(const ModelConfig& c, int layer) { return c.qk_norm && c.is_attention(layer); }
bool has_k(const ModelConfig& c, int layer) { return c.is_attention(layer) && c.writes_kv(layer); }
bool has_v(const ModelConfig& c, int layer) { return has_k(c, layer) && !c.values_are_keys(layer); }
bool has_k_norm(const ModelConfig& c, int layer) { return has_qk_norm(c, layer) && c.writes_kv(layer); }
bool has_per_layer_input(const ModelConfig& c, int) { return c.per_layer_dim > 0; }
bool has_layer_scalar(const ModelConfig& c, int) { return c.layer_scalar; }
bool has_experts_beside_dense(const ModelConfig& c, int layer) { return c.is_sparse(layer) && c.experts_beside_dense; }
bool has_sandwich_norms(const ModelConfig& c, int) { return c.sandwich_norms; }
bool has_layer_norm(const ModelConfig& c, int) { return c.layer_norm; }
bool has_o_bias(const ModelConfig& c, int layer) { return c.o_bias && c.is_attention(layer); }
bool has_sinks(const ModelConfig& c, int layer) { return c.attn_sinks && c.is_attention(layer); }
// A layer's dense MLP: on a layer with an FFN that is not sparse, or beside the experts (Gemma 4).
bool is_dense(const ModelConfig& c, int layer) { return c.has_ffn(layer) && (!c.is_sparse(layer) || c.experts_beside_dense); }
bool is_dense_gated(const ModelConfig& c, int layer) { return is_dense(c, layer) && c.gated_ffn; }
bool is_dense_biased(const ModelConfig& c, int layer) { return is_dense(c, layer) && !c.gated_ffn && c.ffn_bias; }
bool is_sparse(const ModelConfig& c, int layer) { return c.is_sparse(layer); }
bool has_router_bias(const ModelConfig& c, int layer) { return c.is_sparse(layer) && c.router_bias; }
bool has_shared_expert(const ModelConfig& c, int layer) { return c.is_sparse(layer) && c.shared_expert_hidden_dim > 0; }
bool has_shared_gate(const ModelConfig& c, int layer) { return has_shared_expert(c, layer) && c.shared_expert_gate; }

constexpr Role kNorm = Role::kNorm, kBias = Role::kBias, kProjection = Role::kProjection;

// Columns: kind, label, shape, present, role, joins, GGUF, Hugging Face (decoders), BERT, llama2.c.
constexpr LayerTensorRow kLayerRows[] = {
    // LFM2's norms are operator_norm and ffn_norm; Nemotron-H's one norm per layer is `norm` (attn_norm in
    // its GGUF), the FFN's on an MLP layer.
    {LayerTensor::kAttnNorm, "attn_norm", {kOne, kDim}, has_mixer, kNorm, LayerTensor::kAttnNorm,
     {"attn_norm.weight"}, {"input_layernorm.weight", "operator_norm.weight", "norm.weight"}, "attention.output.LayerNorm.weight", "rms_att_weight"},
    // llama.cpp's converter permutes q and k rows of `llama` files; they are used as stored, rotated as
    // adjacent pairs (ModelConfig::rope_layout; LoRA B rows follow: lora_adapter.hpp).
    // Qwen3.5's q projection holds per head [q | gate] (kQProj: 2 * q_dim rows), in both formats.
    {LayerTensor::kWq, "wq", {kQProj, kDim}, is_attention, kProjection, LayerTensor::kWq,
     {"attn_q.weight"}, {"self_attn.q_proj.weight", "mixer.q_proj.weight"}, "attention.self.query.weight", "wq"},
    {LayerTensor::kWk, "wk", {kKvDim, kDim}, has_k, kProjection, LayerTensor::kWq,
     {"attn_k.weight"}, {"self_attn.k_proj.weight", "mixer.k_proj.weight"}, "attention.self.key.weight", "wk"},
    {LayerTensor::kWv, "wv", {kKvDim, kDim}, has_v, kProjection, LayerTensor::kWq,
     {"attn_v.weight"}, {"self_attn.v_proj.weight", "mixer.v_proj.weight"}, "attention.self.value.weight", "wv"},
    {LayerTensor::kWo, "wo", {kDim, kQDim}, is_attention, kProjection, LayerTensor::kWo,
     {"attn_output.weight"}, {"self_attn.o_proj.weight", "self_attn.out_proj.weight", "mixer.o_proj.weight"}, "attention.output.dense.weight", "wo"},
    // gpt-oss's GGUF FFN norm is post_attention_norm; Gemma's HF one pre_feedforward_layernorm (its
    // post_attention_layernorm is the attention output's norm, kPostAttnNorm).
    {LayerTensor::kFfnNorm, "ffn_norm", {kOne, kDim}, has_ffn, kNorm, LayerTensor::kFfnNorm,
     {"ffn_norm.weight", "post_attention_norm.weight", "attn_norm.weight"},
     {"pre_feedforward_layernorm.weight", "post_attention_layernorm.weight", "ffn_norm.weight", "norm.weight"}, "output.LayerNorm.weight",
     "rms_ffn_weight"},
    {LayerTensor::kGate, "w_gate", {kHidden, kDim}, is_dense_gated, kProjection, LayerTensor::kGate,
     {"ffn_gate.weight"}, {"mlp.gate_proj.weight", "feed_forward.w1.weight"}, "", "w1"},
    {LayerTensor::kUp, "w_up", {kHidden, kDim}, is_dense, kProjection, LayerTensor::kGate,
     {"ffn_up.weight"}, {"mlp.up_proj.weight", "feed_forward.w3.weight", "mixer.up_proj.weight"}, "intermediate.dense.weight", "w3"},
    {LayerTensor::kDown, "w_down", {kDim, kHidden}, is_dense, kProjection, LayerTensor::kDown,
     {"ffn_down.weight"},
     {"mlp.down_proj.weight", "feed_forward.w2.weight", "mixer.down_proj.weight", "shared_mlp.output_linear.weight"}, "output.dense.weight", "w2"},
    // Mixtral's router is block_sparse_moe.gate, gpt-oss's mlp.router (the experts follow the spelling).
    {LayerTensor::kRouter, "router", {kNumExperts, kDim}, is_sparse, Role::kRouter, LayerTensor::kRouter,
     {"ffn_gate_inp.weight"},
     {"mlp.gate.weight", "block_sparse_moe.gate.weight", "mlp.router.weight", "block_sparse_moe.router.layer.weight",
      "router.proj.weight"},
     "", ""},
    {LayerTensor::kRouterBias, "router bias", {kOne, kNumExperts}, has_router_bias, kBias, LayerTensor::kRouterBias,
     {"ffn_gate_inp.bias"}, {"mlp.router.bias"}, "", ""},
    {LayerTensor::kSharedGate, "shared expert w_gate", {kSharedHidden, kDim}, has_shared_expert, Role::kSharedExpert,
     LayerTensor::kSharedGate, {"ffn_gate_shexp.weight"}, {"mlp.shared_expert.gate_proj.weight"}, "", ""},
    {LayerTensor::kSharedUp, "shared expert w_up", {kSharedHidden, kDim}, has_shared_expert, Role::kSharedExpert,
     LayerTensor::kSharedGate, {"ffn_up_shexp.weight"}, {"mlp.shared_expert.up_proj.weight"}, "", ""},
    {LayerTensor::kSharedDown, "shared expert w_down", {kDim, kSharedHidden}, has_shared_expert, Role::kSharedExpert,
     LayerTensor::kSharedDown, {"ffn_down_shexp.weight"},
     {"mlp.shared_expert.down_proj.weight", "shared_mlp.output_linear.weight"}, "", ""},
    {LayerTensor::kSharedExpertGate, "shared expert gate", {kOne, kDim}, has_shared_gate, Role::kGateVector,
     LayerTensor::kSharedExpertGate, {"ffn_gate_inp_shexp.weight"}, {"mlp.shared_expert_gate.weight"}, "", ""},
    {LayerTensor::kBq, "q bias", {kOne, kQDim}, has_qkv_bias, kBias, LayerTensor::kBq,
     {"attn_q.bias"}, {"self_attn.q_proj.bias"}, "attention.self.query.bias", ""},
    {LayerTensor::kBk, "k bias", {kOne, kKvDim}, has_qkv_bias, kBias, LayerTensor::kBq,
     {"attn_k.bias"}, {"self_attn.k_proj.bias"}, "attention.self.key.bias", ""},
    {LayerTensor::kBv, "v bias", {kOne, kKvDim}, has_qkv_bias, kBias, LayerTensor::kBq,
     {"attn_v.bias"}, {"self_attn.v_proj.bias"}, "attention.self.value.bias", ""},
    {LayerTensor::kQNorm, "q_norm", {kOne, kQNorm}, has_qk_norm, kNorm, LayerTensor::kQNorm,
     {"attn_q_norm.weight"}, {"self_attn.q_norm.weight", "self_attn.q_layernorm.weight"}, "", ""},
    {LayerTensor::kKNorm, "k_norm", {kOne, kKNorm}, has_k_norm, kNorm, LayerTensor::kKNorm,
     {"attn_k_norm.weight"}, {"self_attn.k_norm.weight", "self_attn.k_layernorm.weight"}, "", ""},
    {LayerTensor::kPostAttnNorm, "post_attn_norm", {kOne, kDim}, has_sandwich_norms, kNorm, LayerTensor::kPostAttnNorm,
     {"post_attention_norm.weight"}, {"post_attention_layernorm.weight"}, "", ""},
    {LayerTensor::kPostFfnNorm, "post_ffn_norm", {kOne, kDim}, has_sandwich_norms, kNorm, LayerTensor::kPostFfnNorm,
     {"post_ffw_norm.weight"}, {"post_feedforward_layernorm.weight"}, "", ""},
    {LayerTensor::kBo, "output projection bias", {kOne, kDim}, has_o_bias, kBias, LayerTensor::kBo,
     {"attn_output.bias"}, {"self_attn.o_proj.bias"}, "attention.output.dense.bias", ""},
    {LayerTensor::kSinks, "attention sinks", {kOne, kNumHeads}, has_sinks, kBias, LayerTensor::kSinks,
     {"attn_sinks.weight"}, {"self_attn.sinks"}, "", ""},
    {LayerTensor::kAttnNormBias, "attn_norm bias", {kOne, kDim}, has_layer_norm, kBias, LayerTensor::kAttnNormBias,
     {}, {}, "attention.output.LayerNorm.bias", ""},
    {LayerTensor::kFfnNormBias, "ffn_norm bias", {kOne, kDim}, has_layer_norm, kBias, LayerTensor::kFfnNormBias,
     {}, {}, "output.LayerNorm.bias", ""},
    {LayerTensor::kUpBias, "up bias", {kOne, kHidden}, is_dense_biased, kBias, LayerTensor::kUpBias,
     {}, {}, "intermediate.dense.bias", ""},
    {LayerTensor::kDownBias, "down bias", {kOne, kDim}, is_dense_biased, kBias, LayerTensor::kDownBias,
     {}, {}, "output.dense.bias", ""},
    // Gated DeltaNet (Qwen3.5: linear_attn.*; llama.cpp: attn_qkv, attn_gate, ssm_*). q, k and v channels
    // in that order; the GGUF's value heads are tiled (DeltaNetSizes::tiled_heads), its ssm_a is A itself.
    // Qwen3-Next's files fuse q|k|v|z and b|a (kFusedRows), grouped by key head (DeltaNetSizes::grouped_*).
    {LayerTensor::kSsmQkv, "DeltaNet q|k|v projection", {kSsmConvDim, kDim}, is_deltanet, kProjection, LayerTensor::kSsmQkv,
     {"attn_qkv.weight"}, {"linear_attn.in_proj_qkv.weight"}, "", ""},
    {LayerTensor::kSsmZ, "DeltaNet z projection", {kSsmValueDim, kDim}, is_deltanet, kProjection, LayerTensor::kSsmQkv,
     {"attn_gate.weight"}, {"linear_attn.in_proj_z.weight"}, "", ""},
    {LayerTensor::kSsmBeta, "DeltaNet b projection", {kSsmVHeads, kDim}, is_deltanet, kProjection, LayerTensor::kSsmBeta,
     {"ssm_beta.weight"}, {"linear_attn.in_proj_b.weight"}, "", ""},
    {LayerTensor::kSsmAlpha, "DeltaNet a projection", {kSsmVHeads, kDim}, is_deltanet, kProjection, LayerTensor::kSsmBeta,
     {"ssm_alpha.weight"}, {"linear_attn.in_proj_a.weight"}, "", ""},
    {LayerTensor::kSsmConv, "DeltaNet conv1d", {kSsmConvDim, kSsmConvKernel}, is_deltanet, Role::kDense, LayerTensor::kSsmConv,
     {"ssm_conv1d.weight"}, {"linear_attn.conv1d.weight"}, "", ""},
    {LayerTensor::kSsmDtBias, "DeltaNet dt_bias", {kOne, kSsmVHeads}, is_deltanet, kBias, LayerTensor::kSsmDtBias,
     {"ssm_dt.bias"}, {"linear_attn.dt_bias"}, "", ""},
    {LayerTensor::kSsmDecay, "DeltaNet decay (A_log)", {kOne, kSsmVHeads}, is_deltanet, Role::kDecay, LayerTensor::kSsmDecay,
     {"ssm_a"}, {"linear_attn.A_log"}, "", ""},
    {LayerTensor::kSsmNorm, "DeltaNet gated norm", {kOne, kSsmVHeadDim}, is_deltanet, Role::kPlainNorm, LayerTensor::kSsmNorm,
     {"ssm_norm.weight"}, {"linear_attn.norm.weight"}, "", ""},
    {LayerTensor::kSsmOut, "DeltaNet output projection", {kDim, kSsmValueDim}, is_deltanet, kProjection, LayerTensor::kSsmOut,
     {"ssm_out.weight"}, {"linear_attn.out_proj.weight"}, "", ""},
    // LFM2's short conv (conv.*; llama.cpp: shortconv.*), no biases (conv_bias false).
    {LayerTensor::kShortConvIn, "short conv in projection", {kShortConvIn, kDim}, is_short_conv, kProjection,
     LayerTensor::kShortConvIn, {"shortconv.in_proj.weight"}, {"conv.in_proj.weight"}, "", ""},
    {LayerTensor::kShortConvTaps, "short conv taps", {kDim, kShortConvKernel}, is_short_conv, Role::kDense,
     LayerTensor::kShortConvTaps, {"shortconv.conv.weight"}, {"conv.conv.weight"}, "", ""},
    {LayerTensor::kShortConvOut, "short conv output projection", {kDim, kDim}, is_short_conv, kProjection,
     LayerTensor::kShortConvOut, {"shortconv.out_proj.weight"}, {"conv.out_proj.weight"}, "", ""},
    // Mamba-2 (Granite: mamba.*; Nemotron-H: mixer.*; llama.cpp: ssm_*, A = -exp(A_log) as ssm_a, ssm_a and
    // ssm_d stored (heads, 1), ssm_norm (groups, inner / groups): read as the vectors they are).
    {LayerTensor::kMambaIn, "Mamba-2 in projection", {kMambaInProj, kDim}, is_mamba2, kProjection, LayerTensor::kMambaIn,
     {"ssm_in.weight"}, {"mamba.in_proj.weight", "mixer.in_proj.weight"}, "", ""},
    {LayerTensor::kMambaConv, "Mamba-2 conv1d", {kMambaConvDim, kMambaConvKernel}, is_mamba2, Role::kDense,
     LayerTensor::kMambaConv, {"ssm_conv1d.weight"}, {"mamba.conv1d.weight", "mixer.conv1d.weight"}, "", ""},
    {LayerTensor::kMambaConvBias, "Mamba-2 conv1d bias", {kOne, kMambaConvDim}, is_mamba2, kBias,
     LayerTensor::kMambaConvBias, {"ssm_conv1d.bias"}, {"mamba.conv1d.bias", "mixer.conv1d.bias"}, "", ""},
    {LayerTensor::kMambaDtBias, "Mamba-2 dt_bias", {kOne, kMambaHeads}, is_mamba2, kBias, LayerTensor::kMambaDtBias,
     {"ssm_dt.bias"}, {"mamba.dt_bias", "mixer.dt_bias"}, "", ""},
    {LayerTensor::kMambaDecay, "Mamba-2 decay (A_log)", {kOne, kMambaHeads}, is_mamba2, Role::kDecay,
     LayerTensor::kMambaDecay, {"ssm_a"}, {"mamba.A_log", "mixer.A_log"}, "", ""},
    {LayerTensor::kMambaD, "Mamba-2 D", {kOne, kMambaHeads}, is_mamba2, kBias, LayerTensor::kMambaD,
     {"ssm_d"}, {"mamba.D", "mixer.D"}, "", ""},
    {LayerTensor::kMambaNorm, "Mamba-2 gated norm", {kOne, kMambaInner}, is_mamba2, Role::kPlainNorm,
     LayerTensor::kMambaNorm, {"ssm_norm.weight"}, {"mamba.norm.weight", "mixer.norm.weight"}, "", ""},
    {LayerTensor::kMambaOut, "Mamba-2 output projection", {kDim, kMambaInner}, is_mamba2, kProjection,
     LayerTensor::kMambaOut, {"ssm_out.weight"}, {"mamba.out_proj.weight", "mixer.out_proj.weight"}, "", ""},
    // Gemma 4 (llama.cpp: inp_gate, proj, post_norm, layer_output_scale).
    {LayerTensor::kPerLayerGate, "per-layer input gate", {kPerLayerDim, kDim}, has_per_layer_input, kProjection,
     LayerTensor::kPerLayerGate, {"inp_gate.weight"}, {"per_layer_input_gate.weight"}, "", ""},
    {LayerTensor::kPerLayerProj, "per-layer projection", {kDim, kPerLayerDim}, has_per_layer_input, kProjection,
     LayerTensor::kPerLayerProj, {"proj.weight"}, {"per_layer_projection.weight"}, "", ""},
    {LayerTensor::kPerLayerNorm, "per-layer input norm", {kOne, kDim}, has_per_layer_input, kNorm,
     LayerTensor::kPerLayerNorm, {"post_norm.weight"}, {"post_per_layer_input_norm.weight"}, "", ""},
    {LayerTensor::kLayerScalar, "layer_scalar", {kOne, kOne}, has_layer_scalar, kBias, LayerTensor::kLayerScalar,
     {"layer_output_scale.weight"}, {"layer_scalar"}, "", ""},
    // Gemma 4's MoE block (llama.cpp: ffn_gate_inp.scale, the per-expert scale as ffn_down_exps.scale).
    {LayerTensor::kRouterScale, "router scale", {kOne, kDim}, has_experts_beside_dense, kBias, LayerTensor::kRouterScale,
     {"ffn_gate_inp.scale"}, {"router.scale"}, "", ""},
    {LayerTensor::kExpertScale, "per-expert scale", {kOne, kNumExperts}, has_experts_beside_dense, kBias,
     LayerTensor::kExpertScale, {"ffn_down_exps.scale"}, {"router.per_expert_scale"}, "", ""},
    {LayerTensor::kPreFfnNorm2, "experts' pre-norm", {kOne, kDim}, has_experts_beside_dense, kNorm, LayerTensor::kPreFfnNorm2,
     {"pre_ffw_norm_2.weight"}, {"pre_feedforward_layernorm_2.weight"}, "", ""},
    {LayerTensor::kPostFfnNorm1, "dense MLP's post-norm", {kOne, kDim}, has_experts_beside_dense, kNorm,
     LayerTensor::kPostFfnNorm1, {"post_ffw_norm_1.weight"}, {"post_feedforward_layernorm_1.weight"}, "", ""},
    {LayerTensor::kPostFfnNorm2, "experts' post-norm", {kOne, kDim}, has_experts_beside_dense, kNorm,
     LayerTensor::kPostFfnNorm2, {"post_ffw_norm_2.weight"}, {"post_feedforward_layernorm_2.weight"}, "", ""},
};

bool expert_always(const ModelConfig&) { return true; }
bool has_expert_bias(const ModelConfig& c) { return c.expert_bias; }

// Columns: kind, label, shape, present, role, joins, GGUF stacked, GGUF per expert, Hugging Face per
// expert (the router's spellings: Qwen-MoE and OLMoE, Mixtral), gpt-oss's stacked, Granite 4.0-H's stacked.
constexpr ExpertTensorRow kExpertRows[] = {
    {ExpertTensor::kGate, "expert gate", {kExpertHidden, kDim}, expert_always, Role::kRoutedExpert, ExpertTensor::kGate,
     "ffn_gate_exps.weight", "ffn_gate.{e}.weight",
     {"mlp.experts.{e}.gate_proj.weight", "block_sparse_moe.experts.{e}.w1.weight"}, "mlp.experts.gate_up_proj",
     "block_sparse_moe.input_linear.weight"},
    {ExpertTensor::kUp, "expert up", {kExpertHidden, kDim}, expert_always, Role::kRoutedExpert, ExpertTensor::kGate,
     "ffn_up_exps.weight", "ffn_up.{e}.weight",
     {"mlp.experts.{e}.up_proj.weight", "block_sparse_moe.experts.{e}.w3.weight"}, "mlp.experts.gate_up_proj",
     "block_sparse_moe.input_linear.weight"},
    {ExpertTensor::kDown, "expert down", {kDim, kExpertHidden}, expert_always, Role::kRoutedExpert, ExpertTensor::kDown,
     "ffn_down_exps.weight", "ffn_down.{e}.weight",
     {"mlp.experts.{e}.down_proj.weight", "block_sparse_moe.experts.{e}.w2.weight"}, "mlp.experts.down_proj",
     "block_sparse_moe.output_linear.weight"},
    {ExpertTensor::kGateBias, "expert gate bias", {kOne, kExpertHidden}, has_expert_bias, kBias, ExpertTensor::kGateBias,
     "ffn_gate_exps.bias", "", {"mlp.experts.{e}.gate_proj.bias"}, "mlp.experts.gate_up_proj_bias"},
    {ExpertTensor::kUpBias, "expert up bias", {kOne, kExpertHidden}, has_expert_bias, kBias, ExpertTensor::kGateBias,
     "ffn_up_exps.bias", "", {"mlp.experts.{e}.up_proj.bias"}, "mlp.experts.gate_up_proj_bias"},
    {ExpertTensor::kDownBias, "expert down bias", {kOne, kDim}, has_expert_bias, kBias, ExpertTensor::kDownBias,
     "ffn_down_exps.bias", "", {"mlp.experts.{e}.down_proj.bias"}, "mlp.experts.down_proj_bias"},
};

bool model_always(const ModelConfig&) { return true; }
bool has_final_norm(const ModelConfig& c) { return !c.post_norm; }
bool has_lm_head(const ModelConfig& c) { return c.has_lm_head; }
bool has_positions(const ModelConfig& c) { return c.learned_positions; }
bool has_token_types(const ModelConfig& c) { return c.token_types; }
bool has_embedding_norm(const ModelConfig& c) { return c.post_norm; }
bool has_embedding_norm_bias(const ModelConfig& c) { return c.post_norm && c.layer_norm; }
bool is_cross_encoder(const ModelConfig& c) { return c.is_cross_encoder(); }
bool has_per_layer_inputs(const ModelConfig& c) { return c.per_layer_dim > 0; }

constexpr bool kAtRoot = true;

// Columns: kind, label, shape, present, role, GGUF, Hugging Face (decoders), BERT, XLM-R, llama2.c. A
// tied lm_head is the embedding's view (the loaders' rule, ModelConfig::tied_embeddings).
constexpr ModelTensorRow kModelRows[] = {
    {ModelTensor::kEmbedding, "embedding", {kVocab, kDim}, model_always, Role::kEmbedding, "token_embd.weight",
     {"embed_tokens.weight", false, {"embeddings.weight"}}, {"embeddings.word_embeddings.weight"}, {}, "token_embedding_table"},
    {ModelTensor::kFinalNorm, "final_norm", {kOne, kDim}, has_final_norm, kNorm, "output_norm.weight",
     {"norm.weight", false, {"embedding_norm.weight", "norm_f.weight"}}, {}, {}, "rms_final_weight",
     "token_embd_norm.weight"},
    {ModelTensor::kLmHead, "lm_head", {kVocab, kDim}, has_lm_head, kProjection, "output.weight",
     {"lm_head.weight", kAtRoot}, {}, {}, "wcls"},
    {ModelTensor::kPositionEmbedding, "position embedding", {kPositions, kDim}, has_positions, Role::kEmbedding, "",
     {}, {"embeddings.position_embeddings.weight"}, {}, ""},
    {ModelTensor::kTokenTypeEmbedding, "token type embedding", {kTokenTypes, kDim}, has_token_types, Role::kEmbedding, "",
     {}, {"embeddings.token_type_embeddings.weight"}, {}, ""},
    {ModelTensor::kEmbeddingNorm, "embedding norm", {kOne, kDim}, has_embedding_norm, kNorm, "",
     {}, {"embeddings.LayerNorm.weight"}, {}, ""},
    {ModelTensor::kEmbeddingNormBias, "embedding norm bias", {kOne, kDim}, has_embedding_norm_bias, kBias, "",
     {}, {"embeddings.LayerNorm.bias"}, {}, ""},
    // BertForSequenceClassification: pooler.dense (tanh) then classifier; XLMRobertaForSequenceClassification:
    // classifier.dense (tanh) then classifier.out_proj, the same arithmetic.
    {ModelTensor::kPooler, "pooler", {kDim, kDim}, is_cross_encoder, Role::kDense, "",
     {}, {"pooler.dense.weight"}, {"classifier.dense.weight", kAtRoot}, ""},
    {ModelTensor::kPoolerBias, "pooler bias", {kOne, kDim}, is_cross_encoder, kBias, "",
     {}, {"pooler.dense.bias"}, {"classifier.dense.bias", kAtRoot}, ""},
    {ModelTensor::kClassifier, "classifier", {kNumLabels, kDim}, is_cross_encoder, Role::kDense, "",
     {}, {"classifier.weight", kAtRoot}, {"classifier.out_proj.weight", kAtRoot}, ""},
    {ModelTensor::kClassifierBias, "classifier bias", {kOne, kNumLabels}, is_cross_encoder, kBias, "",
     {}, {"classifier.bias", kAtRoot}, {"classifier.out_proj.bias", kAtRoot}, ""},
    {ModelTensor::kPerLayerEmbedding, "per-layer embedding", {kVocab, kPerLayerAll}, has_per_layer_inputs, Role::kEmbedding,
     "per_layer_token_embd.weight", {"embed_tokens_per_layer.weight"}, {}, {}, ""},
    {ModelTensor::kPerLayerModelProj, "per-layer model projection", {kPerLayerAll, kDim}, has_per_layer_inputs, kProjection,
     "per_layer_model_proj.weight", {"per_layer_model_projection.weight"}, {}, {}, ""},
    {ModelTensor::kPerLayerProjNorm, "per-layer projection norm", {kOne, kPerLayerDim}, has_per_layer_inputs, kNorm,
     "per_layer_proj_norm.weight", {"per_layer_projection_norm.weight"}, {}, {}, ""},
};

constexpr FusedTensorRow kFusedRows[] = {
    {LayerProduct::kQkv, "attn_qkv.weight", "self_attn.qkv_proj.weight"},
    {LayerProduct::kGateUp, "ffn_up.weight", "mlp.gate_up_proj.weight"},
    {LayerProduct::kSsmQkvz, "", "linear_attn.in_proj_qkvz.weight"},
    {LayerProduct::kSsmBa, "ssm_ba.weight", "linear_attn.in_proj_ba.weight"},
    // Granite 4.0-H's shared MLP: input_linear holds [gate | up] (the dense FFN, or beside the experts).
    {LayerProduct::kGateUp, "", "shared_mlp.input_linear.weight"},
    {LayerProduct::kSharedGateUp, "", "shared_mlp.input_linear.weight"},
};

// Each table lists its kinds once, in enum order (so that row(kind) is an index).
template <typename Row, size_t N>
constexpr bool in_kind_order(const Row (&rows)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(rows[i].kind) != i) return false;
  }
  return N == static_cast<size_t>(decltype(rows[0].kind)::kCount);
}
static_assert(in_kind_order(kLayerRows) && in_kind_order(kExpertRows) && in_kind_order(kModelRows));

}  // namespace

int64_t size_of(Size size, const ModelConfig& c, int layer) {
  const bool own = layer >= 0 && layer < c.num_layers;
  const int q_dim = own ? c.q_dim_of(layer) : c.q_dim(), kv_dim = own ? c.kv_dim_of(layer) : c.kv_dim();
  const int head_dim = own ? c.head_dim_of(layer) : c.head_dim;
  switch (size) {
    case kOne: return 1;
    case kDim: return c.dim;
    case kQDim: return q_dim;
    case kKvDim: return kv_dim;
    case kHidden: return own ? c.hidden_of(layer) : c.hidden_dim;
    case kNumHeads: return c.num_heads;
    case kQNorm: return c.qk_norm_whole ? q_dim : head_dim;
    case kKNorm: return c.qk_norm_whole ? kv_dim : head_dim;
    case kNumExperts: return c.num_experts;
    case kExpertHidden: return c.expert_hidden_dim;
    case kSharedHidden: return c.shared_expert_hidden_dim;
    case kVocab: return c.vocab_size;
    case kPositions: return static_cast<int64_t>(c.max_context) + c.position_offset;
    case kTokenTypes: return c.num_token_types;
    case kNumLabels: return c.num_labels;
    case kQProj: return own ? q_dim * (c.attn_output_gate ? 2 : 1) : c.q_proj_dim();
    case kSsmConvDim: return c.deltanet.conv_dim();
    case kSsmValueDim: return c.deltanet.value_dim();
    case kSsmVHeads: return c.deltanet.num_v_heads;
    case kSsmVHeadDim: return c.deltanet.v_head_dim;
    case kSsmConvKernel: return c.deltanet.conv_kernel;
    case kShortConvIn: return 3LL * c.dim;
    case kShortConvKernel: return c.short_conv_kernel;
    case kMambaInProj: return c.mamba.in_proj_dim();
    case kMambaConvDim: return c.mamba.conv_dim();
    case kMambaHeads: return c.mamba.num_heads;
    case kMambaInner: return c.mamba.inner();
    case kMambaConvKernel: return c.mamba.conv_kernel;
    case kPerLayerDim: return c.per_layer_dim;
    case kPerLayerAll: return static_cast<int64_t>(c.num_layers) * c.per_layer_dim;
  }
  return 0;
}

Rows<LayerTensorRow> layer_tensor_rows() { return {kLayerRows, std::size(kLayerRows)}; }
Rows<ExpertTensorRow> expert_tensor_rows() { return {kExpertRows, std::size(kExpertRows)}; }
Rows<ModelTensorRow> model_tensor_rows() { return {kModelRows, std::size(kModelRows)}; }
Rows<FusedTensorRow> fused_tensor_rows() { return {kFusedRows, std::size(kFusedRows)}; }

const LayerTensorRow& layer_row(LayerTensor kind) {
  return kLayerRows[static_cast<size_t>(kind)];
}
const ExpertTensorRow& expert_row(ExpertTensor kind) {
  return kExpertRows[static_cast<size_t>(kind)];
}
const ModelTensorRow& model_row(ModelTensor kind) {
  return kModelRows[static_cast<size_t>(kind)];
}

std::string expert_name(std::string_view pattern, int expert) {
  std::string name(pattern);
  const size_t at = name.find("{e}");
  if (at != std::string::npos) name.replace(at, 3, std::to_string(expert));
  return name;
}

}  // namespace cbatch
