// The pipelines of the collectives. Each cuts its data into pieces of pieceElems per rank and
// runs every piece through three stages (engine.h): encode its frames, move them, decode them. A
// rank's own contribution goes through the codec too (encoded, then decoded from its send slot),
// so that every rank computes with the same decoded values: all-gather outputs and all-reduce
// results are bit-identical across ranks, and a reduction sums the same values everywhere.
#include <algorithm>
#include <string>

#include "collective/pipeline.h"
#include "common/error.h"

namespace cclz {

Span evenShare(uint64_t count, int n, int r) {
  const uint64_t base = count / n, extra = count % n, ur = static_cast<uint64_t>(r);
  return {ur * base + std::min(ur, extra), base + (ur < extra ? 1 : 0)};
}

uint64_t pieceCount(uint64_t count, uint64_t pieceElems) {
  return (count + pieceElems - 1) / pieceElems;
}

Span pieceOf(const Span& s, uint64_t pieceElems, uint64_t k) {
  const uint64_t start = k * pieceElems;
  if (start >= s.count) return {s.count, 0};
  return {start, std::min(pieceElems, s.count - start)};
}

uint64_t Pipeline::wireBytes(uint64_t count) const {
  return fixedSize ? use.codec->maxEncodedBytes(use.config, use.dtype, count) : stride;
}

void moveFrames(const Pipeline& p, int slot, const std::vector<Outgoing>& out,
                const std::vector<Incoming>& in) {
  Transport& t = p.t;
  uint64_t* sizes = p.sizes(slot);
  if (p.fixedSize) {
    t.groupStart(p.e.moveStream());
    for (const Outgoing& o : out) t.send(o.frame, p.wireBytes(o.count), o.peer);
    for (const Incoming& i : in) t.recv(i.frame, p.wireBytes(i.count), i.peer, nullptr);
    t.groupEnd();
    return;
  }
  if (p.e.memory() == MemoryKind::Host && t.learnsReceivedSize()) {
    // The encoder wrote each size to host memory; receivers post a slot's capacity (MPI).
    t.groupStart(nullptr);
    for (const Outgoing& o : out) t.send(o.frame, sizes[o.sizeIndex], o.peer);
    for (const Incoming& i : in) t.recv(i.frame, p.stride, i.peer, nullptr);
    t.groupEnd();
    return;
  }
  // The sizes are in the engine's memory and the transport needs them on the host on both sides
  // (NCCL): exchange them, bring them to the host (the one host wait of this piece), then move.
  const int n = p.n;
  t.groupStart(p.e.moveStream());
  for (const Outgoing& o : out) t.send(&sizes[o.sizeIndex], sizeof(uint64_t), o.peer);
  for (const Incoming& i : in) t.recv(&sizes[n + i.peer], sizeof(uint64_t), i.peer, nullptr);
  t.groupEnd();
  auto* host = reinterpret_cast<uint64_t*>(p.e.hostStage(2 * n * sizeof(uint64_t)));
  p.e.toHost(host, sizes, 2 * n * sizeof(uint64_t));
  for (const Incoming& i : in)
    CCLZ_REQUIRE(host[n + i.peer] <= p.stride, cclzInternalError,
                 "rank " + std::to_string(i.peer) + " announced a frame of " +
                     std::to_string(host[n + i.peer]) + " bytes, above the slot's " +
                     std::to_string(p.stride));
  t.groupStart(p.e.moveStream());
  for (const Outgoing& o : out) t.send(o.frame, host[o.sizeIndex], o.peer);
  for (const Incoming& i : in) t.recv(i.frame, host[n + i.peer], i.peer, nullptr);
  t.groupEnd();
}

// The frame of piece k of this rank's chunk goes to every other rank; every rank decodes every
// frame, its own included, into its place in `out`.
void gatherPieces(const Pipeline& p, const void* mine, void* out, const std::vector<Span>& chunks) {
  uint64_t pieces = 0;
  for (const Span& c : chunks) pieces = std::max(pieces, pieceCount(c.count, p.pieceElems));
  const int me = p.me;
  for (uint64_t k = 0; k < pieces; ++k) {
    const int slot = static_cast<int>(k % kSlots);
    const Span own = pieceOf(chunks[me], p.pieceElems, k);
    uint8_t* frame = p.sendFrame(slot, 0);

    p.e.stage(Stage::Encode, slot);
    if (own.count)
      p.e.encode(p.use, p.at(mine, own.offset), own.count, frame, p.stride, &p.sizes(slot)[me],
                 nullptr, 0);

    p.e.stage(Stage::Move, slot);
    std::vector<Outgoing> sends;
    std::vector<Incoming> recvs;
    for (int r = 0; r < p.n; ++r) {
      if (r == me) continue;
      if (own.count) sends.push_back({r, frame, own.count, me});
      const Span theirs = pieceOf(chunks[r], p.pieceElems, k);
      if (theirs.count) recvs.push_back({r, p.recvFrame(slot, r), theirs.count});
    }
    moveFrames(p, slot, sends, recvs);

    p.e.stage(Stage::Decode, slot);
    if (own.count)
      p.e.decode(p.use, frame, p.stride, own.count, p.at(out, chunks[me].offset + own.offset));
    for (const Incoming& i : recvs) {
      const Span theirs = pieceOf(chunks[i.peer], p.pieceElems, k);
      p.e.decode(p.use, i.frame, p.stride, i.count,
                 p.at(out, chunks[i.peer].offset + theirs.offset));
    }
  }
}

// Piece k of every destination's chunk is encoded once (with error feedback when residual is
// given) and sent to its owner; the owner decodes the n frames of its piece in rank order into an
// fp32 accumulator and stores sum / divisor in the dtype.
void reducePieces(const Pipeline& p, const void* in, void* mine, const std::vector<Span>& chunks,
                  float divisor, float* residual, uint64_t step) {
  uint64_t pieces = 0;
  for (const Span& c : chunks) pieces = std::max(pieces, pieceCount(c.count, p.pieceElems));
  const int me = p.me;
  for (uint64_t k = 0; k < pieces; ++k) {
    const int slot = static_cast<int>(k % kSlots);

    p.e.stage(Stage::Encode, slot);
    for (int r = 0; r < p.n; ++r) {
      const Span piece = pieceOf(chunks[r], p.pieceElems, k);
      if (!piece.count) continue;
      const uint64_t first = chunks[r].offset + piece.offset;
      p.e.encode(p.use, p.at(in, first), piece.count, p.sendFrame(slot, r), p.stride,
                 &p.sizes(slot)[r], residual ? residual + first : nullptr, step);
    }

    p.e.stage(Stage::Move, slot);
    const Span own = pieceOf(chunks[me], p.pieceElems, k);
    std::vector<Outgoing> sends;
    std::vector<Incoming> recvs;
    for (int r = 0; r < p.n; ++r) {
      if (r == me) continue;
      const Span theirs = pieceOf(chunks[r], p.pieceElems, k);
      if (theirs.count) sends.push_back({r, p.sendFrame(slot, r), theirs.count, r});
      if (own.count) recvs.push_back({r, p.recvFrame(slot, r), own.count});
    }
    moveFrames(p, slot, sends, recvs);

    p.e.stage(Stage::Decode, slot);
    if (!own.count) continue;
    float* acc = p.accumulator(slot);
    p.e.zero(acc, own.count);
    for (int r = 0; r < p.n; ++r) {
      const uint8_t* frame = r == me ? p.sendFrame(slot, me) : p.recvFrame(slot, r);
      p.e.decodeAccumulate(p.use, frame, p.stride, own.count, acc);
    }
    p.e.store(acc, own.count, divisor, p.use.dtype, p.at(mine, own.offset));
  }
}

// Chunk r of `in` (count elements) goes to rank r; chunk r of `out` comes from rank r.
void allToAllPieces(const Pipeline& p, const void* in, void* out, uint64_t count) {
  const int me = p.me;
  const Span chunk{0, count};
  for (uint64_t k = 0; k < pieceCount(count, p.pieceElems); ++k) {
    const int slot = static_cast<int>(k % kSlots);
    const Span piece = pieceOf(chunk, p.pieceElems, k);

    p.e.stage(Stage::Encode, slot);
    for (int r = 0; r < p.n; ++r)
      p.e.encode(p.use, p.at(in, r * count + piece.offset), piece.count, p.sendFrame(slot, r),
                 p.stride, &p.sizes(slot)[r], nullptr, 0);

    p.e.stage(Stage::Move, slot);
    std::vector<Outgoing> sends;
    std::vector<Incoming> recvs;
    for (int r = 0; r < p.n; ++r) {
      if (r == me) continue;
      sends.push_back({r, p.sendFrame(slot, r), piece.count, r});
      recvs.push_back({r, p.recvFrame(slot, r), piece.count});
    }
    moveFrames(p, slot, sends, recvs);

    p.e.stage(Stage::Decode, slot);
    for (int r = 0; r < p.n; ++r) {
      const uint8_t* frame = r == me ? p.sendFrame(slot, me) : p.recvFrame(slot, r);
      p.e.decode(p.use, frame, p.stride, piece.count, p.at(out, r * count + piece.offset));
    }
  }
}

void sendPieces(const Pipeline& p, const void* in, uint64_t count, int peer) {
  const Span all{0, count};
  for (uint64_t k = 0; k < pieceCount(count, p.pieceElems); ++k) {
    const int slot = static_cast<int>(k % kSlots);
    const Span piece = pieceOf(all, p.pieceElems, k);
    p.e.stage(Stage::Encode, slot);
    p.e.encode(p.use, p.at(in, piece.offset), piece.count, p.sendFrame(slot, peer), p.stride,
               &p.sizes(slot)[peer], nullptr, 0);
    p.e.stage(Stage::Move, slot);
    moveFrames(p, slot, {{peer, p.sendFrame(slot, peer), piece.count, peer}}, {});
    p.e.stage(Stage::Decode, slot);  // nothing to decode; keeps the slot's bookkeeping uniform
  }
}

void recvPieces(const Pipeline& p, void* out, uint64_t count, int peer) {
  const Span all{0, count};
  for (uint64_t k = 0; k < pieceCount(count, p.pieceElems); ++k) {
    const int slot = static_cast<int>(k % kSlots);
    const Span piece = pieceOf(all, p.pieceElems, k);
    p.e.stage(Stage::Encode, slot);
    p.e.stage(Stage::Move, slot);
    moveFrames(p, slot, {}, {{peer, p.recvFrame(slot, peer), piece.count}});
    p.e.stage(Stage::Decode, slot);
    p.e.decode(p.use, p.recvFrame(slot, peer), p.stride, piece.count, p.at(out, piece.offset));
  }
}

}  // namespace cclz
