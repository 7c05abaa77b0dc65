// `cbatch tokenize --model PATH`: {"text": ...} lines on stdin -> {"ids": [...]} lines on stdout.
#include <cstdio>
#include <iostream>
#include <memory>

#include <simdjson.h>

#include "cmd/commands.hpp"
#include "engine/jsonl_reader.hpp"
#include "engine/json_writer.hpp"
#include "engine/model.hpp"

namespace cbatch {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string tokenizer;
  bool no_special = false;
};

int run(const TokenizeOptions& o) {
  ModelSource source;
  source.path = o.model;
  source.tokenizer_path = o.tokenizer;
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(source);
  JsonlReader reader("-");
  JsonlLine line;
  simdjson::dom::parser parser;
  int failures = 0;
  while (reader.next(line)) {
    JsonWriter w;
    simdjson::dom::element doc;
    std::string_view text;
    const auto error = parser.parse(line.buffer.data(), line.size, false).get(doc);
    if (error || doc["text"].get_string().get(text)) {
      ++failures;
      w.begin_object().key("line").int64(line.line_no).key("error").string("expected an object with a string field 'text'").end_object();
    } else {
      const std::vector<int32_t> ids = tokenizer->encode(text, !o.no_special);
      w.begin_object().key("ids").int_array(ids).end_object();
    }
    std::string out = w.take() + "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  std::fflush(stdout);
  return failures > 0 ? 2 : 0;
}

}  // namespace

Command add_tokenize_command(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* sub = app.add_subcommand("tokenize", "tokenize {\"text\": ...} lines from standard input");
  sub->add_option("--model", options->model, "model or vocab-only GGUF whose tokenizer to use")->required();
  sub->add_option("--tokenizer", options->tokenizer, "tokenizer.bin for llama2.c checkpoints");
  sub->add_flag("--no-special", options->no_special, "add no BOS/EOS");
  return {sub, [options] { return run(*options); }};
}

}  // namespace cbatch
