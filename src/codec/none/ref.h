// The "none" codec: a frame header followed by the bytes as they are. It gives every message the
// same framing (so a collective can treat all codecs alike) and is the baseline in benchmarks.
#pragma once

#include <cstdint>

#include "codec/frame.h"

namespace cclz::none {

uint64_t maxEncodedBytes(int dtype, uint64_t count);

// Writes the header and copies the payload. Returns the frame size. Throws cclz::Error.
uint64_t encodeRef(int dtype, const void* src, uint64_t count, uint8_t* dst, uint64_t capacity);

// Returns kFrameOk or a FrameError.
uint32_t decodeRef(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count, void* dst);

// Checks the fields of a none header that passed checkFrameHeader. Returns a FrameError.
uint32_t checkHeader(const FrameHeader& h);

// Header of a none frame, shared with the device path (which copies the payload itself).
void writeHeader(int dtype, uint64_t count, uint8_t* dst);

}  // namespace cclz::none
