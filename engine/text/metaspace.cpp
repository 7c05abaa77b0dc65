#include "engine/text/metaspace.hpp"

namespace cbatch {

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0;;) {
    const size_t at = from.empty() ? std::string_view::npos : text.find(from, pos);
    out.append(text.substr(pos, at == std::string_view::npos ? std::string_view::npos : at - pos));
    if (at == std::string_view::npos) return out;
    out.append(to);
    pos = at + from.size();
  }
}

}  // namespace cbatch
