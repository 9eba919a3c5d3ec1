"""The 3D layout of the ranks: world = dp x pp x tp with tp innermost, so a tensor-parallel group
is adjacent ranks (one node's GPUs, where its traffic is heaviest):

    rank = (dp_rank * pp + pp_rank) * tp + tp_rank

Each dimension of degree > 1 gets a torch.distributed group and a cclz communicator over the
same ranks (NCCL for CUDA tensors, MPI for CPU tensors), wrapped to count its traffic.
"""
import torch
import torch.distributed as dist

from ..comm import Communicator
from .wire import MeteredComm


def coordinates(rank, tp, pp):
    """(dp_rank, pp_rank, tp_rank) of a global rank."""
    return rank // (tp * pp), (rank // tp) % pp, rank % tp


def group_ranks(tp, pp, dp):
    """{'tp': [...], 'pp': [...], 'dp': [...]}: every group of each dimension, as rank lists."""
    def rank(d, p, t):
        return (d * pp + p) * tp + t
    return {
        "tp": [[rank(d, p, t) for t in range(tp)] for d in range(dp) for p in range(pp)],
        "pp": [[rank(d, p, t) for p in range(pp)] for d in range(dp) for t in range(tp)],
        "dp": [[rank(d, p, t) for d in range(dp)] for p in range(pp) for t in range(tp)],
    }


class ParallelGroups:
    """This rank's place in the layout and its communicators; tp_comm, pp_comm and dp_comm are
    None where the degree is 1. One process alone (no torch.distributed) is the layout 1x1x1."""

    def __init__(self, tp=1, pp=1, dp=1, device=torch.device("cpu"), adaptive=None):
        self.tp, self.pp, self.dp = tp, pp, dp
        self.device = torch.device(device)
        self.distributed = dist.is_initialized() and dist.get_world_size() > 1
        self.rank = dist.get_rank() if self.distributed else 0
        self.world = tp * pp * dp
        if self.distributed and dist.get_world_size() != self.world:
            raise ValueError(f"tp x pp x dp = {self.world}, torch.distributed has "
                             f"{dist.get_world_size()} ranks")
        self.dp_rank, self.pp_rank, self.tp_rank = coordinates(self.rank, tp, pp)
        self.groups, self._comms = {}, {}
        # torch.distributed wants every rank to create every group, in the same order.
        for dim, all_ranks in group_ranks(tp, pp, dp).items():
            if len(all_ranks[0]) == 1:
                continue
            for ranks in all_ranks:
                group = dist.new_group(ranks)
                if self.rank in ranks:
                    self.groups[dim] = group
        for dim in ("tp", "pp", "dp"):  # the same order on every rank: creation is collective
            if dim in self.groups:
                comm = Communicator.from_group(self.groups[dim], device=self.device,
                                               adaptive=adaptive)
                self._comms[dim] = MeteredComm(comm)

    @property
    def tp_comm(self):
        return self._comms.get("tp")

    @property
    def pp_comm(self):
        return self._comms.get("pp")

    @property
    def dp_comm(self):
        return self._comms.get("dp")

    @property
    def first_stage(self):
        return self.pp_rank == 0

    @property
    def last_stage(self):
        return self.pp_rank == self.pp - 1

    def wire_counts(self):
        """What this rank's communicators counted so far: [raw bytes, sent bytes, overlapped GEMM
        calls, those of them that ran serially]."""
        comms = self._comms.values()
        return [sum(c.raw_bytes for c in comms), sum(c.sent_bytes for c in comms),
                sum(c.overlap_calls for c in comms), sum(c.overlap_serial for c in comms)]

    def world_sum(self, values):
        """The element-wise sum of a float64 list over every rank (itself on one process)."""
        t = torch.tensor(values, dtype=torch.float64, device=self._collective_device())
        if self.distributed:
            dist.all_reduce(t)
        return t.tolist()

    def world_sum_tensor(self, t):
        """The sum of a tensor on this rank's device over every rank, without a host sync."""
        if self.distributed:
            t = t.clone()
            dist.all_reduce(t)
        return t

    def world_max(self, values):
        t = torch.tensor(values, dtype=torch.float64, device=self._collective_device())
        if self.distributed:
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.tolist()

    def _collective_device(self):
        # NCCL's torch.distributed moves CUDA tensors only; gloo takes CPU ones.
        return self.device if self.device.type == "cuda" else torch.device("cpu")

    def close(self):
        for comm in self._comms.values():
            comm.close()
        self._comms.clear()
        for group in self.groups.values():
            dist.destroy_process_group(group)
        self.groups.clear()
