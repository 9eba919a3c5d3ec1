"""One codec per parallel dimension: aggressive where the traffic is gradients, mild where it is
activations (the hybrid scheme: tp activations in the fp8 codec's rotated INT8 grid, dp gradients
in int4 with error feedback, pp boundaries lossless)."""
from dataclasses import dataclass
from typing import Optional

from .codecs import Fp8, Lossless, Qgrad


@dataclass(frozen=True)
class Policy:
    """tp: tensor-parallel activations and their gradients; dp: data-parallel gradients (a Qgrad
    with feedback=True gets one error-feedback state per bucket from the DDP hook); pp: the
    activations and gradients at pipeline-stage boundaries. None: plain data.
    tp_reduce: tensor parallelism's reductions alone (the row-parallel partial sums forward, the
    column-parallel input gradients backward); ... (the default): tp's codec."""
    tp: Optional[object] = None
    dp: Optional[object] = None
    pp: Optional[object] = None
    tp_reduce: Optional[object] = ...

    @property
    def tp_reduce_codec(self):
        """The codec of tensor parallelism's reductions, tp_reduce resolved."""
        return self.tp if self.tp_reduce is ... else self.tp_reduce

    @classmethod
    def default(cls):
        # INT8 rather than E4M3: the same bytes, a tenth of the error (docs/train.md, "Choosing
        # the activations' codec").
        return cls(tp=Fp8(format="int8"), dp=Qgrad(4, feedback=True), pp=Lossless())

    @classmethod
    def none(cls):
        return cls()
