#include "cuda/sampling/device_logprobs.hpp"

#include <algorithm>

#include "cuda/common/cuda_check.hpp"
#include "engine/backend/logprob_split.hpp"

namespace cbatch {
namespace {

using device_logprobs::LogprobOutputs;
using device_logprobs::LogprobTask;

template <typename U>
void reserve(DeviceBuffer<U>& buffer, size_t n) {
  if (buffer.size() >= n) return;
  buffer = DeviceBuffer<U>();  // frees the old one first
  buffer = DeviceBuffer<U>(std::max<size_t>(n, 1));
}

// The outputs of tasks [first, ...).
LogprobOutputs outputs_from(const LogprobOutputs& all, size_t first) {
  LogprobOutputs o = all;
  o.target_logprob += first;
  o.top_ids += first * static_cast<size_t>(all.width);
  o.top_logprobs += first * static_cast<size_t>(all.width);
  return o;
}

}  // namespace

const float* DeviceLogprobs::keep_raw(const float* d_logits, size_t n, cudaStream_t stream) {
  reserve(raw_logits_, n);
  CUDA_CHECK(cudaMemcpyAsync(raw_logits_.get(), d_logits, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  return raw_logits_.get();
}

void DeviceLogprobs::answer(const RaggedBatch& batch, int vocab, int max_rows, const float* d_step_logits,
                            const int32_t* d_token_ids, const Head& head, cudaStream_t stream, const StepRequest& request,
                            StepResult& out) {
  const LogprobQuerySplit split = split_logprob_queries(batch, vocab, request);
  const size_t total = request.logprob_queries.size(), width = static_cast<size_t>(request.logprob_width);
  std::vector<size_t> order;  // task t answers query order[t]
  std::vector<LogprobTask> tasks;
  std::vector<int32_t> rows;
  for (const auto& [q, j] : split.sampled) {
    order.push_back(q);
    tasks.push_back({static_cast<int32_t>(j), request.logprob_queries[q].k, -1});
  }
  const size_t chunk = static_cast<size_t>(std::max(1, std::min(logprob_chunk_rows(vocab), max_rows)));
  for (size_t i = 0; i < split.computed.size(); ++i) {
    const LogprobQuery& query = request.logprob_queries[split.computed[i]];
    order.push_back(split.computed[i]);
    tasks.push_back({static_cast<int32_t>(i % chunk), query.k, query.target});
    rows.push_back(query.row);
  }
  reserve(tasks_, total);
  reserve(rows_, rows.size());
  reserve(target_, total);
  reserve(ids_, total * width);
  reserve(lps_, total * width);
  reserve(chunk_logits_, std::min(chunk, split.computed.size()) * static_cast<size_t>(vocab));
  CUDA_CHECK(cudaMemcpyAsync(tasks_.get(), tasks.data(), total * sizeof(LogprobTask), cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemcpyAsync(rows_.get(), rows.data(), rows.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  const LogprobOutputs all{target_.get(), ids_.get(), lps_.get(), static_cast<int>(width)};
  const size_t num_sampled = split.sampled.size();
  logprob_rows(d_step_logits, d_token_ids, tasks_.get(), static_cast<int>(num_sampled), vocab, all, stream);
  for (size_t c = 0; c < split.computed.size(); c += chunk) {
    const int n = static_cast<int>(std::min(chunk, split.computed.size() - c));
    head(rows_.get() + c, n, chunk_logits_.get());
    logprob_rows(chunk_logits_.get(), nullptr, tasks_.get() + num_sampled + c, n, vocab,
                 outputs_from(all, num_sampled + c), stream);
  }
  collect(order, request.logprob_width, stream, out);
}

// The answers back to the host (waits for the stream), task t's into query order[t]'s place.
void DeviceLogprobs::collect(const std::vector<size_t>& order, int width_k, cudaStream_t stream, StepResult& out) const {
  const size_t total = order.size(), width = static_cast<size_t>(width_k);
  std::vector<float> target(total), lps(total * width);
  std::vector<int32_t> ids(total * width);
  CUDA_CHECK(cudaMemcpyAsync(target.data(), target_.get(), total * sizeof(float), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaMemcpyAsync(ids.data(), ids_.get(), ids.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaMemcpyAsync(lps.data(), lps_.get(), lps.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  out.logprobs.resize(total, static_cast<int>(width));
  for (size_t t = 0; t < total; ++t) {
    const size_t q = order[t];
    out.logprobs.target_logprob[q] = target[t];
    std::copy_n(ids.data() + t * width, width, out.logprobs.top_ids.data() + q * width);  // width may be 0
    std::copy_n(lps.data() + t * width, width, out.logprobs.top_logprobs.data() + q * width);
  }
}

}  // namespace cbatch
