// The two-level all-gather and reduce-scatter (docs/collectives.md, "Two-level calls across
// nodes"), for a communicator whose ranks span M nodes of L ranks each (NodeLayout::twoLevel)
// and a codec of fixed frame size. Rank (m, j) is the j-th rank of node m; the ranks (*, j), one
// per node, form its column. Only frames between the ranks of a column cross a node boundary,
// each once; the rest moves inside the nodes. For two nodes of two ranks and N elements in all
// (an all-gather's output, a reduce-scatter's input), a ring carries 3N/4 across the boundary in
// each direction, the flat compressed reduce-scatter N (every rank's block for every rank goes
// straight to it), these N/2; then the codec divides it.
#include "collective/node_layout.h"
#include "collective/pipeline.h"

namespace cclz {

// Piece k of each rank's chunk is encoded once, by its owner, into the owner's slot of the
// receive frames (indexed by rank). The frame goes to the owner's column across the nodes, then
// each rank forwards its column's frames (its own and those it received) to the ranks of its
// node. Every rank then holds every frame, unchanged, and decodes each: the bytes of the flat
// all-gather.
void gatherPiecesTwoLevel(const Pipeline& p, const NodeLayout& l, const void* mine, void* out,
                          const std::vector<Span>& chunks) {
  const int me = p.me, j = l.localOf[me], home = l.nodeOf[me];
  auto countOf = [&](int r, uint64_t k) { return pieceOf(chunks[r], p.pieceElems, k).count; };
  runPieces(
      p, maxPieces(p, chunks), false,
      [&](uint64_t k, int slot) {
        const Span own = pieceOf(chunks[me], p.pieceElems, k);
        if (own.count)
          p.e.encode(p.use, p.at(mine, own.offset), own.count, p.recvFrame(slot, me), p.stride,
                     &p.sizes(slot)[me], Residual{}, 0);
      },
      [](uint64_t, int) {},
      [&](uint64_t k, int slot) {
        // Across the nodes, within the column.
        p.t.groupStart(p.e.moveStream());
        for (int m = 0; m < l.nodes; ++m) {
          if (m == home) continue;
          const int peer = l.rankAt(m, j);
          if (const uint64_t c = countOf(me, k))
            p.t.send(p.recvFrame(slot, me), p.wireBytes(c), peer);
          if (const uint64_t c = countOf(peer, k))
            p.t.recv(p.recvFrame(slot, peer), p.wireBytes(c), peer, nullptr);
        }
        p.t.groupEnd();
        // Inside the node: this column's frames out, each other column's in, in node order.
        p.t.groupStart(p.e.moveStream());
        for (int q : l.ranks[home]) {
          if (q == me) continue;
          const int theirs = l.localOf[q];
          for (int m = 0; m < l.nodes; ++m) {
            const int sent = l.rankAt(m, j), received = l.rankAt(m, theirs);
            if (const uint64_t c = countOf(sent, k))
              p.t.send(p.recvFrame(slot, sent), p.wireBytes(c), q);
            if (const uint64_t c = countOf(received, k))
              p.t.recv(p.recvFrame(slot, received), p.wireBytes(c), q, nullptr);
          }
        }
        p.t.groupEnd();
      },
      [&](uint64_t k, int slot) {
        for (int r = 0; r < p.n; ++r)
          if (const uint64_t c = countOf(r, k))
            p.e.decode(p.use, p.recvFrame(slot, r), p.stride, c,
                       p.at(out, chunks[r].offset + k * p.pieceElems));
      });
}

// Per piece, in four steps:
//  1. inside the node (Move), raw: each rank sends the ranks of its node their columns' blocks
//     of its input;
//  2. (Decode stage's stream) for each rank d of its own column, the node's sum of d's block:
//     the raw blocks of the node's ranks added in fp32 in rank order. For d on another node it
//     is rounded to the dtype and encoded once; this rank's own block stays in the accumulator;
//  3. across the nodes (Move), within the column: each node's frame of a block to the block's
//     owner;
//  4. the owner adds the decoded frames of the other nodes, in node order, to its node's sum
//     and stores sum / divisor in the dtype.
// Each element is quantized once, as in the flat reduce-scatter, but as a node's sum rather than
// as each rank's value. With error feedback the encoding rank's residual takes what that
// quantization drops, for the block it encodes (its region of the residual, at the block's
// offset in the input); the same rank encodes the same blocks at every call, so the residual
// goes back into the same node's sum. The other blocks of its node move raw and leave nothing,
// but for its own block's region, where an all-reduce folds its all-gather's error (as flat):
// that goes into the rank's own block at the next call. Steps 3 and 4 of piece k - 1 follow steps 1 and 2 of piece k, so that the
// transfer across the nodes overlaps the next piece's sums and encodes.
//
// Slots, by rank index: the receive frames hold the raw blocks from the node's other ranks at
// the index of the rank (m, their column) for node m's block, and the frames from the other
// nodes at the sender's index (this column); the send frames hold the encoded sums at their
// destination's index. The stride covers a raw piece (runData).
void reducePiecesTwoLevel(const Pipeline& p, const NodeLayout& l, const void* in, void* mine,
                          const std::vector<Span>& chunks, float divisor, Residual residual,
                          uint64_t step) {
  const int me = p.me, j = l.localOf[me], home = l.nodeOf[me];
  const uint64_t pieces = maxPieces(p, chunks);
  auto pieceAt = [&](int r, uint64_t k) { return pieceOf(chunks[r], p.pieceElems, k); };
  auto inputOf = [&](int r, uint64_t k) { return p.at(in, chunks[r].offset + k * p.pieceElems); };
  // The other nodes, in node order: their frames are added in this order.
  std::vector<int> away;
  for (int m = 0; m < l.nodes; ++m)
    if (m != home) away.push_back(m);

  auto exchangeInside = [&](uint64_t k, int slot) {
    p.t.groupStart(p.e.moveStream());
    for (int q : l.ranks[home]) {
      if (q == me) continue;
      const int theirs = l.localOf[q];
      for (int m = 0; m < l.nodes; ++m) {
        const int dest = l.rankAt(m, theirs), ours = l.rankAt(m, j);
        if (const uint64_t c = pieceAt(dest, k).count)
          p.t.send(inputOf(dest, k), c * p.elemBytes, q);
        if (const uint64_t c = pieceAt(ours, k).count)
          p.t.recv(p.recvFrame(slot, dest), c * p.elemBytes, q, nullptr);
      }
    }
    p.t.groupEnd();
  };
  auto sumAndEncode = [&](uint64_t k, int slot) {
    float* acc = p.accumulator(slot);
    uint8_t* partial = p.e.area(Area::Partial);
    for (int m : away) {
      const int dest = l.rankAt(m, j);
      const uint64_t c = pieceAt(dest, k).count;
      if (!c) continue;
      p.e.zero(acc, c);
      for (int r : l.ranks[home])
        p.e.accumulate(r == me ? inputOf(dest, k) : p.recvFrame(slot, l.rankAt(m, l.localOf[r])),
                       c, p.use.dtype, acc);
      p.e.store(acc, c, 1.0f, p.use.dtype, partial);
      p.e.encode(p.use, partial, c, p.sendFrame(slot, dest), p.stride, &p.sizes(slot)[dest],
                 residual.at(chunks[dest].offset + k * p.pieceElems), step);
    }
    // Last, so that the accumulator keeps it for the frames from the other nodes. With error
    // feedback this rank's own block carries its residual in (and zeroes it): an all-reduce
    // folds its all-gather's error there, which no encode of this rank's would send back.
    if (const uint64_t c = pieceAt(me, k).count) {
      const void* own = inputOf(me, k);
      if (residual) {
        p.e.addResidual(partial, own, residual.at(chunks[me].offset + k * p.pieceElems), c,
                        p.use.dtype);
        own = partial;
      }
      p.e.zero(acc, c);
      for (int r : l.ranks[home])
        p.e.accumulate(r == me ? own : p.recvFrame(slot, l.rankAt(home, l.localOf[r])), c,
                       p.use.dtype, acc);
    }
  };
  auto exchangeAcross = [&](uint64_t k, int slot) {
    p.t.groupStart(p.e.moveStream());
    for (int m : away) {
      const int peer = l.rankAt(m, j);
      if (const uint64_t c = pieceAt(peer, k).count)
        p.t.send(p.sendFrame(slot, peer), p.wireBytes(c), peer);
      if (const uint64_t c = pieceAt(me, k).count)
        p.t.recv(p.recvFrame(slot, peer), p.wireBytes(c), peer, nullptr);
    }
    p.t.groupEnd();
  };
  auto finish = [&](uint64_t k, int slot) {
    const Span own = pieceAt(me, k);
    if (!own.count) return;
    for (size_t i = 0; i < away.size(); ++i)
      p.e.decodeReduce(p.use, p.recvFrame(slot, l.rankAt(away[i], j)), p.stride, own.count,
                       p.accumulator(slot), false, i + 1 == away.size(), divisor,
                       p.at(mine, own.offset));
  };
  for (uint64_t k = 0; k <= pieces; ++k) {
    if (k < pieces) {
      const int slot = static_cast<int>(k % kSlots);
      p.e.stage(Stage::Move, slot);
      exchangeInside(k, slot);
      p.e.stage(Stage::Decode, slot);
      sumAndEncode(k, slot);
    }
    if (k >= 1) {
      const int slot = static_cast<int>((k - 1) % kSlots);
      p.e.stage(Stage::Move, slot);
      exchangeAcross(k - 1, slot);
      p.e.stage(Stage::Decode, slot);
      finish(k - 1, slot);
    }
  }
}

}  // namespace cclz
