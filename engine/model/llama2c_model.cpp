// A llama2.c checkpoint (.bin) as a Model. Layout: 7 int32 (dim, hidden_dim, n_layers, n_heads,
// n_kv_heads, vocab_size, seq_len; a negative vocab_size means an untied classifier follows), then
// fp32 arrays: token_embedding (vocab, dim), rms_att (layer, dim), wq (layer, dim, dim),
// wk and wv (layer, kv_dim, dim), wo (layer, dim, dim), rms_ffn (layer, dim), w1 (layer, hidden, dim),
// w2 (layer, dim, hidden), w3 (layer, hidden, dim), rms_final (dim), the legacy RoPE tables
// freq_cis_real/imag (seq_len, head_size / 2) which are skipped, then wcls (vocab, dim) if untied.
// w1 is the gate, w3 the up and w2 the down projection. The file size must match the header exactly.
#include <cstdlib>
#include <cstring>

#include "engine/base/error.hpp"
#include "engine/base/mapped_file.hpp"
#include "engine/model/model_checks.hpp"
#include "engine/model/model_formats.hpp"
#include "engine/text/tokenizer_loaders.hpp"

namespace cbatch {
namespace {

constexpr int64_t kHeaderBytes = 7 * 4;

struct Llama2cHeader {
  ModelConfig config;
  bool has_classifier = false;  // untied: wcls follows the RoPE tables
};

Llama2cHeader read_header(const MappedFile& file) {
  if (static_cast<int64_t>(file.size()) < kHeaderBytes) {
    throw Error("'" + file.path() + "' is too small for a llama2.c checkpoint (" +
                std::to_string(file.size()) + " bytes, the header alone has 28)");
  }
  int32_t h[7];
  std::memcpy(h, file.data(), sizeof(h));
  Llama2cHeader header;
  ModelConfig& c = header.config;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.num_layers = h[2];
  c.num_heads = h[3];
  c.num_kv_heads = h[4];
  header.has_classifier = h[5] < 0;
  c.vocab_size = h[5] == INT32_MIN ? 0 : std::abs(h[5]);
  c.max_context = h[6];
  c.head_dim = c.num_heads > 0 ? c.dim / c.num_heads : 0;
  c.rms_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.rope_layout = RopeLayout::kAdjacentPairs;
  c.tied_embeddings = !header.has_classifier;
  check_model_config(c, file.path());  // bounds every size, so the products below cannot overflow
  if (c.head_dim * c.num_heads != c.dim) {
    throw Error("'" + file.path() + "': llama2.c header has dim " + std::to_string(c.dim) +
                ", not a multiple of n_heads " + std::to_string(c.num_heads));
  }
  return header;
}

// Hands out consecutive fp32 tensors of the checkpoint.
class Cursor {
 public:
  explicit Cursor(const MappedFile& file) : base_(file.data()) {}
  TensorView take(const std::string& name, int64_t rows, int64_t cols) {
    TensorView v;
    v.name = name;
    v.dtype = DType::kF32;
    v.rows = rows;
    v.cols = cols;
    v.data = base_ + offset_;
    offset_ += rows * cols * 4;
    return v;
  }
  void skip(int64_t num_floats) { offset_ += num_floats * 4; }
  int64_t offset() const { return offset_; }

 private:
  const uint8_t* base_;
  int64_t offset_ = kHeaderBytes;
};

// The checkpoint's per-layer arrays in file order (run.c's), each every layer's tensor back to back.
constexpr LayerTensor kLayerArrays[] = {LayerTensor::kAttnNorm, LayerTensor::kWq, LayerTensor::kWk, LayerTensor::kWv,
                                        LayerTensor::kWo, LayerTensor::kFfnNorm, LayerTensor::kGate,
                                        LayerTensor::kDown, LayerTensor::kUp};

// The tensors under the table's llama2.c names: the embedding, the layer arrays, the final norm, the
// RoPE tables (skipped: computed from the config), and the classifier unless the lm_head is the embedding.
ModelTensors read_tensors(Cursor& cur, const Llama2cHeader& header) {
  const ModelConfig& c = header.config;
  auto take = [&](std::string name, Shape shape) {
    return cur.take(std::move(name), size_of(shape.rows, c), size_of(shape.cols, c));
  };
  auto take_model = [&](ModelTensor kind) {
    const ModelTensorRow& row = model_row(kind);
    return take(std::string(row.llama2c), row.shape);
  };
  ModelTensors t;
  t.layers.resize(c.num_layers);
  t[ModelTensor::kEmbedding] = take_model(ModelTensor::kEmbedding);
  for (LayerTensor kind : kLayerArrays) {
    const LayerTensorRow& row = layer_row(kind);
    for (size_t i = 0; i < t.layers.size(); ++i) {
      t.layers[i][kind] = take("layers." + std::to_string(i) + "." + std::string(row.llama2c), row.shape);
    }
  }
  t[ModelTensor::kFinalNorm] = take_model(ModelTensor::kFinalNorm);
  cur.skip(static_cast<int64_t>(c.max_context) * c.head_dim);  // freq_cis_real and freq_cis_imag
  t[ModelTensor::kLmHead] = header.has_classifier ? take_model(ModelTensor::kLmHead) : t[ModelTensor::kEmbedding];
  return t;
}

int64_t expected_file_bytes(const Llama2cHeader& header) {
  const ModelConfig& c = header.config;
  const int64_t dim = c.dim, layers = c.num_layers;
  const int64_t per_layer = 2 * dim + 2 * dim * c.q_dim() + 2 * dim * c.kv_dim() + 3 * dim * c.hidden_dim;
  const int64_t floats = static_cast<int64_t>(c.vocab_size) * dim * (header.has_classifier ? 2 : 1) +
                         layers * per_layer + dim + static_cast<int64_t>(c.max_context) * c.head_dim;
  return kHeaderBytes + floats * 4;
}

}  // namespace

Model load_llama2c_model(const ModelSource& source) {
  if (source.tokenizer_path.empty()) {
    throw Error("'" + source.path +
                "' is a llama2.c checkpoint, which has no tokenizer: pass its "
                "tokenizer.bin with --tokenizer");
  }
  auto file = std::make_shared<MappedFile>(source.path);
  const Llama2cHeader header = read_header(*file);
  const int64_t expected = expected_file_bytes(header);
  if (static_cast<int64_t>(file->size()) != expected) {
    throw Error("'" + source.path + "' is not a valid llama2.c checkpoint: its header (dim " +
                std::to_string(header.config.dim) + ", " + std::to_string(header.config.num_layers) +
                " layers, vocab " + std::to_string(header.config.vocab_size) + ") needs " +
                std::to_string(expected) + " bytes, the file has " + std::to_string(file->size()));
  }
  Model model;
  model.path = source.path;
  model.format = "llama2c";
  model.weight_dtype = "f32";
  model.config = header.config;
  Cursor cursor(*file);
  model.tensors = read_tensors(cursor, header);
  model.tokenizer = load_llama2c_tokenizer(source.tokenizer_path, model.config.vocab_size);
  model.storage = file;
  return model;
}

std::unique_ptr<Tokenizer> load_llama2c_model_tokenizer(const ModelSource& source) {
  if (source.tokenizer_path.empty()) {
    throw Error("'" + source.path +
                "' is a llama2.c checkpoint, which has no tokenizer: pass its "
                "tokenizer.bin with --tokenizer");
  }
  const MappedFile file(source.path);
  return load_llama2c_tokenizer(source.tokenizer_path, read_header(file).config.vocab_size);
}

}  // namespace cbatch
