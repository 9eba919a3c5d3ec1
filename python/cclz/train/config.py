"""The trainer's configuration: model presets, the command line, and the checks that run before
any work (on every rank alike, from the arguments and the world size only, so that a bad launch
fails everywhere at once instead of leaving some ranks waiting for others)."""
import argparse
import dataclasses
import os
import sysconfig
from typing import Optional

from . import policy as policies


class ConfigError(ValueError):
    """A command line that cannot run: the message says what to change."""


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    layers: int
    heads: int
    hidden: int
    seq_len: int
    vocab: int = 256  # byte-level tokens; a multiple of 64 already, so no padding is needed
    ffn: int = 0      # 0: 4 x hidden

    @property
    def ffn_size(self):
        return self.ffn or 4 * self.hidden

    def parameters(self):
        """The parameter count (untied embeddings: input table, positions, and output head)."""
        d, f = self.hidden, self.ffn_size
        block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d)
        return self.layers * block + 2 * self.vocab * d + self.seq_len * d + 2 * d


# Sizes follow GPT-2 / GPT-3 shapes; head counts are chosen to split over 2, 4 (and 8) ranks.
# Each preset carries the batch and learning rate it trains well with, and a micro-batch size in
# sequences meant to fit an 80 GB GPU at tp 1: (4 + 34 / tp) x seq x micro-batch x hidden bytes of
# activations a layer, beside 16 bytes a parameter of weights, gradients and AdamW (docs/train.md,
# "The 1.3B model on 4 GPUs"; 1.3b at tp 1: ~37 GB).
PRESETS = {
    "tiny": dict(model=ModelConfig(layers=4, heads=4, hidden=128, seq_len=128),
                 batch=16, lr=3e-3, micro_batch=16),
    "small": dict(model=ModelConfig(layers=12, heads=12, hidden=768, seq_len=1024),
                  batch=32, lr=6e-4, micro_batch=16),
    "350m": dict(model=ModelConfig(layers=24, heads=16, hidden=1024, seq_len=1024),
                 batch=32, lr=3e-4, micro_batch=8),
    "1.3b": dict(model=ModelConfig(layers=24, heads=16, hidden=2048, seq_len=2048),
                 batch=32, lr=2e-4, micro_batch=4),
    "3b": dict(model=ModelConfig(layers=32, heads=32, hidden=2560, seq_len=2048),
               batch=32, lr=1.6e-4, micro_batch=2),
}


def stdlib_corpus():
    """The default corpus: the running Python's standard library sources."""
    return sysconfig.get_paths()["stdlib"]


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    model: ModelConfig
    preset: str = "custom"  # the name the model's shape came from (shapes may be overridden)
    tp: int = 1
    pp: int = 1
    dp: int = 1
    batch: int = 16            # global batch, in sequences
    micro_batches: int = 1     # per step and data-parallel replica (the pipeline's depth of work)
    steps: int = 300
    lr: float = 3e-3
    min_lr_ratio: float = 0.1  # cosine decay ends at lr x this
    warmup: int = 20
    weight_decay: float = 0.1
    clip: float = 1.0
    seed: int = 0
    codecs: tuple = (("tp", "none"), ("dp", "none"), ("pp", "none"), ("tp_reduce", "none"))
    policy_name: str = "none"
    log_every: int = 10
    eval_every: int = 50
    eval_batches: int = 4
    out: Optional[str] = None
    corpus: str = dataclasses.field(default_factory=stdlib_corpus)
    val_fraction: float = 0.05
    device: str = "auto"
    adaptive: str = "auto"     # cclz's choice between codec and plain data: on | off | auto
    bucket_mb: float = 25.0
    recompute: bool = False
    overlap: bool = False      # the TP linears as overlapped GEMM calls (docs/overlap.md)
    precision: str = "auto"    # auto: bf16 autocast on GPUs, fp32 on CPU
    quiet: bool = False

    @property
    def codec_names(self):
        return dict(self.codecs)

    @property
    def micro_batch_size(self):
        return self.batch // (self.dp * self.micro_batches)

    @property
    def tokens_per_step(self):
        return self.batch * self.model.seq_len

    def to_dict(self):
        d = dataclasses.asdict(self)
        d["codecs"] = self.codec_names
        return d


def validate(cfg, world_size):
    """Raises ConfigError on a configuration that cannot run on world_size ranks."""
    m = cfg.model
    for name in ("tp", "pp", "dp", "batch", "micro_batches", "steps", "log_every", "eval_every",
                 "eval_batches"):
        if getattr(cfg, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, "
                              f"got {getattr(cfg, name)}")
    if cfg.tp * cfg.pp * cfg.dp != world_size:
        raise ConfigError(f"tp x pp x dp = {cfg.tp} x {cfg.pp} x {cfg.dp} = "
                          f"{cfg.tp * cfg.pp * cfg.dp}, but the job has {world_size} ranks")
    if m.heads % cfg.tp:
        raise ConfigError(f"--tp {cfg.tp} does not divide the model's {m.heads} attention heads")
    if m.hidden % m.heads:
        raise ConfigError(f"hidden size {m.hidden} is not a multiple of {m.heads} heads")
    if m.ffn_size % cfg.tp:
        raise ConfigError(f"--tp {cfg.tp} does not divide the MLP width {m.ffn_size}")
    if m.seq_len % cfg.tp:
        raise ConfigError(f"--tp {cfg.tp} does not divide the sequence length {m.seq_len} "
                          "(sequence parallelism gives each rank seq_len / tp positions)")
    if m.layers % cfg.pp:
        raise ConfigError(f"--pp {cfg.pp} does not divide the model's {m.layers} layers")
    if cfg.batch % (cfg.dp * cfg.micro_batches):
        raise ConfigError(f"--batch {cfg.batch} is not a multiple of dp x micro-batches = "
                          f"{cfg.dp} x {cfg.micro_batches}")
    if not 0 < cfg.val_fraction < 1:
        raise ConfigError(f"--val-fraction must be in (0, 1), got {cfg.val_fraction}")
    if cfg.precision not in ("auto", "fp32", "bf16"):
        raise ConfigError(f"--precision {cfg.precision!r}: expected auto, fp32 or bf16")
    if cfg.adaptive == "off" and "auto" in cfg.codec_names.values():
        raise ConfigError("codec auto is the adaptive choice between lossless and plain data; "
                          "it needs --adaptive on or auto")
    if cfg.device not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"--device {cfg.device!r}: expected auto, cpu or cuda")
    if cfg.overlap:
        names = cfg.codec_names
        for dim in ("tp", "tp_reduce"):
            codec = names.get(dim, "none")
            if codec != "none" and not codec.startswith("fp8"):
                raise ConfigError(f"--overlap: the overlapped GEMMs move plain or fp8 data, not "
                                  f"{codec} (the {dim.replace('_', ' ')} codec)")
        if cfg.tp < 2:
            raise ConfigError("--overlap schedules the tensor-parallel GEMMs against their "
                              "communication: it needs --tp 2 or more")
    # Read now (every rank, cached for the run): a corpus too small for one sequence in either
    # split fails here, before any work.
    from .data import read_corpus

    read_corpus(os.path.abspath(cfg.corpus), cfg.val_fraction, m.seq_len)


def check_corpus(root):
    """The corpus must be a folder with Python sources in it (data.read_corpus reads it)."""
    if not os.path.isdir(root):
        raise ConfigError(f"corpus {root!r} is not a folder (--corpus: a folder of .py files; "
                          "the default is this Python's standard library)")
    for _, _, files in os.walk(root):
        if any(f.endswith(".py") for f in files):
            return
    raise ConfigError(f"corpus {root!r} holds no .py files")


class _Parser(argparse.ArgumentParser):
    """Raises ConfigError instead of printing and exiting, so the caller decides which rank
    prints and every rank exits with the same code."""

    def error(self, message):
        raise ConfigError(message)


def _policies_arg(text):
    """--policy: one name or several, comma-separated (each trained in turn, same tokens)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if name not in policies.POLICIES:
            raise argparse.ArgumentTypeError(f"invalid choice: {name!r} (choose from "
                                             f"{', '.join(policies.POLICIES)})")
    if not names:
        raise argparse.ArgumentTypeError("expected a policy name")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"{text!r} names a policy twice")
    return names


def _codec_arg(dimension, flag=None):
    def parse(name):
        try:
            policies.check_codec_name(name, dimension, flag)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return name
    return parse


def parser():
    p = _Parser(prog="python -m cclz.train",
                description="Train a GPT with tensor, sequence, pipeline and data parallelism, "
                            "its communication compressed by cclz. "
                            "`python -m cclz.train compare RUN_A RUN_B` compares two runs.")
    g = p.add_argument_group("model")
    g.add_argument("--preset", default="tiny", choices=sorted(PRESETS),
                   help="model size and its default batch and learning rate (default: tiny)")
    g.add_argument("--layers", type=int)
    g.add_argument("--heads", type=int)
    g.add_argument("--hidden", type=int)
    g.add_argument("--ffn", type=int, help="MLP width (default 4 x hidden)")
    g.add_argument("--seq-len", type=int)
    g = p.add_argument_group("parallelism (ranks = tp x pp x dp, tp innermost)")
    g.add_argument("--tp", type=int, default=1, help="tensor (and sequence) parallel degree")
    g.add_argument("--pp", type=int, default=1, help="pipeline stages (1F1B schedule)")
    g.add_argument("--dp", type=int, help="data-parallel replicas (default: ranks / (tp x pp))")
    g.add_argument("--micro-batches", type=int,
                   help="micro-batches per step and replica (default: 2 x pp when pp > 1, or "
                        "more where the preset's micro-batch size asks for it)")
    g.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"),
                   help="bf16: GEMMs under bf16 autocast, bf16 activations on the wire, fp32 "
                        "weights and gradients (auto: bf16 on GPUs, fp32 on CPU ranks)")
    g.add_argument("--recompute", action="store_true",
                   help="recompute each block in the backward instead of keeping its "
                        "activations (less memory)")
    g.add_argument("--overlap", action="store_true",
                   help="run each tensor-parallel linear and its sequence all-gather or "
                        "reduce-scatter as one overlapped call (docs/overlap.md; tp codecs none "
                        "or fp8)")
    g = p.add_argument_group("compression")
    g.add_argument("--policy", default=["none"], type=_policies_arg, metavar="POLICY[,POLICY...]",
                   help=f"what cclz compresses: {', '.join(policies.POLICIES)} (all: tp fp8, "
                        "dp qgrad4 with error feedback, pp fp8). Several, comma-separated: "
                        "trained one after the other in this launch, the same steps and tokens, "
                        "each into OUT/POLICY")
    for dim in ("tp", "dp", "pp"):
        g.add_argument(f"--{dim}-codec", type=_codec_arg(dim), metavar="CODEC",
                       help=f"override the policy's {dim} codec: "
                            f"{', '.join(policies.codecs_for(dim))}")
    g.add_argument("--tp-reduce-codec", type=_codec_arg("tp", "--tp-reduce-codec"),
                   metavar="CODEC",
                   help="tp's reductions alone (partial sums forward, input gradients "
                        "backward; default: the policy's, else --tp-codec)")
    g.add_argument("--adaptive", default="auto", choices=("auto", "on", "off"),
                   help="let cclz send plain data where that is faster (auto: on for GPUs; off "
                        "on CPU ranks, whose runs show the codecs' effect on the loss)")
    g = p.add_argument_group("training")
    g.add_argument("--batch", type=int, help="global batch in sequences")
    g.add_argument("--steps", type=int, default=300)
    g.add_argument("--lr", type=float)
    g.add_argument("--warmup", type=int, default=20)
    g.add_argument("--weight-decay", type=float, default=0.1)
    g.add_argument("--clip", type=float, default=1.0, help="gradient norm clip (0: off)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--bucket-mb", type=float, default=25.0,
                   help="gradient bucket size of the data-parallel all-reduce")
    g = p.add_argument_group("data and output")
    g.add_argument("--corpus", default=None,
                   help="folder of .py files (default: this Python's standard library)")
    g.add_argument("--val-fraction", type=float, default=0.05)
    g.add_argument("--eval-every", type=int, default=50)
    g.add_argument("--eval-batches", type=int, default=4)
    g.add_argument("--log-every", type=int, default=10)
    g.add_argument("--out", help="run folder for log.jsonl (default: runs/<policy>); with "
                                 "several policies, the folder of their run folders (default: "
                                 "runs)")
    g.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    g.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def _default_micro_batches(batch, dp, pp, micro_batch):
    """2 x pp micro-batches keep a pipeline's bubble small; more where the preset's micro-batch
    size asks for them; a count that divides the replica's batch where one does."""
    per_replica = max(1, batch // dp)
    want = max(2 * pp if pp > 1 else 1, -(-per_replica // micro_batch))
    for m in range(want, per_replica + 1):
        if per_replica % m == 0:
            return m
    return want


def configs_from_args(argv, world_size):
    """The validated TrainConfigs of a command line on world_size ranks, one per policy it
    names (ConfigError if any cannot run)."""
    a = parser().parse_args(argv)
    preset = PRESETS[a.preset]
    base = preset["model"]
    model = ModelConfig(layers=a.layers or base.layers, heads=a.heads or base.heads,
                        hidden=a.hidden or base.hidden, seq_len=a.seq_len or base.seq_len,
                        ffn=a.ffn or base.ffn)
    for name in ("layers", "heads", "hidden", "seq_len"):
        if getattr(model, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be at least 1")
    if a.tp < 1 or a.pp < 1:
        raise ConfigError("--tp and --pp must be at least 1")
    if a.dp is None:
        if world_size % (a.tp * a.pp):
            raise ConfigError(f"tp x pp = {a.tp} x {a.pp} = {a.tp * a.pp} does not divide the "
                              f"job's {world_size} ranks")
        a.dp = world_size // (a.tp * a.pp)
    batch = a.batch or preset["batch"]
    micro = a.micro_batches or _default_micro_batches(batch, a.dp, a.pp, preset["micro_batch"])
    several = len(a.policy) > 1
    configs = []
    for policy in a.policy:
        names = policies.codec_names(policy, a.tp_codec, a.dp_codec, a.pp_codec,
                                      a.tp_reduce_codec)
        out = os.path.join(a.out or "runs", policy) if several or not a.out else a.out
        cfg = TrainConfig(
            model=model, preset=a.preset if model == base else f"{a.preset}-custom",
            tp=a.tp, pp=a.pp, dp=a.dp, batch=batch,
            micro_batches=micro, steps=a.steps, lr=a.lr or preset["lr"], warmup=a.warmup,
            weight_decay=a.weight_decay, clip=a.clip, seed=a.seed,
            codecs=tuple(names.items()), policy_name=policy, log_every=a.log_every,
            eval_every=a.eval_every, eval_batches=a.eval_batches,
            out=out, corpus=a.corpus or stdlib_corpus(),
            val_fraction=a.val_fraction, device=a.device, adaptive=a.adaptive,
            bucket_mb=a.bucket_mb, recompute=a.recompute, overlap=a.overlap,
            precision=a.precision, quiet=a.quiet)
        validate(cfg, world_size)
        configs.append(cfg)
    return configs


def from_args(argv, world_size):
    """The validated TrainConfig of a command line that names one policy (ConfigError if it
    cannot run; configs_from_args takes several)."""
    configs = configs_from_args(argv, world_size)
    if len(configs) != 1:
        raise ConfigError("several policies: use configs_from_args")
    return configs[0]
