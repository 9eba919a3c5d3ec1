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

The layers take `codec` for their all-gathers (the column-parallel input forward, the
row-parallel output gradient backward) and `reduce_codec` for their reductions (the
row-parallel partial sums forward, the column-parallel input gradient backward), by default the
same: the gathers carry values each rank uses as they are, the reductions sums whose every
term is quantized (docs/train.md, "Choosing the activations' codec").
"""
import dataclasses
import functools

import torch

from .codecs import Fp8


@functools.lru_cache(maxsize=64)
def _with_rows(codec, row_elems):
    # One object per (codec, row length): a communicator keeps each codec's config by identity.
    return dataclasses.replace(codec, row_elems=row_elems)


def _for_rows(codec, t):
    """Fp8 without row_elems: the tensor's hidden size, where the format takes it."""
    if isinstance(codec, Fp8) and codec.row_elems == 0 and t.shape[-1] % 64 == 0:
        return _with_rows(codec, t.shape[-1])
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


class _AllGatherMatmul(torch.autograd.Function):
    """A column-parallel linear under sequence parallelism as one overlapped call: forward
    y = gather(x) W^T + b (Communicator.all_gather_matmul, which keeps the gathered input for the
    weight's gradient, and adds the bias in its GEMMs' epilogue as F.linear does); backward
    dx = this rank's rows of the ranks' dy W summed (matmul_reduce_scatter), dW = dy^T gather(x),
    db = the sum of dy's rows. x: [s / size, b, in], y: [s, b, out / size]."""

    @staticmethod
    def forward(ctx, x, weight, bias, comm, codec, grad_codec):
        rows = x.reshape(-1, x.shape[-1]).contiguous()
        w = weight.to(x.dtype)  # as autocast gives F.linear its weight and bias
        b = None if bias is None else bias.to(x.dtype).contiguous()
        gathered = torch.empty(comm.size * rows.shape[0], rows.shape[1], dtype=x.dtype,
                               device=x.device)
        y = torch.empty(gathered.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
        comm.all_gather_matmul(y, rows, w, gathered=gathered, codec=_for_rows(codec, rows),
                               bias=b)
        ctx.save_for_backward(gathered, w)
        ctx.comm, ctx.grad_codec, ctx.x_shape, ctx.weight_dtype = comm, grad_codec, x.shape, \
            weight.dtype
        ctx.bias_dtype = None if bias is None else bias.dtype
        return y.view(comm.size * x.shape[0], *x.shape[1:-1], w.shape[0])

    @staticmethod
    def backward(ctx, dy):
        gathered, w = ctx.saved_tensors
        dy = dy.reshape(-1, dy.shape[-1]).contiguous().to(w.dtype)
        dx = torch.empty(gathered.shape[0] // ctx.comm.size, gathered.shape[1], dtype=w.dtype,
                         device=dy.device)
        ctx.comm.matmul_reduce_scatter(dx, dy, w, op="sum",
                                       codec=_for_rows(ctx.grad_codec, dx),
                                       transpose_weight=False)
        dw = (dy.t() @ gathered).to(ctx.weight_dtype)
        db = None if ctx.bias_dtype is None else dy.sum(0).to(ctx.bias_dtype)
        return dx.view(ctx.x_shape), dw, db, None, None, None


class _MatmulReduceScatter(torch.autograd.Function):
    """A row-parallel linear under sequence parallelism as one overlapped call: forward
    y = this rank's rows of the ranks' x W^T summed (Communicator.matmul_reduce_scatter);
    backward dx = gather(dy) W (all_gather_matmul, which keeps the gathered gradient),
    dW = gather(dy)^T x. x: [s, b, in / size], y: [s / size, b, out]."""

    @staticmethod
    def forward(ctx, x, weight, comm, codec, grad_codec):
        rows = x.reshape(-1, x.shape[-1]).contiguous()
        w = weight.to(x.dtype)
        if rows.shape[0] % comm.size:
            raise ValueError(f"RowParallelLinear: {x.shape[0]} positions do not split over "
                             f"{comm.size} ranks")
        y = torch.empty(rows.shape[0] // comm.size, w.shape[0], dtype=x.dtype, device=x.device)
        comm.matmul_reduce_scatter(y, rows, w, op="sum", codec=_for_rows(codec, y))
        ctx.save_for_backward(rows, w)
        ctx.comm, ctx.grad_codec, ctx.x_shape, ctx.weight_dtype = comm, grad_codec, x.shape, \
            weight.dtype
        return y.view(x.shape[0] // comm.size, *x.shape[1:-1], w.shape[0])

    @staticmethod
    def backward(ctx, dy):
        rows, w = ctx.saved_tensors
        dy = dy.reshape(-1, dy.shape[-1]).contiguous().to(w.dtype)
        gathered = torch.empty(ctx.comm.size * dy.shape[0], dy.shape[1], dtype=w.dtype,
                               device=dy.device)
        dx = torch.empty(rows.shape, dtype=w.dtype, device=dy.device)
        ctx.comm.all_gather_matmul(dx, dy, w, gathered=gathered,
                                   codec=_for_rows(ctx.grad_codec, dy), transpose_weight=False)
        dw = (gathered.t() @ rows).to(ctx.weight_dtype)
        return dx.view(ctx.x_shape), dw, None, None, None


class ColumnParallelLinear(torch.nn.Module):
    """y = x W^T + b with W's output features split over the tensor-parallel ranks: each rank
    holds out_features / size rows of W (and of b) and returns its slice of y's last dimension.
    sequence_parallel=True: x arrives sequence-sharded ([s / size, b, in]) and is all-gathered
    (backward: reduce-scattered); False: x is replicated and its gradient all-reduced.
    overlap=True (with sequence_parallel): the gather and the GEMM run as one call whose
    peer-to-peer steps are scheduled against row chunks of the GEMM (docs/overlap.md)."""

    def __init__(self, in_features, out_features, comm, bias=True, sequence_parallel=True,
                 codec=None, dtype=None, device=None, overlap=False, reduce_codec=...):
        super().__init__()
        if out_features % comm.size:
            raise ValueError(f"out_features ({out_features}) must be a multiple of the "
                             f"tensor-parallel size ({comm.size})")
        if overlap and not sequence_parallel:
            raise ValueError("overlap=True decomposes the sequence all-gather: it needs "
                             "sequence_parallel=True")
        self.comm, self.sequence_parallel, self.codec = comm, sequence_parallel, codec
        self.reduce_codec = codec if reduce_codec is ... else reduce_codec
        self.overlap = overlap
        self.weight = torch.nn.Parameter(torch.empty(out_features // comm.size, in_features,
                                                     dtype=dtype, device=device))
        self.bias = torch.nn.Parameter(torch.zeros(out_features // comm.size, dtype=dtype,
                                                   device=device)) if bias else None
        torch.nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        if self.overlap:
            # The bias in the GEMMs' epilogue, in x's dtype, as F.linear adds it under autocast.
            return _AllGatherMatmul.apply(x, self.weight, self.bias, self.comm, self.codec,
                                          self.reduce_codec)
        if self.sequence_parallel:
            x = gather_from_sequence_parallel(x, self.comm, self.codec, self.reduce_codec)
        else:
            x = copy_to_tensor_parallel(x, self.comm, self.reduce_codec)
        return torch.nn.functional.linear(x, self.weight, self.bias)


class RowParallelLinear(torch.nn.Module):
    """y = x W^T + b with W's input features split over the ranks: x arrives split along its last
    dimension (a ColumnParallelLinear's output), each rank's partial product is summed over the
    ranks: reduce-scattered along the sequence (sequence_parallel=True, the output is
    sequence-sharded) or all-reduced. The bias is added once, after the reduction.
    overlap=True (with sequence_parallel): the GEMM and the reduce-scatter run as one call, each
    destination's rows computed and sent in turn (docs/overlap.md)."""

    def __init__(self, in_features, out_features, comm, bias=True, sequence_parallel=True,
                 codec=None, dtype=None, device=None, overlap=False, reduce_codec=...):
        super().__init__()
        if in_features % comm.size:
            raise ValueError(f"in_features ({in_features}) must be a multiple of the "
                             f"tensor-parallel size ({comm.size})")
        if overlap and not sequence_parallel:
            raise ValueError("overlap=True decomposes the sequence reduce-scatter: it needs "
                             "sequence_parallel=True")
        self.comm, self.sequence_parallel, self.codec = comm, sequence_parallel, codec
        self.reduce_codec = codec if reduce_codec is ... else reduce_codec
        self.overlap = overlap
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features // comm.size,
                                                     dtype=dtype, device=device))
        self.bias = torch.nn.Parameter(torch.zeros(out_features, dtype=dtype,
                                                   device=device)) if bias else None
        torch.nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        if self.overlap:
            y = _MatmulReduceScatter.apply(x, self.weight, self.comm, self.reduce_codec,
                                           self.codec)
            return y + self.bias if self.bias is not None else y
        partial = torch.nn.functional.linear(x, self.weight)
        if self.sequence_parallel:
            y = reduce_scatter_to_sequence_parallel(partial, self.comm, self.reduce_codec,
                                                    self.codec)
        else:
            y = reduce_from_tensor_parallel(partial, self.comm, self.reduce_codec)
        return y + self.bias if self.bias is not None else y
