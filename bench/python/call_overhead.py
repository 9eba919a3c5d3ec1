"""The Python package's cost per call over the C API's: host time to queue an all-gather, calls
back to back, on one GPU per MPI rank, beside the same loop in C (c_call_loop.c) in each round.

    bench/python/call_overhead.sh BUILD OUTDIR   (builds c_call_loop.so, runs, writes tables)

For each size and codec, every round times CALLS queued calls in each way, one after the other
on the same communicator, tensors and stream (the GPU's work is drained after each, so the launch
queue never backs up): in C (c_call_loop.so's loop); the raw ctypes function and the raw
cclz._fastcall function with their arguments built once (what each binding itself costs); and
Communicator.all_gather_into_tensor through each binding (the package's default, _capi.binding,
and ctypes). Reported: the median over ROUNDS of each, and the medians of the per-round
differences against C (the overheads), which the host's drift from round to round does not move.
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


def init(world, device):
    """The communicator: over NCCL on one GPU per rank; on CPU ranks over MPI (a dry run of
    this script's logic: MPI's all-gather, not a GPU's queue, is what those calls time)."""
    if device == "cpu":
        return cclz.Communicator.from_mpi(world, adaptive=False)
    device = torch.device("cuda", world.Get_rank() % torch.cuda.device_count())
    init_distributed("mpirun", world.Get_rank(), world.Get_size(), device)
    return cclz.Communicator.from_group(adaptive=False)


def drain():
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


def timed_loop(world, fn, fn_args, calls):
    """Host microseconds per call of `calls` calls of fn(*fn_args), the GPU drained after them.
    The loop calls fn itself, as a user's code would (a lambda around it would add a Python
    frame per call to what is measured)."""
    world.Barrier()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(*fn_args)
    t1 = time.perf_counter()
    drain()
    return (t1 - t0) / calls * 1e6


def c_loop_us(world, c_loop, args, calls):
    """c_call_loop.so's own timing of `calls` calls, the GPU drained after them."""
    world.Barrier()
    us = c_loop(*args, calls)
    if us < 0:
        raise RuntimeError(f"c_call_loop: cclzAllGather failed: {_capi.last_error(args[3])}")
    drain()
    return us


def method_loop(world, comm, calls_binding, out, x, codec, calls):
    """timed_loop of the method, its hot calls through calls_binding (_capi.calls or
    _capi.ctypes_calls) for this round."""
    kept, comm._calls = comm._calls, calls_binding
    try:
        return timed_loop(world, comm.all_gather_into_tensor, (out, x, codec), calls)
    finally:
        comm._calls = kept


def paired_rounds(world, ways, rounds):
    """{way: [us per call, per round]}: each round runs every way once, in order; round 0 warms
    up and is dropped."""
    times = {name: [] for name in ways}
    for round_ in range(rounds + 1):
        for name, run in ways.items():
            us = run()
            if round_:
                times[name].append(us)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="65536,1048576", help="bytes of bf16 per rank")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--c-loop", required=True, help="c_call_loop.so")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--json")
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    comm = init(world, args.device)
    c_loop = ctypes.CDLL(args.c_loop).c_call_loop
    c_loop.restype = ctypes.c_double
    c_loop.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                       ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    rows = []
    for nbytes in (int(s) for s in args.sizes.split(",")):
        numel = nbytes // 2
        g = torch.Generator().manual_seed(world.Get_rank())
        x = torch.randn(numel, generator=g).to(torch.bfloat16).to(args.device)
        out = torch.empty(numel * comm.size, dtype=torch.bfloat16, device=args.device)
        for name, codec in (("none", None), ("fp8", cclz.Fp8(row_elems=1024))):
            config_struct = None if codec is None else codec.config()
            config = None if codec is None else ctypes.byref(config_struct)
            stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream
                                     if args.device == "cuda" else None)
            raw_args = (ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(out.data_ptr()), numel, 9,
                        comm.handle, config, stream)
            c_args = (x.data_ptr(), out.data_ptr(), numel, comm.handle,
                      None if codec is None else ctypes.addressof(config_struct),
                      stream.value)
            fn = _capi.lib.cclzAllGather
            ways = {
                "c": lambda: c_loop_us(world, c_loop, c_args, args.calls),
                "ctypes": lambda: timed_loop(world, fn, raw_args, args.calls),
                "python": lambda: method_loop(world, comm, _capi.calls, out, x, codec,
                                              args.calls),
                "python_ctypes": lambda: method_loop(world, comm, _capi.ctypes_calls, out, x,
                                                     codec, args.calls),
            }
            if _capi.fast_calls:
                int_args = (x.data_ptr(), out.data_ptr(), numel, 9, comm.handle.value,
                            c_args[4], stream.value)
                ways["fastcall"] = lambda: timed_loop(world, _capi.fast_calls.cclzAllGather,
                                                      int_args, args.calls)
            times = paired_rounds(world, ways, args.rounds)
            median = statistics.median
            row = {"bytes": nbytes, "codec": name, "binding": _capi.binding, "rounds_us": times}
            for way in ways:
                row[f"{way}_us"] = median(times[way])
                if way != "c":
                    row[f"{way}_overhead_us"] = median(
                        [t - c for t, c in zip(times[way], times["c"])])
            # The headline: the package's method, as a user calls it, over C.
            row["overhead_us"] = row["python_overhead_us"]
            rows.append(row)
    comm.close()
    if dist.is_initialized():
        dist.destroy_process_group()
    if world.Get_rank() != 0:
        return
    print(json.dumps(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": " ".join(sys.argv), "ranks": world.Get_size(),
                       "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu", "calls": args.calls,
                       "rounds": args.rounds, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
