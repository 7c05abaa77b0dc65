// The mixture-of-experts launchers (moe.hpp, moe_gemm.hpp, swiglu.hpp's expert build) on the GPU against
// moe_case.hpp's CPU references, the cases test_moe_emulated.cpp runs through the block emulator: routing
// (decisions exactly the CPU's route_row; weights within a few ulps, the GPU's expf differing), the
// permutation (exactly group_by_expert), gather, clamped SwiGLU with expert biases, the grouped expert GEMMs
// (grouped and per-segment, with experts no row picked left untouched), and the combine. Outputs poisoned.
// The quantized experts (moe_quant_gemm.hpp): the GEMM against moe_quant_case.hpp's float64 reference (the
// cases test_moe_quant_gemm_emulated.cpp emulates), the per-row FP8 quantizer against fp8.hpp's rounding,
// and a gpt-oss-like sparse layer (MoeFfn) with MXFP4 and with FP8 experts against the cuBLAS path on the
// same values: only the products' accumulation order and where T rounds differ.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "cuda/common/cuda_context.hpp"
#include "cuda/elementwise/swiglu.hpp"
#include "cuda/moe/moe.hpp"
#include "cuda/moe/moe_ffn.hpp"
#include "cuda/moe/moe_gemm.hpp"
#include "cuda/moe/moe_quant_gemm.hpp"
#include "tests/cuda/moe_case.hpp"
#include "tests/cuda/moe_quant_case.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {
namespace {

std::vector<int32_t> to_host_i32(const DeviceBuffer<int32_t>& d) {
  std::vector<int32_t> v(d.size());
  if (!v.empty()) CUDA_CHECK(cudaMemcpy(v.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost));
  return v;
}

DeviceBuffer<uint8_t> to_device_u8(const std::vector<uint8_t>& host) {
  DeviceBuffer<uint8_t> d(host.size());
  if (!host.empty()) CUDA_CHECK(cudaMemcpy(d.get(), host.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

// q's experts on the device: quantized as q holds them (GGUF blocks, FP8 codes and row scales), or in T
// holding q's dequantised values.
template <typename T>
ExpertMatrix<T> device_experts(const QuantExperts& q, bool quantized) {
  ExpertMatrix<T> m;
  if (!quantized) {
    m.dense = to_device<T>(q.dequant);
    return m;
  }
  m.format = q.format == QuantFormat::kFp8Row ? ExpertFormat::kFp8Row : ExpertFormat::kBlocks;
  m.blocks = quant_format_dtype(q.format);
  m.quant = to_device_u8(q.bytes);
  if (!q.scales.empty()) m.scales = to_device<float>(q.scales);
  return m;
}

}  // namespace

TEST_CASE("moe_route: the CPU's route_row decisions under both rules, ties and k = E") {
  for (const RouteCase& rc : route_cases()) {
    CAPTURE(rc.num_experts);
    CAPTURE(rc.top_k);
    CAPTURE(rc.ties);
    CAPTURE(static_cast<int>(rc.router));
    const RouteInput in = make_route_input(rc, 100 + rc.num_experts + rc.top_k);
    std::vector<int32_t> want_experts;
    std::vector<float> want_weights;
    route_ref(rc, in, want_experts, want_weights);
    auto d_logits = to_device<float>(in.logits);
    DeviceBuffer<float> d_bias = in.bias.empty() ? DeviceBuffer<float>() : to_device<float>(in.bias);
    DeviceBuffer<int32_t> d_experts(want_experts.size());
    DeviceBuffer<float> d_weights(want_weights.size());
    poison(d_weights);
    moe_route(d_experts.get(), d_weights.get(), d_logits.get(), d_bias.get(), rc.num_rows,
              MoeRouteRule{rc.num_experts, rc.top_k, rc.renormalize, rc.router}, nullptr);
    CHECK(to_host_i32(d_experts) == want_experts);
    const std::vector<float> weights = to_host(d_weights);
    double worst = 0.0;
    for (size_t i = 0; i < weights.size(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(weights[i]) - want_weights[i]));
    }
    CHECK(worst < 1e-6);
  }
}

TEST_CASE("moe_permute: group_by_expert's offsets and entries, and the inverse maps") {
  for (const auto& [num_rows, num_experts, top_k] : {std::tuple{1, 8, 2}, std::tuple{37, 60, 4},
                                                     std::tuple{3000, 128, 8}, std::tuple{9, 6, 6}}) {
    CAPTURE(num_rows);
    CAPTURE(num_experts);
    const RouteCase rc{num_rows, num_experts, top_k, true, MoeRouter::kSoftmaxTopk, true, false};
    std::vector<int32_t> experts;
    std::vector<float> weights;
    route_ref(rc, make_route_input(rc, 9), experts, weights);
    const ExpertGroups want = group_by_expert(experts.data(), num_rows, MoeRouting{num_experts, top_k, true});
    auto d_experts = to_device_i32(experts);
    DeviceBuffer<int32_t> d_offsets(static_cast<size_t>(num_experts) + 1), d_entries(experts.size()),
        d_pick_slot(experts.size()), d_slot_expert(experts.size());
    moe_permute(d_offsets.get(), d_entries.get(), d_pick_slot.get(), d_slot_expert.get(), d_experts.get(),
                static_cast<int>(experts.size()), num_experts, nullptr);
    CHECK(to_host_i32(d_offsets) == want.offsets);
    const std::vector<int32_t> entries = to_host_i32(d_entries);
    CHECK(entries == want.entries);
    const std::vector<int32_t> pick_slot = to_host_i32(d_pick_slot), slot_expert = to_host_i32(d_slot_expert);
    size_t wrong = 0;
    for (size_t s = 0; s < entries.size(); ++s) {
      wrong += pick_slot[static_cast<size_t>(entries[s])] != static_cast<int32_t>(s);
      wrong += slot_expert[s] != experts[static_cast<size_t>(entries[s])];
    }
    CHECK(wrong == 0);
  }
}

// The expert products of a routed batch, grouped (where cuBLAS has it) and per segment, against a host
// product per pick; a poisoned expert no row picked must stay unread (its NaNs would show).
TEST_CASE_TEMPLATE("moe gather, the grouped expert GEMMs and the clamped SwiGLU with expert biases", T, float,
                   __nv_bfloat16, __half) {
  const CudaContext context(0);
  const int num_rows = 21, num_experts = 8, top_k = 2, dim = 64, width = 48;
  const RouteCase rc{num_rows, num_experts, top_k, true, MoeRouter::kSoftmaxTopk, false, false};
  RouteInput in = make_route_input(rc, 21);
  for (int r = 0; r < num_rows; ++r) in.logits[static_cast<size_t>(r) * num_experts + 3] = -100.0f;  // 3: never
  std::vector<int32_t> experts;
  std::vector<float> weights;
  route_ref(rc, in, experts, weights);
  const ExpertGroups g = group_by_expert(experts.data(), num_rows, MoeRouting{num_experts, top_k, true});
  const int picks = num_rows * top_k;
  const std::vector<float> h = round_to<T>(random_vector(static_cast<size_t>(num_rows) * dim, 1));
  std::vector<float> w = round_to<T>(random_vector(static_cast<size_t>(num_experts) * 2 * width * dim, 2, -0.3f, 0.3f));
  for (size_t i = 3 * 2 * width * dim; i < 4 * static_cast<size_t>(2 * width * dim); ++i) w[i] = NAN;
  const std::vector<float> bias = random_vector(static_cast<size_t>(num_experts) * 2 * width, 3);
  auto d_h = to_device<T>(h);
  auto d_w = to_device<T>(w);
  auto d_bias = to_device<float>(bias);
  auto d_entries = to_device_i32(g.entries);
  std::vector<int32_t> slot_expert(static_cast<size_t>(picks));
  for (int s = 0; s < picks; ++s) slot_expert[s] = experts[static_cast<size_t>(g.entries[s])];
  auto d_slot_expert = to_device_i32(slot_expert);
  DeviceBuffer<T> d_rows(static_cast<size_t>(picks) * dim), d_gate_up(static_cast<size_t>(picks) * 2 * width),
      d_hidden(static_cast<size_t>(picks) * width);
  for (const char* mode : {"grouped", "loop"}) {
    CAPTURE(mode);
    ExpertGemm<T> gemm(num_experts, std::string(mode) == "grouped");
    poison(d_rows);
    poison(d_hidden);
    moe_gather<T>(d_rows.get(), d_h.get(), d_entries.get(), picks, top_k, dim, context.stream());
    gemm.run(context.cublas(), context.stream(), g.offsets.data(), d_gate_up.get(), d_rows.get(), d_w.get(), 2 * width,
             dim, 0);
    swiglu<T>(d_hidden.get(), d_gate_up.get(), picks, width, context.stream(), Activation::kSwigluClamped,
              GatedParams{7.0f, 1.702f, d_bias.get(), d_slot_expert.get()});
    CUDA_CHECK(cudaStreamSynchronize(context.stream()));
    std::vector<double> want;
    for (int s = 0; s < picks; ++s) {
      const int e = slot_expert[s];
      const float* x = &h[static_cast<size_t>(g.entries[s] / top_k) * dim];
      const float* we = &w[static_cast<size_t>(e) * 2 * width * dim];
      for (int c = 0; c < width; ++c) {
        const float* b = &bias[static_cast<size_t>(e) * 2 * width];
        double gate = b[c], up = b[width + c];
        for (int i = 0; i < dim; ++i) {
          gate += static_cast<double>(we[static_cast<size_t>(c) * dim + i]) * x[i];
          up += static_cast<double>(we[static_cast<size_t>(width + c) * dim + i]) * x[i];
        }
        want.push_back(gated_ref(gate, up, Activation::kSwigluClamped, 7.0, 1.702));
      }
    }
    CHECK(rel_error(to_host(d_hidden), want) < 3 * tolerance<T>());
  }
}

TEST_CASE_TEMPLATE("moe_combine: un-permute and weighted sum in k order, down biases, shared expert", T, float,
                   __nv_bfloat16, __half) {
  for (const CombineCase& cc : combine_cases()) {
    CAPTURE(cc.dim);
    CombineInput in = make_combine_input(cc, 7 + cc.dim);
    in.expert_out = round_to<T>(in.expert_out);
    in.shared_out = round_to<T>(in.shared_out);
    in.h = round_to<T>(in.h);
    const std::vector<double> want = combine_ref(cc, in);
    auto d_expert_out = to_device<T>(in.expert_out);
    auto d_pick_slot = to_device_i32(in.pick_slot);
    auto d_experts = to_device_i32(in.experts);
    auto d_weights = to_device<float>(in.weights);
    DeviceBuffer<float> d_down_bias = cc.down_bias ? to_device<float>(in.down_bias) : DeviceBuffer<float>();
    DeviceBuffer<T> d_shared_out, d_h;
    DeviceBuffer<float> d_gate;
    MoeShared<T> shared;
    if (cc.shared) {
      d_shared_out = to_device<T>(in.shared_out);
      d_h = to_device<T>(in.h);
      d_gate = to_device<float>(in.shared_gate);
      shared = MoeShared<T>{d_shared_out.get(), d_h.get(), d_gate.get()};
    }
    DeviceBuffer<T> d_out(want.size());
    poison(d_out);
    moe_combine<T>(d_out.get(), d_expert_out.get(), d_pick_slot.get(), d_experts.get(), d_weights.get(),
                   d_down_bias.get(), shared, cc.num_rows, cc.top_k, cc.dim, nullptr);
    CHECK(rel_error(to_host(d_out), want) < tolerance<T>());
  }
}

TEST_CASE_TEMPLATE("moe_quant_gemm: GGUF-block (MXFP4, Q8_0, Q4_1, Q5_0, Q4_K, Q5_K, Q6_K) and per-row FP8 experts "
                   "against the float64 reference, uneven and empty experts, surplus CTAs writing nothing", T,
                   __nv_bfloat16, __half) {
  constexpr int kPoisonRows = 3;
  for (QuantFormat format : kQuantFormats) {
    for (const QuantGemmCase& qc : quant_gemm_cases(format)) {
      const std::string name = quant_format_name(format);
      CAPTURE(name);
      CAPTURE(qc.num_experts);
      const std::vector<int32_t> offsets = quant_offsets(qc.rows);
      const int num_picks = offsets.back();
      const QuantExperts q = make_quant_experts(format, qc.num_experts, qc.n, qc.k, 11 + qc.n + qc.k);
      const std::vector<float> x = round_to<T>(random_vector(static_cast<size_t>(num_picks) * qc.k, 5));
      const ExpertMatrix<T> w = device_experts<T>(q, true);
      auto d_x = to_device<T>(x);
      auto d_offsets = to_device_i32(offsets);
      DeviceBuffer<T> d_y(static_cast<size_t>(num_picks + kPoisonRows) * qc.n);
      poison(d_y);
      moe_quant_gemm<T>(d_y.get(), d_x.get(), w, d_offsets.get(), num_picks, qc.num_experts, qc.n, qc.k, nullptr);
      const std::vector<float> y = to_host(d_y);
      const std::vector<double> want = quant_gemm_ref(x, q, offsets, qc.n, qc.k);
      size_t written_past = 0;
      for (size_t i = want.size(); i < y.size(); ++i) written_past += !std::isnan(y[i]);
      CHECK(written_past == 0);
      if (!want.empty()) {
        CHECK(rel_error(std::vector<float>(y.begin(), y.begin() + static_cast<long>(want.size())), want) <
              quant_gemm_tolerance(std::is_same_v<T, __nv_bfloat16>));
      }
    }
  }
}

TEST_CASE_TEMPLATE("quantize_rows_fp8: each row's scale and codes as fp8.hpp rounds them; a zero row, a NaN row", T,
                   float, __nv_bfloat16, __half) {
  const int rows = 37, cols = 96;
  std::vector<float> x = random_vector(static_cast<size_t>(rows) * cols, 8, -2.0f, 2.0f);
  for (int r = 0; r < rows; ++r) {  // magnitudes from 2^-8 to 2^10 across rows
    for (int i = 0; i < cols; ++i) x[static_cast<size_t>(r) * cols + i] *= std::ldexp(1.0f, r / 2 - 8);
  }
  for (int i = 0; i < cols; ++i) x[static_cast<size_t>(cols) + i] = 0.0f;  // row 1
  x[2 * static_cast<size_t>(cols) + 5] = NAN;                               // row 2
  x = round_to<T>(x);
  auto d_x = to_device<T>(x);
  DeviceBuffer<uint8_t> d_codes(x.size());
  DeviceBuffer<float> d_scales(rows);
  quantize_rows_fp8<T>(d_codes.get(), d_scales.get(), d_x.get(), rows, cols, nullptr);
  std::vector<uint8_t> codes(x.size());
  CUDA_CHECK(cudaMemcpy(codes.data(), d_codes.get(), d_codes.bytes(), cudaMemcpyDeviceToHost));
  const std::vector<float> scales = to_host(d_scales);
  size_t wrong = 0;
  for (int r = 0; r < rows; ++r) {
    if (r == 2) {
      CHECK(scales[2] == INFINITY);  // refused by the upload
      continue;
    }
    float amax = 0.0f;
    for (int i = 0; i < cols; ++i) amax = std::max(amax, std::fabs(x[static_cast<size_t>(r) * cols + i]));
    const float scale = amax / kFp8E4M3Max > 0.0f ? amax / kFp8E4M3Max : 1.0f;
    wrong += scales[static_cast<size_t>(r)] != scale;
    for (int i = 0; i < cols; ++i) {
      const size_t at = static_cast<size_t>(r) * cols + i;
      wrong += codes[at] != fp8_e4m3_from_float(x[at] / scale);
    }
  }
  CHECK(wrong == 0);
}

namespace {

// A gpt-oss-like sparse layer: 8 experts, top 4 of the biased logits then softmax, expert biases, clamped
// SwiGLU; dim 64 and width 96 (multiples of 32, as the quantized GEMM takes).
ModelConfig quant_layer_config() {
  ModelConfig c;
  c.dim = 64;
  c.num_layers = 1;
  c.layer_sparse = {1};
  c.num_experts = 8;
  c.experts_per_token = 4;
  c.expert_hidden_dim = 96;
  c.moe_router = MoeRouter::kTopkSoftmax;
  c.router_bias = c.expert_bias = true;
  c.activation = Activation::kSwigluClamped;
  c.swiglu_limit = 7.0f;
  c.swiglu_alpha = 1.702f;
  return c;
}

// The layer's router and biases on the device, its experts left empty.
template <typename T>
LayerWeights<T> quant_layer_weights(const ModelConfig& c) {
  LayerWeights<T> w;
  LinearWeight<T>& router = w.linear[LayerTensor::kRouter];
  router.out = c.num_experts;
  router.in = c.dim;
  router.weight = to_device<T>(random_vector(static_cast<size_t>(c.num_experts) * c.dim, 31, -1.5f, 1.5f));
  w.vectors[LayerTensor::kRouterBias] =
      to_device<float>(random_vector(static_cast<size_t>(c.num_experts), 32, -0.5f, 0.5f));
  w.expert_vectors[ExpertProduct::kGateUpBias] = to_device<float>(
      random_vector(static_cast<size_t>(c.num_experts) * 2 * c.expert_hidden_dim, 33, -0.3f, 0.3f));
  w.expert_vectors[ExpertTensor::kDownBias] =
      to_device<float>(random_vector(static_cast<size_t>(c.num_experts) * c.dim, 34, -0.3f, 0.3f));
  return w;
}

// w's routed experts: every expert's gate|up, and down.
template <typename T>
void set_experts(LayerWeights<T>& w, ExpertMatrix<T> gate_up, ExpertMatrix<T> down) {
  w.experts[ExpertProduct::kGateUp] = std::move(gate_up);
  w.experts[ExpertTensor::kDown] = std::move(down);
}

// out (n, dim) of the layer w on h (n, dim); expects whether it waited (returned the touched count at once)
// and the touched count either way.
template <typename T>
std::vector<float> run_layer(MoeFfn<T>& ffn, const LayerWeights<T>& w, const DeviceBuffer<T>& d_h, int n,
                             const CudaContext& context, int& touched) {
  StepProfiler profiler(false);
  DeviceBuffer<T> d_out(d_h.size());
  poison(d_out);
  const int returned = ffn.forward(w, d_h.get(), n, d_out.get(), context, profiler);
  CUDA_CHECK(cudaStreamSynchronize(context.stream()));
  const int later = ffn.take_touched();
  CHECK((returned == 0 || later == 0));  // one or the other
  touched = returned + later;
  const bool quantized =
      w.experts[ExpertProduct::kGateUp].is_quantized() && w.experts[ExpertTensor::kDown].is_quantized();
  CHECK(later == (quantized ? touched : 0));
  return to_host(d_out);
}

}  // namespace

// The tolerance: both paths round the gathered rows, gate|up, the activation and the output to T at the
// same points and share the routing; they differ in the products' fp32 accumulation order (a T rounding
// that flips by one ulp here and there) and, for FP8, in where code * scale meets T (the cuBLAS path's
// weights are rounded to T, the quantized path scales in fp32). Both are errors of order u (2^-8 bf16,
// 2^-11 fp16) in the norm: 2 tolerance<T>() is 5 u (bf16) and 20 u (fp16), while a wrong expert, nibble
// or scale is an error of order 1. Against the unquantized weights FP8 adds its own rounding (E4M3: 2^-4
// relative at worst, about 2^-4 / sqrt(3) in the norm): 0.1.
TEST_CASE_TEMPLATE("MoeFfn with MXFP4 and with FP8 experts (no host wait) equals the cuBLAS path on the same values",
                   T, __nv_bfloat16, __half) {
  const CudaContext context(0);
  const ModelConfig c = quant_layer_config();
  const int dim = c.dim, width = c.expert_hidden_dim, num_experts = c.num_experts;
  MoeFfn<T> ffn(c, 16, true);
  for (int n : {3, 16}) {
    CAPTURE(n);
    auto d_h = to_device<T>(random_vector(static_cast<size_t>(n) * dim, 35 + n));
    // MXFP4: the blocks, against T experts holding their values (exact in bf16 and fp16); then mixed (the
    // down product in T), which waits.
    {
      const QuantExperts gate_up = make_quant_experts(QuantFormat::kMxfp4, num_experts, 2 * width, dim, 36, 118);
      const QuantExperts down = make_quant_experts(QuantFormat::kMxfp4, num_experts, dim, width, 37, 118);
      LayerWeights<T> wq = quant_layer_weights<T>(c), wt = quant_layer_weights<T>(c),
                         wm = quant_layer_weights<T>(c);
      set_experts(wq, device_experts<T>(gate_up, true), device_experts<T>(down, true));
      set_experts(wt, device_experts<T>(gate_up, false), device_experts<T>(down, false));
      set_experts(wm, device_experts<T>(gate_up, true), device_experts<T>(down, false));
      int touched_t = 0, touched_q = 0, touched_m = 0;
      const std::vector<float> out_t = run_layer(ffn, wt, d_h, n, context, touched_t);
      const std::vector<float> out_q = run_layer(ffn, wq, d_h, n, context, touched_q);
      const std::vector<float> out_m = run_layer(ffn, wm, d_h, n, context, touched_m);
      const std::vector<double> ref(out_t.begin(), out_t.end());
      CHECK(rel_error(out_q, ref) < 2 * tolerance<T>());
      CHECK(rel_error(out_m, ref) < 2 * tolerance<T>());
      CHECK(touched_q == touched_t);
      CHECK(touched_m == touched_t);
      CHECK(touched_t >= c.experts_per_token);
    }
    // FP8: quantized on the device from T weights as the upload does, against T experts holding
    // code * scale, and loosely against the weights before quantization.
    {
      const size_t gu = static_cast<size_t>(num_experts) * 2 * width * dim, dn = static_cast<size_t>(num_experts) * dim * width;
      const std::vector<float> gate_up = round_to<T>(random_vector(gu, 38, -0.2f, 0.2f));
      const std::vector<float> down = round_to<T>(random_vector(dn, 39, -0.2f, 0.2f));
      auto quantize = [&](const std::vector<float>& w, int k) {
        const auto d_w = to_device<T>(w);
        QuantExperts q{QuantFormat::kFp8Row, std::vector<uint8_t>(w.size()),
                       std::vector<float>(w.size() / static_cast<size_t>(k)), std::vector<float>(w.size())};
        DeviceBuffer<uint8_t> d_codes(w.size());
        DeviceBuffer<float> d_scales(q.scales.size());
        quantize_rows_fp8<T>(d_codes.get(), d_scales.get(), d_w.get(), static_cast<int64_t>(q.scales.size()), k,
                             nullptr);
        CUDA_CHECK(cudaMemcpy(q.bytes.data(), d_codes.get(), d_codes.bytes(), cudaMemcpyDeviceToHost));
        q.scales = to_host(d_scales);
        for (size_t i = 0; i < w.size(); ++i) {
          q.dequant[i] = fp8_e4m3_to_float(q.bytes[i]) * q.scales[i / static_cast<size_t>(k)];
        }
        q.dequant = round_to<T>(q.dequant);  // what T experts can hold
        return q;
      };
      const QuantExperts gate_up_q = quantize(gate_up, dim), down_q = quantize(down, width);
      LayerWeights<T> wq = quant_layer_weights<T>(c), wt = quant_layer_weights<T>(c),
                         wo = quant_layer_weights<T>(c);
      set_experts(wq, device_experts<T>(gate_up_q, true), device_experts<T>(down_q, true));
      set_experts(wt, device_experts<T>(gate_up_q, false), device_experts<T>(down_q, false));
      wo.experts[ExpertProduct::kGateUp].dense = to_device<T>(gate_up);
      wo.experts[ExpertTensor::kDown].dense = to_device<T>(down);
      int touched_t = 0, touched_q = 0, touched_o = 0;
      const std::vector<float> out_t = run_layer(ffn, wt, d_h, n, context, touched_t);
      const std::vector<float> out_q = run_layer(ffn, wq, d_h, n, context, touched_q);
      const std::vector<float> out_o = run_layer(ffn, wo, d_h, n, context, touched_o);
      CHECK(rel_error(out_q, std::vector<double>(out_t.begin(), out_t.end())) < 2 * tolerance<T>());
      CHECK(rel_error(out_q, std::vector<double>(out_o.begin(), out_o.end())) < 0.1);
      CHECK(touched_q == touched_t);
    }
  }
}

}  // namespace cbatch::test
