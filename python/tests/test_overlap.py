"""Communicator.all_gather_matmul and matmul_reduce_scatter (docs/overlap.md) against the
collectives and torch's matmul: the gathered input exactly the all-gather's, the products within
fp32 summation order (torch sums in its own order), fp8 within its error; bad shapes raise
ValueError before anything moves. On CPU ranks (the host path) and on GPUs (the device path)."""
import pytest
import torch
from mpi4py import MPI

import cclz
from conftest import DEVICE, _init_torch_distributed, generator, nmse, randn

M, K, N = 16, 64, 128


@pytest.mark.parametrize("codec", [None, cclz.Fp8(row_elems=64)], ids=["none", "fp8"])
def test_all_gather_matmul_is_the_gather_then_the_product(comm, codec):
    g = generator(11 + comm.rank)
    x, w = randn(M, K, generator=g), randn(N, K, generator=g)
    out = torch.empty(comm.size * M, N)
    gathered = torch.empty(comm.size * M, K)
    comm.all_gather_matmul(out, x, w, gathered=gathered, codec=codec)
    want = torch.empty(comm.size * M, K)
    comm.all_gather_into_tensor(want, x, codec=codec)
    if codec is None:
        assert torch.equal(gathered, want)
    else:
        assert nmse(gathered, want) < 1e-3  # the same codec, in frames of other sizes
    assert torch.allclose(out, gathered @ w.t(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("codec", [None, cclz.Fp8(row_elems=128)], ids=["none", "fp8"])
def test_matmul_reduce_scatter_is_the_product_then_the_reduce_scatter(comm, codec):
    g = generator(21 + comm.rank)
    x, w = randn(comm.size * M, K, generator=g), randn(N, K, generator=g)
    out = torch.empty(M, N)
    comm.matmul_reduce_scatter(out, x, w, op="avg", codec=codec)
    want = torch.empty(M, N)
    comm.reduce_scatter_tensor(want, (x @ w.t()).contiguous(), op="avg")
    if codec is None:
        assert torch.allclose(out, want, rtol=1e-4, atol=1e-4)
    else:
        assert nmse(out, want) < 2e-3


def test_bad_shapes_raise_before_anything_moves(comm):
    x, w = torch.ones(M, K), torch.ones(N, K)
    out = torch.full((comm.size * M, N), 7.0)
    with pytest.raises(ValueError, match="columns"):
        comm.all_gather_matmul(out, x, torch.ones(N, K + 1))
    with pytest.raises(ValueError, match="shape"):
        comm.all_gather_matmul(torch.empty(M, N), x, w)
    with pytest.raises(ValueError, match="2-D"):
        comm.matmul_reduce_scatter(torch.empty(M, N), x.view(2, M // 2, K), w)
    with pytest.raises(ValueError, match="bias has shape"):
        comm.all_gather_matmul(out, x, w, bias=torch.ones(N + 1))
    with pytest.raises(ValueError, match="dtype"):
        comm.all_gather_matmul(out, x, w, bias=torch.ones(N, dtype=torch.float64))
    assert torch.equal(out, torch.full((comm.size * M, N), 7.0))


def test_overlap_needs_sequence_parallelism(comm):
    with pytest.raises(ValueError, match="sequence_parallel"):
        cclz.ColumnParallelLinear(K, comm.size * 8, comm, sequence_parallel=False, overlap=True)


def test_adaptive_calls_try_both_ways_and_settle_alike(comm):
    """On an adaptive communicator (docs/overlap.md, "Adaptive calls") the first calls of a kind
    alternate the overlapped schedule and the serial one (last_ran_serial), the 11th settles
    every rank alike, and every call's product is right either way."""
    if DEVICE.type == "cuda":
        adaptive = cclz.Communicator.from_group(_init_torch_distributed(), device=DEVICE,
                                                adaptive=True)
    else:
        adaptive = cclz.Communicator.from_mpi(adaptive=True)
    g = generator(31 + comm.rank)
    x, w = randn(M, K, generator=g), randn(N, K, generator=g)
    ways, worst = [], 0.0
    for _ in range(12):
        out = torch.empty(comm.size * M, N)
        gathered = torch.empty(comm.size * M, K)
        adaptive.all_gather_matmul(out, x, w, gathered=gathered)
        ways.append((adaptive.last_ran_serial(), adaptive.last_path()[1]))
        worst = max(worst, (out - gathered @ w.t()).abs().max().item())
    every_rank = MPI.COMM_WORLD.allgather(ways)
    adaptive.close()
    assert [serial for serial, _ in ways[:10]] == [i % 2 == 1 for i in range(10)]
    assert not any(decided for _, decided in ways[:10])
    assert all(decided for _, decided in ways[10:])
    assert all(theirs == ways for theirs in every_rank), "every rank takes the same way"
    assert worst < 1e-3

