"""A command line that cannot run fails before any work, with the same clear message on every
rank (the checks use only the arguments and the world size, so no rank waits for another), and
`python -m cclz.train` exits 2 on every rank."""
import os
import tempfile

import pytest

from cclz.train import ConfigError, from_args
from cclz.train.cli import main
from cclz.train.config import configs_from_args
from cclz.train.data import Corpus, is_validation
from cclz.train.policy import make_policy


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
        (["--policy", "none,tp-int3"], "invalid choice: 'tp-int3'"),
        (["--policy", "all,all"], "names a policy twice"),
        (["--tp-codec", "qgrad4"], "qgrad is for data-parallel gradients"),
        (["--dp-codec", "zstd"], "expected one of"),
        (["--corpus", "/nonexistent/corpus", "--batch", str(4 * n)], "is not a folder"),
        (["--steps", "0"], "--steps must be at least 1"),
        (["--pp-codec", "auto", "--adaptive", "off", "--batch", str(4 * n)],
         "codec auto is the adaptive choice"),
        (["--overlap", "--batch", str(4 * n)], "it needs --tp 2 or more"),
        (["--overlap", "--tp-codec", "lossless", "--batch", str(4 * n)],
         "move plain or fp8 data, not lossless"),
    ]


@pytest.mark.parametrize("case", range(16))
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
    assert cfg.dp == comm.size and \
        cfg.codec_names == {"tp": "fp8-int8", "tp_reduce": "fp8-int8", "dp": "qgrad8",
                            "pp": "fp8-int8"}
    split = from_args(["--policy", "all", "--tp-codec", "fp8", "--tp-reduce-codec", "none",
                       "--batch", str(4 * comm.size)], comm.size)
    assert (split.codec_names["tp"], split.codec_names["tp_reduce"]) == ("fp8", "none")
    assert make_policy(split.codec_names, 64).tp_reduce is None
    with pytest.raises(ConfigError, match="--tp-reduce-codec qgrad4: qgrad is for"):
        from_args(["--tp-reduce-codec", "qgrad4"], comm.size)


def test_several_policies_are_runs_of_the_same_tokens(comm):
    args = ["--policy", "none,all", "--batch", str(4 * comm.size), "--steps", "7"]
    none, every = configs_from_args(args + ["--out", "runs/x"], comm.size)
    assert (none.policy_name, every.policy_name) == ("none", "all")
    assert (none.out, every.out) == (os.path.join("runs/x", "none"), os.path.join("runs/x", "all"))
    assert none.codec_names == {"tp": "none", "tp_reduce": "none", "dp": "none", "pp": "none"}
    assert every.codec_names == {"tp": "fp8-int8", "tp_reduce": "fp8-int8", "dp": "qgrad4",
                                 "pp": "fp8-int8"}
    assert dataclass_without(none, "codecs", "policy_name", "out") == \
        dataclass_without(every, "codecs", "policy_name", "out")
    with pytest.raises(ConfigError, match="several policies"):
        from_args(args, comm.size)
    assert from_args(["--policy", "all", "--batch", str(4 * comm.size), "--out", "a"],
                     comm.size).out == "a"


def dataclass_without(cfg, *names):
    d = cfg.to_dict()
    for name in names:
        d.pop(name)
    return d


def write_corpus(folder, sizes):
    """Python files of the given sizes (bytes) named f0.py, f1.py, ...; returns their names."""
    names = []
    for i, size in enumerate(sizes):
        names.append(f"f{i}.py")
        with open(os.path.join(folder, names[-1]), "w") as f:
            f.write(("x = 1  # padding\n" * (size // 16 + 1))[:size])
    return names


def test_a_small_corpus_still_has_a_validation_split(comm):
    """Files whose paths all hash into train: the next ones in hash order move to validation
    until it holds at least one sequence (and its fraction of the corpus, up to 64 KiB)."""
    with tempfile.TemporaryDirectory() as folder:
        names = write_corpus(folder, [3000] * 8)
        assert not any(is_validation(n, 0.05) for n in names)  # the hash alone: none
        corpus = Corpus(folder, 0.05, seq_len=128)
        assert 129 <= len(corpus.val) <= 3000 and len(corpus.train) == 7 * 3000
        # The windows of an evaluation fit the split.
        (inputs, targets), = corpus.val_batches(1, 4, 128)
        assert inputs.shape == (4, 128) and int(inputs.max()) < 128


def test_a_corpus_too_small_for_one_sequence_is_refused(comm):
    with tempfile.TemporaryDirectory() as folder:
        write_corpus(folder, [100, 100])  # the tiny preset: 128 tokens
        with pytest.raises(ConfigError, match="fewer than one sequence"):
            from_args(["--corpus", folder, "--batch", str(4 * comm.size)], comm.size)
