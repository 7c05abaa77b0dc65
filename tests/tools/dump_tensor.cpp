// Test tool: writes the fp32 values cbatch decodes a GGUF tensor to (tensor_rows_to_f32), as raw
// little-endian float32, to stdout. Used by tests/e2e/test_quant_types.py to compare every block type with
// the `gguf` package's dequantize. Usage: dump_tensor FILE.gguf TENSOR_NAME
#include <cstdio>
#include <vector>

#include "engine/core/error.hpp"
#include "engine/model/gguf.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: dump_tensor FILE.gguf TENSOR_NAME\n");
    return 1;
  }
  try {
    const cbatch::GgufFile gguf(argv[1]);
    const cbatch::GgufTensorInfo* info = gguf.find_tensor(argv[2]);
    if (info == nullptr) throw cbatch::Error(std::string("no tensor '") + argv[2] + "'");
    const cbatch::TensorView view = gguf.tensor_view(*info);
    std::vector<float> values(static_cast<size_t>(view.numel()));
    cbatch::tensor_rows_to_f32(view, 0, view.rows, values.data());
    std::fwrite(values.data(), sizeof(float), values.size(), stdout);
  } catch (const cbatch::Error& e) {
    std::fprintf(stderr, "dump_tensor: %s\n", e.what());
    return 1;
  }
  return 0;
}
