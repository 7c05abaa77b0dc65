"""WordPiece from tokenizer.json (all-MiniLM-L6-v2's BERT uncased tokenizer: BertNormalizer, BertPreTokenizer,
WordPiece with "##" continuations and [UNK], TemplateProcessing [CLS] ... [SEP]) read by cbatch as a Hugging
Face directory agrees with the `tokenizers` package on 1,300+ strings (the shared hard cases plus BERT's own:
accents, case, CJK spacing, control characters, words past max_input_chars_per_word, special-token text),
with and without the special tokens. Two variants of the same file check the options: a cased normalizer
(lowercase and strip_accents off, CJK spacing off) and the BertProcessing post-processor."""
import json
import os

from common import Checks, need_minilm, need_modules, run, tmpdir
from tokenizer_strings import test_strings

need_modules("tokenizers")
from tokenizers import Tokenizer  # noqa: E402

BERT_CURATED = [
    "Héllo WÖRLD", "ÀÉÎÕÜ àéîõü ç Ç", "İstanbul ΣΑΣ Ǆemo ẞ", "straße STRASSE", "naïve café", "Ａｂｃ fullwidth",
    "中文字符和English混合", "\U00020000\U0002A6D6 rare CJK", "日本語とかな", "한국어",
    "\x00\x01\x1f\x7f\x85control\u200b\ufeff\ufffd", "tab\there\nnewline\r\n", "\ue000 private use",
    "x" * 100, "y" * 101, "unbelievably antidisestablishmentarianism", "[CLS] [SEP] [MASK] [PAD] [UNK]",
    "text[SEP]more[cls]", "$5 + 3 = 8 ^ 2 | ~ ` < >", "e-mail: someone@example.com!", "🙂 🥹 \U0001FAE8",
    "", " ", "a", "##ing ## #",
]


def check_file(c, label, model_dir, strings):
    reference = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    reference.no_truncation()
    reference.no_padding()
    for special in [True, False]:
        stdin = "".join(json.dumps({"text": s}) + "\n" for s in strings)
        proc = run(["tokenize", "--model", model_dir] + ([] if special else ["--no-special"]), stdin=stdin)
        got = [json.loads(line)["ids"] for line in proc.stdout.splitlines()]
        c.check(len(got) == len(strings), f"{label}: {len(got)} result lines for {len(strings)} strings")
        agree = 0
        for s, ids in zip(strings, got):
            want = reference.encode(s, add_special_tokens=special).ids
            agree += ids == want
            c.check(ids == want, f"{label} special={special} {s!r}: cbatch {ids} != tokenizers {want}")
        print(f"{label}, add_special={special}: {agree}/{len(strings)} strings agree")


def variant(work, source, name, edit):
    """A copy of source's tokenizer.json with edit(json) applied, in its own directory."""
    with open(os.path.join(source, "tokenizer.json")) as f:
        data = json.load(f)
    edit(data)
    out = os.path.join(work, name)
    os.makedirs(out)
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(data, f)
    return out


def cased(data):
    data["normalizer"].update({"lowercase": False, "strip_accents": False, "handle_chinese_chars": False})


def bert_processing(data):
    data["post_processor"] = {"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}


c = Checks()
work = tmpdir()
minilm = need_minilm()
strings = BERT_CURATED + test_strings(num_random=1000, num_codepoint=300, seed=11)
check_file(c, "all-MiniLM-L6-v2", minilm, strings)
check_file(c, "cased variant", variant(work, minilm, "cased", cased), strings)
check_file(c, "BertProcessing variant", variant(work, minilm, "bert-processing", bert_processing), BERT_CURATED)
c.done()
