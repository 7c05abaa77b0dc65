"""cbatch bench --dataset sharegpt:FILE and sharegpt-synthetic. A ShareGPT-format file written here is
sampled by vLLM's procedure re-done in Python (conversations with two turns, random.seed + random.shuffle,
token counts from `cbatch tokenize`, the 4 / 1024 / 2048 filter): the bench JSON's mean lengths and the run's
token counts equal what the file implies. Bad files and too few pairs are errors naming the file. The
synthetic dataset (a tiny dummy model) is reproducible from --seed and its realized lengths are those run.
The sanitizer build samples the file with the tiny dummy model's byte tokenizer instead of SmolLM2's (16 s
a SmolLM2 bench there)."""
import json
import os
import random

from common import SMOLLM2, Checks, need_smollm2, run, tiny_dummy_model, tmpdir

c = Checks()
work = tmpdir()
TINY = tiny_dummy_model(work, max_position_embeddings=4096)
if os.environ.get("CBATCH_SANITIZED") == "1":
    FILE_MODEL = TINY
else:
    need_smollm2()
    FILE_MODEL = ["--model", SMOLLM2, "--device", "cpu", "--quiet", "--threads", "2"]
SEED = 5

replies = ["Paris is the capital of France.", "Use a list comprehension: [x * 2 for x in xs].",
           "The mitochondria is the powerhouse of the cell, as everyone says.", "Café — naïve “quotes” 😀 here.",
           "Line one\nLine two\tand a tab.", "Water boils at 100 °C at sea level.", "ok", "Sure! Here it is."]
entries = []
for i in range(14):
    prompt = f"Question {i}: " + "tell me something about topic %d, please. " % i * (1 + i % 3)
    turns = [{"from": "human", "value": prompt}, {"from": "gpt", "value": replies[i % len(replies)]}]
    if i == 2:
        entries.append({"id": str(i)})  # no conversations: skipped before the shuffle
        continue
    if i == 4:
        turns = turns[:1]  # one turn: skipped before the shuffle
    if i == 9:
        turns[0]["value"] = "long " * 1100  # over 1,024 prompt tokens: dropped by the filter
    if i % 2:
        turns.append({"from": "human", "value": "and then?"})
    entries.append({"id": str(i), "conversations": turns})
path = os.path.join(work, "sharegpt.json")
with open(path, "w", encoding="utf-8") as f:
    json.dump(entries, f, ensure_ascii=True)  # non-ASCII as \u escapes, which the reader must undo

# vLLM's sampling, with our tokenizer's counts (with BOS, as Hugging Face tokenizers count).
eligible = [e for e in entries if len(e.get("conversations", [])) >= 2]
texts = [t["value"] for e in eligible for t in e["conversations"][:2]]
proc = run(["tokenize"] + FILE_MODEL[:2], stdin="".join(json.dumps({"text": t}) + "\n" for t in texts))
counts = [len(json.loads(line)["ids"]) for line in proc.stdout.splitlines()]
lengths = [(counts[2 * i], counts[2 * i + 1]) for i in range(len(eligible))]
random.seed(SEED)
random.shuffle(lengths)
kept = [(p, o) for p, o in lengths if not (p < 4 or o < 4 or p > 1024 or p + o > 2048)]
c.check(len(kept) == 10 and len(lengths) == 12, f"the file has {len(lengths)} pairs, {len(kept)} kept")
expected = kept[:8]

out = os.path.join(work, "bench.json")
run(["bench", "--dataset", "sharegpt:" + path, "--num-prompts", "8", "--seed", str(SEED), "--modes", "continuous",
     "--json", out] + FILE_MODEL)
report = json.load(open(out))
w, r = report["workload"], report["results"][0]
mean_in = sum(p for p, _ in expected) / 8
mean_out = sum(o for _, o in expected) / 8
c.check(w["dataset"] == "sharegpt:" + path and w["num_prompts"] == 8, f"workload {w}")
c.check(abs(w["mean_input_len"] - mean_in) < 1e-3, f"mean_input_len {w['mean_input_len']}, file implies {mean_in}")
c.check(abs(w["mean_output_len"] - mean_out) < 1e-3, f"mean_output_len {w['mean_output_len']}, file implies {mean_out}")
c.check(r["requests"] == 8 and r["prompt_tokens"] == sum(p for p, _ in expected), f"prompt tokens {r['prompt_tokens']}")
c.check(r["output_tokens"] == sum(o for _, o in expected), f"output tokens {r['output_tokens']}")

# Errors (on a tiny dummy model, whose byte tokenizer keeps the same 10 pairs): more prompts than pass the
# filter, a file that is not the ShareGPT format, a truncated file.
proc = run(["bench", "--dataset", "sharegpt:" + path, "--num-prompts", "11"] + TINY, check=False)
c.check(proc.returncode != 0 and path in proc.stderr and "only 10 of its 12" in proc.stderr, proc.stderr.strip())
for lengths in (["--input-len", "8"], ["--output-len", "4:8"]):  # the file sets them: no silent ignoring
    proc = run(["bench", "--dataset", "sharegpt:" + path] + lengths + TINY, check=False)
    c.check(proc.returncode != 0 and lengths[0] in proc.stderr and "brings its own" in proc.stderr, proc.stderr.strip())
for name, text, problem in [("object.json", '{"conversations": []}', "expected a JSON list"),
                            ("truncated.json", '[{"conversations": [{"value": "a"}, {"val', "not JSON")]:
    bad = os.path.join(work, name)
    with open(bad, "w") as f:
        f.write(text)
    proc = run(["bench", "--dataset", "sharegpt:" + bad] + TINY, check=False)
    c.check(proc.returncode != 0 and bad in proc.stderr and problem in proc.stderr, f"{name}: {proc.stderr.strip()}")


# Synthetic: no file; the same seed gives the same workload, the realized lengths are the ones run.
def synthetic(seed):
    out = os.path.join(work, f"synthetic-{seed}.json")
    run(["bench", "--dataset", "sharegpt-synthetic", "--num-prompts", "8", "--seed", str(seed), "--modes",
         "continuous", "--json", out] + TINY)
    report = json.load(open(out))
    return report["workload"], report["results"][0]


(w1, r1), (w2, r2), (w3, _) = synthetic(3), synthetic(3), synthetic(4)
c.check(w1["dataset"] == "sharegpt-synthetic", f"dataset {w1['dataset']}")
c.check((w1["mean_input_len"], w1["mean_output_len"]) == (w2["mean_input_len"], w2["mean_output_len"]),
        "same seed, same lengths")
c.check(r1["prompt_tokens"] == r2["prompt_tokens"] and r1["output_tokens"] == r2["output_tokens"], "same tokens")
c.check(w3["mean_input_len"] != w1["mean_input_len"], "another seed, other lengths")
c.check(r1["prompt_tokens"] == 8 * w1["mean_input_len"] and r1["output_tokens"] == 8 * w1["mean_output_len"],
        f"realized {w1['mean_input_len']}/{w1['mean_output_len']} vs run {r1['prompt_tokens']}/{r1['output_tokens']}")
c.done()
