// Thompson fragments in one growing byte NFA, shared by the regex compiler (regex_nfa.cpp) and the
// grammar compiler (grammar.cpp): byte strings, byte and code point sets (as well-formed UTF-8),
// sequences, alternatives, counted repetition (fragments copied) and rule calls (grammar.hpp).
// Every fragment has one start and one end state. The NFA is bounded: past kMaxStates states the
// builder throws cbatch::Error.
#pragma once
#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/constrain/nfa.hpp"

namespace cbatch {

struct Fragment {
  int32_t start;
  int32_t end;
};

class NfaBuilder {
 public:
  static constexpr size_t kMaxStates = 200000;
  using AsciiSet = std::bitset<128>;
  // Inclusive code point ranges, sorted and disjoint.
  using CodePointRanges = std::vector<std::pair<uint32_t, uint32_t>>;

  int32_t new_state();
  void edge(int32_t from, uint8_t lo, uint8_t hi, int32_t to) { nfa_.states[static_cast<size_t>(from)].edges.push_back({lo, hi, to}); }
  void eps(int32_t from, int32_t to) { nfa_.states[static_cast<size_t>(from)].epsilon.push_back(to); }
  int32_t size() const { return static_cast<int32_t>(nfa_.states.size()); }

  Fragment empty();
  Fragment bytes(std::string_view text);
  // ASCII characters of `ascii`, and every non-ASCII character when `with_multibyte`.
  Fragment ascii_set(const AsciiSet& ascii, bool with_multibyte);
  Fragment code_points(const CodePointRanges& ranges);
  Fragment call(int32_t rule);
  void append(Fragment& seq, const Fragment& next);  // seq then next
  Fragment alternatives(const std::vector<Fragment>& options);
  // `atom` (states [first_state, size())) repeated lo..hi times (hi -1: unbounded).
  Fragment repeat(Fragment atom, int32_t first_state, int lo, int hi);

  Nfa take(Fragment whole);

 private:
  void utf8_range(int32_t from, int32_t to, uint32_t lo, uint32_t hi);
  void utf8_bytes(int32_t from, int32_t to, const uint8_t* lo, const uint8_t* hi, int n);
  Fragment clone(const Fragment& f, int32_t first_state, int32_t last);

  Nfa nfa_;
};

// Code point c as UTF-8.
std::string utf8_encode(uint32_t c);

}  // namespace cbatch
