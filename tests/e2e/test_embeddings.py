"""all-MiniLM-L6-v2 (BERT encoder, sentence-transformers mean pooling and Normalize, max_seq_length 256) as an
embedding model: cbatch's embeddings equal the independent float64 reference of bert_reference.py (tokens
from the `tokenizers` package) at cosine >= 0.9999 on varied sentences, one of them past 256 tokens
(truncated to 256 with [CLS] and [SEP] kept, the dropped count reported); --pooling cls and
truncate_prompt_tokens likewise; token id inputs. An embedding does not depend on what else is in the step:
the same file under other token budgets, sequence caps, sequential mode and thread counts gives
bit-identical vectors. A mixed file of bad and good lines gives an error line for each bad one and the
right vector for each good one."""
import base64
import json
import os
import shutil

from common import Checks, need_minilm, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy", "tokenizers")
import numpy as np  # noqa: E402
from bert_reference import BertReference  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A man is eating food.",
    "Embeddings map sentences to vectors; similar meanings land close together.",
    "Café naïve résumé: accents are stripped by the uncased tokenizer!",
    "中文句子和 English words mixed, with numbers 3.14159 and 2024-01-01.",
    "x",
    "How many tokens does a WordPiece tokenizer produce for unbelievably antidisestablishmentarian words?",
    " ".join(f"word{i} and the sentence goes on" for i in range(60)),  # ~400 tokens: truncated to 256
]

c = Checks()
work = tmpdir()
model = need_minilm()
reference = BertReference(model)
tokenizer = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
tokenizer.no_truncation()
tokenizer.no_padding()
CPU = ["--device", "cpu", "--quiet"]


def cosine(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def cbatch_rows(lines, *extra, model_dir=model, expect_rc=0):
    """Output lines of a run (exit status 2: some lines failed)."""
    path = os.path.join(work, "in.jsonl")
    out = os.path.join(work, "out.jsonl")
    write_jsonl(path, lines)
    run(["run", path, "--model", model_dir, "-o", out, "--ordered"] + CPU + list(extra), expect_rc=expect_rc)
    return read_jsonl(out)


def truncated_ids(text, limit):
    ids = tokenizer.encode(text).ids
    return ids if len(ids) <= limit else ids[:limit - 1] + [ids[-1]], max(0, len(ids) - limit)


def check_against_reference(label, rows, cases, pooling="mean"):
    """cases: (id, ids the reference embeds, dropped token count)."""
    got = {r["id"]: r for r in rows}
    for key, ids, dropped in cases:
        r = got.get(key)
        c.check(r is not None and "embedding" in r, f"{label} {key}: no embedding line ({r})")
        if r is None or "embedding" not in r:
            continue
        want = reference.embed(ids, pooling=pooling)
        cos = cosine(r["embedding"], want)
        c.check(len(r["embedding"]) == 384, f"{label} {key}: {len(r['embedding'])} values, want 384")
        c.check(cos >= 0.9999, f"{label} {key}: cosine {cos:.7f} with the float64 reference")
        c.check(abs(np.linalg.norm(r["embedding"]) - 1.0) < 1e-5, f"{label} {key}: not unit length")
        c.check(r["prompt_tokens"] == len(ids), f"{label} {key}: prompt_tokens {r['prompt_tokens']} != {len(ids)}")
        c.check(r["truncated_tokens"] == dropped, f"{label} {key}: truncated_tokens {r['truncated_tokens']} != {dropped}")
    print(f"{label}: {len(cases)} embeddings checked against the float64 reference")


# Sentences, mean pooling (the model's), truncation to max_seq_length 256.
lines = [{"id": f"s{i}", "input": s} for i, s in enumerate(SENTENCES)]
cases = []
for i, s in enumerate(SENTENCES):
    ids, dropped = truncated_ids(s, 256)
    cases.append((f"s{i}", ids, dropped))
c.check(cases[-1][2] > 100, f"the long sentence has {cases[-1][2]} tokens past 256")
rows = cbatch_rows(lines)
check_against_reference("mean pooling", rows, cases)
baseline = {r["id"]: r["embedding"] for r in rows}

# --pooling cls, truncate_prompt_tokens, and token id inputs.
rows = cbatch_rows(lines[:3], "--pooling", "cls")
check_against_reference("--pooling cls", rows, cases[:3], pooling="cls")
short = [{"id": "t", "input": SENTENCES[2], "truncate_prompt_tokens": 8},
         {"id": "ids", "input": tokenizer.encode(SENTENCES[1]).ids}]
rows = cbatch_rows(short)
check_against_reference("truncate_prompt_tokens / ids", rows,
                        [("t",) + truncated_ids(SENTENCES[2], 8), ("ids", tokenizer.encode(SENTENCES[1]).ids, 0)])
# truncate_prompt_tokens counts the special tokens, which are kept, as a Hugging Face tokenizer's max_length
# does (vLLM passes it as that): 3 keeps [CLS], one token of the text and [SEP]; 1 and 2 keep none of the
# text and are error lines that say so.
tokenizer.enable_truncation(3)
hf_ids = tokenizer.encode(SENTENCES[2]).ids
tokenizer.no_truncation()
rows = cbatch_rows([{"id": f"t{k}", "input": SENTENCES[2], "truncate_prompt_tokens": k} for k in (1, 2, 3)],
                   expect_rc=2)
check_against_reference("truncate_prompt_tokens 3", [r for r in rows if r["id"] == "t3"],
                        [("t3", hf_ids, len(tokenizer.encode(SENTENCES[2]).ids) - 3)])
for r in rows[:2]:
    message = (r.get("error") or {}).get("message", "")
    c.check(f"truncate_prompt_tokens {r['id'][1:]} keeps none of the text" in message and "at least 3" in message,
            f"{r['id']}: {message!r}")

# Invariance: other budgets, caps, modes and threads give the same bits.
for extra in (["--max-num-batched-tokens", "300"], ["--max-num-batched-tokens", "256", "--max-num-seqs", "2"],
              ["--mode", "sequential"], ["--threads", "1"], ["--threads", "2", "--max-num-seqs", "3"]):
    rows = cbatch_rows(lines, *extra)
    same = sum(r["embedding"] == baseline[r["id"]] for r in rows)
    c.check(same == len(lines), f"{' '.join(extra)}: {same}/{len(lines)} embeddings bit-identical to the first run")
    print(f"{' '.join(extra)}: {same}/{len(lines)} embeddings bit-identical")

# Bad lines among good ones: an error line each, the run goes on, the good lines are right.
no_pooling = os.path.join(work, "no-pooling")
os.makedirs(no_pooling)
for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
    os.symlink(os.path.join(os.path.abspath(model), name), os.path.join(no_pooling, name))
mixed = [
    {"id": "good1", "input": SENTENCES[0]},
    {"id": "empty", "input": ""},
    {"id": "empty-ids", "input": []},
    {"id": "vocab", "input": [101, 30522, 102]},
    {"id": "negative", "input": [101, -1, 102]},
    {"id": "generate", "prompt": "a prompt for a generation model"},
    {"id": "both", "input": "x", "prompt": "y"},
    {"id": "too-long-trunc", "input": "x", "truncate_prompt_tokens": 513},
    {"id": "bad-trunc", "input": "x", "truncate_prompt_tokens": 0},
    {"id": "good2", "input": SENTENCES[1]},
]
rows = cbatch_rows(mixed, expect_rc=2)
got = {r["id"]: r for r in rows}
c.check(len(rows) == len(mixed), f"{len(rows)} output lines for {len(mixed)} input lines")
for line in mixed:
    r = got.get(line["id"], {})
    if line["id"].startswith("good"):
        c.check(r.get("embedding") == baseline["s0" if line["id"] == "good1" else "s1"],
                f"mixed file: {line['id']} differs from its embedding in a file of good lines ({r})")
    else:
        c.check("error" in r and "embedding" not in r, f"mixed file: {line['id']} gave no error line ({r})")
        if "error" in r:
            print(f"  {line['id']}: {r['error']['message']}")
# A step budget below a prompt: an error line for it, not a chunked (wrong) embedding.
rows = cbatch_rows([{"id": "long", "input": SENTENCES[-1]}, {"id": "short", "input": SENTENCES[5]}],
                   "--max-num-batched-tokens", "64", expect_rc=2)
got = {r["id"]: r for r in rows}
c.check("error" in got.get("long", {}) and "budget" in got["long"]["error"]["message"],
        f"a prompt over the step budget gives an error line ({got.get('long')})")
c.check(got.get("short", {}).get("embedding") == baseline["s5"], "the short line beside it is unchanged")
# No pooling information (no modules.json): an error line, unless --pooling names one.
rows = cbatch_rows([{"id": "np", "input": SENTENCES[0]}], model_dir=no_pooling, expect_rc=2)
c.check("error" in rows[0] and "pooling" in rows[0]["error"]["message"], f"no pooling information: {rows[0]}")
rows = cbatch_rows([{"id": "np", "input": SENTENCES[0]}], "--pooling", "mean", model_dir=no_pooling)
want = reference.embed(tokenizer.encode(SENTENCES[0]).ids, normalize=False)
c.check("embedding" in rows[0] and cosine(rows[0]["embedding"], want) >= 0.9999 and
        abs(np.linalg.norm(rows[0]["embedding"]) - np.linalg.norm(want)) < 1e-3 * np.linalg.norm(want),
        "--pooling mean without a Normalize module: the unnormalised mean")

# OpenAI batch lines (/v1/embeddings): the four input forms, base64, and the refusals; each body validates
# as the openai package's CreateEmbeddingResponse where that package is installed.
try:
    from openai.types import CreateEmbeddingResponse
except ImportError:
    CreateEmbeddingResponse = None
    print("note: the openai package is not installed; response bodies are checked by hand only")


def openai_line(custom_id, **body):
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/embeddings", "body": {"model": "m", **body}}


ids0, ids1 = tokenizer.encode(SENTENCES[0]).ids, tokenizer.encode(SENTENCES[1]).ids
openai_lines = [
    openai_line("text", input=SENTENCES[0]),
    openai_line("texts", input=[SENTENCES[0], SENTENCES[1], SENTENCES[-1]]),
    openai_line("ids", input=ids1),
    openai_line("id-lists", input=[ids0, ids1]),
    openai_line("base64", input=[SENTENCES[0], SENTENCES[1]], encoding_format="base64"),
    openai_line("dimensions", input=SENTENCES[0], dimensions=64),
    openai_line("format", input=SENTENCES[0], encoding_format="int8"),
    openai_line("empty-list", input=[]),
    openai_line("empty-text", input=[SENTENCES[0], ""]),
    openai_line("mixed", input=[SENTENCES[0], [101, 102]]),
    openai_line("vocab", input=[[101, 102], [101, 40000, 102]]),
]
expected = {"text": [baseline["s0"]], "texts": [baseline["s0"], baseline["s1"], baseline["s7"]],
            "ids": [baseline["s1"]], "id-lists": [baseline["s0"], baseline["s1"]],
            "base64": [baseline["s0"], baseline["s1"]]}
tokens = {"text": len(ids0), "texts": len(ids0) + len(ids1) + 256, "ids": len(ids1), "id-lists": len(ids0) + len(ids1),
          "base64": len(ids0) + len(ids1)}
rows = {r["custom_id"]: r for r in cbatch_rows(openai_lines, expect_rc=2)}
c.check(len(rows) == len(openai_lines), f"{len(rows)} OpenAI output lines for {len(openai_lines)}")
for key, vectors in expected.items():
    r = rows.get(key, {})
    body = (r.get("response") or {}).get("body") or {}
    c.check(r.get("error") is None and r.get("response", {}).get("status_code") == 200, f"OpenAI {key}: {r}")
    data = body.get("data", [])
    if key == "base64":  # float32 little-endian bytes; the openai client decodes them before its type sees them
        for d in data:
            d["embedding"] = np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4").astype(np.float64).tolist()
    if CreateEmbeddingResponse is not None:
        try:
            CreateEmbeddingResponse.model_validate(body)
        except Exception as e:  # noqa: BLE001 (pydantic's ValidationError)
            c.check(False, f"OpenAI {key}: the body is not a CreateEmbeddingResponse: {e}")
    c.check(body.get("object") == "list" and body.get("model") == "all-MiniLM-L6-v2", f"OpenAI {key}: object/model {body}")
    c.check([d.get("index") for d in data] == list(range(len(vectors))), f"OpenAI {key}: indices {[d.get('index') for d in data]}")
    for d, want in zip(data, vectors):
        got, want32 = np.asarray(d["embedding"], dtype=np.float32), np.asarray(want, dtype=np.float32)
        c.check(got.shape == want32.shape and bool((got == want32).all()), f"OpenAI {key}[{d['index']}]: differs from the simple line's embedding")
    usage = body.get("usage", {})
    c.check(usage.get("prompt_tokens") == tokens[key] and usage.get("total_tokens") == tokens[key],
            f"OpenAI {key}: usage {usage}, want {tokens[key]} prompt tokens")
for key in ("dimensions", "format", "empty-list", "empty-text", "mixed", "vocab"):
    r = rows.get(key, {})
    c.check(r.get("error") is not None and r.get("response", {}).get("status_code") == 400, f"OpenAI {key}: no error line ({r})")
    if r.get("error"):
        print(f"  {key}: {r['error']['message']}")
print(f"OpenAI form: {len(expected)} good and {len(openai_lines) - len(expected)} bad lines checked")

# The embedding workload of cbatch bench: every passage embedded, its tokens counted, the flops reported.
bench_json = os.path.join(work, "bench.json")
run(["bench", "--model", model, "--dataset", "passages-synthetic", "--num-prompts", "24", "--modes", "continuous",
     "--threads", "2", "--quiet", "--json", bench_json])
bench = json.load(open(bench_json))
result = bench["results"][0]
c.check(result["requests"] == 24 and result["output_tokens"] == 0 and result["prompt_tokens"] > 24 * 10,
        f"bench passages-synthetic: {result}")
c.check(bench.get("peaks", {}).get("gemm_flops_per_s", 0) > 0 and result.get("gflops_per_s", 0) > 0,
        f"bench passages-synthetic: no GEMM peak or GFLOP/s ({bench.get('peaks')}, {result.get('gflops_per_s')})")
shutil.rmtree(work, ignore_errors=True)
c.done()
