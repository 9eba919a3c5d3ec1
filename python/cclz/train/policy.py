"""Which codec compresses which traffic: the --policy presets and the per-dimension codec names,
mapped onto cclz.Policy.

    tp: activations and their gradients inside a tensor-parallel group (all-gather/reduce-scatter)
    tp_reduce: of those, the reductions alone (partial sums forward, input gradients backward);
               the preset's, else tp's
    dp: gradients averaged over the data-parallel replicas (the DDP hook's all-reduce)
    pp: activations and gradients crossing a pipeline-stage boundary (send/recv)
"""
import dataclasses

from ..codecs import Fp8, Lossless, Qgrad
from ..policy import Policy

# What each preset compresses; a dimension not named stays uncompressed. "all" is every
# dimension in its preset's codec. Activations take the fp8 codec's rotated INT8 grid: the same
# bytes as E4M3 with a tenth of its error (NMSE 3.3e-5 against 3.8e-4 on the real tensors), and
# E4M3's error, met four times a layer in tensor parallelism, forwards and backwards, cost 5.8%
# of validation loss over 1,200 steps of the small model where INT8's gradient error is that of
# bf16 itself (docs/train.md, "Choosing the activations' codec").
POLICIES = {
    "none": {},
    "tp-fp8": {"tp": "fp8-int8"},
    "dp-qgrad": {"dp": "qgrad4"},
    "pp-fp8": {"pp": "fp8-int8"},
    "all": {"tp": "fp8-int8", "dp": "qgrad4", "pp": "fp8-int8"},
}

CODECS = ("none", "auto", "lossless", "fp8", "fp8-e5m2", "fp8-int8", "qgrad2", "qgrad4",
          "qgrad8")
# Qgrad quantizes a sum's inputs and relies on error feedback across steps: it is for the
# gradients of data parallelism, not for activations that are used once.
_GRADIENT_ONLY = ("qgrad2", "qgrad4", "qgrad8")


def codecs_for(dimension):
    """The codec names a dimension takes."""
    return tuple(c for c in CODECS if dimension == "dp" or c not in _GRADIENT_ONLY)


def check_codec_name(name, dimension, flag=None):
    """Raises ValueError naming the choices when name is not a codec for this dimension (flag:
    the option the name came from, default --DIMENSION-codec)."""
    flag = flag or f"--{dimension}-codec"
    if name not in CODECS:
        raise ValueError(f"{flag} {name!r}: expected one of "
                         f"{', '.join(codecs_for(dimension))}")
    if name in _GRADIENT_ONLY and dimension != "dp":
        raise ValueError(f"{flag} {name}: qgrad is for data-parallel gradients "
                         f"(--dp-codec); use fp8 or lossless for {dimension} activations")


def codec_names(policy, tp_codec=None, dp_codec=None, pp_codec=None, tp_reduce_codec=None):
    """{'tp': name, 'tp_reduce': name, 'dp': name, 'pp': name}: the preset's choice, overridden
    per dimension; tp_codec overrides tp's gathers and reductions alike, tp_reduce_codec then the
    reductions alone."""
    if policy not in POLICIES:
        raise ValueError(f"--policy {policy!r}: expected one of {', '.join(POLICIES)}")
    preset = POLICIES[policy]
    names = {dim: preset.get(dim, "none") for dim in ("tp", "dp", "pp")}
    names["tp_reduce"] = preset.get("tp_reduce", names["tp"])
    if tp_codec is not None:
        check_codec_name(tp_codec, "tp")
        names["tp"] = names["tp_reduce"] = tp_codec
    if tp_reduce_codec is not None:
        check_codec_name(tp_reduce_codec, "tp", "--tp-reduce-codec")
        names["tp_reduce"] = tp_reduce_codec
    for dim, override in (("dp", dp_codec), ("pp", pp_codec)):
        if override is not None:
            check_codec_name(override, dim)
            names[dim] = override
    return names


def codec(name, dimension, hidden=0):
    """The cclz codec object for a name. dp qgrad keeps error feedback (one residual per gradient
    bucket, made by the hook's state); fp8 takes the hidden size as its row length when the
    format can (a multiple of 64), so the encoder need not estimate it."""
    check_codec_name(name, dimension)
    if name == "none":
        return None
    if name == "auto":
        return "auto"  # lossless or plain, whichever the adaptive communicator found faster
    if name == "lossless":
        return Lossless()
    if name.startswith("fp8"):
        fmt = name[len("fp8-"):] if name != "fp8" else "e4m3"  # fp8-int8: the rotated INT8 grid
        return Fp8(row_elems=hidden if hidden and hidden % 64 == 0 else 0, format=fmt)
    return Qgrad(int(name[len("qgrad"):]), feedback=True)


def make_policy(names, hidden):
    """cclz.Policy from {'tp': name, 'dp': name, 'pp': name, 'tp_reduce': name (default: tp's)}."""
    tp = codec(names["tp"], "tp", hidden)
    reduce_name = names.get("tp_reduce", names["tp"])
    return Policy(tp=tp, dp=codec(names["dp"], "dp", hidden), pp=codec(names["pp"], "pp", hidden),
                  tp_reduce=... if reduce_name == names["tp"] else codec(reduce_name, "tp", hidden))


def describe(policy):
    """A short text for logs: 'tp=fp8 dp=qgrad4+fb pp=none'."""
    def one(c):
        if c is None or isinstance(c, str):
            return c or "none"
        if isinstance(c, Qgrad):
            return f"qgrad{c.bits}" + ("+fb" if c.feedback else "")
        if isinstance(c, Fp8):
            return "fp8" if c.format == "e4m3" else f"fp8-{c.format}"
        return type(c).__name__.lower()
    shown = [f.name for f in dataclasses.fields(policy)
             if f.name != "tp_reduce" or policy.tp_reduce is not ...]
    return " ".join(f"{name}={one(getattr(policy, name))}" for name in shown)
