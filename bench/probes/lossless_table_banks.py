#!/usr/bin/env python3
"""Shared-memory wavefronts of the version 2 decoder's table lookups.

The general window decoder at 256 MiB is bound by the L1/TEX pipe (90% busy,
bench/results/lossless-decode-window-h200/general/profile-256M). Its table lookups read a 2-byte entry
per lane at a 10-bit index into a 2 KiB table: lanes that hit different words of one bank are
served in turn. This script counts the wavefronts per lookup (the most distinct words any bank
must serve) on Gaussian bf16 chunks coded as the encoder codes them (each chunk's cheapest of the
8 static codes, lane l coding groups l, l + 32, ...), for the 10-bit table and for first-level
tables of 8, 7 and 6 bits (a 6-bit first level measured 4-21% slower on the H200: the second
look is a dependent load on the symbol chain). A 6-bit table (64 entries, 32 words) has one word per bank, so it never
conflicts; it holds only codes of at most 6 bits, and it also prints how often a warp's step has
some lane whose code is longer (that lane needs a second lookup in the full table).

Run: python3 bench/probes/lossless_table_banks.py (numpy). Output (200 chunks):
  t1024: mean wavefronts per lookup 3.40
  t256: mean wavefronts per lookup 2.80
  t128: mean wavefronts per lookup 1.99
  t64: mean wavefronts per lookup 1.00
  first level of 6 bits: a warp step with some lane past it: 38.0%
  first level of 7 bits: a warp step with some lane past it: 30.3%
  first level of 8 bits: a warp step with some lane past it: 18.2%
"""
import pathlib
import re

import numpy as np

TABLES = pathlib.Path(__file__).resolve().parents[2] / "src/codec/lossless/tables.h"


def exp8_lengths():
    src = TABLES.read_text()
    block = src[src.index("CCLZ_LOSSLESS_EXP8_LENGTHS"):src.index("CCLZ_LOSSLESS_FP16_LENGTHS")]
    rows = [list(map(int, r.split(","))) for r in re.findall(r"\{([0-9, ]+)\}", block)]
    assert len(rows) == 8 and all(len(r) == 33 for r in rows)
    return rows


def canonical(lengths):
    """Bit-reversed canonical codes (format_v2.h, fillCode): streams are least significant bit first."""
    count = [0] * 11
    for n in lengths:
        count[n] += 1
    nxt, code = [0] * 11, 0
    for n in range(1, 11):
        code = (code + (count[n - 1] if n > 1 else 0)) << 1
        nxt[n] = code
    out = []
    for n in lengths:
        c = nxt[n]
        nxt[n] += 1
        out.append(int(format(c, f"0{n}b")[::-1], 2))
    return out


def main(chunks=200, seed=1):
    rows = exp8_lengths()
    codes = [canonical(r) for r in rows]
    rng = np.random.default_rng(seed)
    waves = {10: [], 8: [], 7: [], 6: []}
    past = {6: [], 7: [], 8: []}
    for _ in range(chunks):
        x = rng.standard_normal(4096).astype(np.float32)
        sym = ((x.view(np.uint32) >> 23) & 0xFF).astype(np.int64)  # bf16's exponent field
        d = np.minimum(sym.max() - sym, 32)  # 32: the escape (rare on Gaussian data)
        t = int(np.argmin([sum(rows[k][v] for v in d) for k in range(8)]))
        lengths, code = rows[t], codes[t]
        lanes = [np.concatenate([d[8 * (l + 32 * j):8 * (l + 32 * j) + 8] for j in range(16)])
                 for l in range(32)]
        streams = []
        for syms in lanes:
            bits = []
            for v in syms:
                bits += [(code[v] >> i) & 1 for i in range(lengths[v])] + ([0] * 8 if v == 32 else [])
            streams.append(bits + [0] * 16)
        pos = [0] * 32
        for s in range(128):
            index, lens = [], []
            for l in range(32):
                window = streams[l][pos[l]:pos[l] + 10]
                index.append(sum(b << i for i, b in enumerate(window)))
                v = lanes[l][s]
                lens.append(lengths[v])
                pos[l] += lengths[v] + (8 if v == 32 else 0)
            for bits in waves:
                banks = {}
                for i in index:
                    word = (i & ((1 << bits) - 1)) // 2  # 2-byte entries
                    banks.setdefault(word % 32, set()).add(word)
                waves[bits].append(max(len(w) for w in banks.values()))
            for bits in past:
                past[bits].append(any(n > bits for n in lens))
    for bits, v in waves.items():
        print(f"t{1 << bits}: mean wavefronts per lookup {np.mean(v):.2f}")
    for bits, v in past.items():
        print(f"first level of {bits} bits: a warp step with some lane past it: {100 * np.mean(v):.1f}%")


if __name__ == "__main__":
    main()
