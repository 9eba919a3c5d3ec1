"""The gradients' way from the backward pass to the optimizer:

1. data parallel: every gradient is averaged over the replicas, bucket by bucket, through
   cclz.ddp's comm hooks with the dp codec (Qgrad with one error-feedback residual per bucket;
   plain_hook without a codec). A bucket goes out as soon as the step's last backward has
   accumulated all of its gradients, on the hook's own CUDA stream, so the rest of the backward
   computes while it moves, as in DDP;
2. tensor parallel: a replicated parameter (layer norms, embeddings, row-parallel biases, the
   output head) saw only this rank's sequence shard, so its gradient is summed over the
   tensor-parallel group (plain: small, and exact), after the data-parallel average (both are
   linear; the sum cannot come first without holding the buckets back until the backward ends);
3. the global norm over all stages and shards, for clipping.

Why the hooks are called here instead of from torch's DistributedDataParallel: 1F1B interleaves
the forwards and backwards of different micro-batches, and DDP's reducer expects each forward
that syncs to be followed by its own backward. A parameter's gradient is complete once it has
been accumulated once per micro-batch: each parameter's post-accumulate hook counts.
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
    """model: a GPTStage; groups: ParallelGroups; codec: the dp codec (None: a plain average);
    micro_batches: backward passes per step (each parameter's gradient is complete after as
    many accumulations)."""

    def __init__(self, model, groups, codec=None, bucket_mb=25.0, micro_batches=1):
        self.groups = groups
        self.params = [p for p in model.parameters() if p.requires_grad]
        names = {p: n for n, p in model.named_parameters()}
        self.replicated = [p for p in self.params if names[p] not in model.split_dims]
        self.tp = groups.tp
        self.micro_batches = micro_batches
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
        self.bucket_of = {p: i for i, bucket in enumerate(self.buckets) for p in bucket}
        # Each bucket's gradients are views of one flat fp32 buffer (DDP's gradient_as_bucket_view):
        # the backward accumulates straight into what the hook averages in place, with no copy and
        # no second buffer alive while the buckets move. The optimizer must zero them in place.
        self.flats = []
        for bucket in self.buckets:
            flat = torch.zeros(sum(p.numel() for p in bucket), dtype=torch.float32,
                               device=bucket[0].device)
            offset = 0
            for p in bucket:
                p.grad = flat[offset:offset + p.numel()].view_as(p)
                offset += p.numel()
            self.flats.append(flat)
        self.state, self.hook = None, None
        # The parameters' hooks hold this object and it holds the parameters: a cycle through
        # autograd's C++ hook storage, which Python's collector cannot see. close() removes them;
        # without it the model's parameters and gradient buckets would outlive the run.
        self._hook_handles = []
        if groups.dp_comm is not None:
            self.state = ddp.State(groups.dp_comm, codec)
            self.hook = ddp.plain_hook if codec is None else ddp.qgrad_hook
            self._hook_handles = [p.register_post_accumulate_grad_hook(self._accumulated)
                                  for p in self.params]
        self._new_step()

    def close(self):
        """Removes the parameters' hooks and frees the buckets and the residuals."""
        for handle in self._hook_handles:
            handle.remove()
        self._hook_handles = []
        if self.state is not None:
            self.state.close()
        self.state, self.flats, self._sent = None, [], {}

    def _new_step(self):
        self._seen = {}  # parameter -> accumulations so far this step
        self._missing = [len(bucket) for bucket in self.buckets]  # gradients not yet complete
        self._sent = {}  # bucket index -> the hook's future (its average, in place)

    def _accumulated(self, p):
        seen = self._seen.get(p, 0) + 1
        self._seen[p] = seen
        if seen == self.micro_batches:
            index = self.bucket_of[p]
            self._missing[index] -= 1
            if self._missing[index] == 0:
                self._send(index)

    def _send(self, index):
        """Starts bucket `index`'s average, in place (every rank reaches its buckets in the same
        order: the same model and schedule)."""
        self._sent[index] = self.hook(self.state, _Bucket(index, self.flats[index]))

    def _check_views(self):
        for bucket, flat in zip(self.buckets, self.flats):
            first = bucket[0].grad
            if first is None or first.data_ptr() != flat.data_ptr():
                raise RuntimeError("GradSync: the gradients must stay views of their bucket: "
                                   "zero them in place (optimizer.zero_grad(set_to_none=False))")

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
        """After the step's last backward: the buckets' averages (those no hook sent yet first,
        in order), then the tensor-parallel sums."""
        self._check_views()
        if self.state is not None:
            for index in range(len(self.buckets)):
                if index not in self._sent:  # a parameter without a gradient in some backward
                    self._send(index)
            for index in range(len(self.buckets)):
                # On CUDA: the current stream waits for the call's stream (no host wait).
                averaged = self._sent[index].wait()
                if averaged.data_ptr() != self.flats[index].data_ptr():
                    self.flats[index].copy_(averaged)
        self._new_step()
        tp_comm = self.groups.tp_comm
        if tp_comm is not None and self.replicated:
            flat = self._flat(self.replicated)
            tp_comm.all_reduce(flat, op="sum")
            self._unflat(self.replicated, flat)

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
