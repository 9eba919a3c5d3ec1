"""The GPT, one pipeline stage of it at a time, split over a tensor-parallel group.

Pre-LN blocks (attention, then a GELU MLP), learned positions, causal attention through
torch's scaled_dot_product_attention, untied input and output embeddings (the input table lives
on the first stage and the output head on the last, so no gradient has to cross the pipeline to
keep them tied).

Activations are [sequence, batch, hidden] (cclz.tensor_parallel's layout). With tp > 1 the
model is sequence parallel: each rank holds seq_len / tp positions of the residual stream, layer
norms and embeddings work on that shard, the column-parallel GEMMs (QKV, MLP in) gather the
sequence first and the row-parallel ones (attention out, MLP out) reduce-scatter after.

Every parameter has a full shape (the single-process model's) and a tensor-parallel split: its
initial value is drawn in full from a generator seeded by its name and this rank keeps its
slice, so a model starts from the same weights whatever its parallel layout.
"""
import math
import zlib

import torch
import torch.nn.functional as F
import torch.utils.checkpoint

from ..tensor_parallel import ColumnParallelLinear, RowParallelLinear


class Linears:
    """Makes the blocks' linear layers: plain ones without tensor parallelism, else column- and
    row-parallel ones with sequence parallelism, whose all-gathers take `codec` and whose
    reductions take `reduce_codec`; overlap: each one overlapped call (GEMM and collective)."""

    def __init__(self, tp_comm, codec, reduce_codec, overlap=False):
        self.tp_comm, self.codec, self.reduce_codec = tp_comm, codec, reduce_codec
        self.overlap = overlap

    def _make(self, layer, in_f, out_f):
        if self.tp_comm is None:
            return torch.nn.Linear(in_f, out_f)
        return layer(in_f, out_f, self.tp_comm, sequence_parallel=True, codec=self.codec,
                     reduce_codec=self.reduce_codec, overlap=self.overlap)

    def column(self, in_f, out_f):
        return self._make(ColumnParallelLinear, in_f, out_f)

    def row(self, in_f, out_f):
        return self._make(RowParallelLinear, in_f, out_f)


class Attention(torch.nn.Module):
    def __init__(self, cfg, tp, linears):
        super().__init__()
        self.local_heads = cfg.heads // tp
        self.head_dim = cfg.hidden // cfg.heads
        # QKV rows are head-major ([head][q|k|v][head_dim]) so that a contiguous split of the
        # output features gives each rank whole heads.
        self.qkv = linears.column(cfg.hidden, 3 * cfg.hidden)
        self.proj = linears.row(cfg.hidden, cfg.hidden)

    def forward(self, x):
        h = self.qkv(x)  # [s, b, local_heads * 3 * head_dim], the full sequence
        s, b = h.shape[:2]
        q, k, v = h.view(s, b, self.local_heads, 3, self.head_dim).unbind(3)
        q, k, v = (t.permute(1, 2, 0, 3) for t in (q, k, v))  # [b, heads, s, head_dim]
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(a.permute(2, 0, 1, 3).reshape(s, b, -1))


class Block(torch.nn.Module):
    """act_dtype: the dtype the GEMMs run in (bf16 under autocast). The layer norms' outputs are
    cast to it before the sequence all-gather, so the gather moves what the GEMM reads (autocast
    would cast after it, and the gather would move fp32)."""

    def __init__(self, cfg, tp, linears, act_dtype=None):
        super().__init__()
        self.act_dtype = act_dtype
        self.ln1 = torch.nn.LayerNorm(cfg.hidden)
        self.attn = Attention(cfg, tp, linears)
        self.ln2 = torch.nn.LayerNorm(cfg.hidden)
        self.fc = linears.column(cfg.hidden, cfg.ffn_size)
        self.out = linears.row(cfg.ffn_size, cfg.hidden)

    def _norm(self, ln, x):
        h = ln(x)
        return h if self.act_dtype is None else h.to(self.act_dtype)

    def forward(self, x):
        x = x + self.attn(self._norm(self.ln1, x))
        return x + self.out(F.gelu(self.fc(self._norm(self.ln2, x))))


class GPTStage(torch.nn.Module):
    """Layers [stage * L / stages, (stage + 1) * L / stages) of the GPT, plus the embeddings on
    the first stage and the final norm and output head on the last. tp_comm: the tensor-parallel
    communicator (None: no tensor parallelism); codec, reduce_codec: the tp codecs of the
    all-gathers and of the reductions (default: codec's); act_dtype: see Block;
    recompute: keep only each block's input and recompute the block in the backward (less
    memory, one more forward and its collectives); overlap: the TP linears as overlapped calls.
    Its parameters are made on torch's default device (the Trainer builds it under
    `with device:`), then init_weights draws them there."""

    def __init__(self, cfg, stage=0, stages=1, tp_comm=None, codec=None, act_dtype=None,
                 recompute=False, reduce_codec=..., overlap=False):
        super().__init__()
        self.cfg, self.recompute = cfg, recompute
        self.tp = tp_comm.size if tp_comm is not None else 1
        self.tp_rank = tp_comm.rank if tp_comm is not None else 0
        self.first, self.last = stage == 0, stage == stages - 1
        per_stage = cfg.layers // stages
        self.layer_ids = list(range(stage * per_stage, (stage + 1) * per_stage))
        self.local_seq = cfg.seq_len // self.tp
        if self.first:
            self.wte = torch.nn.Embedding(cfg.vocab, cfg.hidden)
            self.wpe = torch.nn.Embedding(cfg.seq_len, cfg.hidden)
        # Global layer numbers as names: a parameter is called the same on every layout.
        linears = Linears(tp_comm, codec, codec if reduce_codec is ... else reduce_codec,
                          overlap)
        self.blocks = torch.nn.ModuleDict(
            {str(i): Block(cfg, self.tp, linears, act_dtype) for i in self.layer_ids})
        if self.last:
            self.ln_f = torch.nn.LayerNorm(cfg.hidden)
            self.head = torch.nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        self.split_dims = self._split_dims()

    def _split_dims(self):
        """{parameter name: the dimension split over the tensor-parallel ranks}; a name not in
        it is replicated (and, under sequence parallelism, sees only this rank's positions)."""
        dims = {}
        for prefix, m in self.named_modules():
            if isinstance(m, ColumnParallelLinear):
                dims[f"{prefix}.weight"] = 0
                if m.bias is not None:
                    dims[f"{prefix}.bias"] = 0
            elif isinstance(m, RowParallelLinear):
                dims[f"{prefix}.weight"] = 1
        return dims

    # ---- forward ---------------------------------------------------------------------------
    def _positions(self):
        return slice(self.tp_rank * self.local_seq, (self.tp_rank + 1) * self.local_seq)

    def forward(self, x):
        """x: token ids [batch, seq_len] on the first stage, else the previous stage's output;
        returns this rank's shard of the residual stream, [seq_len / tp, batch, hidden]."""
        if self.first:
            rows = self._positions()
            x = self.wte(x[:, rows].t()) + self.wpe.weight[rows].unsqueeze(1)
        for block in self.blocks.values():
            if self.recompute and torch.is_grad_enabled():
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return x

    def loss(self, h, targets, normalizer):
        """The sum of the cross-entropy over this rank's positions, divided by normalizer (the
        replica's tokens per step): summed over the tensor-parallel ranks and micro-batches it
        is the replica's mean loss."""
        logits = self.head(self.ln_f(h)).float()
        tgt = targets[:, self._positions()].t()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1),
                               reduction="sum") / normalizer

    # ---- weights ---------------------------------------------------------------------------
    def full_shape(self, name, p):
        shape = list(p.shape)
        dim = self.split_dims.get(name)
        if dim is not None:
            shape[dim] *= self.tp
        return shape

    def shard(self, name, full):
        """This rank's slice of a full parameter."""
        dim = self.split_dims.get(name)
        return full if dim is None else full.chunk(self.tp, dim)[self.tp_rank]

    @torch.no_grad()
    def init_weights(self, seed):
        """Weights as a single-process model of this shape would draw them: normal(0, 0.02),
        the residual branches' output projections scaled by 1 / sqrt(2 layers); biases zero,
        norms one. Each is drawn in full on the device it lives on, by a generator of that
        device seeded by its name: CPU ranks and GPUs draw different values, every layout on
        one kind of device the same ones (a 1.3B model's draws take ~10 s on one CPU core,
        milliseconds on a GPU)."""
        residual_std = 0.02 / math.sqrt(2 * self.cfg.layers)
        for name, p in self.named_parameters():
            shape, device = self.full_shape(name, p), p.device
            if name.endswith("bias"):
                full = torch.zeros(shape, device=device)
            elif ".ln" in name or name.startswith("ln_f"):
                full = torch.ones(shape, device=device)
            else:
                g = torch.Generator(device=device)
                g.manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
                std = residual_std if name.endswith(("proj.weight", "out.weight")) else 0.02
                full = torch.randn(shape, generator=g, device=device) * std
            p.copy_(self.shard(name, full))

    @torch.no_grad()
    def load_full(self, state):
        """Loads this rank's slices from a single-process model's state dict."""
        for name, p in self.named_parameters():
            p.copy_(self.shard(name, state[name]))
