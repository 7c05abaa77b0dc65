// The end of a CUDA backend step (cuda_forward.hpp): the final norm and lm_head of the sampling rows, then
// their logits or their next tokens (argmax, or drawn on the device) back to the host, and the answers to
// the step's logprob queries.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "cuda/backend/cuda_forward.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/elementwise/rmsnorm.hpp"
#include "cuda/elementwise/softcap.hpp"
#include "cuda/gemm/gemm.hpp"
#include "cuda/sampling/argmax.hpp"
#include "cuda/sampling/sample_rows.hpp"
#include "engine/base/error.hpp"

namespace cbatch {

// Final norm and lm_head for the sampling rows only, then their logits or next token ids back to the host.
template <typename T>
void CudaBackend<T>::run_head(const RaggedBatch& batch, const BatchIndices& idx, const StepRequest& request,
                              StepResult& out) {
  Workspace<T>& ws = workspace_;
  const cudaStream_t stream = context_.stream();
  const int num_logits = batch.num_logits();
  const int vocab = config_.vocab_size;
  const float* step_logits = ws.logits.get();
  if (num_logits > 0) {
    head_rows(idx.logits_rows, num_logits, ws.logits.get());
    profiler_.phase("lm_head", stream);  // final norm and logits; the rest of the step is "pick+copy"
    // The device sampler applies masks and penalties to the logits in place: logprobs come from a copy
    // made before (logprobs are of the raw logits).
    if (!request.logprob_queries.empty() && (!request.penalty_tokens.empty() || !request.token_mask.empty())) {
      step_logits = logprobs_.keep_raw(ws.logits.get(), static_cast<size_t>(num_logits) * vocab, stream);
    }
    if (request.want_logits) {
      out.logits.resize(static_cast<size_t>(num_logits) * vocab);
      CUDA_CHECK(cudaMemcpyAsync(out.logits.data(), ws.logits.get(), out.logits.size() * sizeof(float),
                                 cudaMemcpyDeviceToHost, stream));
    } else {
      pick_tokens(num_logits, request);
    }
  }
  if (!request.logprob_queries.empty()) {  // only k values a row come back
    const DeviceLogprobs::Head head = [this](const int32_t* d_rows, int n, float* d_logits) { head_rows(d_rows, n, d_logits); };
    logprobs_.answer(batch, vocab, options_.max_batch_tokens, step_logits, ws.token_ids.get(), head, stream, request, out);
    profiler_.phase("logprobs", stream);
  }
  profiler_.end_step(stream);  // the step's one synchronization; also frees the pinned index buffer for reuse
  if (!request.want_logits) out.token_ids.assign(ws.host_token_ids.get(), ws.host_token_ids.get() + num_logits);
}

// The final norm and lm_head of batch rows d_rows[0..n) (n <= max_batch_tokens) into d_logits (n, vocab) fp32.
template <typename T>
void CudaBackend<T>::head_rows(const int32_t* d_rows, int n, float* d_logits) {
  Workspace<T>& ws = workspace_;
  const cudaStream_t stream = context_.stream();
  const int last = config_.num_layers - 1;
  // The last layer's last sublayer (its FFN, or Nemotron-H's mixer alone), unless that layer's tail added it
  // (Gemma 4: adds_own_output).
  const bool adds_delta = last >= 0 && !adds_own_output();
  const T* last_delta = adds_delta ? ws.delta.get() : nullptr;
  const SublayerOut out = adds_delta ? sublayer_out(last, config_.has_ffn(last)) : SublayerOut{};
  if (out.bias != nullptr) throw Error("internal error: the final norm adds no o bias (a last layer without an FFN)");
  rmsnorm_gather<T>(ws.h.get(), ws.x.get(), last_delta, weights_.final_norm(), d_rows, n, config_.dim,
                    config_.rms_eps, stream, out.post_norm, config_.residual_scale);
  gemm<T, float>(context_.cublas(), stream, d_logits, ws.h.get(), weights_.lm_head(), n, config_.vocab_size, config_.dim);
  const size_t num_logits = static_cast<size_t>(n) * config_.vocab_size;
  if (config_.final_softcap > 0.0f) softcap(d_logits, num_logits, config_.final_softcap, stream);
  if (config_.logit_divisor != 1.0f) divide_logits(d_logits, num_logits, config_.logit_divisor, stream);  // Granite
}

// The sampling rows' next tokens from the logits on the device (argmax, or each row's draw), copied back.
template <typename T>
void CudaBackend<T>::pick_tokens(int num_logits, const StepRequest& request) {
  Workspace<T>& ws = workspace_;
  const cudaStream_t stream = context_.stream();
  const size_t rows = static_cast<size_t>(num_logits);
  if (request.sampling.empty()) {
    argmax(ws.token_ids.get(), ws.logits.get(), num_logits, config_.vocab_size, stream);
  } else {
    if (!device_sampling_ || request.sampling.size() != rows) {
      throw Error("CUDA backend: " + std::to_string(request.sampling.size()) + " row sampling parameters for " +
                  std::to_string(rows) + " sampling rows" + (device_sampling_ ? "" : " (device sampling is off)"));
    }
    const PenaltyToken* d_penalty_tokens = sampling_lists_.upload_penalty_tokens(request, stream);
    const uint64_t* d_token_mask = sampling_lists_.upload_token_mask(request, config_.vocab_size, stream);
    std::copy(request.sampling.begin(), request.sampling.end(), ws.host_sampling.get());
    CUDA_CHECK(cudaMemcpyAsync(ws.sampling.get(), ws.host_sampling.get(), rows * sizeof(RowSampling),
                               cudaMemcpyHostToDevice, stream));
    sample_rows(ws.token_ids.get(), ws.logits.get(), ws.sampling.get(), d_penalty_tokens, d_token_mask, num_logits,
                config_.vocab_size, stream);
  }
  CUDA_CHECK(cudaMemcpyAsync(ws.host_token_ids.get(), ws.token_ids.get(), rows * sizeof(int32_t),
                             cudaMemcpyDeviceToHost, stream));
}

#define CBATCH_INSTANTIATE_HEAD(T)                                                                            \
  template void CudaBackend<T>::run_head(const RaggedBatch&, const BatchIndices&, const StepRequest&,         \
                                         StepResult&);                                                        \
  template void CudaBackend<T>::head_rows(const int32_t*, int, float*);                                       \
  template void CudaBackend<T>::pick_tokens(int, const StepRequest&);
CBATCH_INSTANTIATE_HEAD(float)
CBATCH_INSTANTIATE_HEAD(__nv_bfloat16)
CBATCH_INSTANTIATE_HEAD(__half)
#undef CBATCH_INSTANTIATE_HEAD

}  // namespace cbatch
