"""Tensor-parallel GEMMs with their communication, side by side in one run (issue 37's
benchmark; docs/overlap.md): per shape, the GEMM alone, the communication alone, serial GEMM +
NCCL (torch), PyTorch's fused ops (symmetric memory), cclz's overlapped GEMM plain and with fp8,
and with fp8 on an adaptive communicator (docs/overlap.md, "Adaptive calls": overlapped or serial,
whichever its first calls measured faster; the way it settled on is in the row).

    mpirun -n 2 python3 bench/python/overlap_gemm.py --json out.json     (one GPU per rank)

Shapes are per rank at TP = ranks, bf16: the column-parallel all-gather + GEMM (the gathered
sequence times a weight shard of ffn / ranks rows) and the row-parallel GEMM + reduce-scatter
(the sequence times a shard of ffn / ranks columns, reduce-scattered along the sequence), for
Llama-3-70B (hidden 8192, ffn 28672) and GPT-3-175B (hidden 12288, ffn 49152), and a count of
tokens. Times are CUDA events around ITERS back-to-back calls after WARMUP, the median of ROUNDS.
Overlap efficiency = 1 - (overlapped - max(gemm, comm)) / min(gemm, comm): 1 when the shorter
of the two is entirely hidden, 0 when nothing is.
"""
import argparse
import json
import statistics
import sys

import torch
import torch.distributed as dist

import cclz
from cclz.train.launch import init_distributed, launcher_env

MODELS = {"llama3-70b": (8192, 28672), "gpt3-175b": (12288, 49152)}


def timed(fn, iters, warmup, rounds):
    """Median milliseconds per call of fn over rounds of iters calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / iters)
    return statistics.median(times)


def settle(comm, fn):
    """Makes fn's calls until their kind is settled on the adaptive comm (its trials, then the
    verdict); returns the way it settled on."""
    for _ in range(64):
        fn()
        if comm.last_path()[1]:
            break
    torch.cuda.synchronize()
    return "serial" if comm.last_ran_serial() else "overlapped"


# In each row cclz's calls come before torch's fused op: once torch has set up its symmetric
# memory in the process, NCCL refused the device communicator of cclz's copy-engine path (GIN
# not supported, CCLZ_OVERLAP_COPY=ce; bench/results/overlap-copy-engine-2xh200).
def torch_fused(kind, group_name):
    """PyTorch's fused op for kind ('ag_gemm' or 'gemm_rs'), or (None, reason)."""
    try:
        import torch.distributed._symmetric_memory as symm_mem
        if hasattr(symm_mem, "enable_symm_mem_for_group"):
            symm_mem.enable_symm_mem_for_group(group_name)
        op = torch.ops.symm_mem.fused_all_gather_matmul if kind == "ag_gemm" else \
            torch.ops.symm_mem.fused_matmul_reduce_scatter
        return op, None
    except Exception as e:  # an older torch, or no symmetric memory on this machine
        return None, f"{type(e).__name__}: {e}"


def ag_gemm(comm, acomm, tokens, hidden, ffn, args):
    """Column-parallel: x (tokens / n x hidden) gathered, times w (ffn / n x hidden)^T."""
    n = comm.size
    x = torch.randn(tokens // n, hidden, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(ffn // n, hidden, device="cuda", dtype=torch.bfloat16) * 0.02
    gathered = torch.empty(tokens, hidden, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(tokens, ffn // n, device="cuda", dtype=torch.bfloat16)
    t = lambda fn: timed(fn, args.iters, args.warmup, args.rounds)
    row = {"gemm_ms": t(lambda: torch.mm(gathered, w.t(), out=out)),
           "comm_ms": t(lambda: dist.all_gather_into_tensor(gathered, x))}

    def serial():
        dist.all_gather_into_tensor(gathered, x)
        torch.mm(gathered, w.t(), out=out)
    row["serial_ms"] = t(serial)
    row["cclz_ms"] = t(lambda: comm.all_gather_matmul(out, x, w, gathered=gathered))
    fp8 = cclz.Fp8(row_elems=hidden)  # one object: the communicator keeps its config by identity
    row["cclz_fp8_ms"] = t(lambda: comm.all_gather_matmul(out, x, w, gathered=gathered,
                                                          codec=fp8))
    adaptive = lambda: acomm.all_gather_matmul(out, x, w, gathered=gathered, codec=fp8)
    row["cclz_fp8_adaptive_way"] = settle(acomm, adaptive)
    row["cclz_fp8_adaptive_ms"] = t(adaptive)
    op, why = torch_fused("ag_gemm", dist.group.WORLD.group_name)
    if op is not None:
        try:
            row["torch_fused_ms"] = t(lambda: op(x, [w.t()], gather_dim=0,
                                                 group_name=dist.group.WORLD.group_name))
        except Exception as e:
            why = f"{type(e).__name__}: {e}"
    if why:
        row["torch_fused_error"] = why[:300]
    return row


def gemm_rs(comm, acomm, tokens, hidden, ffn, args):
    """Row-parallel: h (tokens x ffn / n) times w (hidden x ffn / n)^T, reduce-scattered along
    the tokens."""
    n = comm.size
    h = torch.randn(tokens, ffn // n, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(hidden, ffn // n, device="cuda", dtype=torch.bfloat16) * 0.02
    partial = torch.empty(tokens, hidden, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(tokens // n, hidden, device="cuda", dtype=torch.bfloat16)
    t = lambda fn: timed(fn, args.iters, args.warmup, args.rounds)
    row = {"gemm_ms": t(lambda: torch.mm(h, w.t(), out=partial)),
           "comm_ms": t(lambda: dist.reduce_scatter_tensor(out, partial))}

    def serial():
        torch.mm(h, w.t(), out=partial)
        dist.reduce_scatter_tensor(out, partial)
    row["serial_ms"] = t(serial)
    row["cclz_ms"] = t(lambda: comm.matmul_reduce_scatter(out, h, w))
    fp8 = cclz.Fp8(row_elems=hidden)
    row["cclz_fp8_ms"] = t(lambda: comm.matmul_reduce_scatter(out, h, w, codec=fp8))
    adaptive = lambda: acomm.matmul_reduce_scatter(out, h, w, codec=fp8)
    row["cclz_fp8_adaptive_way"] = settle(acomm, adaptive)
    row["cclz_fp8_adaptive_ms"] = t(adaptive)
    op, why = torch_fused("gemm_rs", dist.group.WORLD.group_name)
    if op is not None:
        try:
            row["torch_fused_ms"] = t(lambda: op(h, w.t(), "sum", scatter_dim=0,
                                                 group_name=dist.group.WORLD.group_name))
        except Exception as e:
            why = f"{type(e).__name__}: {e}"
    if why:
        row["torch_fused_error"] = why[:300]
    return row


def efficiency(row, key):
    g, c, o = row["gemm_ms"], row["comm_ms"], row.get(key)
    if o is None:
        return None
    return 1 - (o - max(g, c)) / min(g, c)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="llama3-70b,gpt3-175b")
    ap.add_argument("--tokens", default="4096,16384")
    ap.add_argument("--ops", default="ag_gemm,gemm_rs")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    launcher, rank, world, local_rank, _ = launcher_env()
    device = torch.device("cuda", local_rank)
    init_distributed(launcher, rank, world, device)
    comm = cclz.Communicator.from_group(adaptive=False)
    acomm = cclz.Communicator.from_group(adaptive=True)
    rows = []
    for model in args.models.split(","):
        hidden, ffn = MODELS[model]
        for tokens in (int(t) for t in args.tokens.split(",")):
            for kind in args.ops.split(","):
                run = ag_gemm if kind == "ag_gemm" else gemm_rs
                row = {"model": model, "op": kind, "tp": world, "tokens": tokens,
                       "hidden": hidden, "ffn": ffn, **run(comm, acomm, tokens, hidden, ffn, args)}
                for key in ("serial_ms", "torch_fused_ms", "cclz_ms", "cclz_fp8_ms",
                            "cclz_fp8_adaptive_ms"):
                    e = efficiency(row, key)
                    if e is not None:
                        row[key.replace("_ms", "_efficiency")] = e
                rows.append(row)
                torch.cuda.empty_cache()
    comm.close()
    acomm.close()
    if rank == 0:
        print("| model | op | tokens | GEMM ms | comm ms | serial ms | torch fused ms (eff.) | "
              "cclz ms (eff.) | cclz fp8 ms (eff.) | cclz fp8 adaptive ms (eff.), way |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        cell = lambda r, k: ("-" if k + "_ms" not in r else
                             f"{r[k + '_ms']:.3f} ({r[k + '_efficiency']:.2f})")
        for r in rows:
            print(f"| {r['model']} | {r['op']} | {r['tokens']} | {r['gemm_ms']:.3f} | "
                  f"{r['comm_ms']:.3f} | {r['serial_ms']:.3f} | {cell(r, 'torch_fused')} | "
                  f"{cell(r, 'cclz')} | {cell(r, 'cclz_fp8')} | "
                  f"{cell(r, 'cclz_fp8_adaptive')}, {r['cclz_fp8_adaptive_way']} |")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"command": " ".join(sys.argv), "ranks": world,
                           "device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
