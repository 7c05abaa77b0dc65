// Viterbi segmentation of the Unigram model; see unigram_model.hpp.
#include "engine/text/unigram_model.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "engine/base/error.hpp"
#include "engine/text/utf8.hpp"

namespace cbatch {
namespace {

constexpr double kUnknownPenalty = 10.0;  // `tokenizers`' K_UNK_PENALTY

// The best path's last step into each byte offset.
struct BestStep {
  double score = 0.0;
  int start = -1;  // -1: no path reaches this offset yet
  int32_t id = -1;
};

}  // namespace

UnigramModel::UnigramModel(UnigramModelSpec spec) : spec_(std::move(spec)) {
  double min_score = std::numeric_limits<double>::infinity();
  for (size_t id = 0; id < spec_.pieces.size(); ++id) {
    min_score = std::min(min_score, spec_.scores[id]);
    const std::string& piece = spec_.pieces[id];
    if (piece.empty()) continue;
    ids_[piece] = static_cast<int32_t>(id);  // the last id of a duplicate piece wins, as in `tokenizers`
    max_piece_bytes_ = std::max(max_piece_bytes_, piece.size());
  }
  unk_score_ = min_score - kUnknownPenalty;
}

int32_t UnigramModel::find(std::string_view piece) const {
  const auto it = ids_.find(piece);
  return it == ids_.end() ? -1 : it->second;
}

void UnigramModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  const int size = static_cast<int>(word.size());
  std::vector<BestStep> best(static_cast<size_t>(size) + 1);  // (bytes + 1)
  best[0].start = 0;
  for (int start = 0; start < size;) {
    const int char_bytes = static_cast<int>(next_utf8_sequence(word, static_cast<size_t>(start)).length);
    const double here = best[static_cast<size_t>(start)].score;
    bool has_single = false;
    auto offer = [&](int end, int32_t id, double score) {
      BestStep& step = best[static_cast<size_t>(end)];
      if (step.start < 0 || here + score > step.score) step = {here + score, start, id};
    };
    const int limit = std::min(size, start + static_cast<int>(max_piece_bytes_));
    for (int end = start + 1; end <= limit; ++end) {
      const int32_t id = find(word.substr(static_cast<size_t>(start), static_cast<size_t>(end - start)));
      if (id < 0) continue;
      offer(end, id, spec_.scores[static_cast<size_t>(id)]);
      has_single = has_single || end - start == char_bytes;
    }
    if (!has_single) {
      if (spec_.unk_id < 0) {
        throw Error("the Unigram tokenizer has no piece for '" + std::string(word.substr(start, char_bytes)) +
                    "' and no unknown token");
      }
      offer(start + char_bytes, spec_.unk_id, unk_score_);
    }
    start += char_bytes;
  }
  // Walk back from the end; runs of unknown steps become one span.
  std::vector<std::pair<int, int>> spans;  // (start, end) in reverse order
  std::vector<bool> unknown;
  for (int end = size; end > 0;) {
    const BestStep& step = best[static_cast<size_t>(end)];
    const bool is_unk = step.id == spec_.unk_id;
    if (is_unk && spec_.fuse_unk && !unknown.empty() && unknown.back()) {
      spans.back().first = step.start;
    } else {
      spans.emplace_back(step.start, end);
      unknown.push_back(is_unk);
    }
    end = step.start;
  }
  for (size_t i = spans.size(); i-- > 0;) {
    const std::string_view piece = word.substr(static_cast<size_t>(spans[i].first),
                                               static_cast<size_t>(spans[i].second - spans[i].first));
    append_piece(piece, find(piece), out);
  }
}

// A piece of the best path by its text, as `tokenizers` maps it back: its id, else its bytes' <0xXX>
// pieces (byte_fallback, all present), else the unknown token.
void UnigramModel::append_piece(std::string_view piece, int32_t id, std::vector<int32_t>& out) const {
  if (id >= 0) {
    out.push_back(id);
    return;
  }
  if (spec_.byte_fallback) {
    std::vector<int32_t> bytes;
    for (unsigned char byte : piece) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", byte);
      const int32_t byte_id = find(name);
      if (byte_id < 0) break;
      bytes.push_back(byte_id);
    }
    if (bytes.size() == piece.size()) {
      out.insert(out.end(), bytes.begin(), bytes.end());
      return;
    }
  }
  out.push_back(spec_.unk_id);
}

}  // namespace cbatch
