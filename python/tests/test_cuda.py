"""What only a GPU shows: calls ordered on the current CUDA stream (no host synchronization on
the data path), and collectives captured into a CUDA graph and replayed, bit-identical to the
same calls made directly. Run with CCLZ_TEST_DEVICE=cuda (one GPU per MPI rank)."""
import pytest
import torch

import cclz
from conftest import requires_cuda, rank_input

pytestmark = requires_cuda

NUMEL = 64 * 1024


def run_ops(comm, codec, x, gathered, reduced):
    """An all-gather of x, then an all-reduce (sum) of x's copy in reduced."""
    ag_codec = None if isinstance(codec, cclz.Qgrad) else codec
    comm.all_gather_into_tensor(gathered, x, codec=ag_codec)
    reduced.copy_(x)
    rs_codec = None if isinstance(codec, cclz.Fp8) else codec
    comm.all_reduce(reduced, codec=rs_codec)


@pytest.mark.parametrize("codec", [None, cclz.Fp8(row_elems=1024), cclz.Qgrad(4)],
                         ids=["none", "fp8", "qgrad4"])
def test_graph_replay_equals_direct_calls(comm, codec):
    x = rank_input(comm.rank, NUMEL, torch.bfloat16)
    gathered = torch.empty(NUMEL * comm.size, dtype=torch.bfloat16)
    reduced = torch.empty(NUMEL, dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture, as torch asks
        run_ops(comm, codec, x, gathered, reduced)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run_ops(comm, codec, x, gathered, reduced)
    for seed in (1, 2, 3):
        x.copy_(rank_input(comm.rank, NUMEL, torch.bfloat16, seed=seed))
        graph.replay()
        want_gathered, want_reduced = torch.empty_like(gathered), torch.empty_like(reduced)
        run_ops(comm, codec, x, want_gathered, want_reduced)
        torch.cuda.synchronize()
        assert torch.equal(gathered, want_gathered), seed
        assert torch.equal(reduced, want_reduced), seed


def test_calls_are_ordered_on_the_current_stream(comm):
    """The input is written by a kernel queued just before the call on a side stream, and the
    output read right after it on the same stream: no synchronization in between."""
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for seed in range(4):
            x = rank_input(comm.rank, 1 << 20, torch.float32, seed=seed) * 2  # on side
            out = torch.empty((1 << 20) * comm.size)
            comm.all_gather_into_tensor(out, x, codec=cclz.Lossless())
            total = out.view(comm.size, -1).sum(0)  # on side, after the call
            want = sum(rank_input(r, 1 << 20, torch.float32, seed=seed) * 2
                       for r in range(comm.size))
            assert torch.allclose(total, want, rtol=1e-5, atol=1e-5)


def test_lossless_capture_is_refused_with_the_reason(comm):
    """Lossless frames over NCCL vary in size and their sizes go through the host, which a
    graph cannot wait for (docs/collectives.md, "CUDA graphs")."""
    x = rank_input(comm.rank, NUMEL, torch.bfloat16)
    gathered = torch.empty(NUMEL * comm.size, dtype=torch.bfloat16)
    comm.all_gather_into_tensor(gathered, x, codec=cclz.Lossless())  # warm-up
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(cclz.CclzError, match="CUDA graph"):
        with torch.cuda.graph(graph):
            comm.all_gather_into_tensor(gathered, x, codec=cclz.Lossless())
