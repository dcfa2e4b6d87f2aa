// A data-free scale search for the same pack-quantized formats RTN writes (`--method search`).
//
// RTN (quant/rtn.h) derives each group's scale from its min/max and rounds every weight to the
// nearest level. The format only stores integers q and a scale (and a zero point for asymmetric
// schemes), and vLLM/compressed-tensors reconstructs w' = R(R(q - zp) * scale) (R = rounding to the
// weight dtype), so any scale that is a positive finite value of the dtype and any q in
// [QMin(bits), QMax(bits)] is a valid checkpoint. The search picks, per group, the scale (and q)
// that minimise the squared error sum (w - w')^2 with w' computed exactly that way. Candidates:
//   - the RTN result itself (so a group never gets worse than RTN),
//   - a grid of 10 scales, 0.85x .. 1.30x absmax / 2^(bits-1) (it spans llm-compressor's `mse`
//     observer shrink grid p = 1.00 .. 0.80 of absmax/7.5 and llama.cpp's make_qx_quants
//     candidates nmax +/- 0.1k, and uses the level -8 that RTN's absmax/7.5 leaves nearly empty),
//     each scored by the least-squares fit of its nearest-level codes as make_qx_quants does; for
//     asymmetric schemes the mse observer's shrunk min/max ranges and the next zero points,
//   - the least-squares refit s = sum(c w) / sum(c c) of the best candidate's codes c = q - zp,
//   - one pass of coordinate descent over the codes (each code moved one level towards its weight
//     when that raises the least-squares fit, as llama.cpp's make_q3_quants does), then the refit.
// Every candidate scale is rounded to the dtype before it is used, exactly as stored.
// The result is deterministic (no randomness, no dependence on threads).
//
// Buffers are caller-owned; nothing is retained. Functions are thread-safe for distinct outputs.
// Errors follow quant/rtn.h: InvalidInput for bad data, naming the row and column.
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
#include "quant/rtn.h"
#include "quant/scheme.h"
#include "tensor/dtype.h"

namespace spk {

// The exact reconstruction error of a group: sum over i of (w[i] - R(R(q[i] - zp) * scale))^2, in
// double, with the dequantization of DequantizeGroup. REQUIRES: q.size() == w.size().
double GroupSquaredError(DType dtype, std::span<const float> w, std::span<const int8_t> q,
                         GroupQuantParams gq);

// Searches a better quantization of one group, starting from a valid one (`current` with codes `q`,
// e.g. RTN's). On return `q` and the returned params hold the best quantization found; its
// GroupSquaredError is never larger than that of the input. The returned scale is a positive finite
// value of `dtype`; for symmetric schemes the zero point stays 0, for asymmetric ones it is in
// [QMin(bits), QMax(bits)]. REQUIRES: w finite, q.size() == w.size(), q within the bit range,
// current.scale positive and finite, ValidateParams(p).ok(), IsQuantizableFloat(dtype).
GroupQuantParams SearchGroup(const QuantParams& p, DType dtype, std::span<const float> w,
                             GroupQuantParams current, std::span<int8_t> q);

// QuantizeRowsRtn with the search: the same inputs, outputs and errors (it validates and quantizes
// with RTN first, then improves every group with SearchGroup). Rows are independent, as for RTN.
Status QuantizeRowsSearch(const QuantParams& p, DType dtype, const uint8_t* weight, int64_t rows,
                          int64_t cols, const RowBlockQuantOutput& out);

}  // namespace spk
