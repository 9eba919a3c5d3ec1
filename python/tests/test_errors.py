"""Bad input raises a clear error on every rank and leaves the tensors unchanged; arguments that
differ across ranks fail on every rank instead of hanging."""
import ctypes

import pytest
import torch

import cclz
from conftest import rank_input


def test_non_contiguous_raises_and_keeps_tensors(comm):
    x = rank_input(comm.rank, 64, torch.float32).reshape(8, 8).t()
    before = x.clone()
    out = torch.full((64 * comm.size,), 5.0)
    with pytest.raises(ValueError, match="contiguous"):
        comm.all_gather_into_tensor(out, x)
    assert torch.equal(x, before) and torch.all(out == 5.0)


def test_wrong_sizes_raise(comm):
    x = torch.zeros(10)
    with pytest.raises(ValueError, match="expected"):
        comm.all_gather_into_tensor(torch.zeros(10 * comm.size + 1), x)
    with pytest.raises(ValueError, match="expected"):
        comm.reduce_scatter_tensor(torch.zeros(3), x)


def test_unsupported_dtype_and_device_raise(comm):
    with pytest.raises(ValueError, match="dtype"):
        comm.all_reduce(torch.zeros(4, dtype=torch.complex64))
    with pytest.raises(ValueError, match="dtypes"):
        comm.all_gather_into_tensor(torch.zeros(4 * comm.size, dtype=torch.float16),
                                    torch.zeros(4))
    elsewhere = "cpu" if comm.device.type == "cuda" else ("cuda" if torch.cuda.is_available()
                                                          else "meta")
    with pytest.raises(ValueError, match="communicator is on"):
        comm.all_reduce(torch.zeros(4, device=elsewhere))


def test_codec_refusing_dtype_fails_on_every_rank(fresh_comm):
    comm = fresh_comm
    t = torch.arange(16, dtype=torch.int32)
    before = t.clone()
    with pytest.raises(cclz.CclzError) as info:
        comm.all_reduce(t, codec=cclz.Lossless())
    assert info.value.code in (4, 5, 7)  # invalid argument / usage, not supported
    assert torch.equal(t, before)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32])
def test_reductions_refuse_other_dtypes_everywhere(fresh_comm, dtype):
    comm = fresh_comm
    t = torch.ones(16, dtype=dtype)
    with pytest.raises(cclz.CclzError, match="bf16, fp16 or fp32") as info:
        comm.all_reduce(t)
    assert info.value.code == 7  # cclzNotSupported
    assert torch.equal(t, torch.ones(16, dtype=dtype))


def test_counts_differing_across_ranks_fail_everywhere(fresh_comm):
    comm = fresh_comm
    numel = 100 + comm.rank  # every rank a different count
    x = torch.ones(numel, dtype=torch.bfloat16)
    out = torch.empty(numel * comm.size, dtype=torch.bfloat16)
    with pytest.raises(cclz.CclzError, match="count"):
        comm.all_gather_into_tensor(out, x, codec=cclz.Lossless())


def test_codecs_differing_across_ranks_fail_everywhere(fresh_comm):
    comm = fresh_comm
    codec = cclz.Lossless() if comm.rank == 0 else cclz.Fp8(row_elems=64)
    x = torch.ones(4096, dtype=torch.bfloat16)
    out = torch.empty(4096 * comm.size, dtype=torch.bfloat16)
    with pytest.raises(cclz.CclzError):
        comm.all_gather_into_tensor(out, x, codec=codec)


def test_bad_codec_parameters_raise(fresh_comm):
    comm = fresh_comm
    with pytest.raises(ValueError, match="format"):
        comm.all_reduce(torch.zeros(64), codec=cclz.Fp8(format="e3m4"))
    with pytest.raises(cclz.CclzError, match="chunkElems"):
        comm.all_gather_into_tensor(torch.zeros(64 * comm.size, dtype=torch.bfloat16),
                                    torch.zeros(64, dtype=torch.bfloat16),
                                    codec=cclz.Lossless(chunk_elems=1000))


def test_feedback_residual_dtype_must_be_fp32_or_bf16(comm):
    with pytest.raises(ValueError, match="not a residual's"):
        cclz.Feedback(10, device=comm.device, dtype=torch.float16)


def test_feedback_of_the_wrong_size_raises(comm):
    fb = cclz.Feedback(10, device=comm.device)
    with pytest.raises(ValueError, match="feedback holds 10"):
        comm.all_reduce(torch.zeros(11), codec=cclz.Qgrad(4, feedback=fb))
    with pytest.raises(ValueError, match="reductions"):
        comm.all_gather_into_tensor(torch.zeros(10 * comm.size), torch.zeros(10),
                                    codec=cclz.Qgrad(4, feedback=fb))
    fb.close()
    with pytest.raises(ValueError, match="after close"):
        comm.all_reduce(torch.zeros(10), codec=cclz.Qgrad(4, feedback=fb))


def test_closed_communicator_raises():
    c = cclz.Communicator.from_mpi()  # a host communicator on every device: closing is the same
    c.close()
    c.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        c.all_reduce(torch.zeros(4))


def test_error_carries_code_and_message():
    with pytest.raises(cclz.CclzError) as info:
        from cclz import _capi
        _capi.check("cclzCommCount", None, ctypes.byref(ctypes.c_int()))
    assert info.value.code == 4 and "NULL" in info.value.message


def test_nan_in_a_qgrad_gradient_is_reported_not_hidden(fresh_comm):
    """qgrad's NaN policy (docs/formats.md, qgrad, "NaN and Inf"): the block goes as NaN, so the
    sum is NaN on every rank, and the rank whose input held it gets CclzError (from the call on
    CPUs, from check_async_error once the GPU ran it). No rank waits."""
    comm = fresh_comm
    t = torch.ones(4096)
    if comm.rank == 0:
        t[5] = float("nan")
    raised = None
    try:
        comm.all_reduce(t, codec=cclz.Qgrad(4))
        if comm.device.type == "cuda":  # found by the GPU's encode, after the call returned
            torch.cuda.synchronize()
            comm.check_async_error()
    except cclz.CclzError as e:
        raised = e
    if comm.rank == 0:
        assert raised is not None and raised.code == 4 and "NaN" in raised.message
    else:
        assert raised is None
    assert torch.isnan(t[:64]).all()  # the NaN block, on every rank


def test_lossless_carries_nan_and_inf_bit_exactly(comm):
    x = torch.ones(4096, dtype=torch.bfloat16) * (comm.rank + 1)
    x[3], x[7], x[11] = float("inf"), float("-inf"), float("nan")
    out = torch.empty(4096 * comm.size, dtype=torch.bfloat16)
    comm.all_gather_into_tensor(out, x, codec=cclz.Lossless())
    mine = out[comm.rank * 4096:(comm.rank + 1) * 4096]
    assert torch.equal(mine.view(torch.int16), x.view(torch.int16))
