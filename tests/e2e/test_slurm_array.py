"""examples/slurm on a real single-node Slurm: this test starts munged, slurmctld and slurmd as root
without systemd (its own key, socket, state and spool under a temporary directory, this host the only
node, free ports), submits array.sbatch with `sbatch --wait --array=0-2` on the CPU with a tiny model
(the recipe's one line asking for a GPU taken out), then merge.sbatch depending on the array, and checks
the merged output against one process's --ordered output. Every daemon (and any job left) is stopped at
the end, also on failure. Skipped with a message where Slurm is not installed (make setup installs
slurmctld, slurmd, slurm-client and munge from Debian packages) or the test is not root."""
import os
import re
import shutil
import socket
import subprocess
import sys
import time

from common import BIN, ROOT, SKIP, Checks, run, tiny_dummy_model, tmpdir
from shard_common import masked, mixed_prompts

TOOLS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "sinfo", "scancel")


def skip(why):
    print(f"SKIPPED: {why}")
    sys.exit(SKIP)


if os.geteuid() != 0:
    skip("the Slurm test starts munged, slurmctld and slurmd itself and needs root")
missing = [t for t in TOOLS if shutil.which(t) is None]
if missing:
    skip(f"Slurm is not installed ({', '.join(missing)} not found; make setup installs slurmctld, slurmd, "
         "slurm-client and munge)")

work = tmpdir()
os.chmod(work, 0o700)  # munged refuses key and socket directories others can write
NODE = "cbatchnode"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_line():
    """This host's hardware as slurmd sees it (slurmd -C), under the test's node name and address."""
    out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True).stdout
    line = next((l for l in out.splitlines() if l.startswith("NodeName=")), "NodeName=x CPUs=1")
    line = re.sub(r"RealMemory=\d+", "RealMemory=1", line)  # never drained for memory it reports differently
    return re.sub(r"^NodeName=\S+", f"NodeName={NODE} NodeAddr=127.0.0.1 NodeHostname={socket.gethostname()}", line)


def write_config():
    key = os.path.join(work, "munge.key")
    subprocess.run(["mungekey", "--create", "--keyfile", key], check=True, capture_output=True)
    os.chmod(key, 0o400)
    for d in ("state", "spool"):
        os.makedirs(os.path.join(work, d))
    conf = os.path.join(work, "slurm.conf")
    with open(conf, "w") as f:
        f.write(f"""ClusterName=cbatchtest
SlurmctldHost={socket.gethostname()}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={work}/munge.socket
StateSaveLocation={work}/state
SlurmdSpoolDir={work}/spool
SlurmctldPidFile={work}/slurmctld.pid
SlurmdPidFile={work}/slurmd.pid
SlurmctldLogFile={work}/slurmctld.log
SlurmdLogFile={work}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
{node_line()}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
    return key, conf


def log_tails():
    text = ""
    for name in ("munged.log", "slurmctld.log", "slurmd.log"):
        path = os.path.join(work, name)
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                text += f"--- {name}\n" + "".join(f.readlines()[-15:])
    return text


def wait_for(condition, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return False


def node_is_idle(env):
    proc = subprocess.run(["sinfo", "-h", "-n", NODE, "-o", "%t"], env=env, capture_output=True, text=True)
    return proc.stdout.strip().startswith("idle")


def start_daemons(key, conf, env):
    """munged, slurmctld and slurmd in the foreground, as child processes; the list of those started."""
    daemons = [subprocess.Popen(["munged", "--foreground", "--force", f"--socket={work}/munge.socket",
                                 f"--key-file={key}", f"--pid-file={work}/munged.pid",
                                 f"--log-file={work}/munged.log", f"--seed-file={work}/munged.seed"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)]
    if not wait_for(lambda: os.path.exists(f"{work}/munge.socket"), 20):
        return daemons
    for command in (["slurmctld", "-D", "-c", "-f", conf], ["slurmd", "-D", "-f", conf, "-N", NODE]):
        daemons.append(subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        time.sleep(1)
    return daemons


def stop(daemons, env):
    subprocess.run(["scancel", "--partition=debug"], env=env, capture_output=True)
    for d in reversed(daemons):
        d.terminate()
        try:
            d.wait(timeout=20)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait()


def sbatch(args, env):
    proc = subprocess.run(["sbatch", "--parsable", "--wait"] + args, env=env, cwd=work, capture_output=True,
                          text=True, timeout=600)
    return proc, proc.stdout.strip().split(";")[0]


def run_recipe(c, env):
    prompts = os.path.join(work, "prompts.jsonl")
    mixed_prompts(prompts, 30)
    cpu_script = os.path.join(work, "array-cpu.sbatch")
    with open(os.path.join(ROOT, "examples", "slurm", "array.sbatch")) as f:
        text = f.read()
    c.check("#SBATCH --gpus-per-task=1\n" in text, "the recipe asks for one GPU a task")
    with open(cpu_script, "w") as f:  # this node has no GPU: the same script without that line
        f.write(text.replace("#SBATCH --gpus-per-task=1\n", ""))
    model = tiny_dummy_model(work)
    job_env = {**env, "PROMPTS": prompts, "OUT_DIR": os.path.join(work, "out"), "MODEL": model[1], "CBATCH": BIN,
               "CBATCH_ARGS": " ".join(model[2:])}
    proc, array_id = sbatch(["--array=0-2", "--cpus-per-task=1", cpu_script], job_env)
    c.check(proc.returncode == 0, f"the array job: exit {proc.returncode}: {proc.stderr}")
    merge_script = os.path.join(ROOT, "examples", "slurm", "merge.sbatch")
    proc, _ = sbatch([f"--dependency=afterok:{array_id}", merge_script], job_env)
    c.check(proc.returncode == 0, f"the merge job: exit {proc.returncode}: {proc.stderr}")
    single = os.path.join(work, "single.jsonl")
    run(["run", prompts, "-o", single, "--ordered"] + model, expect_rc=2)
    merged = os.path.join(work, "out", "merged.jsonl")
    c.check(os.path.exists(merged) and masked(merged) == masked(single), "the merged output equals the single run")
    parts = sorted(p for p in os.listdir(os.path.join(work, "out")) if p.startswith("part-") and p.endswith(".jsonl"))
    c.check(parts == ["part-0.jsonl", "part-1.jsonl", "part-2.jsonl"], f"one part a task: {parts}")


key, conf = write_config()
env = {**os.environ, "SLURM_CONF": conf}
daemons = start_daemons(key, conf, env)
try:
    if not wait_for(lambda: node_is_idle(env), 60):
        skip("Slurm could not be started here (the node never became idle):\n" + log_tails())
    c = Checks()
    run_recipe(c, env)
    if c.failed:
        print(log_tails())
finally:
    stop(daemons, env)
c.done()
