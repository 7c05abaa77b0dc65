// Requests as they move through the engine: a parsed input line (RequestInput), a rejected line
// (RequestError), and a tokenized request ready for the scheduler (Request). The id is kept as the JSON
// text it had in the input (a string with quotes, or a number) so results echo it unchanged.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/base/embedding_params.hpp"
#include "engine/base/sampling_params.hpp"

namespace cbatch {

// The most token ids one prompt (or embedding input) of a line may list.
inline constexpr size_t kMaxPromptTokenIds = 10'000'000;
// The sequences one line may become (a list's prompts times n, an embedding line's inputs): each holds its
// own tokens and state, so a line's memory stays bounded; the request itself is shared by them.
inline constexpr int64_t kMaxSequencesPerLine = 100'000;

// kOpenAIEmbeddings: /v1/embeddings lines (pooled, nothing generated); kOpenAIScore / kOpenAIRerank:
// /v1/score and /v1/rerank lines, scored by a decoder reranker (prefill only), a cross-encoder or the
// cosine of a bi-encoder's embeddings (both pooled, as embedding requests).
enum class RequestForm : uint8_t {
  kSimple, kOpenAICompletions, kOpenAIChat, kOpenAIEmbeddings, kOpenAIScore, kOpenAIRerank
};

// The pairs of a /v1/score line (text_1[i] against text_2[i]; one text_1 against each text_2) or of a
// /v1/rerank line (text_1 = {query}, text_2 = the documents, top_n: 0 = all).
struct ScoreInput {
  std::vector<std::string> text_1;
  std::vector<std::string> text_2;
  int top_n = 0;
  std::optional<Pooling> pooling;  // --pooling: a bi-encoder's pooling, over the model's
  bool decoder_allowed = false;    // --task embed: a decoder model scores by the cosine of its embeddings
};

// One prompt of a line that carries several (a /v1/completions list of prompts): its text, or its ids.
struct ListedPrompt {
  std::optional<std::string> text;
  std::vector<int32_t> ids;  // when text is nullopt
};

struct ChatMessage {
  std::string role;
  std::string content;
};

// What a chat request passes to its template besides the messages: chat_template_kwargs that the
// renderers read (enable_thinking) and reasoning_effort (harmony's system message).
struct ChatOptions {
  std::optional<bool> enable_thinking;  // chat_template_kwargs.enable_thinking; nullopt: the template's default
  std::string reasoning_effort;         // "low", "medium" or "high"; "" = the template's default
};

// Engine-wide defaults the parser applies to fields a line leaves out.
struct RequestDefaults {
  int max_tokens = 16;
  int max_logprobs = 20;             // the largest logprobs / prompt_logprobs / top_logprobs a line may ask
  std::optional<Pooling> pooling;    // --pooling: overrides the model's pooling for embedding lines
  bool embed_task = false;           // --task embed: a decoder model takes embedding lines too
};

struct RequestInput {
  int64_t line = 0;                  // 1-based line number in the input
  std::string id_json;               // JSON text of the id; the line number when the line has none
  std::string custom_id;             // OpenAI batch form only
  RequestForm form = RequestForm::kSimple;
  std::optional<std::string> prompt;
  std::optional<std::vector<int32_t>> prompt_token_ids;
  std::optional<std::vector<ChatMessage>> messages;
  std::vector<ListedPrompt> prompt_list;  // a list of prompts (then none of the three above)
  std::optional<ScoreInput> scoring;      // a score or rerank line (then no prompt)
  ChatOptions chat_options;          // messages only: chat_template_kwargs and reasoning_effort
  SamplingParams sampling;
  std::string model;                 // "model" (OpenAI form: body.model): a LoRA adapter's name, or the base's
  std::optional<EmbeddingInput> embedding;  // an embedding line ("input" / url /v1/embeddings)
};

struct RequestError {
  int64_t index = -1;                // position among the input's items (for --ordered), set by the source
  int64_t line = 0;
  std::string id_json;               // JSON text of the id if it could be read, else the line number
  std::string custom_id;
  RequestForm form = RequestForm::kSimple;
  std::string type = "invalid_request";
  std::string message;               // names the field and the value, starts with "line N: "
};

struct Request {
  int64_t index = 0;                 // 0-based order among the input's requests (for --ordered)
  int64_t line = 0;
  std::string id_json;
  std::string custom_id;
  RequestForm form = RequestForm::kSimple;
  std::vector<int32_t> prompt_ids;
  // A line of several prompts: each one's ids (prompt_ids is then empty). The engine runs each prompt as
  // its own sequence (its prompt_index p) and writes their n samples each as one line, sample p * n + i.
  std::vector<std::vector<int32_t>> prompt_list;
  // A score or rerank request (prefill only, max_tokens 0): {yes, no} token ids whose two logits at the
  // last prompt position give its score, softmax(yes, no)[yes]; -1: a generation request.
  std::array<int32_t, 2> score_token_ids = {-1, -1};
  std::vector<std::string> documents;  // rerank: the documents, for the result; top_n: how many it keeps
  int top_n = 0;
  SamplingParams sampling;
  uint64_t rng_seed = 0;             // the request's own seed, or derived from (--seed, id)
  std::string echo_text;             // sampling.echo: the prompt's text, put before the completion's
  std::string first_prompt_piece;    // sampling.echo: the first prompt token's bytes (it has no logprob)
  bool is_chat = false;              // the prompt is rendered messages: a reasoning parser splits the output
  std::string model;                 // as the line named it ("" when it did not)
  int lora_id = 0;                   // the LoRA adapter the engine resolved it to (0 = the base model)
  std::string lora_name;             // that adapter's name, "" for the base model
  // An embedding request: each of its inputs (prompt_ids stays empty) is computed whole in one step and
  // pooled, as a sequence of its own; nothing is generated.
  std::optional<EmbeddingParams> embedding;
  std::vector<std::vector<int32_t>> embedding_inputs;  // (inputs) token ids
  std::vector<int32_t> embedding_segments;  // (inputs) a cross-encoder pair's second_segment; empty: none

  bool is_score() const { return score_token_ids[0] >= 0; }
  bool is_score_form() const { return form == RequestForm::kOpenAIScore || form == RequestForm::kOpenAIRerank; }
};

// The input field the input `i` of an embedding or pooled score request (of `num_inputs`) came from, for
// messages: "input", "body.input[2]", "body.query", "body.documents[0]", "body.text_1", "body.text_2[3]".
// A cross-encoder's input i is the pair of text_1 and text_2[i] (or documents[i]): named by the latter.
std::string embedding_input_field(RequestForm form, const EmbeddingParams& params, size_t num_inputs, size_t i);

}  // namespace cbatch
