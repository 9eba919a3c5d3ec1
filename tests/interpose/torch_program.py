"""A torch.distributed program that knows nothing of cclz, for libcclz_nccl.so to be preloaded
into (run_torch_program.sh). One process per GPU:

    python3 -m torch.distributed.run --nproc-per-node 2 tests/interpose/torch_program.py OUT_DIR

It calls all_gather_into_tensor, broadcast, send/recv (pairs of ranks: 0 and 1, 2 and 3, ...),
all_to_all_single, all_reduce and reduce_scatter_tensor (sum) on seeded bf16, fp32 and int32
data, 64 KiB to 64 MiB per rank with ragged counts, each kind several times (more than an
adaptive cclz communicator's trials: 12 calls below 2 MiB a rank, 6 above), and writes one line per call to OUT_DIR/cases.R.txt (R
its rank; one file per process, since processes writing to one file can tear each other's lines):
"case NAME rank R hash SHA256" of the result's bytes, " FAILED" appended where the result is not
what every rank's inputs give: bit for bit for data movement, and for the sums the fp32 sum in
rank order rounded once, within one rounding (NCCL rounds in its own order; run_torch_program.sh
compares the reductions' bits between runs). Exits 1 if any check failed.
"""
import hashlib
import os
import sys

import torch
import torch.distributed as dist

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "int32": torch.int32}
# (bytes per rank, calls of each kind): ragged counts, and the largest size called fewer times.
SIZES = [(64 << 10, 14), ((1 << 20) + 6, 14), ((16 << 20) - 12, 8), (64 << 20, 2)]


class Program:
    def __init__(self, out_dir):
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.failures = 0
        self.out = open(os.path.join(out_dir, f"cases.{self.rank}.txt"), "w")

    def values(self, rank, count, dtype, seed):
        """Rank `rank`'s seeded input: Gaussian floats, integers for int32 (any rank can make any
        rank's values)."""
        g = torch.Generator(device=self.device).manual_seed(1_000_003 * seed + rank)
        if dtype.is_floating_point:
            return torch.randn(count, generator=g, device=self.device).to(dtype)
        return torch.randint(-(2**31), 2**31 - 1, (count,), generator=g, device=self.device,
                             dtype=torch.int32)

    def report(self, name, got, want, exact=True):
        raw = got.contiguous().view(torch.uint8)
        if exact:
            ok = torch.equal(raw, want.contiguous().view(torch.uint8))
        else:  # NCCL's sums round in NCCL's order, once per step: up to one rounding per
            # rank of partial sums as large as the values (unit Gaussians), whatever the total
            tol = {torch.bfloat16: 7.9e-3, torch.float32: 1.2e-7}.get(got.dtype, 0)
            ok = bool(((got.float() - want.float()).abs()
                       <= self.world * tol * want.float().abs().clamp_min(1.0)).all())
        digest = hashlib.sha256(raw.cpu().numpy().tobytes()).hexdigest()
        self.out.write(f"case {name} rank {self.rank} hash {digest}{'' if ok else ' FAILED'}\n")
        self.failures += 0 if ok else 1

    def fp32_sum(self, count, dtype, seed, offset=0, length=None):
        """The sum over ranks of their values [offset, offset + length), in fp32 in rank order,
        rounded once to dtype (integers add exactly, with int32 wrap-around)."""
        length = count if length is None else length
        if not dtype.is_floating_point:
            acc = torch.zeros(length, dtype=torch.int64, device=self.device)
            for r in range(self.world):
                acc += self.values(r, count, dtype, seed)[offset:offset + length].long()
            return ((acc + 2**31) % 2**32 - 2**31).to(torch.int32)
        acc = torch.zeros(length, dtype=torch.float32, device=self.device)
        for r in range(self.world):
            acc += self.values(r, count, dtype, seed)[offset:offset + length].float()
        return acc.to(dtype)

    def all_gather(self, count, dtype, seed, tag):
        out = torch.empty(count * self.world, dtype=dtype, device=self.device)
        dist.all_gather_into_tensor(out, self.values(self.rank, count, dtype, seed))
        want = torch.cat([self.values(r, count, dtype, seed) for r in range(self.world)])
        self.report(f"allgather.{tag}", out, want)

    def broadcast(self, count, dtype, seed, tag):
        t = self.values(self.rank, count, dtype, seed)
        if self.rank != 0:
            t.zero_()
        dist.broadcast(t, src=0)
        self.report(f"broadcast.{tag}", t, self.values(0, count, dtype, seed))

    def send_recv(self, count, dtype, seed, tag):
        peer = self.rank ^ 1
        if peer >= self.world:
            return
        mine = self.values(self.rank, count, dtype, seed)
        got = torch.empty(count, dtype=dtype, device=self.device)
        if self.rank % 2 == 0:
            dist.send(mine, peer)
            dist.recv(got, peer)
        else:
            dist.recv(got, peer)
            dist.send(mine, peer)
        self.report(f"sendrecv.{tag}", got, self.values(peer, count, dtype, seed))

    def all_to_all(self, count, dtype, seed, tag):
        per_peer = max(count // self.world, 1)
        out = torch.empty(per_peer * self.world, dtype=dtype, device=self.device)
        dist.all_to_all_single(out, self.values(self.rank, per_peer * self.world, dtype, seed))
        want = torch.cat([self.values(r, per_peer * self.world, dtype, seed)
                          [self.rank * per_peer:(self.rank + 1) * per_peer]
                          for r in range(self.world)])
        self.report(f"alltoall.{tag}", out, want)

    def all_reduce(self, count, dtype, seed, tag):
        t = self.values(self.rank, count, dtype, seed)
        dist.all_reduce(t)
        self.report(f"allreduce.{tag}", t, self.fp32_sum(count, dtype, seed),
                    exact=not dtype.is_floating_point)

    def reduce_scatter(self, count, dtype, seed, tag):
        per_rank = max(count // self.world, 1)
        out = torch.empty(per_rank, dtype=dtype, device=self.device)
        dist.reduce_scatter_tensor(out, self.values(self.rank, per_rank * self.world, dtype, seed))
        want = self.fp32_sum(per_rank * self.world, dtype, seed, self.rank * per_rank, per_rank)
        self.report(f"reducescatter.{tag}", out, want, exact=not dtype.is_floating_point)

    def run(self):
        ops = [self.all_gather, self.broadcast, self.send_recv, self.all_to_all, self.all_reduce,
               self.reduce_scatter]
        for size, calls in SIZES:
            for name, dtype in DTYPES.items():
                count = size // dtype.itemsize
                for call in range(calls):
                    seed = 100 * size + 10 * call + list(DTYPES).index(name)
                    for i, op in enumerate(ops):
                        op(count, dtype, seed * 8 + i, f"{name}.{count}.{call}")
        torch.cuda.synchronize()


def main():
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()))
    program = Program(sys.argv[1])
    program.run()
    program.out.close()
    failures = program.failures
    print(f"rank {program.rank}: {failures} failed checks", flush=True)
    dist.destroy_process_group()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
