// CPU reference of the qgrad codec: the definition of the format's bytes and of the residual the
// error-feedback encode leaves. The kernels must produce exactly these bytes and residuals
// (tests/codec/qgrad_gpu_test.cpp).
#pragma once

#include <cstdint>

#include "codec/qgrad/format.h"
#include "codec/residual.h"

namespace cclz::qgrad {

constexpr uint64_t kNoNonFinite = UINT64_MAX;

struct EncodeResult {
  uint64_t frameBytes;
  uint64_t firstNonFinite;  // index of the first element whose encoded value was NaN or Inf, or
                            // kNoNonFinite (docs/formats.md, qgrad, "NaN and Inf")
};

// Bytes of the frame of count elements (every frame of these parameters has this size).
uint64_t maxEncodedBytes(const Params& params, uint64_t count);

// Encodes count elements of src (fp32 or bf16) into dst (capacity >= maxEncodedBytes).
// residual: none for a plain encode; else count values (fp32 or bf16), read as r and overwritten
// with the new residual (x - dequantized x, where x = src + r, rounded to the residual's dtype
// to nearest even), except in non-finite blocks, which keep theirs.
// step: the stochastic-rounding step (0 for a plain encode). Throws cclz::Error on invalid
// arguments; a non-finite input is not an error here, it is reported in the result.
EncodeResult encodeRef(const Params& params, int dtype, const void* src, uint64_t count,
                       Residual residual, uint64_t step, uint8_t* dst, uint64_t capacity);

// Validates the frame (any block size and bit width it declares) and decodes it into count
// elements of dtype (the frame's). Returns kFrameOk or the FrameError that made it reject the
// frame, in which case dst is untouched. Never reads or writes outside the given buffers.
uint32_t decodeRef(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count, void* dst);

// acc[i] += decoded element i, in fp32. A rejected frame leaves acc untouched.
uint32_t decodeAccumulateRef(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count,
                             float* acc);

// Reads and validates the header: kFrameOk and *h filled, or the FrameError.
uint32_t readHeader(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count,
                    FrameHeader* h);

}  // namespace cclz::qgrad
