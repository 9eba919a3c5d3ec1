"""The Python package's tests run as MPI ranks (mpirun -n N python3 -m pytest python/tests), one
communicator per session, on CPU tensors over MPI; with CCLZ_TEST_DEVICE=cuda, on one GPU per
rank over NCCL (a torch.distributed NCCL group built from the same ranks), the same tests
against torch's own results. Every test makes the same calls on every rank and asserts only
after its collectives, so that a failing rank never leaves the others waiting in a collective.

Tensors are made on DEVICE (torch's default device for the session); seeded values are drawn on
the CPU and moved, so that both devices see the same numbers."""
import os

import pytest
import torch
from mpi4py import MPI

import cclz
from cclz.train.launch import init_distributed

_WORLD = MPI.COMM_WORLD
if os.environ.get("CCLZ_TEST_DEVICE", "cpu") == "cuda":
    DEVICE = torch.device("cuda", _WORLD.Get_rank() % max(torch.cuda.device_count(), 1))
    torch.cuda.set_device(DEVICE)
else:
    DEVICE = torch.device("cpu")
torch.set_default_device(DEVICE)

requires_cuda = pytest.mark.skipif(DEVICE.type != "cuda",
                                   reason="a GPU test (CCLZ_TEST_DEVICE=cuda)")


def _init_torch_distributed():
    """torch.distributed over the MPI ranks: NCCL on GPUs, gloo on CPUs."""
    import torch.distributed as dist

    init_distributed("mpirun", _WORLD.Get_rank(), _WORLD.Get_size(), DEVICE)
    return dist.group.WORLD


@pytest.fixture(scope="session")
def world_group():
    """The torch.distributed group of every rank (NCCL on GPUs, gloo on CPUs), e.g. for DDP."""
    yield _init_torch_distributed()


@pytest.fixture(scope="session")
def comm():
    """Every call through its codec (adaptive=False), on DEVICE."""
    if DEVICE.type == "cuda":
        c = cclz.Communicator.from_group(_init_torch_distributed(), device=DEVICE, adaptive=False)
    else:
        c = cclz.Communicator.from_mpi(adaptive=False)
    yield c
    c.close()


@pytest.fixture
def fresh_comm(comm, world_group):
    """For tests whose calls fail in the library: a device communicator that checks its calls
    in the background is aborted by a failed call (docs/collectives.md, "Checking the call"),
    so each such test gets its own on GPUs; a host communicator checks before it moves data and
    stays usable, so the session's serves on CPUs."""
    if DEVICE.type != "cuda":
        yield comm
        return
    c = cclz.Communicator.from_group(world_group, device=DEVICE, adaptive=False)
    yield c
    c.close()


def generator(seed):
    return torch.Generator(device="cpu").manual_seed(seed)


def randn(*shape, generator):
    """Seeded Gaussian values drawn on the CPU, on DEVICE."""
    return torch.randn(*shape, generator=generator, device="cpu").to(DEVICE)


def rank_input(rank, numel, dtype, seed=0):
    """Rank r's deterministic input: Gaussian values (integers for integer dtypes)."""
    g = generator(1000 * seed + rank)
    if dtype.is_floating_point:
        values = torch.randn(numel, generator=g, dtype=torch.float32, device="cpu").to(dtype)
    else:
        values = torch.randint(-100, 100, (numel,), generator=g, dtype=torch.int64,
                               device="cpu").to(dtype)
    return values.to(DEVICE)


def nmse(got, want):
    got, want = got.double(), want.double()
    return float(((got - want) ** 2).sum() / (want ** 2).sum().clamp_min(1e-300))
