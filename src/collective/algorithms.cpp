// The pipelines of the collectives. Each cuts its data into pieces of pieceElems per rank and
// runs every piece through three stages (engine.h): encode its frames, move them, decode them. A
// rank's own contribution goes through the codec too (encoded, then decoded from its send slot),
// so that every rank computes with the same decoded values: all-gather outputs and all-reduce
// results are bit-identical across ranks, and a reduction sums the same values everywhere.
#include <algorithm>
#include <string>
#include <vector>

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

uint64_t Pipeline::checkedSize(uint64_t bytes, int peer) const {
  CCLZ_REQUIRE(bytes <= stride, cclzInternalError,
               "rank " + std::to_string(peer) + " announced a frame of " + std::to_string(bytes) +
                   " bytes, above the slot's " + std::to_string(stride));
  return bytes;
}

namespace {

uint64_t roundUp256(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

uint64_t maxPieces(const Pipeline& p, const std::vector<Span>& chunks) {
  uint64_t pieces = 0;
  for (const Span& c : chunks) pieces = std::max(pieces, pieceCount(c.count, p.pieceElems));
  return pieces;
}

void announceSizes(const Pipeline& p, int slot, const std::vector<Outgoing>& out,
                   const std::vector<Incoming>& in) {
  uint64_t* sizes = p.sizes(slot);
  p.t.groupStart(p.e.moveStream());
  for (const Outgoing& o : out) p.t.send(&sizes[o.sizeIndex], sizeof(uint64_t), o.peer);
  for (const Incoming& i : in) p.t.recv(&sizes[p.n + i.peer], sizeof(uint64_t), i.peer, nullptr);
  p.t.groupEnd();
  p.e.fetch(slot, sizes, 2 * p.n * sizeof(uint64_t));
}

void moveFrames(const Pipeline& p, int slot, const std::vector<Outgoing>& out,
                const std::vector<Incoming>& in) {
  Transport& t = p.t;
  const bool exchanged = p.exchangesSizes();
  // Variable sizes: announced and fetched (exchanged), or written to host memory by the encoder.
  const uint64_t* sizes = p.fixedSize ? nullptr
                          : exchanged ? static_cast<const uint64_t*>(p.e.fetched(slot))
                                      : p.sizes(slot);
  t.groupStart(p.e.moveStream());
  for (const Outgoing& o : out)
    t.send(o.frame, p.fixedSize ? p.wireBytes(o.count) : sizes[o.sizeIndex], o.peer);
  for (const Incoming& i : in) {
    const uint64_t bytes = p.fixedSize ? p.wireBytes(i.count)
                           : exchanged ? p.checkedSize(sizes[p.n + i.peer], i.peer)
                                       : p.stride;
    t.recv(i.frame, bytes, i.peer, nullptr);
  }
  t.groupEnd();
}

// The frame of piece k of this rank's chunk goes to every rank through the transport's
// all-gather, at one size for all: the largest frame of the piece, rounded up to 256 bytes so
// that every frame starts aligned. Fixed-size frames know it in advance; variable ones announce
// their sizes first (an all-gather of 8 bytes). Every rank decodes every frame, its own included,
// into its place in `out`.
void gatherPieces(const Pipeline& p, const void* mine, void* out, const std::vector<Span>& chunks) {
  const int n = p.n, me = p.me;
  std::vector<uint64_t> wire(kSlots, 0);  // the part size of each slot's all-gather
  auto countOf = [&](int r, uint64_t k) { return pieceOf(chunks[r], p.pieceElems, k).count; };
  runPieces(
      p, maxPieces(p, chunks), !p.fixedSize,
      [&](uint64_t k, int slot) {
        const Span own = pieceOf(chunks[me], p.pieceElems, k);
        if (own.count)
          p.e.encode(p.use, p.at(mine, own.offset), own.count, p.sendFrame(slot, 0), p.stride,
                     &p.sizes(slot)[me], Residual{}, 0);
      },
      [&](uint64_t, int slot) {
        uint64_t* sizes = p.sizes(slot);
        p.t.allGather(&sizes[me], &sizes[n], sizeof(uint64_t), p.e.moveStream());
        p.e.fetch(slot, &sizes[n], n * sizeof(uint64_t));
      },
      [&](uint64_t k, int slot) {
        const auto* sizes =
            p.fixedSize ? nullptr : static_cast<const uint64_t*>(p.e.fetched(slot));
        uint64_t largest = 0;
        for (int r = 0; r < n; ++r) {
          const uint64_t count = countOf(r, k);
          if (count)
            largest = std::max(largest, p.fixedSize ? p.wireBytes(count)
                                                    : p.checkedSize(sizes[r], r));
        }
        wire[slot] = roundUp256(largest);
        p.t.allGather(p.sendFrame(slot, 0), p.recvFrame(slot, 0), wire[slot], p.e.moveStream());
      },
      [&](uint64_t k, int slot) {
        for (int r = 0; r < n; ++r) {
          const uint64_t count = countOf(r, k);
          if (count)
            p.e.decode(p.use, p.recvFrame(slot, 0) + r * wire[slot], wire[slot], count,
                       p.at(out, chunks[r].offset + k * p.pieceElems));
        }
      });
}

// Piece k of every destination's chunk is encoded once (with error feedback when residual is
// given) and sent to its owner; the owner decodes the n frames of its piece in rank order into an
// fp32 accumulator and stores sum / divisor in the dtype.
void reducePieces(const Pipeline& p, const void* in, void* mine, const std::vector<Span>& chunks,
                  float divisor, Residual residual, uint64_t step) {
  const int me = p.me;
  // The frames piece k sends and receives (the same lists for its announce and its move).
  auto traffic = [&](uint64_t k, int slot, std::vector<Outgoing>* sends,
                     std::vector<Incoming>* recvs) {
    const Span own = pieceOf(chunks[me], p.pieceElems, k);
    for (int r = 0; r < p.n; ++r) {
      if (r == me) continue;
      const Span theirs = pieceOf(chunks[r], p.pieceElems, k);
      if (theirs.count) sends->push_back({r, p.sendFrame(slot, r), theirs.count, r});
      if (own.count) recvs->push_back({r, p.recvFrame(slot, r), own.count});
    }
  };
  auto moveStep = [&](auto&& step) {
    return [&, step](uint64_t k, int slot) {
      std::vector<Outgoing> sends;
      std::vector<Incoming> recvs;
      traffic(k, slot, &sends, &recvs);
      step(p, slot, sends, recvs);
    };
  };
  runPieces(
      p, maxPieces(p, chunks), p.exchangesSizes(),
      [&](uint64_t k, int slot) {
        std::vector<EncodeBlock> blocks;  // without feedback: one batch where the engine can
        for (int r = 0; r < p.n; ++r) {
          const Span piece = pieceOf(chunks[r], p.pieceElems, k);
          if (!piece.count) continue;
          const uint64_t first = chunks[r].offset + piece.offset;
          if (residual)
            p.e.encode(p.use, p.at(in, first), piece.count, p.sendFrame(slot, r), p.stride,
                       &p.sizes(slot)[r], residual.at(first), step);
          else
            blocks.push_back(
                {p.at(in, first), piece.count, p.sendFrame(slot, r), &p.sizes(slot)[r]});
        }
        if (!blocks.empty()) p.e.encodeBlocks(p.use, blocks, p.stride);
      },
      moveStep(announceSizes), moveStep(moveFrames),
      [&](uint64_t k, int slot) {
        const Span own = pieceOf(chunks[me], p.pieceElems, k);
        if (!own.count) return;
        // Ranks in order, so that every engine and every rank sums alike.
        std::vector<const uint8_t*> frames(p.n);
        for (int r = 0; r < p.n; ++r)
          frames[r] = r == me ? p.sendFrame(slot, me) : p.recvFrame(slot, r);
        p.e.decodeSum(p.use, frames, p.stride, own.count, p.accumulator(slot), divisor,
                      p.at(mine, own.offset));
      });
}

// Chunk r of `in` (count elements) goes to rank r; chunk r of `out` comes from rank r.
void allToAllPieces(const Pipeline& p, const void* in, void* out, uint64_t count) {
  const int me = p.me;
  const Span chunk{0, count};
  auto moveStep = [&](auto&& step) {
    return [&, step](uint64_t k, int slot) {
      const uint64_t elems = pieceOf(chunk, p.pieceElems, k).count;
      std::vector<Outgoing> sends;
      std::vector<Incoming> recvs;
      for (int r = 0; r < p.n; ++r) {
        if (r == me) continue;
        sends.push_back({r, p.sendFrame(slot, r), elems, r});
        recvs.push_back({r, p.recvFrame(slot, r), elems});
      }
      step(p, slot, sends, recvs);
    };
  };
  runPieces(
      p, pieceCount(count, p.pieceElems), p.exchangesSizes(),
      [&](uint64_t k, int slot) {
        const Span piece = pieceOf(chunk, p.pieceElems, k);
        std::vector<EncodeBlock> blocks;  // one per destination, of one count: one batch
        for (int r = 0; r < p.n; ++r)
          blocks.push_back({p.at(in, r * count + piece.offset), piece.count, p.sendFrame(slot, r),
                            &p.sizes(slot)[r]});
        p.e.encodeBlocks(p.use, blocks, p.stride);
      },
      moveStep(announceSizes), moveStep(moveFrames),
      [&](uint64_t k, int slot) {
        const Span piece = pieceOf(chunk, p.pieceElems, k);
        for (int r = 0; r < p.n; ++r) {
          const uint8_t* frame = r == me ? p.sendFrame(slot, me) : p.recvFrame(slot, r);
          p.e.decode(p.use, frame, p.stride, piece.count, p.at(out, r * count + piece.offset));
        }
      });
}

void sendPieces(const Pipeline& p, const void* in, uint64_t count, int peer) {
  const Span all{0, count};
  auto moveStep = [&](auto&& step) {
    return [&, step](uint64_t k, int slot) {
      step(p, slot, {{peer, p.sendFrame(slot, peer), pieceOf(all, p.pieceElems, k).count, peer}},
           {});
    };
  };
  runPieces(
      p, pieceCount(count, p.pieceElems), p.exchangesSizes(),
      [&](uint64_t k, int slot) {
        const Span piece = pieceOf(all, p.pieceElems, k);
        p.e.encode(p.use, p.at(in, piece.offset), piece.count, p.sendFrame(slot, peer), p.stride,
                   &p.sizes(slot)[peer], Residual{}, 0);
      },
      moveStep(announceSizes), moveStep(moveFrames),
      [](uint64_t, int) {});  // nothing to decode; the stage keeps the slot's bookkeeping uniform
}

void recvPieces(const Pipeline& p, void* out, uint64_t count, int peer) {
  const Span all{0, count};
  auto moveStep = [&](auto&& step) {
    return [&, step](uint64_t k, int slot) {
      step(p, slot, {}, {{peer, p.recvFrame(slot, peer), pieceOf(all, p.pieceElems, k).count}});
    };
  };
  runPieces(
      p, pieceCount(count, p.pieceElems), p.exchangesSizes(), [](uint64_t, int) {},
      moveStep(announceSizes), moveStep(moveFrames),
      [&](uint64_t k, int slot) {
        const Span piece = pieceOf(all, p.pieceElems, k);
        p.e.decode(p.use, p.recvFrame(slot, peer), p.stride, piece.count,
                   p.at(out, piece.offset));
      });
}

}  // namespace cclz
