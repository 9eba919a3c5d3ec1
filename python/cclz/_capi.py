"""The C API of libcclz through ctypes: the library, its structs, its functions, and the check
that turns a failing result code into CclzError.

Nothing here is compiled against torch (the way vLLM binds NCCL): any torch works with the same
library. Which library loads: $CCLZ_LIBRARY if set, else the libcclz.so installed inside this
package (pip install .), else one in a build folder of the source tree (build*/src/).

The calls on a training step's path (`calls`) go through cclz._fastcall, a module compiled
against Python alone (src/python/fastcall.c), where it was built: ctypes costs ~1.5 us a call.
Otherwise, or with CCLZ_FASTCALL=0, through ctypes. Both take the same plain ints.
"""
import ctypes
import glob
import importlib.machinery
import importlib.util
import os
import types

# torch first: libcclz links NCCL (libnccl.so.2), and the process must hold one NCCL, the one
# torch ships with. Loaded first, libcclz's would be the one torch's libraries then bind to.
import torch  # noqa: F401

# The header's version (include/cclz/cclz.h); the library must have the same major.minor.
VERSION_CODE = 300
CONFIG_MAGIC = 0xCC12C0DE
UNIQUE_ID_BYTES = 128

SUCCESS = 0
RESULT_NAMES = {
    0: "cclzSuccess",
    1: "cclzUnhandledCudaError",
    2: "cclzSystemError",
    3: "cclzInternalError",
    4: "cclzInvalidArgument",
    5: "cclzInvalidUsage",
    6: "cclzCorruptFrame",
    7: "cclzNotSupported",
    8: "cclzBufferTooSmall",
}


class CclzError(RuntimeError):
    """A failing cclz call: `code` is the cclzResult_t, `message` cclz's own text."""

    def __init__(self, call, code, message):
        self.call = call
        self.code = code
        self.message = message
        name = RESULT_NAMES.get(code, f"result {code}")
        super().__init__(f"{call}: {name}: {message}" if message else f"{call}: {name}")


class CodecConfig(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint),
        ("version", ctypes.c_uint),
        ("codec", ctypes.c_int),
        ("chunkElems", ctypes.c_int),
        ("bits", ctypes.c_int),
        ("blockElems", ctypes.c_int),
        ("rounding", ctypes.c_int),
        ("seed", ctypes.c_uint64),
        ("fp8Format", ctypes.c_int),
        ("fp8RowElems", ctypes.c_int),
        ("fp8HadamardSize", ctypes.c_int),
        ("fp8Rotation", ctypes.c_int),
        ("fp8RotateThreshold", ctypes.c_int),
        ("fp8ScaleCandidates", ctypes.c_int),
    ]

    @classmethod
    def initializer(cls):
        """CCLZ_CODEC_CONFIG_INITIALIZER: lossless, every parameter at its default."""
        return cls(size=ctypes.sizeof(cls), magic=CONFIG_MAGIC, version=VERSION_CODE, codec=1)


class CommConfig(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint),
        ("version", ctypes.c_uint),
        ("asyncCalls", ctypes.c_int),
        ("adaptive", ctypes.c_int),
    ]

    @classmethod
    def initializer(cls):
        """CCLZ_COMM_CONFIG_INITIALIZER (adaptive: the environment's CCLZ_ADAPTIVE, else 1)."""
        return cls(size=ctypes.sizeof(cls), magic=CONFIG_MAGIC, version=VERSION_CODE,
                   asyncCalls=0, adaptive=-1)


class BuildInfo(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_int),
        ("hasCuda", ctypes.c_int),
        ("hasNccl", ctypes.c_int),
        ("hasMpi", ctypes.c_int),
        ("cudaRuntimeVersion", ctypes.c_int),
        ("cudaArchs", ctypes.c_char * 64),
        ("compiler", ctypes.c_char * 64),
    ]


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


_p = ctypes.c_void_p
_size = ctypes.c_size_t
_int = ctypes.c_int
_result = ctypes.c_int
# A codec configuration is passed by its address (a CodecConfig kept alive by the caller), as
# an int: the one form that both bindings of the hot calls take.
_cfg = _p

# name: (argument types); every function returns cclzResult_t but the two that return text.
_SIGNATURES = {
    "cclzGetVersion": [ctypes.POINTER(_int)],
    "cclzGetBuildInfo": [ctypes.POINTER(BuildInfo)],
    "cclzCodecCreate": [ctypes.POINTER(_p), ctypes.POINTER(CodecConfig)],
    "cclzCodecDestroy": [_p],
    "cclzCodecMaxEncodedSize": [_p, _size, _int, ctypes.POINTER(_size)],
    "cclzEncodeHost": [_p, _p, _size, _int, _p, _size, ctypes.POINTER(_size)],
    "cclzDecodeHost": [_p, _p, _size, _p, _size, _int],
    "cclzGetUniqueId": [ctypes.POINTER(UniqueId)],
    "cclzCommInitRankConfig": [ctypes.POINTER(_p), _int, UniqueId, _int,
                               ctypes.POINTER(CommConfig)],
    "cclzCommInitFromMpiConfig": [ctypes.POINTER(_p), _p, ctypes.POINTER(CommConfig)],
    "cclzCommDestroy": [_p],
    "cclzCommAbort": [_p],
    "cclzCommCount": [_p, ctypes.POINTER(_int)],
    "cclzCommUserRank": [_p, ctypes.POINTER(_int)],
    "cclzCommGetAsyncError": [_p, ctypes.POINTER(_result)],
    "cclzCommGetLastPath": [_p, ctypes.POINTER(_int), ctypes.POINTER(_int)],
    "cclzAllGather": [_p, _p, _size, _int, _p, _cfg, _p],
    "cclzReduceScatter": [_p, _p, _size, _int, _int, _p, _cfg, _p],
    "cclzAllGatherMatmul": [_p, _p, _p, _p, _p, _size, _size, _size, _int, _int, _p,
                            _cfg, _p],
    "cclzMatmulReduceScatter": [_p, _p, _p, _size, _size, _size, _int, _int, _int, _p,
                                _cfg, _p],
    "cclzAllReduce": [_p, _p, _size, _int, _int, _p, _cfg, _p],
    "cclzReduceScatterFeedback": [_p, _p, _size, _int, _int, _p, _cfg,
                                  _p, _p],
    "cclzAllReduceFeedback": [_p, _p, _size, _int, _int, _p, _cfg, _p, _p],
    "cclzAllToAll": [_p, _p, _size, _int, _p, _cfg, _p],
    "cclzSend": [_p, _size, _int, _int, _p, _cfg, _p],
    "cclzRecv": [_p, _size, _int, _int, _p, _cfg, _p],
    "cclzFeedbackCreate": [ctypes.POINTER(_p), _size, _int],
    "cclzFeedbackCreateWithDtype": [ctypes.POINTER(_p), _size, _int, _int],
    "cclzFeedbackDestroy": [_p],
    "cclzFeedbackReset": [_p, _p],
}


def _candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libcclz.so")
    source_root = os.path.dirname(os.path.dirname(here))
    for found in sorted(glob.glob(os.path.join(source_root, "build*", "src", "libcclz.so"))):
        yield found


def _open(path):
    """The library at path with its signatures set, and its version code."""
    lib = ctypes.CDLL(path)
    lib.cclzGetErrorString.restype = ctypes.c_char_p
    lib.cclzGetErrorString.argtypes = [_int]
    lib.cclzGetLastError.restype = ctypes.c_char_p
    lib.cclzGetLastError.argtypes = [_p]
    for name, args in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = _result
    version = _int()
    lib.cclzGetVersion(ctypes.byref(version))
    return lib, version.value


def _load():
    path = os.environ.get("CCLZ_LIBRARY")
    if path:
        if not os.path.isfile(path):
            raise ImportError(f"CCLZ_LIBRARY={path}: no such file")
        candidates = [path]
    else:
        candidates = [p for p in _candidates() if os.path.isfile(p)]
        if not candidates:
            raise ImportError("libcclz.so not found: install the package (pip install .), or "
                              "set CCLZ_LIBRARY to the library's path")
    # A source tree may hold build folders of other versions: the first that matches is taken.
    refused = []
    for candidate in candidates:
        lib, version = _open(candidate)
        if version // 100 == VERSION_CODE // 100:
            return lib, candidate
        refused.append(f"{candidate} is cclz {version}")
    raise ImportError(f"this package binds cclz {VERSION_CODE} (major.minor must match): "
                      + "; ".join(refused))


lib, library_path = _load()

# ---- the calls on a training step's path -----------------------------------------------------
# Every argument a plain int (data pointers, the communicator and feedback handles' addresses, a
# codec configuration's address, the stream) or None for NULL; each returns the result code.
HOT_CALLS = ("cclzAllGather", "cclzAllToAll", "cclzReduceScatter", "cclzAllReduce",
             "cclzReduceScatterFeedback", "cclzAllReduceFeedback", "cclzSend", "cclzRecv")


def _ctypes_calls():
    """The hot calls through ctypes: function objects of their own (lib[name] makes a new one),
    with the signatures above."""
    calls = {}
    for name in HOT_CALLS:
        fn = lib[name]
        fn.argtypes = _SIGNATURES[name]
        fn.restype = _result
        calls[name] = fn
    return types.SimpleNamespace(**calls)


def _fastcall_module():
    """cclz._fastcall built for this Python: inside the package (pip install .), else beside
    the library that loaded (a build tree's src/); None where it was not built."""
    try:
        from . import _fastcall
        return _fastcall
    except ImportError:
        pass
    folder = os.path.dirname(os.path.abspath(library_path))
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, "_fastcall" + suffix)
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("cclz._fastcall", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    return None


def _fast_calls():
    """The hot calls through cclz._fastcall, bound to this library's functions; None where the
    module was not built or CCLZ_FASTCALL=0."""
    setting = os.environ.get("CCLZ_FASTCALL", "1")
    if setting not in ("0", "1"):
        raise ImportError(f"CCLZ_FASTCALL={setting}: expected 1 (the default) or 0 (ctypes)")
    module = _fastcall_module() if setting == "1" else None
    if module is None:
        return None
    for name in HOT_CALLS:
        module.bind(name, ctypes.cast(getattr(lib, name), ctypes.c_void_p).value)
    return types.SimpleNamespace(**{name: getattr(module, name) for name in HOT_CALLS})


ctypes_calls = _ctypes_calls()
fast_calls = _fast_calls()
calls = fast_calls or ctypes_calls
binding = "fastcall" if fast_calls else "ctypes"  # which one `calls` is


def last_error(comm=None):
    text = lib.cclzGetLastError(comm)
    return text.decode("utf-8", "replace") if text else ""


def check(name, *args, comm=None):
    """Calls lib.<name>(*args) and raises CclzError unless it returns cclzSuccess."""
    code = getattr(lib, name)(*args)
    if code != SUCCESS:
        raise CclzError(name, code, last_error(comm))
