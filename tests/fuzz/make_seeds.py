#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/ (run it again after changing it;
the files are committed): JSONL prompt files, tokenizer texts, tiny valid model files (GGUF with F32 and
F16 weights, a llama2.c checkpoint), llama2.c tokenizer.bin files, ShareGPT bench files, and regexes,
GBNF grammars and JSON schemas for the constraint compilers (counted forms at and past their limits). The models are
1 layer, dim 8, vocab 8, context 16, with weights from a fixed generator, a few KB each."""
import json
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SPACE = "\u2581"
PIECES = ["<unk>", "<s>", "</s>", SPACE, "a", "b", SPACE + "a", "ab"]
TYPES = [2, 3, 3, 1, 1, 1, 1, 1]
DIM, HIDDEN, HEADS, KV_HEADS, VOCAB, CONTEXT = 8, 16, 2, 1, 8, 16
HEAD = DIM // HEADS
rng = random.Random(0)


def floats(n):
    return [rng.uniform(-0.5, 0.5) for _ in range(n)]


def write(target, name, data):
    os.makedirs(os.path.join(HERE, "corpus", target), exist_ok=True)
    with open(os.path.join(HERE, "corpus", target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, type_id, payload):
    return gguf_string(key) + struct.pack("<I", type_id) + payload


def gguf_array(key, elem_type, items):
    return gguf_kv(key, 9, struct.pack("<IQ", elem_type, len(items)) + b"".join(items))


# (name, ggml dims with ne[0] = columns)
LLAMA_TENSORS = [("token_embd.weight", [DIM, VOCAB]), ("blk.0.attn_norm.weight", [DIM]),
                 ("blk.0.attn_q.weight", [DIM, DIM]), ("blk.0.attn_k.weight", [DIM, KV_HEADS * HEAD]),
                 ("blk.0.attn_v.weight", [DIM, KV_HEADS * HEAD]), ("blk.0.attn_output.weight", [DIM, DIM]),
                 ("blk.0.ffn_norm.weight", [DIM]), ("blk.0.ffn_gate.weight", [DIM, HIDDEN]),
                 ("blk.0.ffn_up.weight", [DIM, HIDDEN]), ("blk.0.ffn_down.weight", [HIDDEN, DIM]),
                 ("output_norm.weight", [DIM]), ("output.weight", [DIM, VOCAB])]


def gguf_model(f16, tied):
    kvs = [gguf_kv("general.architecture", 8, gguf_string("llama")),
           gguf_kv("llama.embedding_length", 4, struct.pack("<I", DIM)),
           gguf_kv("llama.feed_forward_length", 4, struct.pack("<I", HIDDEN)),
           gguf_kv("llama.block_count", 4, struct.pack("<I", 1)),
           gguf_kv("llama.attention.head_count", 4, struct.pack("<I", HEADS)),
           gguf_kv("llama.attention.head_count_kv", 4, struct.pack("<I", KV_HEADS)),
           gguf_kv("llama.context_length", 4, struct.pack("<I", CONTEXT)),
           gguf_kv("llama.attention.layer_norm_rms_epsilon", 6, struct.pack("<f", 1e-5)),
           gguf_kv("tokenizer.ggml.model", 8, gguf_string("llama")),
           gguf_array("tokenizer.ggml.tokens", 8, [gguf_string(p) for p in PIECES]),
           gguf_array("tokenizer.ggml.scores", 6, [struct.pack("<f", -i) for i in range(VOCAB)]),
           gguf_array("tokenizer.ggml.token_type", 5, [struct.pack("<i", t) for t in TYPES]),
           gguf_kv("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 1)),
           gguf_kv("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 2))]
    tensors = [t for t in LLAMA_TENSORS if not (tied and t[0] == "output.weight")]
    infos, data = b"", b""
    for name, dims in tensors:
        n = 1
        for d in dims:
            n *= d
        is_f16 = f16 and len(dims) == 2
        blob = struct.pack(f"<{n}e" if is_f16 else f"<{n}f", *floats(n))
        infos += gguf_string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        infos += struct.pack("<IQ", 1 if is_f16 else 0, len(data))
        data += blob + b"\0" * (-len(blob) % 32)
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + infos
    return header + b"\0" * (-len(header) % 32) + data


def llama2c_model():
    header = struct.pack("<7i", DIM, HIDDEN, 1, HEADS, KV_HEADS, VOCAB, CONTEXT)
    kv = KV_HEADS * HEAD
    n = (VOCAB * DIM + DIM + DIM * DIM + 2 * kv * DIM + DIM * DIM + DIM + 3 * HIDDEN * DIM + DIM
         + CONTEXT * HEAD)
    return header + struct.pack(f"<{n}f", *floats(n))


def tokenizer_bin(pieces):
    out = struct.pack("<i", max(len(p.encode()) for p in pieces))
    for i, p in enumerate(pieces):
        b = p.encode()
        out += struct.pack("<fi", -float(i), len(b)) + b
    return out


def main():
    write("model_file", "tiny-f32.gguf", gguf_model(f16=False, tied=False))
    write("model_file", "tiny-f16-tied.gguf", gguf_model(f16=True, tied=True))
    write("model_file", "tiny.bin", llama2c_model())
    plain = ["<unk>", "\n<s>\n", "\n</s>\n", " ", "a", "b", " a", "ab"]
    write("tokenizer_bin", "tok8.bin", tokenizer_bin(plain))
    write("tokenizer_bin", "tok-bytes.bin", tokenizer_bin(plain + [f"<0x{b:02X}>" for b in range(256)]))
    lines = [{"id": "q1", "prompt": "I dreamed of", "max_tokens": 4, "temperature": 0, "stop": ["\n"]},
             {"id": 7, "prompt_token_ids": [1, 72, 301], "top_p": 0.9, "top_k": 5, "seed": 3},
             {"id": "c", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
             {"custom_id": "r1", "method": "POST", "url": "/v1/completions",
              "body": {"model": "m", "prompt": "x", "max_completion_tokens": 2, "stop": None}},
             {"custom_id": "r2", "method": "POST", "url": "/v1/chat/completions",
              "body": {"messages": [{"role": "user", "content": "Name three colors."}]}}]
    write("request_parser", "valid.jsonl", "".join(json.dumps(l) + "\n" for l in lines))
    write("request_parser", "mixed.jsonl", b"\xef\xbb\xbf" + json.dumps(lines[0]).encode() + b"\r\n\n{bad\n"
          + b'{"id": "u", "prompt": "\xff"}\n{"id": [1], "max_tokens": -1, "prompt": "x"}\n{"prompt": "torn')
    write("request_parser", "escapes.jsonl", '{"id": "q\\u0031\\t\\"", "prompt": "\\ud83d\\ude00 \\u0000"}\n')
    write("request_parser", "structured.jsonl", "".join(json.dumps(l) + "\n" for l in [
        {"id": "g", "prompt": "x", "structured_outputs": {"grammar": 'root ::= "[" (v ("," v)*)? "]"\nv ::= [0-9]+ | root'}},
        {"id": "s", "prompt": "x", "guided_json": {"$defs": {"n": {"type": "object", "properties": {
            "k": {"type": "array", "items": {"$ref": "#/$defs/n"}}, "v": {"type": "integer", "minimum": -3, "maximum": 70}}}},
            "$ref": "#/$defs/n"}},
        {"id": "r", "prompt": "x", "guided_regex": "(a|b)*c{2,4}", "response_format": {"type": "json_object"}}]))
    write("request_parser", "hardening.jsonl",
          '{"id": "b", "prompt": "x", "logit_bias": {"5": 100, "07": -100.0, "x": 1}, "best_of": 2}\n'
          '{"id": "n", "prompt": "x", "seed": 18446744073709551616, "t": [1, -9223372036854775809, 1e999, 01]}\n'
          '{"custom_id": "e", "method": "POST", "url": "/v1/embeddings", "body": {"model": "P", '
          '"input": ["a", "b"], "dimensions": 2147483648, "truncate_prompt_tokens": 1}}\n'
          '{"custom_id": "c", "method": "POST", "url": "/v1/completions", "body": {"prompt": ["a", "b"], "n": 60000}}\n')
    counted = [{"id": "c1", "prompt": "x", "structured_outputs": {"regex": "a{1000000}"}},
               {"id": "c2", "prompt": "x", "structured_outputs": {"regex": "a{,3}b{2,}c{1000}x{}y{ 1}z{1,2"}},
               {"id": "c3", "prompt": "x", "guided_regex": "a{99999999999999999999}|{1}|a**|a*+|[\\d-a]"},
               {"id": "c4", "prompt": "x", "structured_outputs": {"grammar": 'root ::= "a"{1000000} | "b"{,3} | [a]{2,1}'}},
               {"id": "c5", "prompt": "x", "guided_json": {"type": "array", "items": {"type": "string", "maxLength": 1e30},
                                                         "minItems": 3.0, "maxItems": 18446744073709551615}},
               {"id": "c6", "prompt": "x", "guided_json": {"type": "string", "pattern": "^a{0,1000}\\$$", "minLength": "2"}}]
    write("request_parser", "structured-counts.jsonl", "".join(json.dumps(l) + "\n" for l in counted))
    for name, text in [("counts.re", "a{3}b{2,}c{,4}d{,}e{2,5}?(?:fg){1000}h{}i{a}j{ 1}k{1,2"),
                       ("huge-count.re", "x{1000000}|y{99999999999999999999}|z{1001,}"),
                       ("classes.re", "^[^\\d\\s]\\w+[]a-c-]\\.\\x41\\u00e9\\é+(a|b|)*?.{2}$"),
                       ("rules.re", "\\{(?&1)(,(?&1))*\\}\n[0-9]{1,3}|(?&0)"),
                       ("grammar.gbnf", 'root ::= item{1,3} ("," item){0,}\nitem ::= [a-z\\u00e9]{2} | "\\x41"? num\n'
                                        'num ::= [0-9]{1000} | [0-9]{ 2 , }  # comment\n'),
                       ("huge-count.gbnf", 'root ::= "a"{1000000} | "b"{99999999999999999999,}'),
                       ("schema.json", json.dumps({"type": "object", "properties": {
                           "s": {"type": "string", "minLength": 2, "maxLength": 1000},
                           "p": {"type": "string", "pattern": "^[a-z]{1,4}$"},
                           "a": {"type": "array", "prefixItems": [{"type": "integer", "minimum": -5, "maximum": 500}],
                                 "items": {"type": "boolean"}, "minItems": 1, "maxItems": 100}}, "required": ["s"]})),
                       ("schema-counts.json", '{"type": "string", "maxLength": 1e30, "minLength": 3.5}')]:
        write("constraint", name, text)
    write("tokenizer", "ascii.txt", "I dreamed of a quiet city where the robots sang")
    write("tokenizer", "unicode.txt", "  caf\u00e9 \u65e5\u672c\u8a9e \U0001F600\ttabs\nnewline ")
    write("tokenizer", "bytes.bin", b"\xff\xfe\x00 a\xc3")
    turn = lambda who, text: {"from": who, "value": text}
    write("sharegpt", "two.json", json.dumps([
        {"id": "a", "conversations": [turn("human", "What is 2 + 2? Say why."), turn("gpt", "4, as 2 + 2 = 4."),
                                      turn("human", "thanks")]},
        {"id": "b", "conversations": [turn("human", "hi")]}, {"id": "c"},
        {"conversations": [turn("human", "caf\u00e9 \U0001F600 \"q\"\n"), turn("gpt", "x" * 70)], "id": "d"}]))
    write("sharegpt", "odd.json", '[{"conversations": [{"value": 1}, {"value": "\\ud800"}]}, 5, '
                                  '{"conversations": "x"}, {"conversations": [[], {}]}] ')


if __name__ == "__main__":
    main()
