// What the algorithms share within one call: the plan (codec, piece size, frame slots) and the
// movement of one piece's frames between ranks (algorithms.cpp, plan.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "collective/engine.h"
#include "collective/node_layout.h"
#include "transport/transport.h"
#include "tune/piece_size.h"  // defaultPieceBytes, pieceBytesFor

namespace cclz {

// A run of elements: an offset and a count.
struct Span {
  uint64_t offset = 0;
  uint64_t count = 0;
};

// count cut into n parts as evenly as possible: the first count % n get one more.
Span evenShare(uint64_t count, int n, int r);
// Piece k of a span, relative to the span's start (count 0 past its end).
Span pieceOf(const Span& s, uint64_t pieceElems, uint64_t k);
uint64_t pieceCount(uint64_t count, uint64_t pieceElems);

// A piece of pieceElems cut to whole units of `unit` elements (Codec::pieceAlignment): rounded
// down to a multiple of unit, or up to one unit where it holds less; at most `largest` (the
// largest block, which then goes in one piece), and at least 1.
uint64_t wholeUnits(uint64_t pieceElems, uint64_t unit, uint64_t largest);

struct Pipeline {
  Transport& t;
  Engine& e;
  CodecUse use;
  int n = 1;
  int me = 0;
  uint64_t elemBytes = 0;
  uint64_t pieceElems = 1;
  uint64_t stride = 0;  // bytes of one frame slot: a piece's largest frame, rounded up
  bool fixedSize = false;

  uint8_t* sendFrame(int slot, int r) const {
    return e.area(Area::SendFrames) + (static_cast<uint64_t>(slot) * n + r) * stride;
  }
  uint8_t* recvFrame(int slot, int r) const {
    return e.area(Area::RecvFrames) + (static_cast<uint64_t>(slot) * n + r) * stride;
  }
  // Per slot: [0, n) the sizes of the frames sent to each rank, [n, 2n) of those received.
  uint64_t* sizes(int slot) const {
    return reinterpret_cast<uint64_t*>(e.area(Area::Sizes)) + static_cast<uint64_t>(slot) * 2 * n;
  }
  // Each slot's accumulator starts 256-byte aligned (the device decoders store 16 bytes at once).
  static uint64_t accumulatorStride(uint64_t pieceElems) { return (pieceElems + 63) / 64 * 64; }
  float* accumulator(int slot) const {
    return reinterpret_cast<float*>(e.area(Area::Accumulator)) +
           slot * accumulatorStride(pieceElems);
  }
  const uint8_t* at(const void* base, uint64_t elem) const {
    return static_cast<const uint8_t*>(base) + elem * elemBytes;
  }
  uint8_t* at(void* base, uint64_t elem) const {
    return static_cast<uint8_t*>(base) + elem * elemBytes;
  }
  // The bytes a frame of count elements occupies on the wire when sizes are known in advance.
  uint64_t wireBytes(uint64_t count) const;
  // Whether point-to-point frames need their sizes exchanged and brought to the host before they
  // move: variable-size frames over a transport whose receives must name the byte count (NCCL).
  bool exchangesSizes() const {
    return !fixedSize && !(e.memory() == MemoryKind::Host && t.learnsReceivedSize());
  }
  // A size a peer announced, checked against the slot it must fit.
  uint64_t checkedSize(uint64_t bytes, int peer) const;
};

struct Outgoing {
  int peer;
  const uint8_t* frame;
  uint64_t count;     // elements the frame holds
  int sizeIndex;      // its size is sizes(slot)[sizeIndex]
};
struct Incoming {
  int peer;
  uint8_t* frame;     // a slot of stride bytes
  uint64_t count;
};

// The most pieces any of the chunks takes: the number of pieces a pipeline runs.
uint64_t maxPieces(const Pipeline& p, const std::vector<Span>& chunks);

// Point-to-point frames of one piece (docs/collectives.md, "Variable-size frames").
// announceSizes, where p.exchangesSizes(): sends each outgoing frame's size to its peer, receives
// the incoming ones and fetches them to the host. moveFrames then moves the frames: fixed-size
// ones at their known size, variable ones at the announced sizes, or, over a transport that
// learns sizes, into slots of stride bytes.
void announceSizes(const Pipeline& p, int slot, const std::vector<Outgoing>& out,
                   const std::vector<Incoming>& in);
void moveFrames(const Pipeline& p, int slot, const std::vector<Outgoing>& out,
                const std::vector<Incoming>& in);

// Runs pieces 0..pieces-1 through encode, move and decode (each a callable taking the piece and
// its slot). `announce`, when given (sizesAhead), runs on the Move stage right after a piece's
// encode, and the piece's move and decode follow one piece later: the host's wait for the sizes
// of piece k then overlaps the transfer of piece k - 1 instead of draining the move stream.
template <typename Encode, typename Announce, typename Move, typename Decode>
void runPieces(const Pipeline& p, uint64_t pieces, bool sizesAhead, Encode&& encode,
               Announce&& announce, Move&& move, Decode&& decode) {
  const uint64_t lag = sizesAhead ? 1 : 0;
  for (uint64_t k = 0; k < pieces + lag; ++k) {
    if (k < pieces) {
      const int slot = static_cast<int>(k % kSlots);
      p.e.stage(Stage::Encode, slot);
      encode(k, slot);
      if (sizesAhead) {
        p.e.stage(Stage::Move, slot);
        announce(k, slot);
      }
    }
    if (k >= lag) {
      const uint64_t j = k - lag;
      const int slot = static_cast<int>(j % kSlots);
      p.e.stage(Stage::Move, slot);
      move(j, slot);
      p.e.stage(Stage::Decode, slot);
      decode(j, slot);
    }
  }
}

// The algorithms (algorithms.cpp). chunks[r]: the elements of rank r, as offsets into the
// output (gather) or the input (reduce, all-to-all).
void gatherPieces(const Pipeline& p, const void* mine, void* out, const std::vector<Span>& chunks);
void reducePieces(const Pipeline& p, const void* in, void* mine, const std::vector<Span>& chunks,
                  float divisor, Residual residual, uint64_t step);
void allToAllPieces(const Pipeline& p, const void* in, void* out, uint64_t count);
void sendPieces(const Pipeline& p, const void* in, uint64_t count, int peer);
// The two-level variants (two_level.cpp), for a layout with NodeLayout::twoLevel and a codec of
// fixed frame size; the reduce-scatter's slots hold a raw piece (twoLevelStride).
void gatherPiecesTwoLevel(const Pipeline& p, const NodeLayout& l, const void* mine, void* out,
                          const std::vector<Span>& chunks);
// With error feedback (residual given), a rank's residual holds, for the blocks it encodes (its
// column's on the other nodes), what quantizing its node's sum of them dropped.
void reducePiecesTwoLevel(const Pipeline& p, const NodeLayout& l, const void* in, void* mine,
                          const std::vector<Span>& chunks, float divisor, Residual residual,
                          uint64_t step);
void recvPieces(const Pipeline& p, void* out, uint64_t count, int peer);

}  // namespace cclz
