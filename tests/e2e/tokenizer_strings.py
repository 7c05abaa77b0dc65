"""A deterministic set of test strings for tokenizer agreement: curated cases (code, numbers, whitespace
runs, newlines, accents, CJK, emoji, special-token text, contractions, other scripts) plus random
compositions of such fragments and random assigned code points from many Unicode blocks."""
import random
import unicodedata

CURATED = [
    "Hello world", "hello World!", " leading space", "trailing space ", "  two leading", "tabs\tand\ttabs",
    "\t\tindented", "line\nbreak", "crlf\r\nline", "\n\n\nthree newlines", " \n \n ", "a  \n\n  b", "   ",
    "", " ", "\n", "x\u00a0y", "ideographic\u3000space", "line\u2028separator", "zero\u200bwidth",
    "def f(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    '{"key": [1, 2.5, "three"], "nested": {"a": null}}', "<div class=\"x\">Hi &amp; bye</div>",
    "if x != 3 and y >= 4: pass", "SELECT * FROM t WHERE id = 42;", "#include <stdio.h>", "a->b::c<<=2",
    "3.14159", "1,000,000", "2024-01-01T12:30:00Z", "0x1F 0b1010 1e-9", "v1.2.3-rc4", "$100.00 or €85",
    "123456789012345678901234567890", "phone: +1 (555) 123-4567", "٣٤٥ and ४५६ and ²³",
    "café naïve résumé Ångström", "Ñandú pingüino", "Zürich Straße", "ﬁ ligature", "e\u0301 combining",
    "中文测试", "日本語のテキストです。", "한국어 문장", "混合 mixed テキスト text",
    "👋🌍", "👨‍👩‍👧‍👦 family", "🇫🇷🇩🇪 flags", "smile 😀😃😄!", "✓ ✗ ★ ☆ → ←",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n", "<|endoftext|>", "text<|endoftext|>more", "<|im_start",
    "<|im_end|><|im_end|>", "<repo_name>cbatch<file_sep>", "<s> </s> <unk>",
    "I'm", "they're", "DON'T", "it's we'll you'd I've", "'s 't 're", "rock 'n' roll",
    "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีครับ", "Привет, мир!", "Γειά σου Κόσμε",
    "∑_{i=1}^{n} x_i² ≤ ∞", "....!!!???", "---===***", "a.b.c", "__init__", "snake_case_name", "camelCaseName",
    # o200k's case rules: capitals then lower case, all-caps runs, title case (Lt), modifier letters (Lm),
    # marks, contractions after capitals, slashes after symbols.
    "HTTPServer XMLHttpRequest iPhone McDonald's", "ABCdef GHI's JKL'LL", "\u01c5ungla \u01c8ubljana",
    "\u02b0ello x\u02b0\u02b0Y", "A\u0301B\u0301c \u0915\u093f\u0924\u093e\u092c", "/usr//bin/ --a//b\n/",
    "\u0301start", " \u0301x", "\tTab\nNew", "\u65e5\u672cGo\u8a9eRust",
]

FRAGMENTS = [
    "the", "The", "dream", "token", "batch", "x", "I", "é", "ü", "ñ", "中", "文", "日本", "한", "ب", "ש", "д",
    "0", "7", "42", "123", "2024", "3.5", "1e9", "²", "٣", "四",
    " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\u00a0", "\u3000",
    ".", ",", "!", "?", "'", "\"", "(", ")", "[", "]", "{", "}", "<", ">", "/", "\\", "#", "$", "%", "&", "*",
    "+", "-", "=", "_", "|", "~", "`", "^", "@", ":", ";", "...", "—", "–", "«", "»", "。", "、",
    "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL",
    "😀", "🌍", "👍🏽", "❤️", "🚀", "\u200d", "\u0301",
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im", "|>", "<file_sep>", "def", "return", "self.",
]

BLOCKS = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x52F), (0x590, 0x6FF), (0x900, 0x97F),
          (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2070, 0x209F), (0x20A0, 0x20CF),
          (0x2100, 0x22FF), (0x2460, 0x24FF), (0x2500, 0x27BF), (0x3000, 0x30FF), (0x4E00, 0x4FFF),
          (0xAC00, 0xAD00), (0xFF00, 0xFFEF), (0x1F300, 0x1F64F), (0x1F900, 0x1F9FF), (0x1D400, 0x1D7FF)]


def random_codepoint(rng):
    while True:
        lo, hi = rng.choice(BLOCKS)
        ch = chr(rng.randint(lo, hi))
        if unicodedata.category(ch) not in ("Cn", "Cs", "Co"):
            return ch


def test_strings(num_random=1200, num_codepoint=300, seed=1234):
    rng = random.Random(seed)
    strings = list(CURATED)
    for _ in range(num_random):
        strings.append("".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 24))))
    for _ in range(num_codepoint):
        strings.append("".join(random_codepoint(rng) for _ in range(rng.randint(1, 16))))
    return strings
