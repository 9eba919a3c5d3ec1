"""DistributedDataParallel communication hooks: the gradient buckets' all-reduce through cclz.

    state = cclz.ddp.State(comm)                       # Qgrad int4 with error feedback
    ddp_model.register_comm_hook(state, cclz.ddp.qgrad_hook)
    ddp_model.register_comm_hook(cclz.ddp.State(comm, cclz.Lossless()), cclz.ddp.lossless_hook)

The hooks average the bucket over the ranks (what DDP's own all-reduce computes). With
Qgrad(feedback=True) the state keeps one error-feedback residual per bucket, so what one step's
quantization drops is sent with the next step's gradient.

On CUDA the call runs on a stream of the state's own, after the work that wrote the bucket, so
that the rest of the backward pass computes while the bucket moves (as DDP's own all-reduce
does); the returned future is CUDA-aware: DDP's wait on it makes its stream wait for the call,
without blocking the host. State(overlap=False) calls on the current stream instead.
"""
import torch

from .codecs import Feedback, Lossless, Qgrad

_LOSSLESS = Lossless()  # one object: a communicator keeps each codec's config by identity


class State:
    """The hook's state: the communicator, the codec and the buckets' residuals (for a Qgrad with
    feedback=True, one per bucket, of residual_dtype: bf16 by default, 2 bytes per gradient
    element where fp32 takes 4, docs/python.md)."""

    def __init__(self, comm, codec=None, overlap=True, residual_dtype=torch.bfloat16):
        self.comm = comm
        self.codec = Qgrad(4, feedback=True) if codec is None else codec
        self.overlap = overlap
        self.residual_dtype = residual_dtype
        # bucket index -> its codec with its own Feedback (remade if the bucket's size changes)
        self._bucket_codecs = {}
        self._streams = {}  # CUDA device index -> the stream the calls run on

    def stream_for(self, device):
        """The state's communication stream on a CUDA device (made at first use)."""
        stream = self._streams.get(device.index)
        if stream is None:
            stream = self._streams[device.index] = torch.cuda.Stream(device)
        return stream

    def close(self):
        """Frees the buckets' residuals now (they are device memory of the gradients' size);
        the state makes new ones if it is used again."""
        for made in self._bucket_codecs.values():
            made.feedback.close()
        self._bucket_codecs.clear()

    def codec_for(self, bucket_index, tensor):
        codec = self.codec
        if isinstance(codec, Qgrad) and codec.feedback is True:
            made = self._bucket_codecs.get(bucket_index)
            if made is None or made.feedback.numel != tensor.numel():
                # DDP rebuilds its buckets after the first step: a new layout, new residuals.
                if made is not None:
                    made.feedback.close()
                fb = Feedback(tensor.numel(), device=tensor.device, dtype=self.residual_dtype)
                made = Qgrad(codec.bits, codec.block_elems, codec.rounding, codec.seed,
                             feedback=fb)
                self._bucket_codecs[bucket_index] = made
            return made
        return codec


def _average(state, bucket, codec):
    buffer = bucket.buffer()
    if not (buffer.is_cuda and state.overlap):
        state.comm.all_reduce(buffer, op="avg", codec=codec)
        done = torch.futures.Future()
        # Complete on CPU; on CUDA stream-ordered on the stream that reads the result.
        done.set_result(buffer)
        return done
    stream = state.stream_for(buffer.device)
    # The bucket was written on the backward's stream: the call starts after that work.
    stream.wait_stream(torch.cuda.current_stream(buffer.device))
    with torch.cuda.stream(stream):
        state.comm.all_reduce(buffer, op="avg", codec=codec)
        # NOTE: a CUDA-aware future records an event on the current stream (this one) when its
        # result is set; whoever waits on it makes its own stream wait for that event. The
        # buffer is the caller's and outlives the call (DDP's bucket, GradSync's bucket).
        done = torch.futures.Future(devices=[buffer.device])
        done.set_result(buffer)
    return done


def qgrad_hook(state, bucket):
    """Averages the bucket with state's codec (Qgrad int4 with error feedback by default)."""
    return _average(state, bucket, state.codec_for(bucket.index(), bucket.buffer()))


def lossless_hook(state, bucket):
    """Averages the bucket through the lossless codec whatever state's codec is."""
    return _average(state, bucket, _LOSSLESS)


def plain_hook(state, bucket):
    """Averages the bucket uncompressed through cclz (what DDP's own hook computes): the
    baseline that runs through the same code as the compressed hooks."""
    return _average(state, bucket, None)
