"""The training loop: data, the stage's model, the 1F1B step, gradient sync, AdamW with warm-up
and cosine decay, evaluation, and the log.

`run(cfg)` needs torch.distributed started over tp x pp x dp ranks (or one process); under
mpirun with CPU tensors cclz's communicators are MPI ones over the same ranks.
"""
import contextlib
import gc
import math
import os
import time

import torch

from .. import version as cclz_version
from . import data, policy as policies
from .grads import GradSync
from .groups import ParallelGroups
from .log import RunLog
from .model import GPTStage
from .schedule import PipelineSchedule


def lr_at(step, cfg):
    """Linear warm-up to cfg.lr, then cosine decay to cfg.lr x min_lr_ratio at the last step."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    floor = cfg.lr * cfg.min_lr_ratio
    return floor + (cfg.lr - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def adaptive_setting(cfg, device):
    """cclz's adaptive path choice: on GPUs as the library defaults, and wherever a dimension's
    codec is 'auto' (which is that choice); off on CPU ranks otherwise, where a run exists to
    show what the codecs do to the loss (plain copies between local processes are always faster
    there)."""
    if cfg.adaptive == "auto":
        return device.type == "cuda" or "auto" in cfg.codec_names.values()
    return cfg.adaptive == "on"


class Trainer:
    """One rank's part of a run. Build it after torch.distributed is up; close() frees the
    communicators and groups."""

    def __init__(self, cfg, device=torch.device("cpu")):
        self.cfg, self.device = cfg, torch.device(device)
        if self.device.type == "cuda":
            if self.device.index is None:
                self.device = torch.device("cuda", torch.cuda.current_device())
            # The rank's GPU is the current one before any CUDA work: torch.distributed's NCCL,
            # cclz's communicators and autocast all act on the current device.
            torch.cuda.set_device(self.device)
        self.corpus = data.Corpus(cfg.corpus, cfg.val_fraction, seq_len=cfg.model.seq_len)
        self.groups = ParallelGroups(cfg.tp, cfg.pp, cfg.dp, self.device,
                                     adaptive=adaptive_setting(cfg, self.device))
        g = self.groups
        self.policy = policies.make_policy(cfg.codec_names, cfg.model.hidden)
        cuda = self.device.type == "cuda"
        self.bf16 = cfg.precision == "bf16" or (cfg.precision == "auto" and cuda)
        half = torch.bfloat16 if self.bf16 else None
        with self.device:
            self.model = GPTStage(cfg.model, g.pp_rank, g.pp, g.tp_comm, codec=self.policy.tp,
                                  reduce_codec=self.policy.tp_reduce_codec, act_dtype=half,
                                  recompute=cfg.recompute, overlap=cfg.overlap)
        self.model.init_weights(cfg.seed)
        autocast = (lambda: torch.autocast(self.device.type, dtype=torch.bfloat16)) \
            if self.bf16 else contextlib.nullcontext
        self.schedule = PipelineSchedule(self.model, g, self.policy.pp, autocast=autocast,
                                         boundary_dtype=half or torch.float32)
        self.grads = GradSync(self.model, g, self.policy.dp, cfg.bucket_mb, cfg.micro_batches)
        decay = [p for p in self.model.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.model.parameters() if p.dim() < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": cfg.weight_decay},
             {"params": no_decay, "weight_decay": 0.0}],
            lr=cfg.lr, betas=(0.9, 0.95), **({"fused": True} if cuda else {"foreach": True}))
        # The replica's tokens per step: each rank's loss is its share of the replica's mean.
        self.normalizer = cfg.batch // cfg.dp * cfg.model.seq_len

    def close(self):
        self.grads.close()
        self.groups.close()

    def micro_batches(self, inputs, targets):
        g = self.groups
        mbs = data.local_micro_batches(inputs, targets, g.dp_rank, g.dp, self.cfg.micro_batches)
        return [(x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True))
                for x, y in mbs]

    def forward_backward(self, step):
        """Step's forward and backward and the gradients' sync (no optimizer step). Returns this
        rank's share of the global loss (a tensor: non-zero on the last stage only)."""
        inputs, targets = self.corpus.train_batch(step, self.cfg.batch, self.cfg.model.seq_len,
                                                  self.cfg.seed)
        loss = self.schedule.train_step(self.micro_batches(inputs, targets), self.normalizer)
        self.grads.sync()
        share = torch.zeros((), device=self.device)
        if loss is not None:
            share = loss / self.groups.dp
        return share

    def train_step(self, step):
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(step, self.cfg)
        share = self.forward_backward(step)
        norm = self.grads.clip(self.cfg.clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=False)  # gradients are bucket views (grads.py)
        return share, norm

    def evaluate(self):
        """The mean validation loss over cfg.eval_batches fixed global batches (every rank)."""
        self.model.eval()
        total = torch.zeros((), device=self.device)
        batches = self.corpus.val_batches(self.cfg.eval_batches, self.cfg.batch,
                                          self.cfg.model.seq_len)
        for inputs, targets in batches:
            loss = self.schedule.eval_step(self.micro_batches(inputs, targets), self.normalizer)
            if loss is not None:
                total += loss / self.groups.dp
        self.model.train()
        return self.groups.world_sum([total.item()])[0] / len(batches)

    def header(self):
        cfg = self.cfg
        cuda = self.device.type == "cuda"
        return dict(cfg.to_dict(), parameters=cfg.model.parameters(), world=self.groups.world,
                    device=self.device.type, policy=policies.describe(self.policy),
                    tokens_per_step=cfg.tokens_per_step, torch=torch.__version__,
                    cclz=cclz_version(), adaptive=adaptive_setting(cfg, self.device),
                    bf16=self.bf16, micro_batch_size=cfg.micro_batch_size,
                    gpu=torch.cuda.get_device_name(self.device) if cuda else None,
                    nccl=_nccl_version() if cuda else None,
                    env={k: v for k, v in sorted(os.environ.items()) if _logged(k)},
                    embeddings="untied", positions="learned")

    def _sync_device(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def run(self, log=None):
        """Trains for cfg.steps; returns the logged records."""
        cfg, g = self.cfg, self.groups
        log = log or RunLog(cfg.out, self.header(), write=g.rank == 0, quiet=cfg.quiet)
        records = []
        loss_sum = torch.zeros((), device=self.device)
        interval_steps, wire_before = 0, g.wire_counts()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        self._sync_device()
        t0 = time.perf_counter()
        for step in range(cfg.steps):
            share, norm = self.train_step(step)
            loss_sum += share
            interval_steps += 1
            done = step + 1
            evaluate = done % cfg.eval_every == 0 or done == cfg.steps
            if not (evaluate or done % cfg.log_every == 0 or done == cfg.steps):
                continue
            self._sync_device()
            elapsed = time.perf_counter() - t0
            counts = [now - before for now, before in zip(g.wire_counts(), wire_before)]
            loss, raw, sent, overlap_calls, overlap_serial = g.world_sum([loss_sum.item(),
                                                                          *counts])
            record = dict(step=done, tokens=done * cfg.tokens_per_step,
                          loss=loss / interval_steps, lr=lr_at(step, cfg),
                          grad_norm=float(norm), tokens_per_s=interval_steps *
                          cfg.tokens_per_step / max(elapsed, 1e-9),
                          wire_raw_bytes=raw / interval_steps,
                          wire_sent_bytes=sent / interval_steps)
            if overlap_calls:
                # --overlap on an adaptive communicator: the share of the overlapped GEMM calls
                # that ran serially (docs/overlap.md, "Adaptive calls").
                record.update(overlap_serial_share=overlap_serial / overlap_calls)
            if self.device.type == "cuda":
                # torch's allocator peak, and the device's memory in use now (total - free):
                # cclz's and NCCL's buffers come from cudaMalloc, outside torch's counter.
                free, total = torch.cuda.mem_get_info(self.device)
                peak, used = g.world_max([torch.cuda.max_memory_allocated(self.device) / 2 ** 30,
                                          (total - free) / 2 ** 30])
                record.update(peak_mem_gb=peak, device_used_gb=used)
            if evaluate:
                record["val_loss"] = self.evaluate()
            records.append(record)
            log.step(record, cfg.steps)
            loss_sum.zero_()
            interval_steps, wire_before = 0, g.wire_counts()
            self._sync_device()
            t0 = time.perf_counter()  # evaluation and logging are not training time
        log.close(_summary(records))
        return records


# The environment that changes what a run measures (the network NCCL uses; every CCLZ_ setting:
# call checks, adaptive choice, pieces, fused and overlapped paths): in the log's header, so that
# two logs show whether they ran alike.
_LOGGED_ENV = ("NCCL_HOSTID", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE",
               "NCCL_SOCKET_IFNAME", "NCCL_NVLS_ENABLE", "NCCL_P2P_NET_CHUNKSIZE",
               "CUDA_VISIBLE_DEVICES")


def _logged(name):
    return name in _LOGGED_ENV or name.startswith("CCLZ_")


def _nccl_version():
    v = torch.cuda.nccl.version()  # a tuple (2, 28, 9) on recent torch, an int before
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)


def _summary(records):
    if not records:
        return {}
    vals = [r["val_loss"] for r in records if r.get("val_loss") is not None]
    # Throughput without the first interval (warm-up: allocation, the adaptive trials).
    steady = records[1:] or records
    return dict(final_loss=records[-1]["loss"], final_val_loss=vals[-1] if vals else None,
                tokens=records[-1]["tokens"],
                tokens_per_s=sorted(r["tokens_per_s"] for r in steady)[len(steady) // 2],
                peak_mem_gb=max((r.get("peak_mem_gb") or 0) for r in records) or None,
                device_used_gb=max((r.get("device_used_gb") or 0) for r in records) or None)


def release_memory(device):
    """Between two runs of one launch: what the last one left in torch's GPU cache goes back to
    the device, so the next run's log of device memory counts its own."""
    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def run(cfg, device=torch.device("cpu")):
    """Builds a Trainer, trains, frees it; returns the logged records."""
    trainer = Trainer(cfg, device)
    try:
        return trainer.run()
    finally:
        trainer.close()
