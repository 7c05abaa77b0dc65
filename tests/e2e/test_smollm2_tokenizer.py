"""SmolLM2's byte-level BPE tokenizer in cbatch agrees with Hugging Face `tokenizers` built from the
GGUF's vocabulary, merges and the SmolLM2 pre-tokenizer (Digits + ByteLevel), on 1,500+ strings; with the
optional shared data, so does GPT-2's vocabulary (tokenizers/ggml-vocab-gpt-2.gguf) with the plain GPT-2
pre-tokenizer, as extra cases."""
import os

from common import Checks, need_modules, need_smollm2, shared_extra
from tokenizer_strings import test_strings

need_modules("tokenizers", "gguf")
from hf_reference import hf_tokenizer_from_gguf  # noqa: E402  (after the skip check)
from tokenizer_checks import check_tokenize, ids_of  # noqa: E402

c = Checks()
strings = test_strings()
vocabs = [need_smollm2()]
gpt2 = shared_extra(os.path.join("tokenizers", "ggml-vocab-gpt-2.gguf"))
if gpt2:
    vocabs.append(gpt2)
for path in vocabs:
    check_tokenize(c, os.path.basename(path), path, strings, ids_of(hf_tokenizer_from_gguf(path)), specials=(False,))
c.done()
