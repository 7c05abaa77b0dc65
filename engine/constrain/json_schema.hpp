// JSON constraints as regular expressions (regex_nfa.hpp): any JSON object nested at most a few levels
// deep (json_object), and JSON Schema compiled to the language of the documents that validate
// (properties in schema order, required ones always, optional ones possibly left out; whitespace limited
// to one optional space between tokens so that no output runs away in spaces). Recursive $refs are
// unrolled a few levels. A keyword this compiler cannot enforce throws cbatch::Error naming it.
#pragma once
#include <string>
#include <string_view>

namespace cbatch {

// The regex of a JSON object (values nested at most `max_depth` levels).
std::string json_object_regex(int max_depth = 3);
// The regex of the documents valid under `schema` (JSON text). Throws cbatch::Error.
std::string json_schema_regex(std::string_view schema);

}  // namespace cbatch
