#!/usr/bin/env python3
"""Design study for the lossless codec (docs/formats.md, "Why this design").

Estimates, on seeded Gaussian data and the shared GPT tensors, the compression ratio of candidate
exponent codes: per-chunk Huffman with the frame's overheads (chunk header, stream sizes, byte
padding, 16-byte block alignment, chunk table), and a fixed window of the 7 most frequent
exponents with 3-bit codes plus escapes. The Huffman lengths here are plain (unbounded) Huffman
lengths clipped with a simple Kraft repair, close to but not byte-identical with the codec; the
codec's own ratios come from cclz-perf.

    python3 bench/probes/lossless_design.py [path/to/gpt-small-tensors]
"""
import heapq
import json
import os
import sys

import numpy as np


def huffman_lengths(counts, max_len):
    syms = [s for s in range(256) if counts[s] > 0]
    if len(syms) == 1:
        return {syms[0]: 1}
    heap = [(counts[s], s, (s,)) for s in syms]
    heapq.heapify(heap)
    lengths = {s: 0 for s in syms}
    while len(heap) > 1:
        a, b = heapq.heappop(heap), heapq.heappop(heap)
        for s in a[2] + b[2]:
            lengths[s] += 1
        heapq.heappush(heap, (a[0] + b[0], min(a[1], b[1]), a[2] + b[2]))
    if max(lengths.values()) > max_len:
        for s in lengths:
            lengths[s] = min(lengths[s], max_len)
        order = sorted(lengths, key=lambda s: (counts[s], s))
        while sum(2.0 ** -l for l in lengths.values()) > 1 + 1e-12:
            for s in order:
                if lengths[s] < max_len:
                    lengths[s] += 1
                    break
    return lengths


def huffman_ratio(sym, elem_bytes, chunk, streams, max_len):
    total = len(sym) * (elem_bytes - 1) + 8 * ((len(sym) + chunk - 1) // chunk) + 64
    for c0 in range(0, len(sym), chunk):
        s = sym[c0:c0 + chunk]
        lengths = np.zeros(256, np.int64)
        for k, v in huffman_lengths(np.bincount(s, minlength=256), max_len).items():
            lengths[k] = v
        present = np.nonzero(lengths)[0]
        span = present[-1] - present[0]
        header = 4 + (span + 2) // 2 + 2 * streams
        stream = (np.arange(len(s)) // 8) % streams
        bits = np.bincount(stream, weights=lengths[s], minlength=streams)
        block = min(header + np.ceil(bits / 8).sum(), 4 + len(s))
        total += int(np.ceil(block / 16) * 16)
    return len(sym) * elem_bytes / total


def window_ratio(sym, elem_bytes, chunk):
    """Top-7 exponents of each chunk get 3-bit codes; code 7 escapes to the raw 8 bits."""
    total = 0
    for c0 in range(0, len(sym), chunk):
        s = sym[c0:c0 + chunk]
        top = np.argsort(np.bincount(s, minlength=256))[::-1][:7]
        hits = np.isin(s, top).sum()
        total += len(s) * (elem_bytes - 1) + (3 * len(s) + 8 * (len(s) - hits)) / 8 + 8
    return len(sym) * elem_bytes / total


def entropy(sym):
    p = np.bincount(sym, minlength=256) / len(sym)
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def main():
    rng = np.random.default_rng(0)
    g = rng.standard_normal(1 << 22).astype(np.float32)
    bf16_sym = ((g.view(np.uint32) >> 23) & 0xFF).astype(np.int64)  # bf16 shares fp32's exponent
    print(f"Gaussian bf16: bound {16 / (8 + entropy(bf16_sym)):.4f}")
    for chunk, streams, max_len in [(16384, 64, 11), (16384, 64, 12), (32768, 64, 12),
                                    (32768, 128, 12), (65536, 256, 12)]:
        r = huffman_ratio(bf16_sym, 2, chunk, streams, max_len)
        print(f"  huffman chunk {chunk:6d} streams {streams:4d} L {max_len}: {r:.4f}")
    print(f"  top-7 window, 3-bit codes: {window_ratio(bf16_sym, 2, 16384):.4f}")
    print(f"Gaussian fp32: bound {32 / (24 + entropy(bf16_sym)):.4f}, "
          f"huffman {huffman_ratio(bf16_sym, 4, 16384, 64, 11):.4f}")

    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "../../../shared/data/gpt-small-tensors")
    index = os.path.join(folder, "index.json")
    if not os.path.exists(index):
        return
    for t in json.load(open(index))["tensors"]:
        raw = np.fromfile(os.path.join(folder, t["file"]), dtype=np.uint16,
                          count=t["nbytes"] // 2, offset=t["offset"])
        sym = ((raw >> 7) & 0xFF).astype(np.int64)
        bound = 16 / (8 + entropy(sym))
        r = huffman_ratio(sym, 2, 16384, 64, 11)
        print(f"{t['name']:28s} bound {bound:.4f} huffman {r:.4f} ({100 * r / bound:.1f}%) "
              f"window {window_ratio(sym, 2, 16384):.4f}")


if __name__ == "__main__":
    main()
