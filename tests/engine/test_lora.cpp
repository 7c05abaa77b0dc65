// LoRA: the PEFT loader (scales, slots in the fused products, q/k rows reordered to the base's RoPE layout,
// errors naming the adapter), the grouped product against matmul_ref (and batch invariance), and the
// --max-loras rotation (never more adapters in a step, no adapter starved).
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "engine/base/error.hpp"
#include "engine/base/thread_pool.hpp"
#include "engine/core/lora_rotation.hpp"
#include "engine/core/scheduler.hpp"
#include "engine/cpu/cpu_lora.hpp"
#include "engine/model/lora_adapter.hpp"

using namespace cbatch;

namespace {

ModelConfig tiny_config(RopeLayout layout) {
  ModelConfig c;
  c.dim = 32;
  c.hidden_dim = 48;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.vocab_size = 100;
  c.rope_layout = layout;
  return c;
}

std::vector<float> random_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

struct TensorSpec {
  std::string name;
  int64_t rows, cols;
  std::vector<float> values;
};

// A PEFT directory: adapter_config.json and an F32 adapter_model.safetensors.
void write_peft(const std::string& dir, const std::string& config, const std::vector<TensorSpec>& tensors) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/adapter_config.json") << config;
  std::string header = "{";
  size_t offset = 0;
  for (const TensorSpec& t : tensors) {
    const size_t bytes = t.values.size() * 4;
    if (header.size() > 1) header += ",";
    header += "\"" + t.name + "\":{\"dtype\":\"F32\",\"shape\":[" +
              std::to_string(t.rows) + "," + std::to_string(t.cols) + "],\"data_offsets\":[" +
              std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::ofstream out(dir + "/adapter_model.safetensors", std::ios::binary);
  const uint64_t len = header.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << header;
  for (const TensorSpec& t : tensors) out.write(reinterpret_cast<const char*>(t.values.data()), static_cast<std::streamsize>(t.values.size() * 4));
}

// A module's PEFT tensor name: a bare module name is put under self_attn (or mlp for down_proj).
std::string peft_name(int layer, const std::string& module, const char* ab) {
  const std::string path = module.find('.') != std::string::npos ? module
                           : (module == "down_proj" ? "mlp." : "self_attn.") + module;
  return "base_model.model.model.layers." + std::to_string(layer) + "." + path + ".lora_" + ab + ".weight";
}

struct TempDir {
  std::string path = (std::filesystem::temp_directory_path() / ("cbatch_lora_" + std::to_string(::getpid()))).string();
  ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace

TEST_CASE("lora loader: PEFT scales, fused-product slots and q rows in the base's RoPE order") {
  const ModelConfig base = tiny_config(RopeLayout::kAdjacentPairs);
  TempDir tmp;
  const int rank = 4;
  const std::vector<float> qa = random_values(rank * 32, 1), qb = random_values(32 * rank, 2);
  const std::vector<float> kb = random_values(16 * rank, 3);
  write_peft(tmp.path, R"({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "use_rslora": true, "base_model_name_or_path": "x"})",
             {{peft_name(1, "q_proj", "A"), rank, 32, qa}, {peft_name(1, "q_proj", "B"), 32, rank, qb},
              {peft_name(0, "k_proj", "A"), rank, 32, qa}, {peft_name(0, "k_proj", "B"), 16, rank, kb},
              {peft_name(0, "down_proj", "A"), rank, 48, random_values(rank * 48, 4)},
              {peft_name(0, "down_proj", "B"), 32, rank, random_values(32 * rank, 5)}});
  const LoraAdapter a = load_lora_adapter({"ad", tmp.path}, base, 64);
  REQUIRE(a.pairs.size() == 3);
  CHECK(a.rank == 4);
  CHECK(a.format == "peft");
  std::map<std::string, const LoraPair*> by_module;
  for (const LoraPair& p : a.pairs) by_module[p.module] = &p;
  const LoraPair& q = *by_module.at("self_attn.q_proj");
  const LoraPair& k = *by_module.at("self_attn.k_proj");
  const LoraPair& down = *by_module.at("mlp.down_proj");
  CHECK(q.scale == doctest::Approx(8.0 / 2.0));  // rsLoRA: alpha / sqrt(r)
  CHECK(q.layer == 1);
  CHECK((q.product == LoraProduct::kQkv && q.row_offset == 0 && q.rows == 32));
  CHECK((k.product == LoraProduct::kQkv && k.row_offset == 32 && k.rows == 16));
  CHECK((down.product == LoraProduct::kDown && down.in_features == 48 && down.rows == 32));
  CHECK(q.a == qa);
  // HF row h*8 + i*4 + j lands at h*8 + 2j + i in an adjacent-pairs base.
  for (int h = 0; h < 4; ++h) {
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 4; ++j) {
        for (int r = 0; r < rank; ++r) CHECK(q.b[(h * 8 + 2 * j + i) * rank + r] == qb[(h * 8 + i * 4 + j) * rank + r]);
      }
    }
  }
  // A halves base keeps the rows as they are; max rank below 4 refuses the adapter by name.
  const LoraAdapter halves = load_lora_adapter({"ad", tmp.path}, tiny_config(RopeLayout::kHalves), 64);
  for (const LoraPair& p : halves.pairs) {
    if (p.module == "self_attn.q_proj") CHECK(p.b == qb);
  }
  CHECK_THROWS_WITH_AS(load_lora_adapter({"ad", tmp.path}, base, 2), doctest::Contains("'ad'"), Error);
  CHECK_THROWS_WITH_AS(load_lora_adapter({"ad", tmp.path}, base, 2), doctest::Contains("above --max-lora-rank 2"), Error);
  ModelConfig narrower = base;
  narrower.hidden_dim = 40;
  CHECK_THROWS_WITH_AS(load_lora_adapter({"ad", tmp.path}, narrower, 64), doctest::Contains("do not match"), Error);
  ModelConfig fewer = base;
  fewer.num_layers = 1;
  CHECK_THROWS_WITH_AS(load_lora_adapter({"ad", tmp.path}, fewer, 64), doctest::Contains("layer 1"), Error);
  // A hybrid base: layer 0's k_proj is a DeltaNet layer's, which has none: refused naming adapter, layer, module.
  ModelConfig hybrid = base;
  hybrid.layer_kinds = {LayerKind::kDeltaNet, LayerKind::kAttention};
  hybrid.deltanet = {2, 4, 8, 8, 4};
  for (const char* needle : {"'ad'", "layer 0 self_attn.k_proj", "no such projection"}) {
    CHECK_THROWS_WITH_AS(load_lora_adapter({"ad", tmp.path}, hybrid, 64), doctest::Contains(needle), Error);
  }
  // A layer that reads another's K/V keeps no k_proj of its own: an adapter on it is skipped with a note.
  ModelConfig shared_kv = base;
  shared_kv.layer_kv_source = {1, 1};
  const LoraAdapter shared = load_lora_adapter({"ad", tmp.path}, shared_kv, 64);
  CHECK(shared.pairs.size() == 2);
  REQUIRE(shared.notes.size() == 1);
  CHECK(shared.notes[0].find("layer 0 self_attn.k_proj is skipped") != std::string::npos);
  CHECK_THROWS_WITH_AS(load_lora_adapter({"ad", tmp.path + "/none"}, base, 64), doctest::Contains("no such file"), Error);
  CHECK_THROWS_WITH_AS(parse_lora_module("=x"), doctest::Contains("NAME=PATH"), Error);
}

TEST_CASE("lora loader: targets by layer kind (DeltaNet, gated q, Mamba-2, short conv, plain MLP, Gemma 4 sizes)") {
  TempDir tmp;
  const int rank = 2;
  auto pair = [&](int layer, const std::string& module, int64_t rows, int64_t in, uint64_t seed) {
    return std::vector<TensorSpec>{{peft_name(layer, module, "A"), rank, in, random_values(rank * in, seed)},
                                   {peft_name(layer, module, "B"), rows, rank, random_values(rows * rank, seed + 1)}};
  };
  auto adapter_of = [&](const std::vector<std::vector<TensorSpec>>& pairs) {
    std::vector<TensorSpec> tensors;
    for (const auto& p : pairs) tensors.insert(tensors.end(), p.begin(), p.end());
    std::filesystem::remove_all(tmp.path);
    write_peft(tmp.path, R"({"peft_type": "LORA", "r": 2, "lora_alpha": 2})", tensors);
    return LoraModuleArg{"ad", tmp.path};
  };
  auto slot = [](const LoraAdapter& a, const std::string& module) {
    const auto it = std::find_if(a.pairs.begin(), a.pairs.end(), [&](const LoraPair& p) { return p.module == module; });
    REQUIRE(it != a.pairs.end());
    return std::make_tuple(it->product, it->row_offset, it->rows, it->in_features);
  };
  // Qwen3.5: a DeltaNet layer, then gated attention (q_proj 2 q_dim rows, k after them).
  ModelConfig qwen = tiny_config(RopeLayout::kHalves);
  qwen.layer_kinds = {LayerKind::kDeltaNet, LayerKind::kAttention};
  qwen.deltanet = {2, 4, 8, 8, 4};  // conv_dim 64, value_dim 32
  qwen.attn_output_gate = true;
  const LoraAdapter q35 = load_lora_adapter(adapter_of({pair(0, "linear_attn.in_proj_qkv", 64, 32, 1),
                                                        pair(0, "linear_attn.in_proj_z", 32, 32, 3),
                                                        pair(0, "linear_attn.in_proj_a", 4, 32, 5),
                                                        pair(0, "linear_attn.out_proj", 32, 32, 7),
                                                        pair(1, "self_attn.q_proj", 64, 32, 9),
                                                        pair(1, "self_attn.k_proj", 16, 32, 11)}), qwen, 8);
  CHECK(slot(q35, "linear_attn.in_proj_qkv") == std::make_tuple(LoraProduct::kSsmQkvz, 0, 64, 32));
  CHECK(slot(q35, "linear_attn.in_proj_z") == std::make_tuple(LoraProduct::kSsmQkvz, 64, 32, 32));
  CHECK(slot(q35, "linear_attn.in_proj_a") == std::make_tuple(LoraProduct::kSsmBa, 4, 4, 32));
  CHECK(slot(q35, "linear_attn.out_proj") == std::make_tuple(LoraProduct::kSsmOut, 0, 32, 32));
  CHECK(slot(q35, "self_attn.q_proj") == std::make_tuple(LoraProduct::kQkv, 0, 64, 32));
  CHECK(slot(q35, "self_attn.k_proj") == std::make_tuple(LoraProduct::kQkv, 64, 16, 32));
  // The gated q with q_dim rows (no gate rows) does not match; a DeltaNet module on the attention layer is refused.
  CHECK_THROWS_WITH_AS(load_lora_adapter(adapter_of({pair(1, "self_attn.q_proj", 32, 32, 1)}), qwen, 8),
                       doctest::Contains("layer 1 self_attn.q_proj: shapes"), Error);
  CHECK_THROWS_WITH_AS(load_lora_adapter(adapter_of({pair(1, "linear_attn.out_proj", 32, 32, 1)}), qwen, 8),
                       doctest::Contains("layer 1 linear_attn.out_proj: layer 1 (attention)"), Error);
  // Qwen3-Next: fused in_proj_qkvz and in_proj_ba, whole products; the unfused names are refused there.
  ModelConfig next = qwen;
  next.deltanet.grouped_qkvz = next.deltanet.grouped_ba = true;
  const LoraAdapter q3n = load_lora_adapter(adapter_of({pair(0, "linear_attn.in_proj_qkvz", 96, 32, 1),
                                                        pair(0, "linear_attn.in_proj_ba", 8, 32, 3)}), next, 8);
  CHECK(slot(q3n, "linear_attn.in_proj_qkvz") == std::make_tuple(LoraProduct::kSsmQkvz, 0, 96, 32));
  CHECK(slot(q3n, "linear_attn.in_proj_ba") == std::make_tuple(LoraProduct::kSsmBa, 0, 8, 32));
  CHECK_THROWS_WITH_AS(load_lora_adapter(adapter_of({pair(0, "linear_attn.in_proj_z", 32, 32, 1)}), next, 8),
                       doctest::Contains("grouped by key head"), Error);
  // Nemotron-H: Mamba-2 mixer.in_proj / out_proj and a plain MLP layer's mixer.up_proj / down_proj; experts refused.
  ModelConfig nemo = tiny_config(RopeLayout::kHalves);
  nemo.layer_kinds = {LayerKind::kMamba2, LayerKind::kMlp};
  nemo.single_sublayer = true;
  nemo.gated_ffn = false;
  nemo.mamba = {};
  nemo.mamba.num_heads = 4;
  nemo.mamba.head_dim = 8;
  nemo.mamba.state_size = 4;
  nemo.mamba.num_groups = 1;
  nemo.mamba.conv_kernel = 4;
  const int64_t in_proj = nemo.mamba.in_proj_dim();
  const LoraAdapter nh = load_lora_adapter(adapter_of({pair(0, "mixer.in_proj", in_proj, 32, 1),
                                                       pair(0, "mixer.out_proj", 32, 32, 3),
                                                       pair(1, "mixer.up_proj", 48, 32, 5),
                                                       pair(1, "mixer.down_proj", 32, 48, 7)}), nemo, 8);
  CHECK(slot(nh, "mixer.in_proj") == std::make_tuple(LoraProduct::kMambaIn, 0, in_proj, 32));
  CHECK(slot(nh, "mixer.out_proj") == std::make_tuple(LoraProduct::kMambaOut, 0, 32, 32));
  CHECK(slot(nh, "mixer.up_proj") == std::make_tuple(LoraProduct::kGateUp, 0, 48, 32));
  CHECK(slot(nh, "mixer.down_proj") == std::make_tuple(LoraProduct::kDown, 0, 32, 48));
  CHECK_THROWS_WITH_AS(load_lora_adapter(adapter_of({pair(0, "mixer.up_proj", 48, 32, 1)}), nemo, 8),
                       doctest::Contains("layer 0 mixer.up_proj: layer 0 (Mamba-2)"), Error);
  CHECK_THROWS_WITH_AS(load_lora_adapter(adapter_of({pair(0, "mlp.experts.0.up_proj", 48, 32, 1)}), nemo, 8),
                       doctest::Contains("not one cbatch adapts"), Error);
  // LFM2: conv.in_proj (B|C|x, 3 dim rows) and feed_forward.w1 / w3 / w2 in the gate|up product.
  ModelConfig lfm = tiny_config(RopeLayout::kHalves);
  lfm.layer_kinds = {LayerKind::kShortConv, LayerKind::kAttention};
  lfm.short_conv_kernel = 3;
  const LoraAdapter lf = load_lora_adapter(adapter_of({pair(0, "conv.in_proj", 96, 32, 1),
                                                       pair(0, "conv.out_proj", 32, 32, 3),
                                                       pair(0, "feed_forward.w3", 48, 32, 5),
                                                       pair(1, "feed_forward.w2", 32, 48, 7)}), lfm, 8);
  CHECK(slot(lf, "conv.in_proj") == std::make_tuple(LoraProduct::kShortConvIn, 0, 96, 32));
  CHECK(slot(lf, "conv.out_proj") == std::make_tuple(LoraProduct::kShortConvOut, 0, 32, 32));
  CHECK(slot(lf, "feed_forward.w3") == std::make_tuple(LoraProduct::kGateUp, 48, 48, 32));
  CHECK(slot(lf, "feed_forward.w2") == std::make_tuple(LoraProduct::kDown, 0, 32, 48));
  // Gemma 4's global layer (1): its own head size and K/V heads, values are its keys (no v_proj).
  ModelConfig g4 = tiny_config(RopeLayout::kHalves);
  g4.layer_window = {16, 0};
  g4.global_head_dim = 16;
  g4.global_kv_heads = 1;
  g4.global_values_are_keys = true;
  const LoraAdapter gem = load_lora_adapter(adapter_of({pair(1, "self_attn.q_proj", 64, 32, 1),
                                                        pair(1, "self_attn.k_proj", 16, 32, 3),
                                                        pair(1, "self_attn.o_proj", 32, 64, 5),
                                                        pair(0, "self_attn.v_proj", 16, 32, 7)}), g4, 8);
  CHECK(slot(gem, "self_attn.k_proj") == std::make_tuple(LoraProduct::kQkv, 64, 16, 32));
  CHECK(slot(gem, "self_attn.o_proj") == std::make_tuple(LoraProduct::kO, 0, 32, 64));
  CHECK(slot(gem, "self_attn.v_proj") == std::make_tuple(LoraProduct::kQkv, 48, 16, 32));
  CHECK_THROWS_WITH_AS(load_lora_adapter(adapter_of({pair(1, "self_attn.v_proj", 16, 32, 1)}), g4, 8),
                       doctest::Contains("values are its keys"), Error);
}

TEST_CASE("lora product: grouped shrink/expand equals matmul_ref per row and does not depend on the batch") {
  ThreadPool pool(2);
  const ModelConfig base = tiny_config(RopeLayout::kHalves);
  std::vector<LoraAdapter> adapters(2);
  for (int a = 0; a < 2; ++a) {  // adapter 1: rank 3 on v; adapter 2: rank 5 on q and v
    const int rank = a == 0 ? 3 : 5;
    for (const auto& [offset, rows] : a == 0 ? std::vector<std::pair<int, int>>{{48, 16}}
                                             : std::vector<std::pair<int, int>>{{0, 32}, {48, 16}}) {
      LoraPair p;
      p.layer = 1;
      p.product = LoraProduct::kQkv;
      p.row_offset = offset;
      p.rows = rows;
      p.in_features = 32;
      p.rank = rank;
      p.scale = 0.5f + static_cast<float>(a);
      p.a = random_values(static_cast<size_t>(rank * 32), 10 + a + offset);
      p.b = random_values(static_cast<size_t>(rows * rank), 20 + a + offset);
      adapters[a].pairs.push_back(p);
    }
  }
  CpuLoraSet set(adapters, base.num_layers, pool);
  const int m = 9, out = 64;  // qkv rows: 32 + 16 + 16
  const std::vector<int32_t> row_adapter = {1, 0, 2, 2, 1, 0, 1, 2, 1};
  const std::vector<float> x = random_values(m * 32, 7);
  const std::vector<float> y0 = random_values(m * out, 8);
  std::vector<float> y = y0;
  set.add(LoraProduct::kQkv, 1, group_lora_rows(row_adapter), x.data(), 32, y.data(), out, pool);
  for (int r = 0; r < m; ++r) {
    std::vector<float> want(y0.begin() + r * out, y0.begin() + (r + 1) * out);
    if (row_adapter[r] != 0) {
      for (const LoraPair& p : adapters[row_adapter[r] - 1].pairs) {
        std::vector<float> t(p.rank), u(p.rows), sb(p.b.size());
        for (size_t i = 0; i < sb.size(); ++i) sb[i] = p.scale * p.b[i];
        matmul_ref(&x[r * 32], p.a.data(), t.data(), 1, p.rank, 32);
        matmul_ref(t.data(), sb.data(), u.data(), 1, p.rows, p.rank);
        for (int j = 0; j < p.rows; ++j) want[p.row_offset + j] += u[j];
      }
    }
    for (int j = 0; j < out; ++j) CHECK(y[r * out + j] == want[j]);
    // The row alone gives the same bits.
    std::vector<float> alone(y0.begin() + r * out, y0.begin() + (r + 1) * out);
    set.add(LoraProduct::kQkv, 1, group_lora_rows({row_adapter[r]}), &x[r * 32], 32, alone.data(), out, pool);
    CHECK(std::memcmp(alone.data(), &y[r * out], out * sizeof(float)) == 0);
  }
  // Enough rows that the (group, pair) tasks spread over the threads: the same bits as on one thread.
  const int big = 1500;
  std::vector<int32_t> big_adapter(big);
  for (int r = 0; r < big; ++r) big_adapter[r] = r % 3;
  const std::vector<float> big_x = random_values(big * 32, 9);
  std::vector<float> two = random_values(big * out, 10), one = two;
  set.add(LoraProduct::kQkv, 1, group_lora_rows(big_adapter), big_x.data(), 32, two.data(), out, pool);
  ThreadPool single(1);
  set.add(LoraProduct::kQkv, 1, group_lora_rows(big_adapter), big_x.data(), 32, one.data(), out, single);
  CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
  CHECK(one != random_values(big * out, 10));
  std::vector<float> other_layer = y0;  // layer 0 has no pairs: untouched
  set.add(LoraProduct::kQkv, 0, group_lora_rows(row_adapter), x.data(), 32, other_layer.data(), out, pool);
  CHECK(other_layer == y0);
}

TEST_CASE("lora rotation: a blocked adapter makes the oldest active one drain, then takes its slot") {
  LoraRotation rot(2);
  rot.set_running({});
  CHECK(rot.may_admit(0));
  CHECK(rot.may_admit(5));
  CHECK(rot.may_admit(7));
  CHECK(rot.may_admit(5));
  CHECK_FALSE(rot.may_admit(9));  // both slots taken
  rot.note_blocked(9);
  CHECK(rot.draining() == 5);
  CHECK_FALSE(rot.may_admit(5));  // draining: no new sequences
  CHECK(rot.may_admit(7));
  CHECK(rot.may_admit(0));       // the base model takes no slot
  rot.set_running({7, 0, 5});     // 5 still runs
  CHECK_FALSE(rot.may_admit(9));
  rot.set_running({7, 7});        // 5 finished: its slot is kept for 9
  CHECK(rot.draining() == 0);
  CHECK_FALSE(rot.may_admit(5));
  CHECK_FALSE(rot.may_admit(4));
  CHECK(rot.may_admit(9));
  CHECK((rot.active() == std::vector<int>{7, 9}));
}

namespace {

// Continuous scheduling of `loras` (one adapter id per sequence, prompt 6, 4 tokens each) under max_loras:
// returns each sequence's finish step; checks every step's adapter count.
std::vector<int> run_adapters(const std::vector<int>& loras, int max_loras, int max_seqs) {
  std::vector<std::unique_ptr<Sequence>> seqs;
  SchedulerConfig config{Mode::kContinuous, 64, max_seqs, 4};
  config.max_loras = max_loras;
  BlockManager blocks(256, 4);
  auto scheduler = make_scheduler(config, blocks);
  for (size_t i = 0; i < loras.size(); ++i) {
    auto seq = std::make_unique<Sequence>();
    seq->tokens.assign(6, 1);
    seq->num_prompt_tokens = 6;
    seq->max_total_tokens = 10;
    auto request = std::make_shared<Request>();
    request->index = static_cast<int64_t>(i);
    request->lora_id = loras[i];
    seq->request = request;
    scheduler->add(seq.get());
    seqs.push_back(std::move(seq));
  }
  std::vector<int> finish(loras.size(), -1);
  for (int step = 0; scheduler->has_work(); ++step) {
    REQUIRE(step < 10000);
    StepPlan plan = scheduler->schedule();
    std::set<int> adapters;
    for (const ScheduledSeq& s : plan.seqs) {
      if (s.seq->request->lora_id != 0) adapters.insert(s.seq->request->lora_id);
      s.seq->num_computed += s.num_tokens;
      if (!s.samples) continue;
      s.seq->tokens.push_back(7);
      if (s.seq->num_tokens() >= s.seq->max_total_tokens) {
        s.seq->finish_reason = FinishReason::kLength;
        finish[static_cast<size_t>(s.seq->request->index)] = step;
      }
    }
    CHECK(static_cast<int>(adapters.size()) <= max_loras);
    scheduler->on_step_done(plan);
  }
  return finish;
}

}  // namespace

TEST_CASE("lora scheduling: at most --max-loras adapters a step, and a late adapter is not starved") {
  // Adapter 1 has 30 sequences queued before adapter 2's one; 4 run at a time, one adapter per step.
  std::vector<int> loras(30, 1);
  loras.push_back(2);
  loras.insert(loras.end(), {0, 0, 1, 3, 3, 1});
  const std::vector<int> finish = run_adapters(loras, 1, 4);
  for (int f : finish) CHECK(f >= 0);
  const int last_of_1 = *std::max_element(finish.begin(), finish.begin() + 30);
  // Adapter 2 waits only for adapter 1's running sequences to drain, not for its whole queue.
  CHECK(finish[30] < last_of_1);
  CHECK(finish[30] < 20);
  // Many adapters, two slots: everyone finishes, never more than two adapters in a step.
  std::vector<int> many;
  for (int i = 0; i < 40; ++i) many.push_back(1 + (i * 7) % 6);
  for (int f : run_adapters(many, 2, 8)) CHECK(f >= 0);
}
