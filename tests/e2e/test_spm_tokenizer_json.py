"""SentencePiece-style tokenizer.json (BPE over merge ranks with byte fallback, as Llama 2's
LlamaTokenizerFast): Llama 2's vocabulary from ../shared/tokenizers with merges derived from its scores
as transformers does. Hugging Face `tokenizers` with that file reproduces the llama-spm suite, and so
must cbatch reading it as a Hugging Face directory; both also agree on 1,200+ strings, with and without
BOS, and with special-token text."""
import json
import os

from common import SHARED, Checks, need, need_modules, run, tmpdir
from tokenizer_strings import test_strings

need_modules("tokenizers", "gguf")
from hf_reference import spm_tokenizer_json_from_gguf  # noqa: E402

vocab = os.path.join(SHARED, "tokenizers", "ggml-vocab-llama-spm.gguf")
need(vocab)
reference = spm_tokenizer_json_from_gguf(vocab)
model = os.path.join(tmpdir(), "llama-spm")
os.makedirs(model)
reference.save(os.path.join(model, "tokenizer.json"))
with open(os.path.join(model, "tokenizer_config.json"), "w") as f:
    json.dump({"add_bos_token": True, "bos_token": "<s>", "eos_token": "</s>"}, f)

c = Checks()
text = open(vocab + ".inp", encoding="utf-8", newline="").read()
cases = text.split("\n__ggml_vocab_test__\n")[:-1]
expected = [[int(x) for x in line.split()] for line in open(vocab + ".out").read().split("\n")[:-1]]
strings = test_strings(num_random=1000, num_codepoint=200, seed=7)
for special in [False, True]:
    inputs = cases + strings + ["Hello</s>world<s>", "<unk>"]
    stdin = "".join(json.dumps({"text": s}) + "\n" for s in inputs)
    proc = run(["tokenize", "--model", model] + ([] if special else ["--no-special"]), stdin=stdin)
    got = [json.loads(line)["ids"] for line in proc.stdout.splitlines()]
    agree = 0
    for i, (s, ids) in enumerate(zip(inputs, got)):
        want = reference.encode(s, add_special_tokens=special).ids
        if i < len(cases) and not special:
            c.check(want == expected[i], f"HF itself misses suite case {s!r}")
        agree += ids == want
        c.check(ids == want, f"special={special} {s!r}: cbatch {ids} != HF {want}")
    print(f"add_special={special}: {agree}/{len(inputs)} strings agree (incl. the {len(cases)} suite cases)")
c.done()
