"""cclz.pipeline.batch_send_recv: a stage boundary in both directions at once, on a ring of
ranks (each rank is the next stage of its left neighbour and the previous of its right one),
for plain data and every codec that send/recv takes."""
import pytest
import torch

import cclz
from cclz.pipeline import P2POp, batch_send_recv
from conftest import nmse, rank_input

CODECS = {
    "plain": None,
    "lossless": cclz.Lossless(),
    "fp8": cclz.Fp8(row_elems=256),
}


@pytest.mark.parametrize("codec_name", CODECS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_both_directions_on_a_ring(comm, codec_name, dtype):
    if comm.size < 2:
        pytest.skip("needs 2 ranks")
    codec = CODECS[codec_name]
    nxt, prv = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    numel = 256 * 9
    activation = rank_input(comm.rank, numel, dtype, seed=1)
    grad = rank_input(comm.rank, numel, dtype, seed=2)
    got_activation = torch.full((numel,), float("nan"), dtype=dtype)
    got_grad = torch.full((numel,), float("nan"), dtype=dtype)
    # The forward pass's activation goes to the next stage, the backward's gradient to the
    # previous one: listed in an order that would deadlock if run as written on every rank.
    batch_send_recv(comm, [P2POp("send", activation, nxt, codec),
                           P2POp("send", grad, prv, codec),
                           P2POp("recv", got_activation, prv, codec),
                           P2POp("recv", got_grad, nxt, codec)])
    want_activation = rank_input(prv, numel, dtype, seed=1)
    want_grad = rank_input(nxt, numel, dtype, seed=2)
    if codec_name == "fp8":
        assert nmse(got_activation, want_activation) < 1e-3
        assert nmse(got_grad, want_grad) < 1e-3
    else:
        assert torch.equal(got_activation, want_activation)
        assert torch.equal(got_grad, want_grad)


def test_several_tensors_to_one_peer_keep_their_order(comm):
    if comm.size < 2:
        pytest.skip("needs 2 ranks")
    peer = comm.rank ^ 1
    if peer >= comm.size:  # the odd rank out of an odd world takes no part
        return
    sent = [rank_input(comm.rank, 64 * (i + 1), torch.float32, seed=10 + i) for i in range(3)]
    got = [torch.empty(64 * (i + 1)) for i in range(3)]
    ops = [P2POp("recv", g, peer) for g in got] + [P2POp("send", s, peer) for s in sent]
    batch_send_recv(comm, ops)
    for i, g in enumerate(got):
        assert torch.equal(g, rank_input(peer, 64 * (i + 1), torch.float32, seed=10 + i))


def test_bad_operations_raise_before_anything_moves(comm):
    t = torch.zeros(8)
    with pytest.raises(ValueError, match="'send' or 'recv'"):
        P2POp("isend", t, 0)
    with pytest.raises(ValueError, match="peer"):
        batch_send_recv(comm, [P2POp("send", t, comm.rank)])
    with pytest.raises(ValueError, match="peer"):
        batch_send_recv(comm, [P2POp("recv", t, comm.size)])
    with pytest.raises(ValueError, match="P2POp"):
        batch_send_recv(comm, [("send", t, 0)])
