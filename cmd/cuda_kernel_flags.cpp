#include "cmd/cuda_kernel_flags.hpp"

#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"

namespace cbatch {
namespace {

constexpr const char* kSwitchNames = "decode, prefill, sampling, moe-gemm, moe-experts, deltanet, mamba-scan or weights";

// The position of value among values; throws naming the flag and every value the switch takes.
size_t choice(const std::string& flag, std::string_view name, std::string_view value,
              std::initializer_list<std::string_view> values) {
  const auto found = std::find(values.begin(), values.end(), value);
  if (found != values.end()) return static_cast<size_t>(found - values.begin());
  std::string list;
  for (const std::string_view v : values) {
    list += (list.empty() ? "" : v == *(values.end() - 1) ? " or " : ", ") + std::string(v);
  }
  throw Error(flag + ": " + elide(name) + " takes " + list);
}

void set_switch(CudaKernelOptions& k, const std::string& flag, std::string_view name, std::string_view value) {
  if (name == "decode") {
    constexpr DecodeAttention kinds[] = {DecodeAttention::kStream, DecodeAttention::kTensorCores16,
                                         DecodeAttention::kCudaCores, DecodeAttention::kPaged, DecodeAttention::kPaged};
    k.decode = kinds[choice(flag, name, value, {"stream", "tensor-cores-16", "cuda-cores", "paged", "0"})];
  } else if (name == "prefill") {
    k.prefill_tensor_cores = choice(flag, name, value, {"on", "off"}) == 0;
  } else if (name == "sampling") {
    k.device_sampling = choice(flag, name, value, {"device", "host"}) == 0;
  } else if (name == "moe-gemm") {
    k.grouped_moe_gemm = choice(flag, name, value, {"grouped", "loop"}) == 0;
  } else if (name == "moe-experts") {
    k.quantized_experts = choice(flag, name, value, {"blocks", "dequant"}) == 0;
  } else if (name == "deltanet") {
    k.chunked_deltanet = choice(flag, name, value, {"chunked", "recurrent"}) == 0;
  } else if (name == "mamba-scan") {
    k.chunked_mamba_scan = choice(flag, name, value, {"chunked", "recurrent"}) == 0;
  } else if (name == "weights") {
    k.linear_blocks = choice(flag, name, value, {"blocks", "dequant"}) == 0;
  } else {
    throw Error(flag + ": " + elide(name) + " is not a CUDA kernel switch (" + kSwitchNames + ")");
  }
}

}  // namespace

CudaKernelOptions parse_cuda_kernel_flags(const std::vector<std::string>& switches, bool profile) {
  CudaKernelOptions kernels;
  kernels.profile = profile;
  std::vector<std::string_view> seen;
  for (const std::string& text : switches) {
    const std::string flag = "--cuda-kernel " + elide(text);
    const size_t equals = text.find('=');
    if (equals == std::string::npos) throw Error(flag + ": expected NAME=VALUE, NAME one of " + kSwitchNames);
    const std::string_view name = std::string_view(text).substr(0, equals);
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      throw Error(flag + ": " + elide(name) + " is given twice");
    }
    seen.push_back(name);
    set_switch(kernels, flag, name, std::string_view(text).substr(equals + 1));
  }
  return kernels;
}

std::string first_cuda_kernel_flag(const std::vector<std::string>& switches, bool profile) {
  if (!switches.empty()) return "--cuda-kernel " + elide(switches.front());
  return profile ? "--cuda-profile" : "";
}

}  // namespace cbatch
