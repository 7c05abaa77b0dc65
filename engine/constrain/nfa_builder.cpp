// Fragment construction; code point ranges become UTF-8 byte ranges split at the encoding's length
// boundaries and at the surrogates (never produced: the output stays valid UTF-8).
#include "engine/constrain/nfa_builder.hpp"

#include <algorithm>
#include <string>

#include "engine/base/error.hpp"

namespace cbatch {

std::string utf8_encode(uint32_t c) {
  std::string out;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

int32_t NfaBuilder::new_state() {
  if (nfa_.states.size() >= kMaxStates) throw Error("an automaton this large (over " + std::to_string(kMaxStates) + " states)");
  nfa_.states.emplace_back();
  return static_cast<int32_t>(nfa_.states.size() - 1);
}

Fragment NfaBuilder::empty() {
  const int32_t s = new_state();
  return {s, s};
}

Fragment NfaBuilder::bytes(std::string_view text) {
  Fragment f = empty();
  for (unsigned char c : text) {
    const int32_t next = new_state();
    edge(f.end, c, c, next);
    f.end = next;
  }
  return f;
}

Fragment NfaBuilder::ascii_set(const AsciiSet& ascii, bool with_multibyte) {
  CodePointRanges ranges;
  for (uint32_t c = 0; c < 128; ++c) {
    if (!ascii[c]) continue;
    uint32_t e = c;
    while (e + 1 < 128 && ascii[e + 1]) ++e;
    ranges.emplace_back(c, e);
    c = e;
  }
  if (with_multibyte) ranges.emplace_back(0x80, 0x10FFFF);
  return code_points(ranges);
}

Fragment NfaBuilder::code_points(const CodePointRanges& ranges) {
  const Fragment f{new_state(), new_state()};
  for (auto [lo, hi] : ranges) {
    hi = std::min<uint32_t>(hi, 0x10FFFF);
    for (const auto& [a, b] : {std::pair<uint32_t, uint32_t>{0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF},
                               {0x10000, 0x10FFFF}}) {
      if (std::max(lo, a) <= std::min(hi, b)) utf8_range(f.start, f.end, std::max(lo, a), std::min(hi, b));
    }
  }
  return f;
}

// [lo, hi] within one encoding length.
void NfaBuilder::utf8_range(int32_t from, int32_t to, uint32_t lo, uint32_t hi) {
  const std::string l = utf8_encode(lo), h = utf8_encode(hi);
  utf8_bytes(from, to, reinterpret_cast<const uint8_t*>(l.data()), reinterpret_cast<const uint8_t*>(h.data()),
             static_cast<int>(l.size()));
}

// Byte strings of length n from lo to hi (lexicographic), as edges from `from` to `to`.
void NfaBuilder::utf8_bytes(int32_t from, int32_t to, const uint8_t* lo, const uint8_t* hi, int n) {
  if (n == 1) return edge(from, lo[0], hi[0], to);
  static constexpr uint8_t kMin[3] = {0x80, 0x80, 0x80}, kMax[3] = {0xBF, 0xBF, 0xBF};
  const bool full = std::equal(lo + 1, lo + n, kMin) && std::equal(hi + 1, hi + n, kMax);
  if (full || lo[0] == hi[0]) {
    const int32_t mid = new_state();
    edge(from, lo[0], hi[0], mid);
    return utf8_bytes(mid, to, lo + 1, hi + 1, n - 1);
  }
  const int32_t low = new_state(), high = new_state();
  edge(from, lo[0], lo[0], low);
  utf8_bytes(low, to, lo + 1, kMax, n - 1);
  if (lo[0] + 1 <= hi[0] - 1) {
    const int32_t mid = new_state();
    edge(from, static_cast<uint8_t>(lo[0] + 1), static_cast<uint8_t>(hi[0] - 1), mid);
    utf8_bytes(mid, to, kMin, kMax, n - 1);
  }
  edge(from, hi[0], hi[0], high);
  utf8_bytes(high, to, kMin, hi + 1, n - 1);
}

Fragment NfaBuilder::call(int32_t rule) {
  const Fragment f{new_state(), new_state()};
  nfa_.states[static_cast<size_t>(f.start)].calls.push_back({rule, f.end});
  return f;
}

void NfaBuilder::append(Fragment& seq, const Fragment& next) {
  eps(seq.end, next.start);
  seq.end = next.end;
}

Fragment NfaBuilder::alternatives(const std::vector<Fragment>& options) {
  if (options.size() == 1) return options[0];
  const Fragment f{new_state(), new_state()};
  for (const Fragment& o : options) {
    eps(f.start, o.start);
    eps(o.end, f.end);
  }
  return f;
}

Fragment NfaBuilder::clone(const Fragment& f, int32_t first_state, int32_t last) {
  if (nfa_.states.size() + static_cast<size_t>(last - first_state) >= kMaxStates) {
    throw Error("an automaton this large (over " + std::to_string(kMaxStates) + " states)");
  }
  const int32_t offset = size() - first_state;
  for (int32_t s = first_state; s < last; ++s) {
    Nfa::State copy = nfa_.states[static_cast<size_t>(s)];
    for (NfaEdge& e : copy.edges) e.to += offset;
    for (int32_t& t : copy.epsilon) t += offset;
    for (NfaCall& c : copy.calls) c.to += offset;
    nfa_.states.push_back(std::move(copy));
  }
  return {f.start + offset, f.end + offset};
}

Fragment NfaBuilder::repeat(Fragment atom, int32_t first_state, int lo, int hi) {
  const int32_t atom_end = size();
  const int copies = std::max(lo, hi == -1 ? 1 : hi);
  std::vector<Fragment> pieces{atom};
  for (int i = 1; i < copies; ++i) pieces.push_back(clone(atom, first_state, atom_end));
  Fragment f = empty();
  for (int i = 0; i < lo; ++i) append(f, pieces[static_cast<size_t>(i)]);
  if (hi == -1) {  // then any number more: a loop through one more copy
    if (lo > 0) {
      const Fragment& loop = pieces[static_cast<size_t>(lo - 1)];
      eps(loop.end, loop.start);
      return f;
    }
    const int32_t end = new_state();
    eps(f.end, pieces[0].start);
    eps(pieces[0].end, f.end);
    eps(f.end, end);
    f.end = end;
    return f;
  }
  const int32_t end = new_state();
  eps(f.end, end);
  for (int i = lo; i < hi; ++i) {
    append(f, pieces[static_cast<size_t>(i)]);
    eps(f.end, end);
  }
  f.end = end;
  return f;
}

Nfa NfaBuilder::take(Fragment whole) {
  nfa_.start = whole.start;
  nfa_.accept = whole.end;
  return std::move(nfa_);
}

}  // namespace cbatch
