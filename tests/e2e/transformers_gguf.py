"""The tokenizer `transformers` builds from a GGUF file (AutoTokenizer.from_pretrained(dir, gguf_file=...)),
without torch: transformers' own GGUF reader imports torch, so the metadata is read here with the `gguf`
package and handed to transformers' converter (integrations.gguf.gguf_tokenizer_mapping:
convert_gguf_tokenizer, which picks the family's builder: Gemma's respelled space tokens and merges in
file order, Phi-3's normalizer, control and user-defined tokens as added tokens) exactly as
get_gguf_tokenizer would. Needs `transformers` (>= 5) and `gguf`; no cbatch code."""
from gguf import GGUFReader


def transformers_tokenizer_from_gguf(path):
    """(a PreTrainedTokenizerFast, its tokenizer_config dict) for the GGUF at `path`."""
    from transformers import PreTrainedTokenizerFast
    from transformers.integrations.gguf import gguf_tokenizer_mapping as mapping

    reader = GGUFReader(path)
    metadata = {key: reader.fields[key].contents() for key in reader.fields
                if key.startswith("tokenizer.") or key == "general.architecture"}
    grouped = {group: {name: metadata[f"tokenizer.{key}"] for key, name in renames.items()
                       if f"tokenizer.{key}" in metadata}
               for group, renames in mapping.GGUF_TOKENIZER_MAPPING.items()}
    tokenizer, config = grouped["tokenizer"], grouped["tokenizer_config"]
    if tokenizer.get("tokenizer_type") == "llama":
        config.setdefault("add_bos_token", True)  # as get_gguf_tokenizer
    for name, key in mapping._SPECIAL_TOKENS.items():
        token_id = metadata.get(f"tokenizer.ggml.{key}")
        config[name] = tokenizer["tokens"][token_id] if token_id is not None else None
    backend, extra = mapping.convert_gguf_tokenizer(metadata["general.architecture"], tokenizer)
    config.pop("chat_template", None)
    return PreTrainedTokenizerFast(tokenizer_object=backend, **config, **extra), config
