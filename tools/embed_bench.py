#!/usr/bin/env python3
"""CPU embedding throughput of cbatch and onnxruntime side by side, on the same BERT sentence-transformers
directory (all-MiniLM-L6-v2 by default) and the same passages, in one run.

The passages: `cbatch bench --dataset passages-synthetic`'s (MS MARCO-like lengths: words drawn
log-normally, median 55, clipped to 8..400; common English words; Python's Mersenne twister from --seed),
made here by the same draws, so both engines embed the same texts (checked: cbatch's token count must
equal the one counted here). cbatch runs them as one token-budgeted ragged batch a step, no padding. onnxruntime runs the same encoder as a graph this script
builds from the model's safetensors (standard ONNX operators; the tokens from the `tokenizers` package),
as sentence-transformers feeds it: passages sorted by length, batches of --batch-size padded to their
longest, mean pooling under the attention mask, then L2 normalisation. Before timing, the two engines'
embeddings of the first 64 passages are compared (cosine; both must compute the same function).

Reported for each engine: tokens/s (real tokens, the padding not counted), the GFLOP/s those tokens need
(2 x the encoder layers' parameters a token, plus attention), and that rate as a fraction of the fp32
GEMM peak (--peak-gflops, else the one `cbatch bench` measured in the same run: cbatch's own matmul on a
1024^3 product, so onnxruntime's MLAS can exceed 1.0).

    pip install onnx onnxruntime tokenizers numpy
    tools/embed_bench.py --cbatch build/cbatch [--model models/all-MiniLM-L6-v2] [--threads 2] \\
        [--num-passages 2000] [--batch-size 32] [--repeat 3] [--json OUT.json]
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time

WORDS = ("the of and to in a is that for it as was with be by on not he this are or his from at which but "
         "have an they you were her she there been one all we their has would when if so no will more what out "
         "up into can who about some them other than then its time two may over also new any these after first "
         "most made people water river city health report market energy system music history science school "
         "government company research student family country world information program question service "
         "development university children change result example season population").split()


def make_passages(path, count, seed):
    """engine/bench/passages_synthetic.cpp's lines, draw for draw."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        for i in range(count):
            n = min(400, max(8, int(rng.lognormvariate(math.log(55), 0.45))))
            f.write(json.dumps({"id": i, "input": " ".join(rng.choice(WORDS) for _ in range(n))}) + "\n")


def read_safetensors(path):
    import numpy as np
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    types = {"F32": np.float32, "I64": np.int64, "F16": np.float16}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=types[info["dtype"]]).reshape(info["shape"])
    return out


def bert_graph(model_dir):
    """An ONNX graph of the BERT encoder + mean pooling + normalisation: inputs input_ids, attention_mask
    (batch, seq) int64; output embeddings (batch, dim) float32."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    config = json.load(open(os.path.join(model_dir, "config.json")))
    w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    w = {k.removeprefix("bert."): v for k, v in w.items()}
    dim, heads = config["hidden_size"], config["num_attention_heads"]
    hd, eps = dim // heads, config.get("layer_norm_eps", 1e-12)
    nodes, inits = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, inputs, out, **attrs):
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def weight(name, transpose=False):
        a = w[name].astype(np.float32)
        return const(name, a.T.copy() if transpose else a)

    def linear(x, prefix, out):
        y = node("MatMul", [x, weight(prefix + ".weight", True)], out + "_mm")
        return node("Add", [y, weight(prefix + ".bias")], out)

    def layer_norm(x, prefix, out):
        return node("LayerNormalization", [x, weight(prefix + ".weight"), weight(prefix + ".bias")], out,
                    axis=-1, epsilon=eps)

    # Embeddings: word + position (0..seq-1) + token type 0, then LayerNorm.
    shape = node("Shape", ["input_ids"], "ids_shape")
    seq = node("Gather", [shape, const("one_i", np.array(1, np.int64))], "seq_len")
    positions = node("Range", [const("zero_i", np.array(0, np.int64)), seq, const("step_i", np.array(1, np.int64))],
                     "positions")
    x = node("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], "word")
    p = node("Gather", [weight("embeddings.position_embeddings.weight"), positions], "pos")
    t = const("type0", w["embeddings.token_type_embeddings.weight"][0].astype(np.float32))
    x = node("Add", [node("Add", [x, p], "wp"), t], "emb")
    x = layer_norm(x, "embeddings.LayerNorm", "h0")
    # The additive mask: (batch, 1, 1, seq), 0 where attended, -1e9 on padding.
    maskf = node("Cast", ["attention_mask"], "maskf", to=TensorProto.FLOAT)
    bias = node("Mul", [node("Sub", [const("onef", np.float32(1.0)), maskf], "inv"), const("neg", np.float32(-1e9))],
                "mask_bias2")
    bias = node("Unsqueeze", [bias, const("axes12", np.array([1, 2], np.int64))], "mask_bias")
    split_shape = const("split_shape", np.array([0, 0, heads, hd], np.int64))
    merge_shape = const("merge_shape", np.array([0, 0, dim], np.int64))
    scale = const("scale", np.float32(1.0 / math.sqrt(hd)))
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def heads_of(name):
            y = linear(x, p + f"attention.self.{name}", f"l{i}_{name}")
            y = node("Reshape", [y, split_shape], f"l{i}_{name}_r")
            return node("Transpose", [y], f"l{i}_{name}_t", perm=[0, 2, 1, 3])
        q, k, v = heads_of("query"), heads_of("key"), heads_of("value")
        kt = node("Transpose", [k], f"l{i}_kt", perm=[0, 1, 3, 2])
        s = node("Mul", [node("MatMul", [q, kt], f"l{i}_qk"), scale], f"l{i}_s")
        s = node("Add", [s, bias], f"l{i}_sm")
        a = node("Softmax", [s], f"l{i}_a", axis=-1)
        ctx = node("Transpose", [node("MatMul", [a, v], f"l{i}_av")], f"l{i}_ct", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, merge_shape], f"l{i}_ctx")
        o = linear(ctx, p + "attention.output.dense", f"l{i}_o")
        x = layer_norm(node("Add", [o, x], f"l{i}_res1"), p + "attention.output.LayerNorm", f"l{i}_h1")
        f = linear(x, p + "intermediate.dense", f"l{i}_up")
        f = node("Gelu", [f], f"l{i}_gelu")  # erf GELU, opset 20
        f = linear(f, p + "output.dense", f"l{i}_down")
        x = layer_norm(node("Add", [f, x], f"l{i}_res2"), p + "output.LayerNorm", f"l{i}_h2")
    # Mean pooling under the mask, then L2 normalisation.
    m3 = node("Unsqueeze", [maskf, const("axis2", np.array([2], np.int64))], "mask3")
    summed = node("ReduceSum", [node("Mul", [x, m3], "masked"), const("axis1", np.array([1], np.int64))], "summed",
                  keepdims=0)
    count = node("ReduceSum", [maskf, const("axis1b", np.array([1], np.int64))], "count", keepdims=1)
    mean = node("Div", [summed, node("Max", [count, const("tiny", np.float32(1e-9))], "count_c")], "mean")
    norm = node("ReduceL2", [mean, const("axism1", np.array([-1], np.int64))], "norm", keepdims=1)
    node("Div", [mean, node("Max", [norm, const("tiny2", np.float32(1e-12))], "norm_c")], "embeddings")
    graph = helper.make_graph(
        nodes, "bert", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "s"]),
                        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["b", "s"])],
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["b", dim])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    return model, config


def flops_per_token(config, mean_len):
    d, h, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    params = layers * (4 * d * d + 2 * d * h)
    return 2.0 * params + 4.0 * layers * d * mean_len  # attention: scores and weighted sum over the sequence


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cbatch", required=True)
    ap.add_argument("--model", default="models/all-MiniLM-L6-v2")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--num-passages", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--peak-gflops", type=float, default=0.0,
                    help="the fp32 GEMM peak to compare with (default: the one cbatch bench measures)")
    ap.add_argument("--json")
    args = ap.parse_args()
    try:
        import numpy as np
        import onnxruntime as ort
        from tokenizers import Tokenizer
    except ImportError as e:
        sys.exit(f"embed_bench: {e.name} is missing: pip install onnx onnxruntime tokenizers numpy")

    work = tempfile.mkdtemp(prefix="embed-bench-")
    passages = os.path.join(work, "passages.jsonl")
    make_passages(passages, args.num_passages, args.seed)
    texts = [json.loads(line)["input"] for line in open(passages)]
    max_len = json.load(open(os.path.join(args.model, "sentence_bert_config.json"))).get("max_seq_length", 512)
    tok = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_len)
    ids = [e.ids for e in tok.encode_batch(texts)]
    real_tokens = sum(len(x) for x in ids)
    mean_len = real_tokens / len(ids)

    model, config = bert_graph(args.model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # as sentence-transformers' encode

    def ort_embed(indices):
        out = {}
        for b in range(0, len(indices), args.batch_size):
            batch = indices[b:b + args.batch_size]
            width = max(len(ids[i]) for i in batch)
            x = np.zeros((len(batch), width), np.int64)
            m = np.zeros((len(batch), width), np.int64)
            for r, i in enumerate(batch):
                x[r, :len(ids[i])] = ids[i]
                m[r, :len(ids[i])] = 1
            for r, e in zip(batch, session.run(["embeddings"], {"input_ids": x, "attention_mask": m})[0]):
                out[r] = e
        return out

    # The same function: cbatch's and onnxruntime's embeddings of the first passages.
    head = os.path.join(work, "head.jsonl")
    with open(passages) as src, open(head, "w") as dst:
        dst.writelines(line for _, line in zip(range(64), src))
    out = os.path.join(work, "out.jsonl")
    subprocess.run([args.cbatch, "run", head, "-o", out, "--model", args.model, "--threads", str(args.threads),
                    "--quiet"], check=True)
    mine = {json.loads(line)["id"]: np.array(json.loads(line)["embedding"]) for line in open(out)}
    theirs = ort_embed(sorted(range(64), key=lambda i: -len(ids[i])))
    cosines = [float(np.dot(mine[i], theirs[i]) / np.linalg.norm(mine[i]) / np.linalg.norm(theirs[i])) for i in range(64)]
    print(f"cbatch vs onnxruntime embeddings of 64 passages: least cosine {min(cosines):.6f}")
    if min(cosines) < 0.9999:
        sys.exit("embed_bench: the two engines disagree; the timing would compare different work")

    rows, peak = [], 0.0
    for _ in range(args.repeat):
        bench_json = os.path.join(work, "bench.json")
        subprocess.run([args.cbatch, "bench", "--model", args.model, "--dataset", "passages-synthetic", "--seed",
                        str(args.seed), "--num-prompts", str(args.num_passages), "--modes", "continuous", "--threads",
                        str(args.threads), "--quiet", "--json", bench_json], check=True, stdout=subprocess.DEVNULL)
        bench = json.load(open(bench_json))
        result = bench["results"][0]
        if result["prompt_tokens"] != real_tokens:
            sys.exit(f"embed_bench: cbatch embedded {result['prompt_tokens']} tokens, {real_tokens} counted here: "
                     "the two generators of passages-synthetic differ")
        peak = bench.get("peaks", {}).get("gemm_flops_per_s", 0) * 1e-9
        rows.append(("cbatch", result["prompt_tokens"] / result["wall_s"]))
        start = time.perf_counter()
        ort_embed(order)
        rows.append(("onnxruntime", real_tokens / (time.perf_counter() - start)))
    flops = flops_per_token(config, mean_len)
    peak_gflops = args.peak_gflops or peak
    report = {"model": args.model, "threads": args.threads, "passages": len(ids), "mean_tokens": mean_len,
              "peak_gflops": peak_gflops,
              "batch_size": args.batch_size, "least_cosine": min(cosines), "gflop_per_token": flops * 1e-9,
              "load_average": os.getloadavg()[0], "engines": {}}
    print(f"{len(ids)} passages, mean {mean_len:.1f} tokens, {flops * 1e-6:.1f} MFLOP a token, {args.threads} threads, "
          f"fp32 GEMM peak {peak_gflops:.1f} GFLOP/s")
    print(f"{'engine':12} {'tokens/s':>10} {'GFLOP/s':>9} {'of peak':>8}")
    for engine in ("cbatch", "onnxruntime"):
        best = max(v for e, v in rows if e == engine)
        gflops = best * flops * 1e-9
        frac = gflops / peak_gflops if peak_gflops > 0 else None
        report["engines"][engine] = {"tokens_per_s": best, "gflops": gflops, "of_peak": frac}
        print(f"{engine:12} {best:10.0f} {gflops:9.1f} {'' if frac is None else f'{frac:8.2f}'}")
    if args.json:
        json.dump(report, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
