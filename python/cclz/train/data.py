"""Real text for training: the Python sources under a folder (by default the standard library's
own), split by file into train and validation, as byte-level tokens.

Batches are chosen by the step number and the seed alone, the same on every rank, so that runs
with different parallel layouts or policies see the same tokens in the same order: each
data-parallel replica takes its share of the step's global batch.
"""
import functools
import hashlib
import os

import torch

from .config import ConfigError, check_corpus

# Third-party packages installed into the standard library's folder are not the library.
_SKIPPED_DIRS = {"site-packages", "dist-packages", "__pycache__"}


def is_validation(relpath, fraction):
    """A file's split, by a hash of its path: stable across machines and Python runs."""
    digest = hashlib.sha256(relpath.encode()).digest()
    return int.from_bytes(digest[:4], "little") / 2 ** 32 < fraction


@functools.lru_cache(maxsize=4)
def _read(root, fraction):
    check_corpus(root)
    train, val = bytearray(), bytearray()
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                text = f.read()
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            (val if is_validation(rel, fraction) else train).extend(text)
    return bytes(train), bytes(val)


class Corpus:
    """The tokens of one corpus: train and val, uint8 tensors of byte values."""

    def __init__(self, root, val_fraction=0.05, min_tokens=0):
        train, val = _read(os.path.abspath(root), val_fraction)
        for split, data in (("train", train), ("validation", val)):
            if len(data) < min_tokens:
                raise ConfigError(f"corpus {root!r}: its {split} split has {len(data)} bytes, "
                                  f"fewer than one sequence ({min_tokens}); use a larger corpus "
                                  "or change --val-fraction")
        self.train = torch.frombuffer(bytearray(train), dtype=torch.uint8)
        self.val = torch.frombuffer(bytearray(val), dtype=torch.uint8)

    @staticmethod
    def _windows(tokens, starts, seq_len):
        idx = starts[:, None] + torch.arange(seq_len + 1, device=starts.device)
        w = tokens[idx].long()
        return w[:, :-1], w[:, 1:]

    def train_batch(self, step, batch, seq_len, seed):
        """(inputs, targets), each [batch, seq_len]: step's global batch, windows at random
        offsets drawn from (seed, step)."""
        g = torch.Generator().manual_seed(seed * 1_000_003 + step)
        starts = torch.randint(0, len(self.train) - seq_len - 1, (batch,), generator=g,
                               device="cpu")
        return self._windows(self.train, starts, seq_len)

    def val_batches(self, count, batch, seq_len):
        """count fixed global batches spread evenly over the validation split."""
        n = count * batch
        starts = torch.linspace(0, len(self.val) - seq_len - 1, n).long()
        inputs, targets = self._windows(self.val, starts, seq_len)
        return [(inputs[i * batch:(i + 1) * batch], targets[i * batch:(i + 1) * batch])
                for i in range(count)]


def local_micro_batches(inputs, targets, dp_rank, dp, micro_batches):
    """This replica's share of a global batch, cut into micro-batches: [(inputs, targets)]."""
    per_replica = inputs.shape[0] // dp
    rows = slice(dp_rank * per_replica, (dp_rank + 1) * per_replica)
    return list(zip(inputs[rows].chunk(micro_batches), targets[rows].chunk(micro_batches)))
