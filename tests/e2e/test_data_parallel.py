"""run --data-parallel-size 2 on the CPU (--threads 2 split into one a process) on a small random-weight
model: the merged output equals one process's --ordered output but for timing metrics; kill -9 of one
child makes the run fail naming the shard and the signal, and --resume then loses nothing and
duplicates nothing; SIGTERM to the parent is forwarded to both children (all exit, no merge), --resume
again completes the same output; bad settings are clear errors (exit 1)."""
import os
import signal
import subprocess
import time

from common import BIN, Checks, read_jsonl, run, tiny_dummy_model, tmpdir, write_jsonl
from shard_common import masked

SANITIZED = os.environ.get("CBATCH_SANITIZED") == "1"
NUM_PROMPTS = 60 if SANITIZED else 240
c = Checks()
work = tmpdir()
MODEL_ONLY = tiny_dummy_model(work, hidden_size=256, intermediate_size=512, num_hidden_layers=4)[:2]
MODEL = MODEL_ONLY + ["--device", "cpu", "--threads", "2"]
prompts = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts, [{"id": f"k{i}", "prompt": "word " * (3 + i % 17) + str(i), "max_tokens": 4 + (7 * i) % 60,
                       "temperature": 0}
                      for i in range(NUM_PROMPTS)])
single = os.path.join(work, "single.jsonl")
run(["run", prompts, "-o", single, "--ordered", "--quiet"] + MODEL)


def children_of(pid):
    """The pids of a process's children, by the shard each runs ({"0/2": pid, ...})."""
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        pids = [int(p) for p in f.read().split()]
    shards = {}
    for child in pids:
        with open(f"/proc/{child}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
        shards[args[args.index(b"--shard") + 1].decode()] = child
    return shards


def count_lines(path):
    if not os.path.exists(path):
        return 0
    with open(path, "rb") as f:
        return f.read().count(b"\n")


def start(out, extra=()):
    return subprocess.Popen([BIN, "run", prompts, "-o", out, "--data-parallel-size", "2"] + MODEL + list(extra),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_for_lines(proc, path, lines=3, timeout=120):
    deadline = time.monotonic() + timeout
    while count_lines(path) < lines and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return proc.poll() is None


def check_complete(out, what):
    rows = read_jsonl(out)
    ids = [r["id"] for r in rows]
    c.check(len(ids) == NUM_PROMPTS and len(set(ids)) == NUM_PROMPTS, f"{what}: {len(ids)} lines, {len(set(ids))} ids")
    c.check(masked(out) == masked(single), f"{what}: the merged output differs from the single --ordered run")


out = os.path.join(work, "dp.jsonl")
proc = run(["run", prompts, "-o", out, "--data-parallel-size", "2", "--summary", os.path.join(work, "s.json")] + MODEL)
check_complete(out, "data parallel")
c.check("merged 2 shards" in proc.stderr, f"the merge is reported: {proc.stderr[-400:]}")

# kill -9 of the child answering shard 1/2, then --resume.
killed = os.path.join(work, "killed.jsonl")
shard1 = os.path.join(work, "killed.shard-1-of-2.jsonl")
proc = start(killed)
if wait_for_lines(proc, shard1) and "1/2" in children_of(proc.pid):
    os.kill(children_of(proc.pid)["1/2"], signal.SIGKILL)
    _, stderr = proc.communicate(timeout=300)
    c.check(proc.returncode == 1, f"a killed child fails the run: exit {proc.returncode}")
    c.check("shard 1/2" in stderr and "killed by signal 9" in stderr, f"the killed shard is named: {stderr[-500:]}")
    c.check(not os.path.exists(killed) or os.path.getsize(killed) == 0, "nothing merged after a failed child")
    c.check(count_lines(shard1) < NUM_PROMPTS // 2, f"shard 1 was cut short ({count_lines(shard1)} lines)")
    run(["run", prompts, "-o", killed, "--data-parallel-size", "2", "--resume", "--quiet"] + MODEL)
    check_complete(killed, "kill -9 then --resume")
else:
    c.check(False, "the data-parallel run finished before a child could be killed")

# SIGTERM to the parent reaches both children; --resume finishes.
stopped = os.path.join(work, "stopped.jsonl")
proc = start(stopped)
if wait_for_lines(proc, os.path.join(work, "stopped.shard-0-of-2.jsonl")):
    children = list(children_of(proc.pid).values())
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=300)
    c.check(proc.returncode == 128 + signal.SIGTERM, f"SIGTERM: exit {proc.returncode}")
    c.check(all(not os.path.exists(f"/proc/{pid}") for pid in children), "every child stopped with the parent")
    done = sum(count_lines(os.path.join(work, f"stopped.shard-{i}-of-2.jsonl")) for i in range(2))
    c.check(done < NUM_PROMPTS, f"the children stopped early ({done} of {NUM_PROMPTS} lines)")
    run(["run", prompts, "-o", stopped, "--data-parallel-size", "2", "--resume", "--quiet"] + MODEL)
    check_complete(stopped, "SIGTERM then --resume")
else:
    c.check(False, "the data-parallel run finished before SIGTERM")

bad_out = ["-o", os.path.join(work, "bad.jsonl")]
for extra, message in ((bad_out + ["--device", "cpu", "--threads", "1"], "only 1 threads"),
                       (bad_out + ["--device", "cuda"], "--device cuda"), (["-o", "-"], "needs an output file"),
                       (bad_out + ["--shard", "0/2"], "cannot be combined with --shard")):
    proc = run(["run", prompts, "--data-parallel-size", "2"] + MODEL_ONLY + extra, check=False)
    c.check(proc.returncode == 1 and message in proc.stderr, f"{extra}: exit {proc.returncode}: {proc.stderr[-300:]}")
c.done()
