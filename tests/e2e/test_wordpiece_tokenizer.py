"""WordPiece from tokenizer.json (all-MiniLM-L6-v2's BERT uncased tokenizer: BertNormalizer, BertPreTokenizer,
WordPiece with "##" continuations and [UNK], TemplateProcessing [CLS] ... [SEP]) read by cbatch as a Hugging
Face directory agrees with the `tokenizers` package on 1,300+ strings (the shared hard cases plus BERT's own:
accents, case, CJK spacing, control characters, words past max_input_chars_per_word, special-token text),
with and without the special tokens. Two variants of the same file check the options: a cased normalizer
(lowercase and strip_accents off, CJK spacing off) and the BertProcessing post-processor."""
from common import Checks, need_minilm, need_modules, tmpdir
from tokenizer_strings import test_strings

need_modules("tokenizers")
from tokenizer_checks import check_tokenize, file_reference, tokenizer_variant  # noqa: E402

BERT_CURATED = [
    "Héllo WÖRLD", "ÀÉÎÕÜ àéîõü ç Ç", "İstanbul ΣΑΣ Ǆemo ẞ", "straße STRASSE", "naïve café", "Ａｂｃ fullwidth",
    "中文字符和English混合", "\U00020000\U0002A6D6 rare CJK", "日本語とかな", "한국어",
    "\x00\x01\x1f\x7f\x85control\u200b\ufeff\ufffd", "tab\there\nnewline\r\n", "\ue000 private use",
    "x" * 100, "y" * 101, "unbelievably antidisestablishmentarianism", "[CLS] [SEP] [MASK] [PAD] [UNK]",
    "text[SEP]more[cls]", "$5 + 3 = 8 ^ 2 | ~ ` < >", "e-mail: someone@example.com!", "🙂 🥹 \U0001FAE8",
    "", " ", "a", "##ing ## #",
]


def cased(data):
    data["normalizer"].update({"lowercase": False, "strip_accents": False, "handle_chinese_chars": False})


def bert_processing(data):
    data["post_processor"] = {"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}


c = Checks()
work = tmpdir()
minilm = need_minilm()
strings = BERT_CURATED + test_strings(num_random=1000, num_codepoint=300, seed=11)
check_tokenize(c, "all-MiniLM-L6-v2", minilm, strings, file_reference(minilm))
cased_dir = tokenizer_variant(work, minilm, "cased", cased)
check_tokenize(c, "cased variant", cased_dir, strings, file_reference(cased_dir))
processing_dir = tokenizer_variant(work, minilm, "bert-processing", bert_processing)
check_tokenize(c, "BertProcessing variant", processing_dir, BERT_CURATED, file_reference(processing_dir))
c.done()
