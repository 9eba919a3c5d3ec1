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
# The validation split holds at least this much text (or its fraction of the whole corpus, where
# that is less) and at least one sequence. A small standard library (~570 files, ~9 MiB) gives
# 130-300 KiB at 5%, enough; a small corpus whose files hash unluckily would give none.
MIN_VAL_BYTES = 64 * 1024


def _hash_fraction(relpath):
    digest = hashlib.sha256(relpath.encode()).digest()
    return int.from_bytes(digest[:4], "little") / 2 ** 32


def is_validation(relpath, fraction):
    """A file's split by a hash of its path (stable across machines and Python runs), before any
    top-up (split_files)."""
    return _hash_fraction(relpath) < fraction


def split_files(files, fraction, min_val_bytes):
    """The validation files of [(relpath, size)]: those whose path hashes below fraction, then, if
    they hold fewer than min_val_bytes, the next ones in hash order until they do (as if the
    fraction were larger: still stable, and a file never changes split for a smaller need)."""
    keyed = sorted((_hash_fraction(rel), rel, size) for rel, size in files)
    val = {rel for h, rel, _ in keyed if h < fraction}
    size = sum(s for h, _, s in keyed if h < fraction)
    for h, rel, s in keyed:
        if size >= min_val_bytes:
            break
        if rel not in val:
            val.add(rel)
            size += s
    return val


def _sources(root):
    """[(relpath, path)] of the corpus's .py files, in a fixed order."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                found.append((os.path.relpath(path, root).replace(os.sep, "/"), path))
    return found


@functools.lru_cache(maxsize=4)
def read_corpus(root, fraction, seq_len):
    """(train, val) bytes of the corpus at root for sequences of seq_len tokens; ConfigError
    where a split cannot hold a window (seq_len + 1 tokens; train one more, for a random
    offset). Cached: every rank reads it once, when the command line is checked."""
    check_corpus(root)
    sources = _sources(root)
    sizes = [(rel, os.path.getsize(path)) for rel, path in sources]
    total = sum(s for _, s in sizes)
    need = max(seq_len + 1, min(MIN_VAL_BYTES, int(total * fraction)))
    val_files = split_files(sizes, fraction, need)
    train, val = bytearray(), bytearray()
    for rel, path in sources:
        with open(path, "rb") as f:
            (val if rel in val_files else train).extend(f.read())
    for split, data, least in (("train", train, seq_len + 2), ("validation", val, seq_len + 1)):
        if len(data) < least:
            raise ConfigError(f"corpus {root!r}: its {split} split has {len(data)} bytes, fewer "
                              f"than one sequence of {seq_len} tokens needs ({least}); use a "
                              "larger corpus or a shorter --seq-len")
    return bytes(train), bytes(val)


class Corpus:
    """The tokens of one corpus: train and val, uint8 tensors of byte values."""

    def __init__(self, root, val_fraction=0.05, seq_len=1):
        train, val = read_corpus(os.path.abspath(root), val_fraction, seq_len)
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
        g = torch.Generator(device="cpu").manual_seed(seed * 1_000_003 + step)
        starts = torch.randint(0, len(self.train) - seq_len - 1, (batch,), generator=g,
                               device="cpu")
        return self._windows(self.train, starts, seq_len)

    def val_batches(self, count, batch, seq_len):
        """count fixed global batches spread evenly over the validation split."""
        n = count * batch
        starts = torch.linspace(0, len(self.val) - seq_len - 1, n, device="cpu").long()
        inputs, targets = self._windows(self.val, starts, seq_len)
        return [(inputs[i * batch:(i + 1) * batch], targets[i * batch:(i + 1) * batch])
                for i in range(count)]


def local_micro_batches(inputs, targets, dp_rank, dp, micro_batches):
    """This replica's share of a global batch, cut into micro-batches: [(inputs, targets)]."""
    per_replica = inputs.shape[0] // dp
    rows = slice(dp_rank * per_replica, (dp_rank + 1) * per_replica)
    return list(zip(inputs[rows].chunk(micro_batches), targets[rows].chunk(micro_batches)))
