// Which LoRA adapter a request runs with: its `model` field names an adapter (--lora-modules NAME), or the
// base model (its path or file name) or nothing: no adapter. Without adapters `model` is not read at all.
#pragma once
#include <string>
#include <vector>

#include "engine/base/request.hpp"

namespace cbatch {

// Sets request.lora_id and lora_name; returns "" or, for a name that is neither, the error for its line.
std::string resolve_lora(Request& request, const std::vector<std::string>& lora_names, const std::string& base_path);

}  // namespace cbatch
