"""A killed job loses no finished work: a run is killed with SIGKILL at seeded random moments six times
(each after it has written at least one new result; once with a torn half line appended to the output,
as a kill inside a write leaves it), each time picked up with --resume, and the final output holds
exactly the clean run's results: the same ids and greedy texts, no duplicates, no torn lines; the last
--resume's summary counts both parts. The killed runs read their prompts from a pipe this test keeps
open, so however fast the machine, none of them can finish before its kill."""
import json
import os
import random
import shutil
import signal
import subprocess
import time

from common import BIN, Checks, read_jsonl, run, tiny_spm_gguf, tmpdir, write_jsonl

MODEL = ["--model", tiny_spm_gguf(), "--device", "cpu", "--quiet"]
WORDS = "I dreamed of a quiet city where the robots sang softly under glass rivers and memory light".split()
NUM_KILLS = 6

rng = random.Random(99)
rows = [{"id": f"k{i}", "prompt": " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 10))),
         "max_tokens": rng.randint(1, 100), "temperature": 0} for i in range(600)]
c = Checks()
work = tmpdir()
prompts, out, ref_out = (os.path.join(work, name) for name in ("prompts.jsonl", "out.jsonl", "ref.jsonl"))
write_jsonl(prompts, rows)

t0 = time.monotonic()
run(["run", prompts, "-o", ref_out] + MODEL)
clean_s = time.monotonic() - t0
reference = {r["id"]: (r["text"], r["output_token_ids"]) for r in read_jsonl(ref_out)}
c.check(len(reference) == len(rows), f"clean run: {len(reference)} results")


def complete_lines(path):
    """The parsed lines of the output file and whether its last line is torn (no newline). A run killed
    before it opened its output (still loading the model on a busy machine) leaves no file: no lines."""
    if not os.path.exists(path):
        return [], False
    with open(path, "rb") as f:
        data = f.read()
    torn = bool(data) and not data.endswith(b"\n")
    return [json.loads(line) for line in data.split(b"\n")[:-1] if line.strip()], torn


def output_size():
    return os.path.getsize(out) if os.path.exists(out) else 0


prompt_bytes = "".join(json.dumps(r) + "\n" for r in rows).encode()
for attempt in range(NUM_KILLS):
    args = [BIN, "run", "-", "-o", out] + MODEL + (["--resume"] if attempt > 0 else [])
    size_before = output_size()
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    proc.stdin.write(prompt_bytes)
    proc.stdin.flush()  # and left open
    # Startup (model load, reading back the output) takes a fixed time that can exceed a fraction of a
    # fast run: wait for the first new result, then kill at a random moment after it.
    deadline = time.monotonic() + 120
    while proc.poll() is None and output_size() <= size_before and time.monotonic() < deadline:
        time.sleep(0.001)
    c.check(output_size() > size_before, f"kill {attempt}: no new result within 120 s")
    time.sleep(rng.uniform(0.0, 0.06) * clean_s)
    c.check(proc.poll() is None, f"kill {attempt}: the run ended (exit {proc.poll()}) with its input still open")
    proc.kill()
    proc.wait()
    proc.stdin.close()
    done, torn = complete_lines(out)  # every complete line parses, or json.loads raises
    ids = [r["id"] for r in done]
    c.check(len(ids) == len(set(ids)), f"kill {attempt}: duplicate ids in the output")
    c.check(all(reference.get(r["id"]) == (r["text"], r["output_token_ids"]) for r in done),
            f"kill {attempt}: a finished result differs from the clean run")
    if attempt == 2 and not torn:  # a kill inside a write: half a line that --resume must cut
        with open(out, "ab") as f:
            f.write(json.dumps({"id": rows[-1]["id"], "text": "half"}).encode()[:20])

summary = os.path.join(work, "summary.json")
run(["run", prompts, "-o", out, "--resume", "--summary", summary] + MODEL)
final, torn = complete_lines(out)
c.check(not torn, "the final output ends in a torn line")
ids = [r["id"] for r in final]
c.check(len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} duplicate ids in the final output")
got = {r["id"]: (r["text"], r["output_token_ids"]) for r in final}
c.check(got == reference, f"{sum(got.get(k) != v for k, v in reference.items())} results differ from the clean run")
s = json.load(open(summary))
c.check(s["resumed_ok"] > 0 and s["resumed_ok"] + s["requests_ok"] == len(rows) and s["requests_failed"] == 0,
        f"last resume counts {s['resumed_ok']} resumed + {s['requests_ok']} new of {len(rows)}")
shutil.rmtree(work, ignore_errors=True)
c.done()
