"""tools/score.py on tiny-spm: the perplexity of a text in windows, and a multiple-choice answer, equal
what the float64 reference (reference_llama.py) gives for the same token ids (cbatch tokenize's)."""
import json
import math
import os
import subprocess
import sys

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

from common import BIN, ROOT, Checks, need_modules, run, tiny_spm_gguf, tmpdir

need_modules("numpy", "gguf")
from logprob_reference import reference_logprobs  # noqa: E402
from reference_llama import GgufLlama  # noqa: E402

MODEL = tiny_spm_gguf()
TEXT = ("I dreamed of a city made of glass, where every window held a different sky. The streets hummed with "
        "quiet machines and the rivers ran with light. I walked until the morning folded into itself.\n")
ITEM = {"question": "I dreamed of a city made of", "choices": [" glass", " quiet machines and rivers", " light"]}
c = Checks()
work = tmpdir()
reference = GgufLlama(MODEL)


def tool(*args):
    env = dict(os.environ, CBATCH_BIN=BIN)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "score.py")] + list(args), capture_output=True,
                          text=True, env=env)
    if proc.returncode != 0:
        raise AssertionError(f"tools/score.py {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return json.loads(proc.stdout)


def tokenize(text, special):
    out = run(["tokenize", "--model", MODEL] + ([] if special else ["--no-special"]), stdin=json.dumps({"text": text}) + "\n")
    return json.loads(out.stdout)["ids"]


def log_likelihood(ids, first):
    """Reference sum of the log-probabilities of ids[first:], each given the ids before it."""
    table = reference_logprobs(reference, ids)
    return sum(table[j - 1][ids[j]] for j in range(first, len(ids)))


text_path = os.path.join(work, "text.txt")
with open(text_path, "w") as f:
    f.write(TEXT)
got = tool("perplexity", "--model", MODEL, text_path, "--window", "40")
plain, bos = tokenize(TEXT, False), tokenize("", True)
want_ll, count = 0.0, 0
for i in range(0, len(plain), 40):
    want_ll += log_likelihood(bos + plain[i:i + 40], len(bos))
    count += len(plain[i:i + 40])
print(f"perplexity {got['perplexity']:.4f} over {got['tokens_scored']} tokens, reference {math.exp(-want_ll / count):.4f}")
c.check(got["tokens_scored"] == count, f"{got['tokens_scored']} tokens scored, expected {count}")
c.check(abs(got["log_likelihood"] - want_ll) <= 1e-4 * count, f"log-likelihood {got['log_likelihood']}, reference {want_ll}")

item_path = os.path.join(work, "item.json")
with open(item_path, "w") as f:
    json.dump(ITEM, f)
got = tool("choice", "--model", MODEL, item_path, "--", "--threads", "2")
question = tokenize(ITEM["question"], True)
want = []
for choice, score in zip(ITEM["choices"], got["scores"]):
    ids = tokenize(ITEM["question"] + choice, True)
    shared = next((i for i, (a, b) in enumerate(zip(question, ids)) if a != b), len(question))
    want.append(log_likelihood(ids, shared))
    c.check(abs(score["logprob"] - want[-1]) <= 1e-4 * len(ids), f"choice {choice!r}: {score['logprob']}, reference {want[-1]}")
print(f"choice scores {[round(s['logprob'], 4) for s in got['scores']]}, reference {[round(float(w), 4) for w in want]}")
c.check(got["answer"] == max(range(len(want)), key=lambda i: want[i]), f"answer {got['answer']}, reference scores {want}")
c.done()
