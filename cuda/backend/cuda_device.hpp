// Device discovery for --version, --device auto and the backend's checks (cuda_device.cu). Host-only, no
// CUDA include.
#pragma once
#include <string>

namespace cbatch {

// Compute capability as major * 10 + minor (90 for sm_90); throws cbatch::Error when it cannot be queried.
int cuda_compute_capability(int device_index);

// Number of usable CUDA devices (0 when there is no driver or no GPU; never throws).
int cuda_device_count();
// "NVIDIA H100 80GB HBM3 (sm_90)"; throws cbatch::Error when the device cannot be queried.
std::string cuda_device_description(int device_index);

}  // namespace cbatch
