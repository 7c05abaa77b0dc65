#include "engine/core/lora_requests.hpp"

#include <filesystem>

#include "engine/base/elide.hpp"

namespace cbatch {

std::string resolve_lora(Request& request, const std::vector<std::string>& lora_names, const std::string& base_path) {
  request.lora_id = 0;
  request.lora_name.clear();
  const std::string& model = request.model;
  if (lora_names.empty() || model.empty()) return "";
  for (size_t i = 0; i < lora_names.size(); ++i) {
    if (lora_names[i] == model) {
      request.lora_id = static_cast<int>(i + 1);
      request.lora_name = model;
      return "";
    }
  }
  if (model == base_path || model == std::filesystem::path(base_path).filename().string()) return "";
  std::string known;
  for (const std::string& name : lora_names) known += (known.empty() ? "" : ", ") + name;
  return "field 'model': '" + elide(model) + "' is neither a LoRA adapter (" + known + ") nor the base model";
}

}  // namespace cbatch
