// decode_attention_bench: times every decode attention kernel through the production launcher
// (decode_attention) on one synthetic decode batch, and checks that they agree. For each kernel: median
// time of --iters launches after two warm-up ones (the L2 flushed before each), the KV bytes it must read per second, that rate
// as a fraction of this GPU's device-to-device copy rate (read + write bytes per second, measured here as
// cbatch bench measures the roofline's bandwidth), and
// the largest difference from the first kernel's output. The cache is paged as in a real run: blocks of
// every sequence scattered through the pool. Usage: decode_attention_bench --help.
#include <CLI/CLI.hpp>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/attention/decode_attention.hpp"
#include "cuda/attention/decode_stream.hpp"
#include "cuda/attention/kv_cache_dtype.hpp"
#include "cuda/backend/device_peaks.hpp"
#include "cuda/backend/weight_convert.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_context.hpp"
#include "cuda/common/device_buffer.hpp"

namespace {

struct Options {
  int head_dim = 128;
  int num_heads = 32;
  int num_kv_heads = 8;
  int num_seqs = 256;
  std::string context = "540";  // keys per sequence: N, or A:B drawn uniformly
  int block_size = 16;
  std::string dtype = "bf16";
  std::string kv_cache_dtype = "auto";  // or fp8: the cache in E4M3 codes (scales 1)
  int iters = 20;
  std::string kernels = "cuda-cores,tensor-cores-16,stream,stream-2";
};

struct KernelChoice {
  std::string name;
  cbatch::DecodeKernel kernel;
  int max_stages = 3;  // the stream kernel's pipeline depth at most (stream-2: the fallback of smaller GPUs)
};

std::vector<KernelChoice> parse_kernels(const std::string& list) {
  std::vector<KernelChoice> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, end - start);
    if (name == "cuda-cores") {
      out.push_back({name, cbatch::DecodeKernel::kCudaCores});
    } else if (name == "tensor-cores-16") {
      out.push_back({name, cbatch::DecodeKernel::kTensorCores16});
    } else if (name == "stream" || name == "stream-2") {
      out.push_back({name, cbatch::DecodeKernel::kStream, name == "stream" ? 3 : 2});
    } else {
      throw cbatch::Error("unknown kernel '" + name + "' (cuda-cores, tensor-cores-16, stream, stream-2)");
    }
    start = end + 1;
  }
  return out;
}

std::vector<int> draw_contexts(const Options& o) {
  const size_t colon = o.context.find(':');
  const int lo = std::stoi(o.context.substr(0, colon));
  const int hi = colon == std::string::npos ? lo : std::stoi(o.context.substr(colon + 1));
  if (lo < 1 || hi < lo) throw cbatch::Error("--context must be N or A:B with 1 <= A <= B, got " + o.context);
  std::mt19937 rng(7);
  std::vector<int> contexts(static_cast<size_t>(o.num_seqs));
  for (int& c : contexts) c = std::uniform_int_distribution<int>(lo, hi)(rng);
  return contexts;
}

template <typename T>
std::vector<float> to_host_f32(const cbatch::DeviceBuffer<T>& d) {
  std::vector<T> host(d.size());
  CUDA_CHECK(cudaMemcpy(host.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost));
  std::vector<float> out(host.size());
  for (size_t i = 0; i < host.size(); ++i) {
    if constexpr (std::is_same_v<T, __half>) {
      out[i] = __half2float(host[i]);
    } else {
      out[i] = __bfloat162float(host[i]);
    }
  }
  return out;
}

std::vector<int32_t> iota_i32(int n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

template <typename V>
cbatch::DeviceBuffer<V> upload(const std::vector<V>& v) {
  cbatch::DeviceBuffer<V> d(v.size());
  CUDA_CHECK(cudaMemcpy(d.get(), v.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

// A cache of n random elements: T uniform in [-1, 1), or E4M3 codes of magnitude below 2 (no NaN).
template <typename T, typename KV>
cbatch::DeviceBuffer<KV> random_cache(size_t n, uint64_t seed, cudaStream_t stream) {
  if constexpr (cbatch::kFp8Kv<KV>) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::vector<KV> codes(n);
    for (KV& c : codes) c = static_cast<KV>((rng() % 0x40u) | (rng() % 2 ? 0x80u : 0u));  // exponent field < 8
    return upload(codes);
  } else {
    cbatch::DeviceBuffer<KV> d(n);
    cbatch::fill_random<T>(d.get(), n, seed, 1.0f, 0.0f, stream);
    return d;
  }
}

template <typename T, typename KV>
int run(const Options& o) {
  using namespace cbatch;
  CudaContext context(0);
  const cudaStream_t stream = context.stream();
  const int sms = context.properties().multiProcessorCount;
  const std::vector<int> contexts = draw_contexts(o);
  const int group = o.num_heads / o.num_kv_heads;
  const int max_context = *std::max_element(contexts.begin(), contexts.end());
  const int max_blocks = (max_context + o.block_size - 1) / o.block_size;

  // Block tables over a shuffled pool: sequence s holds ceil(contexts[s] / block_size) blocks.
  int num_blocks = 0;
  for (int c : contexts) num_blocks += (c + o.block_size - 1) / o.block_size;
  std::vector<int32_t> pool = iota_i32(num_blocks);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(11));
  std::vector<int32_t> tables(static_cast<size_t>(o.num_seqs) * max_blocks, 0);
  size_t next = 0;
  double kv_bytes = 0;
  for (int s = 0; s < o.num_seqs; ++s) {
    const int blocks = (contexts[s] + o.block_size - 1) / o.block_size;
    for (int b = 0; b < blocks; ++b) tables[static_cast<size_t>(s) * max_blocks + b] = pool[next++];
    kv_bytes += 2.0 * contexts[s] * o.num_kv_heads * o.head_dim * sizeof(KV);
  }
  std::vector<int32_t> positions(static_cast<size_t>(o.num_seqs));
  for (int s = 0; s < o.num_seqs; ++s) positions[s] = contexts[s] - 1;
  const std::vector<int32_t> query_start = iota_i32(o.num_seqs + 1);
  const std::vector<int32_t> decode_seqs = iota_i32(o.num_seqs);
  std::vector<int32_t> tile_start(static_cast<size_t>(o.num_seqs) + 1);
  decode_stream::build_tile_start(positions.data(), query_start.data(), decode_seqs.data(), o.num_seqs,
                                  tile_start.data());

  const size_t cache_elems = static_cast<size_t>(num_blocks) * o.num_kv_heads * o.block_size * o.head_dim;
  const size_t qkv_stride = static_cast<size_t>(o.num_heads + 2 * o.num_kv_heads) * o.head_dim;
  const DeviceBuffer<KV> k_cache = random_cache<T, KV>(cache_elems, 1, stream);
  const DeviceBuffer<KV> v_cache = random_cache<T, KV>(cache_elems, 2, stream);
  DeviceBuffer<T> qkv(o.num_seqs * qkv_stride);
  DeviceBuffer<T> out(static_cast<size_t>(o.num_seqs) * o.num_heads * o.head_dim);
  fill_random<T>(qkv.get(), qkv.size(), 3, 1.0f, 0.0f, stream);
  const DeviceBuffer<float> d_scales = upload(std::vector<float>{1.0f, 1.0f});
  const KvScales scales = kFp8Kv<KV> ? KvScales{d_scales.get(), d_scales.get() + 1} : KvScales{};
  const DeviceBuffer<int32_t> d_tables = upload(tables), d_positions = upload(positions),
                              d_query_start = upload(query_start), d_decode = upload(decode_seqs),
                              d_tile_start = upload(tile_start);
  const int max_partials = 16 * sms;
  DeviceBuffer<float> partial_o(static_cast<size_t>(max_partials) * group * o.head_dim);
  DeviceBuffer<float> partial_ml(static_cast<size_t>(max_partials) * group * 2);
  DeviceBuffer<uint8_t> flush(size_t{256} << 20);  // larger than any L2
  const AttentionShape shape{o.num_heads, o.num_kv_heads, o.head_dim, o.block_size, num_blocks};
  const DecodeSplit split = choose_decode_split(o.num_seqs, o.num_kv_heads, max_context, 4 * sms, max_partials);
  DecodeStream plan;
  plan.tile_start = d_tile_start.get();
  plan.num_tiles = static_cast<int64_t>(tile_start.back()) * o.num_kv_heads;

  const double copy_bytes_per_s = measure_device_peaks<T>(context).bytes_per_s;
  std::printf("%s, %d SMs; %d sequences of %s keys (%.0f MB of KV), heads %d/%d, head_dim %d, block %d, %s, "
              "KV %s; copy %.2f TB/s; splits %d\n",
              context.properties().name, sms, o.num_seqs, o.context.c_str(), kv_bytes / 1e6, o.num_heads,
              o.num_kv_heads, o.head_dim, o.block_size, o.dtype.c_str(), o.kv_cache_dtype.c_str(),
              copy_bytes_per_s / 1e12, split.num_splits);
  std::printf("%-16s %6s %10s %8s %8s %12s\n", "kernel", "warps", "time_us", "TB/s", "of_copy", "max_diff");

  std::vector<float> reference;
  for (const KernelChoice& k : parse_kernels(o.kernels)) {
    if (k.kernel != DecodeKernel::kCudaCores && !decode_tensor_cores_support(o.head_dim)) continue;
    if (k.kernel == DecodeKernel::kStream) {
      const DecodeStreamLimits limits = decode_stream_limits<T, KV>(o.head_dim, k.max_stages);
      plan.stages = limits.stages;
      plan.num_warps = decode_stream::choose_num_warps(plan.num_tiles, std::min(limits.max_warps, max_partials / 2));
    }
    auto launch = [&] {
      decode_attention<T, KV>(out.get(), qkv.get(), k_cache.get(), v_cache.get(), d_positions.get(),
                              d_query_start.get(), d_tables.get(), max_blocks, d_decode.get(), o.num_seqs, split,
                              partial_o.get(), partial_ml.get(), max_partials, shape, stream, k.kernel, &plan, {},
                              scales);
    };
    int flushes = 0;
    auto flush_l2 = [&] { CUDA_CHECK(cudaMemsetAsync(flush.get(), ++flushes, flush.bytes(), stream)); };
    const double median_s = 1e-3 * median_ms(stream, 2, o.iters, launch, flush_l2);
    const std::vector<float> result = to_host_f32(out);
    if (reference.empty()) reference = result;
    double max_diff = 0;
    for (size_t i = 0; i < result.size(); ++i) {
      const double diff = std::fabs(static_cast<double>(result[i]) - reference[i]);
      max_diff = std::isnan(diff) ? INFINITY : std::max(max_diff, diff);
    }
    std::printf("%-16s %6d %10.1f %8.2f %8.3f %12.3g\n", k.name.c_str(),
                k.kernel == DecodeKernel::kStream ? plan.num_warps : 0, median_s * 1e6, kv_bytes / median_s / 1e12,
                kv_bytes / median_s / copy_bytes_per_s, max_diff);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Times every decode attention kernel on one synthetic decode batch and checks they agree"};
  app.add_option("--head-dim", o.head_dim, "head dimension")->capture_default_str();
  app.add_option("--heads", o.num_heads, "query heads")->capture_default_str();
  app.add_option("--kv-heads", o.num_kv_heads, "kv heads")->capture_default_str();
  app.add_option("--seqs", o.num_seqs, "decode sequences")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--context", o.context, "keys per sequence: N, or A:B drawn uniformly")->capture_default_str();
  app.add_option("--block-size", o.block_size, "KV block size")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--dtype", o.dtype, "bf16 or fp16")->capture_default_str()->check(CLI::IsMember({"bf16", "fp16"}));
  app.add_option("--kv-cache-dtype", o.kv_cache_dtype, "auto (the dtype) or fp8 (E4M3 codes, scales 1)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "fp8"}));
  app.add_option("--iters", o.iters, "timed launches per kernel")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--kernels", o.kernels, "comma-separated kernels, the first is the reference")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    if (o.num_kv_heads <= 0 || o.num_heads % o.num_kv_heads != 0) {
      throw cbatch::Error("--heads must be a positive multiple of --kv-heads");
    }
    const bool fp8 = o.kv_cache_dtype == "fp8";
    if (o.dtype == "bf16") return fp8 ? run<__nv_bfloat16, cbatch::Fp8E4M3>(o) : run<__nv_bfloat16, __nv_bfloat16>(o);
    return fp8 ? run<__half, cbatch::Fp8E4M3>(o) : run<__half, __half>(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode_attention_bench: %s\n", e.what());
    return 1;
  }
}
