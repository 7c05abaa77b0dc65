"""examples/k8s/indexed-job.yaml, checked without a cluster: parsed as YAML, it holds a ReadWriteMany
claim, an Indexed Job (completions = parallelism = --num-shards, --shard auto, the completion index in
the environment, one GPU, the claim mounted where the parts are written) and a merge Job that waits for
every part and merges them with the same input. Then the pods' own shell commands are run here, with
/data a temporary directory, the binary under test and a tiny model: index by index, then the merge,
whose output must equal one process's --ordered output but for timing metrics."""
import os
import subprocess

from common import BIN, ROOT, Checks, need_modules, run, tiny_dummy_model, tmpdir
from shard_common import masked, mixed_prompts

(yaml,) = need_modules("yaml")
c = Checks()
with open(os.path.join(ROOT, "examples", "k8s", "indexed-job.yaml")) as f:
    docs = list(yaml.safe_load_all(f))
claims = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
jobs = [d for d in docs if d["kind"] == "Job" and d["apiVersion"] == "batch/v1"]
c.check(len(claims) == 1 and "ReadWriteMany" in claims[0]["spec"]["accessModes"], "one ReadWriteMany claim")
indexed = [j for j in jobs if j["spec"].get("completionMode") == "Indexed"]
merges = [j for j in jobs if j["spec"].get("completionMode") != "Indexed"]
c.check(len(indexed) == 1 and len(merges) == 1, "one Indexed Job and one merge Job")
shards, merge = indexed[0], merges[0]
n = shards["spec"]["completions"]
c.check(shards["spec"]["parallelism"] == n, "parallelism equals completions")


def container(job):
    pod = job["spec"]["template"]["spec"]
    c.check(pod["restartPolicy"] in ("Never", "OnFailure"), f"{job['metadata']['name']}: a Job's restartPolicy")
    mounts = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
    c.check(set(mounts.values()) == {claims[0]["metadata"]["name"]}, f"{job['metadata']['name']} mounts the claim")
    return pod["containers"][0], pod


def script(cont):
    c.check(cont["command"] == ["/bin/sh", "-c"] and len(cont["args"]) == 1, "the container runs one shell script")
    return cont["args"][0]


shard_container, _ = container(shards)
shard_script = script(shard_container)
c.check("--shard auto" in shard_script and f"--num-shards {n}" in shard_script, f"--shard auto --num-shards {n}")
c.check("--resume" in shard_script, "a restarted pod resumes its part")
env = {e["name"]: e for e in shard_container.get("env", [])}
c.check(env.get("JOB_COMPLETION_INDEX", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") ==
        "metadata.annotations['batch.kubernetes.io/job-completion-index']", "JOB_COMPLETION_INDEX from the annotation")
c.check(shard_container["resources"]["limits"].get("nvidia.com/gpu") == 1, "one GPU a pod")
c.check(all(m["mountPath"] == "/data" for m in shard_container["volumeMounts"]), "the claim at /data")
merge_container, merge_pod = container(merge)
merge_script = script(merge_container)
c.check(merge_script.startswith("cbatch merge") and "--input /data/prompts.jsonl" in merge_script, "the merge step")
waits = " ".join(script(i) for i in merge_pod.get("initContainers", []))
c.check(f"-ge {n}" in waits and "summary.json" in waits, "the merge waits for every part's summary")

# The pods' commands, run here.
work = tmpdir()
model = " ".join(tiny_dummy_model(work))
os.makedirs(os.path.join(work, "out"))
mixed_prompts(os.path.join(work, "prompts.jsonl"), 30)


def local(text):
    return (text.replace("--model /data/model.gguf", model).replace("cbatch ", BIN + " ", 1)
            .replace("/data", work))


for index in range(n):
    proc = subprocess.run(["/bin/sh", "-c", local(shard_script)], env={**os.environ, "JOB_COMPLETION_INDEX": str(index)},
                          capture_output=True, text=True)
    c.check(proc.returncode == 0, f"pod {index}: exit {proc.returncode}: {proc.stderr[-500:]}")
proc = subprocess.run(["/bin/sh", "-c", local(merge_script)], capture_output=True, text=True)
c.check(proc.returncode == 0, f"merge pod: exit {proc.returncode}: {proc.stderr[-500:]}")
single = os.path.join(work, "single.jsonl")
run(["run", os.path.join(work, "prompts.jsonl"), "-o", single, "--ordered"] + tiny_dummy_model(work), expect_rc=2)
merged = os.path.join(work, "out", "merged.jsonl")
c.check(os.path.exists(merged) and masked(merged) == masked(single), "the merged output equals the single run")
c.done()
