// CPU reference of the lossless codec: the definition of the format's bytes (docs/formats.md,
// "Lossless payload"). The kernels must produce exactly these bytes
// (tests/codec/lossless_gpu_test.cpp).
#pragma once

#include <cstdint>

#include "codec/lossless/format.h"

namespace cclz::lossless {

// Bytes a frame of count elements can take at most, for these parameters.
uint64_t maxEncodedBytes(const Params& params, int dtype, uint64_t count);

// Encodes count elements of a supported dtype into dst (capacity >= maxEncodedBytes).
// Returns the frame's size. Throws cclz::Error on invalid arguments.
uint64_t encodeRef(const Params& params, int dtype, const void* src, uint64_t count, uint8_t* dst,
                   uint64_t capacity);

// Decodes a frame of srcBytes into count elements of dtype. Returns kFrameOk or the FrameError
// that made it reject the frame; it never reads or writes outside the given buffers. It accepts
// any chunk size the frame declares.
uint32_t decodeRef(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count, void* dst);

}  // namespace cclz::lossless
