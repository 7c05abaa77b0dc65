"""Every GGUF block type cbatch reads (Q8_0, Q4_0, Q4_1, and Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q5_0, Q5_1,
IQ4_NL, IQ4_XS, MXFP4) decodes to exactly the `gguf` package's dequantized float32 values, both as
tensor_rows_to_f32 gives them and as the CPU matmul sees them kept in blocks (the product of the
identity and W^T through its one-row and many-row kernels; -0 comes out as +0 there). Each tensor holds
random blocks: random bytes (every scale, minimum, sign, high bit and sub-block code occurs) with the f16
super-scales set to finite values of both signs and many magnitudes (subnormals and zeros too), MXFP4's
E8M0 scale bytes to 2^-28..2^22 and the subnormal 2^-128 and 2^-127 (no infinities, which the identity
product would turn into NaN); 19 rows (a whole panel of lanes and a partial one) of 4 blocks.

Then greedy runs: the tiny Llama of tiny_models.py with its FFN matrices quantized to MXFP4 by the gguf
package, and a 256-wide tiny Mixtral with Q4_K gate/up and Q6_K down experts (tiny_models' own K-quant
quantizers), give the tokens of the float64 reference (family_reference.py) on the gguf package's
dequantized weights, up to each request's first step whose top-2 margin is at most 1e-3. And bad MXFP4 files: tiny-spm's
GGUF with one float32 tensor's type set to MXFP4 (its size then disagrees with its shape), or one with rows of
172 (not whole blocks): `cbatch run` exits 1 naming the tensor, before any request runs. Last, the test
tooling's own Q4_K and Q6_K quantizers against the gguf package's decoder."""
import os
import subprocess
import sys

from common import EXACT, Checks, need_modules, read_jsonl, run, tiny_spm_gguf, tmpdir, write_jsonl

np, gguf = need_modules("numpy", "gguf")
from gguf.quants import dequantize  # noqa: E402
import tiny_models  # noqa: E402

DUMP = os.environ.get("CBATCH_DUMP_TENSOR")
if not DUMP or not os.path.exists(DUMP):
    print("SKIPPED: the dump_tensor test tool is not built (run through ctest)")
    sys.exit(77)

Q = gguf.GGMLQuantizationType
# type: (elements per block, bytes per block, byte offsets of its f16 scales)
TYPES = {
    Q.Q8_0: (32, 34, [0]), Q.Q4_0: (32, 18, [0]), Q.Q4_1: (32, 20, [0, 2]),
    Q.Q5_0: (32, 22, [0]), Q.Q5_1: (32, 24, [0, 2]), Q.IQ4_NL: (32, 18, [0]),
    Q.Q2_K: (256, 84, [80, 82]), Q.Q3_K: (256, 110, [108]), Q.Q4_K: (256, 144, [0, 2]),
    Q.Q5_K: (256, 176, [0, 2]), Q.Q6_K: (256, 210, [208]), Q.IQ4_XS: (256, 136, [0]),
    Q.MXFP4: (32, 17, []),  # its scale, byte 0, is set below
}
rng = np.random.default_rng(7)
work = tmpdir()
path = os.path.join(work, "blocks.gguf")
writer = gguf.GGUFWriter(path, "llama")
expected = {}
for qtype, (elems, size, scales) in TYPES.items():
    rows, blocks_per_row = 19, 4
    raw = rng.integers(0, 256, size=(rows, blocks_per_row, size), dtype=np.uint8)
    for off in scales:
        # 2^-20..2^2 (f16 subnormals below 2^-14), either sign, a few zeros.
        mag = rng.uniform(-20, 2, size=(rows, blocks_per_row))
        values = np.exp2(mag) * rng.choice([-1, 1], size=mag.shape) * (rng.random(mag.shape) > 0.05)
        values = values.astype(np.float16)
        raw[:, :, off:off + 2] = values.view(np.uint8).reshape(rows, blocks_per_row, 2)
    if qtype == Q.MXFP4:  # 2^(e - 128): e 100..150, sometimes 0 or 1
        raw[:, :, 0] = np.where(rng.random((rows, blocks_per_row)) < 0.1, rng.integers(0, 2, (rows, blocks_per_row)),
                                rng.integers(100, 151, (rows, blocks_per_row)))
    raw = raw.reshape(rows, blocks_per_row * size)
    writer.add_tensor(qtype.name, raw, raw_dtype=qtype)
    expected[qtype.name] = dequantize(raw, qtype).astype(np.float32).reshape(rows, blocks_per_row * elems)
writer.write_header_to_file()
writer.write_kv_data_to_file()
writer.write_tensors_to_file()
writer.close()

c = Checks()
for name, want in expected.items():
    for mode in ([], ["--cpu-matmul"]):
        what = f"{name} {' '.join(mode) or 'tensor_rows_to_f32'}"
        proc = subprocess.run([DUMP, path, name] + mode, capture_output=True)
        c.check(proc.returncode == 0, f"{what}: dump_tensor failed: {proc.stderr.decode()[-500:]}")
        got = np.frombuffer(proc.stdout, dtype=np.float32)
        c.check(got.size == want.size, f"{what}: {got.size} values, expected {want.size}")
        if got.size != want.size:
            continue
        ref = want.reshape(-1) + np.float32(0) if mode else want.reshape(-1)  # the product's +0 for -0
        bad = np.flatnonzero(got.view(np.uint32) != ref.view(np.uint32))
        c.check(bad.size == 0, f"{what}: {bad.size} values differ from gguf's, first at {bad[:3]}: "
                               f"{got[bad[:3]]} vs {ref[bad[:3]]}")


def check_quantized_greedy(label, name, ffn_qtype, spec=None, prompt_seed=10):
    """The tiny model `name` (spec: a changed row of tiny_models.MODELS) with its FFN matrices quantized
    (ffn_qtype as tiny_models.write_gguf takes it) gives, on the exact path, the tokens of the float64
    reference on the gguf package's dequantized weights, up to each request's first step whose top-2 margin
    is at most 1e-3."""
    import family_reference as reference
    num_tokens, margin = 16, 1e-3
    model_path = os.path.join(work, f"{label}.gguf")
    tiny_models.write_gguf(model_path, name, tiny_models.random_weights(name, spec), ffn_qtype=ffn_qtype, spec=spec)
    types = {t.name: t.tensor_type for t in gguf.GGUFReader(model_path).tensors}
    want = ffn_qtype if isinstance(ffn_qtype, dict) else {"ffn_gate": ffn_qtype, "ffn_up": ffn_qtype,
                                                           "ffn_down": ffn_qtype}
    suffix = "_exps" if (spec or tiny_models.MODELS[name]).get("moe") else ""
    c.check(all(types[f"blk.0.{f}{suffix}.weight"] == t for f, t in want.items()) and
            types["blk.0.attn_q.weight"] == Q.F32, f"{label}: the model's tensor types are not as meant: {types}")
    prng = np.random.default_rng(prompt_seed)
    prompts = [[int(t) for t in prng.integers(3, 256, n)] for n in (12, 25, 40)]
    rows = [{"id": i, "prompt_token_ids": p, "max_tokens": num_tokens, "temperature": 0, "ignore_eos": True}
            for i, p in enumerate(prompts)]
    prompts_path, out = os.path.join(work, "prompts.jsonl"), os.path.join(work, "out.jsonl")
    write_jsonl(prompts_path, rows)
    run(["run", prompts_path, "-o", out, "--model", model_path, "--device", "cpu", "--quiet"] + EXACT)
    got = [r["output_token_ids"] for r in sorted(read_jsonl(out), key=lambda r: r["id"])]
    expected = reference.greedy(reference.load_gguf(model_path), prompts, num_tokens)
    compared = 0
    for i, (ids, margins) in enumerate(expected):
        want_ids = ids[:reference.agreed_prefix(ids, margins, margin)]
        compared += len(want_ids)
        c.check(got[i][:len(want_ids)] == want_ids, f"{label}, prompt {i}: got {got[i][:len(want_ids)]}, "
                                                    f"reference {want_ids}")
    c.check(compared >= 0.8 * len(prompts) * num_tokens, f"{label}: only {compared} decisive tokens")
    print(f"{label}: {compared} of {len(prompts) * num_tokens} tokens decisive, all equal to the reference")


def check_bad_mxfp4():
    import struct
    original = open(tiny_spm_gguf(), "rb").read()
    prompts_path, out = os.path.join(work, "one.jsonl"), os.path.join(work, "bad-out.jsonl")
    write_jsonl(prompts_path, [{"id": 0, "prompt": "a dream", "max_tokens": 4}])
    for tensor, says in (("blk.0.attn_q.weight", "its size disagrees with its shape and type"),
                         ("blk.1.ffn_down.weight", "has 172 columns, not a multiple of the mxfp4 block size")):
        key = struct.pack("<Q", len(tensor)) + tensor.encode()
        at = original.index(key) + len(key)  # then u32 n_dims, u64 dims[n_dims], u32 type
        type_at = at + 4 + 8 * struct.unpack_from("<I", original, at)[0]
        bad = bytearray(original)
        struct.pack_into("<I", bad, type_at, Q.MXFP4.value)
        path = os.path.join(work, "bad-mxfp4.gguf")
        open(path, "wb").write(bad)
        proc = run(["run", prompts_path, "-o", out, "--model", path, "--device", "cpu"], check=False)
        c.check(proc.returncode == 1 and f"'{tensor}'" in proc.stderr and says in proc.stderr,
                f"MXFP4 {tensor}: exit {proc.returncode}, expected 1 with a message naming it: {proc.stderr[-500:]}")
        c.check(not os.path.exists(out) or not read_jsonl(out), f"MXFP4 {tensor}: results were written")


def check_own_kquant_quantizers():
    """tiny_models' Q4_K and Q6_K quantizers (the gguf package has none; test_gpu_moe.py's experts use them)
    write blocks that the gguf package's decoder reads back as the input, within 4- and 6-bit steps."""
    x = rng.standard_normal((5, 512)).astype(np.float32) * np.float32(0.1)
    x[0, :256] = 0.0  # an all-zero superblock: zero scales, no division by zero
    for quantize, qtype, bound in ((tiny_models.quantize_q4_k, Q.Q4_K, 0.1),
                                   (tiny_models.quantize_q6_k, Q.Q6_K, 0.03)):
        back = dequantize(quantize(x), qtype)
        err = float(np.linalg.norm(back - x) / np.linalg.norm(x))
        c.check(back.shape == x.shape and err < bound and not back[0, :256].any(),
                f"{qtype.name} quantizer: relative error {err:.4f} (bound {bound}), shape {back.shape}")


# The tiny Llama with MXFP4 FFN matrices (prompts whose reference margins are all clear, the smallest 0.07),
# and a 256-wide tiny Mixtral with Q4_K_M-like experts (Q4_K gate and up, Q6_K down), the K-quant experts
# through the CPU's expert gather.
check_quantized_greedy("llama-mxfp4", "llama", Q.MXFP4)
WIDE_MIXTRAL = dict(tiny_models.MODELS["mixtral"])
WIDE_MIXTRAL["config"] = dict(WIDE_MIXTRAL["config"], hidden_size=256, intermediate_size=256)
check_quantized_greedy("mixtral-q4_k-q6_k", "mixtral", {"ffn_gate": Q.Q4_K, "ffn_up": Q.Q4_K, "ffn_down": Q.Q6_K},
                       spec=WIDE_MIXTRAL)
check_bad_mxfp4()
check_own_kquant_quantizers()
c.done()
