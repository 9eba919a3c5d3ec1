"""One step of pipeline-parallel work: 1F1B (one forward, one backward) over micro-batches.

A stage runs `pp - stage - 1` warm-up forwards, then alternates a forward and a backward, then
drains the remaining backwards, so at most pp - stage micro-batches' activations are alive at
once (GPipe keeps all of them). Stage boundaries move through cclz.pipeline.batch_send_recv
with the pp codec. Where a stage sends an activation forward and receives a gradient back in
the same breath (and its neighbour does the reverse), both go into one batch: the batch orders
the pair's transfers the same way on both ends, so blocking sends cannot deadlock.

With one stage this is plain gradient accumulation: forward and backward per micro-batch.
"""
import contextlib
import dataclasses

import torch

from .. import pipeline


def _for_rows(codec, hidden):
    """Fp8 without a row length takes the hidden size (the boundary tensors' last dimension)."""
    if getattr(codec, "row_elems", None) == 0 and hidden % 64 == 0:
        return dataclasses.replace(codec, row_elems=hidden)
    return codec


class PipelineSchedule:
    """Runs micro-batches through this rank's stage. model: a GPTStage; groups: ParallelGroups;
    codec: the pp codec; autocast: a context factory for the forward (bf16 on GPUs)."""

    def __init__(self, model, groups, codec=None, autocast=contextlib.nullcontext,
                 boundary_dtype=torch.float32):
        self.model, self.groups = model, groups
        self.comm = groups.pp_comm
        self.codec = _for_rows(codec, model.cfg.hidden)
        self.autocast = autocast
        # What crosses a boundary: the residual stream's shard, in the dtype the GEMMs run in
        # (bf16 under autocast; the receiver continues in fp32).
        self.boundary_dtype = boundary_dtype
        self.prev = groups.pp_rank - 1
        self.next = groups.pp_rank + 1

    # ---- boundaries ------------------------------------------------------------------------
    def _boundary(self, micro_batch_size):
        cfg = self.model.cfg
        return torch.empty(cfg.seq_len // self.model.tp, micro_batch_size, cfg.hidden,
                           dtype=self.boundary_dtype, device=self.groups.device)

    def _exchange(self, sends, recvs):
        """Sends [(tensor, peer)] and fills [(buffer, peer)] in one batch."""
        ops = [pipeline.P2POp("send", t.detach().to(self.boundary_dtype).contiguous(), peer,
                              codec=self.codec) for t, peer in sends]
        ops += [pipeline.P2POp("recv", buf, peer, codec=self.codec) for buf, peer in recvs]
        pipeline.batch_send_recv(self.comm, ops)

    def _received(self, buf):
        x = buf.float() if buf.dtype != torch.float32 else buf
        return x.requires_grad_()

    # ---- compute ---------------------------------------------------------------------------
    def _forward(self, x, micro_batch, normalizer):
        inputs, targets = micro_batch
        with self.autocast():
            out = self.model(inputs if self.model.first else x)
            if self.model.last:
                out = self.model.loss(out, targets, normalizer)
        return out

    def _backward(self, x, out, grad):
        if self.model.last:
            out.backward()
        else:
            torch.autograd.backward(out, grad)
        return None if self.model.first else x.grad

    # ---- schedules -------------------------------------------------------------------------
    def train_step(self, micro_batches, normalizer):
        """Forward and backward of every micro-batch (gradients accumulate in .grad). Returns the
        summed loss on the last stage (a detached scalar tensor), None elsewhere."""
        m, stage, stages = len(micro_batches), self.groups.pp_rank, self.groups.pp
        first, last = self.model.first, self.model.last
        mbs = micro_batches[0][0].shape[0]
        warmup = min(stages - stage - 1, m)
        inflight = []  # (input, output) of micro-batches whose backward is still to come
        total = torch.zeros((), device=self.groups.device)

        def recv_forward():
            if first:
                return None
            buf = self._boundary(mbs)
            self._exchange([], [(buf, self.prev)])
            return self._received(buf)

        def run_forward(i, x):
            out = self._forward(x, micro_batches[i], normalizer)
            if last:
                total.add_(out.detach())
            inflight.append((x, out))
            return out

        for i in range(warmup):
            out = run_forward(i, recv_forward())
            self._exchange([(out, self.next)], [])  # warm-up: never on the last stage

        x = recv_forward() if m > warmup else None
        for i in range(m - warmup):
            out = run_forward(warmup + i, x)
            grad = None
            if not last:
                grad = self._boundary(mbs)
                self._exchange([(out, self.next)], [(grad, self.next)])
                grad = grad.to(out.dtype)
            inp, out = inflight.pop(0)
            dx = self._backward(inp, out, grad)
            more = i < m - warmup - 1
            if first:
                x = None
            elif more:
                x_buf = self._boundary(mbs)
                self._exchange([(dx, self.prev)], [(x_buf, self.prev)])
                x = self._received(x_buf)
            else:
                self._exchange([(dx, self.prev)], [])

        for _ in range(warmup):  # cool-down
            inp, out = inflight.pop(0)
            grad = self._boundary(mbs)
            self._exchange([], [(grad, self.next)])
            dx = self._backward(inp, out, grad.to(out.dtype))
            if not first:
                self._exchange([(dx, self.prev)], [])
        return total if last else None

    @torch.no_grad()
    def eval_step(self, micro_batches, normalizer):
        """Forward only; returns the summed loss on the last stage, None elsewhere."""
        total = torch.zeros((), device=self.groups.device)
        mbs = micro_batches[0][0].shape[0]
        for micro_batch in micro_batches:
            x = None
            if not self.model.first:
                x = self._boundary(mbs)
                self._exchange([], [(x, self.prev)])
                x = x.float()
            out = self._forward(x, micro_batch, normalizer)
            if self.model.last:
                total += out
            else:
                self._exchange([(out, self.next)], [])
        return total if self.model.last else None
