"""Where the ranks come from: mpirun (CPU ranks, MPI communicators for cclz) or torchrun (GPUs,
NCCL), and torch.distributed started over them. The rank and world size are read from the
launcher's environment before anything starts, so the configuration can be checked first."""
import os
import socket
import sys

import torch


def launcher_env():
    """(launcher, rank, world size, local rank, local size) from the environment: launcher is
    'mpirun', 'torchrun' or 'single'."""
    env = os.environ
    if "OMPI_COMM_WORLD_RANK" in env:
        return ("mpirun", int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"]),
                int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", 0)),
                int(env.get("OMPI_COMM_WORLD_LOCAL_SIZE", 1)))
    if "PMI_RANK" in env:  # MPICH's hydra
        return ("mpirun", int(env["PMI_RANK"]), int(env["PMI_SIZE"]),
                int(env.get("MPI_LOCALRANKID", 0)), int(env.get("MPI_LOCALNRANKS", 1)))
    if "RANK" in env and "WORLD_SIZE" in env:
        return ("torchrun", int(env["RANK"]), int(env["WORLD_SIZE"]),
                int(env.get("LOCAL_RANK", 0)), int(env.get("LOCAL_WORLD_SIZE", 1)))
    return ("single", 0, 1, 0, 1)


def pick_device(choice, launcher, local_rank, local_size):
    """The torch device of this rank, and a ConfigError-worthy message or None."""
    want_cuda = choice == "cuda" or (choice == "auto" and torch.cuda.is_available())
    if want_cuda:
        if not torch.cuda.is_available():
            return None, "--device cuda: torch sees no GPU"
        if local_size > torch.cuda.device_count():
            return None, (f"{local_size} ranks on this node but {torch.cuda.device_count()} "
                          "GPUs: launch one rank per GPU")
        return torch.device("cuda", local_rank), None
    if launcher == "torchrun":
        # cclz moves CPU tensors over MPI, which needs the ranks to be MPI processes.
        return None, ("CPU ranks need mpirun (cclz runs CPU tensors over MPI): "
                      "mpirun -n N python -m cclz.train ...")
    return torch.device("cpu"), None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_distributed(launcher, rank, world, device):
    """Starts torch.distributed (gloo on CPU, NCCL on GPUs) unless it is already running.
    Under mpirun, MASTER_ADDR defaults to 127.0.0.1 and MASTER_PORT to a free port that rank 0
    picks and sends to the others over MPI."""
    import torch.distributed as dist

    if dist.is_initialized():
        return
    if device.type == "cuda":
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    kwargs = {"device_id": device} if device.type == "cuda" else {}
    if launcher == "torchrun":  # its agent serves the store at MASTER_ADDR:MASTER_PORT
        dist.init_process_group(backend, init_method="env://", **kwargs)
        return
    addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = os.environ.get("MASTER_PORT")
    if port is None:
        if launcher == "mpirun":
            from mpi4py import MPI

            port = MPI.COMM_WORLD.bcast(_free_port() if rank == 0 else None, root=0)
        else:
            port = _free_port()
    dist.init_process_group(backend, init_method=f"tcp://{addr}:{port}", rank=rank,
                            world_size=world, **kwargs)


def cpu_threads(local_size):
    """Shares the node's cores among its ranks (torch would give each rank all of them, and
    ranks that share cores run small GEMMs several times slower); returns the count before."""
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, local_size)))
    return before


def abort(launcher, code=1):
    """Ends the whole job now: the other ranks may be waiting in a collective for this one, and a
    normal exit would wait for them in MPI_Finalize."""
    sys.stdout.flush()
    sys.stderr.flush()
    if launcher == "mpirun":
        try:
            from mpi4py import MPI

            MPI.COMM_WORLD.Abort(code)
        except ImportError:
            pass
    os._exit(code)
