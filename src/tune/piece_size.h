// The pipeline piece of a compressed collective: how many input bytes per destination each
// encode-move-decode step takes. Fewer, larger pieces pay less fixed work per piece; more pieces
// overlap more of the encode and decode with the transfer.
#pragma once

#include <cstdint>

namespace cclz {

// The piece, in input bytes per destination, for a call whose largest per-destination block is
// chunkBytes on `ranks` ranks, when CCLZ_PIECE_BYTES does not set it: a quarter of the block (at
// least 4 pieces to overlap), rounded up to whole MiB, at least 4 MiB and at most
// max(4 MiB, 64 MiB / ranks rounded down to whole MiB). On 2 H200s each piece costs ~40 us of
// fixed work over NVLink, and NCCL's socket transport moves 2 MiB parts slower than 8-16 MiB ones,
// so fixed 4 MiB pieces lose up to 3x at 256 MiB (docs/collectives.md, "The algorithms"); the cap
// bounds the scratch, which grows with piece x ranks (three slots of frames both ways).
uint64_t defaultPieceBytes(uint64_t chunkBytes, int ranks);

// The piece a communicator uses for such a call: settingBytes (CCLZ_PIECE_BYTES) if not 0.
uint64_t pieceBytesFor(uint64_t settingBytes, uint64_t chunkBytes, int ranks);

// The piece of the fused NVLink path whose frames a kernel stores (collective/fused_nvlink.cpp),
// when CCLZ_PIECE_BYTES does not set it: the whole block, up to kFusedPieceCap. Its steps wait
// for each other within a piece and overlap across pieces only partly, while every piece pays
// its encode's sampling kernels, its push's barrier and its decode's tail: on 2 H200s one piece
// took the 64 MiB all-gather from 0.79x to 1.06x of NCCL, the reduce-scatter from 0.58x to 0.72x
// (bench/results/fused-nvlink-2xh200, "Fewer pieces"). The cap bounds the window, which holds
// three slot sets of a frame per rank.
constexpr uint64_t kFusedPieceCap = uint64_t{32} << 20;
uint64_t fusedPieceBytes(uint64_t settingBytes, uint64_t chunkBytes);

}  // namespace cclz
