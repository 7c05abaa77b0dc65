// Weight upload: a tensor in a GGUF block type is copied as it is stored, in chunks of whole rows of at
// most 64 MiB through one pinned buffer, and decoded to T on the device (decode_blocks: the host's own
// formulas); any other host tensor is converted to fp32 in such chunks (tensor_rows_to_f32), copied and
// narrowed to T on the device; random tensors are generated on the device. Fused matrices are written
// part by part at row offsets. Vectors (norm weights, biases: fp32 on the device) are converted on the
// host, random ones included, so that the family's norm offset is added in fp32 exactly as the CPU
// backend adds it.
// With fp8 weights each linear weight is uploaded in T as above and then quantized on the device to FP8
// (linear.cpp); its shape is checked against cuBLASLt's FP8 rule before the upload. Otherwise (bf16, fp16) a
// projection whose parts are blocks the block GEMM reads is copied as its blocks and stays so (linear_blocks.hpp).
// The chunked transfers themselves: weight_uploader.hpp.
// Qwen3-Next's DeltaNet projections, grouped by key head in its files, are put in the standard order on the
// device once their rows are in T (deltanet_layout.hpp), so that its layers run Qwen3.5's forward.
// Experts (T bf16 or fp16): tensors in a block type that moe_quant_gemm reads (MXFP4, Q8_0, Q4_K, ...) are copied
// as their blocks and stay so (dummy MXFP4 experts, --dummy-dtype mxfp4, are generated as their blocks on the
// device, and decoded to T like uploaded blocks where they take the T path); with fp8 weights each expert is
// uploaded in T into one expert-sized scratch buffer and quantized on the device, a scale per row (on the device:
// every source format goes through the decoders above, and the host does no per-weight work).
#include "cuda/backend/device_weights.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <string>
#include <vector>

#include "cuda/backend/weight_convert.hpp"
#include "cuda/backend/weight_uploader.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/gemm/fp8_gemm.hpp"
#include "cuda/gemm/linear_blocks.hpp"
#include "cuda/recurrent/deltanet.hpp"
#include "engine/model/deltanet_layout.hpp"
#include "engine/model/quant_blocks.hpp"

namespace cbatch {
namespace {

// One part of a fused linear weight: a model tensor of `rows` rows.
struct LinearSource {
  const TensorView& tensor;
  int64_t rows;
};

// Throws unless `runs` put all `out` rows of weight `name` in order.
void check_runs_cover(const std::vector<RowRun>& runs, int64_t out, const std::string& name) {
  int64_t covered = 0;
  for (const RowRun& run : runs) covered += run.count;
  if (covered != out) {
    throw Error("internal error: the row order of '" + name + "' covers " + std::to_string(covered) + " of its " +
                std::to_string(out) + " rows");
  }
}

// The linear weight (sum of the sources' rows, in) made of `sources` stacked, in T or (fp8) in FP8. With
// `runs` (a DeltaNet projection grouped by key head: deltanet_layout.hpp) the stacked rows, once in T, are put
// in the standard order by one device copy a run, before any FP8 quantization (which takes its scale from the
// reordered rows); every source format and random weights alike, since the rows are T's by then.
template <typename T>
LinearWeight<T> upload_linear(WeightUploader& up, const std::vector<LinearSource>& sources, int64_t in, bool fp8,
                              const std::vector<RowRun>& runs = {}) {
  std::vector<WeightPart> parts;
  int64_t out = 0;
  for (const LinearSource& s : sources) {
    if (fp8) check_fp8_weight_shape(s.tensor.name, s.tensor.rows, s.tensor.cols);  // before any upload
    parts.push_back(WeightPart{s.tensor.name, out, s.rows});
    out += s.rows;
  }
  DeviceBuffer<T> weight(static_cast<size_t>(out * in));
  for (size_t i = 0; i < sources.size(); ++i) {
    up.upload(sources[i].tensor, parts[i].rows, in, weight.get() + static_cast<size_t>(parts[i].first_row * in));
  }
  if (!runs.empty()) {
    check_runs_cover(runs, out, sources.front().tensor.name);
    DeviceBuffer<T> stored = std::move(weight);
    weight = DeviceBuffer<T>(static_cast<size_t>(out * in));
    auto* dst = reinterpret_cast<uint8_t*>(weight.get());
    const auto* src = reinterpret_cast<const uint8_t*>(stored.get());
    copy_row_runs(runs, in * static_cast<int64_t>(sizeof(T)), [&](int64_t dst_offset, int64_t src_offset, int64_t bytes) {
      CUDA_CHECK(cudaMemcpyAsync(dst + dst_offset, src + src_offset, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                                 up.stream()));
    });
    up.finish();  // the copies are done before `stored` is freed
  }
  if (fp8) return quantize_weight_fp8<T>(std::move(weight), out, in, parts, up.stream());
  LinearWeight<T> w;
  w.out = out;
  w.in = in;
  w.weight = std::move(weight);
  return w;
}

// A fused linear weight (out, in) kept as its parts' blocks (linear_blocks.hpp), stacked row by row as they are
// stored; `runs` reorder whole rows of blocks as they reorder rows in T.
template <typename T>
LinearWeight<T> upload_linear_blocks(WeightUploader& up, const std::vector<LinearSource>& sources, int64_t in,
                                     DType dtype, const std::vector<RowRun>& runs) {
  int64_t out = 0;
  for (const LinearSource& s : sources) out += s.rows;
  const int64_t stride = row_bytes(dtype, in);
  LinearWeight<T> w;
  w.out = out;
  w.in = in;
  w.block_type = dtype;
  w.blocks = DeviceBuffer<uint8_t>(static_cast<size_t>(out * stride));
  int64_t row = 0;
  for (const LinearSource& s : sources) {
    up.upload_raw_blocks(s.tensor, s.rows, in, w.blocks.get() + row * stride);
    row += s.rows;
  }
  if (runs.empty()) return w;
  check_runs_cover(runs, out, sources.front().tensor.name);
  DeviceBuffer<uint8_t> stored = std::move(w.blocks);
  w.blocks = DeviceBuffer<uint8_t>(stored.size());
  copy_row_runs(runs, stride, [&](int64_t dst_offset, int64_t src_offset, int64_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(w.blocks.get() + dst_offset, stored.get() + src_offset, static_cast<size_t>(bytes),
                               cudaMemcpyDeviceToDevice, up.stream()));
  });
  up.finish();  // the copies are done before `stored` is freed
  return w;
}

// One part of an expert's stacked matrix: a model tensor of `rows` rows.
struct ExpertSource {
  const TensorView* tensor;
  int64_t rows;
};

// How a stacked expert product is kept (device_weights.hpp): FP8 rows with fp8 weights; GGUF blocks where
// every expert's tensors are blocks of one type that moe_quant_gemm reads (expert_blocks_supported), else T;
// always T for fp32 or when kept_quantized is false. Random MXFP4 tensors (--dummy-dtype mxfp4) are
// generated as blocks on the device; random tensors of other block types are not (they stay T).
template <typename T>
ExpertFormat expert_format(const std::vector<std::vector<ExpertSource>>& experts, int64_t k, bool fp8,
                           bool keep_quantized) {
  if (std::is_same_v<T, float> || !keep_quantized) return ExpertFormat::kT;
  if (fp8) return ExpertFormat::kFp8Row;
  const TensorView& first = *experts.front().front().tensor;
  if (!expert_blocks_supported(first.dtype, k) || (first.is_random && first.dtype != DType::kMXFP4)) {
    return ExpertFormat::kT;
  }
  for (const auto& parts : experts) {
    for (const ExpertSource& p : parts) {
      if (p.tensor->dtype != first.dtype || p.tensor->is_random != first.is_random) return ExpertFormat::kT;
      if (p.tensor->input_order != nullptr) return ExpertFormat::kT;  // act-order: the fp32 way, in order
    }
  }
  return ExpertFormat::kBlocks;
}

// Every expert's (n, k) matrix, stacked from its parts, in `format`.
template <typename T>
ExpertMatrix<T> upload_experts(WeightUploader& up, const std::vector<std::vector<ExpertSource>>& experts, int64_t n,
                               int64_t k, ExpertFormat format) {
  const size_t num = experts.size(), size = static_cast<size_t>(n * k);
  ExpertMatrix<T> m;
  m.format = format;
  if (format == ExpertFormat::kT) {
    m.dense = DeviceBuffer<T>(num * size);
    for (size_t e = 0; e < num; ++e) {
      int64_t row = 0;
      for (const ExpertSource& p : experts[e]) {
        up.upload(*p.tensor, p.rows, k, m.dense.get() + e * size + static_cast<size_t>(row * k));
        row += p.rows;
      }
    }
    return m;
  }
  if (format == ExpertFormat::kBlocks) {
    m.blocks = experts.front().front().tensor->dtype;
    const int64_t stride = row_bytes(m.blocks, k);
    m.quant = DeviceBuffer<uint8_t>(num * static_cast<size_t>(n * stride));
    for (size_t e = 0; e < num; ++e) {
      int64_t row = static_cast<int64_t>(e) * n;
      for (const ExpertSource& p : experts[e]) {
        up.upload_raw_blocks(*p.tensor, p.rows, k, m.quant.get() + row * stride);
        row += p.rows;
      }
    }
    return m;
  }
  if (k % 32 != 0) {
    throw Error("--quantization fp8: tensor '" + experts[0][0].tensor->name + "' has " + std::to_string(k) +
                " columns; the FP8 expert GEMM takes a multiple of 32");
  }
  DeviceBuffer<T> scratch(size);  // one expert in T, quantized before the next is uploaded (stream order)
  m.quant = DeviceBuffer<uint8_t>(num * size);
  m.scales = DeviceBuffer<float>(num * static_cast<size_t>(n));
  for (size_t e = 0; e < num; ++e) {
    int64_t row = 0;
    for (const ExpertSource& p : experts[e]) {
      up.upload(*p.tensor, p.rows, k, scratch.get() + static_cast<size_t>(row * k));
      row += p.rows;
    }
    quantize_rows_fp8<T>(m.quant.get() + e * size, m.scales.get() + e * static_cast<size_t>(n), scratch.get(), n, k,
                         up.stream());
  }
  std::vector<float> scales(m.scales.size());
  CUDA_CHECK(cudaMemcpyAsync(scales.data(), m.scales.get(), m.scales.bytes(), cudaMemcpyDeviceToHost, up.stream()));
  up.finish();  // also: scratch is no longer read
  for (size_t i = 0; i < scales.size(); ++i) {
    if (std::isfinite(scales[i])) continue;
    const size_t e = i / static_cast<size_t>(n);
    throw Error("--quantization fp8: tensor '" + experts[e][0].tensor->name + "' (or the tensor stacked with it) "
                "holds a NaN or an infinity, which no FP8 scale represents");
  }
  return m;
}

// The rows of `rows` that join the product `first` and that the model has, in table order.
template <typename Row, typename Kind, typename Present>
std::vector<const Row*> product_parts(Rows<Row> rows, Kind first, Present present) {
  std::vector<const Row*> parts;
  for (const Row& row : rows) {
    if (row.joins == first && present(row)) parts.push_back(&row);
  }
  return parts;
}

bool is_vector(Role role) { return role == Role::kNorm || role == Role::kBias || role == Role::kGateVector; }
// A recurrent layer's small fp32 tensors, uploaded whole as they are stored (the decay then turned into A).
bool is_recurrent_fp32(Role role) { return role == Role::kDense || role == Role::kPlainNorm || role == Role::kDecay; }

// A vector product's length: its parts' end to end (of layer's own sizes: Gemma 4's global layers).
template <typename Row>
int64_t vector_length(const std::vector<const Row*>& parts, const ModelConfig& c, int layer = -1) {
  int64_t n = 0;
  for (const Row* row : parts) n += size_of(row->shape.cols, c, layer);
  return n;
}

// A vector product's parts end to end at dst, fp32 (plus the norm offset on norms).
template <typename Row, typename Tensors>
void upload_vector_parts(WeightUploader& up, const std::vector<const Row*>& parts, const Tensors& t,
                         const ModelConfig& c, float* dst, int layer = -1) {
  for (const Row* row : parts) {
    const int64_t n = size_of(row->shape.cols, c, layer);
    up.upload_vector(t[row->kind], n, row->role == Role::kNorm ? c.norm_offset : 0.0f, dst);
    dst += n;
  }
}

// A sparse layer's routed experts, product by product of the expert table: every expert's matrix at its
// place in one buffer, every expert's bias vector at its row of one (num_experts, n) buffer.
template <typename T>
void upload_routed_experts(WeightUploader& up, const LayerTensors& t, const ModelConfig& c, bool fp8,
                           bool keep_quantized, LayerWeights<T>& w) {
  if (static_cast<int>(t.experts.size()) != c.num_experts) {
    throw Error("a sparse layer has " + std::to_string(t.experts.size()) + " experts' tensors, num_experts is " +
                std::to_string(c.num_experts));
  }
  for (const ExpertTensorRow& row : expert_tensor_rows()) {
    if (row.joins != row.kind) continue;
    const auto parts =
        product_parts(expert_tensor_rows(), row.kind, [&](const ExpertTensorRow& r) { return r.present(c); });
    if (parts.empty()) continue;
    if (is_vector(row.role)) {
      const int64_t n = vector_length(parts, c);
      DeviceBuffer<float>& buffer = w.expert_vectors[row.kind];
      buffer = DeviceBuffer<float>(t.experts.size() * static_cast<size_t>(n));
      for (size_t e = 0; e < t.experts.size(); ++e) {
        upload_vector_parts(up, parts, t.experts[e], c, buffer.get() + static_cast<int64_t>(e) * n);
      }
      continue;
    }
    std::vector<std::vector<ExpertSource>> sources(t.experts.size());
    int64_t n = 0;
    for (const ExpertTensorRow* part : parts) {
      const int64_t rows = size_of(part->shape.rows, c);
      for (size_t e = 0; e < t.experts.size(); ++e) sources[e].push_back({&t.experts[e][part->kind], rows});
      n += rows;
    }
    const int64_t k = size_of(row.shape.cols, c);
    w.experts[row.kind] = upload_experts<T>(up, sources, n, k, expert_format<T>(sources, k, fp8, keep_quantized));
  }
}

// The runs that put product `kind`'s rows in the standard order where the files group them by key head
// (Qwen3-Next's in_proj_qkvz and in_proj_ba); empty where they are stored in that order.
std::vector<RowRun> standard_row_runs(const ModelConfig& c, LayerTensor kind) {
  if (kind == LayerProduct::kSsmQkvz && c.deltanet.grouped_qkvz) return grouped_qkvz_runs(c.deltanet);
  if (kind == LayerProduct::kSsmBa && c.deltanet.grouped_ba) return grouped_ba_runs(c.deltanet);
  return {};
}

// How the layers' projections are kept (upload_weights' choices), and the tally of those in blocks.
struct LinearKeep {
  bool fp8 = false;
  bool blocks = false;  // weights=blocks and T bf16 or fp16
  LinearBlocksTally tally;
};

// A layer's products, row by row of the layer table: vectors fp32, linear weights in T or (the layers' projections)
// FP8 with fp8 weights, or their blocks where linear_blocks_choice keeps them; then a sparse layer's experts.
template <typename T>
LayerWeights<T> upload_layer(WeightUploader& up, const LayerTensors& t, const ModelConfig& c, int layer,
                             LinearKeep& keep, bool keep_quantized) {
  const bool fp8 = keep.fp8;
  LayerWeights<T> w;
  for (const LayerTensorRow& row : layer_tensor_rows()) {
    if (row.joins != row.kind) continue;  // uploaded with its product's first row
    const auto parts =
        product_parts(layer_tensor_rows(), row.kind, [&](const LayerTensorRow& r) { return r.present(c, layer); });
    if (parts.empty()) continue;
    if (is_vector(row.role)) {
      w.vectors[row.kind] = DeviceBuffer<float>(static_cast<size_t>(vector_length(parts, c, layer)));
      upload_vector_parts(up, parts, t, c, w.vectors[row.kind].get(), layer);
      continue;
    }
    if (is_recurrent_fp32(row.role)) {  // one part each: a conv's taps, a decay, a gated norm, kept fp32
      const int64_t rows = size_of(row.shape.rows, c, layer), cols = size_of(row.shape.cols, c, layer);
      w.vectors[row.kind] = up.upload<float>(t[row.kind], rows, cols);
      if (row.role == Role::kDecay && c.decay_from_log) {
        deltanet_decay_from_log(w.vectors[row.kind].get(), static_cast<int>(rows * cols), up.stream());
      }
      continue;
    }
    std::vector<LinearSource> sources;
    for (const LayerTensorRow* part : parts) sources.push_back({t[part->kind], size_of(part->shape.rows, c, layer)});
    // Gemma 4's k_eq_v: the layer's values are its keys' projection, so its k rows are uploaded again as the v
    // rows, and the one QKV GEMM gives [q | k | v = k] rows as every other layer's (the V norm, not the k norm
    // and RoPE, then applies to v in the RoPE step).
    if (row.kind == LayerProduct::kQkv && c.values_are_keys(layer) && c.writes_kv(layer)) {
      sources.push_back(sources.back());
    }
    const bool quantize = fp8 && row.role == Role::kProjection;  // the MoE's GEMMs take no FP8 router or shared expert
    const int64_t in = size_of(row.shape.cols, c, layer);
    if (row.role == Role::kProjection) {  // as with FP8: the MoE's cuBLAS GEMMs read the router and shared expert in T
      std::vector<const TensorView*> views;
      for (const LinearSource& s : sources) views.push_back(&s.tensor);
      const LinearBlocksChoice choice = linear_blocks_choice(views, in);
      keep.tally.add(sources.front().tensor.name, choice);
      if (keep.blocks && choice.blocks) {
        w.linear[row.kind] = upload_linear_blocks<T>(up, sources, in, choice.dtype, standard_row_runs(c, row.kind));
        continue;
      }
    }
    w.linear[row.kind] = upload_linear<T>(up, sources, in, quantize, standard_row_runs(c, row.kind));
  }
  if (c.is_sparse(layer)) upload_routed_experts<T>(up, t, c, fp8, keep_quantized, w);
  return w;
}

template <typename T>
const char* compute_name() {
  return std::is_same_v<T, float> ? "fp32" : std::is_same_v<T, __half> ? "fp16" : "bf16";
}

// The load notes of the linear weights: which stay in blocks, which were decoded and why; with fp8 weights or
// fp32 compute (no blocks kept), what happened to a model held in blocks.
std::vector<std::string> linear_notes(const LinearKeep& keep, bool fp8, bool linear_blocks, const char* compute) {
  const std::string tally = keep.tally.note(compute);
  if (tally.empty()) return {};
  if (fp8) {
    return {"--quantization fp8: the model's linear weights in blocks are decoded and quantized again to FP8 "
            "with a scale per tensor; their blocks are not kept (leave --quantization out to keep them)"};
  }
  if (!linear_blocks) return {"--cuda-kernel weights=dequant: every linear weight decoded to " + std::string(compute)};
  if (!keep.blocks) {
    return {"--dtype fp32: every linear weight decoded to fp32 (the block GEMM computes in bf16 or fp16)"};
  }
  return {tally};
}

}  // namespace

template <typename T>
size_t LayerWeights<T>::bytes() const {
  size_t total = 0;
  for (const LinearWeight<T>& m : linear.items) total += m.bytes();
  for (const DeviceBuffer<float>& v : vectors.items) total += v.bytes();
  for (const ExpertMatrix<T>& m : experts.items) total += m.bytes();
  for (const DeviceBuffer<float>& v : expert_vectors.items) total += v.bytes();
  return total;
}

template <typename T>
size_t DeviceWeights<T>::bytes() const {
  size_t total = rope_inv_freq.bytes();
  for (const DeviceBuffer<T>& m : tables.items) total += m.bytes();
  for (const DeviceBuffer<float>& v : vectors.items) total += v.bytes();
  for (const LayerWeights<T>& w : layers) total += w.bytes();
  return total;
}

template <typename T>
size_t DeviceWeights<T>::max_block_elems() const {
  size_t most = 0;
  for (const LayerWeights<T>& w : layers) {
    for (const LinearWeight<T>& m : w.linear.items) {
      if (m.is_blocks()) most = std::max(most, static_cast<size_t>(m.out) * static_cast<size_t>(m.in));
    }
  }
  return most;
}

template <typename T>
int64_t DeviceWeights<T>::max_block_out() const {
  int64_t most = 0;
  for (const LayerWeights<T>& w : layers) {
    for (const LinearWeight<T>& m : w.linear.items) {
      if (m.is_blocks()) most = std::max(most, m.out);
    }
  }
  return most;
}

template <typename T>
DeviceWeights<T> upload_weights(const Model& model, cudaStream_t stream, bool fp8_weights, bool keep_quantized,
                                bool linear_blocks) {
  const ModelConfig& c = model.config;
  const ModelTensors& t = model.tensors;
  if (static_cast<int>(t.layers.size()) != c.num_layers) {
    throw Error("model has " + std::to_string(t.layers.size()) + " layers of tensors, config says " +
                std::to_string(c.num_layers));
  }
  WeightUploader up(stream);
  DeviceWeights<T> w;
  for (const ModelTensorRow& row : model_tensor_rows()) {  // a tied lm_head is the embedding's buffer
    if (!row.present(c) || (row.kind == ModelTensor::kLmHead && c.tied_embeddings)) continue;
    const int64_t rows = size_of(row.shape.rows, c), cols = size_of(row.shape.cols, c);
    if (is_vector(row.role)) {
      w.vectors[row.kind] = up.upload_norm(t[row.kind], cols, row.role == Role::kNorm ? c.norm_offset : 0.0f);
    } else {
      w.tables[row.kind] = up.upload<T>(t[row.kind], rows, cols);
    }
  }
  LinearKeep keep{fp8_weights, linear_blocks && !fp8_weights && !std::is_same_v<T, float>, {}};
  for (int l = 0; l < c.num_layers; ++l) {
    w.layers.push_back(upload_layer<T>(up, t.layers[static_cast<size_t>(l)], c, l, keep, keep_quantized));
  }
  w.notes = linear_notes(keep, fp8_weights, linear_blocks, compute_name<T>());

  // Every RopeTable set, computed as the CPU backend computes them (sets a model does not use are cheap), each
  // as wide as the widest head's pairs (Gemma 4's global layers rotate their own head: rotary_dims_of).
  const size_t half = static_cast<size_t>(std::max({c.max_head_dim(), c.rotary_dims_of(false), c.rotary_dims_of(true)}) / 2);
  std::vector<float> inv_freq(kNumRopeTables * half);
  for (int set = 0; set < kNumRopeTables; ++set) {
    rope_inv_freq(c, inv_freq.data() + set * half, (set & kRopeLocal) != 0, (set & kRopeLongRange) != 0);
  }
  w.rope_inv_freq = DeviceBuffer<float>(inv_freq.size());
  CUDA_CHECK(cudaMemcpyAsync(w.rope_inv_freq.get(), inv_freq.data(), inv_freq.size() * sizeof(float),
                             cudaMemcpyHostToDevice, stream));
  up.finish();  // also keeps inv_freq alive until its copy is done
  return w;
}

template struct LayerWeights<float>;
template struct LayerWeights<__nv_bfloat16>;
template struct LayerWeights<__half>;
template struct DeviceWeights<float>;
template struct DeviceWeights<__nv_bfloat16>;
template struct DeviceWeights<__half>;
template DeviceWeights<float> upload_weights<float>(const Model&, cudaStream_t, bool, bool, bool);
template DeviceWeights<__nv_bfloat16> upload_weights<__nv_bfloat16>(const Model&, cudaStream_t, bool, bool, bool);
template DeviceWeights<__half> upload_weights<__half>(const Model&, cudaStream_t, bool, bool, bool);

}  // namespace cbatch
