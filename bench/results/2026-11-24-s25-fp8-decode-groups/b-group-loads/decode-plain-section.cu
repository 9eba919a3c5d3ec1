// NW 32-bit words at p: NW / 4 16-byte stores, or one 8-byte store for NW = 2.
template <uint32_t NW>
__device__ __forceinline__ void storeWords(void* p, const uint32_t* w) {
  if constexpr (NW == 2) {
    *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
  } else {
#pragma unroll
    for (uint32_t k = 0; k < NW / 4; ++k)
      reinterpret_cast<uint4*>(p)[k] = make_uint4(w[4 * k], w[4 * k + 1], w[4 * k + 2], w[4 * k + 3]);
  }
}

// r.acc[i + j] += add[j] for the lane's valid values of N (4 or 8: one or two float4); with
// r.fromZero the accumulator is taken as zeros (not read), and with r.store the sums go there,
// divided and rounded to the dtype, instead of back to the accumulator (ReduceStep,
// codec/device.h). The plain step (kAccumulate) tests neither.
template <int Dtype, int Mode, uint32_t N>
__device__ __forceinline__ void accumulateN(const ReduceStep& r, uint64_t i, uint32_t valid,
                                            const float* add) {
  const bool fromZero = Mode == kReduce && r.fromZero;
  const bool toStore = Mode == kReduce && r.store != nullptr;
  if (valid == N) {
    float sum[N];
#pragma unroll
    for (uint32_t k = 0; k < N / 4; ++k) {
      float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (!fromZero) a = reinterpret_cast<const float4*>(r.acc + i)[k];
      sum[4 * k] = accumulateRn(a.x, add[4 * k]), sum[4 * k + 1] = accumulateRn(a.y, add[4 * k + 1]);
      sum[4 * k + 2] = accumulateRn(a.z, add[4 * k + 2]);
      sum[4 * k + 3] = accumulateRn(a.w, add[4 * k + 3]);
    }
    if (!toStore) {
#pragma unroll
      for (uint32_t k = 0; k < N / 4; ++k)
        reinterpret_cast<float4*>(r.acc + i)[k] =
            make_float4(sum[4 * k], sum[4 * k + 1], sum[4 * k + 2], sum[4 * k + 3]);
    } else if constexpr (Dtype == cclzFloat32) {
      uint32_t w[N];
#pragma unroll
      for (uint32_t j = 0; j < N; ++j) w[j] = storedBits<Dtype>(sum[j], r.divisor);
      storeWords<N>(static_cast<float*>(r.store) + i, w);
    } else {
      uint32_t w[N / 2];
#pragma unroll
      for (uint32_t j = 0; j < N / 2; ++j)
        w[j] = storedBits<Dtype>(sum[2 * j], r.divisor) |
               (storedBits<Dtype>(sum[2 * j + 1], r.divisor) << 16);
      storeWords<N / 2>(static_cast<uint16_t*>(r.store) + i, w);
    }
    return;
  }
#pragma unroll
  for (uint32_t j = 0; j < N; ++j) {
    if (j >= valid) continue;
    const float total = accumulateRn(fromZero ? 0.0f : r.acc[i + j], add[j]);
    if (!toStore)
      r.acc[i + j] = total;
    else if constexpr (Dtype == cclzFloat32)
      static_cast<uint32_t*>(r.store)[i + j] = storedBits<Dtype>(total, r.divisor);
    else
      static_cast<uint16_t*>(r.store)[i + j] =
          static_cast<uint16_t>(storedBits<Dtype>(total, r.divisor));
  }
}

// storeN for bf16 / fp16: the 16-bit words decode would store (N / 2 words of two).
template <int Dtype, int Mode, uint32_t N>
__device__ __forceinline__ void storeHalfN(void* dst, const ReduceStep& r, uint64_t i,
                                           uint32_t valid, const float* v, bool finite) {
  uint32_t w[N / 2];
#pragma unroll
  for (uint32_t j = 0; j < N / 2; ++j) {
    if (finite) {
      w[j] = packFinite2<Dtype>(v[2 * j], v[2 * j + 1]);
    } else {
      uint16_t lo, hi;
      storeFromFloat(&lo, Dtype, 0, v[2 * j]);
      storeFromFloat(&hi, Dtype, 0, v[2 * j + 1]);
      w[j] = lo | (static_cast<uint32_t>(hi) << 16);
    }
  }
  if constexpr (Mode != kStore) {
    float add[N];  // what decode would store, back in fp32
#pragma unroll
    for (uint32_t j = 0; j < N / 2; ++j) {
      add[2 * j] = unpackHalfWord<Dtype>(w[j] & 0xFFFFu);
      add[2 * j + 1] = unpackHalfWord<Dtype>(w[j] >> 16);
    }
    accumulateN<Dtype, Mode, N>(r, i, valid, add);
  } else if (valid == N) {
    storeWords<N / 2>(static_cast<uint16_t*>(dst) + i, w);
  } else {
#pragma unroll
    for (uint32_t j = 0; j < N; ++j)
      if (j < valid) static_cast<uint16_t*>(dst)[i + j] = static_cast<uint16_t>(w[j / 2] >> (16 * (j % 2)));
  }
}

// Stores (or adds) the lane's N decoded values (4 or 8) at element i. `finite`: no value is NaN
// or Inf, so the conversions can take the hardware's paired path.
template <int Dtype, int Mode, uint32_t N>
__device__ __forceinline__ void storeN(void* dst, const ReduceStep& r, uint64_t i, uint32_t valid,
                                       const float* v, bool finite) {
  if constexpr (Dtype == cclzFloat32) {
    if constexpr (Mode != kStore) {
      accumulateN<Dtype, Mode, N>(r, i, valid, v);
    } else if (valid == N) {
      uint32_t w[N];
#pragma unroll
      for (uint32_t j = 0; j < N; ++j) w[j] = floatToBits(v[j]);
      storeWords<N>(static_cast<float*>(dst) + i, w);
    } else {
#pragma unroll
      for (uint32_t j = 0; j < N; ++j)
        if (j < valid) static_cast<float*>(dst)[i + j] = v[j];
    }
  } else {
    storeHalfN<Dtype, Mode, N>(dst, r, i, valid, v, finite);
  }
}

// ---- Decode of plain frames (policy 0, not smoothed: the E4M3/E5M2 default). No value depends
// on another, so a lane takes 16 values of each 512-value tile as 4 groups of 4 consecutive ones,
// group g at 4 * lane + 128 * g, and a warp two tiles per step, both loaded before either is
// decoded. A group is one code word and lies in one block and one row (rows are multiples of
// 64). The bits are the general path's: the same scale, product and saturation; only the
// instructions differ.
// NOTE: groups, so that every store of the warp writes whole L2 lines: 512 contiguous bytes of
// fp32, 256 of bf16 or fp16. When each lane took 16 consecutive values (one 16-byte code load),
// a warp's store wrote half of each 32-byte sector it touched, the L2 took every sector in two
// writes, and its input from the SMs was the bottleneck: 84% busy with DRAM at 56% on the same
// read-modify-write with 16 values a lane, against 45% and 80% by groups
// (bench/results/2026-11-25-s25-fp8-decode-groups).

constexpr uint32_t kGroupElems = 4;                       // one code word
constexpr uint32_t kPieceGroups = 4;                      // a lane's groups per tile
constexpr uint32_t kGroupStride = 32 * kGroupElems;       // from a lane's group to its next
constexpr uint32_t kPlainTileElems = kPieceGroups * kGroupStride;  // one warp's tile: 512

// What a lane reads for its 16 values of one plain tile.
struct PieceLoad {
  uint64_t first;                     // group 0's first element; group g's is + g * kGroupStride
  uint32_t codes[kPieceGroups];       // byte j of codes[g] is group g's code j; past count 0
  uint32_t coarseBits[kPieceGroups];  // the group's row's coarse scale
  uint32_t flags, fines;              // byte g: group g's row flag and block's fine code
};

__device__ __forceinline__ uint32_t byteOf(uint32_t w, uint32_t j) { return (w >> (8 * j)) & 0xFFu; }

// The values of group g that exist (0..4).
__device__ __forceinline__ uint32_t groupValid(const PieceLoad& t, uint32_t g, uint64_t count) {
  const uint64_t e = t.first + g * kGroupStride;
  return e >= count ? 0u : static_cast<uint32_t>(min(static_cast<uint64_t>(kGroupElems), count - e));
}

__device__ __forceinline__ PieceLoad loadPiece(const uint8_t* src, const Layout& l,
                                               uint32_t rowElems, double invRowElems,
                                               uint64_t count, uint64_t tile, uint32_t lane) {
  PieceLoad t;
  t.first = tile * kPlainTileElems + lane * kGroupElems;
  t.flags = 0, t.fines = 0;
  uint64_t row = 0;
  uint32_t column = 0;  // of group g's first element in its row
#pragma unroll
  for (uint32_t g = 0; g < kPieceGroups; ++g) {
    t.codes[g] = 0, t.coarseBits[g] = 0;
    const uint64_t e = t.first + g * kGroupStride;
    if (e >= count) continue;  // so are the later groups'
    // NOTE: rows of 128 or more are at most one row further per group: no division.
    if (g == 0 || rowElems < kGroupStride) {
      row = rowOf(e, rowElems, invRowElems);  // < numRows: e < count
      column = static_cast<uint32_t>(e - row * rowElems);
    } else if ((column += kGroupStride) >= rowElems) {
      column -= rowElems, ++row;
    }
    t.coarseBits[g] = __ldg(reinterpret_cast<const unsigned int*>(src + l.coarse) + row);
    t.flags |= static_cast<uint32_t>(__ldg(src + l.flags + row)) << (8 * g);
    t.fines |= static_cast<uint32_t>(__ldg(src + l.fine + e / kBlockElems)) << (8 * g);
    if (e + kGroupElems <= count) {  // l.codes = 64 and the frame is 16-byte aligned (cclz.h)
      t.codes[g] = __ldg(reinterpret_cast<const unsigned int*>(src + l.codes + e));
    } else {
#pragma unroll
      for (uint32_t j = 0; j < kGroupElems; ++j)
        if (e + j < count) t.codes[g] |= static_cast<uint32_t>(src[l.codes + e + j]) << (8 * j);
    }
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

// Decodes one lane's piece of a plain frame: a piece with a bad row is reported and skipped (no
// value of another piece depends on it); one with a rare code or past the end of the frame takes
// the general per-value path.
template <int Dtype, int Mode>
__device__ __forceinline__ void decodePiece(const PieceLoad& t, uint64_t count, uint32_t grid,
                                            const float* codeTable, void* dst,
                                            const ReduceStep& r, DeviceStatus* status) {
  if (t.first >= count) return;
  float s[kPieceGroups];
  bool bad = false;
#pragma unroll
  for (uint32_t g = 0; g < kPieceGroups; ++g) {
    const float coarse = bitsToFloat(t.coarseBits[g]);
    // policy 0: no row may be rotated
    if (groupValid(t, g, count) > 0 && (byteOf(t.flags, g) != 0 || !validCoarse(coarse, 0)))
      bad = true;
    s[g] = mulRn(coarse, fineScale(byteOf(t.fines, g)));
  }
  if (bad) {
    atomicCAS(&status->decodeError, 0u, static_cast<uint32_t>(kFrameBadChunk));
    return;
  }
  const uint32_t carry = grid == kE5M2 ? 0x04040404u : 0x01010101u;
  uint32_t rareBits = 0;
#pragma unroll
  for (uint32_t g = 0; g < kPieceGroups; ++g) rareBits |= rareBytes(t.codes[g], carry);
  const bool whole = t.first + (kPieceGroups - 1) * kGroupStride + kGroupElems <= count;
  if (rareBits != 0 || !whole) {  // NaN and Inf keep their value; every other value as below
    const float maxFinite = dtypeMaxFinite(Dtype);
#pragma unroll
    for (uint32_t g = 0; g < kPieceGroups; ++g) {
      const uint32_t valid = groupValid(t, g, count);
      if (valid == 0) continue;
      float v[kGroupElems];
#pragma unroll
      for (uint32_t j = 0; j < kGroupElems; ++j) {
        const uint8_t code = static_cast<uint8_t>(byteOf(t.codes[g], j));
        v[j] = isSpecialCode(code) ? specialValue(code)
                                   : saturate(mulRn(codeTable[code], s[g]), maxFinite);
      }
      storeN<Dtype, Mode, kGroupElems>(dst, r, t.first + g * kGroupStride, valid, v, false);
    }
    return;
  }
#pragma unroll
  for (uint32_t g = 0; g < kPieceGroups; ++g) {
    const uint64_t e = t.first + g * kGroupStride;
    float v[kGroupElems];
    if (grid == kInt8) {  // uniform
#pragma unroll
      for (uint32_t j = 0; j < kGroupElems; ++j) v[j] = mulRn(codeTable[byteOf(t.codes[g], j)], s[g]);
    } else {
      // NOTE: the grids' finite codes are the OCP E4M3/E5M2 encodings (sign-magnitude, the same
      // subnormals), so the hardware's exact conversion to fp16 pairs gives codeValue.
#pragma unroll
      for (uint32_t j = 0; j < kGroupElems; j += 2) {
        const auto pair = static_cast<__nv_fp8x2_storage_t>(t.codes[g] >> (8 * j));
        const float2 m = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, fp8Kind(grid))));
        v[j] = mulRn(m.x, s[g]), v[j + 1] = mulRn(m.y, s[g]);
      }
    }
    if constexpr (Dtype == cclzFloat32) {
      const float maxFinite = dtypeMaxFinite(Dtype);
#pragma unroll
      for (uint32_t j = 0; j < kGroupElems; ++j) v[j] = saturate(v[j], maxFinite);
      storeN<Dtype, Mode, kGroupElems>(dst, r, e, kGroupElems, v, true);
    } else {
      uint32_t w[kGroupElems / 2];
#pragma unroll
      for (uint32_t k = 0; k < kGroupElems / 2; ++k) w[k] = packSaturated2<Dtype>(v[2 * k], v[2 * k + 1]);
      if constexpr (Mode != kStore) {
        float add[kGroupElems];  // what decode stores, back in fp32
#pragma unroll
        for (uint32_t k = 0; k < kGroupElems; ++k)
          add[k] = unpackHalfWord<Dtype>((w[k / 2] >> (16 * (k % 2))) & 0xFFFFu);
        accumulateN<Dtype, Mode, kGroupElems>(r, e, kGroupElems, add);
      } else {
        storeWords<kGroupElems / 2>(static_cast<uint16_t*>(dst) + e, w);
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
    const PieceLoad a = loadPiece(src, l, p.rowElems, invRowElems, count, tile, lane);
    PieceLoad b;
    b.first = count;  // none
    if (tile + warps < tiles)
      b = loadPiece(src, l, p.rowElems, invRowElems, count, tile + warps, lane);
    // NOTE: no L2 prefetch of the accumulator here: the build that had one (and the 64-register
    // bound, new in the same round) accumulated at 1361 GB/s at 256 MiB, against 1565 before.
    // Nor a read of it ahead of the codes: 24 warps per SM that held it lost 11% at 64 MiB
    // (bench/results/2026-11-25-s25-fp8-decode-groups, round a).
    decodePiece<Dtype, Mode>(a, count, p.grid, codeTable, dst, r, status);
    decodePiece<Dtype, Mode>(b, count, p.grid, codeTable, dst, r, status);
  }
}

