// The fp8 codec's CPU reference: the definition of its bytes (docs/formats.md, "fp8"). The
// kernels produce the same bytes; the tests compare them with memcmp.
#pragma once

#include <cstdint>

#include "codec/fp8/format.h"
#include "codec/fp8/shape.h"

namespace cclz::fp8 {

// The size of every frame of count elements under p (fp8 frames have a fixed size).
uint64_t maxEncodedBytes(const Params& p, uint64_t count);

// Encodes count bf16/fp16/fp32 values (host memory) into dst (capacity bytes). Returns the frame
// size. Throws cclz::Error on invalid arguments. With p.shape = kShapeAuto the encoder chooses
// the row length (chooseRowElemsRef); with p.smoothing it smooths where chooseSmoothingRef says.
uint64_t encodeRef(const Params& p, int dtype, const void* src, uint64_t count, uint8_t* dst,
                   uint64_t capacity);

// Decodes a frame into count values of dtype at dst. Returns kFrameOk or a FrameError; a rejected
// frame writes nothing.
uint32_t decodeRef(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count, void* dst);

// acc[i] += decoded element i (as decodeRef would store it, in fp32). A rejected frame leaves acc
// unchanged.
uint32_t decodeAccumulateRef(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count,
                             float* acc);

// The row length an encoder with shape kShapeAuto chooses for these values (docs/formats.md,
// "Choosing the row length"). Reads the first shapeSampleElems(count) values.
uint32_t chooseRowElemsRef(int dtype, const void* src, uint64_t count, uint32_t log2H);

// The statistics chooseRowElemsRef decides from: stats[c] for candidate c, for every one of the
// numShapeCandidates(log2H) (a candidate with fewer than kShapeMinRows rows has only `rows`).
void shapeStatsRef(int dtype, const void* src, uint64_t count, uint32_t log2H, ShapeStats* stats);

// The smoothing shifts of a frame of count values in rows of rowElems (smoothEligible): fills
// shifts[0, rowElems) and returns true when one is non-zero, i.e. the frame is smoothed.
bool chooseSmoothingRef(int dtype, const void* src, uint64_t count, uint32_t rowElems,
                        uint8_t* shifts);

}  // namespace cclz::fp8
