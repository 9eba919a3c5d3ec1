"""FSDP2 (torch.distributed.fsdp.fully_shard): the parameter all-gather and the gradient
reduce-scatter through cclz, with FSDP2's custom-collective hooks.

    fully_shard(block) for each block; fully_shard(model)
    cclz.fsdp.compress(model, comm)     # params: lossless (exact); grads: Qgrad int4 + feedback

Needs torch >= 2.9 (FSDPModule.set_custom_all_gather / set_custom_reduce_scatter); on an older
torch, compress raises RuntimeError and FSDP2 keeps its own collectives.

Each fully_shard module gets its own pair of hooks, so a gradient codec with feedback=True gets
one error-feedback residual per module: that module's reduce-scatter input has the same layout
at every step. The all-gather carries parameters, which must arrive exact: lossless, 'auto' or
None only. FSDP2 calls the reduce-scatter with the reduction it needs: sum and avg go through
cclz; another (a pre-multiplied sum from set_reduce_scatter_divide_factor) raises ValueError.
"""
import torch
import torch.distributed as dist

from .codecs import Feedback, Fp8, Lossless, Qgrad

try:  # torch >= 2.9
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather as _AllGatherBase
    from torch.distributed.fsdp._fully_shard._fsdp_api import ReduceScatter as _ReduceScatterBase
    _HAVE_CUSTOM_COMMS = hasattr(FSDPModule, "set_custom_all_gather")
except ImportError:
    FSDPModule, _AllGatherBase, _ReduceScatterBase = None, object, object
    _HAVE_CUSTOM_COMMS = False


class AllGather(_AllGatherBase):
    """FSDP2's parameter all-gather through comm, exact (codec: Lossless(), 'auto' or None)."""

    def __init__(self, comm, codec="auto"):
        if codec is not None and codec != "auto" and not isinstance(codec, Lossless):
            raise ValueError(f"parameters must arrive exact: the all-gather codec is "
                             f"cclz.Lossless(), 'auto' or None, not {codec!r}")
        self.comm = comm
        self.codec = codec if comm.adaptive or codec != "auto" else Lossless()
        self.calls = 0

    def allocate(self, size, *, dtype, device):
        return torch.empty(*size, dtype=dtype, device=device)

    def __call__(self, output_tensor, input_tensor, group, async_op=False):
        _check_group(self.comm, group)
        codec = self.codec if input_tensor.dtype in _CODEC_DTYPES else None
        # Stream-ordered on FSDP2's all-gather stream (the current one here); FSDP2 records its
        # event after this call, so there is no Work to return.
        self.comm.all_gather_into_tensor(output_tensor, input_tensor, codec=codec)
        self.calls += 1
        return None


class ReduceScatter(_ReduceScatterBase):
    """FSDP2's gradient reduce-scatter through comm with codec (default: Qgrad int4 with error
    feedback, one residual for this module's gradients, of residual_dtype: bf16 by default)."""

    def __init__(self, comm, codec=None, residual_dtype=torch.bfloat16):
        self.comm = comm
        self.codec = Qgrad(4, feedback=True) if codec is None else codec
        self.residual_dtype = residual_dtype
        self._with_feedback = None  # codec with this module's residual, made at first use
        self.calls = 0

    def allocate(self, size, *, dtype, device):
        return torch.empty(*size, dtype=dtype, device=device)

    def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
        _check_group(self.comm, group)
        self.comm.reduce_scatter_tensor(output_tensor, input_tensor, op=_op_name(op),
                                        codec=self._codec_for(input_tensor))
        self.calls += 1
        return None

    def _codec_for(self, data):
        codec = self.codec
        if data.dtype not in _CODEC_DTYPES:
            return None
        if isinstance(codec, Qgrad) and codec.feedback is True:
            made = self._with_feedback
            if made is None or made.feedback.numel != data.numel():
                if made is not None:
                    made.feedback.close()
                made = self._with_feedback = Qgrad(
                    codec.bits, codec.block_elems, codec.rounding, codec.seed,
                    feedback=Feedback(data.numel(), device=data.device,
                                      dtype=self.residual_dtype))
            return made
        return codec


def compress(model, comm, gradients=None, parameters="auto"):
    """Gives every fully_shard module of model (model itself included) cclz's all-gather and
    reduce-scatter over comm: parameters with `parameters` (exact codecs only), gradients with
    `gradients` (default Qgrad(4, feedback=True)). comm spans the same ranks as the modules'
    FSDP mesh, in the same order. Returns the (AllGather, ReduceScatter) pair given to each module;
    their `calls` count what went through them."""
    if not _HAVE_CUSTOM_COMMS:
        raise RuntimeError(f"cclz.fsdp needs torch >= 2.9 (FSDPModule.set_custom_all_gather); "
                           f"this is torch {torch.__version__}")
    if isinstance(gradients, Fp8):
        raise ValueError("fp8 is for activations; gradients take cclz.Qgrad or cclz.Lossless")
    hooks = []
    for module in model.modules():
        if isinstance(module, FSDPModule):
            pair = (AllGather(comm, parameters), ReduceScatter(comm, gradients))
            module.set_custom_all_gather(pair[0])
            module.set_custom_reduce_scatter(pair[1])
            hooks.append(pair)
    if not hooks:
        raise ValueError("no module of model is an FSDP2 module: call fully_shard first")
    return hooks


_CODEC_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _op_name(op):
    if op in (dist.ReduceOp.SUM, "sum"):
        return "sum"
    if op in (dist.ReduceOp.AVG, "avg"):
        return "avg"
    raise ValueError(f"FSDP2 asked for the reduction {op!r}; cclz reduces with sum and avg "
                     "(leave set_reduce_scatter_divide_factor unset)")


def _check_group(comm, group):
    if group is not None and group.size() != comm.size:
        raise ValueError(f"the FSDP2 group has {group.size()} ranks, the cclz communicator "
                         f"{comm.size}: build the communicator over the same mesh dimension")
