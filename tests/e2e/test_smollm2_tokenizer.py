"""SmolLM2's byte-level BPE tokenizer in cbatch agrees with Hugging Face `tokenizers` built from the
GGUF's vocabulary, merges and the SmolLM2 pre-tokenizer (Digits + ByteLevel), on 1,500+ strings; with the
optional shared data, so does GPT-2's vocabulary (tokenizers/ggml-vocab-gpt-2.gguf) with the plain GPT-2
pre-tokenizer, as extra cases."""
import json
import os

from common import Checks, need_modules, need_smollm2, run, shared_extra
from tokenizer_strings import test_strings

need_modules("tokenizers", "gguf")
from hf_reference import hf_tokenizer_from_gguf  # noqa: E402  (after the skip check)

c = Checks()
strings = test_strings()
stdin = "".join(json.dumps({"text": s}) + "\n" for s in strings)
vocabs = [need_smollm2()]
gpt2 = shared_extra(os.path.join("tokenizers", "ggml-vocab-gpt-2.gguf"))
if gpt2:
    vocabs.append(gpt2)
for path in vocabs:
    reference = hf_tokenizer_from_gguf(path)
    proc = run(["tokenize", "--model", path, "--no-special"], stdin=stdin)
    got = [json.loads(line)["ids"] for line in proc.stdout.splitlines()]
    c.check(len(got) == len(strings), f"{path}: {len(got)} result lines for {len(strings)} strings")
    agree = 0
    for s, ids in zip(strings, got):
        want = reference.encode(s, add_special_tokens=False).ids
        agree += ids == want
        c.check(ids == want, f"{os.path.basename(path)}: {s!r}: cbatch {ids} != HF {want}")
    print(f"{os.path.basename(path)}: {agree}/{len(strings)} strings agree with Hugging Face tokenizers")
c.done()
