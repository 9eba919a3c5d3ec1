#!/usr/bin/env python3
"""Design of the lossless payload (docs/formats.md, "lossless payload").

The payload codes each symbol (bf16/fp32: the exponent; fp16: bits 14..7) as its offset d below the
chunk's largest symbol, with one of 8 static canonical codes per dtype family, chosen per chunk.
Offsets of D or more take an escape code followed by the 8-bit symbol.

This script
  1. designs the static codes from *synthetic* data only (Gaussian, Laplace, Student-t, log-normal
     scale mixtures, Gaussian with sparse outliers, at random power-of-two scales): offset
     histograms of 4096-element chunks are clustered into 8 groups (Lloyd iterations, cost =
     exact coded bits), each group's code is the optimal length-limited (package-merge) code of
     its summed histogram, with every offset given a code and the escape at most 8 bits long;
  2. estimates the ratio of the whole frame (chunk table, block header, size deltas, 16-byte
     block padding, stored fallback) on seeded Gaussian data and on the real tensors in
     ../shared/data/gpt-small-tensors, against the entropy bound and per-chunk Huffman;
  3. with --write, writes src/codec/lossless/tables.h (the code lengths: the definition).

    python3 bench/probes/lossless_tables.py [--write] [path/to/gpt-small-tensors]
"""
import json
import os
import sys

import numpy as np

K = 8          # codes per family
L = 10         # longest code (decode table of 2^L entries)
ESC_MAX = 8    # longest escape code: two escapes (2 x (8 + 8) bits) fit the decoder's 32-bit refill
CHUNK = 4096
LANES = 32
FAMILIES = {"exp8": 32, "fp16": 64}  # D: offsets 0..D-1 have codes, index D is the escape


def package_merge(weights, max_len):
    """Optimal prefix code lengths with no length above max_len (every symbol gets a code)."""
    n = len(weights)
    order = sorted(range(n), key=lambda i: (weights[i], i))
    leaves = [(weights[i], (i,)) for i in order]
    current = list(leaves)
    for _ in range(max_len - 1):
        packages = [(current[j][0] + current[j + 1][0], current[j][1] + current[j + 1][1])
                    for j in range(0, len(current) - 1, 2)]
        current = sorted(leaves + packages, key=lambda x: x[0])
    lengths = [0] * n
    for w, items in current[:2 * n - 2]:
        for i in items:
            lengths[i] += 1
    return lengths


def design_code(hist, d):
    """Length-limited code for offsets 0..d-1 and the escape (index d), escape <= ESC_MAX."""
    total = float(hist.sum())
    w = hist.astype(np.float64) + total * 2e-6 + 1e-9  # every offset keeps a (long) code
    boost = 0.0
    while True:  # the escape stays short: raise its weight until its code is short enough
        w[d] = max(w[d], total * 2.0 ** -(ESC_MAX + 1 - boost))
        lengths = package_merge(list(w), L)
        if lengths[d] <= ESC_MAX:
            break
        boost += 0.25
    assert sum(2.0 ** -x for x in lengths) == 1.0  # complete: every L-bit pattern decodes
    return np.array(lengths, np.int64)


def offsets(sym, d):
    """Per chunk: histogram of min(top - sym, d) (top = the chunk's largest symbol)."""
    out = []
    for c0 in range(0, len(sym), CHUNK):
        s = sym[c0:c0 + CHUNK]
        off = np.minimum(s.max() - s, d)
        out.append(np.bincount(off, minlength=d + 1))
    return np.stack(out)


def costs(hists, codes, d):
    extra = np.zeros(d + 1)
    extra[d] = 8
    return hists @ (codes + extra).T


def synthetic(dtype, chunks, seed):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(chunks):
        kind, n = i % 6, CHUNK
        if kind == 0:
            x = rng.standard_normal(n)
        elif kind == 1:
            x = rng.laplace(size=n)
        elif kind == 2:
            x = rng.standard_t(rng.uniform(1.5, 8), size=n)
        elif kind == 3:
            x = rng.standard_normal(n) * np.exp(rng.uniform(0.3, 1.5) * rng.standard_normal(n))
        elif kind == 4:
            x = rng.standard_normal(n) * np.exp(rng.uniform(1.5, 3) * rng.standard_normal(n))
        else:
            x = rng.standard_normal(n)
            m = rng.random(n) < 10 ** rng.uniform(-3.5, -1.5)
            x[m] *= 2 ** rng.uniform(2, 5)
        out.append(symbols(x * 2.0 ** rng.uniform(-4, 4), dtype))
    return np.concatenate(out)


def symbols(x, dtype):
    if dtype == "fp16":
        x = np.clip(x, -65504, 65504)  # no infinities from the heavy tails
        return ((x.astype(np.float16).view(np.uint16) >> 7) & 0xFF).astype(np.int64)
    return ((x.astype(np.float32).view(np.uint32) >> 23) & 0xFF).astype(np.int64)


def design_family(dtype, d):
    hists = offsets(synthetic(dtype, 6000, 1), d)
    mean = (hists * np.arange(d + 1)).sum(1) / hists.sum(1)
    groups = np.array_split(np.argsort(mean), K)
    codes = np.stack([design_code(hists[g].sum(0), d) for g in groups])
    for _ in range(25):
        pick = costs(hists, codes, d).argmin(1)
        codes = np.stack([design_code(hists[pick == k].sum(0), d) if (pick == k).any()
                          else codes[k] for k in range(K)])
    # Order the codes by the offset they code shortest (table 0: the bulk nearest the top).
    return codes[np.argsort([(c[:d].argmin(), tuple(c)) for c in codes], kind="stable")] if False \
        else codes[sorted(range(K), key=lambda k: (int(codes[k][:d].argmin()), tuple(codes[k])))]


def entropy(sym):
    p = np.bincount(sym, minlength=256) / len(sym)
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def frame_ratio(sym, codes, d, elem_bytes):
    """Raw bytes / frame bytes under the payload's layout."""
    n = len(sym)
    chunks = (n + CHUNK - 1) // CHUNK
    total = 64 + 8 * chunks + (elem_bytes - 1) * n + 48  # header, table, planes, alignment
    extra = np.zeros(d + 1)
    extra[d] = 8
    for c0 in range(0, n, CHUNK):
        s = sym[c0:c0 + CHUNK]
        off = np.minimum(s.max() - s, d)
        per_table = np.bincount(off, minlength=d + 1) @ (codes + extra).T
        t = int(per_table.argmin())
        bits = (codes[t] + extra)[off]
        lane = (np.arange(len(s)) // 8) % LANES
        lane_bits = np.bincount(lane, weights=bits, minlength=LANES)
        spread = int(lane_bits.max() - lane_bits.min())
        width = spread.bit_length()
        block = 8 + 4 * width + int(np.ceil(lane_bits.sum() / 8))
        block = min(block, 4 + len(s))
        total += int(np.ceil(block / 16) * 16)
    return n * elem_bytes / total


def write_header(families, path):
    lines = [
        "// Generated by bench/probes/lossless_tables.py: do not edit. The static codes of the",
        "// lossless payload (docs/formats.md): for each dtype family, 8 codes, each the",
        "// length in bits of the code of offset d = 0..D-1 below the chunk's largest symbol, then",
        "// the length of the escape code (index D). Every code is complete (Kraft sum 1).",
        "// Macros, so that host constants and device arrays are initialized from the one list.",
        "#pragma once",
        "",
    ]
    for name, (d, codes) in families.items():
        macro = {"exp8": "CCLZ_LOSSLESS_EXP8_LENGTHS", "fp16": "CCLZ_LOSSLESS_FP16_LENGTHS"}[name]
        lines.append(f"// {name}: D = {d}, {K} codes of {d + 1} lengths")
        lines.append(f"#define {macro} \\")
        lines.append("  { \\")
        for c in codes:
            lines.append("    {" + ", ".join(str(int(x)) for x in c) + "}, \\")
        lines.append("  }")
        lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main():
    args = [a for a in sys.argv[1:] if a != "--write"]
    write = "--write" in sys.argv
    here = os.path.dirname(os.path.abspath(__file__))
    folder = args[0] if args else os.path.join(here, "../../../shared/data/gpt-small-tensors")
    families = {name: (d, design_family("fp16" if name == "fp16" else "bf16", d))
                for name, d in FAMILIES.items()}
    for name, (d, codes) in families.items():
        print(f"{name} (D = {d}):")
        for c in codes:
            print("  " + " ".join(str(int(x)) for x in c))
    if write:
        write_header(families, os.path.join(here, "../../src/codec/lossless/tables.h"))

    d8, exp8 = families["exp8"]
    d16, fp16 = families["fp16"]
    g = np.random.default_rng(0).standard_normal(1 << 22)
    sym = symbols(g, "bf16")
    h = entropy(sym)
    print(f"Gaussian bf16: bound {16 / (8 + h):.4f}, payload {frame_ratio(sym, exp8, d8, 2):.4f}")
    print(f"Gaussian fp32: bound {32 / (24 + h):.4f}, payload {frame_ratio(sym, exp8, d8, 4):.4f}")
    s16 = symbols(g, "fp16")
    h16 = entropy(s16)
    print(f"Gaussian fp16: bound {16 / (8 + h16):.4f}, payload "
          f"{frame_ratio(s16, fp16, d16, 2):.4f}")
    index = os.path.join(folder, "index.json")
    if not os.path.exists(index):
        return
    for t in json.load(open(index))["tensors"]:
        raw = np.fromfile(os.path.join(folder, t["file"]), dtype=np.uint16,
                          count=t["nbytes"] // 2, offset=t["offset"])
        s = ((raw >> 7) & 0xFF).astype(np.int64)
        bound = 16 / (8 + entropy(s))
        r = frame_ratio(s, exp8, d8, 2)
        print(f"{t['name']:28s} bound {bound:.4f} payload {r:.4f} ({100 * r / bound:.1f}%)")


if __name__ == "__main__":
    main()
