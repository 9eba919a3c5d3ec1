"""The gradients' way from the backward pass to the optimizer:

1. tensor parallel: a replicated parameter (layer norms, embeddings, row-parallel biases, the
   output head) saw only this rank's sequence shard, so its gradient is summed over the
   tensor-parallel group (plain: small, and exact);
2. data parallel: every gradient is averaged over the replicas, bucket by bucket, through
   cclz.ddp's comm hook with the dp codec (Qgrad with one error-feedback residual per bucket);
3. the global norm over all stages and shards, for clipping.

Why the hook is called here instead of from torch's DistributedDataParallel: 1F1B interleaves the
forwards and backwards of different micro-batches, and DDP's reducer expects each forward that
syncs to be followed by its own backward. The step's gradients are complete after the last
backward; then the same hook averages the same kind of buckets.
"""
import torch

from .. import ddp


class _Bucket:
    """What a DDP comm hook reads of a torch GradBucket."""

    def __init__(self, index, buffer):
        self._index, self._buffer = index, buffer

    def index(self):
        return self._index

    def buffer(self):
        return self._buffer


class GradSync:
    """model: a GPTStage; groups: ParallelGroups; codec: the dp codec (None: a plain average)."""

    def __init__(self, model, groups, codec=None, bucket_mb=25.0):
        self.groups = groups
        self.params = [p for p in model.parameters() if p.requires_grad]
        names = {p: n for n, p in model.named_parameters()}
        self.replicated = [p for p in self.params if names[p] not in model.split_dims]
        self.tp = groups.tp
        # Buckets in reverse order of definition, as DDP makes them (the last layers' gradients
        # are ready first).
        self.buckets = []
        limit = max(1, int(bucket_mb * 2 ** 20))
        current, size = [], 0
        for p in reversed(self.params):
            current.append(p)
            size += p.numel() * 4
            if size >= limit:
                self.buckets.append(current)
                current, size = [], 0
        if current:
            self.buckets.append(current)
        self.state = ddp.State(groups.dp_comm, codec) if groups.dp_comm is not None and \
            codec is not None else None

    @staticmethod
    def _flat(params):
        return torch.cat([p.grad.reshape(-1).float() for p in params])

    @staticmethod
    def _unflat(params, flat):
        offset = 0
        for p in params:
            n = p.numel()
            p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
            offset += n

    def sync(self):
        for p in self.params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        tp_comm = self.groups.tp_comm
        if tp_comm is not None and self.replicated:
            flat = self._flat(self.replicated)
            tp_comm.all_reduce(flat, op="sum")
            self._unflat(self.replicated, flat)
        dp_comm = self.groups.dp_comm
        if dp_comm is None:
            return
        for index, params in enumerate(self.buckets):
            flat = self._flat(params)
            if self.state is None:
                dp_comm.all_reduce(flat, op="avg")
            else:
                flat = ddp.qgrad_hook(self.state, _Bucket(index, flat)).wait()
            self._unflat(params, flat)

    def clip(self, max_norm):
        """Scales the gradients so their global norm is at most max_norm (0: no clipping);
        returns the norm before scaling (a tensor: no host synchronization). A replicated
        parameter's gradient, the same on every tensor-parallel rank after sync(), counts once;
        so does each replica's."""
        replicated = set(self.replicated)
        split = [p.grad for p in self.params if p not in replicated]
        shared = [p.grad for p in self.params if p in replicated]
        local = torch.zeros((), dtype=torch.float32, device=self.groups.device)
        if split:
            local += torch.stack(torch._foreach_norm(split)).float().pow(2).sum()
        if shared:
            local += torch.stack(torch._foreach_norm(shared)).float().pow(2).sum() / self.tp
        norm = (self.groups.world_sum_tensor(local) / self.groups.dp).sqrt()
        if max_norm > 0:
            scale = (max_norm / (norm + 1e-6)).clamp(max=1.0)
            torch._foreach_mul_([p.grad for p in self.params], scale)
        return norm
