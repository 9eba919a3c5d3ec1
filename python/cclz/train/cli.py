"""`python -m cclz.train [options]`: checks the command line on every rank before anything
starts, then starts torch.distributed and trains, once per policy named.

    mpirun -n 2 python -m cclz.train --preset tiny --tp 2 --policy all      # CPU ranks
    torchrun --nproc-per-node 4 -m cclz.train --preset 1.3b --tp 2 --pp 2 --policy all
    torchrun --nproc-per-node 4 -m cclz.train --preset 1.3b --tp 4 --policy none,tp-fp8 --out runs

Exit codes: 0 done, 2 a command line that cannot run (every rank exits with it; rank 0 says
why), 1 a failure during the run (the rank that failed prints it and ends the whole job, so no
rank is left waiting in a collective).
"""
import sys
import traceback

from . import launch
from .config import ConfigError, configs_from_args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    launcher, rank, world, local_rank, local_size = launch.launcher_env()
    try:
        configs = configs_from_args(argv, world)
        device, problem = launch.pick_device(configs[0].device, launcher, local_rank,
                                             local_size)
        if problem:
            raise ConfigError(problem)
    except ConfigError as e:
        if rank == 0:
            print(f"python -m cclz.train: error: {e}", file=sys.stderr, flush=True)
        return 2
    launch.cpu_threads(local_size)
    launch.init_distributed(launcher, rank, world, device)
    from .trainer import release_memory, run

    try:
        for cfg in configs:  # one after the other, each with its own groups and communicators
            run(cfg, device)
            release_memory(device)
    except Exception:  # noqa: BLE001 (any failure must end every rank, not only this one)
        print(f"python -m cclz.train: rank {rank} failed:", file=sys.stderr)
        traceback.print_exc()
        if world > 1:
            launch.abort(launcher, 1)
        return 1
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    return 0
