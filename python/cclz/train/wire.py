"""How many bytes cclz kept off the wire: a communicator wrapper that counts, per call, the bytes
this rank would send uncompressed and an estimate of what it sent, from the message size, the
collective's traffic pattern and the codec's nominal size. Cheap (no extra synchronization, no
look at the frames); calls that cclz ran on plain data (adaptive communicators choose that where
it is faster) count as uncompressed.
"""
from ..codecs import Fp8, Lossless, Qgrad

# Nominal encoded size per value, in bytes, from the formats (include/cclz/cclz.h):
FP8_BYTES = 1.02          # one code per value, a fine scale per 64 values, a coarse one per row
LOSSLESS_EXPONENT_BITS = 2.7  # exponents entropy-coded: 1.49x on Gaussian bf16 (16 -> 10.7 bits)


def encoded_fraction(codec, element_bytes):
    """The estimated encoded size over the raw size of one value."""
    if codec is None:
        return 1.0
    if isinstance(codec, Fp8):
        return min(1.0, FP8_BYTES / element_bytes)
    if isinstance(codec, Qgrad):
        return min(1.0, (codec.bits / 8 + 2 / codec.block_elems) / element_bytes)
    if isinstance(codec, Lossless) or codec == "auto":  # auto: lossless where it runs compressed
        bits = 8 * element_bytes
        return (bits - 8 + LOSSLESS_EXPONENT_BITS) / bits
    return 1.0


class MeteredComm:
    """A cclz.Communicator that counts its traffic; everything else passes through.
    raw_bytes: what this rank would have sent uncompressed; sent_bytes: the estimate of what it
    sent."""

    def __init__(self, comm):
        self.comm = comm
        self.raw_bytes = 0.0
        self.sent_bytes = 0.0
        self.overlap_calls = 0  # overlapped GEMM calls, and those an adaptive comm ran serially
        self.overlap_serial = 0

    def __getattr__(self, name):
        return getattr(self.comm, name)

    def _count(self, tensor, raw_units, codec):
        raw = raw_units * tensor.numel() * tensor.element_size()
        fraction = encoded_fraction(codec, tensor.element_size())
        if (codec is not None and fraction < 1.0
                and self.comm.last_path()[0] == "plain"):
            fraction = 1.0
        self.raw_bytes += raw
        self.sent_bytes += raw * fraction

    # Bytes one rank sends, as multiples of the tensor passed: an all-gather sends its input to
    # n - 1 ranks, a reduce-scatter n - 1 chunks of its output's size, an all-reduce is both on
    # 1/n of the data.
    def all_gather_into_tensor(self, output, input, codec=None):
        self.comm.all_gather_into_tensor(output, input, codec=codec)
        self._count(input, self.size - 1, codec)

    def reduce_scatter_tensor(self, output, input, op="sum", codec=None):
        self.comm.reduce_scatter_tensor(output, input, op=op, codec=codec)
        self._count(output, self.size - 1, codec)

    def all_reduce(self, tensor, op="sum", codec=None):
        self.comm.all_reduce(tensor, op=op, codec=codec)
        self._count(tensor, 2 * (self.size - 1) / self.size, codec)

    def send(self, tensor, dst, codec=None):
        self.comm.send(tensor, dst, codec=codec)
        self._count(tensor, 1, codec)

    def recv(self, tensor, src, codec=None):
        self.comm.recv(tensor, src, codec=codec)

    # The overlapped GEMMs move what the all-gather and the reduce-scatter would: through their
    # codec where they ran overlapped, else as their serial collective ran (last_path).
    def all_gather_matmul(self, output, input, weight, gathered=None, codec=None,
                          transpose_weight=True, bias=None):
        self.comm.all_gather_matmul(output, input, weight, gathered=gathered, codec=codec,
                                    transpose_weight=transpose_weight, bias=bias)
        self._count(input, self.size - 1, codec)
        self._count_overlap()

    def matmul_reduce_scatter(self, output, input, weight, op="sum", codec=None,
                              transpose_weight=True):
        self.comm.matmul_reduce_scatter(output, input, weight, op=op, codec=codec,
                                        transpose_weight=transpose_weight)
        self._count(output, self.size - 1, codec)
        self._count_overlap()

    def _count_overlap(self):
        self.overlap_calls += 1
        self.overlap_serial += int(self.comm.last_ran_serial())
