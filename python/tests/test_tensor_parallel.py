"""Tensor/sequence-parallel layers against the single-process model: a two-layer MLP split over
the ranks (ColumnParallelLinear then RowParallelLinear) gives the full model's output and
gradients on each rank's slice, plain and lossless to fp32 summation order, fp8 within its error.
"""
import pytest
import torch

import cclz
from conftest import DEVICE, generator, nmse, randn

SEQ, BATCH, HIDDEN, FFN = 12, 2, 64, 192  # split over 2, 3 and 4 ranks


def full_model(seed=3):
    g = generator(seed)
    x = randn(SEQ, BATCH, HIDDEN, generator=g)
    w1 = randn(FFN, HIDDEN, generator=g) * 0.1
    w2 = randn(HIDDEN, FFN, generator=g) * 0.1
    probe = randn(SEQ, BATCH, HIDDEN, generator=g)  # the loss is <y, probe>
    return x, w1, w2, probe


def reference(x, w1, w2, probe):
    x, w1, w2 = (t.clone().requires_grad_() for t in (x, w1, w2))
    y = torch.nn.functional.gelu(x @ w1.t()) @ w2.t()
    (y * probe).sum().backward()
    return y.detach(), x.grad, w1.grad, w2.grad


@pytest.mark.parametrize("sequence_parallel,overlap", [(True, False), (False, False),
                                                       (True, True)], ids=["sp", "tp", "overlap"])
@pytest.mark.parametrize("codec", [None, cclz.Lossless(), cclz.Fp8()],
                         ids=["none", "lossless", "fp8"])
def test_mlp_matches_single_process(comm, codec, sequence_parallel, overlap):
    n, r = comm.size, comm.rank
    if SEQ % n or FFN % n:
        pytest.skip(f"the shapes do not split over {n} ranks")
    if overlap and isinstance(codec, cclz.Lossless):
        pytest.skip("the overlapped GEMMs take no codec or fp8")
    x, w1, w2, probe = full_model()
    y_ref, dx_ref, dw1_ref, dw2_ref = reference(x, w1, w2, probe)

    col = cclz.ColumnParallelLinear(HIDDEN, FFN, comm, bias=False,
                                    sequence_parallel=sequence_parallel, codec=codec,
                                    overlap=overlap)
    row = cclz.RowParallelLinear(FFN, HIDDEN, comm, bias=False,
                                 sequence_parallel=sequence_parallel, codec=codec,
                                 overlap=overlap)
    f = FFN // n
    with torch.no_grad():
        col.weight.copy_(w1[r * f:(r + 1) * f])
        row.weight.copy_(w2[:, r * f:(r + 1) * f])
    s = SEQ // n
    rows = slice(r * s, (r + 1) * s) if sequence_parallel else slice(None)
    x_in = x[rows].clone().requires_grad_()
    y = row(torch.nn.functional.gelu(col(x_in)))
    (y * probe[rows]).sum().backward()

    # Without sequence parallelism each rank's loss is the whole model's (Megatron's layout):
    # the replicated input's gradient is the all-reduce of the ranks' partial ones.
    pairs = [(y.detach(), y_ref[rows]), (x_in.grad, dx_ref[rows]),
             (col.weight.grad, dw1_ref[r * f:(r + 1) * f]),
             (row.weight.grad, dw2_ref[:, r * f:(r + 1) * f])]
    for got, want in pairs:
        if isinstance(codec, cclz.Fp8):
            assert nmse(got, want) < 2e-3
        else:
            assert torch.allclose(got, want, rtol=1e-4, atol=1e-5), (got - want).abs().max()


class _Recorder:
    """A communicator that notes which codec each collective was called with."""
    GATHERS = ("all_gather_into_tensor", "all_gather_matmul")
    REDUCTIONS = ("reduce_scatter_tensor", "all_reduce", "matmul_reduce_scatter")

    def __init__(self, comm):
        self._comm, self.calls = comm, []

    def __getattr__(self, name):
        method = getattr(self._comm, name)
        if name not in self.GATHERS + self.REDUCTIONS:
            return method

        def call(*args, codec=None, **kwargs):
            self.calls.append((name, codec))
            return method(*args, codec=codec, **kwargs)
        return call


@pytest.mark.parametrize("sequence_parallel,overlap", [(True, False), (False, False),
                                                       (True, True)], ids=["sp", "tp", "overlap"])
def test_layers_take_one_codec_for_gathers_another_for_reductions(comm, sequence_parallel,
                                                                   overlap):
    n, r = comm.size, comm.rank
    if SEQ % n or FFN % n:
        pytest.skip(f"the shapes do not split over {n} ranks")
    rec = _Recorder(comm)
    gather = cclz.Fp8(format="int8")
    col = cclz.ColumnParallelLinear(HIDDEN, FFN, rec, bias=False,
                                    sequence_parallel=sequence_parallel, codec=gather,
                                    reduce_codec=None, overlap=overlap)
    row = cclz.RowParallelLinear(FFN, HIDDEN, rec, bias=False,
                                 sequence_parallel=sequence_parallel, codec=gather,
                                 reduce_codec=None, overlap=overlap)
    x, _, _, probe = full_model()
    s = SEQ // n
    rows = slice(r * s, (r + 1) * s) if sequence_parallel else slice(None)
    x_in = x[rows].clone().requires_grad_()
    (row(torch.nn.functional.gelu(col(x_in))) * probe[rows]).sum().backward()

    gathers = [c for name, c in rec.calls if name in _Recorder.GATHERS]
    reductions = [c for name, c in rec.calls if name in _Recorder.REDUCTIONS]
    # Forward and backward: two gathers and two reductions with sequence parallelism (the
    # non-sequence-parallel layout gathers nothing: its input is replicated).
    assert len(reductions) == 2 and len(gathers) == (2 if sequence_parallel else 0), rec.calls
    assert all(isinstance(c, cclz.Fp8) and c.format == "int8" for c in gathers), rec.calls
    assert all(c is None for c in reductions), rec.calls
    # The default: the reductions take the gathers' codec.
    assert cclz.RowParallelLinear(FFN, HIDDEN, comm, codec=gather).reduce_codec is gather


def test_gather_backward_sums_every_ranks_gradient(comm):
    """gather_from_sequence_parallel's backward is the reduce-scatter of the ranks' gradients."""
    n, r = comm.size, comm.rank
    x = (torch.arange(4 * 64, dtype=torch.float32).reshape(4, 64) + 1000 * r).requires_grad_()
    y = cclz.gather_from_sequence_parallel(x, comm, codec=cclz.Lossless())
    probes = [torch.full((4 * n, 64), float(p + 1)) for p in range(n)]
    (y * probes[r]).sum().backward()
    want_y = torch.cat([torch.arange(4 * 64, dtype=torch.float32).reshape(4, 64) + 1000 * p
                        for p in range(n)])
    assert torch.equal(y.detach(), want_y)
    assert torch.equal(x.grad, torch.full((4, 64), float(sum(range(1, n + 1)))))


def test_layers_refuse_shapes_that_do_not_split(comm):
    if comm.size == 1:
        pytest.skip("one rank splits anything")
    with pytest.raises(ValueError, match="multiple of the tensor-parallel size"):
        cclz.ColumnParallelLinear(8, comm.size * 3 + 1, comm)
    with pytest.raises(ValueError, match="multiple of the tensor-parallel size"):
        cclz.RowParallelLinear(comm.size * 3 + 1, 8, comm)


def test_policy_defaults():
    p = cclz.Policy.default()
    assert isinstance(p.tp, cclz.Fp8) and p.tp.format == "int8" and isinstance(p.pp, cclz.Lossless)
    assert isinstance(p.dp, cclz.Qgrad) and p.dp.bits == 4 and p.dp.feedback is True
    assert cclz.Policy.none() == cclz.Policy(None, None, None)
    assert p.tp_reduce_codec is p.tp
    assert cclz.Policy(tp=p.tp, tp_reduce=None).tp_reduce_codec is None


def test_policy_feedback_request_is_not_a_state(comm):
    with pytest.raises(ValueError, match="state per gradient bucket"):
        comm.all_reduce(torch.zeros(8), codec=cclz.Policy.default().dp)


def test_overlapped_column_keeps_the_autocast_dtype(comm):
    """Under bf16 autocast the overlapped ColumnParallelLinear returns bf16, as F.linear does
    (its fp32 bias added in the output's dtype): otherwise the next layer's GEMM and its traffic
    would run in fp32."""
    n = comm.size
    if SEQ % n or FFN % n:
        pytest.skip(f"the shapes do not split over {n} ranks")
    device = torch.device(DEVICE)
    outputs = []
    for overlap in (False, True):
        col = cclz.ColumnParallelLinear(HIDDEN, FFN, comm, sequence_parallel=True,
                                        overlap=overlap, device=device)
        x = torch.randn(SEQ // n, 1, HIDDEN, device=device)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            outputs.append(col(x.to(torch.bfloat16)))
    assert outputs[0].dtype == torch.bfloat16
    assert outputs[1].dtype == outputs[0].dtype


def test_overlapped_column_adds_its_bias_in_the_gemm(comm):
    """The overlapped ColumnParallelLinear takes its bias into the GEMMs' epilogue: its output and
    every gradient (input, weight, bias) equal the plain layer's, with the same weight and a
    bias that is not zero."""
    n, r = comm.size, comm.rank
    if SEQ % n or FFN % n:
        pytest.skip(f"the shapes do not split over {n} ranks")
    x, w1, _, _ = full_model()
    g = generator(7)
    bias = randn(FFN, generator=g)
    probe = randn(SEQ, BATCH, FFN // n, generator=g)
    f, s = FFN // n, SEQ // n
    results = []
    for overlap in (False, True):
        col = cclz.ColumnParallelLinear(HIDDEN, FFN, comm, sequence_parallel=True,
                                        overlap=overlap)
        with torch.no_grad():
            col.weight.copy_(w1[r * f:(r + 1) * f])
            col.bias.copy_(bias[r * f:(r + 1) * f])
        x_in = x[r * s:(r + 1) * s].clone().requires_grad_()
        y = col(x_in)
        (y * probe).sum().backward()
        results.append((y.detach(), x_in.grad, col.weight.grad, col.bias.grad))
    assert results[0][3].abs().max() > 0, "the bias must have a gradient to compare"
    for got, want in zip(results[1], results[0]):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-5), (got - want).abs().max()
