// Derived architecture numbers: parameter count and RoPE frequencies (with llama3 scaling).
#include "engine/model/model_config.hpp"

#include <cmath>

namespace cbatch {

int64_t ModelConfig::num_parameters() const {
  const int64_t d = dim;
  const int64_t per_layer = 2 * d + d * q_dim() + 2 * d * kv_dim() + q_dim() * d +
                            3 * d * static_cast<int64_t>(hidden_dim);
  const int64_t embed = static_cast<int64_t>(vocab_size) * d;
  return per_layer * num_layers + d + embed * (tied_embeddings ? 1 : 2);
}

void rope_inv_freq(const ModelConfig& config, float* inv_freq) {
  const int half = config.head_dim / 2;
  const RopeScaling& s = config.rope_scaling;
  for (int i = 0; i < half; ++i) {
    double freq = 1.0 / std::pow(static_cast<double>(config.rope_theta), 2.0 * i / config.head_dim);
    if (s.is_llama3) {
      // Llama 3.1 frequency scaling: long wavelengths are divided by `factor`, short ones are kept,
      // the band between is interpolated smoothly.
      const double low_wavelen = s.original_max_position / s.low_freq_factor;
      const double high_wavelen = s.original_max_position / s.high_freq_factor;
      const double wavelen = 2.0 * M_PI / freq;
      if (wavelen > low_wavelen) {
        freq = freq / s.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (s.original_max_position / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        freq = (1.0 - smooth) * freq / s.factor + smooth * freq;
      }
    }
    inv_freq[i] = static_cast<float>(freq);
  }
}

}  // namespace cbatch
