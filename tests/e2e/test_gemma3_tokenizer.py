"""Gemma 3's tokenizer (262,144 SentencePiece pieces with byte fallback, no space prefix, BOS added,
user-defined runs of spaces, tabs and newlines and HTML tags matched whole) read by cbatch from the
Gemma 3 270M GGUF agrees with the tokenizer `transformers` converts from the same file
(transformers_gguf.py) on 1,800+ strings, with and without BOS: the shared hard cases (whitespace runs,
digits, CJK, emoji, accents, other scripts) plus Gemma's own (its turn and image markers, <unusedN>,
long space/tab/newline runs, HTML tags, characters only byte fallback can spell). The same tokenizer
saved as the tokenizer.json transformers writes (Replace(" ", "▁"), Split(" "), 515k merges) and read by
cbatch as a Hugging Face directory agrees too."""
import json
import os
import random
import time

from common import Checks, need_gemma3, need_modules, run, tmpdir
from tokenizer_strings import test_strings

need_modules("transformers", "gguf")
from tokenizer_checks import check_tokenize  # noqa: E402
from transformers_gguf import transformers_tokenizer_from_gguf  # noqa: E402

GEMMA_CURATED = [
    "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n", "<bos><eos><pad><unk><mask>",
    "text<end_of_turn>", "<start_of_turn", "<unused0> <unused6241>", "[multimodal]", "<start_of_image><end_of_image>",
    " " * 31, " " * 32, " " * 40, "\t" * 31, "\t" * 33, "\n" * 31, "\n" * 35, "x" + " " * 5 + "y", "a\t\t\tb",
    "<table><tr><td>1</td></tr></table>", "<b>bold</b> <i>it</i> <code>x</code>", "<h1>T</h1>", "<div>",
    "\U00020000\U0002A6D6 rare CJK", "\x00\x01\x7f control", "\ue000 private use", "\U0001FAE8 new emoji",
    "ǅ ȸ ʬ ꞔ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", " ", "  leading", "trailing  ", "\u2581 literal marker", "\u2581\u2581x",
]
GEMMA_FRAGMENTS = ["<start_of_turn>", "<end_of_turn>", "user\n", "model\n", "<bos>", "<b>", "</b>", "<td>",
                   "    ", "\t\t", "\n\n\n", "\u2581", "\U00020001", "\x05", "\ue001", "Gemma", " é", "999"]


def gemma_strings():
    rng = random.Random(3)
    strings = test_strings(num_random=1000, num_codepoint=300, seed=270) + GEMMA_CURATED
    pieces = GEMMA_FRAGMENTS + ["the", " ", "中文", "😀", "3.14", "x", "\n", "  "]
    for _ in range(300):
        strings.append("".join(rng.choice(pieces) for _ in range(rng.randint(1, 16))))
    return strings


path = need_gemma3()
start = time.time()
reference, config = transformers_tokenizer_from_gguf(path)
print(f"transformers built Gemma 3's tokenizer in {time.time() - start:.1f} s")
c = Checks()
c.check(config.get("add_bos_token") is True and config.get("bos_token") == "<bos>", f"reference config {config}")
strings = gemma_strings()
hf_dir = tmpdir()
reference.backend_tokenizer.save(os.path.join(hf_dir, "tokenizer.json"))
with open(os.path.join(hf_dir, "tokenizer_config.json"), "w") as f:
    json.dump({"add_bos_token": True, "bos_token": "<bos>", "eos_token": "<eos>"}, f)
for label, model in [("GGUF", path), ("tokenizer.json", hf_dir)]:
    check_tokenize(c, f"Gemma 3 from its {label}", model, strings,
                   lambda s, special: reference(s, add_special_tokens=special)["input_ids"], specials=(False, True))

# Loading 262k pieces must stay fast: the whole command, model file opened and one line tokenized.
times = []
for _ in range(3):
    start = time.time()
    run(["tokenize", "--model", path], stdin='{"text": "x"}\n')
    times.append(time.time() - start)
print(f"cbatch tokenize with Gemma 3's vocabulary: best of 3 runs {min(times):.3f} s")
c.check(min(times) < 2.0, f"cbatch tokenize took {min(times):.2f} s with Gemma 3's vocabulary")
c.done()
