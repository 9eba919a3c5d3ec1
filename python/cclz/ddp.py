"""DistributedDataParallel communication hooks: the gradient buckets' all-reduce through cclz.

    state = cclz.ddp.State(comm)                       # Qgrad int4 with error feedback
    ddp_model.register_comm_hook(state, cclz.ddp.qgrad_hook)
    ddp_model.register_comm_hook(cclz.ddp.State(comm, cclz.Lossless()), cclz.ddp.lossless_hook)

The hooks average the bucket over the ranks (what DDP's own all-reduce computes). With
Qgrad(feedback=True) the state keeps one error-feedback residual per bucket, so what one step's
quantization drops is sent with the next step's gradient.
"""
import torch

from .codecs import Feedback, Lossless, Qgrad


class State:
    """The hook's state: the communicator, the codec and the buckets' residuals."""

    def __init__(self, comm, codec=None):
        self.comm = comm
        self.codec = Qgrad(4, feedback=True) if codec is None else codec
        # bucket index -> its codec with its own Feedback (remade if the bucket's size changes)
        self._bucket_codecs = {}

    def codec_for(self, bucket_index, tensor):
        codec = self.codec
        if isinstance(codec, Qgrad) and codec.feedback is True:
            made = self._bucket_codecs.get(bucket_index)
            if made is None or made.feedback.numel != tensor.numel():
                # DDP rebuilds its buckets after the first step: a new layout, new residuals.
                if made is not None:
                    made.feedback.close()
                fb = Feedback(tensor.numel(), device=tensor.device)
                made = Qgrad(codec.bits, codec.block_elems, codec.rounding, codec.seed,
                             feedback=fb)
                self._bucket_codecs[bucket_index] = made
            return made
        return codec


def _average(state, bucket):
    buffer = bucket.buffer()
    state.comm.all_reduce(buffer, op="avg", codec=state.codec_for(bucket.index(), buffer))
    done = torch.futures.Future()
    # Stream-ordered on CUDA (DDP reads the result on the same stream); complete on CPU.
    done.set_result(buffer)
    return done


def qgrad_hook(state, bucket):
    """Averages the bucket with state's codec (Qgrad int4 with error feedback by default)."""
    return _average(state, bucket)


def lossless_hook(state, bucket):
    """Averages the bucket through the lossless codec whatever state's codec is."""
    if not isinstance(state.codec, Lossless):
        state = State(state.comm, Lossless())
    return _average(state, bucket)
