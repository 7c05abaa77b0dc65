"""Every GGUF block type cbatch reads (Q8_0, Q4_0, Q4_1, and Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q5_0, Q5_1,
IQ4_NL, IQ4_XS) decodes to exactly the `gguf` package's dequantized float32 values, both as
tensor_rows_to_f32 gives them and as the CPU matmul sees them kept in blocks (the product of the
identity and W^T through its one-row and many-row kernels; -0 comes out as +0 there). Each tensor holds
random blocks: random bytes (every scale, minimum, sign, high bit and sub-block code occurs) with the f16
super-scales set to finite values of both signs and many magnitudes (subnormals and zeros too); 19 rows (a whole panel of lanes and
a partial one) of 4 blocks."""
import os
import subprocess
import sys

from common import Checks, need_modules, tmpdir

np, gguf = need_modules("numpy", "gguf")
from gguf.quants import dequantize  # noqa: E402

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
c.done()
