"""Independent references built with Hugging Face `tokenizers` and the `gguf` package (never with
cbatch code): a byte-level BPE tokenizer from a GGUF's vocabulary, merges and the pre-tokenizer its
tokenizer.ggml.pre names, declared as the original tokenizer.json files declare it (SmolLM2: Digits +
ByteLevel; Llama 3, Qwen2, Qwen3.5 and o200k (gpt-4o, gpt-oss): Split with their regex + ByteLevel), and vocab-only
GGUF writing."""
from gguf import GGUFReader
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

CONTROL = 3
USER_DEFINED = 4

# The pre-tokenizers of the original tokenizer.json files, per tokenizer.ggml.pre name.
PRE_TOKENIZERS = {
    "smollm": lambda: pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                               pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]),
    "gpt-2": lambda: pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
}


def field(reader, key):
    return reader.fields[key].contents()


def gguf_vocab(path):
    """(tokens, types, merges as pairs, pre name) of a GGUF file with a gpt2 tokenizer."""
    r = GGUFReader(path)
    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field(r, "tokenizer.ggml.merges")]
    return tokens, types, merges, field(r, "tokenizer.ggml.pre")


def hf_tokenizer_from_gguf(path):
    return hf_tokenizer(*gguf_vocab(path))


# Split patterns as the tokenizer.json files of these families spell them (HF Split pre-tokenizer),
# followed by a ByteLevel that only maps bytes; llama.cpp's "default" is its four-regex chain.
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
QWEN2_REGEX = LLAMA3_REGEX.replace(r"\p{N}{1,3}", r"\p{N}")
# Qwen3.5: Qwen2's with combining marks kept with their letters and out of the symbol runs.
QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
# o200k (gpt-4o; gpt-oss's tokenizer.json): words split at case changes, contractions attached.
O200K_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
               r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
               r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _split(regex):
    from tokenizers import Regex
    return pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False)


def _byte_level(use_regex):
    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=use_regex)


PRE_TOKENIZERS.update({
    "starcoder": PRE_TOKENIZERS["smollm"],
    "llama-bpe": lambda: pre_tokenizers.Sequence([_split(LLAMA3_REGEX), _byte_level(False)]),
    "qwen2": lambda: pre_tokenizers.Sequence([_split(QWEN2_REGEX), _byte_level(False)]),
    "qwen35": lambda: pre_tokenizers.Sequence([_split(QWEN35_REGEX), _byte_level(False)]),
    "gpt-4o": lambda: pre_tokenizers.Sequence([_split(O200K_REGEX), _byte_level(False)]),
    # byte mapping last: mapped bytes such as "½" would match \p{N} in the later splits
    "default": lambda: pre_tokenizers.Sequence([_split(r"[\p{P}\$\+<=>\^`\|]+"), _split(GPT2_REGEX),
                                                _split(r"\p{N}+"), _split(r"[0-9][0-9][0-9]"),
                                                _byte_level(False)]),
})
IGNORE_MERGES = {"llama-bpe"}  # llama.cpp (and Llama 3's tokenizer.json) take whole-word tokens


def hf_tokenizer(tokens, types, merges, pre):
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab, merges, fuse_unk=False, byte_fallback=False,
                               ignore_merges=pre in IGNORE_MERGES))
    tok.pre_tokenizer = PRE_TOKENIZERS[pre]()
    tok.decoder = decoders.ByteLevel()
    tok.add_tokens([AddedToken(t, special=(ty == CONTROL), normalized=False) for t, ty in zip(tokens, types)
                    if ty in (CONTROL, USER_DEFINED)])
    return tok


def write_vocab_gguf(path, tokens, types, merges, pre, arch="gpt2"):
    """A vocab-only GGUF with a gpt2 tokenizer and the given tokenizer.ggml.pre (general.architecture `arch`)."""
    import gguf
    w = gguf.GGUFWriter(path, arch)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([f"{a} {b}" for a, b in merges])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def spm_tokenizer_json_from_gguf(path):
    """A SentencePiece-style tokenizer.json (BPE with byte fallback, "▁" normalizer, <s> template) from a
    `llama` GGUF vocabulary, its merges derived from the piece scores as transformers'
    SentencePieceExtractor derives them for Llama tokenizers."""
    from tokenizers import normalizers, processors
    r = GGUFReader(path)
    tokens, scores, types = (field(r, k) for k in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                                                    "tokenizer.ggml.token_type"))
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = []
    for i in sorted(range(len(tokens)), key=lambda i: -scores[i]):
        if types[i] != 1:
            continue
        piece = tokens[i]
        local = [(piece[:k], piece[k:], scores[i]) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
        merges.extend(sorted(local, key=lambda x: (vocab[x[0]], vocab[x[1]])))
    merges.sort(key=lambda x: -x[2])
    tok = Tokenizer(models.BPE(vocab, [(a, b) for a, b, _ in merges], unk_token=tokens[0], fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty in (2, 3)])
    tok.post_processor = processors.TemplateProcessing(single=f"{tokens[1]} $A", special_tokens=[(tokens[1], 1)])
    return tok
