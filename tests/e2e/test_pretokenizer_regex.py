"""Split regexes through both of cbatch's paths agree with Hugging Face `tokenizers` (Oniguruma): Qwen3.5's
regex (its hand-written scanner, from either spelling, and from a vocab-only GGUF with tokenizer.ggml.pre
"qwen35"), and, on PCRE2, the same regex written differently, the GPT-2, Llama 3 and o200k regexes in a
group (so no scanner knows them), DeepSeek-V3's three splits, a Falcon-style chain, right-to-left digit
triples, BLOOM's and Tekken's regexes, and Split behaviours other than Isolated (inverted too, and a String
pattern). Each is a tokenizer.json variant of one base: SmolLM2's byte-level vocabulary (49,152 tokens,
from its GGUF) with a <|im_start|> template, so ids with and without special tokens are compared on the
shared hard strings (multilingual text with combining marks, Thai, Devanagari, emoji ZWJ sequences, CJK,
digits). A pattern no scanner knows loads; one PCRE2 cannot run is a load error naming the field and offset."""
import os

from common import Checks, need_modules, need_smollm2, run, tmpdir
from tokenizer_checks import check_tokenize, file_reference, ids_of, tokenizer_variant
from tokenizer_strings import test_strings

need_modules("tokenizers", "gguf")
from hf_reference import (GPT2_REGEX, LLAMA3_REGEX, O200K_REGEX, QWEN35_REGEX, gguf_vocab,  # noqa: E402
                          hf_tokenizer, write_vocab_gguf)

QWEN35_LLAMA_CPP = QWEN35_REGEX.replace("(?i:'s|'t|'re|'ve|'m|'ll|'d)",
                                        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])")
DEEPSEEK_V3 = [r"\p{N}{1,3}", "[一-龥\u3040-ゟ゠-ヿ]+",
               r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+"]
FALCON = [r"[\p{P}\$\+<=>\^~\|`]+", f"(?:{GPT2_REGEX})", r"\p{N}+", r"[0-9][0-9][0-9]"]
DIGITS_RTL = [r"\p{N}{1,3}(?=(?:\p{N}{3})*(?:\P{N}|$))",
              r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"]
BLOOM = " ?[^(\\s|[.,!?…。，、।۔،])]+"
TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
          r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
          r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def split(pattern, behavior="Isolated", invert=False, kind="Regex"):
    return {"type": "Split", "pattern": {kind: pattern}, "behavior": behavior, "invert": invert}


BYTES_ONLY = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
GPT2_BYTES = dict(BYTES_ONLY, use_regex=True)

# name -> the pre-tokenizers before the final ByteLevel, and that ByteLevel.
VARIANTS = {
    "qwen35": ([split(QWEN35_REGEX)], BYTES_ONLY),
    "qwen35-llama.cpp-spelling": ([split(QWEN35_LLAMA_CPP)], BYTES_ONLY),
    "qwen35-grouped": ([split(f"(?:{QWEN35_REGEX})")], BYTES_ONLY),
    "qwen35-long-names": ([split(QWEN35_REGEX.replace(r"\p{L}", r"\p{Letter}").replace(r"\p{M}", r"\p{Mark}"))],
                          BYTES_ONLY),
    "gpt-2-grouped": ([split(f"(?:{GPT2_REGEX})")], BYTES_ONLY),
    "llama3-grouped": ([split(f"(?:{LLAMA3_REGEX})")], BYTES_ONLY),
    "o200k-grouped": ([split(f"(?:{O200K_REGEX})")], BYTES_ONLY),
    "deepseek-v3": ([split(p) for p in DEEPSEEK_V3], BYTES_ONLY),
    "falcon": ([split(p) for p in FALCON], BYTES_ONLY),
    "digits-rtl-triples": ([split(p) for p in DIGITS_RTL], BYTES_ONLY),
    "bloom": ([split(BLOOM)], BYTES_ONLY),
    "tekken": ([split(TEKKEN)], BYTES_ONLY),
    "merged-with-next": ([split(r"\p{N}+", "MergedWithNext")], GPT2_BYTES),
    "merged-with-previous-inverted": ([split(r"\s+", "MergedWithPrevious", invert=True)], GPT2_BYTES),
    "removed": ([split(r"\s*[\r\n]+", "Removed")], GPT2_BYTES),
    "contiguous-string-inverted": ([split(",", "Contiguous", invert=True, kind="String")], GPT2_BYTES),
}

work = tmpdir()
c = Checks()
strings = test_strings()
if os.environ.get("CBATCH_SANITIZED") == "1":  # the sanitizer build (about 10x slower) checks a quarter of them
    strings = strings[::4]
tokens, types, merges, _ = gguf_vocab(need_smollm2())

# The base: SmolLM2's vocabulary as a tokenizer.json that puts <|im_start|> first when asked for specials.
from tokenizers import processors  # noqa: E402

base_tokenizer = hf_tokenizer(tokens, types, merges, "qwen35")
base_tokenizer.post_processor = processors.TemplateProcessing(
    single="<|im_start|> $A", special_tokens=[("<|im_start|>", tokens.index("<|im_start|>"))])
base = os.path.join(work, "base")
os.makedirs(base)
base_tokenizer.save(os.path.join(base, "tokenizer.json"))


def with_pre_tokenizer(splits, byte_level):
    def edit(data):
        data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": splits + [byte_level]}
    return edit


for name, (splits, byte_level) in VARIANTS.items():
    variant = tokenizer_variant(work, base, name, with_pre_tokenizer(splits, byte_level))
    check_tokenize(c, name, variant, strings, file_reference(variant))

# The GGUF route: tokenizer.ggml.pre "qwen35" against tokenizers running Qwen3.5's regex.
gguf_path = os.path.join(work, "qwen35.gguf")
write_vocab_gguf(gguf_path, tokens, types, merges, "qwen35")
check_tokenize(c, "qwen35 GGUF", gguf_path, strings, ids_of(hf_tokenizer(tokens, types, merges, "qwen35")))

# A pattern no scanner knows loads (it used to be refused); what PCRE2 cannot run is a clear load error.
novel = tokenizer_variant(work, base, "novel", with_pre_tokenizer([split(r"\p{L}+|\p{N}|[^\p{L}\p{N}]+")], BYTES_ONLY))
proc = run(["tokenize", "--model", novel, "--no-special"], stdin='{"text": "abc 123"}\n', check=False)
c.check(proc.returncode == 0 and "is not a split pattern" not in proc.stderr,
        f"a Split regex no scanner knows: exit {proc.returncode}, {proc.stderr.strip()}")
for name, pattern, offset in [("intersection", r"\p{L}+|[a-z&&[^c]]", 11), ("unbalanced", r"\p{L}+|(\p{N}", 13)]:
    bad = tokenizer_variant(work, base, name, with_pre_tokenizer([split(pattern)], BYTES_ONLY))
    proc = run(["tokenize", "--model", bad], stdin='{"text": "x"}\n', check=False)
    c.check(proc.returncode == 1, f"{name}: exit {proc.returncode}")
    c.check("field 'pre_tokenizer.pretokenizers[0].pattern.Regex'" in proc.stderr and f"at offset {offset}" in proc.stderr,
            f"{name}: the message names the field and the offset: {proc.stderr.strip()}")
c.done()
