"""`cbatch tokenize --model FILE.gguf --no-special` reproduces every case of every suite in
../shared/tokenizers (Hugging Face ids without special tokens), whatever vocab files are there."""
import glob
import json
import os

from common import SHARED, Checks, need, run

suite_dir = os.path.join(SHARED, "tokenizers")
need(suite_dir)
SEPARATOR = "\n__ggml_vocab_test__\n"


def read_cases(path):
    text = open(path, encoding="utf-8", newline="").read()
    return text.split(SEPARATOR)[:-1]  # the text after the last separator is not a case


def read_ids(path):
    with open(path, encoding="utf-8", newline="") as f:
        return [[int(x) for x in line.split()] for line in f.read().split("\n")[:-1]]


c = Checks()
vocabs = sorted(glob.glob(os.path.join(suite_dir, "*.gguf")))
c.check(len(vocabs) >= 2, f"{len(vocabs)} vocab files in {suite_dir}")
for vocab in vocabs:
    cases, expected = read_cases(vocab + ".inp"), read_ids(vocab + ".out")
    c.check(len(cases) == len(expected) and len(cases) > 0, f"{vocab}: {len(cases)} cases, {len(expected)} id lines")
    stdin = "".join(json.dumps({"text": t}) + "\n" for t in cases)
    got = [json.loads(line)["ids"] for line in run(["tokenize", "--model", vocab, "--no-special"], stdin=stdin).stdout.splitlines()]
    passed = sum(g == e for g, e in zip(got, expected))
    for text, g, e in zip(cases, got, expected):
        c.check(g == e, f"{os.path.basename(vocab)}: {text!r}: {g} != {e}")
    print(f"{os.path.basename(vocab)}: {passed}/{len(cases)} cases")
c.done()
