"""--shard I/N and merge on a tiny random-weight model (greedy, CPU), over an input with valid, invalid
and blank lines, OpenAI-form lines and an id used three times (within a shard and across shards): for
N = 1, 2, 3, 7 every non-blank line is answered in exactly one shard (the one with L mod N = I), each
shard's lines equal the single-process lines (a line whose id an earlier line of another shard used is
the one exception: only merge can see that), and merge reproduces the single-process --ordered output
byte for byte but for timing metrics. merge refuses a missing shard, a shard given twice, a shard of
another input and a torn last line, naming the lines; --shard auto reads Slurm's and Kubernetes'
variables; --resume works per shard."""
import json
import os
import subprocess

from common import BIN, Checks, run, tiny_dummy_model, tmpdir
from shard_common import REUSED_ID_LINES, answered_lines, masked, mixed_prompts

c = Checks()
work = tmpdir()
MODEL = tiny_dummy_model(work)
prompts = os.path.join(work, "prompts.jsonl")
input_lines = mixed_prompts(prompts, 40)
nonblank = [n for n, text in enumerate(input_lines, 1) if text]
single = os.path.join(work, "single.jsonl")
run(["run", prompts, "-o", single, "--ordered"] + MODEL, expect_rc=2)
single_lines = masked(single).split(b"\n")[:-1]
single_by_line = dict(zip(answered_lines(single, input_lines), single_lines))
c.check(sorted(single_by_line) == nonblank, "the single run answers every non-blank line once")


def shard_path(n, i):
    return os.path.join(work, f"part-{n}-{i}.jsonl")


def run_shards(n):
    for i in range(n):
        proc = run(["run", prompts, "-o", shard_path(n, i), "--shard", f"{i}/{n}"] + MODEL, check=False)
        c.check(proc.returncode in (0, 2), f"shard {i}/{n} exited {proc.returncode}: {proc.stderr[-500:]}")


def check_union(n):
    seen = []
    for i in range(n):
        owns = lambda line, i=i: line % n == i
        lines = answered_lines(shard_path(n, i), input_lines, owns)
        texts = masked(shard_path(n, i)).split(b"\n")[:-1]
        c.check(all(owns(line) for line in lines), f"{n} shards: shard {i} answers lines it does not own: {lines}")
        for line, text in zip(lines, texts):
            # A shard without line 5 cannot know that the later lines reuse its id.
            if line not in REUSED_ID_LINES or owns(5):
                c.check(text == single_by_line.get(line), f"{n} shards: line {line} differs from the single run")
        seen += lines
    c.check(sorted(seen) == nonblank, f"{n} shards: every non-blank line in exactly one shard")


def merge(out, shards, rc=None, extra=()):
    proc = run(["merge", out] + shards + ["--input", prompts] + list(extra), check=False)
    if rc is not None:
        c.check(proc.returncode == rc, f"merge exited {proc.returncode}, expected {rc}: {proc.stderr[-800:]}")
    return proc


for n in (1, 2, 3, 7):
    run_shards(n)
    check_union(n)
    merged = os.path.join(work, f"merged-{n}.jsonl")
    merge(merged, [shard_path(n, i) for i in range(n)], rc=2)  # 2: the input has bad lines
    c.check(masked(merged) == masked(single), f"{n} shards: merge differs from the single --ordered run")

# Refusals, each naming what is wrong; nothing is written.
parts = [shard_path(3, i) for i in range(3)]
refused = os.path.join(work, "refused.jsonl")
proc = merge(refused, parts[:2], rc=1)
c.check("shard 2/3 is missing" in proc.stderr and "of shard 2/3 have no output line: lines 2, 5, 8" in proc.stderr,
        f"missing shard: {proc.stderr}")
c.check(not os.path.exists(refused), "a refused merge writes no output")
proc = merge(refused, parts + [parts[1]], rc=1)
c.check("is given twice" in proc.stderr and "are answered twice" in proc.stderr and "lines 1, 7, 10" in proc.stderr,
        f"duplicated shard: {proc.stderr}")

other = os.path.join(work, "other.jsonl")
with open(prompts) as f, open(other, "w") as g:
    g.write(f.read().replace("line 3 of", "line 3 0f"))
other_part = os.path.join(work, "other-part.jsonl")
run(["run", other, "-o", other_part, "--shard", "0/3"] + MODEL, check=False)
proc = merge(refused, [other_part] + parts[1:], rc=1)
c.check("(shard 0/3) is a shard of another input" in proc.stderr, f"shard of another input: {proc.stderr}")

torn = os.path.join(work, "torn.jsonl")
with open(parts[1], "rb") as f:
    data = f.read()
with open(torn, "wb") as f:
    f.write(data[:-30])  # the last line cut, as a task killed while writing leaves it
os.link(parts[1].replace(".jsonl", ".summary.json"), torn.replace(".jsonl", ".summary.json"))
proc = merge(refused, [parts[0], torn, parts[2]], rc=1)
c.check("is torn" in proc.stderr and "have no output line: lines" in proc.stderr, f"torn last line: {proc.stderr}")

# --resume per shard: the torn shard file picks up where it stopped.
os.replace(torn, parts[1])
run(["run", prompts, "-o", parts[1], "--shard", "1/3", "--resume"] + MODEL, expect_rc=2)
merge(os.path.join(work, "resumed.jsonl"), parts, rc=2)
c.check(masked(os.path.join(work, "resumed.jsonl")) == masked(single), "merge after a shard's --resume")

# --shard auto: Slurm array variables, Kubernetes' index with --num-shards; bad values are exit 1.
def auto(env, extra=(), rc=2):
    out = os.path.join(work, "auto.jsonl")
    proc = subprocess.run([BIN, "run", prompts, "-o", out, "--shard", "auto"] + list(extra) + MODEL,
                          env={**os.environ, **env}, capture_output=True, text=True)
    c.check(proc.returncode == rc, f"--shard auto {env}: exit {proc.returncode}: {proc.stderr[-300:]}")
    return proc, out


for env, extra in (({"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "3"}, ()),
                   ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1"}, ()),
                   ({"JOB_COMPLETION_INDEX": "2"}, ("--num-shards", "3"))):
    proc, out = auto(env, extra)
    c.check(masked(out) == masked(parts[2]), f"--shard auto {env} is shard 2/3")
proc, _ = auto({"JOB_COMPLETION_INDEX": "2"}, rc=1)
c.check("--num-shards" in proc.stderr, f"JOB_COMPLETION_INDEX without --num-shards: {proc.stderr}")
proc, _ = auto({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "3"}, rc=1)
c.check("0..2, not 5" in proc.stderr, f"task id past the count: {proc.stderr}")
# bench --shard: the generated requests are numbered like lines (request i is line i + 1).
bench_json = os.path.join(work, "bench.json")
run(["bench", "--num-prompts", "15", "--input-len", "4:8", "--output-len", "2:4", "--modes", "continuous",
     "--shard", "1/4", "--json", bench_json] + MODEL)
with open(bench_json) as f:
    c.check(json.load(f)["results"][0]["requests"] == 4, "bench --shard 1/4 of 15 requests runs requests 1, 5, 9, 13")
proc = run(["run", "-", "--shard", "0/2"] + MODEL, stdin="{}\n", check=False)
c.check(proc.returncode == 1 and "not standard input" in proc.stderr, f"--shard on stdin: {proc.stderr}")
for bad in ("3/3", "1", "a/b"):
    proc = run(["run", prompts, "-o", os.path.join(work, "bad.jsonl"), "--shard", bad] + MODEL, check=False)
    c.check(proc.returncode == 1 and f"--shard {bad}" in proc.stderr, f"--shard {bad}: {proc.returncode} {proc.stderr}")
c.done()
