#!/usr/bin/env python3
"""How often a bf16 chunk's exponent offsets (top - symbol, the index into the encoder's cost
and code tables) stay below 16 (session 20).

A lead for the encoder's cost pass (bench/notes/lossless-kernels.md, "Session 20"): today each
symbol costs one 16-byte table load and four adds (the packed costs of the 8 codes). A table of
pairs of offsets below 16 (16 x 16 entries of 16 bytes: 4 KiB per block) would take two symbols
per load, with the offsets clamped to 15 and a fix-up for the rare symbols at 16 or more. This
script counts, per 4096-element chunk, the range top - bottom, and the share of symbols whose
offset is 16 or more, on seeded Gaussian bf16 and on each shared real tensor.

Run: python3 bench/sim/lossless_v2_offset_range.py [path to gpt-small-tensors] (numpy).
Output of session 20:
  gaussian: chunks with every offset below 16 77.7%, symbols at 16 or more 0.0060%
  real tensors: chunks 0.2-77% (median 39%), symbols at 16 or more 0.007-0.39%, except
  layer1.grad_w_fc1 at 14.4%
So a per-chunk switch would rarely serve the real tensors; clamping with a per-symbol fix-up
would take the fix-up in ~0.4% of a warp's pair steps on Gaussian data (32 lanes x 2 symbols).
"""
import json
import pathlib
import sys

import numpy as np

CHUNK = 4096


def exponents(bits16):
    return ((bits16 >> 7) & 0xFF).astype(np.int32)


def offsets_by_chunk(e):
    e = e[: len(e) // CHUNK * CHUNK].reshape(-1, CHUNK)
    return e.max(axis=1, keepdims=True) - e


def report(name, bits16):
    d = offsets_by_chunk(exponents(bits16))
    every_below = (d.max(axis=1) < 16).mean()
    print(f"{name:<28} chunks {d.shape[0]:5d}  every offset below 16 {100 * every_below:5.1f}%"
          f"  symbols at 16 or more {100 * (d >= 16).mean():.4f}%")


def main(data_dir):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(CHUNK * 2000).astype(np.float32)
    report("gaussian", (x.view(np.uint32) >> 16).astype(np.uint16))
    index = json.loads((data_dir / "index.json").read_text())
    for t in index["tensors"]:
        with open(data_dir / t["file"], "rb") as f:
            f.seek(t["offset"])
            report(t["name"], np.frombuffer(f.read(t["nbytes"]), dtype=np.uint16))


if __name__ == "__main__":
    default = pathlib.Path(__file__).resolve().parents[3] / "shared/data/gpt-small-tensors"
    main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else default)
