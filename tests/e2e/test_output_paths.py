"""Outputs that are not plain files, and writes that fail. --resume refuses an output that is not a regular
file (a device, a named pipe) at once instead of reading it forever; a named pipe as output or as the
prompts file works with a process at its other end; a stop signal ends a long read before the engine
starts, or a named pipe's wait for its reader. merge writes through a symlink to its target (the link stays, the target keeps its permission
bits) and refuses an existing output that is not a regular file, leaving it as it was. Every output
stream that cannot be written (a full disk: /dev/full) exits 1 with a message naming it, "standard
output" for stdout. Every cbatch here runs under a time limit, so a hang fails the test instead of
stopping CI."""
import json
import os
import shutil
import signal
import stat
import subprocess
import time

from common import BIN, Checks, read_jsonl, tiny_dummy_model, tiny_spm_gguf, tmpdir, write_jsonl

SPM = tiny_spm_gguf()
c = Checks()
work = tmpdir()
MODEL = tiny_dummy_model(work)
LIMIT_S = 60  # no cbatch here needs more than a few seconds; past this it is hung
FULL = "/dev/full"
assert os.path.exists(FULL), "this test needs /dev/full (every Linux system has it)"

prompts = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts, [{"id": f"p{i}", "prompt": f"line {i} of the output test", "max_tokens": 3, "temperature": 0}
                      for i in range(6)])


def cbatch(args, stdin=None, stdout=subprocess.PIPE, timeout=LIMIT_S):
    """(exit status, stdout, stderr); the exit status is None when cbatch had to be killed at the limit."""
    try:
        proc = subprocess.run([BIN] + args, input=stdin, stdout=stdout, stderr=subprocess.PIPE, text=True,
                              timeout=timeout)
        return proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return None, "", err


def refused(name, result, *needles):
    rc, _, err = result
    status = f"still running after {LIMIT_S} s" if rc is None else f"exit {rc}"
    c.check(rc == 1, f"{name}: {status}, expected exit 1; stderr: {err[-400:]}")
    for needle in needles:
        c.check(needle in err, f"{name}: stderr does not say {needle!r}: {err[-400:]}")


def fifo(name):
    path = os.path.join(work, name)
    os.mkfifo(path)
    return path


def kind(path):
    mode = os.lstat(path).st_mode
    for test, text in ((stat.S_ISLNK, "symlink"), (stat.S_ISFIFO, "fifo"), (stat.S_ISDIR, "directory"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISREG, "regular file")):
        if test(mode):
            return text
    return "other"


# --- --resume onto what is not a regular file; named pipes; stop signals during long reads. ---
t0 = time.monotonic()
refused("--resume -o /dev/zero", cbatch(["run", prompts, "-o", "/dev/zero", "--resume"] + MODEL),
        "'/dev/zero'", "character device", "regular file")
c.check(time.monotonic() - t0 < 20, f"--resume -o /dev/zero took {time.monotonic() - t0:.1f} s to refuse")
pipe = fifo("resume.fifo")
refused("--resume -o FIFO", cbatch(["run", prompts, "-o", pipe, "--resume"] + MODEL), pipe, "named pipe", "regular file")

# -o FIFO with a reader at the other end: the results go through (the output lock must not wait for a writer).
pipe = fifo("out.fifo")
reader = subprocess.Popen(["cat", pipe], stdout=subprocess.PIPE)
rc, _, err = cbatch(["run", prompts, "-o", pipe] + MODEL)
try:
    got, _ = reader.communicate(timeout=10)
except subprocess.TimeoutExpired:
    reader.kill()
    got, _ = reader.communicate()
c.check(rc == 0, f"-o FIFO: exit {rc}, expected 0: {err[-400:]}")
c.check(len(got.splitlines()) == 6, f"-o FIFO: the reader got {len(got.splitlines())} lines, expected 6")

# The prompts from a named pipe (as `cbatch run <(...)` gives them): counting the lines for the progress
# line must not read the pipe (its lines would be lost) nor wait on it.
pipe = fifo("prompts.fifo")
writer = subprocess.Popen(["sh", "-c", f'cat "{prompts}" > "{pipe}"'])
out = os.path.join(work, "from-fifo.jsonl")
rc, _, err = cbatch(["run", pipe, "-o", out] + MODEL)
if writer.poll() is None:  # cbatch never opened the pipe
    writer.kill()
writer.wait()
c.check(rc == 0, f"prompts from a FIFO: exit {rc}, expected 0: {err[-400:]}")
c.check(os.path.exists(out) and len(read_jsonl(out)) == 6, "prompts from a FIFO: not every line was answered")


def stops_on_sigterm(name, args, check_after=None):
    """The run is still reading when SIGTERM comes 2 s after its start: it must stop within 10 s with 143."""
    proc = subprocess.Popen([BIN] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    t1 = time.monotonic()
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    err = err.decode(errors="replace")
    c.check(proc.returncode == 143, f"{name}: exit {proc.returncode} after SIGTERM ({time.monotonic() - t1:.1f} s; "
                                    f"-9: still reading after 10 s, killed), expected 143: {err[-400:]}")
    if check_after:
        check_after()


# Sparse files of zeros: regular files that take minutes to read, and no disk space.
huge = 1 << 40
big_out = os.path.join(work, "big-out.jsonl")
with open(big_out, "wb") as f:
    f.truncate(huge)
stops_on_sigterm("SIGTERM while --resume reads the output", ["run", prompts, "-o", big_out, "--resume"] + MODEL,
                 lambda: c.check(os.path.getsize(big_out) == huge, "an interrupted --resume read cut the output"))
os.remove(big_out)
big_prompts = os.path.join(work, "big-prompts.jsonl")
with open(big_prompts, "wb") as f:
    f.truncate(huge)
stops_on_sigterm("SIGTERM while the prompts' lines are counted",
                 ["run", big_prompts, "-o", os.path.join(work, "big.jsonl")] + MODEL)
os.remove(big_prompts)
stops_on_sigterm("SIGTERM while reading /dev/zero as prompts", ["run", "/dev/zero", "-o", os.path.join(work, "z.jsonl")] + MODEL)
# A named pipe as output or trace waits for its reader, as a shell redirection does, but not past a signal.
stops_on_sigterm("SIGTERM while -o FIFO waits for a reader", ["run", prompts, "-o", fifo("no-reader.fifo")] + MODEL)
stops_on_sigterm("SIGTERM while --trace FIFO waits for a reader",
                 ["run", prompts, "-o", os.path.join(work, "t.jsonl"), "--trace", fifo("no-trace-reader.fifo")] + MODEL)

# --shard fingerprints the prompts (a second read): a named pipe is refused, not read twice.
pipe = fifo("shard.fifo")
refused("--shard with prompts from a FIFO", cbatch(["run", pipe, "-o", os.path.join(work, "s.jsonl"), "--shard", "0/2"]
                                                   + MODEL), pipe, "named pipe", "regular file")
refused("--data-parallel-size with prompts from a FIFO",
        cbatch(["run", pipe, "-o", os.path.join(work, "dp.jsonl"), "--data-parallel-size", "2"] + MODEL),
        pipe, "named pipe", "regular file")

# --- merge writes through a symlink and refuses what is not a regular file. ---
shards = [os.path.join(work, f"shard-{i}.jsonl") for i in range(2)]
for i, shard in enumerate(shards):
    rc, _, err = cbatch(["run", prompts, "-o", shard, "--shard", f"{i}/2"] + MODEL)
    c.check(rc == 0, f"shard {i}/2: exit {rc}: {err[-400:]}")
merged = os.path.join(work, "merged.jsonl")
rc, _, err = cbatch(["merge", merged] + shards + ["--input", prompts, "--quiet"])
c.check(rc == 0, f"merge: exit {rc}: {err[-400:]}")
with open(merged, "rb") as f:
    reference = f.read()
c.check(len(reference.splitlines()) == 6, "merge: 6 lines")

target = os.path.join(work, "target.jsonl")
with open(target, "w") as f:
    f.write("old content\n")
os.chmod(target, 0o640)
link = os.path.join(work, "link.jsonl")
os.symlink("target.jsonl", link)  # relative: resolved against the link's directory
rc, _, err = cbatch(["merge", link] + shards + ["--input", prompts, "--quiet"])
c.check(rc == 0, f"merge into a symlink: exit {rc}: {err[-400:]}")
c.check(kind(link) == "symlink" and os.readlink(link) == "target.jsonl", f"merge replaced the symlink: {kind(link)}")
with open(target, "rb") as f:
    c.check(f.read() == reference, "merge into a symlink: its target does not hold the merged lines")
c.check(stat.S_IMODE(os.stat(target).st_mode) == 0o640,
        f"merge into a symlink: target mode {oct(stat.S_IMODE(os.stat(target).st_mode))}, expected 0o640")
dangling = os.path.join(work, "dangling.jsonl")
os.symlink("new-target.jsonl", dangling)
rc, _, err = cbatch(["merge", dangling] + shards + ["--input", prompts, "--quiet"])
c.check(rc == 0 and kind(dangling) == "symlink", f"merge into a dangling symlink: exit {rc}, {kind(dangling)}: {err[-300:]}")
new_target = os.path.join(work, "new-target.jsonl")
c.check(os.path.exists(new_target) and open(new_target, "rb").read() == reference,
        "merge into a dangling symlink: the file it names does not hold the merged lines")
leftovers = [n for n in os.listdir(work) if "-tmp-" in n]
c.check(not leftovers, f"merge left temporary files: {leftovers}")

# Existing outputs that are not regular files: refused before any shard is read, and left as they were.
not_regular = [(fifo("merge.fifo"), "fifo", "named pipe"), (os.path.join(work, "a-directory"), "directory", "directory")]
os.mkdir(not_regular[1][0])
if os.geteuid() == 0:  # a private copy of /dev/full's device node: the real one is never put at risk
    device = os.path.join(work, "full-device")
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    not_regular.append((device, "character device", "character device"))
else:
    print("note: not root, so merge into a character device is not tried (a FIFO and a directory are)")
link_to_fifo = os.path.join(work, "link-to-fifo.jsonl")
os.symlink(not_regular[0][0], link_to_fifo)
for path, was, needle in not_regular + [(link_to_fifo, "symlink", "named pipe")]:
    t0 = time.monotonic()
    refused(f"merge into a {was}", cbatch(["merge", path] + shards + ["--input", prompts, "--quiet"]),
            f"'{path}'", needle, "not a regular file")
    c.check(kind(path) == was, f"merge into a {was}: it is now a {kind(path)}")
    c.check(time.monotonic() - t0 < 20, f"merge into a {was}: took {time.monotonic() - t0:.1f} s")
c.check(kind(not_regular[0][0]) == "fifo", "merge through a symlink to a FIFO replaced the FIFO")
# An output is never one of the files read, however it is spelled: it would be truncated or replaced.
same_file = os.path.join(work, "same-file.jsonl")
for name, target, args, needle in [
        ("run -o a link to the prompts", prompts, ["run", prompts, "-o", same_file] + MODEL, "must differ"),
        ("merge into a link to a shard", shards[0], ["merge", same_file] + shards + ["--input", prompts],
         "is also given as a shard"),
        ("merge into a link to the input", prompts, ["merge", same_file] + shards + ["--input", prompts],
         "must differ")]:
    if os.path.lexists(same_file):
        os.remove(same_file)
    os.symlink(target, same_file)
    before = {path: open(path, "rb").read() for path in [prompts] + shards}
    refused(name, cbatch(args), needle)
    c.check(all(open(path, "rb").read() == data for path, data in before.items()), f"{name}: an input was changed")
# --data-parallel-size merges at the end: an output merge would refuse is refused before any process starts.
refused("--data-parallel-size -o FIFO",
        cbatch(["run", prompts, "-o", not_regular[0][0], "--data-parallel-size", "2"] + MODEL), not_regular[0][0],
        "named pipe", "not a regular file")
c.check(not any(n.startswith("merge.fifo.shard") for n in os.listdir(work)), "--data-parallel-size -o FIFO ran shards")
# The shards and the input must be regular files too: merge reads each of them twice.
refused("merge of a FIFO shard", cbatch(["merge", merged, shards[0], not_regular[0][0], "--input", prompts]),
        not_regular[0][0], "named pipe")
refused("merge with a FIFO input", cbatch(["merge", merged] + shards + ["--input", not_regular[0][0]]),
        not_regular[0][0], "named pipe")

# --- Every output stream checked: a full disk exits 1 and names what could not be written. ---
def full_stream(name, args, needle, stdin=None, to_stdout=False):
    with open(FULL, "w") as full:
        result = cbatch(args, stdin=stdin, stdout=full if to_stdout else subprocess.PIPE)
    refused(name, result, needle)


small_bench = ["bench", "--num-prompts", "2", "--input-len", "4", "--output-len", "2", "--modes", "continuous",
               "--no-warmup"] + MODEL
for name, args, needle, to_stdout in [
        ("run -o /dev/full", ["run", prompts, "-o", FULL] + MODEL, FULL, False),
        ("run -o - > /dev/full", ["run", prompts, "-o", "-"] + MODEL, "standard output", True),
        ("run --summary /dev/full", ["run", prompts, "-o", os.path.join(work, "r.jsonl"), "--summary", FULL] + MODEL,
         FULL, False),
        ("run --trace /dev/full", ["run", prompts, "-o", os.path.join(work, "r.jsonl"), "--trace", FULL] + MODEL,
         FULL, False),
        ("merge --summary /dev/full", ["merge", merged] + shards + ["--input", prompts, "--quiet", "--summary", FULL],
         FULL, False),
        ("inspect > /dev/full", ["inspect", "--model", SPM], "standard output", True),
        ("--version > /dev/full", ["--version"], "standard output", True),
        ("bench > /dev/full", small_bench, "standard output", True),
        ("bench --json /dev/full", small_bench + ["--json", FULL], FULL, False)]:
    full_stream(name, args, needle, to_stdout=to_stdout)
full_stream("tokenize > /dev/full", ["tokenize", "--model", SPM], "standard output",
            stdin=json.dumps({"text": "I dreamed of a quiet city"}) + "\n", to_stdout=True)
# A summary is still written to a place that is not a regular file (/dev/null, a pipe).
rc, _, err = cbatch(["run", prompts, "-o", os.path.join(work, "r.jsonl"), "--summary", "/dev/null", "--trace",
                     "/dev/null"] + MODEL)
c.check(rc == 0, f"--summary /dev/null --trace /dev/null: exit {rc}: {err[-300:]}")
shutil.rmtree(work, ignore_errors=True)
c.done()
