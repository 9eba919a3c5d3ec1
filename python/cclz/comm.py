"""cclz.Communicator: compressed collectives on torch tensors, with torch.distributed's names and
argument order. CUDA tensors go over NCCL on the current stream (no host synchronization on the
data path); CPU tensors over MPI (every call returns complete).

Arguments are checked here before any rank moves data: a wrong size, dtype, device or layout
raises ValueError and leaves the tensors unchanged. What only the ranks together can see (a
mismatched shape or codec across ranks) is checked by cclz itself and raises CclzError on every
rank instead of hanging.
"""
import ctypes
import functools
import os

import torch

from . import _capi
from .codecs import Lossless, Qgrad

_DTYPES = {
    torch.int8: 0,
    torch.uint8: 1,
    torch.int32: 2,
    torch.int64: 4,
    torch.float16: 6,
    torch.float32: 7,
    torch.float64: 8,
    torch.bfloat16: 9,
}
_OPS = {"sum": 0, "avg": 4}
# codec="auto": the lossless codec on an adaptive communicator, which runs each kind of call
# compressed or plain, whichever its trials found faster. Exact either way.
_AUTO = Lossless()
_LOSSLESS_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# The current stream's cudaStream_t as an int, without making a torch.cuda.Stream object (a few
# microseconds a call); torch's private binding, so looked up, with the public one as fallback.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _dtype(t):
    try:
        return _DTYPES[t.dtype]
    except KeyError:
        raise ValueError(f"dtype {t.dtype} is not supported (supported: "
                         f"{', '.join(str(d) for d in _DTYPES)})") from None


def _op(op):
    code = _OPS.get(op) if isinstance(op, str) else None
    if code is not None:
        return code
    name = getattr(op, "name", op)  # torch.distributed.ReduceOp.SUM or "sum"
    key = str(name).lower().replace("reduceop.", "")
    if key not in _OPS:
        raise ValueError(f"reduction {op!r}: expected 'sum' or 'avg'")
    return _OPS[key]


class Communicator:
    """A cclz communicator over a fixed set of ranks. Create it with from_mpi (CPU tensors, under
    mpirun) or from_group (a torch.distributed group: NCCL for CUDA tensors, MPI for CPU ones).
    close() frees it; a closed communicator raises ValueError."""

    def __init__(self, handle, device, adaptive=True):
        self._handle = handle
        self._address = handle.value  # the handle as the hot calls take it (an int)
        # The calls on a training step's path (_capi.calls: cclz._fastcall where built, else
        # ctypes), every argument an int.
        self._calls = _capi.calls
        self.device = torch.device(device)
        self.adaptive = adaptive  # whether calls may run plain where that is faster
        self._device_index = self.device.index if self.device.type == "cuda" else -1
        self._configs = {}  # id(codec) -> (codec, its cclzCodecConfig_t), built once
        self._stream = self._stream_function()
        n, r = ctypes.c_int(), ctypes.c_int()
        _capi.check("cclzCommCount", handle, ctypes.byref(n), comm=handle)
        _capi.check("cclzCommUserRank", handle, ctypes.byref(r), comm=handle)
        self.size, self.rank = n.value, r.value

    # ---- creation -------------------------------------------------------------------------
    @classmethod
    def from_mpi(cls, mpi_comm=None, adaptive=None):
        """A host communicator over an mpi4py communicator (default: COMM_WORLD), for CPU
        tensors. cclz duplicates it; the caller keeps its own."""
        from mpi4py import MPI

        mpi_comm = MPI.COMM_WORLD if mpi_comm is None else mpi_comm
        handle = ctypes.c_void_p(MPI._handleof(mpi_comm))  # an MPI_Comm, as libmpi holds it
        if ctypes.sizeof(ctypes.c_void_p) != MPI._sizeof(MPI.Comm):
            raise RuntimeError("this MPI's MPI_Comm is not pointer-sized; cclz expects Open MPI "
                               "or MPICH")
        comm = ctypes.c_void_p()
        _capi.check("cclzCommInitFromMpiConfig", ctypes.byref(comm), ctypes.byref(handle),
                    ctypes.byref(_comm_config(adaptive)))
        return cls(comm, "cpu", _resolve_adaptive(adaptive))

    @classmethod
    def from_group(cls, group=None, device=None, adaptive=None):
        """A communicator over the ranks of a torch.distributed group (default: the world), in
        the group's rank order. device: a CUDA device (default: the current one, when the
        backend is NCCL) makes an NCCL communicator, its unique id broadcast over the group;
        'cpu' makes an MPI one over the same ranks (the job must run under mpirun)."""
        import torch.distributed as dist

        group = group if group is not None else dist.group.WORLD
        if device is None:
            device = "cuda" if dist.get_backend(group) == "nccl" else "cpu"
        device = torch.device(device)
        if device.type == "cpu":
            from mpi4py import MPI

            ranks = dist.get_process_group_ranks(group)
            world = MPI.COMM_WORLD
            if world.Get_size() != dist.get_world_size():
                raise RuntimeError("from_group with CPU tensors needs the job to run under mpirun "
                                   "with one MPI rank per torch.distributed rank")
            sub = world.Create_group(world.Get_group().Incl(ranks))
            try:
                return cls.from_mpi(sub, adaptive=adaptive)
            finally:
                sub.Free()
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        uid = _capi.UniqueId()
        if dist.get_rank(group) == 0:
            _capi.check("cclzGetUniqueId", ctypes.byref(uid))
        # All 128 bytes (uid.internal would stop at the first zero byte, as char arrays do).
        raw = ctypes.string_at(ctypes.addressof(uid), _capi.UNIQUE_ID_BYTES)
        payload = torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(device)
        dist.broadcast(payload, src=dist.get_global_rank(group, 0), group=group)
        ctypes.memmove(ctypes.addressof(uid), bytes(payload.cpu().tolist()),
                       _capi.UNIQUE_ID_BYTES)
        comm = ctypes.c_void_p()
        with torch.cuda.device(device):
            _capi.check("cclzCommInitRankConfig", ctypes.byref(comm), dist.get_world_size(group),
                        uid, dist.get_rank(group), ctypes.byref(_comm_config(adaptive)))
        return cls(comm, device, _resolve_adaptive(adaptive))

    def close(self):
        """Frees the communicator (collective: every rank calls it). Idempotent. Drop the CUDA
        graphs that captured its calls first: NCCL's destroy waits for them."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            _capi.check("cclzCommDestroy", handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def handle(self):
        if self._handle is None:
            raise ValueError("the communicator is closed")
        return self._handle

    def check_async_error(self):
        """Raises CclzError if work already queued by this communicator failed on the GPU: a
        received frame that did not decode, or a NaN/Inf that a qgrad encode met (the call that
        queued it returned before the GPU ran it). Nothing is raised for work still running.
        On a host (MPI) communicator such errors are raised by the call itself."""
        code = ctypes.c_int()
        self._call("cclzCommGetAsyncError", self.handle, ctypes.byref(code))
        if code.value != _capi.SUCCESS:
            raise _capi.CclzError("cclzCommGetAsyncError", code.value,
                                  _capi.last_error(self._handle))

    def last_path(self):
        """How the last call ran: ('compressed' | 'plain', decided). After an overlapped GEMM
        that ran serially (last_ran_serial()), how its collective ran."""
        return self._last_path()[:2]

    def last_ran_serial(self):
        """Whether the last call was an overlapped GEMM that an adaptive communicator ran as its
        GEMM and its collective one after the other (docs/overlap.md, "Adaptive calls")."""
        return self._last_path()[2]

    def _last_path(self):
        path, decided = ctypes.c_int(), ctypes.c_int()
        self._call("cclzCommGetLastPath", self.handle, ctypes.byref(path), ctypes.byref(decided))
        return (("plain" if path.value & 1 else "compressed"), bool(decided.value),
                bool(path.value & 2))

    # ---- collectives ----------------------------------------------------------------------
    def all_gather_into_tensor(self, output, input, codec=None):
        """output (size x input's elements, rank r's at [r * n, (r + 1) * n)) = every rank's
        input, in rank order."""
        dtype = self._check_pair(output, input)
        n = input.numel()
        if output.numel() != n * self.size:
            raise ValueError(f"all_gather_into_tensor: output has {output.numel()} elements, "
                             f"expected {self.size} x {n}")
        config = None if codec is None else self._codec(codec, input.dtype, feedback_ok=False)
        code = self._calls.cclzAllGather(input.data_ptr(), output.data_ptr(), n, dtype,
                                         self._address, config, self._stream())
        if code:
            self._raise("cclzAllGather", code)

    def reduce_scatter_tensor(self, output, input, op="sum", codec=None):
        """output = block `rank` of the element-wise reduction of every rank's input (input has
        size x output's elements). With Qgrad(feedback=...), the residual covers input."""
        dtype = self._check_pair(output, input)
        n = output.numel()
        if input.numel() != n * self.size:
            raise ValueError(f"reduce_scatter_tensor: input has {input.numel()} elements, "
                             f"expected {self.size} x {n}")
        config, feedback = self._codec_and_feedback(codec, input)
        args = (input.data_ptr(), output.data_ptr(), n, dtype, _op(op), self._address, config)
        if feedback is None:
            code = self._calls.cclzReduceScatter(*args, self._stream())
        else:
            code = self._calls.cclzReduceScatterFeedback(*args, feedback, self._stream())
        if code:
            self._raise("cclzReduceScatter" if feedback is None else "cclzReduceScatterFeedback",
                        code)

    def all_reduce(self, tensor, op="sum", codec=None):
        """tensor = the element-wise reduction of every rank's tensor, in place; every rank gets
        the same bits. With Qgrad(feedback=...), the residual covers tensor."""
        dtype = self._check_tensors(tensor)
        config, feedback = self._codec_and_feedback(codec, tensor)
        data = tensor.data_ptr()
        args = (data, data, tensor.numel(), dtype, _op(op), self._address, config)
        if feedback is None:
            code = self._calls.cclzAllReduce(*args, self._stream())
        else:
            code = self._calls.cclzAllReduceFeedback(*args, feedback, self._stream())
        if code:
            self._raise("cclzAllReduce" if feedback is None else "cclzAllReduceFeedback", code)

    def all_to_all_single(self, output, input, codec=None):
        """Equal splits: block p of input (input.numel() / size elements) goes to rank p, and
        block p of output comes from rank p."""
        dtype = self._check_pair(output, input)
        if input.numel() != output.numel() or input.numel() % self.size:
            raise ValueError(f"all_to_all_single: input and output must have the same number of "
                             f"elements, a multiple of {self.size} (got {input.numel()} and "
                             f"{output.numel()})")
        config = self._codec(codec, input.dtype, feedback_ok=False)
        code = self._calls.cclzAllToAll(input.data_ptr(), output.data_ptr(),
                                        input.numel() // self.size, dtype, self._address, config,
                                        self._stream())
        if code:
            self._raise("cclzAllToAll", code)

    def send(self, tensor, dst, codec=None):
        """Sends tensor to rank dst, which calls recv with a tensor of the same size and dtype."""
        dtype = self._check_tensors(tensor)
        self._check_peer(dst)
        config = self._codec(codec, tensor.dtype, feedback_ok=False)
        code = self._calls.cclzSend(tensor.data_ptr(), tensor.numel(), dtype, dst, self._address,
                                    config, self._stream())
        if code:
            self._raise("cclzSend", code)

    def recv(self, tensor, src, codec=None):
        """Receives into tensor what rank src sends."""
        dtype = self._check_tensors(tensor)
        self._check_peer(src)
        config = self._codec(codec, tensor.dtype, feedback_ok=False)
        code = self._calls.cclzRecv(tensor.data_ptr(), tensor.numel(), dtype, src, self._address,
                                    config, self._stream())
        if code:
            self._raise("cclzRecv", code)

    # ---- tensor-parallel GEMMs with their communication in peer-to-peer steps ---------------
    def all_gather_matmul(self, output, input, weight, gathered=None, codec=None,
                          transpose_weight=True, bias=None):
        """output = (the ranks' input rows gathered in rank order) @ weight.T + bias: input is
        this rank's m x k rows, weight n x k (a Linear's; transpose_weight=False: k x n), output
        size * m x n, bias (optional) n values added in the GEMM's epilogue, as F.linear adds
        them. The gather runs in peer-to-peer steps against row chunks of the product
        (docs/overlap.md). gathered (size * m x k), if given, receives the gathered input. codec:
        None or cclz.Fp8() (each rank's rows one frame, decoded by every rank)."""
        tensors = ((output, input, weight) + (() if gathered is None else (gathered,)) +
                   (() if bias is None else (bias,)))
        dtype = self._check_tensors(*tensors)
        m, k, n = self._matmul_shape("all_gather_matmul", input, weight, transpose_weight)
        self._check_shape("all_gather_matmul: output", output, (self.size * m, n))
        if gathered is not None:
            self._check_shape("all_gather_matmul: gathered", gathered, (self.size * m, k))
        if bias is not None:
            self._check_shape("all_gather_matmul: bias", bias, (n,))
        config = self._codec(codec, input.dtype, feedback_ok=False)
        self._call("cclzAllGatherMatmul", input.data_ptr(), weight.data_ptr(),
                   None if bias is None else bias.data_ptr(), output.data_ptr(),
                   None if gathered is None else gathered.data_ptr(), m, n, k,
                   1 if transpose_weight else 0, dtype, self._handle, config, self._stream())

    def matmul_reduce_scatter(self, output, input, weight, op="sum", codec=None,
                              transpose_weight=True):
        """output = this rank's m rows of the sum over the ranks of input @ weight.T: input is
        size * m x k, weight n x k (transpose_weight=False: k x n), output m x n; op "sum" or
        "avg". Each destination's rows are computed and sent in turn, this rank's own last
        (docs/overlap.md). codec: None or cclz.Fp8() (each partial one frame)."""
        dtype = self._check_tensors(output, input, weight)
        rows, k, n = self._matmul_shape("matmul_reduce_scatter", input, weight, transpose_weight)
        if rows % self.size:
            raise ValueError(f"matmul_reduce_scatter: input has {rows} rows, not a multiple of "
                             f"{self.size} ranks")
        m = rows // self.size
        self._check_shape("matmul_reduce_scatter: output", output, (m, n))
        config = self._codec(codec, input.dtype, feedback_ok=False)
        self._call("cclzMatmulReduceScatter", input.data_ptr(), weight.data_ptr(),
                   output.data_ptr(), m, n, k,
                   1 if transpose_weight else 0, dtype, _op(op), self._handle, config,
                   self._stream())

    @staticmethod
    def _matmul_shape(name, input, weight, transpose_weight):
        """(rows of input, k, n) of input @ op(weight), or ValueError."""
        if input.dim() != 2 or weight.dim() != 2:
            raise ValueError(f"{name}: input and weight must be 2-D (got {input.dim()}-D and "
                             f"{weight.dim()}-D; reshape the input to rows x features)")
        n, wk = weight.shape if transpose_weight else (weight.shape[1], weight.shape[0])
        if wk != input.shape[1]:
            raise ValueError(f"{name}: input has {input.shape[1]} columns, the weight "
                             f"{'n x k' if transpose_weight else 'k x n'} has k = {wk}")
        return input.shape[0], input.shape[1], n

    @staticmethod
    def _check_shape(name, t, shape):
        if tuple(t.shape) != tuple(shape):
            raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {tuple(shape)}")

    # ---- checks ---------------------------------------------------------------------------
    def _check_tensors(self, *tensors):
        """The tensors' cclzDataType_t, once they are checked to be contiguous tensors of one
        supported dtype on the communicator's device. On every call's path, so kept to cheap
        attribute reads (docs/python.md, "Call overhead"): no isinstance, no tensor.device
        objects; a non-tensor fails on its first attribute read."""
        if self._handle is None:
            raise ValueError("the communicator is closed")
        index = self._device_index
        try:
            dtype = tensors[0].dtype
            for t in tensors:
                # get_device() is -1 on the CPU (and for meta tensors: is_cpu tells them apart).
                if (t.dtype is not dtype or not t.is_contiguous() or t.get_device() != index
                        or (index < 0 and not t.is_cpu)):
                    self._tensor_error(t, dtype)
        except AttributeError:
            bad = next((t for t in tensors if not isinstance(t, torch.Tensor)), None)
            if bad is None:
                raise
            raise ValueError(f"expected a torch.Tensor, got {type(bad).__name__}") from None
        code = _DTYPES.get(dtype)
        if code is None:
            _dtype(tensors[0])  # raises, naming the supported dtypes
        return code

    def _check_pair(self, a, b):
        """_check_tensors(a, b) unrolled for the calls with two tensors (an output and an input):
        the same checks without the loop and the argument tuple, which the call's overhead
        measures (docs/python.md, "Call overhead"). Any failure goes to _check_tensors, which
        finds it and says what it is."""
        index = self._device_index
        try:
            dtype = a.dtype
            ok = (b.dtype is dtype and a.is_contiguous() and b.is_contiguous()
                  and a.get_device() == index and b.get_device() == index
                  and (index >= 0 or (a.is_cpu and b.is_cpu)))
        except AttributeError:
            ok = False
        code = _DTYPES.get(dtype) if ok else None
        if code is None or self._handle is None:
            return self._check_tensors(a, b)  # raises
        return code

    def _tensor_error(self, t, dtype):
        if t.dtype is not dtype:
            raise ValueError(f"tensors of different dtypes: {dtype} and {t.dtype}")
        if not t.is_contiguous():
            raise ValueError("tensors must be contiguous (call .contiguous() first)")
        raise ValueError(f"tensor on {t.device}, the communicator is on {self.device}")

    def _check_peer(self, peer):
        if not 0 <= peer < self.size or peer == self.rank:
            raise ValueError(f"peer {peer}: expected another rank in [0, {self.size})")

    def _codec(self, codec, dtype, feedback_ok):
        """The address of the cclzCodecConfig_t for codec (None: plain data), built once per
        codec and kept alive in self._configs."""
        if codec is None:
            return None
        # A codec object met before (the common case: a layer's or policy's own), checked as it
        # was the first time: its entry says whether it carries feedback.
        entry = self._configs.get(id(codec))
        if entry is not None and entry[0] is codec and (feedback_ok or not entry[3]):
            return entry[1]
        if isinstance(codec, str):
            if codec != "auto":
                raise ValueError(f"codec {codec!r}: expected None, 'auto', cclz.Lossless(), "
                                 "cclz.Fp8() or cclz.Qgrad()")
            if not self.adaptive:
                raise ValueError("codec='auto' is the adaptive choice between the lossless codec "
                                 "and plain data; this communicator was made with adaptive=False")
            if dtype not in _LOSSLESS_DTYPES:
                return None  # the codec does not take it: plain data, as the choice would be
            codec = _AUTO
        elif not hasattr(codec, "config"):
            raise ValueError(f"codec {codec!r}: expected None, 'auto', cclz.Lossless(), "
                             "cclz.Fp8() or cclz.Qgrad()")
        if not feedback_ok and getattr(codec, "feedback", None) is not None:
            raise ValueError("error feedback applies to reductions (all_reduce, "
                             "reduce_scatter_tensor) only")
        # Keyed by identity (a dataclass's hash reads every field): the caller's codec object,
        # kept in the entry so that its id cannot be reused while the entry lives.
        entry = self._configs.get(id(codec))
        if entry is None or entry[0] is not codec:
            if len(self._configs) >= 256:  # codecs made per call (a new Feedback each time)
                self._configs.clear()
            config = codec.config()
            has_feedback = getattr(codec, "feedback", None) is not None
            entry = self._configs[id(codec)] = (codec, ctypes.addressof(config), config,
                                                has_feedback)
        return entry[1]

    def _codec_and_feedback(self, codec, data):
        config = self._codec(codec, data.dtype, feedback_ok=True)
        feedback = getattr(codec, "feedback", None) if isinstance(codec, Qgrad) else None
        if feedback is None:
            return config, None
        if feedback is True:
            raise ValueError("Qgrad(feedback=True) asks for a state per gradient bucket (the DDP "
                             "hook makes them); a call takes a cclz.Feedback")
        if feedback.numel != data.numel():
            raise ValueError(f"Qgrad feedback holds {feedback.numel} values, the data has "
                             f"{data.numel()}")
        if feedback.device != (data.device.type == "cuda"):
            raise ValueError("Qgrad feedback must live where the data does (Feedback(device=...))")
        return config, feedback.handle.value

    def _stream_function(self):
        """A function of no arguments giving the current CUDA stream of the communicator's
        device as the address ctypes passes (None on the CPU). Made once: a call's path pays
        one C call for it."""
        if self._device_index < 0:
            return _no_stream
        if _raw_stream is not None:
            return functools.partial(_raw_stream, self._device_index)
        return lambda: torch.cuda.current_stream(self.device).cuda_stream

    def _call(self, name, *args):
        code = getattr(_capi.lib, name)(*args)
        if code != _capi.SUCCESS:
            self._raise(name, code)

    def _raise(self, name, code):
        raise _capi.CclzError(name, code, _capi.last_error(self._handle))


def _no_stream():
    return None


def _resolve_adaptive(adaptive):
    """What CCLZ_ADAPTIVE_DEFAULT resolves to in the library: the environment's CCLZ_ADAPTIVE,
    else adaptive."""
    if adaptive is not None:
        return bool(adaptive)
    return os.environ.get("CCLZ_ADAPTIVE", "1") != "0"


def _comm_config(adaptive):
    config = _capi.CommConfig.initializer()
    if adaptive is not None:
        config.adaptive = 1 if adaptive else 0
    return config
