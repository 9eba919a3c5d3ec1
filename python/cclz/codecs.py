"""Codec choices for a collective: what `codec=` takes. Each builds the C API's
cclzCodecConfig_t; None means plain data (the network's own collective)."""
from dataclasses import dataclass
from typing import Optional

import torch

from . import _capi

_FP8_FORMATS = {"e4m3": 1, "e5m2": 2, "int8": 3}
_ROUNDING = {"nearest": 0, "stochastic": 1}


@dataclass(frozen=True)
class Lossless:
    """Bit-exact: entropy-codes the exponents of bf16/fp16/fp32 values. chunk_elems: 1024, 2048
    or 4096 (0: 4096)."""
    chunk_elems: int = 0

    def config(self):
        c = _capi.CodecConfig.initializer()
        c.codec = 1
        c.chunkElems = self.chunk_elems
        return c


@dataclass(frozen=True)
class Fp8:
    """Lossy, for activations: one 8-bit code per value with a fine scale per 64 values and a
    coarse scale per row. row_elems: the tensor's last dimension (its hidden size), a multiple of
    64; 0 lets the encoder estimate it from the data (slower on small messages)."""
    row_elems: int = 0
    format: str = "e4m3"

    def config(self):
        if self.format not in _FP8_FORMATS:
            raise ValueError(f"Fp8 format {self.format!r}: expected one of {sorted(_FP8_FORMATS)}")
        c = _capi.CodecConfig.initializer()
        c.codec = 2
        c.fp8RowElems = self.row_elems
        c.fp8Format = _FP8_FORMATS[self.format]
        return c


@dataclass(frozen=True)
class Qgrad:
    """Lossy, for gradients: int8/int4/int2 codes with one scale per block of block_elems values.
    With `feedback` (a cclz.Feedback of the tensor's size), what a call drops is kept and added
    to the next call's data (error feedback): give each gradient bucket its own. feedback=True
    in a Policy asks for one state per bucket, which the DDP hook creates."""
    bits: int = 4
    block_elems: int = 64
    rounding: str = "nearest"
    seed: int = 0
    feedback: Optional[object] = None  # a Feedback, True (a policy's request) or None

    def config(self):
        if self.rounding not in _ROUNDING:
            raise ValueError(f"Qgrad rounding {self.rounding!r}: expected nearest or stochastic")
        c = _capi.CodecConfig.initializer()
        c.codec = 3
        c.bits = self.bits
        c.blockElems = self.block_elems
        c.rounding = _ROUNDING[self.rounding]
        c.seed = self.seed
        return c


class Feedback:
    """The error-feedback state of one gradient bucket: the residual of `numel` values, in device
    memory for CUDA tensors or host memory for CPU tensors. device: where the gradients live: a
    torch.device or its name ('cuda', 'cuda:1', 'cpu'), or True for the current CUDA device and
    False for the host. dtype: the residual's, torch.float32 or torch.bfloat16 (half the memory;
    each new residual is rounded to bf16, which drops a 2^-9 relative part of what quantization
    left out)."""

    _DTYPES = {torch.float32: 7, torch.bfloat16: 9}  # cclzFloat32, cclzBfloat16

    def __init__(self, numel, device=False, dtype=torch.float32):
        if numel <= 0:
            raise ValueError(f"Feedback: numel must be positive, got {numel}")
        if dtype not in self._DTYPES:
            raise ValueError(f"Feedback: dtype {dtype} is not a residual's (torch.float32 or "
                             "torch.bfloat16)")
        self.numel, self.dtype = int(numel), dtype
        where = None
        if isinstance(device, (str, torch.device)):
            where = torch.device(device)
            device = where.type == "cuda"
        self.device = bool(device)
        handle = _capi.ctypes.c_void_p()
        create = (_capi.ctypes.byref(handle), self.numel, 1 if self.device else 0,
                  self._DTYPES[dtype])
        if where is not None and where.type == "cuda" and where.index is not None:
            with torch.cuda.device(where):
                _capi.check("cclzFeedbackCreateWithDtype", *create)
        else:
            _capi.check("cclzFeedbackCreateWithDtype", *create)
        self._handle = handle

    @property
    def handle(self):
        if self._handle is None:
            raise ValueError("Feedback: used after close()")
        return self._handle

    def close(self):
        if self._handle is not None:
            _capi.check("cclzFeedbackDestroy", self._handle)
            self._handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass
