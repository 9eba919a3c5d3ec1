// ---- Decode of plain frames (policy 0, not smoothed: the E4M3/E5M2 default). No value depends
// on another, so each lane loads 16 consecutive codes (one 16-byte load, one block, one row) and
// a warp two 512-value tiles per step, both loaded before either is decoded. The bits are the
// general path's: the same scale, product and saturation; only the instructions differ.
// The lanes then trade their codes so that each decodes and stores 4 groups of 4 consecutive
// values, group k at 128 k + 4 lane of the tile: every store of the warp writes whole L2 lines
// (512 contiguous bytes of fp32, 256 of bf16 or fp16).
// NOTE: storing its own 16 values, a lane wrote half of each 32-byte sector per store and the L2
// took every sector in two writes; its input from the SMs, not DRAM, bounded decode-and-
// accumulate (bench/results/2026-11-25-s25-fp8-decode-groups). Loading by groups instead (a
// 4-byte code load and the row's and block's side data per group) lost a third: 16 loads per
// lane and tile instead of 4.

constexpr uint32_t kPieceElems = 16;                    // a lane's codes: one uint4
constexpr uint32_t kPlainTileElems = 32 * kPieceElems;  // one warp's tile
constexpr uint32_t kGroupElems = 4;                     // what a lane stores at once: one code word
constexpr uint32_t kGroupStride = 32 * kGroupElems;     // from a lane's group to its next

// What a lane reads for its 16 values of one plain tile.
struct PieceLoad {
  uint64_t first;  // the lane's first element
  uint32_t valid;  // how many of its 16 exist
  uint4 codes;     // byte j of word j / 4 is code j; codes past `valid` are 0
  uint32_t coarseBits;
  uint8_t flag, fine;
};

__device__ __forceinline__ PieceLoad loadPiece(const uint8_t* src, const Layout& l,
                                               uint32_t rowElems, double invRowElems,
                                               uint64_t count, uint64_t tile, uint32_t lane) {
  PieceLoad t;
  t.first = tile * kPlainTileElems + lane * kPieceElems;
  t.valid = t.first >= count                ? 0u
            : count - t.first < kPieceElems ? static_cast<uint32_t>(count - t.first)
                                            : kPieceElems;
  t.codes = make_uint4(0, 0, 0, 0);
  t.coarseBits = 0, t.flag = 0, t.fine = 0;
  if (t.valid == 0) return t;
  const uint64_t row = rowOf(t.first, rowElems, invRowElems);  // < numRows: first < count
  t.coarseBits = __ldg(reinterpret_cast<const unsigned int*>(src + l.coarse) + row);
  t.flag = __ldg(src + l.flags + row);
  t.fine = __ldg(src + l.fine + t.first / kBlockElems);
  if (t.valid == kPieceElems) {  // l.codes = 64 and the frame is 16-byte aligned (cclz.h)
    t.codes = __ldg(reinterpret_cast<const uint4*>(src + l.codes + t.first));
  } else {
    uint32_t c[4] = {0, 0, 0, 0};
#pragma unroll
    for (uint32_t j = 0; j < kPieceElems; ++j)
      if (j < t.valid) c[j / 4] |= static_cast<uint32_t>(src[l.codes + t.first + j]) << (8 * j % 32);
    t.codes = make_uint4(c[0], c[1], c[2], c[3]);
  }
  return t;
}

// Two fp32 values saturated to the dtype's largest finite value and rounded to nearest even, in
// one instruction: `satfinite` clamps what rounds past the largest finite value to it, which is
// what saturate-then-round gives (the largest finite value is on the grid). Inputs are never NaN.
template <int Dtype>
__device__ __forceinline__ uint32_t packSaturated2(float lo, float hi) {
  uint32_t w;
  if constexpr (Dtype == cclzBfloat16)
    asm("cvt.rn.satfinite.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.satfinite.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  return w;
}

// A lane's scale as its groups' lanes receive it when its row is bad: no valid scale has these
// bits (validCoarse refuses a negative coarse scale, and fine scales are positive).
constexpr uint32_t kBadScaleBits = 0xFFFFFFFFu;

// Decodes one plain tile (every lane of the warp calls it: the codes move by shuffles). A lane
// whose row is bad reports it, and its 16 values are skipped (no other value depends on them); a
// group with a rare code or past the end of the frame takes the general per-value path.
template <int Dtype, int Mode>
__device__ __forceinline__ void decodePiece(const PieceLoad& t, uint64_t count, uint32_t grid,
                                            const float* codeTable, void* dst,
                                            const ReduceStep& r, uint32_t lane,
                                            DeviceStatus* status) {
  uint32_t scaleBits = 0;
  if (t.valid > 0) {
    const float coarse = bitsToFloat(t.coarseBits);
    if (t.flag != 0 || !validCoarse(coarse, 0)) {  // policy 0: no row may be rotated
      atomicCAS(&status->decodeError, 0u, static_cast<uint32_t>(kFrameBadChunk));
      scaleBits = kBadScaleBits;
    } else {
      scaleBits = floatToBits(mulRn(coarse, fineScale(t.fine)));
    }
  }
  // Lane L takes, in round q, group k = (q + L) % 4: code word L % 4 of lane 8 k + L / 4. So
  // lane M sends word (M / 8 - q) % 4 in round q: rotated by M / 8 first, that is word -q % 4.
  const uint32_t turn = (lane >> 3) & 3u;
  uint32_t c[4] = {t.codes.x, t.codes.y, t.codes.z, t.codes.w};
  if (turn & 1u) {
    const uint32_t c0 = c[0];
    c[0] = c[1], c[1] = c[2], c[2] = c[3], c[3] = c0;
  }
  if (turn & 2u) {
    const uint32_t c0 = c[0], c1 = c[1];
    c[0] = c[2], c[1] = c[3], c[2] = c0, c[3] = c1;
  }
  uint32_t words[4], scales[4];
#pragma unroll
  for (uint32_t q = 0; q < 4; ++q) {
    const uint32_t from = 8 * ((q + lane) & 3u) + (lane >> 2);
    words[q] = __shfl_sync(kFullMask, c[(4 - q) & 3u], from);
    scales[q] = __shfl_sync(kFullMask, scaleBits, from);
  }
  const uint64_t tileFirst = t.first - lane * kPieceElems;
  const uint32_t carry = grid == kE5M2 ? 0x04040404u : 0x01010101u;
#pragma unroll
  for (uint32_t q = 0; q < 4; ++q) {
    const uint64_t e = tileFirst + ((q + lane) & 3u) * kGroupStride + lane * kGroupElems;
    if (e >= count || scales[q] == kBadScaleBits) continue;
    const float s = bitsToFloat(scales[q]);
    const uint32_t w = words[q];
    float v[kGroupElems];
    if (rareBytes(w, carry) != 0 || count - e < kGroupElems) {  // NaN and Inf keep their value
      const float maxFinite = dtypeMaxFinite(Dtype);
#pragma unroll
      for (uint32_t j = 0; j < kGroupElems; ++j) {
        const uint8_t code = static_cast<uint8_t>(w >> (8 * j));
        v[j] = isSpecialCode(code) ? specialValue(code)
                                   : saturate(mulRn(codeTable[code], s), maxFinite);
      }
      const uint32_t valid = static_cast<uint32_t>(min(static_cast<uint64_t>(kGroupElems), count - e));
      storeN<Dtype, Mode, kGroupElems>(dst, r, e, valid, v, false);
      continue;
    }
    if (grid == kInt8) {  // uniform
#pragma unroll
      for (uint32_t j = 0; j < kGroupElems; ++j) v[j] = mulRn(codeTable[(w >> (8 * j)) & 0xFFu], s);
    } else {
      // NOTE: the grids' finite codes are the OCP E4M3/E5M2 encodings (sign-magnitude, the same
      // subnormals), so the hardware's exact conversion to fp16 pairs gives codeValue.
#pragma unroll
      for (uint32_t j = 0; j < kGroupElems; j += 2) {
        const auto pair = static_cast<__nv_fp8x2_storage_t>(w >> (8 * j));
        const float2 m = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, fp8Kind(grid))));
        v[j] = mulRn(m.x, s), v[j + 1] = mulRn(m.y, s);
      }
    }
    if constexpr (Dtype == cclzFloat32) {
      const float maxFinite = dtypeMaxFinite(Dtype);
#pragma unroll
      for (uint32_t j = 0; j < kGroupElems; ++j) v[j] = saturate(v[j], maxFinite);
      storeN<Dtype, Mode, kGroupElems>(dst, r, e, kGroupElems, v, true);
    } else {
      uint32_t h[kGroupElems / 2];
#pragma unroll
      for (uint32_t k = 0; k < kGroupElems / 2; ++k) h[k] = packSaturated2<Dtype>(v[2 * k], v[2 * k + 1]);
      if constexpr (Mode != kStore) {
        float add[kGroupElems];  // what decode stores, back in fp32
#pragma unroll
        for (uint32_t k = 0; k < kGroupElems; ++k)
          add[k] = unpackHalfWord<Dtype>((h[k / 2] >> (16 * (k % 2))) & 0xFFFFu);
        accumulateN<Dtype, Mode, kGroupElems>(r, e, kGroupElems, add);
      } else {
        storeWords<kGroupElems / 2>(static_cast<uint16_t*>(dst) + e, h);
      }
    }
  }
}

// The plain decode: every warp takes tiles (512 values) tile, tile + warps, ... two per step.
template <int Dtype, int Mode>
__device__ __forceinline__ void decodePlain(const uint8_t* src, const Layout& l, const Params& p,
                                            uint64_t count, const float* codeTable, void* dst,
                                            const ReduceStep& r, DeviceStatus* status) {
  const uint32_t lane = threadIdx.x & 31;
  const double invRowElems = 1.0 / p.rowElems;
  const uint64_t tiles = (count + kPlainTileElems - 1) / kPlainTileElems;
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * blockDim.x / 32;
  for (uint64_t tile = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       tile < tiles; tile += 2 * warps) {
    const bool second = tile + warps < tiles;  // uniform across the warp
    const PieceLoad a = loadPiece(src, l, p.rowElems, invRowElems, count, tile, lane);
    PieceLoad b;
    if (second) b = loadPiece(src, l, p.rowElems, invRowElems, count, tile + warps, lane);
    // NOTE: no L2 prefetch of the accumulator here: the build that had one (and the 64-register
    // bound, new in the same round) accumulated at 1361 GB/s at 256 MiB, against 1565 before.
    // Nor a read of it ahead of the codes: 24 warps per SM that held it lost 11% at 64 MiB
    // (bench/results/2026-11-25-s25-fp8-decode-groups, round a).
    decodePiece<Dtype, Mode>(a, count, p.grid, codeTable, dst, r, lane, status);
    if (second) decodePiece<Dtype, Mode>(b, count, p.grid, codeTable, dst, r, lane, status);
  }
}

