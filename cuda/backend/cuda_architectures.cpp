// CMake's CUDA architecture entries as what the fatbinary holds (cuda_architectures.hpp).
#include "cuda/backend/cuda_architectures.hpp"

#include <cctype>

namespace cbatch {
namespace {

// "90", "90a": digits and an optional 'a' (an architecture-specific feature set).
bool is_arch_number(std::string_view s) {
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits])) != 0) ++digits;
  return digits > 0 && (digits == s.size() || (digits + 1 == s.size() && s[digits] == 'a'));
}

std::string describe_entry(std::string_view entry) {
  auto ends_with = [&](std::string_view tail) {
    return entry.size() > tail.size() && entry.substr(entry.size() - tail.size()) == tail;
  };
  if (ends_with("-real") && is_arch_number(entry.substr(0, entry.size() - 5))) {
    return "sm_" + std::string(entry.substr(0, entry.size() - 5));
  }
  if (ends_with("-virtual") && is_arch_number(entry.substr(0, entry.size() - 8))) {
    return "compute_" + std::string(entry.substr(0, entry.size() - 8)) + " PTX";
  }
  if (is_arch_number(entry)) return "sm_" + std::string(entry) + ", compute_" + std::string(entry) + " PTX";
  return std::string(entry);
}

}  // namespace

std::string describe_cuda_architectures(std::string_view archs) {
  std::string text;
  size_t begin = 0;
  while (begin <= archs.size()) {
    size_t end = archs.find_first_of(",;", begin);
    if (end == std::string_view::npos) end = archs.size();
    const std::string_view entry = archs.substr(begin, end - begin);
    if (!entry.empty()) text += (text.empty() ? "" : ", ") + describe_entry(entry);
    begin = end + 1;
  }
  return text.empty() ? "no architecture recorded" : text;
}

}  // namespace cbatch
