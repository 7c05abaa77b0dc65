// decode_blocks (cuda/backend/weight_convert.cu), the load-time decoding of GGUF blocks on the device: for every
// block type, random blocks (every code, sub-block scale and minimum; f16 scales of both signs, subnormal
// and zero ones too) decode to tensor_rows_to_f32's values bit for bit in fp32, and to their
// round-to-nearest-even in bf16 and fp16. Outputs are poisoned with NaN first.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda/backend/weight_convert.hpp"
#include "tests/cuda/test_util.hpp"
#include "tests/engine/test_blocks.hpp"

namespace cbatch::test {

TEST_CASE_TEMPLATE("decode_blocks gives the host's values of every block type", T, float, __nv_bfloat16, __half) {
  for (DType dtype : cbatch::testing::kBlockTypes) {
    const int64_t rows = 7, cols = 3 * dtype_block_elems(dtype);
    const std::vector<uint8_t> bytes = cbatch::testing::random_blocks(dtype, rows, cols, 11);
    std::vector<float> want(static_cast<size_t>(rows * cols));
    tensor_rows_to_f32(cbatch::testing::blocks_view(bytes, dtype, rows, cols), 0, rows, want.data());
    want = round_to<T>(want);

    DeviceBuffer<uint8_t> d_blocks(bytes.size());
    CUDA_CHECK(cudaMemcpy(d_blocks.get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    DeviceBuffer<T> d_out(want.size());
    poison(d_out);
    decode_blocks<T>(d_out.get(), d_blocks.get(), dtype, static_cast<size_t>(rows * cols / dtype_block_elems(dtype)),
                     nullptr);
    const std::vector<float> got = to_host(d_out);
    CAPTURE(dtype_name(dtype));
    CAPTURE(type_name<T>());
    REQUIRE(got.size() == want.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) mismatches += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
    CHECK(mismatches == 0);
  }
}

}  // namespace cbatch::test
