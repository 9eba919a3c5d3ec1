"""Every op x dtype x codec against the result computed here from every rank's input: exact for
plain data and the lossless codec, within the codec's bound for fp8 and qgrad."""
import pytest
import torch

import cclz
from conftest import nmse, rank_input

FLOATS = [torch.bfloat16, torch.float16, torch.float32]
NUMELS = [1, 7, 4097, 100003]
# NMSE bounds on Gaussian data: fp8 E4M3 with dual scales ~4e-4 (docs/formats.md); qgrad int4 at
# blocks of 64 ~1e-2 per quantization, and an all-reduce quantizes twice (its reduce-scatter's
# inputs, then its all-gather's): 0.023 measured on 2 ranks.
FP8_NMSE = 1e-3
QGRAD4_NMSE = 5e-2


def reduced(comm, numel, dtype, op):
    """What cclz's compressed reductions compute: the fp32 sum in rank order, rounded once."""
    acc = torch.zeros(numel, dtype=torch.float32)
    for r in range(comm.size):
        acc += rank_input(r, numel, dtype).float()
    if op == "avg":
        acc /= comm.size
    return acc.to(dtype)


@pytest.mark.parametrize("numel", NUMELS)
@pytest.mark.parametrize("dtype", FLOATS + [torch.int32])
@pytest.mark.parametrize("codec", [None, cclz.Lossless()], ids=["none", "lossless"])
def test_all_gather_exact(comm, codec, dtype, numel):
    if codec is not None and not dtype.is_floating_point:
        pytest.skip("the lossless codec takes floating-point dtypes")
    x = rank_input(comm.rank, numel, dtype)
    out = torch.empty(numel * comm.size, dtype=dtype)
    comm.all_gather_into_tensor(out, x, codec=codec)
    want = torch.cat([rank_input(r, numel, dtype) for r in range(comm.size)])
    assert torch.equal(out, want)


@pytest.mark.parametrize("dtype", FLOATS)
def test_all_gather_fp8_within_bound(comm, dtype):
    numel = 64 * 1024
    x = rank_input(comm.rank, numel, dtype)
    out = torch.empty(numel * comm.size, dtype=dtype)
    comm.all_gather_into_tensor(out, x, codec=cclz.Fp8(row_elems=1024))
    want = torch.cat([rank_input(r, numel, dtype) for r in range(comm.size)])
    assert nmse(out, want) < FP8_NMSE


@pytest.mark.parametrize("op", ["sum", "avg"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("numel", [1, 4097, 100003])
def test_reduce_scatter_lossless_exact(comm, numel, dtype, op):
    x = rank_input(comm.rank, numel * comm.size, dtype)
    out = torch.empty(numel, dtype=dtype)
    comm.reduce_scatter_tensor(out, x, op=op, codec=cclz.Lossless())
    want = reduced(comm, numel * comm.size, dtype, op)[comm.rank * numel:(comm.rank + 1) * numel]
    assert torch.equal(out, want)


@pytest.mark.parametrize("op", ["sum", "avg"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_reduce_scatter_plain_matches_torch(comm, dtype, op):
    numel = 1000
    x = rank_input(comm.rank, numel * comm.size, dtype)
    out = torch.empty(numel, dtype=dtype)
    comm.reduce_scatter_tensor(out, x, op=op)
    total = sum(rank_input(r, numel * comm.size, dtype).double() for r in range(comm.size))
    if op == "avg":
        total /= comm.size
    want = total[comm.rank * numel:(comm.rank + 1) * numel]
    # The network's own reduction rounds to the dtype at each step, in its own order.
    tol = {torch.bfloat16: 2e-2, torch.float16: 2e-3, torch.float32: 1e-5}[dtype]
    assert torch.allclose(out.double(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("numel", [7, 4097, 100003])
def test_all_reduce_lossless_exact_and_alike(comm, numel, dtype):
    t = rank_input(comm.rank, numel, dtype)
    comm.all_reduce(t, op="sum", codec=cclz.Lossless())
    everyone = torch.empty(numel * comm.size, dtype=dtype)
    comm.all_gather_into_tensor(everyone, t)
    assert torch.equal(t, reduced(comm, numel, dtype, "sum"))
    assert all(torch.equal(everyone[r * numel:(r + 1) * numel], t) for r in range(comm.size))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_all_reduce_qgrad_within_bound_and_alike(comm, dtype):
    numel = 64 * 1024
    t = rank_input(comm.rank, numel, dtype)
    comm.all_reduce(t, op="avg", codec=cclz.Qgrad(4))
    everyone = torch.empty(numel * comm.size, dtype=dtype)
    comm.all_gather_into_tensor(everyone, t)
    assert nmse(t, reduced(comm, numel, dtype, "avg")) < QGRAD4_NMSE
    assert all(torch.equal(everyone[r * numel:(r + 1) * numel], t) for r in range(comm.size))


@pytest.mark.parametrize("residual", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_qgrad_error_feedback_keeps_what_it_drops(comm, residual):
    """Summed over steps, all-reduces with error feedback track the exact sum far better than
    without: what one call drops, the next one sends, with an fp32 or a bf16 residual."""
    numel, steps = 4096, 20
    grad = rank_input(comm.rank, numel, torch.float32, seed=7)
    feedback = cclz.Feedback(numel, device=comm.device, dtype=residual)
    sums = {True: torch.zeros(numel, dtype=torch.float64), False: torch.zeros(numel,
                                                                            dtype=torch.float64)}
    for with_feedback in (True, False):
        codec = cclz.Qgrad(2, feedback=feedback if with_feedback else None)
        for _ in range(steps):
            t = grad.clone()
            comm.all_reduce(t, op="sum", codec=codec)
            sums[with_feedback] += t.double()
    feedback.close()
    exact = steps * sum(rank_input(r, numel, torch.float32, seed=7).double()
                        for r in range(comm.size))
    assert nmse(sums[True], exact) < 0.1 * nmse(sums[False], exact)


@pytest.mark.parametrize("codec", [None, cclz.Lossless()], ids=["none", "lossless"])
def test_all_to_all_exact(comm, codec):
    block = 1000
    x = rank_input(comm.rank, block * comm.size, torch.bfloat16)
    out = torch.empty_like(x)
    comm.all_to_all_single(out, x, codec=codec)
    want = torch.cat([rank_input(p, block * comm.size, torch.bfloat16)
                      [comm.rank * block:(comm.rank + 1) * block] for p in range(comm.size)])
    assert torch.equal(out, want)


@pytest.mark.parametrize("codec", [None, cclz.Lossless()], ids=["none", "lossless"])
def test_send_recv_ring_exact(comm, codec):
    numel = 5000
    nxt, prev = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    x = rank_input(comm.rank, numel, torch.float16)
    got = torch.empty_like(x)
    # Even ranks send first, odd ranks receive first: a ring without a cycle of waiting sends.
    for step in ((comm.send, x, nxt), (comm.recv, got, prev))[::1 if comm.rank % 2 == 0 else -1]:
        fn, tensor, peer = step
        fn(tensor, peer, codec=codec)
    assert torch.equal(got, rank_input(prev, numel, torch.float16))


@pytest.fixture(scope="module")
def adaptive_comm(comm, world_group):
    """A second communicator over the same ranks, adaptive (the library's default)."""
    if comm.device.type == "cuda":
        c = cclz.Communicator.from_group(world_group, device=comm.device, adaptive=True)
    else:
        c = cclz.Communicator.from_mpi(adaptive=True)
    yield c
    c.close()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.int32])
def test_auto_is_exact_through_the_trials_and_after(adaptive_comm, dtype):
    """codec='auto': the lossless codec or plain data, whichever the trials found faster; the
    first calls of a kind alternate between both, later ones take the choice. Every call is
    exact, and the last one reports a settled path."""
    c, numel = adaptive_comm, 70001
    for call in range(14):  # a kind below 2 MiB a rank: 12 trial calls, then settled ones
        x = rank_input(c.rank, numel, dtype, seed=call)
        out = torch.empty(numel * c.size, dtype=dtype)
        c.all_gather_into_tensor(out, x, codec="auto")
        want = torch.cat([rank_input(r, numel, dtype, seed=call) for r in range(c.size)])
        assert torch.equal(out, want), call
    if dtype.is_floating_point:
        assert c.last_path()[1], "14 calls of one kind settle the choice"


def test_auto_needs_an_adaptive_communicator(comm):
    x = torch.zeros(8)
    with pytest.raises(ValueError, match="adaptive=False"):
        comm.all_gather_into_tensor(torch.zeros(8 * comm.size), x, codec="auto")
    with pytest.raises(ValueError, match="'auto'"):
        comm.all_reduce(x, codec="fast")
