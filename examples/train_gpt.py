#!/usr/bin/env python3
"""Trains a GPT with cclz-compressed tensor, pipeline and data parallelism: the same command as
`python -m cclz.train`, for a checkout where the package is not installed.

    mpirun -n 2 python3 examples/train_gpt.py --tp 2 --policy all --out runs/all     # CPU ranks
    torchrun --nproc-per-node 4 examples/train_gpt.py --preset 1.3b --tp 2 --dp 2 --policy all
    torchrun --nproc-per-node 4 examples/train_gpt.py --preset 1.3b --tp 4 --policy none,tp-fp8 --out runs
    python3 examples/train_gpt.py compare runs/none runs/tp-fp8
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from cclz.train.__main__ import main  # noqa: E402 (after the path is set)

if __name__ == "__main__":
    sys.exit(main())
