// `cbatch tokenize --model PATH`: {"text": ...} lines on stdin -> {"ids": [...]} lines on stdout.
// A {"messages": [...]} line is rendered with the chat template (the model's, or --chat-template) and
// gives {"ids": [...], "text": RENDERED}, so templates can be checked against a Jinja rendering.
#include <cstdio>
#include <memory>
#include <variant>

#include <simdjson.h>

#include "cmd/commands.hpp"
#include "cmd/engine_options.hpp"
#include "engine/text/chat_format.hpp"
#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"
#include "engine/base/text_output.hpp"
#include "engine/io/json_writer.hpp"
#include "engine/io/jsonl_reader.hpp"
#include "engine/model/model.hpp"
#include "engine/io/request_parser.hpp"

namespace cbatch {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string tokenizer;
  std::string chat_template;
  bool no_special = false;
};

void write_error(JsonWriter& w, int64_t line, const std::string& message) {
  w.begin_object().key("line").int64(line).key("error").string(elide(message, kMessageBytes)).end_object();
}

// One output line for a {"messages": ...} line; false on an error.
bool tokenize_chat(const JsonlLine& line, RequestParser& requests, const ChatFormat& chat, JsonWriter& w) {
  ParsedRequest parsed = requests.parse(line);
  if (auto* error = std::get_if<RequestError>(&parsed)) {
    write_error(w, line.line_no, error->message);
    return false;
  }
  try {
    const RequestInput& input = std::get<RequestInput>(parsed);
    const RenderedChat rendered = chat.render(*input.messages, input.chat_options);
    w.begin_object().key("ids").int_array(rendered.ids).key("text").string(rendered.text).end_object();
    return true;
  } catch (const Error& e) {
    write_error(w, line.line_no, e.what());
    return false;
  }
}

int run(const TokenizeOptions& o) {
  ModelSource source;
  source.path = o.model;
  source.tokenizer_path = o.tokenizer;
  std::string chat_template;
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(source, &chat_template);
  const ChatFormat chat(chat_template, o.chat_template, *tokenizer);
  JsonlReader reader("-");
  JsonlLine line;
  simdjson::dom::parser parser;
  RequestParser requests;
  int failures = 0;
  while (reader.next(line)) {
    JsonWriter w;
    simdjson::dom::element doc;
    std::string_view text;
    const bool is_json = !parser.parse(line.buffer.data(), line.size, false).get(doc);
    if (is_json && doc.is_object() && !doc["messages"].error()) {
      failures += !tokenize_chat(line, requests, chat, w);
    } else if (!is_json || doc["text"].get_string().get(text)) {
      ++failures;
      write_error(w, line.line_no, "expected an object with a string field 'text' or a list 'messages'");
    } else {
      w.begin_object().key("ids").int_array(tokenizer->encode(text, !o.no_special)).end_object();
    }
    std::string out = w.take() + "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    // Answer what came before waiting on the producer; a stdout that cannot be written stops the loop.
    if (!reader.ready() || std::ferror(stdout) != 0) flush_standard_output();
  }
  return failures > 0 ? 2 : 0;  // main flushes and checks standard output
}

}  // namespace

Command add_tokenize_command(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* sub = app.add_subcommand("tokenize", "tokenize {\"text\": ...} or {\"messages\": [...]} lines from standard input");
  sub->add_option("--model", options->model, "model or vocab-only GGUF whose tokenizer to use")->required();
  sub->add_option("--tokenizer", options->tokenizer, "tokenizer.bin for llama2.c checkpoints");
  add_chat_template_option(*sub, options->chat_template);
  sub->add_flag("--no-special", options->no_special, "add no BOS/EOS to text lines");
  return {sub, [options] { return run(*options); }};
}

}  // namespace cbatch
