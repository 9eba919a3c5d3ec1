// Exact pruning of the fp8 scale search (bench/notes/fp8-kernels.md, "Round 2"): for each block,
// the first smallest error over the candidates found (a) exhaustively (chooseFineCode) and (b) by
// the pruned rule: a lower bound L(k) <= err(k) for every candidate (bound 0: the t0 term; bound
// 1: the t0 + t1 partial sum), a reference kb = the first smallest full error among each lane's
// smallest-bound candidate, then the full error only of candidates with L(k) < err(kb), or
// L(k) == err(kb) and k < kb. Reports mismatches (must be 0) and the SIMT cost in the encoder's
// layout: lanesPerBlock lanes per block (candidates k0 + lane + lanesPerBlock * i), 32 lanes per
// warp, so a warp's survivor loop runs max over its lanes of the lane's survivors.
// Build: g++ -O2 -std=c++20 -Isrc -Iinclude bench/notes/fp8-prune-sim.cpp -o /tmp/prune-sim
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "codec/fp8/format.h"
using namespace cclz;
using namespace cclz::fp8;

struct Cost {
  long blocks = 0, mismatches = 0, survivors = 0, warps = 0, warpLoop = 0;
};

static float boundOf(int bound, uint32_t grid, float c, uint32_t k, const float* t) {
  const BlockScale sc = blockScale(c, k);
  const float e0 = squaredError(grid, t[0], sc);
  return bound == 0 ? e0 : addRn(e0, squaredError(grid, t[1], sc));
}

static void run(uint32_t grid, const std::vector<float>& x, uint32_t rowElems, int lanesPerBlock,
                int bound, Cost& cost) {
  const int blocksPerWarp = 32 / lanesPerBlock;
  int inWarp = 0, warpMax = 0;
  for (size_t r0 = 0; r0 + rowElems <= x.size(); r0 += rowElems) {
    float m = 0;
    for (uint32_t i = 0; i < rowElems; ++i) m = maxf(m, absf(x[r0 + i]));
    const float c = coarseScale(grid, m);
    for (uint32_t b = 0; b < rowElems; b += 64) {
      float t[3] = {0, 0, 0};
      for (int i = 0; i < 64; ++i) offerTop3(t, absf(x[r0 + b + i]));
      ++cost.blocks;
      const uint32_t want = chooseFineCode(grid, c, t, kMaxCandidates);
      uint32_t got = want;
      std::vector<int> own(lanesPerBlock, 0);
      if (c != 0.0f && t[0] != 0.0f) {
        const uint32_t k0 = startCode(grid, c, t[0]), last = lastCandidate(k0, kMaxCandidates);
        float lb[32];
        for (uint32_t k = k0; k <= last; ++k) lb[k - k0] = boundOf(bound, grid, c, k, t);
        float bestErr = 0;
        uint32_t best = 0xFFFFFFFFu;
        std::vector<uint32_t> refs;
        for (int lane = 0; lane < lanesPerBlock; ++lane) {
          uint32_t kr = 0xFFFFFFFFu;
          for (uint32_t k = k0 + lane; k <= last; k += lanesPerBlock)
            if (kr == 0xFFFFFFFFu || lb[k - k0] < lb[kr - k0]) kr = k;
          if (kr == 0xFFFFFFFFu) continue;
          refs.push_back(kr);
          const float e = candidateError(grid, c, kr, t);
          if (best == 0xFFFFFFFFu || e < bestErr || (e == bestErr && kr < best)) bestErr = e, best = kr;
        }
        const float eb = bestErr;
        const uint32_t kb = best;
        for (uint32_t k = k0; k <= last; ++k) {
          bool isRef = false;
          for (uint32_t kr : refs) isRef = isRef || kr == k;
          if (isRef || !(lb[k - k0] < eb || (lb[k - k0] == eb && k < kb))) continue;
          ++cost.survivors, ++own[(k - k0) % lanesPerBlock];
          const float e = candidateError(grid, c, k, t);
          if (e < bestErr || (e == bestErr && k < best)) bestErr = e, best = k;
        }
        got = best;
      }
      if (got != want) ++cost.mismatches;
      for (int o : own) warpMax = std::max(warpMax, o);
      if (++inWarp == blocksPerWarp) cost.warpLoop += warpMax, ++cost.warps, inWarp = warpMax = 0;
    }
  }
}

int main() {
  std::vector<std::pair<std::string, std::vector<float>>> inputs;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0, 1);
  std::student_t_distribution<float> heavy(3);
  std::vector<float> g(1 << 22), h(1 << 22);
  for (auto& v : g) v = bf16ToFloat(floatToBf16(normal(rng)));
  for (auto& v : h) v = bf16ToFloat(floatToBf16(heavy(rng)));
  inputs.push_back({"gauss", g});
  inputs.push_back({"student3", h});
  for (const char* f : {"layer1_act.bin", "layer6_act.bin", "layer1_wgrad.bin"}) {
    std::ifstream in(std::string("/work/shared/data/gpt-small-tensors/") + f, std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(in)), {});
    std::vector<float> x(raw.size() / 2);
    for (size_t i = 0; i < x.size(); ++i) {
      uint16_t b;
      std::memcpy(&b, &raw[2 * i], 2);
      x[i] = bf16ToFloat(b);
    }
    if (!x.empty()) inputs.push_back({f, x});
  }
  std::printf("input grid lanes/block bound: mismatches, survivors/block, warp loop trips, "
              "full evaluations/lane (exhaustive: 32/lanes)\n");
  for (auto& [name, x] : inputs)
    for (uint32_t grid : {kE4M3, kE5M2})
      for (int lanes : {8, 2})
        for (int bound : {0, 1}) {
          if (grid == kE5M2 && name != "gauss") continue;
          Cost cost;
          run(grid, x, name == "gauss" || name == "student3" ? 1024 : 768, lanes, bound, cost);
          std::printf("%-16s %s %d e0%s: %ld, %.2f, %.2f\n", name.c_str(),
                      grid == kE4M3 ? "e4m3" : "e5m2", lanes, bound ? "+e1" : "  ",
                      cost.mismatches, double(cost.survivors) / cost.blocks,
                      double(cost.warpLoop) / cost.warps);
        }
}
