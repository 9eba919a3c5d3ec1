"""The two bindings of the calls on a training step's path (cclz._capi): cclz._fastcall, the
module compiled against Python alone, and ctypes. The same calls through each give the same
bytes, for every op the module carries; the module refuses arguments that are not ints; and
where the build made it (CCLZ_REQUIRE_FASTCALL=1, set by the build's tests), the package found
it and calls through it."""
import os

import pytest
import torch

import cclz
from cclz import _capi
from conftest import DEVICE, rank_input

requires_fastcall = pytest.mark.skipif(_capi.fast_calls is None,
                                       reason="cclz._fastcall was not built for this Python")


def test_the_package_calls_through_the_module_the_build_made():
    if os.environ.get("CCLZ_REQUIRE_FASTCALL") != "1":
        pytest.skip("the build did not say whether it made cclz._fastcall")
    assert _capi.binding == "fastcall", "cclz._fastcall was built but the package did not load it"
    assert _capi.calls is _capi.fast_calls


def run_ops(comm, calls):
    """Every op of the hot calls through `calls`; their outputs (and a feedback residual's
    effect: the same call made twice with one state)."""
    kept, comm._calls = comm._calls, calls
    try:
        n, size, rank = 3072, comm.size, comm.rank  # 3072: whole rows of 256 per shard, 2-4 ranks
        x = rank_input(rank, n, torch.bfloat16, seed=7)
        outputs = []
        for codec in (None, cclz.Lossless(), cclz.Fp8(row_elems=256)):
            gathered = torch.empty(n * size, dtype=torch.bfloat16)
            comm.all_gather_into_tensor(gathered, x, codec=codec)
            shard = torch.empty(n // size, dtype=torch.bfloat16)
            comm.reduce_scatter_tensor(shard, x, codec=codec)
            reduced = x.clone()
            comm.all_reduce(reduced, codec=codec)
            exchanged = torch.empty_like(x)
            comm.all_to_all_single(exchanged, x, codec=codec)
            outputs += [gathered, shard, reduced, exchanged]
        g = rank_input(rank, n, torch.float32, seed=8)
        for op in ("all_reduce", "reduce_scatter"):
            feedback = cclz.Feedback(n, device=DEVICE.type == "cuda")
            for _ in range(2):  # the second call adds what the first dropped
                if op == "all_reduce":
                    out = g.clone()
                    comm.all_reduce(out, codec=cclz.Qgrad(4, feedback=feedback))
                else:
                    out = torch.empty(n // size, dtype=torch.float32)
                    comm.reduce_scatter_tensor(out, g, codec=cclz.Qgrad(4, feedback=feedback))
                outputs.append(out)
            feedback.close()
        if size > 1:  # a ring of sends: to the next rank, from the previous one
            received = torch.empty_like(x)
            nxt, prev = (rank + 1) % size, (rank - 1) % size
            for codec in (None, cclz.Lossless()):
                if rank % 2 == 0:
                    comm.send(x, nxt, codec=codec)
                    comm.recv(received, prev, codec=codec)
                else:
                    comm.recv(received, prev, codec=codec)
                    comm.send(x, nxt, codec=codec)
                outputs.append(received.clone())
        return outputs
    finally:
        comm._calls = kept


@requires_fastcall
def test_both_bindings_give_the_same_bytes(comm):
    through_ctypes = run_ops(comm, _capi.ctypes_calls)
    through_module = run_ops(comm, _capi.fast_calls)
    assert len(through_ctypes) == len(through_module)
    for i, (a, b) in enumerate(zip(through_ctypes, through_module)):
        assert torch.equal(a, b), f"output {i} differs between the bindings"


@requires_fastcall
def test_the_module_refuses_arguments_that_are_not_ints():
    fast = _capi.fast_calls
    with pytest.raises(TypeError):
        fast.cclzAllGather(1.5, None, 1, 9, None, None, None)
    with pytest.raises(TypeError):
        fast.cclzAllGather(None, None, 1, 9, None, None)  # one argument short
    with pytest.raises(OverflowError):
        fast.cclzAllGather(None, None, -1, 9, None, None, None)  # a size_t count
    with pytest.raises(OverflowError):
        fast.cclzSend(None, 1, 9, 2**40, None, None, None)  # an int peer


@requires_fastcall
def test_the_module_passes_the_librarys_refusals_through(comm):
    """A call the library refuses returns its code through either binding (here: a NULL
    communicator), and the package raises it as CclzError."""
    for calls in (_capi.ctypes_calls, _capi.fast_calls):
        assert calls.cclzAllGather(None, None, 1, 9, None, None, None) == 4  # invalid argument


@requires_fastcall
def test_a_blocked_call_lets_other_threads_run(comm):
    """The module releases the GIL around the library call, as ctypes does: while one rank's call
    waits for a late peer, the rank's other Python threads run. (CPU ranks: a host call blocks
    until its peers arrive.)"""
    import threading
    import time

    if DEVICE.type != "cpu" or comm.size < 2:
        pytest.skip("a host communicator of 2 or more ranks blocks until its peers call")
    x = torch.ones(1024)
    if comm.rank != 0:
        time.sleep(0.6)  # late: rank 0's call waits for this rank
        comm.all_reduce(x)
        return
    kept, comm._calls = comm._calls, _capi.fast_calls
    try:
        returned = []
        caller = threading.Thread(target=lambda: (comm.all_reduce(x),
                                                  returned.append(time.monotonic())))
        caller.start()
        time.sleep(0.1)  # the call waits for rank 1 by now, inside the library
        worked = time.monotonic()  # this thread runs: it holds the GIL now
        caller.join()
    finally:
        comm._calls = kept
    # Held by the waiting call, the GIL would have let this thread on only after it returned.
    assert worked < returned[0], "the main thread ran only once the blocked call had returned"


def test_a_fastcall_setting_other_than_0_or_1_is_refused(monkeypatch):
    """CCLZ_FASTCALL takes 1 (the default) or 0 (ctypes); anything else is refused, naming the
    variable, rather than guessed."""
    monkeypatch.setenv("CCLZ_FASTCALL", "yes")
    with pytest.raises(ImportError, match="CCLZ_FASTCALL=yes"):
        _capi._fast_calls()
    monkeypatch.setenv("CCLZ_FASTCALL", "0")
    assert _capi._fast_calls() is None
