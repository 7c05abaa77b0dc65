"""Pre-quantized Hugging Face checkpoint files written with numpy from the formats' definitions, shared by
tests/e2e/test_prequantized.py and tools/make_prequantized_bench.py: safetensors files of raw tensors, an
integer quantizer per (output, group) and its exact dequantization, GPTQ's packing (qweight along the input,
qzeros along the output, v1 zeros stored minus 1) with act-order g_idx, and FP8 E4M3 codes with a scale per
block."""
import json
import struct

import numpy as np


def write_safetensors(path, tensors):
    """tensors: name -> (safetensors dtype, numpy array already of that dtype's bytes)."""
    header, offset, blobs = {}, 0, []
    for name, (dtype, t) in tensors.items():
        data = np.ascontiguousarray(t).tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def int_quantize(w, groups, bits, sym):
    """w (out, in) in integer codes per (output, group): groups (in) the group of each input row. Returns
    codes (out, in), zeros (num_groups, out) and fp16 scales (num_groups, out); w ~ (code - zero) * scale."""
    n, levels = groups.max() + 1, (1 << bits) - 1
    scales, zeros = np.zeros((n, w.shape[0]), np.float16), np.zeros((n, w.shape[0]), np.int64)
    codes = np.zeros(w.shape, np.int64)
    for g in range(n):
        cols = w[:, groups == g]
        if sym:
            s = (np.abs(cols).max(axis=1) / (levels // 2)).astype(np.float16)
            z = np.full(w.shape[0], 1 << (bits - 1))
        else:
            lo, hi = np.minimum(cols.min(axis=1), 0), np.maximum(cols.max(axis=1), 0)
            s = ((hi - lo) / levels).astype(np.float16)
            z = np.clip(np.round(-lo / s.astype(np.float32)), 1, levels).astype(np.int64)  # v1 stores z - 1 >= 0
        q = np.clip(np.round(cols / s.astype(np.float32)[:, None]) + z[:, None], 0, levels)
        codes[:, groups == g], scales[g], zeros[g] = q, s, z
    return codes, zeros, scales


def dequantized(codes, zeros, scales, groups):
    z, s = zeros[groups].T, scales[groups].T.astype(np.float32)  # (out, in)
    return ((codes - z).astype(np.float32) * s).astype(np.float32)


def pack(values, bits, axis):
    """Unsigned codes packed 32 / bits to an int32 along `axis`, the first in the low bits."""
    per = 32 // bits
    v = np.moveaxis(values.astype(np.uint32), axis, 0)
    words = np.zeros((v.shape[0] // per,) + v.shape[1:], np.uint32)
    for i in range(per):
        words |= v[i::per] << np.uint32(i * bits)
    return np.moveaxis(words, 0, axis).astype("<u4").view("<i4")


def gptq(w, bits, sym, desc_act, nrng, v2=False, group=32):
    out, inp = w.shape
    perm = nrng.permutation(inp) if desc_act else np.arange(inp)
    g_idx = np.zeros(inp, np.int64)
    g_idx[perm] = np.arange(inp) // group
    codes, zeros, scales = int_quantize(w, g_idx, bits, sym)
    parts = {"qweight": ("I32", pack(codes.T, bits, 0)), "qzeros": ("I32", pack(zeros if v2 else zeros - 1, bits, 1)),
             "scales": ("F16", scales.astype("<f2")), "g_idx": ("I32", g_idx.astype("<i4"))}
    return parts, dequantized(codes, zeros, scales, g_idx)


def e4m3_values():
    v = np.arange(256)
    e, m = (v >> 3) & 15, v & 7
    mag = np.where(e == 0, m / 512.0, (1 + m / 8.0) * np.exp2(e - 7.0))
    mag[(e == 15) & (m == 7)] = np.inf  # NaN codes: never chosen
    return np.where(v & 0x80, -mag, mag)


E4M3 = e4m3_values()


def fp8(w, block, round_scale=np.float32):
    """F8_E4M3 codes of w / scale, scale per (block rows, block cols) block (rounded by round_scale); returns
    codes, scales (f32) and the exact dequantization."""
    out, inp = w.shape
    br, bc = block
    scales = np.zeros(((out + br - 1) // br, (inp + bc - 1) // bc), np.float32)
    codes = np.zeros(w.shape, np.uint8)
    for i in range(scales.shape[0]):
        for j in range(scales.shape[1]):
            b = w[i * br:(i + 1) * br, j * bc:(j + 1) * bc]
            s = round_scale(np.float32(np.abs(b).max() / 448.0))
            scaled = b / s
            codes[i * br:(i + 1) * br, j * bc:(j + 1) * bc] = np.abs(scaled[..., None] - E4M3).argmin(axis=-1)
            scales[i, j] = s
    rows = np.repeat(np.repeat(scales, br, 0), bc, 1)[:out, :inp]
    return codes, scales, (E4M3[codes].astype(np.float32) * rows).astype(np.float32)
