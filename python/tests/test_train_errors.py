"""A command line that cannot run fails before any work, with the same clear message on every
rank (the checks use only the arguments and the world size, so no rank waits for another), and
`python -m cclz.train` exits 2 on every rank."""
import os
import tempfile

import pytest

from cclz.train import ConfigError, from_args
from cclz.train.cli import main


def bad_cases(n):
    """(arguments, the message's key words) for n ranks; the tiny preset has 4 heads, 4 layers,
    sequence 128, MLP 512, batch 16."""
    return [
        (["--tp", str(n + 1)], "does not divide the job's"),
        (["--tp", "2", "--pp", "2", "--dp", str(n)], "but the job has"),
        (["--tp", str(n), "--heads", str(n + 1), "--hidden", str(16 * (n + 1))],
         f"does not divide the model's {n + 1} attention heads"),
        (["--pp", str(n), "--layers", "5"], "does not divide the model's 5 layers"),
        (["--tp", str(n), "--seq-len", str(4 * n + 1), "--heads", str(n), "--hidden",
          str(16 * n)], "does not divide the sequence length"),
        (["--dp", str(n), "--batch", str(n + 1)], "is not a multiple of dp x micro-batches"),
        (["--policy", "tp-int3"], "invalid choice: 'tp-int3'"),
        (["--tp-codec", "qgrad4"], "qgrad is for data-parallel gradients"),
        (["--dp-codec", "zstd"], "expected one of"),
        (["--corpus", "/nonexistent/corpus", "--batch", str(4 * n)], "is not a folder"),
        (["--steps", "0"], "--steps must be at least 1"),
        (["--pp-codec", "auto", "--adaptive", "off", "--batch", str(4 * n)],
         "codec auto is the adaptive choice"),
    ]


@pytest.mark.parametrize("case", range(12))
def test_bad_command_line_is_a_clear_error_on_every_rank(comm, case):
    args, words = bad_cases(comm.size)[case]
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        from_args(args, comm.size)


def test_a_corpus_without_python_sources_is_refused(comm):
    with tempfile.TemporaryDirectory() as empty:
        with open(os.path.join(empty, "notes.txt"), "w") as f:
            f.write("not python")
        with pytest.raises(ConfigError, match="holds no .py files"):
            from_args(["--corpus", empty, "--batch", str(4 * comm.size)], comm.size)


def test_the_command_exits_2_on_every_rank_before_any_work(comm, capsys):
    """Under mpirun the launcher's environment gives the world size; nothing starts."""
    assert main(["--tp", str(comm.size + 1)]) == 2
    err = capsys.readouterr().err
    if comm.rank == 0:
        assert "error: tp x pp" in err and "does not divide" in err, err
    else:
        assert err == ""  # one message per job, not one per rank
    assert main(["--policy", "everything"]) == 2


def test_a_good_command_line_is_accepted(comm):
    cfg = from_args(["--policy", "all", "--dp-codec", "qgrad8", "--batch", str(4 * comm.size)],
                    comm.size)
    assert cfg.dp == comm.size and cfg.codec_names == {"tp": "fp8", "dp": "qgrad8", "pp": "fp8"}
