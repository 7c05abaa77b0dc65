// linear_blocks_bench: times one linear layer's product through the production LinearRunner, its weight in the
// compute dtype (the weights=dequant path) against the same shape kept in blocks (weights=blocks: the block GEMM
// up to kBlockGemmMaxRows rows, the scratch decode + cuBLAS past it), on the Llama 3.1 8B layer's four shapes
// (q|k|v 6144 x 4096, o 4096 x 4096, gate|up 28672 x 4096, down 4096 x 14336), for each block type and row count
// asked. Median of --iters runs after two warm-up ones, the L2 flushed before each; prints microseconds a layer
// (the four products) and the speed-up over T, and the blocks' bytes per second at the block GEMM's rows. Random
// bytes: timing only (tests/cuda/test_linear_blocks.cpp checks the values). Usage: linear_blocks_bench --help.
#include <CLI/CLI.hpp>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/backend/device_peaks.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_context.hpp"
#include "cuda/gemm/linear.hpp"
#include "engine/model/tensor.hpp"

namespace {

using namespace cbatch;
using T = __nv_bfloat16;

struct Shape {
  const char* name;
  int64_t out, in;
};
constexpr Shape kShapes[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};

DType parse_dtype(const std::string& name) {
  for (int d = 0; d <= static_cast<int>(kLastDType); ++d) {
    if (dtype_name(static_cast<DType>(d)) == name) return static_cast<DType>(d);
  }
  throw Error("--types: unknown block type '" + name + "'");
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> items;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) items.push_back(item);
  return items;
}

DeviceBuffer<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> host(n);
  std::mt19937 rng(seed);
  for (uint8_t& b : host) b = static_cast<uint8_t>(rng());
  DeviceBuffer<uint8_t> d(n);
  CUDA_CHECK(cudaMemcpy(d.get(), host.data(), n, cudaMemcpyHostToDevice));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Times a linear layer's product in blocks against the compute dtype (bf16), 8B layer shapes"};
  std::string types = "q4_k,q4_0,q8_0,fp8_e4m3,nvfp4", rows = "1,2,4,8,16,32,64,256,2048";
  int iters = 20;
  app.add_option("--types", types, "block types, comma-separated (dtype names: q4_k, q8_0, fp8_e4m3, ...)");
  app.add_option("--rows", rows, "row counts m, comma-separated");
  app.add_option("--iters", iters, "timed runs a measurement")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    std::vector<DType> dtypes;  // checked before the device is opened
    for (const std::string& name : split(types)) dtypes.push_back(parse_dtype(name));
    std::vector<int> ms;
    for (const std::string& r : split(rows)) ms.push_back(std::stoi(r));
    if (ms.empty() || *std::min_element(ms.begin(), ms.end()) < 1) throw Error("--rows: positive row counts");
    CudaContext ctx(0);
    const cudaStream_t stream = ctx.stream();
    const int max_rows = *std::max_element(ms.begin(), ms.end());
    size_t max_elems = 0;
    int64_t max_in = 0;
    for (const Shape& s : kShapes) {
      max_elems = std::max(max_elems, static_cast<size_t>(s.out * s.in));
      max_in = std::max(max_in, s.in);
    }
    LinearRunner<T> runner(ctx, false, max_rows, max_in, max_elems, 28672);
    DeviceBuffer<T> x(static_cast<size_t>(max_rows) * max_in), y(static_cast<size_t>(max_rows) * 28672);
    CUDA_CHECK(cudaMemset(x.get(), 0, x.bytes()));
    DeviceBuffer<uint8_t> flush(size_t{256} << 20);
    int flushes = 0;
    auto flush_l2 = [&] { CUDA_CHECK(cudaMemsetAsync(flush.get(), ++flushes & 0xFF, flush.bytes(), stream)); };
    auto layer_us = [&](std::vector<LinearWeight<T>>& weights, int m) {
      double us = 0;
      for (LinearWeight<T>& w : weights) {
        us += 1e3 * median_ms(stream, 2, iters, [&] { runner.forward(w, y.get(), x.get(), m); }, flush_l2);
      }
      return us;
    };
    std::vector<LinearWeight<T>> dense;
    for (const Shape& s : kShapes) {
      LinearWeight<T> w;
      w.out = s.out;
      w.in = s.in;
      w.weight = DeviceBuffer<T>(static_cast<size_t>(s.out * s.in));
      CUDA_CHECK(cudaMemset(w.weight.get(), 0, w.weight.bytes()));
      dense.push_back(std::move(w));
    }
    std::printf("%-9s %6s %12s %12s %8s %10s\n", "type", "rows", "bf16_us", "blocks_us", "speedup", "blocks_TB/s");
    for (const DType dtype : dtypes) {
      const std::string name(dtype_name(dtype));
      std::vector<LinearWeight<T>> blocks;
      size_t block_bytes = 0;
      for (const Shape& s : kShapes) {
        LinearWeight<T> w;
        w.out = s.out;
        w.in = s.in;
        w.block_type = dtype;
        w.blocks = random_bytes(static_cast<size_t>(s.out * row_bytes(dtype, s.in)), 7);
        runner.check(w);
        block_bytes += w.blocks.bytes();
        blocks.push_back(std::move(w));
      }
      for (const int m : ms) {
        const double t_us = layer_us(dense, m), b_us = layer_us(blocks, m);
        std::printf("%-9s %6d %12.1f %12.1f %8.2f %10.2f\n", name.c_str(), m, t_us, b_us, t_us / b_us,
                    m <= kBlockGemmMaxRows ? static_cast<double>(block_bytes) / b_us / 1e6 : 0.0);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linear_blocks_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
