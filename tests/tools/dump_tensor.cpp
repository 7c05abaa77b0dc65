// Test tool: writes the fp32 values cbatch decodes a GGUF tensor to, as raw little-endian float32, to
// stdout. Used by tests/e2e/test_quant_types.py to compare every block type with the `gguf` package's
// dequantize. Usage: dump_tensor FILE.gguf TENSOR_NAME [--cpu-matmul]
//   default: tensor_rows_to_f32 of every row;
//   --cpu-matmul: the weights as the CPU backend's matmul sees them, kept in blocks (PackedMatrix): the
//   product of the identity and W^T, through the many-row kernel and, row by row, the one-row kernel
//   (exits 1 if those differ). Equal to the decoded values but for -0, which comes out as +0.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/base/error.hpp"
#include "engine/cpu/cpu_matmul.hpp"
#include "engine/base/thread_pool.hpp"
#include "engine/model/gguf.hpp"

namespace {

// W (n, k) through the blocked matmul: y (k, n) = I (k, k) W^T, returned transposed as (n, k).
std::vector<float> matmul_view(const cbatch::TensorView& w) {
  using cbatch::PackedMatrix;
  const int64_t n = w.rows, k = w.cols;
  if (!PackedMatrix::keeps_blocks(w.dtype, k)) throw cbatch::Error("tensor '" + w.name + "' cannot stay in blocks");
  cbatch::ThreadPool pool(2);
  const int64_t row = cbatch::row_bytes(w.dtype, k);
  const auto* bytes = static_cast<const uint8_t*>(w.data);
  const PackedMatrix packed(n, k, w.dtype, [&](int64_t r) { return bytes + r * row; }, pool);
  std::vector<float> identity(static_cast<size_t>(k * k), 0.0f), many(static_cast<size_t>(k * n)), one(many.size());
  for (int64_t i = 0; i < k; ++i) identity[static_cast<size_t>(i * k + i)] = 1.0f;
  cbatch::matmul(identity.data(), packed, many.data(), k, pool);
  for (int64_t i = 0; i < k; ++i) {  // row by row: the one-row kernel
    cbatch::matmul(&identity[static_cast<size_t>(i * k)], packed, &one[static_cast<size_t>(i * n)], 1, pool);
  }
  if (std::memcmp(many.data(), one.data(), many.size() * sizeof(float)) != 0) {
    throw cbatch::Error("the one-row and many-row products of '" + w.name + "' differ");
  }
  std::vector<float> out(many.size());
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j) out[static_cast<size_t>(j * k + i)] = many[static_cast<size_t>(i * n + j)];
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const bool cpu_matmul = argc == 4 && std::string(argv[3]) == "--cpu-matmul";
  if (argc != 3 && !cpu_matmul) {
    std::fprintf(stderr, "usage: dump_tensor FILE.gguf TENSOR_NAME [--cpu-matmul]\n");
    return 1;
  }
  try {
    const cbatch::GgufFile gguf(argv[1]);
    const cbatch::GgufTensorInfo* info = gguf.find_tensor(argv[2]);
    if (info == nullptr) throw cbatch::Error(std::string("no tensor '") + argv[2] + "'");
    const cbatch::TensorView view = gguf.tensor_view(*info);
    std::vector<float> values(static_cast<size_t>(view.numel()));
    if (cpu_matmul) {
      values = matmul_view(view);
    } else {
      cbatch::tensor_rows_to_f32(view, 0, view.rows, values.data());
    }
    std::fwrite(values.data(), sizeof(float), values.size(), stdout);
  } catch (const cbatch::Error& e) {
    std::fprintf(stderr, "dump_tensor: %s\n", e.what());
    return 1;
  }
  return 0;
}
