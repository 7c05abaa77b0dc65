"""A choice list of 100,000 strings (seeded, about 20 bytes each, regex metacharacters among them) runs on
tiny-spm at temperature 0.9 as guided_choice (n = 2) and as a JSON schema's top-level enum: the list
compiles to a byte trie (a regex alternation of it was refused), and every output is one of the choices.
Prints the run's wall time and asserts a generous bound on it."""
import json
import os
import random
import time

from common import Checks, read_jsonl, run, tiny_spm_gguf, tmpdir, write_jsonl

rng = random.Random(7)
HEAD = "abcdefghijklmnopqrstuvwxyz0123456789"
ALPHABET = HEAD + " .|()*"
choices = []
while len(choices) < 100000:
    length = rng.randint(16, 24)
    choices.append(rng.choice(HEAD) + "".join(rng.choice(ALPHABET) for _ in range(length - 1)))
    if len(choices) % 50 == 0:  # a choice that is a prefix of another
        choices.append(choices[-1][:length // 2])
choices = choices[:100000]
allowed = set(choices)

model = tiny_spm_gguf()
c = Checks()
work = tmpdir()
rows = [{"id": f"ch{i}", "prompt": "Pick one:", "max_tokens": 48, "temperature": 0.9, "seed": i, "n": 2,
         "guided_choice": choices} for i in range(3)]
rows.append({"id": "enum", "prompt": "Pick one:", "max_tokens": 48, "temperature": 0.9, "seed": 9,
             "response_format": {"type": "json_schema", "json_schema": {"name": "e", "schema": {"enum": choices}}}})
prompts, out = os.path.join(work, "p.jsonl"), os.path.join(work, "o.jsonl")
write_jsonl(prompts, rows)
start = time.monotonic()
run(["run", prompts, "-o", out, "--model", model, "--device", "cpu", "--quiet"])
wall_s = time.monotonic() - start
print(f"100,000 choices, {len(rows)} requests: cbatch ran in {wall_s:.2f} s")
results = {r["id"]: r for r in read_jsonl(out)}
texts = []
for i in range(3):
    for o in results[f"ch{i}"]["outputs"]:
        c.check(o["finish_reason"] == "stop" and o["text"] in allowed, f"ch{i}: {o['finish_reason']} {o['text']!r} is not a choice")
        texts.append(o["text"])
r = results["enum"]
c.check(r["finish_reason"] == "stop", f"enum: finish_reason {r['finish_reason']}")
try:
    c.check(json.loads(r["text"]) in allowed, f"enum: {r['text']!r} is not one of the values")
except ValueError:
    c.check(False, f"enum: not JSON: {r['text']!r}")
c.check(len(set(texts)) > 1, f"every sampled output is the same: {texts}")
if os.environ.get("CBATCH_SANITIZED") != "1":  # generous: the trie compiles in well under a second
    c.check(wall_s < 60, f"the run took {wall_s:.1f} s")
c.done()
