// Internal to the CPU matmul: the 8-bit integer path for weights in a GGUF block type (--cpu-precision
// fast). Each activation row is quantized on its own to blocks of 32 int8 with an fp32 scale (llama.cpp's
// q8_0; for the superblock types, blocks of 256: q8_K), so a row's result depends only on that row. Each
// int8 panel is a blocked panel (cpu_matmul_blocks.hpp) whose codes are reordered for the integer dot
// product: per group of 32 k, the same scale arrays (as fp16, exactly, for the types whose scales are fp16
// numbers: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL; MXFP4's as its E8M0 bytes), then per 4 k ("quad") kLanes x 4
// unsigned bytes u, lane
// l's 4 k side by side, where the weight's value is u + kBias (bytes: u = value + 128; 4-bit types whose
// values are linear in the code: the nibble itself, two quads per byte, the low nibble the even quad; the
// other 4-bit types, IQ4_NL, IQ4_XS and MXFP4: their code in the nibble, which the kernels turn into u
// with a 16-byte table, value - the type's least value, by one byte shuffle). A
// lane's product over a sub-block is one exact int32 sum, then two fp32 steps in a fixed order:
// acc = fma(s * d, isum, acc) (+ fma(b, d * sum(q), acc) with an offset). The integer sums are exact, so
// every instruction set gives the same bits, as the scalar reference.
// Q4_K, Q5_K and Q6_K keep their 256-k blocks' scales: their int8 groups come in superblocks of 8, a
// header (per lane: d (Q4_K, Q5_K: and -dmin) as fp16, then each sub-block's sc (Q4_K, Q5_K: 6-bit sc and
// m; Q6_K: 16 int8 sc) as bytes, padded to a whole quad) before the 8 groups' codes: Q4_K 4.625 bits a
// weight, Q5_K 8.625, Q6_K 8.625 (as fp32 s and b per group: 6, 10, 10). Their activations come in
// 256-blocks (Q8Rows), so a lane's superblock is integer all through: tot = sum over sub-blocks of
// sc * isum (isum with the bias), mins = sum of m * sum(q) over the 32-k sub-blocks, then
// acc = fma(d * tot (+ -dmin * mins, fused), dx, acc): fp32 once per 256 k instead of per 32 or 16.
// The 5- and 6-bit types (Q5_0, Q5_1, Q5_K, Q6_K) can also hold their codes in planes, chosen per matrix:
// u = the value less the type's least value, its low nibble in a nibble plane (as the 4-bit types') and
// its 1 or 2 high bits in a plane of their own, 8 or 4 quads a byte (Q5_K 5.625 bits a weight, Q6_K
// 6.625, Q5_0 5.5, Q5_1 6): fewer bytes to stream, a few more instructions to decode, the same sums.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/cpu/cpu_matmul_blocks.hpp"

namespace cbatch::matmul_detail {

constexpr int kSuperK = 256;  // k of a superblock (the K-quants' blocks)

// Activation rows quantized to 8 bits, per block of `block` k (32, or 256 for the superblock types: their
// sub-block products then sum exactly in int32 over the whole superblock, llama.cpp's q8_K): x ~ d * q.
struct Q8Rows {
  int64_t rows = 0, cols = 0;
  int block = 32;             // k per scale d
  std::vector<int8_t> q;      // (rows, cols)
  std::vector<float> d;       // (rows, cols / block)
  std::vector<int32_t> sums;  // (rows, cols / 16): sum of q over each 16 k
  // block 256 only: per row and block, the sums s of q over its eight 32-k sub-blocks split for vpdpbusd
  // into signed bytes s = 128 * h + l (l in [0, 127]; h in [-32, 31], |s| <= 32 * 127), four int32 of
  // packed bytes: h of sub-blocks 0-3, h of 4-7, l of 0-3, l of 4-7.
  std::vector<int32_t> split_sums;  // (rows, cols / 256, 4)
};
// Quantizes rows x (m, k) into out, per `block` k (32 or 256; k a multiple of it); grows out's buffers,
// never shrinks them.
void quantize_rows_q8(const float* x, int64_t m, int64_t k, int block, Q8Rows& out);
// The activation block a weight type's int8 panels take: 256 for the superblock types (whose sub-block
// products then sum exactly in int32 over the whole superblock), 32 for the rest.
int q8_block(DType dtype);

// Panels one AVX-512 VNNI tile covers: parallel chunks of panels come in multiples of it.
constexpr int kInt8TilePanels = 3;

enum class Int8Isa { kScalar, kAvx2, kAvx512Vnni };
// The best this CPU runs (cpuid, once); says once on stderr when it falls back from AVX-512 VNNI.
Int8Isa int8_isa();
bool can_run(Int8Isa isa);
const char* int8_isa_name(Int8Isa isa);

// Whether `dtype` has a planes layout (its codes are 5 or 6 bits: Q5_0, Q5_1, Q5_K, Q6_K); `planes` below
// is ignored for the other types.
bool has_int8_planes(DType dtype);
// Bytes of one int8 group of `dtype` (a block type) in bytes or planes; Q4_K's: an eighth of a superblock.
size_t int8_group_bytes(DType dtype, bool planes);
// A blocked panel (K / 32 groups of blocked_group_bytes) rewritten as an int8 panel (K / 32 int8 groups);
// rows: the panel's lanes' GGUF blocks, as pack_blocked_panel's (null past the last row).
void pack_int8_panel(DType dtype, bool planes, const uint8_t* const (&rows)[kLanes], const uint8_t* blocked,
                     int64_t k, uint8_t* out);

// Y rows [row_begin, row_end), panels [panel_begin, panel_end) (panel p: columns p * kLanes...) of an
// (N, K) int8-panel matrix; panels: panel 0, panel_bytes apart; y (rows, ldy), its first N columns written.
void matmul_int8_panels(Int8Isa isa, DType dtype, bool planes, const Q8Rows& x, int64_t row_begin, int64_t row_end,
                        const uint8_t* panels, size_t panel_bytes, int64_t panel_begin, int64_t panel_end,
                        float* y, int64_t ldy, int64_t n);

}  // namespace cbatch::matmul_detail
