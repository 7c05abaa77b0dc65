"""Bi-encoder scores: all-MiniLM-L6-v2 (an embedding model, no classification head) answers /v1/score with the
cosine of the two texts' embeddings, as vLLM does, and /v1/rerank with the documents ordered by it. Each score
is within 1e-4 of the cosine of the float64 reference embeddings (bert_reference.py, tokens from the
`tokenizers` package); 1:1, 1:N and N:N lines, usage counts every text's tokens once; bad lines (no
documents, lists of unequal length) are error lines and the run goes on."""
import os
import shutil

from common import Checks, need_minilm, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy", "tokenizers")
import numpy as np  # noqa: E402
from bert_reference import BertReference  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

c = Checks()
work = tmpdir()
model = need_minilm()
reference = BertReference(model)
tokenizer = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
tokenizer.no_truncation()
tokenizer.no_padding()
memo = {}


def embedding(text):
    if text not in memo:
        ids = tokenizer.encode(text).ids
        memo[text] = (reference.embed(ids), len(ids))
    return memo[text]


def expected(a, b):
    return float(embedding(a)[0] @ embedding(b)[0])  # unit vectors: the dot product is the cosine


query = "Where do cats like to sleep?"
docs = ["Cats often sleep in cardboard boxes.", "The stock market fell sharply on Monday.",
        "A kitten naps on the warm windowsill.", "Paris is the capital of France."]
line = lambda cid, url, body: {"custom_id": cid, "method": "POST", "url": url, "body": dict({"model": "m"}, **body)}
rows = [
    line("one", "/v1/score", {"text_1": query, "text_2": docs[0]}),
    line("one-many", "/v1/score", {"text_1": query, "text_2": docs}),
    line("pairs", "/v1/score", {"text_1": ["A man is eating food.", "The weather is cold."],
                                "text_2": ["Someone eats a meal.", "A man is eating food."]}),
    line("rerank", "/v1/rerank", {"query": query, "documents": docs, "top_n": 2}),
    line("no-docs", "/v1/rerank", {"query": query, "documents": []}),
    line("unequal", "/v1/score", {"text_1": ["a", "b"], "text_2": ["c", "d", "e"]}),
]
prompts, out = os.path.join(work, "in.jsonl"), os.path.join(work, "out.jsonl")
write_jsonl(prompts, rows)
run(["run", prompts, "-o", out, "--model", model, "--device", "cpu", "--quiet"], expect_rc=2)
got = {r["custom_id"]: r for r in read_jsonl(out)}

for key, pairs, texts in [("one", [(query, docs[0])], [query, docs[0]]),
                          ("one-many", [(query, d) for d in docs], [query] + docs),
                          ("pairs", list(zip(rows[2]["body"]["text_1"], rows[2]["body"]["text_2"])),
                           rows[2]["body"]["text_1"] + rows[2]["body"]["text_2"])]:
    r = got[key]
    c.check(r["error"] is None, f"{key}: {r['error']}")
    if r["error"] is not None:
        continue
    body = r["response"]["body"]
    for (a, b), d in zip(pairs, body["data"]):
        want = expected(a, b)
        c.check(abs(d["score"] - want) < 1e-4, f"{key}: cosine {d['score']} != reference {want:.6f} ({a!r}, {b!r})")
    c.check(len(body["data"]) == len(pairs), f"{key}: {len(body['data'])} scores for {len(pairs)} pairs")
    tokens = sum(embedding(t)[1] for t in texts)
    c.check(body["usage"]["prompt_tokens"] == tokens, f"{key}: usage {body['usage']} != {tokens} tokens")
print("score lines: cosines checked against the float64 reference embeddings")

want = [expected(query, d) for d in docs]
order = sorted(range(len(docs)), key=lambda i: -want[i])
r = got["rerank"]
c.check(r["error"] is None, f"rerank: {r['error']}")
if r["error"] is None:
    res = r["response"]["body"]["results"]
    c.check([x["index"] for x in res] == order[:2], f"rerank: order {[x['index'] for x in res]} != {order[:2]}")
    for x in res:
        c.check(abs(x["relevance_score"] - want[x["index"]]) < 1e-4, f"rerank: {x}")
print(f"rerank by cosine: order {order}")

for key, words in [("no-docs", "documents"), ("unequal", "text_1")]:
    c.check(got[key]["error"] is not None and words in got[key]["error"]["message"], f"{key}: {got[key]['error']}")

# A text too long for the step names its field (the query, documents[i], text_1 or text_2[i]), never an
# input index of the pairs' embeddings.
long_text = " ".join(["word"] * 40)
rows = [line("doc0", "/v1/rerank", {"query": "q", "documents": [long_text, "b"]}),
        line("query", "/v1/rerank", {"query": long_text, "documents": ["a"]}),
        line("text_2", "/v1/score", {"text_1": "q", "text_2": ["a", long_text]}),
        line("text_1", "/v1/score", {"text_1": ["a", long_text], "text_2": ["b", "c"]})]
write_jsonl(prompts, rows)
run(["run", prompts, "-o", out, "--model", model, "--device", "cpu", "--quiet", "--max-num-batched-tokens", "16"],
    expect_rc=2)
got = {r["custom_id"]: r for r in read_jsonl(out)}
for key, field in [("doc0", "body.documents[0] has 42 tokens"), ("query", "body.query has 42 tokens"),
                   ("text_2", "body.text_2[1] has 42 tokens"), ("text_1", "body.text_1[1] has 42 tokens")]:
    message = (got[key]["error"] or {}).get("message", "")
    c.check(field in message and "--max-num-batched-tokens 16" in message, f"{key}: {message!r} lacks {field!r}")

shutil.rmtree(work, ignore_errors=True)
c.done()
