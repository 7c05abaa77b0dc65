// Validation and single-copy upload of a step's RaggedBatch index arrays.
#include "cuda/backend/batch_indices.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cuda/attention/attention_shape.hpp"
#include "cuda/attention/decode_stream.hpp"
#include "cuda/common/cuda_check.hpp"

namespace cbatch {
namespace {

[[noreturn]] void bad_batch(const std::string& what) { throw Error("invalid batch for the CUDA backend: " + what); }

std::string num(int64_t v) { return std::to_string(v); }

void validate_sizes(const RaggedBatch& b, const BatchLimits& lim) {
  const int n = b.num_tokens();
  const int s = b.num_seqs();
  const size_t groups = lim.group_windows.size();
  if (b.num_kv_groups != static_cast<int>(groups)) {
    bad_batch(num(b.num_kv_groups) + " KV groups' tables for a model of " + num(static_cast<int64_t>(groups)));
  }
  if (b.positions.size() != b.token_ids.size() || b.slot_mapping.size() != groups * b.token_ids.size()) {
    bad_batch("token_ids, positions and slot_mapping (one row per KV group) differ in length");
  }
  if (n > lim.max_tokens) bad_batch(num(n) + " tokens exceed max_batch_tokens " + num(lim.max_tokens));
  if (s > lim.max_seqs) bad_batch(num(s) + " sequences exceed max_num_seqs " + num(lim.max_seqs));
  if (b.num_logits() > lim.max_seqs) bad_batch(num(b.num_logits()) + " logits rows exceed max_num_seqs " + num(lim.max_seqs));
  if (static_cast<int>(b.query_start.size()) != s + 1 || b.query_start[0] != 0 || b.query_start[s] != n) {
    bad_batch("query_start must have num_seqs + 1 entries from 0 to num_tokens");
  }
  for (int i = 0; i < s; ++i) {
    if (b.query_start[i + 1] < b.query_start[i]) bad_batch("query_start decreases at sequence " + num(i));
  }
  if (s > 0 && (b.max_blocks_per_seq <= 0 || b.max_blocks_per_seq > lim.max_blocks_per_seq)) {
    bad_batch("max_blocks_per_seq " + num(b.max_blocks_per_seq) + " is not in [1, " + num(lim.max_blocks_per_seq) + "]");
  }
  if (b.block_tables.size() != groups * static_cast<size_t>(s) * static_cast<size_t>(b.max_blocks_per_seq)) {
    bad_batch("block_tables must hold num_kv_groups * num_seqs * max_blocks_per_seq entries");
  }
  for (int r = 0; r < n; ++r) {
    if (b.token_ids[r] < 0 || b.token_ids[r] >= lim.vocab_size) {
      bad_batch("row " + num(r) + ": token id " + num(b.token_ids[r]) + " outside the vocabulary of " + num(lim.vocab_size));
    }
  }
  if (!b.lora_ids.empty() && static_cast<int>(b.lora_ids.size()) != s) bad_batch("lora_ids must be empty or one per sequence");
  for (const int32_t id : b.lora_ids) {
    if (id < 0 || id > lim.num_loras) bad_batch("LoRA adapter id " + num(id) + " was never loaded (" + num(lim.num_loras) + " are)");
  }
  for (int i = 0; i < b.num_logits(); ++i) {
    const int r = b.logits_rows[i];
    if (r < 0 || r >= n || (i > 0 && r <= b.logits_rows[i - 1])) bad_batch("logits_rows must be ascending rows");
  }
}

// In every KV group, every row's position maps through its sequence's block table to a valid block, and its
// slot (unless -1) is exactly that cache position, so attention reads what rope_kv_cache wrote; every block a
// row's window reads is a cache block (a windowed group's table is -1 before its rows' first window key: those
// blocks were freed, and the kernels start at the window).
void validate_cache_addresses(const RaggedBatch& b, const BatchLimits& lim) {
  const int bs = lim.block_size;
  for (size_t g = 0; g < lim.group_windows.size(); ++g) {
    const int window = lim.group_windows[g];
    const int32_t* slots = b.slot_mapping.data() + g * b.token_ids.size();
    for (int s = 0; s < b.num_seqs(); ++s) {
      const int32_t* table = b.block_tables.data() + (g * b.num_seqs() + static_cast<size_t>(s)) * b.max_blocks_per_seq;
      int min_pos = INT32_MAX, max_pos = -1;
      for (int r = b.query_start[s]; r < b.query_start[s + 1]; ++r) {
        const int pos = b.positions[r];
        if (pos < 0 || pos / bs >= b.max_blocks_per_seq) {
          bad_batch("row " + num(r) + ": position " + num(pos) + " outside the block table");
        }
        min_pos = std::min(min_pos, pos);
        max_pos = std::max(max_pos, pos);
        const int slot = slots[r];
        if (slot != -1 && (table[pos / bs] < 0 || slot != table[pos / bs] * bs + pos % bs)) {
          bad_batch("row " + num(r) + ": slot " + num(slot) + " is not position " + num(pos) + " of its block table");
        }
      }
      const int first = max_pos >= 0 ? window_first_key(min_pos, window) / bs : 0;
      for (int blk = first; blk <= max_pos / bs && max_pos >= 0; ++blk) {
        if (table[blk] < 0 || table[blk] >= lim.num_blocks) {
          bad_batch("sequence " + num(s) + ": block table entry " + num(blk) + " = " + num(table[blk]) +
                    " is not a block of the " + num(lim.num_blocks) + "-block cache");
        }
      }
    }
  }
}

}  // namespace

void validate_batch(const RaggedBatch& batch, const BatchLimits& limits) {
  validate_sizes(batch, limits);
  validate_cache_addresses(batch, limits);
}

size_t BatchUploader::capacity(const BatchLimits& lim) {
  const size_t tokens = static_cast<size_t>(lim.max_tokens);
  const size_t seqs = static_cast<size_t>(lim.max_seqs);
  // tokens, positions, slots, tile_seq, tile_row, LoRA tiles (3 each, a tile at least a row); query_start,
  // decode_tile_start per window kind; logits_rows, decode_seqs; block_tables
  static_assert(sizeof(LoraTile) == 3 * sizeof(int32_t));
  const size_t groups = lim.group_windows.size();  // slots and block tables: one set per KV group
  return (7 + groups) * tokens + (1 + kMaxWindowKinds) * (seqs + 1) + 2 * seqs +
         groups * seqs * static_cast<size_t>(lim.max_blocks_per_seq);
}

BatchUploader::BatchUploader(const BatchLimits& limits) : host_(capacity(limits)), device_(capacity(limits)) {}

BatchIndices BatchUploader::upload(const RaggedBatch& b, int rows_per_tile, bool split_decode, cudaStream_t stream,
                                   const std::vector<int>& windows) {
  if (windows.empty() || windows.size() > static_cast<size_t>(kMaxWindowKinds)) {
    throw Error("BatchUploader: " + num(static_cast<int64_t>(windows.size())) + " window kinds (1 to " +
                num(kMaxWindowKinds) + ")");
  }
  int32_t* host = host_.get();
  size_t used = 0;
  // Reserves count elements at the end of the packed buffer; returns (host, device) addresses.
  auto reserve = [&](size_t count) {
    const size_t at = used;
    used += count;
    if (used > host_.size()) throw Error("BatchUploader: batch larger than the buffers it was sized for");
    return std::make_pair(host + at, static_cast<const int32_t*>(device_.get() + at));
  };
  auto put = [&](const std::vector<int32_t>& v) {
    auto [h, d] = reserve(v.size());
    if (!v.empty()) std::memcpy(h, v.data(), v.size() * sizeof(int32_t));
    return d;
  };
  BatchIndices idx;
  idx.tokens = put(b.token_ids);
  idx.positions = put(b.positions);
  idx.slots = put(b.slot_mapping);
  idx.query_start = put(b.query_start);
  idx.logits_rows = put(b.logits_rows);
  idx.block_tables = put(b.block_tables);
  idx.slots_stride = b.token_ids.size();
  idx.tables_stride = static_cast<size_t>(b.num_seqs()) * static_cast<size_t>(b.max_blocks_per_seq);
  // A tile holds at least one row, so num_tokens entries suffice for each tile array.
  auto [h_tile_seq, d_tile_seq] = reserve(b.token_ids.size());
  auto [h_tile_row, d_tile_row] = reserve(b.token_ids.size());
  auto [h_decode, d_decode] = reserve(static_cast<size_t>(b.num_seqs()));
  idx.tile_seq = d_tile_seq;
  idx.tile_row = d_tile_row;
  idx.decode_seqs = d_decode;
  for (int s = 0; s < b.num_seqs(); ++s) {
    const int rows = b.query_start[s + 1] - b.query_start[s];
    if (split_decode && rows == 1) {
      h_decode[idx.num_decode++] = s;
      continue;
    }
    for (int r = b.query_start[s]; r < b.query_start[s + 1]; r += rows_per_tile) {
      h_tile_seq[idx.num_tiles] = s;
      h_tile_row[idx.num_tiles] = r;
      ++idx.num_tiles;
    }
  }
  idx.num_all_tiles = idx.num_tiles;  // a tile holds a row at least: still at most num_tokens tiles
  for (int i = 0; i < idx.num_decode; ++i) {
    h_tile_seq[idx.num_all_tiles] = h_decode[i];
    h_tile_row[idx.num_all_tiles] = b.query_start[h_decode[i]];
    ++idx.num_all_tiles;
  }
  for (size_t k = 0; k < windows.size(); ++k) {
    auto [h_decode_tiles, d_decode_tiles] = reserve(static_cast<size_t>(idx.num_decode) + 1);
    decode_stream::build_tile_start(b.positions.data(), b.query_start.data(), h_decode, idx.num_decode,
                                    h_decode_tiles, windows[k]);
    idx.decode_tile_start[k] = d_decode_tiles;
    idx.decode_tiles[k] = h_decode_tiles[idx.num_decode];
  }
  if (!b.lora_ids.empty()) {
    row_lora_.assign(b.token_ids.size(), 0);
    for (int s = 0; s < b.num_seqs(); ++s) {
      std::fill(row_lora_.begin() + b.query_start[s], row_lora_.begin() + b.query_start[s + 1], b.lora_ids[s]);
    }
    lora_tiles_.clear();
    build_lora_tiles(row_lora_.data(), b.num_tokens(), lora_tiles_);
    auto [h_lora, d_lora] = reserve(3 * lora_tiles_.size());
    if (!lora_tiles_.empty()) std::memcpy(h_lora, lora_tiles_.data(), lora_tiles_.size() * sizeof(LoraTile));
    idx.lora_tiles = reinterpret_cast<const LoraTile*>(d_lora);
    idx.num_lora_tiles = static_cast<int>(lora_tiles_.size());
  }
  CUDA_CHECK(cudaMemcpyAsync(device_.get(), host, used * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  return idx;
}

}  // namespace cbatch
