"""SIGINT and SIGTERM stop a run cleanly: admission stops, the current step ends, finished results are
flushed (--ordered too), the summary says interrupted, and the exit status is 130 / 143; a second
signal exits at once; a signal also ends a wait on a silent input pipe. In every case the output holds
only whole lines of correct results, and --resume completes it to exactly the clean run's results. A
second run on an output in use fails.

Every run that is interrupted or held busy reads its prompts from a pipe this test keeps open and fills
only in part, so it cannot finish early however fast the machine is. That also checks streaming input:
results for the lines that came must appear while the pipe is still open."""
import json
import os
import shutil
import signal
import subprocess
import time

from common import BIN, Checks, read_jsonl, run, tiny_spm_gguf, tmpdir, write_jsonl

MODEL = ["--model", tiny_spm_gguf(), "--device", "cpu", "--quiet"]
rows = [{"id": f"s{i}", "prompt": "I dreamed of a quiet city" if i % 2 else "The robots", "max_tokens": 10 + i % 60,
         "temperature": 0} for i in range(300)]
c = Checks()
work = tmpdir()
prompts, ref_out = os.path.join(work, "prompts.jsonl"), os.path.join(work, "ref.jsonl")
write_jsonl(prompts, rows)
run(["run", prompts, "-o", ref_out] + MODEL)
reference = {r["id"]: (r["text"], r["output_token_ids"]) for r in read_jsonl(ref_out)}


def num_lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def start_piped(out, extra_args, num_sent):
    """A run reading standard input that has received the first num_sent prompt lines; the pipe stays open."""
    proc = subprocess.Popen([BIN, "run", "-", "-o", out] + extra_args + MODEL, stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    proc.stdin.write("".join(json.dumps(r) + "\n" for r in rows[:num_sent]).encode())
    proc.stdin.flush()
    return proc


def wait_for_lines(name, proc, out, count):
    deadline = time.monotonic() + 120
    while num_lines(out) < count and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    c.check(num_lines(out) >= count, f"{name}: {num_lines(out)} results while the input pipe is open, "
                                     f"expected {count} (the lines that came are not run before more input)")
    c.check(proc.poll() is None, f"{name}: the run ended (exit {proc.poll()}) while its input was still open")


def interrupt(name, signals, extra_args, expect_rc, num_sent, wait_lines):
    out, summary = os.path.join(work, f"{name}.jsonl"), os.path.join(work, f"{name}-summary.json")
    proc = start_piped(out, extra_args + ["--summary", summary], num_sent)
    wait_for_lines(name, proc, out, wait_lines)
    for sig in signals:
        proc.send_signal(sig)
    t0 = time.monotonic()
    try:
        _, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
    stderr = stderr.decode(errors="replace")
    c.check(proc.returncode in expect_rc, f"{name}: exit {proc.returncode}, expected {expect_rc}")
    c.check(time.monotonic() - t0 < 10, f"{name}: took {time.monotonic() - t0:.1f} s to stop")
    c.check("stopping" in stderr, f"{name}: no stopping message on stderr")
    with open(out, "rb") as f:
        data = f.read()
    c.check(data.endswith(b"\n"), f"{name}: the output ends in a torn line")
    done = [json.loads(line) for line in data.splitlines()]
    c.check(0 < len(done) <= num_sent, f"{name}: {len(done)} results after the interrupt, {num_sent} sent")
    c.check(all(reference[r["id"]] == (r["text"], r["output_token_ids"]) for r in done), f"{name}: wrong result")
    return out, summary, len(done)


def resume_completes(name, out):
    run(["run", prompts, "-o", out, "--resume"] + MODEL)
    final = read_jsonl(out)
    c.check(len(final) == len(rows), f"{name}: {len(final)} lines after --resume, expected {len(rows)}")
    got = {r["id"]: (r["text"], r["output_token_ids"]) for r in final}
    c.check(got == reference, f"{name}: --resume does not reproduce the clean run")


# term/int: the signal comes while the run computes or waits for more input; idle: it comes while the run,
# having answered all it was sent, waits on the pipe (a blocking read there would never see the flag).
for name, sig, rc, extra, num_sent, wait_lines in [("term", signal.SIGTERM, (143,), [], 150, 10),
                                                   ("int", signal.SIGINT, (130,), ["--ordered"], 150, 10),
                                                   ("idle", signal.SIGTERM, (143,), [], 5, 5)]:
    out, summary, num_done = interrupt(name, [sig], extra, rc, num_sent, wait_lines)
    s = json.load(open(summary))
    c.check(s["interrupted"] is True and s["requests_ok"] == num_done,
            f"{name}: summary says interrupted={s['interrupted']}, {s['requests_ok']} ok for {num_done} lines")
    resume_completes(name, out)

# A second run on an output file in use fails at once and leaves the first run's output alone.
out = os.path.join(work, "busy.jsonl")
first = start_piped(out, [], 20)
wait_for_lines("busy", first, out, 10)
for extra in [[], ["--resume"]]:
    second = run(["run", prompts, "-o", out] + extra + MODEL, check=False)
    c.check(second.returncode == 1 and "is in use by another cbatch run" in second.stderr,
            f"second run {extra}: exit {second.returncode}, {second.stderr.strip()[-200:]}")
first.communicate("".join(json.dumps(r) + "\n" for r in rows[20:]).encode(), timeout=120)
got = {r["id"]: (r["text"], r["output_token_ids"]) for r in read_jsonl(out)}
c.check(first.returncode == 0 and got == reference, "busy: the first run completes to the clean run's results")

# Two different signals are both delivered (two SIGTERMs could merge while pending), in either order; the
# second handler exits at once with 128 + its signal, before the run could write its summary.
out, summary, _ = interrupt("twice", [signal.SIGINT, signal.SIGTERM], [], (130, 143), 150, 10)
c.check(not os.path.exists(summary), "twice: the summary was written, so the second signal did not exit at once")
resume_completes("twice", out)
shutil.rmtree(work, ignore_errors=True)
c.done()
