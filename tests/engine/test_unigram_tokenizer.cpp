// The Unigram model's Viterbi as `tokenizers` runs it (best total score, ties to the earliest start,
// unknown characters fused or not, byte fallback, no unknown token), the Precompiled charsmap on a
// hand-built Darts-clone trie (whole clusters under 6 bytes, character by character otherwise, malformed
// blobs), and base64.
#include <doctest/doctest.h>

#include <cstring>

#include "engine/base/error.hpp"
#include "engine/text/precompiled_charsmap.hpp"
#include "engine/text/unigram_model.hpp"

namespace cbatch {
namespace {

UnigramModelSpec small_model() {
  UnigramModelSpec s;
  s.pieces = {"<unk>", "\xE2\x96\x81" "ab", "\xE2\x96\x81" "a", "b", "\xE2\x96\x81", "a", "ab", "qz", "<0x7A>"};
  s.scores = {0.0, -1.0, -1.0, -1.0, -2.0, -1.0, -2.0, -1.0, -5.0};
  s.unk_id = 0;
  return s;
}

std::vector<int32_t> encode(const UnigramModel& m, std::string_view word) {
  std::vector<int32_t> out;
  m.encode_word(word, out);
  return out;
}

// One key "x" -> "y": root base 1, the 'x' unit at 1 ^ 0x78 with base 2, whose value unit (offset 0) is at 2.
std::string one_key_charsmap() {
  std::vector<uint32_t> units(0x7A, 0);
  units[0] = 1u << 10;
  units[0x79] = 0x78u | (1u << 8) | ((0x79u ^ 2u) << 10);
  units[2] = 0u | (1u << 31);
  const uint32_t bytes = static_cast<uint32_t>(units.size() * 4);
  std::string blob(4 + bytes, '\0');
  std::memcpy(blob.data(), &bytes, 4);
  std::memcpy(blob.data() + 4, units.data(), bytes);
  return blob + std::string("y\0", 2);
}

}  // namespace

TEST_CASE("Unigram Viterbi picks the best total score, ties to the earliest start") {
  const UnigramModel m(small_model());
  CHECK(encode(m, "\xE2\x96\x81" "ab") == std::vector<int32_t>{1});  // -1 beats ▁a b (-2) and ▁ a b (-4)
  CHECK(encode(m, "ab") == std::vector<int32_t>{6});                 // "ab" (-2) ties a b (-2): the first found
  CHECK(encode(m, "qz") == std::vector<int32_t>{7});                 // no single q or z, but the pair is a piece
  CHECK(encode(m, "").empty());
}

TEST_CASE("Unigram unknown characters: fused, unfused, byte fallback, no unknown token") {
  CHECK(encode(UnigramModel(small_model()), "zzb") == std::vector<int32_t>{0, 3});
  UnigramModelSpec unfused = small_model();
  unfused.fuse_unk = false;
  CHECK(encode(UnigramModel(unfused), "zzb") == std::vector<int32_t>{0, 0, 3});
  UnigramModelSpec bytes = small_model();
  bytes.byte_fallback = true;
  CHECK(encode(UnigramModel(bytes), "zzb") == std::vector<int32_t>{8, 8, 3});  // each byte's <0x7A>
  CHECK(encode(UnigramModel(bytes), "\xC3\xA9") == std::vector<int32_t>{0});  // <0xC3> is missing: unknown
  UnigramModelSpec no_unk = small_model();
  no_unk.unk_id = -1;
  CHECK_THROWS_AS(encode(UnigramModel(no_unk), "z"), Error);
}

TEST_CASE("Precompiled charsmap: whole short clusters, characters otherwise, malformed blobs") {
  const PrecompiledCharsmap map(one_key_charsmap(), "test");
  CHECK(map.normalize("axb") == "ayb");
  CHECK(map.normalize("x\xCC\x81!") == "y!");  // x + U+0301 is one 3-byte cluster: replaced whole
  CHECK(map.normalize("x\xCC\x81\xCC\x81\xCC\x81") == "y\xCC\x81\xCC\x81\xCC\x81");  // 7 bytes: by character
  CHECK(map.normalize("\r\nx") == "\r\ny");
  CHECK(map.normalize("a\xFF" "x") == "a\xFF" "y");  // an invalid byte passes through
  CHECK_THROWS_AS(PrecompiledCharsmap("\x10\x00\x00\x00", "test"), Error);
  CHECK_THROWS_AS(PrecompiledCharsmap(std::string("\xFF\x00\x00\x00yy", 6), "test"), Error);
}

TEST_CASE("base64 decoding") {
  std::string out;
  CHECK(decode_base64("aGVsbG8=", &out));
  CHECK(out == "hello");
  CHECK(decode_base64("aGk", &out));
  CHECK(out == "hi");
  CHECK_FALSE(decode_base64("a*b", &out));
  CHECK_FALSE(decode_base64("aG=k", &out));
}

}  // namespace cbatch
