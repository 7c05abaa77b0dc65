"""Greedy outputs of aidreams260K equal llama2.c's goldens token for token, from the .bin, the GGUF and
the Hugging Face directory (safetensors, tokenizer.json, rotate-half RoPE); cbatch tokenize equals
golden/tokenize.jsonl from all three."""
import json
import os

from common import AIDREAMS, Checks, need, read_jsonl, run, tmpdir, write_jsonl

need(AIDREAMS)
golden = read_jsonl(os.path.join(AIDREAMS, "golden", "greedy.jsonl"))
models = {
    "bin": ["--model", os.path.join(AIDREAMS, "aidreams260K.bin"), "--tokenizer", os.path.join(AIDREAMS, "tok512.bin")],
    "gguf": ["--model", os.path.join(AIDREAMS, "aidreams260K.gguf")],
    "hf": ["--model", os.path.join(AIDREAMS, "hf")],
}
c = Checks()
work = tmpdir()
prompts = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts, [{"id": g["id"], "prompt": g["prompt"], "max_tokens": 1000, "temperature": 0} for g in golden])
for name, model in models.items():
    out = os.path.join(work, f"out-{name}.jsonl")
    run(["run", prompts, "-o", out, "--device", "cpu", "--quiet"] + model)
    results = {r["id"]: r for r in read_jsonl(out)}
    for g in golden:
        r = results.get(g["id"])
        c.check(r is not None, f"{name}: no result for {g['id']}")
        if r is None:
            continue
        c.check(r["output_token_ids"] == g["output_ids"], f"{name} {g['id']}: output ids differ")
        c.check(r["text"] == g["output_text"], f"{name} {g['id']}: text {r['text']!r} != {g['output_text']!r}")
        c.check(r["prompt_tokens"] == len(g["prompt_ids"]), f"{name} {g['id']}: prompt_tokens")
        expected_reason = "stop" if g["stop"] == "eos" else "length"
        c.check(r["finish_reason"] == expected_reason, f"{name} {g['id']}: finish_reason {r['finish_reason']}")

    tok_rows = read_jsonl(os.path.join(AIDREAMS, "golden", "tokenize.jsonl"))
    stdin = "".join(json.dumps({"text": t["text"]}) + "\n" for t in tok_rows)
    proc = run(["tokenize"] + model, stdin=stdin)
    got = [json.loads(line)["ids"] for line in proc.stdout.splitlines()]
    c.check(len(got) == len(tok_rows), f"{name}: tokenize returned {len(got)} lines")
    for t, ids in zip(tok_rows, got):
        c.check(ids == t["ids"], f"{name}: tokenize {t['text']!r}: {ids} != {t['ids']}")
c.done()
