// Linear weights kept in the model's blocks (--cuda-kernel weights=blocks). Host suite: the rule of which
// weights stay in blocks (linear_blocks.hpp: fused parts of one type, k the block GEMM reads, no act-order, no
// random non-MXFP4 parts) and the load note. GPU: a LinearWeight in blocks through LinearRunner against the same
// bytes decoded to T (the dequant path) for m = 1..256: the block GEMM's rows (m <= kBlockGemmMaxRows; n = 200
// takes the device's split of k) within the block GEMM's tolerance of the float64 product, the scratch path's
// rows bit for bit the T path's (the same decoder, the same cuBLAS GEMM); every block type; and the runner's
// refusal of a weight past its scratch or its split-k sums, or of a type the GEMM does not read.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/backend/weight_convert.hpp"
#include "cuda/common/cuda_context.hpp"
#include "cuda/gemm/linear.hpp"
#include "cuda/gemm/linear_blocks.hpp"
#include "tests/cuda/linear_blocks_case.hpp"
#include "tests/cuda/moe_quant_case.hpp"
#include "tests/cuda/reference.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {
namespace {

TensorView part(const std::string& name, DType dtype, int64_t rows, int64_t cols) {
  TensorView t;
  t.name = name;
  t.dtype = dtype;
  t.rows = rows;
  t.cols = cols;
  static const uint8_t kByte = 0;
  t.data = &kByte;  // never read by the rule
  return t;
}

LinearBlocksChoice choose(const std::vector<TensorView>& parts, int64_t k) {
  std::vector<const TensorView*> views;
  for (const TensorView& p : parts) views.push_back(&p);
  return linear_blocks_choice(views, k);
}

// A (n, k) weight in blocks of dtype on the device, and the same bytes decoded to T by the load path.
template <typename T>
struct BlocksAndDense {
  LinearWeight<T> blocks, dense;
  std::vector<float> values;  // (n, k) the engine's decoded values
};

template <typename T>
BlocksAndDense<T> make_weights(DType dtype, int n, int k, cudaStream_t stream) {
  BlocksAndDense<T> w;
  const std::vector<uint8_t> bytes = linear_blocks(dtype, n, k, 29, w.values);
  w.blocks.out = w.dense.out = n;
  w.blocks.in = w.dense.in = k;
  w.blocks.block_type = dtype;
  w.blocks.blocks = DeviceBuffer<uint8_t>(bytes.size());
  CUDA_CHECK(cudaMemcpy(w.blocks.blocks.get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  w.dense.weight = DeviceBuffer<T>(static_cast<size_t>(n) * k);
  decode_blocks<T>(w.dense.weight.get(), w.blocks.blocks.get(), dtype,
                   static_cast<size_t>(n) * k / static_cast<size_t>(dtype_block_elems(dtype)), stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return w;
}

template <typename T>
void check_runner(const CudaContext& ctx, DType dtype, int n, int k) {
  CAPTURE(dtype_name(dtype));
  CAPTURE(type_name<T>());
  constexpr int kMaxRows = 256;
  BlocksAndDense<T> w = make_weights<T>(dtype, n, k, ctx.stream());
  LinearRunner<T> runner(ctx, false, kMaxRows, k, static_cast<size_t>(n) * k, n);
  runner.check(w.blocks);
  const std::vector<float> x = round_to<T>(cbatch::testing::random_activations(static_cast<size_t>(kMaxRows) * k, 13));
  const std::vector<double> want = gemm_ref(x, w.values, kMaxRows, n, k);
  auto d_x = to_device<T>(x);
  DeviceBuffer<T> d_blocks(static_cast<size_t>(kMaxRows) * n), d_dense(static_cast<size_t>(kMaxRows) * n);
  int worse = 0, differ = 0;
  for (int m = 1; m <= kMaxRows; ++m) {
    poison(d_blocks);
    poison(d_dense);
    runner.forward(w.blocks, d_blocks.get(), d_x.get(), m);
    runner.forward(w.dense, d_dense.get(), d_x.get(), m);
    ctx.synchronize();
    std::vector<float> got = to_host(d_blocks), dense = to_host(d_dense);
    got.resize(static_cast<size_t>(m) * n);  // rows past m stay poisoned: not compared
    dense.resize(got.size());
    if (m > kBlockGemmMaxRows) {
      differ += std::memcmp(got.data(), dense.data(), got.size() * sizeof(float)) != 0;
    } else {
      const std::vector<double> ref(want.begin(), want.begin() + static_cast<std::ptrdiff_t>(got.size()));
      worse += !(rel_error(got, ref) < quant_gemm_tolerance(std::is_same_v<T, __nv_bfloat16>));
    }
  }
  CHECK(worse == 0);   // the block GEMM's rows
  CHECK(differ == 0);  // the scratch path's rows: the T path's bits
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("linear blocks: fused weights stay in blocks when every part is in one type the block GEMM reads") {
    // q|k|v of Q4_K parts, k a multiple of 256: blocks.
    LinearBlocksChoice c = choose({part("q", DType::kQ4_K, 64, 512), part("k", DType::kQ4_K, 16, 512),
                                   part("v", DType::kQ4_K, 16, 512)}, 512);
    CHECK(c.blocks);
    CHECK(c.dtype == DType::kQ4_K);
    // Q4_K_M's usual mix: v in Q6_K. Decoded, naming both types and the odd part.
    c = choose({part("q", DType::kQ4_K, 64, 512), part("k", DType::kQ4_K, 16, 512), part("v", DType::kQ6_K, 16, 512)},
               512);
    CHECK_FALSE(c.blocks);
    CHECK(c.reason.find("q4_k and q6_k") != std::string::npos);
    CHECK(c.reason.find("'v'") != std::string::npos);
    // k not a multiple of the superblock: decoded; the 32-element types take it.
    CHECK_FALSE(choose({part("down", DType::kQ4_K, 64, 2880)}, 2880).blocks);
    CHECK(choose({part("down", DType::kQ8_0, 64, 2880)}, 2880).blocks);
    // FP8 and NVFP4 checkpoints' blocks, gate|up of two parts.
    for (DType d : {DType::kFP8, DType::kNVFP4, DType::kQ4_Z, DType::kMXFP4}) {
      c = choose({part("gate", d, 128, 96), part("up", d, 128, 96)}, 96);
      CHECK(c.blocks);
      CHECK(c.dtype == d);
    }
    // Types the block GEMM does not read.
    for (DType d : {DType::kQ2_K, DType::kQ3_K, DType::kIQ4_XS}) {
      CHECK_FALSE(choose({part("w", d, 8, 256)}, 256).blocks);
    }
    // A plain weight: nothing to keep and nothing to report.
    c = choose({part("q", DType::kBF16, 8, 64), part("k", DType::kBF16, 8, 64)}, 64);
    CHECK_FALSE(c.blocks);
    CHECK(c.reason.empty());
    // A plain part among blocks.
    CHECK_FALSE(choose({part("gate", DType::kQ8_0, 8, 64), part("up", DType::kF16, 8, 64)}, 64).blocks);
  }

  TEST_CASE("linear blocks: act-order and random parts are decoded; the load note counts and names them") {
    std::vector<TensorView> parts = {part("gate", DType::kQ4_Z, 8, 64), part("up", DType::kQ4_Z, 8, 64)};
    const int32_t order[64] = {};
    parts[1].input_order = order;
    LinearBlocksChoice c = choose(parts, 64);
    CHECK_FALSE(c.blocks);
    CHECK(c.reason.find("'up'") != std::string::npos);
    TensorView random_q8 = part("w", DType::kQ8_0, 8, 64), random_mxfp4 = part("w", DType::kMXFP4, 8, 64);
    random_q8.is_random = random_mxfp4.is_random = true;
    CHECK_FALSE(choose({random_q8}, 64).blocks);
    CHECK(choose({random_mxfp4}, 64).blocks);

    LinearBlocksTally tally;
    CHECK(tally.note("bf16").empty());
    tally.add("blk.0.attn_q", choose({part("q", DType::kQ4_K, 8, 256)}, 256));
    tally.add("blk.0.ffn_down", choose({part("d", DType::kQ6_K, 8, 256)}, 256));
    tally.add("blk.1.attn_q", choose({part("q", DType::kQ4_K, 8, 256)}, 256));
    tally.add("blk.0.ffn_gate", c);
    tally.add("plain", choose({part("p", DType::kBF16, 8, 64)}, 64));
    const std::string note = tally.note("bf16");
    CHECK(note.find("2 q4_k") != std::string::npos);
    CHECK(note.find("1 q6_k") != std::string::npos);
    CHECK(note.find("1 decoded to bf16: 'blk.0.ffn_gate'") != std::string::npos);
    CHECK(note.find("plain") == std::string::npos);
  }
}

TEST_CASE_TEMPLATE("linear blocks: LinearRunner on a weight in blocks against the T path for m = 1..256, every block "
                   "type", T, __nv_bfloat16, __half) {
  CudaContext ctx(0);
  for (DType dtype : kLinearBlockTypes) check_runner<T>(ctx, dtype, 200, 1024);
}

TEST_CASE("linear blocks: the runner refuses a weight in blocks past its scratch, or a type the GEMM does not read") {
  CudaContext ctx(0);
  BlocksAndDense<__nv_bfloat16> w = make_weights<__nv_bfloat16>(DType::kQ8_0, 64, 256, ctx.stream());
  LinearRunner<__nv_bfloat16> small(ctx, false, 64, 256, 64 * 128, 64);
  CHECK_THROWS_AS(small.check(w.blocks), Error);
  LinearRunner<__nv_bfloat16> narrow(ctx, false, 64, 256, 64 * 256, 32);  // split-k sums for 32 outputs
  CHECK_THROWS_AS(narrow.check(w.blocks), Error);
  LinearRunner<__nv_bfloat16> runner(ctx, false, 64, 256, 64 * 256, 64);
  runner.check(w.blocks);
  w.blocks.block_type = DType::kQ2_K;  // its bytes are not Q2_K's, and the GEMM reads no Q2_K
  CHECK_THROWS_AS(runner.check(w.blocks), Error);
}

}  // namespace cbatch::test
