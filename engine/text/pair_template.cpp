// tokenizer.json post-processors -> PostProcessorSpec (pair_template.hpp).
#include "engine/text/pair_template.hpp"

namespace cbatch {
namespace {

using simdjson::dom::element;

void read_single(const JsonFields& p, const SpecialIdOf& id_of, PostProcessorSpec& out) {
  bool seen_sequence = false;
  size_t index = 0;
  for (element value : p.array("single")) {
    const JsonFields piece = p.item("single", index++, value);
    if (piece.has("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const int32_t id = id_of(piece, "SpecialToken", piece.object("SpecialToken").get_string("id"));
    (seen_sequence ? out.suffix_ids : out.prefix_ids).push_back(id);
  }
}

// "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, ...].
void read_pair(const JsonFields& p, const SpecialIdOf& id_of, PostProcessorSpec& out) {
  out.pair_template.clear();
  size_t index = 0;
  int last_type = 0;
  for (element value : p.array("pair")) {
    const JsonFields piece = p.item("pair", index++, value);
    PairTemplateItem item;
    const JsonFields inner = piece.object(piece.has("Sequence") ? "Sequence" : "SpecialToken");
    if (piece.has("Sequence")) {
      const std::string id = inner.get_string("id");
      if (id != "A" && id != "B") inner.fail("id", "'" + id + "' is not a sequence (A or B)");
      item.sequence = id == "A" ? 0 : 1;
    } else {
      item.special_id = id_of(piece, "SpecialToken", inner.get_string("id"));
    }
    item.type_id = static_cast<int>(inner.has("type_id") ? inner.get_int("type_id") : 0);
    if (item.type_id < last_type || item.type_id > 1) {
      inner.fail("type_id", "must run 0 then 1 through the pair template (cbatch joins two segments)");
    }
    last_type = item.type_id;
    out.pair_template.push_back(item);
  }
}

// BertProcessing and RobertaProcessing name their tokens as [text, id]: "cls": ["[CLS]", 101].
int32_t processing_id(const JsonFields& p, const char* key) {
  simdjson::dom::array pair = p.array(key);
  int64_t id;
  if (pair.size() != 2 || pair.at(1).get_int64().get(id) || id < 0) p.fail(key, "must be [text, id]");
  return static_cast<int32_t>(id);
}

}  // namespace

void read_post_processor(const JsonFields& p, const SpecialIdOf& id_of, PostProcessorSpec& out) {
  const std::string type = p.get_string("type");
  if (type == "TemplateProcessing") {
    read_single(p, id_of, out);
    if (p.has("pair")) read_pair(p, id_of, out);
    return;
  }
  if (type != "BertProcessing" && type != "RobertaProcessing") {
    p.fail("type", "'" + type + "' is not a post-processor cbatch supports here (TemplateProcessing, BertProcessing, "
                                "RobertaProcessing)");
  }
  const int32_t cls = processing_id(p, "cls"), sep = processing_id(p, "sep");
  out.prefix_ids = {cls};
  out.suffix_ids = {sep};
  if (type == "BertProcessing") {
    out.pair_template = {{cls, 0, 0}, {-1, 0, 0}, {sep, 0, 0}, {-1, 1, 1}, {sep, 0, 1}};
  } else {
    out.pair_template = {{cls, 0, 0}, {-1, 0, 0}, {sep, 0, 0}, {sep, 0, 0}, {-1, 1, 0}, {sep, 0, 0}};
  }
}

EncodedPair join_pair(const std::vector<PairTemplateItem>& pair_template,
                      const std::function<std::vector<int32_t>(int sequence)>& encode) {
  EncodedPair pair;
  bool second_started = false;
  for (const PairTemplateItem& item : pair_template) {
    if (item.type_id == 1 && !second_started) {
      second_started = true;
      pair.second_segment = static_cast<int>(pair.ids.size());
    }
    if (item.special_id >= 0) {
      pair.ids.push_back(item.special_id);
    } else {
      const std::vector<int32_t> ids = encode(item.sequence);
      pair.ids.insert(pair.ids.end(), ids.begin(), ids.end());
    }
  }
  if (!second_started) pair.second_segment = static_cast<int>(pair.ids.size());
  return pair;
}

}  // namespace cbatch
