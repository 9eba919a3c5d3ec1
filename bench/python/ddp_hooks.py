"""DDP communication hooks side by side on one model and one data stream: DDP's own all-reduce,
torch's bf16_compress_hook and PowerSGD, and cclz's qgrad and lossless hooks. Time per step and
the loss after the same steps.

    mpirun -n 4 bench/python/two_nodes.sh python3 bench/python/ddp_hooks.py --json out.json

The model is a GPT-style causal transformer (pre-LN, GELU; torch's TransformerEncoderLayer with a
causal mask) on byte tokens of the Python standard library's own sources (train: the files whose
path hash is not 0 mod 10; validation: the others). Every configuration starts from the same
weights and sees the same batches; bf16 autocast; AdamW.
"""
import argparse
import json
import os
import statistics
import sys
import sysconfig
import time
import zlib

import torch
import torch.distributed as dist
from mpi4py import MPI
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

import cclz
from cclz.train.launch import init_distributed


def corpus(validation):
    root = sysconfig.get_paths()["stdlib"]
    chunks = []
    for folder, _, files in sorted(os.walk(root)):
        if "site-packages" in folder or "test" in folder.split(os.sep):
            continue
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                if (zlib.crc32(os.path.relpath(path, root).encode()) % 10 == 0) == validation:
                    with open(path, "rb") as f:
                        chunks.append(f.read())
    data = torch.frombuffer(bytearray(b"\n".join(chunks)), dtype=torch.uint8)
    if data.numel() < 1 << 16:
        raise SystemExit(f"the standard library's sources under {root} are missing")
    return data.long()


def batches(data, batch, seq, seed, steps, device):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        starts = torch.randint(0, data.numel() - seq - 1, (batch,), generator=g)
        window = torch.stack([data[s:s + seq + 1] for s in starts.tolist()]).to(device)
        yield window[:, :-1], window[:, 1:]


class Gpt(torch.nn.Module):
    def __init__(self, layers, hidden, heads, seq):
        super().__init__()
        self.embed = torch.nn.Embedding(256, hidden)
        self.position = torch.nn.Parameter(torch.randn(seq, hidden) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(hidden, heads, 4 * hidden, dropout=0.0,
                                                 activation="gelu", batch_first=True,
                                                 norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(hidden)
        self.head = torch.nn.Linear(hidden, 256, bias=False)
        self.register_buffer("mask", torch.nn.Transformer.generate_square_subsequent_mask(seq),
                             persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position[:tokens.shape[1]]
        x = self.blocks(x, mask=self.mask, is_causal=True)
        return self.head(self.norm(x))


def run(config, args, train, valid, device, cclz_comm):
    torch.manual_seed(0)
    model = Gpt(args.layers, args.hidden, args.heads, args.seq).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device])
    if config == "bf16_compress":
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
    elif config == "powersgd":
        state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=4,
                                            start_powerSGD_iter=10)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    elif config == "cclz_qgrad4":
        ddp.register_comm_hook(cclz.ddp.State(cclz_comm), cclz.ddp.qgrad_hook)
    elif config == "cclz_lossless":
        ddp.register_comm_hook(cclz.ddp.State(cclz_comm, cclz.Lossless()), cclz.ddp.lossless_hook)
    opt = torch.optim.AdamW(ddp.parameters(), lr=args.lr, weight_decay=0.0)
    rank = dist.get_rank()
    step_times, losses = [], []
    for step, (x, y) in enumerate(batches(train, args.batch, args.seq, 1000 + rank, args.steps,
                                          device)):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(ddp(x).flatten(0, 1).float(), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        step_times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    model.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        val = [torch.nn.functional.cross_entropy(model(x).flatten(0, 1).float(), y.flatten())
               for x, y in batches(valid, args.batch, args.seq, 7, args.val_batches, device)]
    stats = torch.tensor([sum(losses[-10:]) / 10, torch.stack(val).mean().item()],
                         device=device)
    dist.all_reduce(stats)
    stats /= dist.get_world_size()
    timed = step_times[args.warmup:]
    peak = torch.cuda.max_memory_allocated(device) / 2**30
    torch.cuda.reset_peak_memory_stats(device)
    return {"config": config, "step_ms_median": 1e3 * statistics.median(timed),
            "step_ms_mean": 1e3 * statistics.mean(timed), "train_loss_last10": stats[0].item(),
            "val_loss": stats[1].item(), "peak_gib_rank0": peak,
            "params": sum(p.numel() for p in model.parameters())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="allreduce,bf16_compress,powersgd,cclz_qgrad4,"
                    "cclz_lossless")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8, help="sequences per rank per step")
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--warmup", type=int, default=20, help="steps left out of the timing")
    ap.add_argument("--val-batches", type=int, default=8)
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--json")
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    local = world.Get_rank() % torch.cuda.device_count()
    device = torch.device("cuda", local)
    init_distributed("mpirun", world.Get_rank(), world.Get_size(), device)
    cclz_comm = cclz.Communicator.from_group()
    train, valid = corpus(False), corpus(True)
    rows = []
    for config in args.configs.split(","):
        rows.append(run(config, args, train, valid, device, cclz_comm))
        if world.Get_rank() == 0:
            print(json.dumps(rows[-1]), flush=True)
    cclz_comm.close()
    if world.Get_rank() == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"command": " ".join(sys.argv), "ranks": world.Get_size(),
                       "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "nccl_hostid": os.environ.get("NCCL_HOSTID"), "args": vars(args),
                       "rows": rows}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
