"""Pre-quantized Hugging Face checkpoint files written with numpy from the formats' definitions, shared by
tests/e2e/test_prequantized.py and tools/make_prequantized_bench.py: safetensors files of raw tensors, an
integer quantizer per (output, group) and its exact dequantization, GPTQ's packing (qweight along the input,
qzeros along the output, v1 zeros stored minus 1) with act-order g_idx, FP8 E4M3 codes with a scale per
block, and compressed-tensors NVFP4 (E2M1 codes, an E4M3 scale per 16 inputs, a global scale) with its config."""
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


E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], np.float32)


def nvfp4(w):
    """compressed-tensors nvfp4-pack-quantized: a global scale g = 448 * 6 / max |w| (stored as the divisor),
    per 16 inputs an F8_E4M3 scale code of max |block| / 6 * g, each weight the nearest E2M1 code of w / s with
    s = fp8 / g (fp32); codes two a byte, the even input in the low nibble. Returns parts and w = e2m1 * s."""
    out, inp = w.shape
    g = np.float32(448.0 * 6.0 / np.abs(w).max())
    blocks = w.reshape(out, inp // 16, 16)
    target = np.abs(blocks).max(axis=2) / 6.0 * g
    finite = np.where(np.isfinite(E4M3[:127]), E4M3[:127], np.inf)  # the non-negative codes, NaN never chosen
    scale_codes = np.abs(target[..., None] - finite).argmin(axis=-1).astype(np.uint8)
    s = (E4M3[scale_codes].astype(np.float32) / g).astype(np.float32)  # (out, inp / 16)
    scaled = blocks / np.where(s > 0, s, 1)[..., None]
    codes = np.abs(scaled[..., None] - E2M1).argmin(axis=-1).reshape(out, inp).astype(np.uint8)
    exact = (E2M1[codes].reshape(out, inp // 16, 16) * s[..., None]).astype(np.float32).reshape(out, inp)
    parts = {"weight_packed": ("U8", (codes[:, 0::2] | codes[:, 1::2] << 4).astype(np.uint8)),
             "weight_scale": ("F8_E4M3", scale_codes), "weight_global_scale": ("F32", np.array([g], np.float32)),
             "input_global_scale": ("F32", np.array([3.0], np.float32))}
    return parts, exact


NVFP4_ARGS = dict(num_bits=4, type="float", strategy="tensor_group", group_size=16, symmetric=True, dynamic=False)
NVFP4 = dict(quant_method="compressed-tensors", format="nvfp4-pack-quantized", ignore=["lm_head"],
             config_groups={"group_0": {"targets": ["Linear"], "weights": NVFP4_ARGS,
                                        "input_activations": dict(NVFP4_ARGS, dynamic="local")}})
