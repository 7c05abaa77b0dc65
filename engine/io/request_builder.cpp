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

// The ids of one prompt, checked against the vocabulary and the context (a prompt that only is scored may
// fill it; one to generate from must leave room); or an error message.
std::variant<std::vector<int32_t>, std::string> checked_ids(std::vector<int32_t> ids, const Model& model,
                                                            bool generates = true) {
  const int vocab = model.config.vocab_size;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab) {
      return "token id " + std::to_string(id) + " outside the vocabulary [0, " + std::to_string(vocab) + ")";
    }
  }
  if (ids.empty()) return std::string("no tokens");
  const int context = model.config.max_context;
  if (!generates && static_cast<int>(ids.size()) > context) {
    return std::to_string(ids.size()) + " tokens exceed the model's context of " + std::to_string(context) + " tokens";
  }
  if (generates && static_cast<int>(ids.size()) >= context) {
    return std::to_string(ids.size()) + " tokens leave no room to generate in the model's context of " +
           std::to_string(context) + " tokens";
  }
  return ids;
}

// A list of prompts: each one tokenized and checked; the first bad one names the line's error.
std::variant<std::vector<std::vector<int32_t>>, std::string> listed_prompt_ids(const RequestInput& input,
                                                                               const Model& model) {
  if (input.sampling.echo || input.sampling.wants_prompt_logprobs()) {
    return std::string("echo and prompt_logprobs take one prompt, not a list of prompts");
  }
  std::vector<std::vector<int32_t>> list;
  for (const ListedPrompt& p : input.prompt_list) {
    auto ids = checked_ids(p.text ? model.tokenizer->encode(*p.text, /*add_special=*/true) : p.ids, model);
    if (auto* message = std::get_if<std::string>(&ids)) {
      return "body.prompt[" + std::to_string(list.size()) + "]: " + *message;
    }
    list.push_back(std::move(std::get<std::vector<int32_t>>(ids)));
  }
  return list;
}

// The request fields every form shares, moved from its input line.
Request base_request(RequestInput&& input, int64_t index, uint64_t global_seed) {
  Request request;
  request.index = index;
  request.line = input.line;
  request.id_json = std::move(input.id_json);
  request.custom_id = std::move(input.custom_id);
  request.form = input.form;
  request.is_chat = input.messages.has_value();
  request.model = std::move(input.model);
  request.sampling = std::move(input.sampling);
  request.rng_seed = request_rng_seed(request.sampling.seed, global_seed, request.id_json);
  return request;
}

// A score or rerank line: one prompt per (text_1, text_2) pair in the reranker's template, no BOS added
// (the template is the whole prompt, as the model card tokenizes it), prefill only.
std::variant<Request, RequestError> build_reranker_request(RequestInput&& input, int64_t index, const Model& model,
                                                           uint64_t global_seed, const RerankFormat* rerank) {
  ScoreInput& pairs = *input.scoring;
  const char* field = input.form == RequestForm::kOpenAIRerank ? "body.documents[" : "body.text_2[";
  std::vector<std::vector<int32_t>> list;
  for (size_t i = 0; i < pairs.text_2.size(); ++i) {
    const std::string& query = pairs.text_1[pairs.text_1.size() == 1 ? 0 : i];
    auto ids = checked_ids(model.tokenizer->encode(rerank->render(query, pairs.text_2[i]), /*add_special=*/false), model,
                           /*generates=*/false);
    if (auto* message = std::get_if<std::string>(&ids)) {
      return make_input_error(input, index, field + std::to_string(i) + "]: its prompt: " + *message);
    }
    list.push_back(std::move(std::get<std::vector<int32_t>>(ids)));
  }
  input.sampling.max_tokens = 0;
  input.sampling.n = 1;
  Request request = base_request(std::move(input), index, global_seed);
  request.prompt_list = std::move(list);
  request.score_token_ids = rerank->yes_no_ids;
  if (request.form == RequestForm::kOpenAIRerank) request.documents = std::move(pairs.text_2);
  request.top_n = pairs.top_n;
  return request;
}

// The fields a pooled score request (cross-encoder or bi-encoder) shares with the reranker's.
Request pooled_score_request(RequestInput&& input, int64_t index, uint64_t global_seed, EmbeddingParams params,
                             std::vector<std::vector<int32_t>> inputs) {
  ScoreInput pairs = std::move(*input.scoring);
  input.sampling.max_tokens = 0;
  input.sampling.n = 1;
  Request request = base_request(std::move(input), index, global_seed);
  request.embedding_inputs = std::move(inputs);
  request.embedding = std::move(params);
  if (request.form == RequestForm::kOpenAIRerank) request.documents = std::move(pairs.text_2);
  request.top_n = pairs.top_n;
  return request;
}

// A cross-encoder's line: each pair one input, [CLS] a [SEP] b [SEP] with token type 1 on the second
// text, pooled at [CLS] and classified; a pair longer than the context is an error (as vLLM gives).
std::variant<Request, RequestError> build_cross_encoder_request(RequestInput&& input, int64_t index, const Model& model,
                                                                uint64_t global_seed) {
  const ScoreInput& pairs = *input.scoring;
  if (model.config.num_labels != 1) {
    return make_input_error(input, index, "the cross-encoder has " + std::to_string(model.config.num_labels) +
                                              " labels; a pair's score needs a classifier with 1 label");
  }
  const char* field = input.form == RequestForm::kOpenAIRerank ? "body.documents[" : "body.text_2[";
  EmbeddingParams params;
  params.pooling = Pooling::kCls;
  params.normalize = false;
  params.pair_scoring = PairScoring::kClassifier;
  params.score_sigmoid = !model.config.score_identity;
  std::vector<std::vector<int32_t>> inputs;
  std::vector<int32_t> segments;
  for (size_t i = 0; i < pairs.text_2.size(); ++i) {
    const std::string& query = pairs.text_1[pairs.text_1.size() == 1 ? 0 : i];
    EncodedPair pair;
    try {
      pair = model.tokenizer->encode_pair(query, pairs.text_2[i]);
    } catch (const Error& e) {
      return make_input_error(input, index, e.what());
    }
    auto ids = checked_ids(std::move(pair.ids), model, /*generates=*/false);
    if (auto* message = std::get_if<std::string>(&ids)) {
      return make_input_error(input, index, field + std::to_string(i) + "]: the pair: " + *message);
    }
    inputs.push_back(std::move(std::get<std::vector<int32_t>>(ids)));
    segments.push_back(pair.second_segment);
    params.truncated_tokens.push_back(0);
  }
  Request request = pooled_score_request(std::move(input), index, global_seed, std::move(params), std::move(inputs));
  request.embedding_segments = std::move(segments);
  return request;
}

// A bi-encoder's line: each text embedded as an embedding line would be (its pooling, truncation and
// normalisation), text_1 first, then text_2; a pair's score is the cosine of its two vectors.
std::variant<Request, RequestError> build_bi_encoder_request(RequestInput&& input, int64_t index, const Model& model,
                                                             uint64_t global_seed) {
  const ScoreInput& pairs = *input.scoring;
  RequestInput texts;
  texts.line = input.line;
  texts.form = input.form;
  EmbeddingInput& e = texts.embedding.emplace();
  e.texts = pairs.text_1;
  e.texts.insert(e.texts.end(), pairs.text_2.begin(), pairs.text_2.end());
  e.pooling = pairs.pooling;
  e.decoder_allowed = true;  // build_score_request let a decoder through only under --task embed
  EmbeddingParams params;
  params.pair_scoring = PairScoring::kCosine;
  params.num_queries = static_cast<int>(pairs.text_1.size());
  std::vector<std::vector<int32_t>> inputs;
  if (std::string why = embedding_inputs(texts, model, params, inputs); !why.empty()) {
    return make_input_error(input, index, why);
  }
  return pooled_score_request(std::move(input), index, global_seed, std::move(params), std::move(inputs));
}

// A score or rerank line, by what scores it: the run's decoder reranker (--reranker), else the model itself
// (a cross-encoder's classifier, or the cosine of an embedding model's vectors).
std::variant<Request, RequestError> build_score_request(RequestInput&& input, int64_t index, const Model& model,
                                                        uint64_t global_seed, const RerankFormat* rerank) {
  if (rerank != nullptr) return build_reranker_request(std::move(input), index, model, global_seed, rerank);
  if (model.config.is_cross_encoder()) return build_cross_encoder_request(std::move(input), index, model, global_seed);
  if (model.config.is_encoder() || input.scoring->decoder_allowed) {
    return build_bi_encoder_request(std::move(input), index, model, global_seed);
  }
  return make_input_error(input, index, "score and rerank lines need a scoring model: a cross-encoder, an embedding "
                                        "model (or --task embed), or a decoder reranker with --reranker qwen3");
}

// An embedding line: prompt ids and EmbeddingParams (embedding_builder.hpp); nothing is generated.
std::variant<Request, RequestError> build_embedding_request(RequestInput&& input, int64_t index, const Model& model,
                                                            uint64_t global_seed) {
  EmbeddingParams params;
  std::vector<std::vector<int32_t>> inputs;
  if (std::string why = embedding_inputs(input, model, params, inputs); !why.empty()) return make_input_error(input, index, why);
  Request request = base_request(std::move(input), index, global_seed);
  request.embedding_inputs = std::move(inputs);
  request.sampling.max_tokens = 0;
  request.embedding = params;
  return request;
}

}  // namespace

std::variant<Request, RequestError> build_request(RequestInput&& input, int64_t index, const Model& model,
                                                  const ChatFormat* chat, uint64_t global_seed,
                                                  const RerankFormat* rerank) {
  if (input.embedding) return build_embedding_request(std::move(input), index, model, global_seed);
  if (input.scoring) return build_score_request(std::move(input), index, model, global_seed, rerank);
  if (const auto& bias = input.sampling.logit_bias; !bias.empty() && bias.back().first >= model.config.vocab_size) {
    const std::string field = input.form == RequestForm::kSimple ? "logit_bias" : "body.logit_bias";
    return make_input_error(input, index, "field '" + field + "' names token " + std::to_string(bias.back().first) +
                                              ", outside the vocabulary [0, " + std::to_string(model.config.vocab_size) + ")");
  }
  if (!input.prompt_list.empty()) {
    auto list = listed_prompt_ids(input, model);
    if (auto* message = std::get_if<std::string>(&list)) return make_input_error(input, index, *message);
    Request request = base_request(std::move(input), index, global_seed);
    request.prompt_list = std::move(std::get<std::vector<std::vector<int32_t>>>(list));
    return request;
  }
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
  std::string echo_text, first_piece;
  if (input.sampling.echo) {
    echo_text = input.prompt ? *input.prompt : model.tokenizer->decode(tokens);
    first_piece = model.tokenizer->decode_piece(-1, tokens[0]);
  }
  Request request = base_request(std::move(input), index, global_seed);
  request.echo_text = std::move(echo_text);
  request.first_prompt_piece = std::move(first_piece);
  request.prompt_ids = std::move(tokens);
  return request;
}

}  // namespace cbatch
