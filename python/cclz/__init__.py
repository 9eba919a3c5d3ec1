"""cclz: compressed collective communication for LLM training, for PyTorch.

    comm = cclz.Communicator.from_group()            # or from_mpi() for CPU tensors
    comm.all_gather_into_tensor(out, x, codec=cclz.Fp8(row_elems=4096))
    comm.all_reduce(grad, op="avg", codec=cclz.Qgrad(4, feedback=cclz.Feedback(grad.numel(), device=grad.device)))
"""
from . import ddp, fsdp, pipeline
from ._capi import CclzError, library_path
from .codecs import Feedback, Fp8, Lossless, Qgrad
from .comm import Communicator
from .policy import Policy
from .tensor_parallel import (ColumnParallelLinear, RowParallelLinear, copy_to_tensor_parallel,
                              gather_from_sequence_parallel, reduce_from_tensor_parallel,
                              reduce_scatter_to_sequence_parallel)

__all__ = ["CclzError", "ddp", "ColumnParallelLinear", "Communicator", "Feedback", "Fp8", "fsdp", "Lossless",
           "Policy", "Qgrad", "RowParallelLinear", "copy_to_tensor_parallel",
           "gather_from_sequence_parallel", "library_path", "pipeline", "reduce_from_tensor_parallel",
           "reduce_scatter_to_sequence_parallel", "version"]


def version():
    """The loaded library's version code (MAJOR * 10000 + MINOR * 100 + PATCH)."""
    import ctypes

    from . import _capi

    v = ctypes.c_int()
    _capi.check("cclzGetVersion", ctypes.byref(v))
    return v.value
