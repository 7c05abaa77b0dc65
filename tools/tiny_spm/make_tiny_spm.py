#!/usr/bin/env python3
"""Writes tiny-spm, the project's own small Llama test model, and its goldens, reproducibly:

  python3 tools/tiny_spm/make_tiny_spm.py OUT_DIR

OUT_DIR/tiny-spm.bin + tokenizer.bin (llama2.c), tiny-spm.gguf (arch llama, tokenizer model llama) and hf/
(config.json, model.safetensors, tokenizer.json, ...) hold the same weights and the same SentencePiece-style
BPE tokenizer (byte fallback, dummy-prefix U+2581, <unk> <s> </s> at 0 1 2, bytes at 3..258, pieces after).
The tokenizer is trained here on corpus.txt beside this file: merges of the most frequent adjacent pair
(ties: the smaller pair), never across a word start, scored by merge order. Weights come from a counter-based
hash (splitmix64), not from numpy's generators, so every numpy version writes the same bytes.

The goldens are made by references that share no code with cbatch:
- golden/tokenize.jsonl: Hugging Face `tokenizers` on hf/tokenizer.json (BOS included);
- golden/greedy.jsonl: greedy continuations from the float64 numpy forward pass of tests/e2e/reference_llama.py
  on the GGUF (read by the `gguf` package), until EOS (included) or the 128-token context is full; the text is
  `tokenizers`' decode of prompt + output minus that of the prompt; `max_tokens` is the context's room, or
  less where the reference's top two logits come closer than MIN_MARGIN (the golden stops before that token);
- golden/greedy-margins.jsonl: the top-1 minus top-2 logit at every output position of that reference.
Each golden file's first line is {"generated_by": ...}: the command and references that made it."""
import json
import os
import struct
import sys
import zlib
from collections import Counter

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

SPACE = "\u2581"
VOCAB = 512
NUM_SPECIAL = 3          # <unk> <s> </s>
FIRST_PIECE = NUM_SPECIAL + 256
CONFIG = {"dim": 64, "hidden_dim": 172, "n_layers": 4, "n_heads": 4, "n_kv_heads": 2, "seq_len": 128}
EOS_GAIN = 1.7
MIN_MARGIN = 2e-3        # a golden token closer than this to the runner-up would test rounding, not the model
PROMPTS = [
    "", "I dreamed of", "The robot walked along the river", "Once upon a time",
    "The city was made of paper, and", "She said: \"Don't be afraid", "42 and 2024",
    "In the morning the café", "What is the color of silence?", "We sat by the fire\n\nand told stories about the stars",
    "Zürich, résumé, naïve", "The library had no walls, only shelves that went up into the clouds and down",
]
GENERATED_BY = "python3 tools/tiny_spm/make_tiny_spm.py OUT_DIR"


# --- tokenizer ----------------------------------------------------------------------------------------
def corpus_words(text):
    """The corpus as SentencePiece sees it: each line gets the dummy prefix, spaces become U+2581, and a
    word is a run that starts at a U+2581 (pieces never cross a word start)."""
    words = Counter()
    for line in text.splitlines():
        if not line:
            continue
        normalized = SPACE + line.replace(" ", SPACE)
        start = 0
        for i in range(1, len(normalized) + 1):
            if i == len(normalized) or normalized[i] == SPACE:
                words[normalized[start:i]] += 1
                start = i
    return words


def train_pieces(text, num_pieces):
    """Pieces in score order: merged pieces (most frequent pair first), then the alphabet (characters seen
    at least twice, most frequent first); characters outside it fall back to bytes."""
    words = corpus_words(text)
    chars = Counter()
    for word, n in words.items():
        for ch in word:
            chars[ch] += n
    alphabet = [ch for ch, n in sorted(chars.items(), key=lambda kv: (-kv[1], kv[0])) if n >= 2]
    vocab = set(alphabet)
    symbols = {word: list(word) for word in words}
    merged = []
    while len(merged) + len(alphabet) < num_pieces:
        pairs = Counter()
        for word, n in words.items():
            s = symbols[word]
            for a, b in zip(s, s[1:]):
                if a in vocab and b in vocab:
                    pairs[(a, b)] += n
        if not pairs:
            break
        (a, b), _ = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        if a + b not in vocab:
            merged.append(a + b)
            vocab.add(a + b)
        for word in words:
            s, out, i = symbols[word], [], 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            symbols[word] = out
    pieces = merged + alphabet
    if len(pieces) != num_pieces:
        raise SystemExit(f"the corpus gives {len(pieces)} pieces, {num_pieces} are needed")
    return pieces


def vocabulary():
    """(tokens, scores, GGUF token types) of the whole vocabulary."""
    with open(os.path.join(HERE, "corpus.txt"), encoding="utf-8") as f:
        pieces = train_pieces(f.read(), VOCAB - FIRST_PIECE)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + pieces
    scores = [0.0] * FIRST_PIECE + [-float(i) for i in range(len(pieces))]
    types = [2, 3, 3] + [6] * 256 + [1] * len(pieces)
    return tokens, scores, types


def hf_merges(tokens):
    """SentencePiece's pieces as BPE merges: every split of a piece into two pieces, ordered by the piece's
    score (the order the SentencePiece encoder applies them)."""
    ids = {t: i for i, t in enumerate(tokens)}
    merges = []
    for piece in tokens[FIRST_PIECE:]:
        splits = [(piece[:k], piece[k:]) for k in range(1, len(piece))]
        merges += [f"{a} {b}" for a, b in splits if ids.get(a, 0) >= FIRST_PIECE and ids.get(b, 0) >= FIRST_PIECE]
    return merges


def tokenizer_json(tokens):
    special = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True} for i in range(NUM_SPECIAL)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": special,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPACE}, {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SPACE}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": hf_merges(tokens)},
    }


# --- weights ------------------------------------------------------------------------------------------
def hashed_uniform(name, shape):
    """Uniform values in [-1, 1) from splitmix64 over (crc32(name), index): the same on every platform."""
    with np.errstate(over="ignore"):
        x = np.arange(int(np.prod(shape)), dtype=np.uint64) + np.uint64(zlib.crc32(name.encode())) * np.uint64(1 << 32)
        x = x * np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return ((x >> np.uint64(11)).astype(np.float64) * 2.0 ** -52 - 1.0).reshape(shape)


def weights():
    """float32 tensors in llama2.c's layout and names; q/k rows rotate adjacent pairs (llama2.c's RoPE)."""
    c = CONFIG
    dim, hidden, layers = c["dim"], c["hidden_dim"], c["n_layers"]
    kv_dim = dim // c["n_heads"] * c["n_kv_heads"]

    def linear(name, *shape):
        return hashed_uniform(name, shape) * np.sqrt(3.0 / shape[-1])

    def norm(name, *shape):
        return 1.0 + 0.3 * hashed_uniform(name, shape)

    w = {"token_embedding": 0.5 * hashed_uniform("token_embedding", (VOCAB, dim)),
         "rms_att": norm("rms_att", layers, dim), "wq": linear("wq", layers, dim, dim),
         "wk": linear("wk", layers, kv_dim, dim), "wv": linear("wv", layers, kv_dim, dim),
         "wo": linear("wo", layers, dim, dim), "rms_ffn": norm("rms_ffn", layers, dim),
         "w1": linear("w1", layers, hidden, dim), "w2": linear("w2", layers, dim, hidden),
         "w3": linear("w3", layers, hidden, dim), "rms_final": norm("rms_final", dim)}
    # The head favours pieces over bytes (a byte's text alone is often not UTF-8), never picks <unk> or <s>,
    # and picks </s> now and then, so that some continuations stop on EOS.
    wcls = 2.0 * linear("wcls", VOCAB, dim)
    wcls[:2] *= 0.05
    wcls[3:FIRST_PIECE] *= 0.3
    wcls[2] *= EOS_GAIN
    w["wcls"] = wcls
    return {k: v.astype(np.float32) for k, v in w.items()}


# --- the three formats --------------------------------------------------------------------------------
def write_llama2c(out, w, tokens, scores):
    c = CONFIG
    head_size = c["dim"] // c["n_heads"]
    with open(os.path.join(out, "tiny-spm.bin"), "wb") as f:
        f.write(struct.pack("<7i", c["dim"], c["hidden_dim"], c["n_layers"], c["n_heads"], c["n_kv_heads"],
                            -VOCAB, c["seq_len"]))
        for name in ("token_embedding", "rms_att", "wq", "wk", "wv", "wo", "rms_ffn", "w1", "w2", "w3", "rms_final"):
            f.write(w[name].astype("<f4").tobytes())
        f.write(np.zeros(2 * c["seq_len"] * head_size // 2, dtype="<f4").tobytes())  # legacy RoPE tables
        f.write(w["wcls"].astype("<f4").tobytes())
    stored = ["<unk>", "\n<s>\n", "\n</s>\n"] + [t.replace(SPACE, " ") for t in tokens[NUM_SPECIAL:]]
    with open(os.path.join(out, "tokenizer.bin"), "wb") as f:
        f.write(struct.pack("<i", max(len(t.encode()) for t in stored)))
        for t, s in zip(stored, scores):
            f.write(struct.pack("<fi", s, len(t.encode())) + t.encode())


def write_gguf(out, w, tokens, scores, types):
    import gguf
    c = CONFIG
    writer = gguf.GGUFWriter(os.path.join(out, "tiny-spm.gguf"), "llama")
    writer.add_name("tiny-spm")
    writer.add_context_length(c["seq_len"])
    writer.add_embedding_length(c["dim"])
    writer.add_block_count(c["n_layers"])
    writer.add_feed_forward_length(c["hidden_dim"])
    writer.add_head_count(c["n_heads"])
    writer.add_head_count_kv(c["n_kv_heads"])
    writer.add_rope_dimension_count(c["dim"] // c["n_heads"])
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_tensor("token_embd.weight", w["token_embedding"])
    for i in range(c["n_layers"]):
        b = f"blk.{i}."
        for gguf_name, name in (("attn_norm", "rms_att"), ("attn_q", "wq"), ("attn_k", "wk"), ("attn_v", "wv"),
                                ("attn_output", "wo"), ("ffn_norm", "rms_ffn"), ("ffn_gate", "w1"),
                                ("ffn_down", "w2"), ("ffn_up", "w3")):
            writer.add_tensor(b + gguf_name + ".weight", np.ascontiguousarray(w[name][i]))
    writer.add_tensor("output_norm.weight", w["rms_final"])
    writer.add_tensor("output.weight", w["wcls"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def rotate_half_rows(t, n_heads):
    """Adjacent-pair q/k rows reordered for Hugging Face's rotate-half RoPE (the inverse of llama.cpp's
    permutation)."""
    head_dim = t.shape[0] // n_heads
    return t.reshape(n_heads, head_dim // 2, 2, t.shape[1]).swapaxes(1, 2).reshape(t.shape)


def write_hf(out, w, tokens):
    from tiny_models import write_safetensors
    c = CONFIG
    d = os.path.join(out, "hf")
    os.makedirs(d, exist_ok=True)
    t = {"model.embed_tokens.weight": w["token_embedding"], "model.norm.weight": w["rms_final"],
         "lm_head.weight": w["wcls"]}
    for i in range(c["n_layers"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = w["rms_att"][i]
        t[p + "self_attn.q_proj.weight"] = rotate_half_rows(w["wq"][i], c["n_heads"])
        t[p + "self_attn.k_proj.weight"] = rotate_half_rows(w["wk"][i], c["n_kv_heads"])
        t[p + "self_attn.v_proj.weight"] = w["wv"][i]
        t[p + "self_attn.o_proj.weight"] = w["wo"][i]
        t[p + "post_attention_layernorm.weight"] = w["rms_ffn"][i]
        t[p + "mlp.gate_proj.weight"] = w["w1"][i]
        t[p + "mlp.down_proj.weight"] = w["w2"][i]
        t[p + "mlp.up_proj.weight"] = w["w3"][i]
    write_safetensors(os.path.join(d, "model.safetensors"), t)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": c["dim"],
              "intermediate_size": c["hidden_dim"], "num_hidden_layers": c["n_layers"],
              "num_attention_heads": c["n_heads"], "num_key_value_heads": c["n_kv_heads"],
              "head_dim": c["dim"] // c["n_heads"], "vocab_size": VOCAB, "max_position_embeddings": c["seq_len"],
              "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
              "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"}
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    files = {"config.json": config, "tokenizer.json": tokenizer_json(tokens),
             "tokenizer_config.json": {"add_bos_token": True, "add_eos_token": False, **special,
                                       "model_max_length": c["seq_len"], "tokenizer_class": "LlamaTokenizer",
                                       "legacy": True, "clean_up_tokenization_spaces": False},
             "special_tokens_map.json": special, "generation_config.json": {"bos_token_id": 1, "eos_token_id": 2}}
    for name, value in files.items():
        with open(os.path.join(d, name), "w", encoding="utf-8") as f:
            json.dump(value, f, indent=1, ensure_ascii=False)


# --- goldens ------------------------------------------------------------------------------------------
def write_golden(path, how, rows):
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps({"generated_by": f"{GENERATED_BY}; {how}"}) + "\n")
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_goldens(out):
    from reference_llama import GgufLlama
    from tokenizers import Tokenizer
    from tokenizer_strings import CURATED
    tok = Tokenizer.from_file(os.path.join(out, "hf", "tokenizer.json"))
    d = os.path.join(out, "golden")
    os.makedirs(d, exist_ok=True)
    texts = [s for s in CURATED if not any(m in s for m in ("<s>", "</s>", "<unk>"))] + PROMPTS
    write_golden(os.path.join(d, "tokenize.jsonl"), "Hugging Face tokenizers on hf/tokenizer.json",
                 [{"text": t, "ids": tok.encode(t).ids} for t in texts])
    model = GgufLlama(os.path.join(out, "tiny-spm.gguf"))
    greedy, margins = [], []
    for i, prompt in enumerate(PROMPTS):
        ids = tok.encode(prompt).ids
        (output, margin), = model.greedy([ids], CONFIG["seq_len"] - len(ids))
        stop, max_tokens = "length", len(output)
        if 2 in output:
            output, margin, stop = output[:output.index(2) + 1], margin[:output.index(2) + 1], "eos"
        near_tie = next((k for k, m in enumerate(margin) if m < MIN_MARGIN), None)
        if near_tie is not None:  # the golden stops before it: max_tokens ends the request there
            output, margin, stop, max_tokens = output[:near_tie], margin[:near_tie], "length", near_tie
        text_ids = [t for t in output if t != 2]
        full = tok.decode(ids + text_ids, skip_special_tokens=True)
        head = tok.decode(ids, skip_special_tokens=True)
        assert full.startswith(head), (full, head)
        name = f"tiny-{i:02d}"
        greedy.append({"id": name, "prompt": prompt, "prompt_ids": ids, "max_tokens": max_tokens,
                       "output_ids": output, "output_text": full[len(head):], "stop": stop})
        margins.append({"id": name, "min_margin": round(min(margin, default=0.0), 5),
                        "margins": [round(m, 5) for m in margin]})
    write_golden(os.path.join(d, "greedy.jsonl"),
                 "greedy, float64 numpy reference tests/e2e/reference_llama.py on tiny-spm.gguf", greedy)
    write_golden(os.path.join(d, "greedy-margins.jsonl"), "top-1 minus top-2 logit of that reference", margins)
    return greedy


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.split("\n\n")[1])
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    tokens, scores, types = vocabulary()
    w = weights()
    write_llama2c(out, w, tokens, scores)
    write_gguf(out, w, tokens, scores, types)
    write_hf(out, w, tokens)
    greedy = write_goldens(out)
    stops = sum(g["stop"] == "eos" for g in greedy)
    print(f"tiny-spm written to {out}: {len(greedy)} goldens, {stops} end on EOS")


if __name__ == "__main__":
    main()
