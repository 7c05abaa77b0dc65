"""A tiny seeded XLM-RoBERTa written as a Hugging Face directory: a real Unigram tokenizer.json written by the
`tokenizers` package from a vocabulary counted here over a small multilingual corpus (the package's trainer
is not repeatable from run to run, so the vocabulary is made here: every character of the normalised
corpus, then its most frequent substrings of up to 8 characters, scored by log frequency), with an XLM-R-style pipeline (a Precompiled normalizer
whose charsmap is built here, then Strip right and Replace(" {2,}"), Metaspace, the "<s> A </s>" and
"<s> A </s></s> B </s>" templates, <mask> appended with lstrip as the converter does); config.json
(XLMRobertaModel or XLMRobertaForSequenceClassification, pad_token_id 1, positions from 2); model.safetensors
with random seeded weights (the base model at the top, or under "roberta." with classifier.dense and
classifier.out_proj); sentence-transformers pooling files.

The charsmap is a Darts-clone double-array trie (a little-endian uint32 byte size, the uint32 units, then
NUL-terminated replacements) over a small NFKC-like map: fullwidth ASCII, ligatures, compatibility digits,
spaces and controls, and two decomposed sequences. It is built from the format's definition; the test
checks that the `tokenizers` package reads it as meant."""
import json
import os
import struct

import numpy as np

import tiny_models

CORPUS = [
    "The quick brown fox jumps over the lazy dog.", "Cats sleep in boxes and dogs sleep on the sofa.",
    "Where do cats sleep during the day?", "The stock market fell sharply on Monday.",
    "Paris is the capital of France.", "Berlin ist die Hauptstadt von Deutschland.",
    "Le chat dort dans la boîte.", "El perro come en la cocina.", "Café, naïve, résumé, Ångström.",
    "Москва — столица России.", "東京は日本の首都です。", "北京是中国的首都。", "서울은 한국의 수도입니다.",
    "Embeddings map sentences to vectors; similar meanings land close together.",
    "def f(x): return x * 2", "Numbers: 3.14159, 2024-01-01, 1,000,000.", "Emoji 🙂 and symbols ✓ → ★.",
]
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]
DIM, HIDDEN, LAYERS, HEADS, CONTEXT = 32, 64, 2, 4, 48  # CONTEXT positions after the two offset rows
PAD = 1


def charsmap_rules():
    rules = {chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)}  # fullwidth ASCII
    rules.update({"\ufb01": "fi", "\ufb02": "fl", "\u2460": "1", "\u2122": "TM", "\u2026": "...", "\u00b2": "2",
                  "\u00a0": " ", "\u3000": " ", "\t": " ", "\n": " ", "\r": " ", "\u200b": "", "\ufeff": "",
                  "\u212b": "\u00c5", "\uff76": "\u30ab", "e\u0301": "\u00e9", "a\u0308": "\u00e4"})
    return rules


def darts_charsmap(rules):
    """The precompiled_charsmap bytes of rules {key: replacement}."""
    pool, values = bytearray(), {}
    for key, replacement in sorted(rules.items()):
        values[key.encode()] = len(pool)
        pool += replacement.encode() + b"\0"
    trie = {}
    for key, value in values.items():
        node = trie
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = value
    units, bases = {0: 0}, set()
    queue = [(trie, 0)]
    while queue:
        node, pos = queue.pop(0)
        labels = sorted(b for b in node if b is not None)
        needs = ([0] if None in node else []) + labels
        base = 1
        while base in bases or any((base ^ n) in units for n in needs):
            base += 1
        bases.add(base)
        offset = pos ^ base
        assert offset < (1 << 21)
        units[pos] |= offset << 10
        if None in node:
            units[base] = node[None] | (1 << 31)
        for b in labels:
            units[base ^ b] = b | ((1 << 8) if None in node[b] else 0)
            queue.append((node[b], base ^ b))
    array = [units.get(i, 0) for i in range(max(units) + 1)]
    return struct.pack("<I", 4 * len(array)) + struct.pack(f"<{len(array)}I", *array) + bytes(pool)


def vocabulary(normalizer, pre_tokenizer, size=300, max_piece=8):
    """[(piece, score)]: the specials (score 0), every character of the normalised, pre-tokenised corpus,
    then the most frequent longer substrings (ties by the piece), each scored log(count / total)."""
    counts = {}
    for line in CORPUS:
        for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(line)):
            for i in range(len(word)):
                for j in range(i + 1, min(len(word), i + max_piece) + 1):
                    counts[word[i:j]] = counts.get(word[i:j], 0) + 1
    chars = sorted(p for p in counts if len(p) == 1)
    longer = sorted((p for p in counts if len(p) > 1 and counts[p] > 1), key=lambda p: (-counts[p], p))
    pieces = chars + longer[:size - len(SPECIALS) - len(chars)]
    total = sum(counts[p] for p in pieces)
    return [(s, 0.0) for s in SPECIALS] + [(p, float(np.log(counts[p] / total))) for p in pieces]


def write_tokenizer(directory):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    charsmap = darts_charsmap(charsmap_rules())
    normalizer = normalizers.Sequence([normalizers.Precompiled(charsmap), normalizers.Strip(left=False, right=True),
                                       normalizers.Replace(Regex(" {2,}"), "\u2581")])
    pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok = Tokenizer(models.Unigram(vocabulary(normalizer, pre_tokenizer), unk_id=SPECIALS.index("<unk>")))
    tok.normalizer, tok.pre_tokenizer = normalizer, pre_tokenizer
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                       special_tokens=[("<s>", 0), ("</s>", 2)])
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    path = os.path.join(directory, "tokenizer.json")
    tok.save(path)
    return tok.get_vocab_size()


def write_config(directory, vocab, classifier=False, **extra):
    config = {"architectures": ["XLMRobertaForSequenceClassification" if classifier else "XLMRobertaModel"],
              "model_type": "xlm-roberta", "hidden_size": DIM, "intermediate_size": HIDDEN,
              "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "vocab_size": vocab,
              "max_position_embeddings": CONTEXT + PAD + 1, "type_vocab_size": 1, "layer_norm_eps": 1e-5,
              "hidden_act": "gelu", "pad_token_id": PAD, "bos_token_id": 0, "eos_token_id": 2}
    if classifier:
        config.update({"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}})
    config.update(extra)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=1)


def write_pooling(directory, pooling="mean"):
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
    with open(os.path.join(directory, "modules.json"), "w") as f:
        json.dump(modules, f)
    os.makedirs(os.path.join(directory, "1_Pooling"), exist_ok=True)
    with open(os.path.join(directory, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": DIM, "pooling_mode_cls_token": pooling == "cls",
                   "pooling_mode_mean_tokens": pooling == "mean"}, f)


def weights(vocab, classifier=False, seed=25):
    rng = np.random.default_rng(seed)
    prefix = "roberta." if classifier else ""
    w = {}

    def put(name, *shape, scale=0.2, offset=0.0):
        w[name] = (offset + scale * rng.standard_normal(shape)).astype(np.float32)

    put(prefix + "embeddings.word_embeddings.weight", vocab, DIM, scale=0.5)
    put(prefix + "embeddings.position_embeddings.weight", CONTEXT + PAD + 1, DIM, scale=0.5)  # positions matter
    put(prefix + "embeddings.token_type_embeddings.weight", 1, DIM, scale=0.2)
    put(prefix + "embeddings.LayerNorm.weight", DIM, scale=0.1, offset=1.0)
    put(prefix + "embeddings.LayerNorm.bias", DIM, scale=0.1)
    tiny_models.put_encoder_layers(put, prefix + "encoder.layer.", LAYERS, DIM, HIDDEN)
    if classifier:
        put("classifier.dense.weight", DIM, DIM, scale=0.3)
        put("classifier.dense.bias", DIM, scale=0.1)
        put("classifier.out_proj.weight", 1, DIM, scale=0.6)  # logits of a few units: sigmoids spread out
        put("classifier.out_proj.bias", 1, scale=0.1)
    else:
        put("pooler.dense.weight", DIM, DIM, scale=0.3)  # XLMRobertaModel's pooler: stored, unused
        put("pooler.dense.bias", DIM, scale=0.1)
    return w


def write_model(directory, classifier=False, pooling="mean"):
    """Writes the whole directory; returns the vocabulary size."""
    os.makedirs(directory, exist_ok=True)
    vocab = write_tokenizer(directory)
    write_config(directory, vocab, classifier)
    if not classifier:
        write_pooling(directory, pooling)
    tiny_models.write_safetensors(os.path.join(directory, "model.safetensors"), weights(vocab, classifier))
    return vocab
