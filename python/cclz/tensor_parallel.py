"""Tensor and sequence parallelism in Megatron's layout, with compressed communication in both
directions. Activations are [sequence, batch, hidden]; with sequence parallelism each rank of the
tensor-parallel group holds sequence / size rows of the layer norms' and dropouts' activations.

    gather_from_sequence_parallel   forward: all-gather along dim 0;   backward: reduce-scatter
    reduce_scatter_to_sequence_parallel  forward: reduce-scatter along dim 0; backward: all-gather
    copy_to_tensor_parallel         forward: identity;                 backward: all-reduce
    reduce_from_tensor_parallel     forward: all-reduce;               backward: identity

`codec` compresses the forward communication, `grad_codec` the backward one (default: the same).
An Fp8 codec without a row length takes the tensor's last dimension (its hidden size) when that
is a multiple of 64.
"""
import dataclasses

import torch

from .codecs import Fp8


def _for_rows(codec, t):
    """Fp8 without row_elems: the tensor's hidden size, where the format takes it."""
    if isinstance(codec, Fp8) and codec.row_elems == 0 and t.shape[-1] % 64 == 0:
        return dataclasses.replace(codec, row_elems=t.shape[-1])
    return codec


def _gather(comm, x, codec):
    x = x.contiguous()
    out = torch.empty((x.shape[0] * comm.size,) + tuple(x.shape[1:]), dtype=x.dtype,
                      device=x.device)
    comm.all_gather_into_tensor(out, x, codec=_for_rows(codec, x))
    return out


def _reduce_scatter(comm, x, codec):
    x = x.contiguous()
    if x.shape[0] % comm.size:
        raise ValueError(f"dimension 0 ({x.shape[0]}) must be a multiple of the tensor-parallel "
                         f"size ({comm.size})")
    out = torch.empty((x.shape[0] // comm.size,) + tuple(x.shape[1:]), dtype=x.dtype,
                      device=x.device)
    comm.reduce_scatter_tensor(out, x, op="sum", codec=_for_rows(codec, x))
    return out


def _all_reduce(comm, x, codec):
    x = x.contiguous().clone()
    comm.all_reduce(x, op="sum", codec=_for_rows(codec, x))
    return x


class _GatherFromSequenceParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, comm, codec, grad_codec):
        ctx.comm, ctx.grad_codec = comm, grad_codec
        return _gather(comm, x, codec)

    @staticmethod
    def backward(ctx, grad):
        return _reduce_scatter(ctx.comm, grad, ctx.grad_codec), None, None, None


class _ReduceScatterToSequenceParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, comm, codec, grad_codec):
        ctx.comm, ctx.grad_codec = comm, grad_codec
        return _reduce_scatter(comm, x, codec)

    @staticmethod
    def backward(ctx, grad):
        return _gather(ctx.comm, grad, ctx.grad_codec), None, None, None


class _CopyToTensorParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, comm, grad_codec):
        ctx.comm, ctx.grad_codec = comm, grad_codec
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(ctx.comm, grad, ctx.grad_codec), None, None


class _ReduceFromTensorParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, comm, codec):
        return _all_reduce(comm, x, codec)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None


def gather_from_sequence_parallel(x, comm, codec=None, grad_codec=...):
    return _GatherFromSequenceParallel.apply(x, comm, codec,
                                             codec if grad_codec is ... else grad_codec)


def reduce_scatter_to_sequence_parallel(x, comm, codec=None, grad_codec=...):
    return _ReduceScatterToSequenceParallel.apply(x, comm, codec,
                                                  codec if grad_codec is ... else grad_codec)


def copy_to_tensor_parallel(x, comm, grad_codec=None):
    return _CopyToTensorParallel.apply(x, comm, grad_codec)


def reduce_from_tensor_parallel(x, comm, codec=None):
    return _ReduceFromTensorParallel.apply(x, comm, codec)


class ColumnParallelLinear(torch.nn.Module):
    """y = x W^T + b with W's output features split over the tensor-parallel ranks: each rank
    holds out_features / size rows of W (and of b) and returns its slice of y's last dimension.
    sequence_parallel=True: x arrives sequence-sharded ([s / size, b, in]) and is all-gathered
    (backward: reduce-scattered); False: x is replicated and its gradient all-reduced."""

    def __init__(self, in_features, out_features, comm, bias=True, sequence_parallel=True,
                 codec=None, dtype=None, device=None):
        super().__init__()
        if out_features % comm.size:
            raise ValueError(f"out_features ({out_features}) must be a multiple of the "
                             f"tensor-parallel size ({comm.size})")
        self.comm, self.sequence_parallel, self.codec = comm, sequence_parallel, codec
        self.weight = torch.nn.Parameter(torch.empty(out_features // comm.size, in_features,
                                                     dtype=dtype, device=device))
        self.bias = torch.nn.Parameter(torch.zeros(out_features // comm.size, dtype=dtype,
                                                   device=device)) if bias else None
        torch.nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        if self.sequence_parallel:
            x = gather_from_sequence_parallel(x, self.comm, self.codec)
        else:
            x = copy_to_tensor_parallel(x, self.comm, self.codec)
        return torch.nn.functional.linear(x, self.weight, self.bias)


class RowParallelLinear(torch.nn.Module):
    """y = x W^T + b with W's input features split over the ranks: x arrives split along its last
    dimension (a ColumnParallelLinear's output), each rank's partial product is summed over the
    ranks: reduce-scattered along the sequence (sequence_parallel=True, the output is
    sequence-sharded) or all-reduced. The bias is added once, after the reduction."""

    def __init__(self, in_features, out_features, comm, bias=True, sequence_parallel=True,
                 codec=None, dtype=None, device=None):
        super().__init__()
        if in_features % comm.size:
            raise ValueError(f"in_features ({in_features}) must be a multiple of the "
                             f"tensor-parallel size ({comm.size})")
        self.comm, self.sequence_parallel, self.codec = comm, sequence_parallel, codec
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features // comm.size,
                                                     dtype=dtype, device=device))
        self.bias = torch.nn.Parameter(torch.zeros(out_features, dtype=dtype,
                                                   device=device)) if bias else None
        torch.nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        partial = torch.nn.functional.linear(x, self.weight)
        if self.sequence_parallel:
            y = reduce_scatter_to_sequence_parallel(partial, self.comm, self.codec)
        else:
            y = reduce_from_tensor_parallel(partial, self.comm, self.codec)
        return y + self.bias if self.bias is not None else y
