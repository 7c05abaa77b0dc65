#include "engine/sample/logprobs.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace cbatch {

void LogprobAnswers::resize(size_t queries, int new_width) {
  width = new_width;
  target_logprob.assign(queries, 0.0f);
  top_ids.assign(queries * static_cast<size_t>(width), -1);
  top_logprobs.assign(queries * static_cast<size_t>(width), -INFINITY);
}

namespace {

// a ranks before b: larger value, or equal value and lower index (NaN ranks last).
bool ranks_before(float va, int32_t a, float vb, int32_t b) {
  if (std::isnan(vb)) return !std::isnan(va) || a < b;
  if (std::isnan(va)) return false;
  return va > vb || (va == vb && a < b);
}

// e^x for x <= 0 (a logit minus the row's max) in float, without branches so that loops over it
// vectorize: 2^n p(r) with n a nearest integer to x log2 e, r = x - n ln 2 (ln 2 in two parts) and Cephes'
// degree-6 polynomial (relative error about 1e-7). Below -87 (and NaN) it gives e^-87, ~1.6e-38: nothing
// to a sum. The clamp is a bit select: a conditional there is split into two paths and stops vectorizing.
float exp_nonpositive(float x) {
  const int32_t below = -static_cast<int32_t>(!(x >= -87.0f));  // all ones below -87 and for NaN
  x = std::bit_cast<float>((std::bit_cast<int32_t>(x) & ~below) | (std::bit_cast<int32_t>(-87.0f) & below));
  const int32_t ni = static_cast<int32_t>(x * 1.44269504088896341f - 0.5f);  // truncation: x <= 0
  const float n = static_cast<float>(ni);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * std::bit_cast<float>((ni + 127) << 23);
}

// The largest value (NaN ignored) in 8 lanes, so that the loop vectorizes.
float row_max(const float* v, int n) {
  constexpr int kLanes = 8;
  float lanes[kLanes];
  std::fill_n(lanes, kLanes, -INFINITY);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] = v[i + j] > lanes[j] ? v[i + j] : lanes[j];
  }
  for (; i < n; ++i) lanes[0] = v[i] > lanes[0] ? v[i] : lanes[0];
  return *std::max_element(lanes, lanes + kLanes);
}

// sum of e^(v - max) over the row: blocks of 512 values exponentiated into a buffer (a loop that
// vectorizes), summed in 8 float lanes, each block's sum added in double (a lane sums 64 terms <= 1, so
// the sum's relative error stays near 1e-7).
double sum_exp(const float* v, int n, float max) {
  constexpr int kLanes = 8, kBlock = 512;
  float buffer[kBlock];
  double sum = 0;
  for (int b = 0; b < n; b += kBlock) {
    const int size = std::min(n - b, kBlock);
    for (int i = 0; i < size; ++i) buffer[i] = exp_nonpositive(v[b + i] - max);
    for (int i = size; i < kBlock; ++i) buffer[i] = 0.0f;
    float lanes[kLanes] = {};
    for (int i = 0; i < kBlock; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) lanes[j] += buffer[i + j];
    }
    float block = 0;
    for (float x : lanes) block += x;
    sum += block;
  }
  return sum;
}

}  // namespace

void top_k_indices(const float* values, int n, int k, int32_t* ids) {
  if (k <= 0) return;
  // A sorted list of the best k so far; a candidate is compared with the worst kept one first.
  int size = 0;
  float worst = NAN;  // the last kept value once k are kept: smaller values never enter
  for (int32_t i = 0; i < n; ++i) {
    const float v = values[i];
    if (v < worst) continue;
    if (size == k && !ranks_before(v, i, values[ids[k - 1]], ids[k - 1])) continue;
    int pos = size == k ? k - 1 : size++;
    while (pos > 0 && ranks_before(v, i, values[ids[pos - 1]], ids[pos - 1])) {
      ids[pos] = ids[pos - 1];
      --pos;
    }
    ids[pos] = i;
    if (size == k) worst = values[ids[k - 1]];
  }
}

float reduce_logprob_row(const float* logits, int vocab, int k, int32_t target, int32_t* top_ids, float* top_logprobs) {
  const float max = row_max(logits, vocab);
  const double sum = std::isfinite(max) ? sum_exp(logits, vocab, max) : 0.0;
  const double lse = static_cast<double>(max) + std::log(sum);  // -inf or NaN for a row without a finite logit
  const auto logprob = [&](int32_t id) { return static_cast<float>(static_cast<double>(logits[id]) - lse); };
  const int kk = std::min(k, vocab);
  top_k_indices(logits, vocab, kk, top_ids);
  for (int i = 0; i < kk; ++i) top_logprobs[i] = logprob(top_ids[i]);
  return logprob(target);
}

}  // namespace cbatch
