// The recurrent layers of a hybrid model in a step of the CUDA backend (cuda_forward.hpp,
// recurrent_states.hpp): the step's state copies (a fork's) and the zero states of the sequences that start,
// then, per recurrent layer, its kind's products and kernels (cuda/recurrent/: deltanet.hpp, short_conv.hpp,
// mamba2.hpp, mamba2_chunked.hpp) over each sequence's state slot. The same order of operations as the CPU's
// cpu_deltanet.cpp, cpu_short_conv.cpp and cpu_mamba2.cpp (the chunked delta rule and Mamba-2 scan: equal up to
// rounding), LoRA adapters added after the in and out products as there.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/backend/cuda_forward.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/recurrent/deltanet.hpp"
#include "cuda/recurrent/deltanet_chunked.hpp"
#include "cuda/recurrent/mamba2.hpp"
#include "cuda/recurrent/mamba2_chunked.hpp"
#include "cuda/recurrent/short_conv.hpp"
#include "engine/base/error.hpp"

namespace cbatch {
namespace {

// The step's chunk plan (deltanet_chunk_plan.hpp: the sequences with kDeltaNetChunk real rows or more) on the
// device, read by every DeltaNet layer; none without the chunked delta rule. begin and real (num_seqs) as
// DeltaNetSeqs holds them, on the host.
template <typename T>
void upload_chunk_plan(RecurrentStates<T>& rs, const int32_t* begin, const int32_t* real, int num_seqs,
                       cudaStream_t stream) {
  rs.seq_chunked = nullptr;
  rs.num_chunked_seqs = rs.num_chunks = 0;
  if (!rs.chunked) return;
  const DeltaNetChunkPlan plan = plan_deltanet_chunks(begin, real, num_seqs, deltanet_detail::kDeltaNetChunk);
  if (plan.num_chunks() == 0) return;
  int32_t* host = rs.host_chunk_plan.get();
  size_t at = 0;
  for (const std::vector<int32_t>* part : {&plan.chunked, &plan.seq, &plan.seq_chunks, &plan.rows}) {
    if (at + part->size() > rs.host_chunk_plan.size()) {
      throw Error("internal error: the DeltaNet chunk plan outgrows its " +
                  std::to_string(rs.host_chunk_plan.size()) + " values");
    }
    std::copy(part->begin(), part->end(), host + at);
    at += part->size();
  }
  CUDA_CHECK(cudaMemcpyAsync(rs.chunk_plan.get(), host, at * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  const int32_t* device = rs.chunk_plan.get();
  const int n = plan.num_chunked_seqs();
  rs.seq_chunked = device;
  rs.chunks = {device + num_seqs, device + num_seqs + n, device + num_seqs + 2 * n + 1};
  rs.num_chunked_seqs = n;
  rs.num_chunks = plan.num_chunks();
}

}  // namespace

template <typename T>
void CudaBackend<T>::prepare_states(const RaggedBatch& batch, cudaStream_t stream) {
  RecurrentStates<T>& rs = recurrent_;
  if (rs.num_layers == 0) return;
  const size_t slot_bytes = static_cast<size_t>(rs.slot_bytes());
  auto slot_at = [&](int32_t slot) {
    if (slot < 0 || slot >= rs.num_slots) {
      throw Error("state slot " + std::to_string(slot) + " outside the " + std::to_string(rs.num_slots) + " slots");
    }
    return rs.slots.get() + static_cast<int64_t>(slot) * rs.slot_floats();
  };
  for (int c = 0; c < batch.num_state_copies(); ++c) {  // in order, on the stream: before anything reads them
    CUDA_CHECK(cudaMemcpyAsync(slot_at(batch.state_copies[2 * c + 1]), slot_at(batch.state_copies[2 * c]), slot_bytes,
                               cudaMemcpyDeviceToDevice, stream));
  }
  const int ns = batch.num_seqs();
  int32_t* real = rs.host_seqs.get();
  int32_t* slots = real + ns;
  rs.max_seq_rows = 0;
  for (int s = 0; s < ns; ++s) {
    const int first = batch.query_start[s], end = batch.query_start[s + 1];
    rs.max_seq_rows = std::max(rs.max_seq_rows, end - first);
    int n = 0;
    while (first + n < end && batch.slot_mapping[first + n] >= 0) ++n;  // padding rows come last
    real[s] = n;
    slots[s] = batch.state_slots[static_cast<size_t>(s)];
    if (first < end && batch.positions[first] == 0 && n > 0) {  // a sequence that starts: a zero state
      CUDA_CHECK(cudaMemsetAsync(slot_at(slots[s]), 0, slot_bytes, stream));
    } else if (first < end) {
      slot_at(slots[s]);  // checked
    }
  }
  CUDA_CHECK(cudaMemcpyAsync(rs.seq_real.get(), real, ns * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemcpyAsync(rs.seq_slot.get(), slots, ns * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  upload_chunk_plan(rs, batch.query_start.data(), real, ns, stream);
}

// The layer's mixer by its kind (backend_checks.cpp admits only these), its input h already normed; its
// output is left in the workspace's delta for the next norm to add.
template <typename T>
void CudaBackend<T>::run_recurrent(int layer, const RaggedBatch& batch, const BatchIndices& idx) {
  switch (config_.layer_kind(layer)) {
    case LayerKind::kDeltaNet: return run_deltanet(layer, batch, idx);
    case LayerKind::kShortConv: return run_short_conv(layer, batch, idx);
    case LayerKind::kMamba2: return run_mamba2(layer, batch, idx);
    default:
      throw Error("internal error: layer " + std::to_string(layer) + " (" +
                  std::string(layer_kind_name(config_.layer_kind(layer))) + ") has no CUDA mixer");
  }
}

// x += out(gated_norm(delta_rule(conv(qkv(h))), z)): the layer's mixer, its input h already normed; its
// output is left in the workspace's delta for the FFN's norm to add. The delta rule runs token by token,
// except on the sequences the step's chunk plan names (upload_chunk_plan), which take the chunked kernels.
template <typename T>
void CudaBackend<T>::run_deltanet(int layer, const RaggedBatch& batch, const BatchIndices& idx) {
  const LayerWeights<T>& w = weights_.layers[static_cast<size_t>(layer)];
  RecurrentStates<T>& rs = recurrent_;
  const cudaStream_t stream = context_.stream();
  const int n = batch.num_tokens(), ns = batch.num_seqs();
  const DeltaNetSizes& d = rs.dims;
  linear_.forward(w.linear[LayerTensor::kSsmQkv], rs.proj.get(), workspace_.h.get(), n);  // [q|k|v | z]
  linear_.forward(w.linear[LayerTensor::kSsmBeta], rs.side.get(), workspace_.h.get(), n);   // [b | a]
  const DeltaNetSizes& sizes = config_.deltanet;
  add_lora(LoraProduct::kSsmQkvz, layer, idx, workspace_.h.get(), config_.dim, rs.proj.get(),
           sizes.conv_dim() + sizes.value_dim());
  add_lora(LoraProduct::kSsmBa, layer, idx, workspace_.h.get(), config_.dim, rs.side.get(), 2 * sizes.num_v_heads);
  profiler_.phase("gemm_ssm_in", stream);
  const DeltaNetSeqs seqs{idx.query_start, rs.seq_real.get(), rs.seq_slot.get(), rs.seq_chunked};
  const DeltaNetStates states = rs.layer_states(layer);
  deltanet_conv<T>(rs.conv_out.get(), rs.proj.get(), w.vector(LayerTensor::kSsmConv), d, seqs, ns, states, stream);
  deltanet_gates<T>(rs.conv_out.get(), rs.gates.get(), rs.side.get(), w.vector(LayerTensor::kSsmDecay),
                    w.vector(LayerTensor::kSsmDtBias), d, n, stream);
  deltanet_delta_rule(rs.core.get(), rs.conv_out.get(), rs.gates.get(), d, seqs, ns, states, stream);
  deltanet_chunked_delta_rule(rs.core.get(), rs.conv_out.get(), rs.gates.get(), rs.chunk_work(), d, seqs, rs.chunks,
                              rs.num_chunked_seqs, rs.num_chunks, states, stream);
  deltanet_gated_norm<T>(rs.normed.get(), rs.core.get(), rs.proj.get(), w.vector(LayerTensor::kSsmNorm), d, n,
                         config_.rms_eps, stream);
  profiler_.phase("deltanet", stream);
  linear_.forward(w.linear[LayerTensor::kSsmOut], workspace_.delta.get(), rs.normed.get(), n);
  add_lora(LoraProduct::kSsmOut, layer, idx, rs.normed.get(), sizes.value_dim(), workspace_.delta.get(), config_.dim);
  profiler_.phase("gemm_ssm_out", stream);
}

// x += out(C * conv(B * x)), [B | C | x] = in(h): LFM2's short conv.
template <typename T>
void CudaBackend<T>::run_short_conv(int layer, const RaggedBatch& batch, const BatchIndices& idx) {
  const LayerWeights<T>& w = weights_.layers[static_cast<size_t>(layer)];
  RecurrentStates<T>& rs = recurrent_;
  const cudaStream_t stream = context_.stream();
  const int n = batch.num_tokens();
  linear_.forward(w.linear[LayerTensor::kShortConvIn], rs.proj.get(), workspace_.h.get(), n);  // [B | C | x]
  add_lora(LoraProduct::kShortConvIn, layer, idx, workspace_.h.get(), config_.dim, rs.proj.get(), 3 * config_.dim);
  profiler_.phase("gemm_ssm_in", stream);
  const DeltaNetSeqs seqs{idx.query_start, rs.seq_real.get(), rs.seq_slot.get()};
  short_conv<T>(rs.normed.get(), rs.proj.get(), w.vector(LayerTensor::kShortConvTaps), config_.dim,
                config_.short_conv_kernel, seqs, batch.num_seqs(), rs.layer_states(layer), stream);
  profiler_.phase("short_conv", stream);
  linear_.forward(w.linear[LayerTensor::kShortConvOut], workspace_.delta.get(), rs.normed.get(), n);
  add_lora(LoraProduct::kShortConvOut, layer, idx, rs.normed.get(), config_.dim, workspace_.delta.get(), config_.dim);
  profiler_.phase("gemm_ssm_out", stream);
}

// x += out(gated_norm(scan(conv(x|B|C), dt), z)), [z | x|B|C | dt] = in(h): a Mamba-2 layer.
template <typename T>
void CudaBackend<T>::run_mamba2(int layer, const RaggedBatch& batch, const BatchIndices& idx) {
  const LayerWeights<T>& w = weights_.layers[static_cast<size_t>(layer)];
  RecurrentStates<T>& rs = recurrent_;
  const cudaStream_t stream = context_.stream();
  const int n = batch.num_tokens(), ns = batch.num_seqs();
  const Mamba2Sizes& d = rs.mamba;
  linear_.forward(w.linear[LayerTensor::kMambaIn], rs.proj.get(), workspace_.h.get(), n);  // [z | x|B|C | dt]
  add_lora(LoraProduct::kMambaIn, layer, idx, workspace_.h.get(), config_.dim, rs.proj.get(),
           config_.mamba.in_proj_dim());
  profiler_.phase("gemm_ssm_in", stream);
  const DeltaNetSeqs seqs{idx.query_start, rs.seq_real.get(), rs.seq_slot.get()};
  const DeltaNetStates states = rs.layer_states(layer);
  mamba2_conv<T>(rs.conv_out.get(), rs.proj.get(), w.vector(LayerTensor::kMambaConv),
                 w.vector(LayerTensor::kMambaConvBias), d, seqs, ns, states, stream);  // the bias null when absent
  // Runs of kMambaChunkRows rows or more on the chunked scan (--cuda-kernel mamba-scan=chunked), the others
  // (decode rows, short chunks) token by token.
  const int max_seq_rows = rs.max_seq_rows;
  const bool chunked = options_.kernels.chunked_mamba_scan && max_seq_rows >= deltanet_detail::kMambaChunkRows;
  mamba2_scan<T>(rs.core.get(), rs.conv_out.get(), rs.proj.get(), w.vector(LayerTensor::kMambaDecay),
                 w.vector(LayerTensor::kMambaDtBias), w.vector(LayerTensor::kMambaD), d, seqs, ns, states, stream,
                 chunked ? deltanet_detail::kMambaChunkRows : INT32_MAX);
  if (chunked) {
    mamba2_chunked_scan<T>(rs.core.get(), rs.conv_out.get(), rs.proj.get(), w.vector(LayerTensor::kMambaDecay),
                           w.vector(LayerTensor::kMambaDtBias), w.vector(LayerTensor::kMambaD), d, seqs, ns,
                           max_seq_rows, states, stream);
  }
  mamba2_gated_norm<T>(rs.normed.get(), rs.core.get(), rs.proj.get(), w.vector(LayerTensor::kMambaNorm), d, n,
                       config_.rms_eps, stream);
  profiler_.phase("mamba2", stream);
  linear_.forward(w.linear[LayerTensor::kMambaOut], workspace_.delta.get(), rs.normed.get(), n);
  add_lora(LoraProduct::kMambaOut, layer, idx, rs.normed.get(), config_.mamba.inner(), workspace_.delta.get(),
           config_.dim);
  profiler_.phase("gemm_ssm_out", stream);
}

#define CBATCH_INSTANTIATE_RECURRENT(T)                                                      \
  template void CudaBackend<T>::prepare_states(const RaggedBatch&, cudaStream_t);          \
  template void CudaBackend<T>::run_recurrent(int, const RaggedBatch&, const BatchIndices&);
CBATCH_INSTANTIATE_RECURRENT(float)
CBATCH_INSTANTIATE_RECURRENT(__nv_bfloat16)
CBATCH_INSTANTIATE_RECURRENT(__half)
#undef CBATCH_INSTANTIATE_RECURRENT

}  // namespace cbatch
