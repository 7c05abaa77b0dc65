// --cuda-kernel NAME=VALUE (repeatable) and --cuda-profile: the CUDA backend's kernel choices, parsed from
// the command line into the CudaKernelOptions the backend takes (cuda/backend/cuda_backend_options.hpp,
// docs/cuda.md).
// The switches: decode=stream|tensor-cores-16|cuda-cores|paged (paged also spelled 0), prefill=on|off,
// sampling=device|host, moe-gemm=grouped|loop, moe-experts=blocks|dequant, deltanet=chunked|recurrent,
// mamba-scan=chunked|recurrent, weights=blocks|dequant; the first value of each is the default. An unknown
// name or value, a missing '=' or a name given twice is an error naming the flag.
#pragma once
#include <string>
#include <vector>

#include "cuda/backend/cuda_backend_options.hpp"

namespace cbatch {

// Throws cbatch::Error naming the flag and the values it takes.
CudaKernelOptions parse_cuda_kernel_flags(const std::vector<std::string>& switches, bool profile);

// The first of these flags as written ("--cuda-kernel decode=paged", "--cuda-profile"), for the message
// that refuses them on the CPU; "" when none was given.
std::string first_cuda_kernel_flag(const std::vector<std::string>& switches, bool profile);

}  // namespace cbatch
