"""Greedy outputs of tiny-spm (tools/tiny_spm) equal the float64 reference's goldens token for token, from
the llama2.c .bin, the GGUF and the Hugging Face directory (safetensors, tokenizer.json, rotate-half RoPE);
cbatch tokenize equals Hugging Face tokenizers' ids (golden/tokenize.jsonl) from all three. With the
optional shared data present, aidreams260K's llama2.c goldens are checked the same way."""
import json
import os

from common import Checks, need_tiny_spm, read_jsonl, run, shared_extra, tmpdir, write_jsonl


def check_goldens(c, label, models, golden_dir):
    golden = read_jsonl(os.path.join(golden_dir, "greedy.jsonl"))
    c.check(len(golden) >= 12, f"{label}: only {len(golden)} goldens")
    prompts = os.path.join(work, f"prompts-{label}.jsonl")
    write_jsonl(prompts, [{"id": g["id"], "prompt": g["prompt"], "max_tokens": g.get("max_tokens", 1000),
                           "temperature": 0} for g in golden])
    for name, model in models.items():
        out = os.path.join(work, f"out-{label}-{name}.jsonl")
        run(["run", prompts, "-o", out, "--device", "cpu", "--quiet"] + model)
        results = {r["id"]: r for r in read_jsonl(out)}
        for g in golden:
            r = results.get(g["id"])
            c.check(r is not None, f"{label} {name}: no result for {g['id']}")
            if r is None:
                continue
            c.check(r["output_token_ids"] == g["output_ids"], f"{label} {name} {g['id']}: output ids differ")
            c.check(r["text"] == g["output_text"], f"{label} {name} {g['id']}: text {r['text']!r} != {g['output_text']!r}")
            c.check(r["prompt_tokens"] == len(g["prompt_ids"]), f"{label} {name} {g['id']}: prompt_tokens")
            expected_reason = "stop" if g["stop"] == "eos" else "length"
            c.check(r["finish_reason"] == expected_reason, f"{label} {name} {g['id']}: finish_reason {r['finish_reason']}")

        tok_rows = read_jsonl(os.path.join(golden_dir, "tokenize.jsonl"))
        stdin = "".join(json.dumps({"text": t["text"]}) + "\n" for t in tok_rows)
        proc = run(["tokenize"] + model, stdin=stdin)
        got = [json.loads(line)["ids"] for line in proc.stdout.splitlines()]
        c.check(len(got) == len(tok_rows), f"{label} {name}: tokenize returned {len(got)} lines")
        for t, ids in zip(tok_rows, got):
            c.check(ids == t["ids"], f"{label} {name}: tokenize {t['text']!r}: {ids} != {t['ids']}")


c = Checks()
work = tmpdir()
tiny = need_tiny_spm()
golden = read_jsonl(os.path.join(tiny, "golden", "greedy.jsonl"))
c.check(sum(g["stop"] == "eos" for g in golden) >= 3 and sum(g["stop"] == "length" for g in golden) >= 3,
        "tiny-spm's goldens should end both on EOS and on length")
check_goldens(c, "tiny-spm", {
    "bin": ["--model", os.path.join(tiny, "tiny-spm.bin"), "--tokenizer", os.path.join(tiny, "tokenizer.bin")],
    "gguf": ["--model", os.path.join(tiny, "tiny-spm.gguf")],
    "hf": ["--model", os.path.join(tiny, "hf")],
}, os.path.join(tiny, "golden"))

aidreams = shared_extra(os.path.join("models", "aidreams260K"))
if aidreams:
    check_goldens(c, "aidreams260K", {
        "bin": ["--model", os.path.join(aidreams, "aidreams260K.bin"), "--tokenizer", os.path.join(aidreams, "tok512.bin")],
        "gguf": ["--model", os.path.join(aidreams, "aidreams260K.gguf")],
        "hf": ["--model", os.path.join(aidreams, "hf")],
    }, os.path.join(aidreams, "golden"))
c.done()
