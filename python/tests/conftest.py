"""The Python package's tests run as MPI ranks (mpirun -n N python3 -m pytest python/tests), one
communicator per session over COMM_WORLD, on CPU tensors. Every test makes the same calls on
every rank and asserts only after its collectives, so that a failing rank never leaves the
others waiting in a collective."""
import pytest
import torch

import cclz


@pytest.fixture(scope="session")
def comm():
    c = cclz.Communicator.from_mpi(adaptive=False)  # every call through its codec
    yield c
    c.close()


def rank_input(rank, numel, dtype, seed=0):
    """Rank r's deterministic input: Gaussian values (integers for integer dtypes)."""
    g = torch.Generator().manual_seed(1000 * seed + rank)
    if dtype.is_floating_point:
        return torch.randn(numel, generator=g, dtype=torch.float32).to(dtype)
    return torch.randint(-100, 100, (numel,), generator=g, dtype=torch.int64).to(dtype)


def nmse(got, want):
    got, want = got.double(), want.double()
    return float(((got - want) ** 2).sum() / (want ** 2).sum().clamp_min(1e-300))


@pytest.fixture(scope="session")
def world_group(comm):
    """torch.distributed over the same ranks (gloo, CPU), for DDP: rank 0 picks a free port and
    sends it to the others over MPI."""
    import socket

    import torch.distributed as dist
    from mpi4py import MPI

    if not dist.is_initialized():
        port = None
        if comm.rank == 0:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        port = MPI.COMM_WORLD.bcast(port, root=0)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=comm.rank,
                                world_size=comm.size)
    yield dist.group.WORLD
