"""Every GGUF block type cbatch reads beyond Q8_0/Q4_0/Q4_1 (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q5_0, Q5_1,
IQ4_NL, IQ4_XS) decodes to exactly the `gguf` package's dequantized float32 values. Each tensor holds
random blocks: random bytes (every scale, minimum, sign, high bit and sub-block code occurs) with the
f16 super-scales set to finite values of both signs and many magnitudes, several rows of several blocks."""
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
    rows, blocks_per_row = 3, 4
    raw = rng.integers(0, 256, size=(rows, blocks_per_row, size), dtype=np.uint8)
    for off in scales:
        mag = rng.uniform(-12, 1, size=(rows, blocks_per_row))
        values = (np.exp2(mag) * rng.choice([-1, 1], size=mag.shape)).astype(np.float16)
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
    proc = subprocess.run([DUMP, path, name], capture_output=True)
    c.check(proc.returncode == 0, f"{name}: dump_tensor failed: {proc.stderr.decode()[-500:]}")
    got = np.frombuffer(proc.stdout, dtype=np.float32)
    c.check(got.size == want.size, f"{name}: {got.size} values, expected {want.size}")
    if got.size == want.size:
        same = np.array_equal(got.view(np.uint32), want.reshape(-1).view(np.uint32))
        bad = np.flatnonzero(got.view(np.uint32) != want.reshape(-1).view(np.uint32))
        c.check(same, f"{name}: {bad.size} values differ from gguf's, first at {bad[:3]}: "
                      f"{got[bad[:3]]} vs {want.reshape(-1)[bad[:3]]}")
c.done()
