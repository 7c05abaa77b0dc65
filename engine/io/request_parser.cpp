// The two input forms. Simple: {"id", one of "prompt" / "prompt_token_ids" / "messages", sampling
// fields}. OpenAI batch: {"custom_id", "method": "POST", "url", "body": {prompt or messages, sampling
// fields}}. The id is read first so that an error about any later field still carries it.
#include "engine/io/request_parser.hpp"

#include <simdjson.h>

#include "engine/io/embedding_parser.hpp"
#include "engine/io/json_field.hpp"
#include "engine/io/json_number_locator.hpp"
#include "engine/io/json_writer.hpp"
#include "engine/io/sampling_parser.hpp"
#include "engine/io/score_parser.hpp"

namespace cbatch {
namespace {

constexpr std::string_view kCompletionsUrl = "/v1/completions";
constexpr std::string_view kChatUrl = "/v1/chat/completions";
constexpr std::string_view kEmbeddingsUrl = "/v1/embeddings";

// A string id is kept as its canonical JSON text (json_quote of the unescaped value), so that
// "q\u0031" and "q1" are the same id here and in the output file that --resume reads back.
void read_simple_id(const FieldSet& f, RequestInput& in) {
  const auto v = f.find("id");
  if (!v) return;  // the default, the line number, is already set
  if (v->is_string()) {
    in.id_json = json_quote(get_string(*v, "id"));
  } else if (v->is_int64() || v->is_uint64()) {
    in.id_json = simdjson::minify(*v);
  } else {
    fail_field("id", "a string or an integer", *v);
  }
}

// "content" is a string or, as in the OpenAI API, a list of {"type": "text", "text": ...} parts,
// which are joined with "\n" as vLLM does.
std::string read_content(simdjson::dom::element v, const std::string& name) {
  if (v.is_string()) return std::string(get_string(v, name));
  if (!v.is_array()) fail_field(name, "a string or a list of text parts", v);
  std::string content;
  size_t i = 0;
  for (simdjson::dom::element part : v.get_array()) {
    const std::string part_name = name + "[" + std::to_string(i) + "]";
    std::string_view type, text;
    if (!part.is_object() || part["type"].get(type) != simdjson::SUCCESS || type != "text" ||
        part["text"].get(text) != simdjson::SUCCESS) {
      fail_field(part_name, "a text part {\"type\": \"text\", \"text\": \"...\"}", part);
    }
    if (i++ > 0) content += '\n';
    content += text;
  }
  return content;
}

std::vector<ChatMessage> read_messages(simdjson::dom::element v, const std::string& name) {
  simdjson::dom::array arr;
  if (v.get_array().get(arr) != simdjson::SUCCESS || arr.size() == 0) {
    fail_field(name, "a non-empty list of {\"role\", \"content\"} objects", v);
  }
  std::vector<ChatMessage> messages;
  for (simdjson::dom::element m : arr) {
    const std::string msg_name = name + "[" + std::to_string(messages.size()) + "]";
    simdjson::dom::object obj;
    if (m.get_object().get(obj) != simdjson::SUCCESS) {
      fail_field(msg_name, "an object with \"role\" and \"content\"", m);
    }
    const FieldSet mf{obj, ""};
    const auto role = mf.find("role");
    const auto content = mf.find("content");
    if (!role || !content) fail_field(msg_name, "an object with \"role\" and \"content\"", m);
    messages.push_back({std::string(get_string(*role, msg_name + ".role")),
                        read_content(*content, msg_name + ".content")});
  }
  return messages;
}

std::vector<int32_t> read_prompt_ids(simdjson::dom::element v, const std::string& name) {
  std::vector<int32_t> ids = get_token_ids(v, name, kMaxPromptTokenIds);
  if (ids.empty()) fail_field(name, "a non-empty list of token ids", v);
  return ids;
}

// An empty prompt string is allowed: the model then sees only BOS (as in vLLM).
void read_simple_prompt(const FieldSet& f, RequestInput& in) {
  const auto prompt = f.find("prompt");
  const auto ids = f.find("prompt_token_ids");
  const auto messages = f.find("messages");
  const int count = int(prompt.has_value()) + int(ids.has_value()) + int(messages.has_value());
  if (count == 0) throw FieldError("no prompt: give one of 'prompt', 'prompt_token_ids' or 'messages'");
  if (count > 1) {
    throw FieldError("more than one prompt: give only one of 'prompt', 'prompt_token_ids' or 'messages'");
  }
  if (prompt) in.prompt = std::string(get_string(*prompt, "prompt"));
  if (ids) in.prompt_token_ids = read_prompt_ids(*ids, "prompt_token_ids");
  if (messages) in.messages = read_messages(*messages, "messages");
}

// chat_template_kwargs (an object; the templates cbatch renders read enable_thinking, other keys are
// ignored as a template that does not use them ignores them) and reasoning_effort (harmony).
void read_chat_options(const FieldSet& f, ChatOptions& options) {
  if (const auto kwargs = f.find("chat_template_kwargs")) {
    simdjson::dom::object obj;
    if (kwargs->get_object().get(obj) != simdjson::SUCCESS) {
      fail_field(f.name("chat_template_kwargs"), "an object of template variables", *kwargs);
    }
    const FieldSet k{obj, ""};
    if (const auto v = k.find("enable_thinking")) {
      options.enable_thinking = get_bool(*v, f.name("chat_template_kwargs") + ".enable_thinking");
    }
  }
  if (const auto v = f.find("reasoning_effort")) {
    const std::string name = f.name("reasoning_effort");
    const std::string_view effort = get_string(*v, name);
    if (effort != "low" && effort != "medium" && effort != "high") fail_field(name, "\"low\", \"medium\" or \"high\"", *v);
    options.reasoning_effort = std::string(effort);
  }
}

// "model": which LoRA adapter (or the base model) runs the line; the engine resolves the name.
void read_model(const FieldSet& f, RequestInput& in) {
  const auto v = f.find("model");
  if (v && !v->is_null()) in.model = std::string(get_string(*v, f.name("model")));
}

void parse_simple(simdjson::dom::object obj, const RequestDefaults& defaults, RequestInput& in) {
  const FieldSet f{obj, ""};
  read_simple_id(f, in);
  read_model(f, in);
  if (parse_simple_embedding(f, defaults, in)) return;
  read_simple_prompt(f, in);
  read_chat_options(f, in.chat_options);
  parse_sampling_fields(f, defaults, in.sampling);
  parse_logprob_fields(f, in.form, defaults.max_logprobs, in.sampling);
}

simdjson::dom::element require(const FieldSet& f, std::string_view key) {
  const auto v = f.find(key);
  if (!v) throw FieldError("field '" + f.name(key) + "' is required in the OpenAI batch form");
  return *v;
}

// One prompt of a list: a string, or a non-empty list of token ids.
ListedPrompt read_listed_prompt(simdjson::dom::element v, const std::string& name) {
  ListedPrompt prompt;
  if (v.is_string()) {
    prompt.text = std::string(get_string(v, name));
  } else if (v.is_array()) {
    prompt.ids = read_prompt_ids(v, name);
  } else {
    fail_field(name, "a string or a list of token ids", v);
  }
  return prompt;
}

// The body of /v1/completions: "prompt" is one string, one list of token ids, or (as OpenAI and vLLM
// allow) a list of prompts, strings or lists of ids: one choice per prompt and sample.
void read_completion_prompt(const FieldSet& body, RequestInput& in) {
  const auto v = body.find("prompt");
  if (!v) throw FieldError("no prompt: give 'body.prompt'");
  if (v->is_string()) {
    in.prompt = std::string(get_string(*v, "body.prompt"));
    return;
  }
  simdjson::dom::array arr;
  if (v->get_array().get(arr) != simdjson::SUCCESS) {
    fail_field("body.prompt", "a string, a list of token ids or a list of prompts", *v);
  }
  simdjson::dom::element first;
  if (arr.at(0).get(first) != simdjson::SUCCESS || !(first.is_string() || first.is_array())) {
    in.prompt_token_ids = read_prompt_ids(*v, "body.prompt");
    return;
  }
  for (simdjson::dom::element p : arr) {
    in.prompt_list.push_back(read_listed_prompt(p, "body.prompt[" + std::to_string(in.prompt_list.size()) + "]"));
  }
}

void read_openai_route(const FieldSet& f, RequestInput& in) {
  const simdjson::dom::element method = require(f, "method");
  if (get_string(method, "method") != "POST") fail_field("method", "\"POST\"", method);
  const simdjson::dom::element url_value = require(f, "url");
  const std::string_view url = get_string(url_value, "url");
  if (url == kChatUrl) {
    in.form = RequestForm::kOpenAIChat;
  } else if (url == kEmbeddingsUrl) {
    in.form = RequestForm::kOpenAIEmbeddings;
  } else if (url == kScoreUrl) {
    in.form = RequestForm::kOpenAIScore;
  } else if (url == kRerankUrl) {
    in.form = RequestForm::kOpenAIRerank;
  } else if (url != kCompletionsUrl) {
    fail_field("url", "\"/v1/completions\", \"/v1/chat/completions\", \"/v1/embeddings\", \"/v1/score\" or \"/v1/rerank\"",
               url_value);
  }
}

void parse_openai(simdjson::dom::object obj, const RequestDefaults& defaults, RequestInput& in) {
  const FieldSet f{obj, ""};
  in.custom_id = std::string(get_string(require(f, "custom_id"), "custom_id"));
  in.id_json = json_quote(in.custom_id);
  in.form = RequestForm::kOpenAICompletions;  // from here on errors take the OpenAI shape
  read_openai_route(f, in);
  simdjson::dom::object body_obj;
  const simdjson::dom::element body_value = require(f, "body");
  if (body_value.get_object().get(body_obj) != simdjson::SUCCESS) {
    fail_field("body", "an object", body_value);
  }
  const FieldSet body{body_obj, "body."};
  read_model(body, in);
  if (in.form == RequestForm::kOpenAIEmbeddings) return parse_openai_embedding(body, defaults, in);
  if (in.form == RequestForm::kOpenAIScore || in.form == RequestForm::kOpenAIRerank) {
    in.scoring = in.form == RequestForm::kOpenAIScore ? read_score_body(body) : read_rerank_body(body);
    in.scoring->pooling = defaults.pooling;
    in.scoring->decoder_allowed = defaults.embed_task;
    return;  // no sampling: a score is computed, not generated
  }
  if (in.form == RequestForm::kOpenAIChat) {
    const auto messages = body.find("messages");
    if (!messages) throw FieldError("no prompt: give 'body.messages'");
    in.messages = read_messages(*messages, "body.messages");
    read_chat_options(body, in.chat_options);
  } else {
    read_completion_prompt(body, in);
  }
  parse_sampling_fields(body, defaults, in.sampling);
  parse_logprob_fields(body, in.form, defaults.max_logprobs, in.sampling);
}

bool is_openai_form(simdjson::dom::object obj) {
  simdjson::dom::element unused;
  const auto has = [&](const char* key) { return obj.at_key(key).get(unused) == simdjson::SUCCESS; };
  return has("custom_id") || (has("url") && has("body"));
}

RequestError make_error(const RequestInput& in, const std::string& message) {
  RequestError err;
  err.line = in.line;
  err.id_json = in.id_json;
  err.custom_id = in.custom_id;
  err.form = in.form;
  err.message = "line " + std::to_string(in.line) + ": " + message;
  return err;
}

// unterminated: the input's last line, without its newline (a file cut short ends like this).
std::string describe_parse_error(simdjson::error_code code, std::string_view text, bool unterminated) {
  if (code == simdjson::UTF8_ERROR) return "invalid UTF-8: the line must be UTF-8 encoded JSON";
  if (code == simdjson::NUMBER_ERROR || code == simdjson::NUMBER_OUT_OF_RANGE) {
    if (const std::optional<BadNumber> bad = find_bad_number(text)) return "invalid JSON: " + describe_bad_number(*bad);
  }
  const std::string hint = unterminated ? " (the last line has no newline: is the file truncated?)" : "";
  return std::string("invalid JSON") + hint + ": " + simdjson::error_message(code);
}

// A line that would become more sequences than kMaxSequencesPerLine is refused (split it into lines).
void check_line_sequences(const RequestInput& in) {
  int64_t count = 0;
  std::string what;
  if (!in.prompt_list.empty()) {
    count = static_cast<int64_t>(in.prompt_list.size()) * in.sampling.n;
    what = std::to_string(in.prompt_list.size()) + " prompts x n = " + std::to_string(in.sampling.n);
  } else if (in.embedding) {
    count = static_cast<int64_t>(in.embedding->texts.size() + in.embedding->token_ids.size());
    what = std::to_string(count) + " inputs";
  }
  if (count <= kMaxSequencesPerLine) return;
  throw FieldError("the line asks for " + std::to_string(count) + " sequences (" + what + "), more than the " +
                   std::to_string(kMaxSequencesPerLine) + " one line may run; split it into several lines");
}

ParsedRequest parse_padded(simdjson::dom::parser& parser, const RequestDefaults& defaults,
                           std::string_view text, int64_t line_no, bool unterminated = false) {
  RequestInput in;
  in.line = line_no;
  in.id_json = std::to_string(line_no);
  in.sampling.max_tokens = defaults.max_tokens;
  simdjson::dom::element root;
  const auto code = parser.parse(text.data(), text.size(), /*realloc_if_needed=*/false).get(root);
  if (code != simdjson::SUCCESS) return make_error(in, describe_parse_error(code, text, unterminated));
  simdjson::dom::object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    return make_error(in, "the line must be a JSON object (got " + show_value(root) + ")");
  }
  try {
    if (is_openai_form(obj)) {
      parse_openai(obj, defaults, in);
    } else {
      parse_simple(obj, defaults, in);
    }
    check_line_sequences(in);
  } catch (const FieldError& e) {
    return make_error(in, e.what());
  }
  return in;
}

}  // namespace

struct RequestParser::Impl {
  RequestDefaults defaults;
  simdjson::dom::parser parser;
  std::string scratch;  // (size + kJsonPadding) padded copy for parse(string_view)
};

RequestParser::RequestParser(const RequestDefaults& defaults) : impl_(std::make_unique<Impl>()) {
  impl_->defaults = defaults;
}

RequestParser::~RequestParser() = default;

ParsedRequest RequestParser::parse(const JsonlLine& line) {
  if (line.too_long) {
    RequestInput in;
    in.line = line.line_no;
    in.id_json = std::to_string(line.line_no);
    return make_error(in, "the line is longer than " + std::to_string(kMaxLineBytes) +
                              " bytes (64 MiB), the most a line may have");
  }
  return parse_padded(impl_->parser, impl_->defaults, line.text(), line.line_no, line.truncated);
}

ParsedRequest RequestParser::parse(std::string_view text, int64_t line_no) {
  impl_->scratch.assign(text);
  impl_->scratch.append(kJsonPadding, '\0');
  return parse_padded(impl_->parser, impl_->defaults, {impl_->scratch.data(), text.size()}, line_no);
}

ParsedRequest parse_request_line(std::string_view text, int64_t line_no,
                                 const RequestDefaults& defaults) {
  RequestParser parser(defaults);
  return parser.parse(text, line_no);
}

}  // namespace cbatch
