"""Cross-encoders end to end: a tiny random BERT with a sequence-classification head (BertForSequenceClassification,
1 label; config.json, model.safetensors and a WordPiece tokenizer.json with a TemplateProcessing pair template,
all written here) answers /v1/score and /v1/rerank lines with no --reranker flag. Each pair is one input
[CLS] a [SEP] b [SEP] with token type 1 on the second text (ids and type ids from the `tokenizers` package);
its score is the sigmoid of the classifier's logit (vLLM's and sentence-transformers' CrossEncoder's for one
label), or the logit itself when config.json says Identity, within 1e-4 of the float64 reference
(bert_reference.py with the head). Rerank order and top_n, usage; the scores are bit-identical under other
token budgets, a sequence cap and sequential mode. Bad lines (no documents, lists of unequal length, a pair
past the context, an embedding line to a cross-encoder) are error lines and the run goes on."""
import json
import math
import os
import shutil
import sys

import numpy as np

from common import Checks, need_modules, read_jsonl, run, tmpdir, write_jsonl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_models  # noqa: E402
from bert_reference import BertReference  # noqa: E402

(tokenizers,) = need_modules("tokenizers")
c = Checks()
work = tmpdir()
model_dir = os.path.join(work, "tiny-cross-encoder")
os.makedirs(model_dir)

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "cat", "cats", "dog", "sleep", "sleeps", "in", "on", "a", "box", "boxes", "sun", "where", "do",
         "stock", "market", "fell", "what", "is", "capital", "of", "france", "paris", "brazil", "city", "nap", "day",
         "all", ".", ",", "?", "!", "{", "}", "##s", "##ing"]
LETTERS = [chr(ord("a") + i) for i in range(26)]
VOCAB = SPECIALS + WORDS + LETTERS + ["##" + ch for ch in LETTERS]
DIM, HIDDEN, LAYERS, HEADS, CONTEXT = 32, 64, 2, 4, 48


def special(text, type_id):
    return {"SpecialToken": {"id": text, "type_id": type_id}}


def sequence(name, type_id):
    return {"Sequence": {"id": name, "type_id": type_id}}


def write_tokenizer():
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, t in enumerate(SPECIALS)]
    spec = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special("[CLS]", 0), sequence("A", 0), special("[SEP]", 0)],
            "pair": [special("[CLS]", 0), sequence("A", 0), special("[SEP]", 0), sequence("B", 1), special("[SEP]", 1)],
            "special_tokens": {t: {"id": t, "ids": [VOCAB.index(t)], "tokens": [t]} for t in ("[CLS]", "[SEP]")}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": {t: i for i, t in enumerate(VOCAB)}}}
    with open(os.path.join(model_dir, "tokenizer.json"), "w") as f:
        json.dump(spec, f, indent=1)


def write_config(**extra):
    config = {"architectures": ["BertForSequenceClassification"], "model_type": "bert", "hidden_size": DIM,
              "intermediate_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
              "vocab_size": len(VOCAB), "max_position_embeddings": CONTEXT, "type_vocab_size": 2,
              "layer_norm_eps": 1e-12, "hidden_act": "gelu", "pad_token_id": 0,
              "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}
    config.update(extra)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)


def write_weights():
    rng = np.random.default_rng(25)
    w = {}

    def put(name, *shape, scale=0.2, offset=0.0):
        w[name] = (offset + scale * rng.standard_normal(shape)).astype(np.float32)

    put("bert.embeddings.word_embeddings.weight", len(VOCAB), DIM, scale=0.5)
    put("bert.embeddings.position_embeddings.weight", CONTEXT, DIM, scale=0.2)
    put("bert.embeddings.token_type_embeddings.weight", 2, DIM, scale=0.5)  # type 1 differs: the types matter
    put("bert.embeddings.LayerNorm.weight", DIM, scale=0.1, offset=1.0)
    put("bert.embeddings.LayerNorm.bias", DIM, scale=0.1)
    tiny_models.put_encoder_layers(put, "bert.encoder.layer.", LAYERS, DIM, HIDDEN)
    put("bert.pooler.dense.weight", DIM, DIM, scale=0.3)
    put("bert.pooler.dense.bias", DIM, scale=0.1)
    put("classifier.weight", 1, DIM, scale=0.6)  # logits of a few units: sigmoids spread over (0, 1)
    put("classifier.bias", 1, scale=0.1)
    tiny_models.write_safetensors(os.path.join(model_dir, "model.safetensors"), w)


write_tokenizer()
write_config()
write_weights()
reference = BertReference(model_dir)
tok = tokenizers.Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))


def expected(query, document, identity=False):
    """(score, tokens) of one pair by the float64 reference."""
    enc = tok.encode(query, document)
    logit = float(reference.classify(enc.ids, enc.type_ids)[0])
    return (logit if identity else 1.0 / (1.0 + math.exp(-logit))), len(enc.ids)


query = "where do cats sleep?"
docs = ["Cats sleep in boxes.", "The stock market fell.", "a {query} in braces", "Cats nap in the sun all day!",
        "what is the capital of France? Paris."]
line = lambda cid, url, body: {"custom_id": cid, "method": "POST", "url": url, "body": dict({"model": "x"}, **body)}
rows = [
    line("one", "/v1/score", {"text_1": query, "text_2": docs[0]}),
    line("one-many", "/v1/score", {"text_1": query, "text_2": docs}),
    line("pairs", "/v1/score", {"text_1": ["the cat", "paris"], "text_2": ["a dog", "capital of france"]}),
    line("rerank", "/v1/rerank", {"query": query, "documents": docs, "top_n": 3}),
    line("rerank-all", "/v1/rerank", {"query": query, "documents": docs}),
    line("no-docs", "/v1/rerank", {"query": query, "documents": []}),
    line("unequal", "/v1/score", {"text_1": ["a", "b"], "text_2": ["c", "d", "e"]}),
    line("too-long", "/v1/score", {"text_1": query, "text_2": " ".join(["cat"] * CONTEXT)}),
    line("embed", "/v1/embeddings", {"input": "the cat"}),
]
prompts = os.path.join(work, "in.jsonl")
write_jsonl(prompts, rows)
MODEL = ["--model", model_dir, "--device", "cpu", "--quiet"]


def results(*extra):
    out = os.path.join(work, "out.jsonl")
    run(["run", prompts, "-o", out] + MODEL + list(extra), expect_rc=2)  # 2: some lines are error lines
    return {r["custom_id"]: r for r in read_jsonl(out)}


def scores_of(got, key):
    body = got[key]["response"]["body"]
    if "data" in body:
        return [d["score"] for d in body["data"]]
    return [(r["index"], r["relevance_score"]) for r in body["results"]]


got = results()
for key, pairs in [("one", [(query, docs[0])]), ("one-many", [(query, d) for d in docs]),
                   ("pairs", [("the cat", "a dog"), ("paris", "capital of france")])]:
    r = got[key]
    c.check(r["error"] is None and r["response"]["status_code"] == 200, f"{key}: {r}")
    if r["error"] is not None:
        continue
    body = r["response"]["body"]
    want = [expected(q, d) for q, d in pairs]
    c.check(body["object"] == "list" and [d["index"] for d in body["data"]] == list(range(len(pairs))),
            f"{key}: body shape {body}")
    for (score, _), d in zip(want, body["data"]):
        c.check(d["object"] == "score" and abs(d["score"] - score) < 1e-4, f"{key}: score {d['score']} != {score:.6f}")
    tokens = sum(n for _, n in want)
    c.check(body["usage"]["prompt_tokens"] == tokens, f"{key}: usage {body['usage']} != {tokens} tokens")
print(f"score lines: {len(docs) + 3} pairs checked against the float64 reference")

want = [expected(query, d)[0] for d in docs]
order = sorted(range(len(docs)), key=lambda i: -want[i])
c.check(len(set(round(s, 3) for s in want)) == len(docs), f"the documents' scores are too close to rank: {want}")
for key, top in [("rerank", 3), ("rerank-all", len(docs))]:
    r = got[key]
    c.check(r["error"] is None, f"{key}: {r['error']}")
    if r["error"] is not None:
        continue
    res = r["response"]["body"]["results"]
    c.check([x["index"] for x in res] == order[:top], f"{key}: order {[x['index'] for x in res]} != {order[:top]}")
    for x in res:
        c.check(abs(x["relevance_score"] - want[x["index"]]) < 1e-4 and x["document"]["text"] == docs[x["index"]],
                f"{key}: result {x}")
print(f"rerank: order {order}, top_n checked")

BAD = [("no-docs", "documents"), ("unequal", "text_1"), ("too-long", "context"), ("embed", "cross-encoder")]
for key, words in BAD:
    r = got[key]
    c.check(r["response"]["status_code"] == 400 and r["error"] is not None and words in r["error"]["message"],
            f"{key}: {r['error']}")
    if r["error"] is not None:
        print(f"  {key}: {r['error']['message']}")

# A score never depends on what else is in the step: other budgets, one sequence per step, sequential mode.
base = {k: scores_of(got, k) for k in ("one", "one-many", "pairs", "rerank", "rerank-all")}
for extra in (["--max-num-batched-tokens", str(CONTEXT)], ["--max-num-seqs", "1"], ["--mode", "sequential"],
              ["--threads", "1"]):
    other = results(*extra)
    same = all(scores_of(other, k) == v for k, v in base.items())
    c.check(same, f"{' '.join(extra)}: scores differ from the default run")
print("scores bit-identical across token budgets, --max-num-seqs 1, sequential mode, 1 thread")

# sentence-transformers' activation_fn Identity: the raw logit is the score.
write_config(sentence_transformers={"activation_fn": "torch.nn.modules.linear.Identity"})
got = results()
if got["one-many"]["error"] is None:
    logits = [d["score"] for d in got["one-many"]["response"]["body"]["data"]]
    for d, s in zip(docs, logits):
        want_logit = expected(query, d, identity=True)[0]
        c.check(abs(s - want_logit) < 1e-4, f"Identity activation: {s} != logit {want_logit:.6f}")
else:
    c.check(False, f"Identity activation: {got['one-many']['error']}")
print("activation_fn Identity: raw logits checked")

shutil.rmtree(work, ignore_errors=True)
c.done()
