"""Every pre-tokenizer family cbatch implements (GPT-2, StarCoder/SmolLM, Llama 3, Qwen2, o200k (gpt-4o,
gpt-oss) and llama.cpp's default) agrees with Hugging Face `tokenizers` running the family's regexes (Oniguruma), on 1,200+
strings: SmolLM2's byte-level vocabulary (49,152 tokens, from its GGUF) is written into vocab-only GGUFs
that differ only in tokenizer.ggml.pre, and (except llama.cpp's default, which no tokenizer.json spells)
into the tokenizer.json that `tokenizers` itself saves, read by cbatch as a Hugging Face directory. With the
optional shared data, GPT-2's own vocabulary goes through the same families as extra cases. An unknown
tokenizer.ggml.pre is a clear error that names the key and the value."""
import json
import os

from common import Checks, need_modules, need_smollm2, run, shared_extra, tmpdir
from tokenizer_strings import test_strings

need_modules("tokenizers", "gguf")
from hf_reference import gguf_vocab, hf_tokenizer, write_vocab_gguf  # noqa: E402

FAMILIES = ["gpt-2", "starcoder", "llama-bpe", "qwen2", "gpt-4o", "default"]
strings = test_strings(num_random=1000, num_codepoint=200, seed=99)
stdin = "".join(json.dumps({"text": s}) + "\n" for s in strings)
work = tmpdir()
c = Checks()


def check_families(label, tokens, types, merges):
    for pre in FAMILIES:
        reference = hf_tokenizer(tokens, types, merges, pre)
        wants = [reference.encode(s, add_special_tokens=False).ids for s in strings]
        gguf_path = os.path.join(work, f"{label}-{pre}.gguf")
        write_vocab_gguf(gguf_path, tokens, types, merges, pre)
        hf_dir = os.path.join(work, f"{label}-hf-{pre}")
        os.makedirs(hf_dir)
        reference.save(os.path.join(hf_dir, "tokenizer.json"))
        for kind, path in [("gguf", gguf_path), ("tokenizer.json", hf_dir)][:1 if pre == "default" else 2]:
            proc = run(["tokenize", "--model", path, "--no-special"], stdin=stdin)
            got = [json.loads(line)["ids"] for line in proc.stdout.splitlines()]
            c.check(len(got) == len(strings), f"{label} {pre} {kind}: {len(got)} lines for {len(strings)} strings")
            agree = 0
            for s, ids, want in zip(strings, got, wants):
                agree += ids == want
                c.check(ids == want, f"{label} {pre} {kind}: {s!r}: cbatch {ids} != HF {want}")
            print(f"{label} vocabulary, pre {pre} from {kind}: {agree}/{len(strings)} strings agree with "
                  "Hugging Face tokenizers")


tokens, types, merges, _ = gguf_vocab(need_smollm2())
check_families("smollm2", tokens, types, merges)
gpt2 = shared_extra(os.path.join("tokenizers", "ggml-vocab-gpt-2.gguf"))
if gpt2:
    check_families("gpt-2", *gguf_vocab(gpt2)[:3])

bad = os.path.join(work, "vocab-unknown.gguf")
write_vocab_gguf(bad, tokens, types, merges, "my-own-pre")
proc = run(["tokenize", "--model", bad], stdin='{"text": "x"}\n', check=False)
c.check(proc.returncode == 1, f"unknown pre: exit {proc.returncode}")
c.check("tokenizer.ggml.pre" in proc.stderr and "my-own-pre" in proc.stderr, f"unknown pre message: {proc.stderr}")
c.done()
