#include "engine/io/request_builder.hpp"

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"
#include "engine/io/embedding_builder.hpp"
#include "engine/sample/sampler.hpp"

namespace cbatch {

RequestError make_input_error(const RequestInput& input, int64_t index, const std::string& message) {
  RequestError error;
  error.index = index;
  error.line = input.line;
  error.id_json = input.id_json;
  error.custom_id = input.custom_id;
  error.form = input.form;
  error.message = "line " + std::to_string(input.line) + ": " + message;
  return error;
}

RequestError make_duplicate_id_error(const RequestInput& input, int64_t first_line) {
  return make_input_error(input, -1, "duplicate id " + elide(input.id_json) + " (first used on line " +
                                         std::to_string(first_line) + "): every line needs its own id");
}

namespace {

// The ids of a chat prompt; the end of turn stops generation (as a stop token, or as a stop string when
// the vocabulary has no such token), unless the request ignores EOS.
std::variant<std::vector<int32_t>, std::string> chat_ids(RequestInput& input, const ChatFormat* chat) {
  if (chat == nullptr || !chat->is_available()) {
    return "chat messages need a chat template: " +
           (chat ? chat->unavailable_reason() : std::string("none is available here"));
  }
  RenderedChat rendered;
  try {
    rendered = chat->render(*input.messages, input.chat_options);
  } catch (const Error& e) {
    return std::string(e.what());
  }
  SamplingParams& p = input.sampling;
  if (!p.ignore_eos) p.stop_token_ids.insert(p.stop_token_ids.end(), rendered.more_stop_ids.begin(), rendered.more_stop_ids.end());
  if (!p.ignore_eos && rendered.end_of_turn >= 0) {
    p.stop_token_ids.push_back(rendered.end_of_turn);
  } else if (!p.ignore_eos && !rendered.end_of_turn_text.empty()) {
    p.stop.push_back(rendered.end_of_turn_text);
  }
  return std::move(rendered.ids);
}

// The prompt's token ids, or an error message.
std::variant<std::vector<int32_t>, std::string> prompt_ids(RequestInput& input, const Model& model,
                                                           const ChatFormat* chat) {
  if (input.prompt) return model.tokenizer->encode(*input.prompt, /*add_special=*/true);
  if (input.prompt_token_ids) {
    const int vocab = model.config.vocab_size;
    for (int32_t id : *input.prompt_token_ids) {
      if (id < 0 || id >= vocab) {
        return "prompt_token_ids contains " + std::to_string(id) + ", outside the vocabulary [0, " +
               std::to_string(vocab) + ")";
      }
    }
    return *input.prompt_token_ids;
  }
  return chat_ids(input, chat);
}

// An embedding line: prompt ids and EmbeddingParams (embedding_builder.hpp); nothing is generated.
std::variant<Request, RequestError> build_embedding_request(RequestInput&& input, int64_t index, const Model& model) {
  EmbeddingParams params;
  std::vector<std::vector<int32_t>> inputs;
  if (std::string why = embedding_inputs(input, model, params, inputs); !why.empty()) return make_input_error(input, index, why);
  Request request;
  request.index = index;
  request.line = input.line;
  request.id_json = std::move(input.id_json);
  request.custom_id = std::move(input.custom_id);
  request.form = input.form;
  request.embedding_inputs = std::move(inputs);
  request.sampling.max_tokens = 0;
  request.embedding = params;
  return request;
}

}  // namespace

std::variant<Request, RequestError> build_request(RequestInput&& input, int64_t index, const Model& model,
                                                  const ChatFormat* chat, uint64_t global_seed) {
  if (input.embedding) return build_embedding_request(std::move(input), index, model);
  auto ids = prompt_ids(input, model, chat);
  if (auto* message = std::get_if<std::string>(&ids)) return make_input_error(input, index, *message);
  auto& tokens = std::get<std::vector<int32_t>>(ids);
  if (tokens.empty()) return make_input_error(input, index, "the prompt has no tokens");
  const int context = model.config.max_context;
  if (static_cast<int>(tokens.size()) >= context) {
    return make_input_error(input, index, "prompt of " + std::to_string(tokens.size()) +
                                        " tokens leaves no room to generate in the model's context of " +
                                        std::to_string(context) + " tokens");
  }
  Request request;
  if (input.sampling.echo) {
    request.echo_text = input.prompt ? *input.prompt : model.tokenizer->decode(tokens);
    request.first_prompt_piece = model.tokenizer->decode_piece(-1, tokens[0]);
  }
  request.index = index;
  request.line = input.line;
  request.id_json = std::move(input.id_json);
  request.custom_id = std::move(input.custom_id);
  request.form = input.form;
  request.is_chat = input.messages.has_value();
  request.model = std::move(input.model);
  request.prompt_ids = std::move(tokens);
  request.sampling = std::move(input.sampling);
  request.rng_seed = request_rng_seed(request.sampling.seed, global_seed, request.id_json);
  return request;
}

}  // namespace cbatch
