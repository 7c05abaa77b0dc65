"""Decoder rerankers (--reranker qwen3) end to end: /v1/score and /v1/rerank lines on a tiny random Qwen3
whose byte-level tokenizer has Qwen's <|im_start|> / <|im_end|> / <think> / </think> and plain "yes" and
"no" tokens. Each pair's score equals softmax over the "yes" and "no" logits at the last position of the
model card's prompt, computed by the float64 reference (family_reference.py) on ids from the `tokenizers`
package; 1:1, 1:N and N:N score lines, rerank order and top_n, vLLM's body shapes, usage; the scores do
not depend on the token budget (chunked prefill), the scheduling mode or the prefix cache; a generation
line in the same file runs beside them; bad lines (no documents, lists of unequal length, no --reranker)
are error lines and the run goes on."""
import json
import math
import os
import sys

import numpy as np

from common import Checks, need_modules, read_jsonl, run, tiny_spm_gguf, tmpdir, write_jsonl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import family_reference as reference  # noqa: E402
import tiny_models  # noqa: E402

(tokenizers,) = need_modules("tokenizers")
c = Checks()
work = tmpdir()
model_dir = os.path.join(work, "qwen3-reranker")

# The tiny Qwen3 with fillers renamed to the reranker's tokens; the "yes" and "no" rows of the output head
# scaled up so that the documents' scores lie far enough apart to rank.
tokens = tiny_models.byte_tokens()
named = {"<|im_start|>": 259, "<|im_end|>": 260, "<think>": 261, "</think>": 262, "yes": 263, "no": 264}
for text, i in named.items():
    tokens[i] = text
weights = tiny_models.random_weights("qwen3")
for i in (named["yes"], named["no"]):
    weights["lm_head.weight"][i] *= 6.0
tiny_models.write_hf(model_dir, "qwen3", weights)
with open(os.path.join(model_dir, "config.json")) as f:
    config = json.load(f)
config["max_position_embeddings"] = 1024  # the template alone is about 280 of these byte-level tokens
with open(os.path.join(model_dir, "config.json"), "w") as f:
    json.dump(config, f, indent=1)
added = {tiny_models.BOS: True, tiny_models.EOS: True, 259: True, 260: True, 261: False, 262: False}
tiny_models.write_tokenizer(model_dir, tokens, added, ["Ġ t"])
model = reference.load_hf(model_dir)
with open(os.path.join(model_dir, "tokenizer.json")) as f:
    spec = json.load(f)
spec["decoder"] = dict(spec["pre_tokenizer"])  # the Python package wants the ByteLevel decoder's fields spelled out
tok = tokenizers.Tokenizer.from_str(json.dumps(spec))

PREFIX = ('<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct '
          'provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n')
SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"


def prompt_ids(query, document):
    text = f"{PREFIX}<Instruct>: {INSTRUCTION}\n<Query>: {query}\n<Document>: {document}{SUFFIX}"
    return tok.encode(text, add_special_tokens=False).ids


def expected_score(query, document):
    ids = prompt_ids(query, document)
    hidden = reference.forward(model, np.array(ids), np.zeros(len(ids), int), np.arange(len(ids), dtype=np.float64),
                               [[None] * model.n_layers], [-1])
    row = reference.logits(model, hidden)[0]
    return 1.0 / (1.0 + math.exp(row[named["no"]] - row[named["yes"]])), len(ids)


query = "where do cats sleep"
docs = ["Cats sleep in boxes.", "The stock market fell.", "a {query} in braces", "Cats nap in the sun all day."]
line = lambda cid, url, body: {"custom_id": cid, "method": "POST", "url": url, "body": dict({"model": "r"}, **body)}
rows = [
    line("one", "/v1/score", {"text_1": query, "text_2": docs[0]}),
    line("one-many", "/v1/score", {"text_1": query, "text_2": docs}),
    line("pairs", "/v1/score", {"text_1": ["q one", "q two"], "text_2": ["d one", "d two"]}),
    line("rerank", "/v1/rerank", {"query": query, "documents": docs, "top_n": 3}),
    line("rerank-all", "/v1/rerank", {"query": query, "documents": docs}),
    line("gen", "/v1/completions", {"prompt": "Cats", "max_tokens": 5, "temperature": 0}),
    line("no-docs", "/v1/rerank", {"query": query, "documents": []}),
    line("unequal", "/v1/score", {"text_1": ["a", "b"], "text_2": ["c", "d", "e"]}),
]
prompts, out = os.path.join(work, "in.jsonl"), os.path.join(work, "out.jsonl")
write_jsonl(prompts, rows)
MODEL = ["--model", model_dir, "--device", "cpu", "--quiet", "--reranker", "qwen3"]


def run_scores(extra):
    run(["run", prompts, "-o", out] + MODEL + extra, expect_rc=2)
    return {r["custom_id"]: r for r in read_jsonl(out)}


got = run_scores([])
TOL = 1e-4  # float32 engine against the float64 reference

one = got["one"]["response"]["body"]
want, num_tokens = expected_score(query, docs[0])
c.check(set(one) == {"id", "object", "created", "model", "data", "usage"} and one["object"] == "list", f"score body {one}")
c.check(one["data"][0]["object"] == "score" and abs(one["data"][0]["score"] - want) < TOL,
        f"score {one['data'][0]['score']} vs reference {want}")
c.check(one["usage"]["prompt_tokens"] == num_tokens == one["usage"]["total_tokens"], f"usage {one['usage']}")

expected = [expected_score(query, d) for d in docs]
many = got["one-many"]["response"]["body"]["data"]
c.check([d["index"] for d in many] == list(range(len(docs))), "1:N indices")
for d, (want, _) in zip(many, expected):
    c.check(abs(d["score"] - want) < TOL, f"1:N score {d['score']} vs {want}")
ranked = sorted(w for w, _ in expected)
c.check(min(b - a for a, b in zip(ranked, ranked[1:])) > 10 * TOL, f"reference scores too close to rank: {expected}")
usage = got["one-many"]["response"]["body"]["usage"]
c.check(usage["prompt_tokens"] == sum(n for _, n in expected), f"1:N usage {usage}")

pairs = got["pairs"]["response"]["body"]["data"]
for d, (q, doc) in zip(pairs, [("q one", "d one"), ("q two", "d two")]):
    c.check(abs(d["score"] - expected_score(q, doc)[0]) < TOL, f"N:N score of {q!r}, {doc!r}")

order = sorted(range(len(docs)), key=lambda i: -expected[i][0])
for key, keep in [("rerank", 3), ("rerank-all", len(docs))]:
    body = got[key]["response"]["body"]
    c.check(set(body) == {"id", "model", "usage", "results"}, f"{key} body keys {sorted(body)}")
    results = body["results"]
    c.check([r["index"] for r in results] == order[:keep], f"{key} order {[r['index'] for r in results]} vs {order[:keep]}")
    c.check(all(r["document"] == {"text": docs[r["index"]]} and abs(r["relevance_score"] - expected[r["index"]][0]) < TOL
                for r in results), f"{key} results {results}")
    c.check(body["usage"]["prompt_tokens"] == sum(n for _, n in expected), f"{key} usage counts every document")

gen = got["gen"]["response"]["body"]
c.check(gen["object"] == "text_completion" and gen["usage"]["completion_tokens"] == 5, f"generation beside scores {gen}")
for key, words in [("no-docs", "body.documents"), ("unequal", "text_2")]:
    c.check(got[key]["response"]["status_code"] == 400 and words in got[key]["error"]["message"], f"{key}: {got[key]['error']}")

# The same scores whatever the schedule: chunked prefill with a small budget, static and sequential
# modes, no prefix cache (the documents share the query's prefix).
scores = lambda g: [d["score"] for k in ("one", "one-many", "pairs") for d in g[k]["response"]["body"]["data"]]
base = scores(got)
for extra in (["--max-num-batched-tokens", "16"], ["--mode", "static"], ["--mode", "sequential"],
              ["--no-enable-prefix-caching"], ["--max-num-seqs", "2", "--max-num-batched-tokens", "40"]):
    other = scores(run_scores(extra))
    c.check(max(abs(a - b) for a, b in zip(base, other)) < 1e-5, f"{extra}: scores differ from the default run")

# Without --reranker a score line is an error line; the other lines still run.
run(["run", prompts, "-o", out, "--model", model_dir, "--device", "cpu", "--quiet"], expect_rc=2)
plain = {r["custom_id"]: r for r in read_jsonl(out)}
c.check("--reranker" in plain["one"]["error"]["message"], f"no reranker: {plain['one']['error']}")
c.check(plain["gen"]["error"] is None, "the generation line runs without --reranker")

# A model whose vocabulary has no "yes" token, and an unknown reranker: exit 1 before any request.
proc = run(["run", prompts, "-o", out, "--model", tiny_spm_gguf(), "--device", "cpu", "--quiet", "--reranker", "qwen3"],
           expect_rc=1)
c.check('no token "yes"' in proc.stderr, f"missing answer token: {proc.stderr!r}")
proc = run(["run", prompts, "-o", out] + MODEL[:-1] + ["bge"], expect_rc=1)
c.check("not a reranker" in proc.stderr, f"unknown reranker: {proc.stderr!r}")
c.done()
