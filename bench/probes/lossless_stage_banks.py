#!/usr/bin/env python3
"""Shared-memory wavefronts of the version 2 window decoder's stream-word loads.

Each step of the window loop (decode_v2_window.cuh) decodes a pair of symbols per lane and loads
the stage word that comes in, a pair ahead. Lanes read their own streams, which lie one after
another in the staged block. So at a step the lanes' words are about a lane's size apart, ~12
words on Gaussian bf16, and 12 i mod 32 takes 8 values: four lanes share a bank. The 256 MiB
profile of the decoder before the swizzle counted
4.46 wavefronts per such load (9.5M of the decoder's 25.7M), and 3.44 per table lookup (14.4M).

This script counts the wavefronts per load (the most distinct words one bank must serve) on
chunks coded as the encoder codes them (lane sizes from each chunk's cheapest code), for the
staged block as it is (identity) and for layouts that would place word w elsewhere:
  pad4per32: 16 bytes of padding after every 128 (w + 4 (w >> 5)), which keeps the 16-byte copies;
  pad1per32: a word after every 32 (not 16-byte copies);
  xor16B: the 16-byte unit swizzled with bits 5..7 of w; xor16B_hi: with bits 6..8;
  pad4per64: 16 bytes after every 256.
Gaussian bf16 and two real tensors (.data, or ../shared/data/gpt-small-tensors).

Run: python3 bench/probes/lossless_stage_banks.py [tensor dir] (numpy). Output:
(identity / pad4per32 / pad1per32 / xor16B / xor16B_hi / pad4per64):
  gaussian:     4.48 / 2.82 / 4.28 / 2.93 / 3.51 / 3.07
  layer1_act:   3.13 / 3.24 / 3.05 / 3.30 / 3.31 / 3.14
  layer6_wgrad: 3.66 / 3.08 / 2.71 / 3.19 / 3.43 / 3.16
So padding would take ~40% of these wavefronts off Gaussian data, where lane sizes are alike, and
little off real tensors, whose lane sizes vary more (random words: ~3.5).
Built as xor16B (window::swizzledStageOffset, no extra bytes): bf16 256 MiB decode
+9%, the real tensors +4.5% (bench/results/lossless-decode-swizzle-h200).
"""
import pathlib
import sys

import numpy as np

from lossless_table_banks import exp8_lengths

LAYOUTS = {
    "identity": lambda w: w,
    "pad4per32": lambda w: w + 4 * (w >> 5),
    "pad1per32": lambda w: w + (w >> 5),
    "xor16B": lambda w: (((w >> 2) ^ ((w >> 5) & 7)) << 2) | (w & 3),
    "xor16B_hi": lambda w: (((w >> 2) ^ ((w >> 6) & 7)) << 2) | (w & 3),
    "pad4per64": lambda w: w + 4 * (w >> 6),
}


def symbols(x):
    return ((x.view(np.uint32) >> 23) & 0xFF).astype(np.int64)  # bf16's exponent field


def wavefronts(chunks, rows):
    res = {k: [] for k in LAYOUTS}
    for sym in chunks:
        if sym.max() - sym.min() >= 32:
            continue  # escapes: another path's word counts
        d = sym.max() - sym
        t = int(np.argmin([sum(rows[k][v] for v in d) for k in range(8)]))
        lengths = np.array(rows[t])
        lanes = [np.concatenate([d[8 * (l + 32 * j):8 * (l + 32 * j) + 8] for j in range(16)])
                 for l in range(32)]
        bits = [lengths[s] for s in lanes]
        sizes = [int(b.sum()) for b in bits]
        width = int(max(sizes) - min(sizes)).bit_length()
        starts = np.cumsum([0] + sizes[:-1]) + 8 * (8 + 4 * width)  # after the header and deltas
        done = [np.cumsum(b) for b in bits]
        for k in range(64):  # a pair per step; the word a pair ahead
            words = [(int(starts[l] + done[l][2 * k + 1]) - 1) // 32 + 3 for l in range(32)]
            for name, place in LAYOUTS.items():
                banks = {}
                for w in words:
                    p = place(w)
                    banks.setdefault(p % 32, set()).add(p)
                res[name].append(max(len(v) for v in banks.values()))
    return ", ".join(f"{k} {np.mean(v):.2f}" for k, v in res.items())


def main():
    rows = exp8_lengths()
    rng = np.random.default_rng(1)
    print("gaussian:", wavefronts([symbols(rng.standard_normal(4096).astype(np.float32))
                                   for _ in range(100)], rows))
    root = pathlib.Path(__file__).resolve().parents[2]
    data = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / ".data"
    for name in ["layer1_act", "layer6_wgrad"]:
        path = data / f"{name}.bin"
        if not path.exists():
            continue
        x = (np.fromfile(path, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        n = len(x) // 4096
        picks = np.linspace(0, n - 1, 80).astype(int)
        print(f"{name}:", wavefronts([symbols(x[i * 4096:(i + 1) * 4096]) for i in picks], rows))


if __name__ == "__main__":
    main()
