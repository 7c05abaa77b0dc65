// `cbatch inspect --model PATH`: what a model file holds, without running it.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "cmd/commands.hpp"
#include "engine/text/chat_template.hpp"
#include "engine/model/layer_kinds.hpp"
#include "engine/model/model.hpp"

namespace cbatch {
namespace {

struct InspectOptions {
  std::string model;
  std::string tokenizer;
};

std::string describe_chat_template(const std::string& jinja) {
  if (jinja.empty()) return "none";
  const std::optional<ChatTemplate> t = recognize_chat_template(jinja);
  if (!t) return "not recognized (chats need --chat-template NAME)";
  std::string name(chat_family_name(t->family));
  if (!t->default_system.empty()) name += ", default system prompt \"" + t->default_system + "\"";
  if (t->dated_system) name += ", dated system block (" + t->today + ")";
  return name;
}

std::string rope_scaling_name(const RopeScaling& s) {
  switch (s.type) {
    case RopeScalingType::kNone: return "none";
    case RopeScalingType::kLinear: return "linear x" + std::to_string(s.factor);
    case RopeScalingType::kLlama3: return "llama3 x" + std::to_string(s.factor);
    case RopeScalingType::kYarn: return "yarn x" + std::to_string(s.factor);
    case RopeScalingType::kLongrope: return "longrope from " + std::to_string(s.original_max_position);
  }
  return "?";
}

int run(const InspectOptions& o) {
  ModelSource source;
  source.path = o.model;
  source.tokenizer_path = o.tokenizer;
  const Model model = load_model(source);
  const ModelConfig& c = model.config;
  std::printf("model: %s\nformat: %s\narchitecture: %s\nweight dtype: %s\nparameters: %lld\n", model.path.c_str(),
              model.format.c_str(), c.architecture.c_str(), model.weight_dtype.c_str(),
              static_cast<long long>(c.num_parameters()));
  if (!model.quantization.empty()) std::printf("quantization: %s\n", model.quantization.c_str());
  std::printf("dim: %d\nhidden_dim: %d\nlayers: %d\nheads: %d\nkv_heads: %d\nhead_dim: %d\nvocab: %d\n", c.dim,
              c.hidden_dim, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim, c.vocab_size);
  std::printf("context: %d\nrms_eps: %g\nrope_theta: %g\nrope_layout: %s\nrope_scaling: %s\ntied_embeddings: %s\n",
              c.max_context, c.rms_eps, c.rope_theta,
              c.rope_layout == RopeLayout::kHalves ? "halves" : "adjacent pairs",
              rope_scaling_name(c.rope_scaling).c_str(), c.tied_embeddings ? "yes" : "no");
  const std::string features = c.features();
  std::printf("features: %s\n", features.empty() ? "none (Llama)" : features.c_str());
  if (!c.layer_kinds.empty()) {
    std::string kinds;
    for (LayerKind kind : c.layer_kinds) kinds += (kinds.empty() ? "" : ", ") + std::string(layer_kind_name(kind));
    std::printf("layer kinds: %s\n", kinds.c_str());
  }
  for (const std::string& note : model.notes) std::printf("note: %s\n", note.c_str());
  const Tokenizer& tok = *model.tokenizer;
  std::string eos;
  for (int32_t id : tok.eos_ids()) eos += (eos.empty() ? "" : ", ") + std::to_string(id) + " " + tok.token_text(id);
  std::printf("tokenizer: %.*s, %d tokens (bos %d %s; eos %s)\nchat template: %s\n", static_cast<int>(tok.kind().size()),
              tok.kind().data(), tok.vocab_size(), tok.bos_id(), tok.token_text(tok.bos_id()).c_str(), eos.c_str(),
              describe_chat_template(model.chat_template).c_str());
  return 0;
}

}  // namespace

Command add_inspect_command(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* sub = app.add_subcommand("inspect", "print a model's architecture, sizes and tokenizer");
  sub->add_option("--model", options->model, "model path")->required();
  sub->add_option("--tokenizer", options->tokenizer, "tokenizer.bin for llama2.c checkpoints");
  return {sub, [options] { return run(*options); }};
}

}  // namespace cbatch
