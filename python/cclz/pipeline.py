"""Pipeline parallelism: the activations and gradients that cross a stage boundary, sent and
received in batches like torch.distributed.batch_isend_irecv.

    ops = [cclz.pipeline.P2POp("send", activation, next_stage, codec=policy.pp),
           cclz.pipeline.P2POp("recv", grad_in, next_stage, codec=policy.pp)]
    cclz.pipeline.batch_send_recv(comm, ops)

cclz has no group calls: each send or recv is its own pipelined collective and blocks its peer
(on the CPU) or its stream (on the GPU) until matched. A batch is therefore run in an order that
cannot deadlock whatever the stages do: pairs of ranks are served in ascending order of
(lower rank, higher rank), the order every rank agrees on, and within a pair the lower rank's
sends go first, then the higher rank's. Both ends of a pair must list their matching operations
in the same order (as with NCCL groups).
"""
from dataclasses import dataclass
from typing import Optional

import torch

_KINDS = ("send", "recv")


@dataclass
class P2POp:
    """One point-to-point operation of a batch: op is "send" or "recv"; peer a rank of the
    communicator; codec as for Communicator.send/recv (both ends pass the same)."""
    op: str
    tensor: torch.Tensor
    peer: int
    codec: Optional[object] = None

    def __post_init__(self):
        if self.op not in _KINDS:
            raise ValueError(f"P2POp op {self.op!r}: expected 'send' or 'recv'")


def batch_send_recv(comm, ops):
    """Runs every operation of ops. On CUDA tensors the transfers are queued on the current
    stream (the outputs are ready for work queued after them); on CPU tensors they are complete
    when this returns. Raises ValueError, before anything moves, on a peer out of range or equal
    to this rank."""
    ops = list(ops)
    for o in ops:
        if not isinstance(o, P2POp):
            raise ValueError(f"batch_send_recv takes cclz.pipeline.P2POp items, got "
                             f"{type(o).__name__}")
        comm._check_peer(o.peer)
    for o in _deadlock_free_order(comm.rank, ops):
        if o.op == "send":
            comm.send(o.tensor, o.peer, codec=o.codec)
        else:
            comm.recv(o.tensor, o.peer, codec=o.codec)


def _deadlock_free_order(rank, ops):
    """Sorts ops by peer, and within one peer puts the lower rank's sends (the peer's receives)
    first: with every rank serving its pairs in the same global order, no cycle of waits forms."""
    def key(indexed):
        index, o = indexed
        lower_sends_first = (o.op == "send") == (rank < o.peer)
        return (o.peer, 0 if lower_sends_first else 1, index)

    return [o for _, o in sorted(enumerate(ops), key=key)]
