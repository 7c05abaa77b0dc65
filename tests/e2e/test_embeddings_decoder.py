"""--task embed on a decoder (tiny-spm's GGUF, causal attention, no pooling files): embedding lines need
--pooling (an error line without it); with --pooling last the vector is the final-normed hidden state of
the prompt's last token, equal to the float64 reference of reference_llama.py at cosine >= 0.9999 (not
normalised: the model has no Normalize module); mean pooling likewise; the same vectors under other step
budgets and in sequential mode, bit for bit; a file mixing generation and embedding lines gives each line what
it gives alone, and the trace counts the embedding inputs. Without --task embed an embedding line is an
error line."""
import os

from common import Checks, need_modules, need_tiny_spm, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy", "gguf")
import numpy as np  # noqa: E402
from reference_llama import GgufLlama  # noqa: E402

c = Checks()
work = tmpdir()
model = os.path.join(need_tiny_spm(), "tiny-spm.gguf")
reference = GgufLlama(model)
reference.output = np.eye(reference.dim)  # forward() then returns the final-normed hidden states
PROMPTS = [[1, 300, 301, 302], [1, 400] + list(range(260, 300)), [1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17], [1, 511]]
lines = [{"id": f"p{i}", "input": ids} for i, ids in enumerate(PROMPTS)]


def rows_of(*extra, expect_rc=0):
    path, out = os.path.join(work, "in.jsonl"), os.path.join(work, "out.jsonl")
    write_jsonl(path, lines)
    run(["run", path, "--model", model, "-o", out, "--ordered", "--device", "cpu", "--quiet"] + list(extra),
        expect_rc=expect_rc)
    return {r["id"]: r for r in read_jsonl(out)}


def hidden(ids):
    n = len(ids)
    caches = [{"k": [None] * reference.n_layers, "v": [None] * reference.n_layers}]
    return reference.forward(np.array(ids), np.zeros(n, dtype=int), np.arange(n), caches)


rows = rows_of(expect_rc=2)
c.check(all("error" in r and "--task embed" in r["error"]["message"] for r in rows.values()),
        "without --task embed: error lines naming --task embed")
rows = rows_of("--task", "embed", expect_rc=2)
c.check(all("error" in r and "pooling" in r["error"]["message"] for r in rows.values()),
        "--task embed without pooling information: error lines asking for --pooling")
for pooling in ("last", "mean"):
    rows = rows_of("--task", "embed", "--pooling", pooling)
    for i, ids in enumerate(PROMPTS):
        h = hidden(ids)
        want = h[-1] if pooling == "last" else h.mean(0)
        got = np.asarray(rows[f"p{i}"].get("embedding", [0.0]), dtype=np.float64)
        cos = float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want))) if got.shape == want.shape else 0.0
        c.check(cos >= 0.9999 and abs(np.linalg.norm(got) / np.linalg.norm(want) - 1) < 1e-4,
                f"{pooling} p{i}: cosine {cos:.7f} with the reference")
    print(f"--pooling {pooling}: {len(PROMPTS)} vectors checked against the float64 reference")
    for extra in (["--max-num-batched-tokens", "48", "--max-num-seqs", "2"], ["--mode", "sequential"]):
        other = rows_of("--task", "embed", "--pooling", pooling, *extra)
        same = sum(other[k]["embedding"] == rows[k]["embedding"] for k in rows)
        c.check(same == len(PROMPTS), f"{pooling} {' '.join(extra)}: {same}/{len(PROMPTS)} bit-identical")
# Generation and embedding lines in one file share the steps; each result is what it is alone.
gen = [{"id": f"g{i}", "prompt_token_ids": ids, "max_tokens": 8} for i, ids in enumerate(PROMPTS)]
alone_lines, lines = lines, gen
alone_gen = rows_of("--task", "embed", "--pooling", "last")
lines = [x for pair in zip(gen, alone_lines) for x in pair]
trace = os.path.join(work, "trace.jsonl")
mixed = rows_of("--task", "embed", "--pooling", "last", "--enable-prefix-caching", "--trace", trace)
steps = read_jsonl(trace)
c.check(sum(st.get("embedding_seqs", 0) for st in steps) == len(PROMPTS) and
        sum(st.get("embedding_tokens", 0) for st in steps) == sum(map(len, PROMPTS)),
        "the trace counts every embedding input and its tokens once")
lines = alone_lines
alone_emb = rows_of("--task", "embed", "--pooling", "last")
for key, r in mixed.items():
    want = alone_gen.get(key) if key.startswith("g") else alone_emb.get(key)
    field = "output_token_ids" if key.startswith("g") else "embedding"
    c.check(want is not None and r.get(field) == want.get(field), f"mixed file: {key} differs from its run alone")
print(f"mixed file: {len(mixed)} lines checked against their runs alone")
c.done()
