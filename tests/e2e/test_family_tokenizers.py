"""The SentencePiece tokenizers of Mistral v3 and Phi-3, built from tiny-spm's vocabulary (512 pieces, byte
fallback; the real vocabularies cannot be fetched here) the way those families extend Llama 2's, each written
both as the tokenizer.json its family publishes and as a GGUF: cbatch reading either agrees with Hugging Face
`tokenizers` running that tokenizer.json on 1,300+ strings, with and without BOS.
- Mistral v3 (Mistral 7B v0.3): 768 control tokens at ids 3..770 ("[INST]", "[/INST]", ...), Metaspace
  with prepend_scheme "first" (so "[INST] Hi" is "[INST]", "▁Hi"); the GGUF also agrees with
  transformers' own GGUF conversion.
- Phi-3: the pieces plus "<|endoftext|>", "<|assistant|>", "<|end|>", "<|user|>", ... whose rstrip drops
  the whitespace after them (not after <s>, <unk>, <|endoftext|>), a Prepend("▁") normalizer.
- Gemma 4: SentencePiece-style BPE with no "▁" prefix and no pre-tokenizer (a Replace(" ", "▁")
  normalizer, merges over each whole fragment, byte fallback), turn and channel tokens added; its GGUF as
  llama.cpp's converter writes it (tokenizer.ggml.model "gemma4": the tokenizer.json's tokens and merges,
  scores -1000, the channel tokens user-defined).
And Qwen2's byte-level tokenizer, on SmolLM2's real vocabulary (49,152 tokens; Qwen2's own cannot be
fetched here) with Qwen2's normalizer and regex: the tokenizer.json Qwen2 publishes (NFC normalizer, Split
with Qwen's regex, ByteLevel) agrees with `tokenizers`, and a GGUF with tokenizer.ggml.pre "qwen2" with
transformers' GGUF conversion, on strings rich in decomposed and reordered combining marks.
With the optional shared data, Llama 2's vocabulary (both families) and Qwen2's real one are extra cases."""
import json
import os
import random

from common import Checks, need_modules, need_smollm2, need_tiny_spm, shared_extra, tmpdir
from tokenizer_strings import test_strings

need_modules("tokenizers", "gguf")
import gguf  # noqa: E402
from gguf import GGUFReader  # noqa: E402
from hf_reference import gguf_vocab, hf_tokenizer, write_vocab_gguf  # noqa: E402
from tokenizer_checks import check_tokenize  # noqa: E402
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors  # noqa: E402

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6


def spm_vocab(path):
    """(tokens, scores, types) of a `llama` GGUF vocabulary (<unk> <s> </s> at 0 1 2)."""
    r = GGUFReader(path)
    return [r.fields[k].contents() for k in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type")]


def merges_from_scores(tokens, scores, types):
    """Merges of a SentencePiece vocabulary, best first, as transformers' SentencePieceExtractor derives them."""
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = []
    for i, piece in enumerate(tokens):
        if types[i] != NORMAL:
            continue
        merges += [(piece[:k], piece[k:], scores[i], vocab[piece[:k]], vocab[piece[k:]])
                   for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
    merges.sort(key=lambda m: (-m[2], m[3], m[4]))
    return [(a, b) for a, b, *_ in merges]


def spm_tokenizer_json(tokens, scores, types, metaspace_first, strips):
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges_from_scores(tokens, scores, types),
                               unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    if metaspace_first:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    else:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False, rstrip=t in strips)
                            for t, ty in zip(tokens, types) if ty in (2, 3)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tok


def write_gguf(path, arch, name, tokens, scores, types):
    w = gguf.GGUFWriter(path, arch)
    w.add_name(name)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def mistral_v3(tokens, scores, types):
    controls = ["[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
                "[/TOOL_RESULTS]"] + [f"[control_{i}]" for i in range(8, 769)]
    return (tokens[:3] + controls + tokens[3:], scores[:3] + [0.0] * len(controls) + scores[3:],
            types[:3] + [CONTROL] * len(controls) + types[3:])


PHI3_ADDED = ["<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>", "<|placeholder3|>",
              "<|placeholder4|>", "<|system|>", "<|end|>", "<|placeholder5|>", "<|placeholder6|>", "<|user|>"]


def phi3(tokens, scores, types):
    return tokens + PHI3_ADDED, scores + [0.0] * len(PHI3_ADDED), types + [CONTROL] * len(PHI3_ADDED)


def family_strings(specials, seed):
    rng = random.Random(seed)
    strings = test_strings(num_random=1000, num_codepoint=200, seed=seed)
    pieces = specials + [" ", "  ", "\n", "\t", " \n ", "Hi", " there", "x", "é", "中", "😀", "\u00a0", "\u3000"]
    strings += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(300)]
    return strings


def compare(c, label, path, reference, strings):
    check_tokenize(c, label, path, strings, reference, specials=(False, True))


def check_families(c, work, source, vocab):
    """Mistral v3 and Phi-3 built from `vocab` (named `source`), as tokenizer.json and as GGUF."""
    families = [
        ("mistral-v3", "llama", "Mistral 7B Instruct v0.3", mistral_v3(*vocab), True, set(),
         ["[INST]", "[/INST]", "[INST] ", " [/INST]", "<s>", "</s>", "[TOOL_CALLS]", "[control_8]"]),
        ("phi3", "phi3", "Phi 3 Mini 4k Instruct", phi3(*vocab), False, set(PHI3_ADDED[1:]) | {"</s>"},
         ["<|user|>", "<|user|>\n", "<|end|>", "<|end|>\n", "<|assistant|>\n", "<|system|>", "<|endoftext|>", "<s>",
          "</s>", "<unk>"]),
    ]
    for family, arch, name, (tokens, scores, types), metaspace_first, strips, specials in families:
        label = f"{family} ({source})"
        reference = spm_tokenizer_json(tokens, scores, types, metaspace_first, strips)
        hf_dir = os.path.join(work, f"{source}-{family}")
        os.makedirs(hf_dir)
        reference.save(os.path.join(hf_dir, "tokenizer.json"))
        with open(os.path.join(hf_dir, "tokenizer_config.json"), "w") as f:
            json.dump({"add_bos_token": True, "bos_token": "<s>", "eos_token": "</s>"}, f)
        gguf_path = os.path.join(work, f"{source}-{family}.gguf")
        write_gguf(gguf_path, arch, name, tokens, scores, types)
        strings = family_strings(specials, seed=len(family))
        encode = lambda s, special, ref=reference: ref.encode(s, add_special_tokens=special).ids  # noqa: E731
        compare(c, f"{label} tokenizer.json", hf_dir, encode, strings)
        compare(c, f"{label} GGUF", gguf_path, encode, strings)
        if family == "mistral-v3":
            compare_with_transformers(c, label, gguf_path, strings, "the GGUF is compared with tokenizer.json only")


def compare_with_transformers(c, label, gguf_path, strings, without):
    """cbatch on the GGUF against transformers' own conversion of it; `without` says what is left when
    transformers is not installed."""
    from transformers_gguf import transformers_tokenizer_from_gguf
    try:
        converted, _ = transformers_tokenizer_from_gguf(gguf_path)  # imports transformers
    except ImportError:
        print(f"transformers is not installed: {without}")
        return
    compare(c, f"{label} GGUF vs transformers", gguf_path,
            lambda s, special: converted(s, add_special_tokens=special)["input_ids"], strings)


GEMMA4_CONTROL = ["<|turn>", "<turn|>"]
GEMMA4_VISIBLE = ["<|channel>", "<channel|>"]  # user-defined in the GGUF, so that they are rendered


def check_gemma4(c, work, source, vocab):
    """Gemma 4's tokenizer over `vocab` (a `llama` GGUF vocabulary), as tokenizer.json and as a gemma4 GGUF."""
    tokens, scores, types = vocab
    added = GEMMA4_CONTROL + GEMMA4_VISIBLE
    merges = merges_from_scores(tokens, scores, types)
    reference = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges, unk_token="<unk>", fuse_unk=True,
                                     byte_fallback=True))
    reference.normalizer = normalizers.Replace(" ", "▁")
    reference.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    specials = [t for t, ty in zip(tokens, types) if ty in (UNKNOWN, CONTROL)] + added
    reference.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    reference.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    hf_dir = os.path.join(work, f"{source}-gemma4")
    os.makedirs(hf_dir)
    reference.save(os.path.join(hf_dir, "tokenizer.json"))
    with open(os.path.join(hf_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": True, "bos_token": "<s>", "eos_token": "</s>"}, f)
    # As the converter types them: byte pieces BYTE, the tokenizer's special tokens (<unk> too) CONTROL.
    gguf_types = [BYTE if t.startswith("<0x") and len(t) == 6 else CONTROL if ty == UNKNOWN else ty
                  for t, ty in zip(tokens, types)]
    gguf_types += [CONTROL] * len(GEMMA4_CONTROL) + [USER_DEFINED] * len(GEMMA4_VISIBLE)
    gguf_path = os.path.join(work, f"{source}-gemma4.gguf")
    w = gguf.GGUFWriter(gguf_path, "gemma4")
    w.add_tokenizer_model("gemma4")
    w.add_token_list(tokens + added)
    w.add_token_scores([-1000.0] * (len(tokens) + len(added)))
    w.add_token_types(gguf_types)
    w.add_token_merges([f"{a} {b}" for a, b in merges])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_space_prefix(False)
    w.add_add_bos_token(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    strings = family_strings(added + ["<s>", "</s>", "<|turn>user\n", "<turn|>\n", "\n\n", " \n\n "], seed=4)
    encode = lambda s, special: reference.encode(s, add_special_tokens=special).ids  # noqa: E731
    compare(c, f"gemma4 ({source}) tokenizer.json", hf_dir, encode, strings)
    compare(c, f"gemma4 ({source}) GGUF", gguf_path, encode, strings)


def qwen2_strings():
    rng = random.Random(5)
    marks = ["\u0301", "\u0300", "\u0328", "\u0308", "\u0323", "\u0302", "\u030A", "\u0327", "\u05B4", "\u0E48",
             "\u3099", "\u309A", "\u0F71", "\u0F72", "\u0334"]
    bases = ["a", "e", "o", "A", "u", "n", "c", "\u3046", "\u30AB", "\u1100", "\u1161", "\u11A8", "\uAC00", "\u0F40",
             "\u212B", "\u2126", "\u0958", "\u1E0A", "\u00C5", "\uFB2C", " ", "x", "<|im_end|>", "<|endoftext|>"]
    strings = test_strings(num_random=1000, num_codepoint=200, seed=21)
    strings += ["".join(rng.choice(bases) + "".join(rng.choice(marks) for _ in range(rng.randint(0, 3)))
                        for _ in range(rng.randint(1, 8))) for _ in range(400)]
    return strings


def check_qwen2(c, work, source, gguf_path):
    """Qwen2's tokenizer.json (NFC first) over the byte-level vocabulary of `gguf_path`, whose
    tokenizer.ggml.pre is "qwen2"; the GGUF itself against transformers' conversion."""
    tokens, types, merges, pre = gguf_vocab(gguf_path)
    c.check(pre == "qwen2", f"{gguf_path}: tokenizer.ggml.pre {pre!r}")
    reference = hf_tokenizer(tokens, types, merges, pre)
    reference.normalizer = normalizers.NFC()
    hf_dir = os.path.join(work, f"{source}-qwen2")
    os.makedirs(hf_dir)
    reference.save(os.path.join(hf_dir, "tokenizer.json"))
    strings = qwen2_strings()
    compare(c, f"qwen2 ({source}) tokenizer.json (NFC)", hf_dir,
            lambda s, special: reference.encode(s, add_special_tokens=special).ids, strings)
    compare_with_transformers(c, f"qwen2 ({source})", gguf_path, strings,
                              "the Qwen2 GGUF is checked by test_pretokenizer_families only")


c = Checks()
work = tmpdir()
check_families(c, work, "tiny-spm", spm_vocab(os.path.join(need_tiny_spm(), "tiny-spm.gguf")))
check_gemma4(c, work, "tiny-spm", spm_vocab(os.path.join(need_tiny_spm(), "tiny-spm.gguf")))
smollm2_qwen2 = os.path.join(work, "smollm2-qwen2.gguf")
write_vocab_gguf(smollm2_qwen2, *gguf_vocab(need_smollm2())[:3], "qwen2", arch="qwen2")
check_qwen2(c, work, "smollm2", smollm2_qwen2)
llama = shared_extra(os.path.join("tokenizers", "ggml-vocab-llama-spm.gguf"))
if llama:
    check_families(c, work, "llama-spm", spm_vocab(llama))
    check_gemma4(c, work, "llama-spm", spm_vocab(llama))
qwen2 = shared_extra(os.path.join("tokenizers", "ggml-vocab-qwen2.gguf"))
if qwen2:
    check_qwen2(c, work, "qwen2", qwen2)
c.done()
