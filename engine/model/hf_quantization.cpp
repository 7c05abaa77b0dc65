// quantization_config parsing: transformers' GPTQConfig / AwqConfig / FineGrainedFP8Config names, and
// compressed-tensors' one config group (its weights' num_bits, type, strategy, group_size, block_structure).
#include "engine/model/hf_quantization.hpp"

#include <cctype>
#include <cstdio>

#include "engine/base/error.hpp"
#include "engine/base/json_file.hpp"

namespace cbatch {

bool is_fp8(const QuantizationConfig& q) {
  return q.method == "fp8" || (q.method == "compressed-tensors" && q.format == "float-quantized");
}

namespace {

constexpr const char* kSupported =
    "supported: gptq 4 or 8 bits (checkpoint_format gptq or gptq_v2), awq 4 bits (version gemm), fp8 e4m3 "
    "(blocks, per tensor or per channel), compressed-tensors float-quantized fp8 (tensor, channel, block) or "
    "pack-quantized int 4 or 8 bits (group, channel) or nvfp4-pack-quantized (float 4 bits, tensor_group of 16), "
    "mxfp4 (gpt-oss)";

[[noreturn]] void unsupported(const JsonFields& f, const char* key, const std::string& value) {
  f.fail(key, "is " + value + ", which cbatch does not read (" + kSupported + ")");
}

std::vector<std::string> read_strings(const JsonFields& f, const char* key) {
  std::vector<std::string> out;
  if (!f.has(key)) return out;
  for (simdjson::dom::element e : f.array(key)) {
    std::string_view s;
    if (e.get_string().get(s)) f.fail(key, "must be a list of strings");
    out.emplace_back(s);
  }
  return out;
}

std::vector<int> read_ints(const JsonFields& f, const char* key) {
  std::vector<int> out;
  if (!f.has(key)) return out;
  for (simdjson::dom::element e : f.array(key)) {
    int64_t v = 0;
    if (e.get_int64().get(v) || v <= 0 || v > (1 << 20)) f.fail(key, "must be a list of positive integers");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

int read_group_size(const JsonFields& f, const char* key, int fallback) {
  if (!f.has(key)) return fallback;
  const int64_t g = f.get_int(key);
  if (g != -1 && (g <= 0 || g > (1 << 20))) f.fail(key, "must be -1 or a positive integer, not " + std::to_string(g));
  return static_cast<int>(g);
}

void read_gptq(const JsonFields& f, QuantizationConfig& q) {
  q.bits = static_cast<int>(f.get_int("bits"));
  if (q.bits != 4 && q.bits != 8) unsupported(f, "bits", std::to_string(q.bits));
  q.group_size = read_group_size(f, "group_size", 128);
  q.sym = f.get_bool("sym", true);
  q.desc_act = f.get_bool("desc_act", false);
  const char* format_key = f.has("checkpoint_format") ? "checkpoint_format" : "format";  // GPTQModel: either
  q.format = f.get_string(format_key, "gptq");
  if (q.format != "gptq" && q.format != "gptq_v2") unsupported(f, format_key, "'" + q.format + "'");
  q.not_converted = read_strings(f, "modules_to_not_convert");
}

void read_awq(const JsonFields& f, QuantizationConfig& q) {
  q.bits = static_cast<int>(f.has("bits") ? f.get_int("bits") : f.get_int("w_bit"));
  if (q.bits != 4) unsupported(f, "bits", std::to_string(q.bits));
  q.group_size = read_group_size(f, f.has("group_size") ? "group_size" : "q_group_size", 128);
  if (q.group_size <= 0) f.fail("group_size", "must be positive for AWQ");
  q.sym = !f.get_bool("zero_point", true);
  if (q.sym) unsupported(f, "zero_point", "false");
  std::string version = f.get_string("version", "gemm");
  for (char& ch : version) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (version != "gemm") unsupported(f, "version", "'" + version + "'");
  q.format = version;
  q.not_converted = read_strings(f, "modules_to_not_convert");
}

void read_fp8(const JsonFields& f, QuantizationConfig& q) {
  q.bits = 8;
  const std::string fmt = f.get_string("fmt", "e4m3");
  if (fmt != "e4m3") unsupported(f, "fmt", "'" + fmt + "'");
  q.weight_block_size = read_ints(f, "weight_block_size");
  if (!q.weight_block_size.empty() && q.weight_block_size.size() != 2) {
    f.fail("weight_block_size", "must be [rows, cols]");
  }
  q.not_converted = read_strings(f, "modules_to_not_convert");
}

// compressed-tensors: one config group whose weights say how they are stored.
void read_compressed(const JsonFields& f, QuantizationConfig& q) {
  q.format = f.get_string("format");
  if (q.format != "float-quantized" && q.format != "pack-quantized" && q.format != "nvfp4-pack-quantized") {
    unsupported(f, "format", "'" + q.format + "'");
  }
  q.not_converted = read_strings(f, "ignore");
  int num_groups = 0;
  for (auto [name, value] : f.members("config_groups")) {
    if (++num_groups > 1) f.fail("config_groups", "has more than one group, which cbatch does not read");
    if (!value.is_object()) f.fail("config_groups", "must map group names to objects");
    const JsonFields group(value, f.path(), f.name("config_groups") + "." + std::string(name) + ".");
    const JsonFields w = group.object("weights");
    q.bits = static_cast<int>(w.get_int("num_bits"));
    q.type = w.get_string("type", "int");
    q.strategy = w.get_string("strategy", "tensor");
    q.sym = w.get_bool("symmetric", true);
    q.group_size = read_group_size(w, "group_size", 0);
    q.weight_block_size = read_ints(w, "block_structure");
    if (q.format == "float-quantized") {
      if (q.type != "float" || q.bits != 8) unsupported(w, "type", q.type + " with " + std::to_string(q.bits) + " bits");
      if (q.strategy != "tensor" && q.strategy != "channel" && q.strategy != "block") {
        unsupported(w, "strategy", "'" + q.strategy + "'");
      }
      if (q.strategy == "block" && q.weight_block_size.size() != 2) w.fail("block_structure", "must be [rows, cols]");
    } else if (q.format == "nvfp4-pack-quantized") {  // nvfp4_hf.hpp
      if (q.type != "float" || q.bits != 4) {
        unsupported(w, "type", q.type + " with " + std::to_string(q.bits) + " bits");
      }
      if (q.strategy != "tensor_group") unsupported(w, "strategy", "'" + q.strategy + "'");
      if (q.group_size != 16) unsupported(w, "group_size", std::to_string(q.group_size));
      if (!q.sym) unsupported(w, "symmetric", "false");
    } else {
      if (q.type != "int" || (q.bits != 4 && q.bits != 8)) {
        unsupported(w, "num_bits", q.type + " with " + std::to_string(q.bits) + " bits");
      }
      if (q.strategy != "group" && q.strategy != "channel") unsupported(w, "strategy", "'" + q.strategy + "'");
      if (q.strategy == "group" && q.group_size <= 0) w.fail("group_size", "must be positive for the group strategy");
    }
  }
  if (num_groups == 0) f.fail("config_groups", "has no group");
}

}  // namespace

QuantizationConfig read_quantization_config(const std::string& config_path) {
  const JsonFile file(config_path);
  const JsonFields top = file.fields();
  QuantizationConfig q;
  if (!top.has("quantization_config")) return q;
  const JsonFields f = top.object("quantization_config");
  q.method = f.get_string("quant_method");
  if (q.method == "gptq") {
    read_gptq(f, q);
  } else if (q.method == "awq") {
    read_awq(f, q);
  } else if (q.method == "fp8") {
    read_fp8(f, q);
  } else if (q.method == "compressed-tensors") {
    read_compressed(f, q);
  } else if (q.method == "mxfp4") {
    q.bits = 4;
    q.group_size = 32;
    q.not_converted = read_strings(f, "modules_to_not_convert");
  } else {
    unsupported(f, "quant_method", "'" + q.method + "'");
  }
  return q;
}

std::string describe_quantization(const QuantizationConfig& q) {
  if (!q.is_quantized()) return "none";
  std::string text = q.method;
  if (!q.format.empty()) text += " (" + q.format + ")";
  text += ' ';
  text += std::to_string(q.bits);
  text += "-bit";
  double scale_bits = 0;  // per weight
  if (q.method == "gptq" || q.method == "awq" || q.format == "pack-quantized") {
    if (q.strategy != "channel") text += q.group_size > 0 ? ", group " + std::to_string(q.group_size) : ", one group per column";
    if (q.strategy == "channel") text += ", per channel";
    text += q.sym ? ", symmetric" : ", asymmetric";
    if (q.desc_act) text += ", act-order (g_idx)";
    if (q.group_size > 0) scale_bits = (16.0 + q.bits) / q.group_size;  // an fp16 scale and a zero per group
  } else if (q.method == "mxfp4") {
    scale_bits = 8.0 / 32;
  } else if (q.format == "nvfp4-pack-quantized") {
    text += ", e2m1, an e4m3 scale per 16 and a global scale";
    scale_bits = 8.0 / 16;
  } else if (q.weight_block_size.size() == 2) {
    text += ", blocks " + std::to_string(q.weight_block_size[0]) + "x" + std::to_string(q.weight_block_size[1]);
    scale_bits = 32.0 / (q.weight_block_size[0] * q.weight_block_size[1]);
  } else if (!q.strategy.empty()) {
    text += ", per " + q.strategy;
  }
  char bpw[64];
  std::snprintf(bpw, sizeof bpw, ", %.2f bits per weight", q.bits + scale_bits);
  text += bpw;
  if (q.method == "gptq" || q.method == "awq" || q.format == "pack-quantized") {
    text += "; kept as Q4_0, Q5_0 or Q8_0 blocks, or Q4_Z or Q8_Z (codes with their zero points): those that hold "
            "the codes exactly, else f32";
  } else if (is_fp8(q)) {
    text += "; kept as FP8 blocks of 32 (Q8_0 panels under --cpu-precision fast; f32 where the scale blocks are not "
            "whole 32-input blocks)";
  } else if (q.format == "nvfp4-pack-quantized") {
    text += "; kept as NVFP4 blocks of 32 (f32 where the inputs are not whole 32-input blocks)";
  }
  if (!q.not_converted.empty()) text += "; " + std::to_string(q.not_converted.size()) + " module patterns kept in float";
  return text;
}

}  // namespace cbatch
