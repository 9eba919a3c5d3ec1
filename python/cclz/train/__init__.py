"""cclz.train: a GPT trained with tensor + sequence, pipeline (1F1B) and data parallelism, each
dimension's communication compressed by the policy's codec, so that the same run with and
without cclz can be compared: loss, validation loss and tokens/s.

    mpirun -n 2 python -m cclz.train --preset tiny --tp 2 --policy all --out runs/all
    python -m cclz.train compare runs/none runs/all --out runs

Modules: config (presets, command line, checks), policy (codec names), data (the corpus),
model (the GPT stage), groups (the 3D layout and communicators), schedule (1F1B), grads
(tensor- and data-parallel gradient sync, clipping), trainer (the loop), log, compare.
"""
from .config import ConfigError, ModelConfig, PRESETS, TrainConfig, from_args
from .trainer import Trainer, run

__all__ = ["ConfigError", "ModelConfig", "PRESETS", "TrainConfig", "Trainer", "from_args", "run"]
