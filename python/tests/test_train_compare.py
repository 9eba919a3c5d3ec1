"""A run's log (config header, one line per logged step, a summary) and `compare` on two of them:
the markdown table always, the PNG when matplotlib is installed."""
import json
import os
import shutil
import tempfile

import pytest
import torch
from mpi4py import MPI

from cclz.train import ModelConfig, TrainConfig, Trainer, launch
from cclz.train.compare import main as compare_main
from conftest import DEVICE


@pytest.fixture(autouse=True, scope="module")
def share_of_the_cores():
    """One rank's share of the cores, as `python -m cclz.train` sets it."""
    before = launch.cpu_threads(launch.launcher_env()[4])
    yield
    torch.set_num_threads(before)


def short_run(out, policy_codecs, n):
    # adaptive off: every call through its codec, on GPUs too (the test reads the wire bytes).
    cfg = TrainConfig(model=ModelConfig(layers=2, heads=4, hidden=64, seq_len=32), tp=1, pp=1,
                      dp=n, batch=4 * n, steps=6, log_every=3, eval_every=6, eval_batches=1,
                      codecs=tuple(policy_codecs.items()), out=out, quiet=True, adaptive="off")
    trainer = Trainer(cfg, DEVICE)
    try:
        trainer.run()
    finally:
        trainer.close()


def test_runs_log_and_compare(comm, world_group, monkeypatch):
    root = MPI.COMM_WORLD.bcast(tempfile.mkdtemp() if comm.rank == 0 else None, root=0)
    plain, compressed = os.path.join(root, "none"), os.path.join(root, "dp-qgrad")
    short_run(plain, {"tp": "none", "dp": "none", "pp": "none"}, comm.size)
    # Every CCLZ_ setting goes into the log's header (here the call check's default, set).
    monkeypatch.setenv("CCLZ_CHECK_CALLS", "deferred")
    short_run(compressed, {"tp": "none", "dp": "qgrad4", "pp": "none"}, comm.size)
    if comm.rank != 0:
        return  # only rank 0 writes logs
    try:
        with open(os.path.join(compressed, "log.jsonl")) as f:
            records = [json.loads(line) for line in f]
        assert [r["type"] for r in records] == ["config", "step", "step", "summary"]
        header, first, last = records[0], records[1], records[2]
        assert header["dp"] == comm.size and header["codecs"]["dp"] == "qgrad4"
        assert header["env"]["CCLZ_CHECK_CALLS"] == "deferred"
        assert all(header["env"].get(k) == v for k, v in os.environ.items()
                   if k.startswith("CCLZ_"))
        assert first["tokens"] == 3 * 4 * comm.size * 32 and "val_loss" in last
        # Compressed gradients: the int4 codec sends about a seventh of fp32's bytes.
        assert 0.1 < last["wire_sent_bytes"] / last["wire_raw_bytes"] < 0.2

        assert compare_main([plain, compressed, "--out", root]) == 0
        with open(os.path.join(root, "compare.md")) as f:
            table = f.read()
        assert "| none (tp=none dp=none pp=none) |" in table and "dp=qgrad4+fb" in table
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            pytest.skip("matplotlib is not installed: the table only")
        assert os.path.getsize(os.path.join(root, "compare.png")) > 10_000
    finally:
        shutil.rmtree(root)


def test_compare_refuses_what_is_not_a_run(capsys):
    with tempfile.TemporaryDirectory() as empty:
        assert compare_main([empty, empty]) == 2
    assert "no such run log" in capsys.readouterr().err
