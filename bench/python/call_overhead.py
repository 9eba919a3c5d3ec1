"""The Python package's cost per call over the C API's: host time to queue an all-gather, calls
back to back, on one GPU per MPI rank, beside the same loop in C (c_call_loop.c) in the same run.

    bench/python/call_overhead.sh BUILD OUTDIR   (builds c_call_loop, runs both, merges)

For each size and codec: the median over ROUNDS of the host time per call of CALLS queued calls
(the GPU's work is drained between rounds, so the launch queue never backs up), through
Communicator.all_gather_into_tensor, through the raw ctypes function with its arguments built
once (what ctypes itself costs), and through C. The overhead is Python minus C.
"""
import argparse
import ctypes
import json
import statistics
import sys
import time

import torch
import torch.distributed as dist
from mpi4py import MPI

import cclz
from cclz.train.launch import init_distributed
from cclz import _capi


def init(world):
    device = torch.device("cuda", world.Get_rank() % torch.cuda.device_count())
    init_distributed("mpirun", world.Get_rank(), world.Get_size(), device)
    return cclz.Communicator.from_group(adaptive=False)


def per_call_us(world, issue, calls, rounds):
    times = []
    for round_ in range(rounds + 1):  # round 0 warms up
        world.Barrier()
        t0 = time.perf_counter()
        for _ in range(calls):
            issue()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        if round_:
            times.append((t1 - t0) / calls * 1e6)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="65536,1048576", help="bytes of bf16 per rank")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--json")
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    comm = init(world)
    rows = []
    for nbytes in (int(s) for s in args.sizes.split(",")):
        numel = nbytes // 2
        g = torch.Generator().manual_seed(world.Get_rank())
        x = torch.randn(numel, generator=g).to(torch.bfloat16).cuda()
        out = torch.empty(numel * comm.size, dtype=torch.bfloat16, device="cuda")
        for name, codec in (("none", None), ("fp8", cclz.Fp8(row_elems=1024))):
            python = per_call_us(world, lambda: comm.all_gather_into_tensor(out, x, codec=codec),
                                 args.calls, args.rounds)
            config = None if codec is None else ctypes.byref(codec.config())
            stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
            raw_args = (ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(out.data_ptr()), numel, 9,
                        comm.handle, config, stream)
            fn = _capi.lib.cclzAllGather
            raw = per_call_us(world, lambda: fn(*raw_args), args.calls, args.rounds)
            rows.append({"bytes": nbytes, "codec": name, "python_us": python, "ctypes_us": raw})
    comm.close()
    dist.destroy_process_group()
    if world.Get_rank() != 0:
        return
    print(json.dumps(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": " ".join(sys.argv), "ranks": world.Get_size(),
                       "device": torch.cuda.get_device_name(), "calls": args.calls,
                       "rounds": args.rounds, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
