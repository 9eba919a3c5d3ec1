/*
 * cclz: compressed collective communication for LLM training.
 *
 * The C API, in NCCL's style: opaque handles, every call returns a cclzResult_t, configuration
 * structs carry their size, a magic number and the API version and are initialized with a macro.
 * No call throws or aborts. After a failure, cclzGetLastError(NULL) gives a one-line message.
 *
 * Threading: a handle (cclzCodec_t) may be used by one thread at a time. Device calls are
 * asynchronous with respect to the host and ordered on the stream the caller passes.
 */
#ifndef CCLZ_CCLZ_H_
#define CCLZ_CCLZ_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CCLZ_API marks what libcclz exports: the library is built with hidden visibility, so the C API
 * below is its only dynamic interface (nm -D libcclz.so lists cclz* functions and nothing else). */
#if defined(CCLZ_BUILDING_LIBRARY) && defined(__GNUC__)
#define CCLZ_API __attribute__((visibility("default")))
#else
#define CCLZ_API
#endif

#define CCLZ_MAJOR 0
#define CCLZ_MINOR 3
#define CCLZ_PATCH 0
/* The version of this header, as cclzGetVersion() reports the library's:
 * MAJOR*10000+MINOR*100+PATCH. */
#define CCLZ_VERSION_CODE (CCLZ_MAJOR * 10000 + CCLZ_MINOR * 100 + CCLZ_PATCH)

/* Enums have an int underlying type in C++ too, so that any int a C or ctypes caller passes is a
 * valid value to test (and reject), not undefined behaviour. */
#ifdef __cplusplus
#define CCLZ_ENUM_INT : int
#else
#define CCLZ_ENUM_INT
#endif

/* The same type as CUDA's cudaStream_t, declared here so that CPU-only users need no CUDA headers.
 * NULL is the legacy default stream. */
typedef struct CUstream_st* cclzStream_t;

typedef enum CCLZ_ENUM_INT {
  cclzSuccess = 0,
  cclzUnhandledCudaError = 1, /* a CUDA call failed */
  cclzSystemError = 2,        /* an operating-system call or allocation failed */
  cclzInternalError = 3,      /* a bug in cclz: please report it */
  cclzInvalidArgument = 4,    /* a NULL pointer, a size that does not fit, an unknown enum value */
  cclzInvalidUsage =
      5, /* a valid argument used the wrong way (e.g. a device call on a build without CUDA) */
  cclzCorruptFrame =
      6, /* a frame failed validation: truncated, corrupt, or not what the call expects */
  cclzNotSupported = 7, /* a dtype a codec does not handle, or a backend this build does not have */
  cclzBufferTooSmall =
      8, /* an output buffer smaller than cclzCodecMaxEncodedSize / the decoded size */
  cclzNumResults = 9
} cclzResult_t;

/* Data types. The numbering is NCCL's, so that ncclDataType_t values convert directly. */
typedef enum CCLZ_ENUM_INT {
  cclzInt8 = 0,
  cclzUint8 = 1,
  cclzInt32 = 2,
  cclzUint32 = 3,
  cclzInt64 = 4,
  cclzUint64 = 5,
  cclzFloat16 = 6,
  cclzFloat32 = 7,
  cclzFloat64 = 8,
  cclzBfloat16 = 9,
  cclzNumTypes = 10
} cclzDataType_t;

typedef enum CCLZ_ENUM_INT {
  cclzCodecNone = 0,     /* the frame carries the bytes as they are (any dtype) */
  cclzCodecLossless = 1, /* exponent entropy coding of bf16/fp16/fp32: bit-exact round trip */
  cclzCodecFp8 = 2,      /* lossy: one 8-bit code per value, dual scales, adaptive Hadamard */
  cclzCodecQgrad = 3, /* gradients: int8/int4/int2 block quantization, for error feedback (lossy) */
  cclzNumCodecs = 4
} cclzCodecType_t;

/* How the qgrad codec rounds a value to a code. */
typedef enum CCLZ_ENUM_INT {
  cclzRoundNearest = 0,   /* to the nearest code, ties to even */
  cclzRoundStochastic = 1 /* up or down with the probabilities that make it unbiased; the draws
                             come from (seed, step, element index), so they are reproducible */
} cclzRounding_t;

/* Where a buffer the library allocates lives. */
typedef enum CCLZ_ENUM_INT { cclzMemoryHost = 0, cclzMemoryDevice = 1 } cclzMemoryType_t;

/* The grid of the fp8 codec's 8-bit codes (docs/formats.md, "fp8"). */
typedef enum CCLZ_ENUM_INT {
  cclzFp8Default = 0, /* E4M3 */
  cclzFp8E4M3 = 1,    /* 3 mantissa bits, up to 448: the precision of activations */
  cclzFp8E5M2 = 2,    /* 2 mantissa bits, up to 57344: more range, less precision */
  cclzFp8Int8 = 3,    /* an integer grid (-126..126), meant for rotated (Gaussianized) blocks */
  cclzNumFp8Formats = 4
} cclzFp8Format_t;

/* When the fp8 codec rotates a row's blocks with a Hadamard transform. */
typedef enum CCLZ_ENUM_INT {
  cclzFp8RotateDefault = 0, /* E4M3/E5M2: never; INT8: always */
  cclzFp8RotateNever = 1,
  cclzFp8RotateAlways = 2,   /* every row without NaN or Inf */
  cclzFp8RotateAdaptive = 3, /* rows whose outlier statistic reaches fp8RotateThreshold */
  cclzNumFp8Rotations = 4
} cclzFp8Rotation_t;

/* A communicator: a group of ranks that run collectives together (see "Communicators"). */
typedef struct cclzComm* cclzComm_t;
typedef struct cclzCodec* cclzCodec_t;

/* ---- Library ------------------------------------------------------------------------------ */

/* *version = CCLZ_VERSION_CODE of the library that is linked. */
CCLZ_API cclzResult_t cclzGetVersion(int* version);

/* A static, human-readable name for a result code. Never NULL. */
CCLZ_API const char* cclzGetErrorString(cclzResult_t result);

/* The message of the last failed call. comm NULL: the last failed call made by this thread.
 * comm given: the last failed call on that communicator (from any thread). An empty string when
 * there was none. Valid until the next call. */
CCLZ_API const char* cclzGetLastError(cclzComm_t comm);

typedef struct {
  size_t size;            /* set by the caller: sizeof(cclzBuildInfo_t) */
  int version;            /* CCLZ_VERSION_CODE of the library */
  int hasCuda;            /* device calls available (CUDA code compiled in) */
  int hasNccl;            /* NCCL transport compiled in */
  int hasMpi;             /* MPI transport compiled in */
  int cudaRuntimeVersion; /* CUDART_VERSION compiled against, 0 without CUDA */
  char cudaArchs[64];     /* CMAKE_CUDA_ARCHITECTURES, e.g. "90a"; empty without CUDA */
  char compiler[64];      /* host compiler and version */
} cclzBuildInfo_t;

/* Fills *info with what this build of the library contains. info->size must be set. */
CCLZ_API cclzResult_t cclzGetBuildInfo(cclzBuildInfo_t* info);

/* ---- Codecs ------------------------------------------------------------------------------- */

#define CCLZ_CONFIG_MAGIC 0xcc12c0deu

typedef struct {
  size_t size;          /* sizeof(cclzCodecConfig_t), set by the initializer */
  unsigned int magic;   /* CCLZ_CONFIG_MAGIC */
  unsigned int version; /* CCLZ_VERSION_CODE */
  cclzCodecType_t codec;
  /* Lossless: elements per independently decodable chunk, 1024, 2048 or 4096; 0 picks 4096.
   * Smaller chunks give more parallelism on small messages, larger ones a slightly better ratio.
   * A device decode needs the chunk size of the handle that encoded; host decoders take any.
   * (The lossless payload has no other parameter: docs/formats.md, "Lossless payload".) */
  int chunkElems;
  /* Qgrad: bits per code, 8, 4 or 2 (2 is ternary: -1, 0, +1 times the block's scale); 0 picks 4.
   * (Qgrad takes its block size from blockElems; chunkElems must be 0.) */
  int bits;
  /* Qgrad: elements per block, which share one bf16 scale: 32, 64, 128 or 256; 0 picks 64.
   * int4 at 64 sends 0.266 of the bf16 bytes (3.76x) and 0.133 of fp32 (7.53x). */
  int blockElems;
  /* Qgrad: cclzRoundNearest (0, the default) or cclzRoundStochastic. */
  cclzRounding_t rounding;
  /* Qgrad, stochastic rounding: the seed of the draws. A rank that knows (seed, step) can
   * reproduce another's choices; give ranks different seeds for independent rounding noise. */
  uint64_t seed;
  /* Fp8: the grid of the codes; 0 (cclzFp8Default) is E4M3. */
  cclzFp8Format_t fp8Format;
  /* Fp8: elements per row, the span of one fp32 coarse scale and of the smoothing's channels:
   * pass the tensor's last dimension (its hidden size). A multiple of 64 and of fp8HadamardSize,
   * at most 2^24; 0: the encoder estimates the channel period from the data (a multiple of 64 in
   * [512, 4096], 1024 when nothing stands out) and the frame records it. */
  int fp8RowElems;
  /* Fp8: values per Hadamard rotation, a power of two in [16, 256]; 0 picks 64. */
  int fp8HadamardSize;
  /* Fp8: when rows are rotated (cclzFp8Rotation_t); 0 picks never for E4M3/E5M2, always for INT8.
   * Where rows may be rotated, the encoder also smooths massive channels (power-of-two per-channel
   * scales, decided from the data) in frames of at least 128 rows. */
  cclzFp8Rotation_t fp8Rotation;
  /* Fp8, adaptive rotation: a row is rotated when the mean over its groups of
   * floor(log2(peak-to-average power)) is at least this, 1..8; 0 picks 4. */
  int fp8RotateThreshold;
  /* Fp8: the fine-scale search window per 64-value block, 1..32 codes from the smallest scale
   * that does not saturate (1: that scale, no search); E4M3 tries the grid-aligned codes of the
   * window (8 of 32), E5M2 and INT8 every code. 0 picks 32 for E4M3/E5M2, 1 for INT8. */
  int fp8ScaleCandidates;
} cclzCodecConfig_t;

#define CCLZ_CODEC_CONFIG_INITIALIZER                                                            \
  {                                                                                              \
    sizeof(cclzCodecConfig_t), CCLZ_CONFIG_MAGIC, CCLZ_VERSION_CODE, cclzCodecLossless, 0, 0, 0, \
        cclzRoundNearest, 0, cclzFp8Default, 0, 0, cclzFp8RotateDefault, 0, 0                    \
  }

/* Creates a codec handle. It holds the configuration and, once a device call needs it, a small
 * device workspace (per-chunk offsets and the decode status), allocated stream-ordered. A
 * handle's device calls share that workspace, and the lossless encoder leaves state in it for
 * the next call: queue them so that each starts after the one before (one stream, or streams
 * ordered by events); use one handle per concurrent stream. Calls captured into a CUDA graph may
 * be replayed between direct calls on the same handle. */
CCLZ_API cclzResult_t cclzCodecCreate(cclzCodec_t* codec, const cclzCodecConfig_t* config);

/* Frees the handle. Device work queued with it must have completed (cclzCodecSynchronize). */
CCLZ_API cclzResult_t cclzCodecDestroy(cclzCodec_t codec);

/* *bytes = the largest frame that encoding count elements of dtype can produce: the capacity a
 * destination buffer needs. Incompressible data (chunks that the code would not shrink are stored)
 * grows by at most 112 + 27 bytes per chunk over count*sizeof(dtype): below 1% + 112 bytes for
 * messages of 4097 elements or more at the default chunking.
 * Fp8 frames have a fixed size: about 1.02 bytes per value (0.51x of bf16) plus 64-byte header
 * and alignment (docs/formats.md, "fp8"). */
CCLZ_API cclzResult_t cclzCodecMaxEncodedSize(cclzCodec_t codec, size_t count, cclzDataType_t dtype,
                                              size_t* bytes);

/* Encodes count elements of dtype from src into one frame at dst, on the device.
 *   src: device memory, count*sizeof(dtype) bytes, aligned to the element size.
 *   dst: device memory, dstCapacity bytes, 16-byte aligned; dstCapacity >= cclzCodecMaxEncodedSize.
 *   encodedBytesDevice: device memory for one size_t that receives the frame's size, or NULL.
 *     The size is also in the frame header and is returned by cclzCodecSynchronize.
 * Asynchronous on stream: no host synchronization; the host may reuse nothing until the stream
 * has passed this point. */
CCLZ_API cclzResult_t cclzEncode(cclzCodec_t codec, const void* src, size_t count,
                                 cclzDataType_t dtype, void* dst, size_t dstCapacity,
                                 size_t* encodedBytesDevice, cclzStream_t stream);

/* Decodes the frame at src (device memory, srcBytes readable, 16-byte aligned) into count
 * elements of dtype at dst (device memory, aligned to 16 bytes). The frame must have been encoded
 * with the same codec configuration, count and dtype. Asynchronous on stream. A frame that fails
 * validation is reported by the next cclzCodecSynchronize as cclzCorruptFrame; the decoder never
 * reads outside [src, src+srcBytes) nor writes outside the count elements of dst. */
CCLZ_API cclzResult_t cclzDecode(cclzCodec_t codec, const void* src, size_t srcBytes, void* dst,
                                 size_t count, cclzDataType_t dtype, cclzStream_t stream);

/* acc[i] += element i of the frame at src, in fp32, for i < count: decoding and reducing in one
 * pass, as a reduce-scatter does with the frame each peer sends. acc: device memory, count floats,
 * 16-byte aligned. Asynchronous on stream; a rejected frame is reported by cclzCodecSynchronize.
 * Codecs without a device path return cclzNotSupported. */
CCLZ_API cclzResult_t cclzDecodeAccumulate(cclzCodec_t codec, const void* src, size_t srcBytes,
                                           float* acc, size_t count, cclzDataType_t dtype,
                                           cclzStream_t stream);

/* Waits until the device work queued with this codec has finished (a host synchronization: keep
 * it off the data path) and reports it. Returns cclzCorruptFrame, with the reason in
 * cclzGetLastError, if a device decode since the previous call rejected its frame, else
 * cclzInvalidArgument if a device qgrad encode since the previous call met a NaN or Inf in its
 * input (docs/formats.md, qgrad, "NaN and Inf"); the errors are then cleared. *lastEncodedBytes
 * (may be NULL) receives the size of the last cclzEncode's frame.
 */
CCLZ_API cclzResult_t cclzCodecSynchronize(cclzCodec_t codec, size_t* lastEncodedBytes);

/* The same codec on host memory, through the CPU reference (identical bytes to the device).
 * Qgrad: a plain encode quantizes src without feedback (stochastic rounding uses step 0); a NaN or
 * Inf returns cclzInvalidArgument after writing the frame and *encodedBytes as cclzEncode would
 * (the device encode reports it at cclzCodecSynchronize). */
CCLZ_API cclzResult_t cclzEncodeHost(cclzCodec_t codec, const void* src, size_t count,
                                     cclzDataType_t dtype, void* dst, size_t dstCapacity,
                                     size_t* encodedBytes);

/* Decodes a host frame. Unlike the device decoder it accepts any chunking the frame declares;
 * count and dtype must match the frame's. */
CCLZ_API cclzResult_t cclzDecodeHost(cclzCodec_t codec, const void* src, size_t srcBytes, void* dst,
                                     size_t count, cclzDataType_t dtype);

/* The same on host memory. A frame that fails validation leaves acc unchanged. */
CCLZ_API cclzResult_t cclzDecodeAccumulateHost(cclzCodec_t codec, const void* src, size_t srcBytes,
                                               float* acc, size_t count, cclzDataType_t dtype);

/* ---- Error feedback (qgrad) ------------------------------------------------------------------ */

/* The error-feedback state of one gradient bucket, kept by the caller from step to step: a
 * residual (what quantization has not yet sent; fp32, or bf16 for half the memory) and a step
 * counter (which numbers the draws of stochastic rounding). One state per bucket and rank; not
 * shared between threads. */
typedef struct cclzFeedback* cclzFeedback_t;

/* Creates the state of a bucket of count elements: the residual zeroed, the step 0. memory says
 * where the residual lives: cclzMemoryHost for cclzEncodeFeedbackHost, cclzMemoryDevice (the
 * current device; allocated and zeroed synchronously, not on the data path) for cclzEncodeFeedback.
 */
CCLZ_API cclzResult_t cclzFeedbackCreate(cclzFeedback_t* feedback, size_t count,
                                         cclzMemoryType_t memory);

/* The same with the residual's dtype: cclzFloat32 (cclzFeedbackCreate's), or cclzBfloat16, which
 * halves the state's memory (2 bytes per gradient element instead of 4). A bf16 residual is
 * rounded to bf16 to nearest even each time it is written; what that rounding drops (a 2^-9
 * relative part of what quantization dropped) is not sent later. */
CCLZ_API cclzResult_t cclzFeedbackCreateWithDtype(cclzFeedback_t* feedback, size_t count,
                                                  cclzMemoryType_t memory,
                                                  cclzDataType_t residualDtype);

/* Frees the state. Device work that uses it must have completed (cclzCodecSynchronize). */
CCLZ_API cclzResult_t cclzFeedbackDestroy(cclzFeedback_t feedback);

/* Zeroes the residual and sets the step to 0 (after a restart without a checkpoint, or when the
 * model's parameters are replaced). Device state: stream-ordered on stream; host: stream ignored.
 */
CCLZ_API cclzResult_t cclzFeedbackReset(cclzFeedback_t feedback, cclzStream_t stream);

/* The state, for checkpoints and inspection: *residual (may be NULL) receives the residual's
 * address (count floats in the state's memory, 16-byte aligned; the caller may read or overwrite it
 * between encodes), *count and *step (may be NULL) the element count and the next encode's step.
 * Asking for the residual's address makes the next plain adaptive call add the residual in even
 * if cclz knew it to be zero (the caller may have written it). A bf16 residual's address is
 * cclzFeedbackGetResidual's (asking for it here is cclzInvalidUsage). */
CCLZ_API cclzResult_t cclzFeedbackGetState(cclzFeedback_t feedback, float** residual, size_t* count,
                                           uint64_t* step);

/* The residual of any dtype: *residual its address (as cclzFeedbackGetState's), *dtype (may be
 * NULL) cclzFloat32 or cclzBfloat16. */
CCLZ_API cclzResult_t cclzFeedbackGetResidual(cclzFeedback_t feedback, void** residual,
                                              cclzDataType_t* dtype);

/* Sets the step of the next encode (to resume from a checkpoint). */
CCLZ_API cclzResult_t cclzFeedbackSetStep(cclzFeedback_t feedback, uint64_t step);

/* The error-feedback encode of a qgrad codec, in one pass: x = grad + residual (fp32), the frame
 * of x at dst, residual = x - (the value the frame decodes to), then step += 1. The frame is an
 * ordinary qgrad frame (cclzDecode, cclzDecodeAccumulate). count must be the state's count.
 *   grad: device memory, count elements of dtype (fp32 or bf16), aligned to the element size
 *     (16-byte aligned is fastest).
 *   feedback: device state (cclzMemoryDevice) of count elements.
 *   dst, dstCapacity, encodedBytesDevice: as for cclzEncode.
 * Asynchronous on stream. A NaN or Inf in x is reported by the next cclzCodecSynchronize; the
 * frame is still complete, the affected blocks decode to NaN and keep their residual. Other codecs
 * return cclzNotSupported. */
CCLZ_API cclzResult_t cclzEncodeFeedback(cclzCodec_t codec, cclzFeedback_t feedback,
                                         const void* grad, size_t count, cclzDataType_t dtype,
                                         void* dst, size_t dstCapacity, size_t* encodedBytesDevice,
                                         cclzStream_t stream);

/* The same on host memory, with host state (identical frame and residual). A NaN or Inf in x
 * returns cclzInvalidArgument naming the first such element; the frame (and *encodedBytes) and the
 * residual are still written as for the device, and the step still advances. */
CCLZ_API cclzResult_t cclzEncodeFeedbackHost(cclzCodec_t codec, cclzFeedback_t feedback,
                                             const void* grad, size_t count, cclzDataType_t dtype,
                                             void* dst, size_t dstCapacity, size_t* encodedBytes);

/* ---- Communicators ------------------------------------------------------------------------- */

/* A communicator moves either device buffers (NCCL: every buffer a collective takes is device
 * memory, work is queued on the stream) or host buffers (MPI: every buffer is host memory, the
 * stream is ignored and the call returns when its work is complete). The codecs run where the
 * buffers are: CUDA kernels or the CPU reference, which produce the same bytes.
 *
 * Every collective below is called by every rank of the communicator with the same count, dtype,
 * reduction and codec configuration (the qgrad rounding seed may differ). cclz checks that before
 * it moves data (docs/collectives.md, "Checking the call"): a rank that passes different
 * arguments makes the call fail on every rank with cclzInvalidUsage and a message naming the
 * field and the ranks, and a rank that rejects its own arguments (a NULL buffer, an unsupported
 * dtype) makes the others fail too, instead of leaving them waiting. */

#define CCLZ_UNIQUE_ID_BYTES 128
/* NCCL-style bootstrap: rank 0 creates it, every rank receives a copy (through MPI, a file, a
 * socket: the caller's choice) and passes it to cclzCommInitRank. Same size as ncclUniqueId. */
typedef struct {
  char internal[CCLZ_UNIQUE_ID_BYTES];
} cclzUniqueId;

/* Reductions. The numbering is NCCL's (ncclSum = 0, ncclAvg = 4). Sums are computed in fp32 over
 * the decoded contributions, in rank order (so every rank of an all-reduce gets the same bits);
 * avg divides that sum by the rank count before rounding to the dtype. The codec none (and an
 * adaptive call that runs plain data) reduces with the network's own collective instead
 * (ncclAllReduce, MPI_Allreduce, ...), which rounds to the dtype at every step in its own order. */
typedef enum CCLZ_ENUM_INT { cclzSum = 0, cclzAvg = 4 } cclzRedOp_t;

/* How a communicator behaves, chosen in code when it is created (the *Config creators below),
 * NCCL-style: initialize with CCLZ_COMM_CONFIG_INITIALIZER, then set the fields. The other
 * settings (piece size, call check) still come from the environment (docs/collectives.md,
 * "Communicators"). Every rank must pass the same configuration. */
typedef struct {
  size_t size;          /* sizeof(cclzCommConfig_t), set by the initializer */
  unsigned int magic;   /* CCLZ_CONFIG_MAGIC */
  unsigned int version; /* CCLZ_VERSION_CODE */
  /* 0 (the default): a device collective is ordered on its stream like an NCCL call.
   * 1: calls that return at once (docs/collectives.md, "Calls that return at once"). A device
   * collective checks its arguments with the peers, records an event on its stream (its work
   * starts after what the stream had queued), hands the rest to the communicator's proxy thread
   * and returns. Its stream does NOT wait for it: its outputs are ready on a stream only after
   * cclzCommStreamWait(comm, stream). Device communicators only: a host (MPI) communicator
   * returns cclzInvalidUsage. */
  int asyncCalls;
  /* Whether a compressed collective may run as plain data where that is faster
   * (docs/collectives.md, "Adaptive calls"). 1: the communicator's first calls of each kind
   * (op, peer, dtype, codec configuration, size to the octave) alternate between the codec and
   * plain data, timed, and the ranks agree on the faster, the codec only where it wins by more
   * than 3%; later calls of that kind take it. Results are then those of plain NCCL/MPI (exact)
   * on the calls that run plain. The trials cost one host synchronization per kind, at its 7th
   * call. A call with error feedback that runs plain adds the residual into its data first and
   * zeroes it. Calls being captured into a CUDA graph before their kind is settled, and every
   * call of an asyncCalls communicator, run compressed.
   * 0: every call runs through its codec. CCLZ_ADAPTIVE_DEFAULT (the initializer's): the
   * environment's CCLZ_ADAPTIVE (0 or 1) if set, else 1. */
  int adaptive;
} cclzCommConfig_t;

#define CCLZ_ADAPTIVE_DEFAULT (-1)
#define CCLZ_COMM_CONFIG_INITIALIZER \
  { sizeof(cclzCommConfig_t), CCLZ_CONFIG_MAGIC, CCLZ_VERSION_CODE, 0, CCLZ_ADAPTIVE_DEFAULT }

/* Creates a unique id for cclzCommInitRank (NCCL builds only; else cclzNotSupported). */
CCLZ_API cclzResult_t cclzGetUniqueId(cclzUniqueId* uniqueId);

/* Creates a device (NCCL) communicator of nranks ranks, this one being `rank`, on the current
 * CUDA device; collective over the ranks, like ncclCommInitRank. Its ranks also connect to each
 * other over TCP, for the call check (docs/collectives.md, "Communicators": CCLZ_SOCKET_IFNAME). */
CCLZ_API cclzResult_t cclzCommInitRank(cclzComm_t* comm, int nranks, cclzUniqueId uniqueId,
                                       int rank);

/* Creates a device communicator over an NCCL communicator the caller already has (an ncclComm_t,
 * passed as a pointer so that this header needs no nccl.h). The caller keeps owning it and must
 * destroy it after cclzCommDestroy. Collective over its ranks: one ncclAllGather on it, waited
 * for, and the ranks' TCP connections for the call check (as cclzCommInitRank). */
CCLZ_API cclzResult_t cclzCommInitFromNccl(cclzComm_t* comm, void* ncclComm);

/* The same creators with a configuration (NULL: CCLZ_COMM_CONFIG_INITIALIZER's defaults), like
 * ncclCommInitRankConfig. A config not made by CCLZ_COMM_CONFIG_INITIALIZER of this major.minor
 * version (size, magic, version) or with asyncCalls other than 0 or 1 returns cclzInvalidArgument
 * before anything is created. */
CCLZ_API cclzResult_t cclzCommInitRankConfig(cclzComm_t* comm, int nranks, cclzUniqueId uniqueId,
                                             int rank, const cclzCommConfig_t* config);
CCLZ_API cclzResult_t cclzCommInitFromNcclConfig(cclzComm_t* comm, void* ncclComm,
                                                 const cclzCommConfig_t* config);

/* Creates a host (MPI) communicator over the ranks of an MPI communicator: mpiComm points to an
 * MPI_Comm (e.g. &MPI_COMM_WORLD cast to const void*), so that this header needs no mpi.h. MPI
 * must be initialized; cclz duplicates the communicator (collective over its ranks) and never
 * uses the caller's. MPI builds only; else cclzNotSupported. */
CCLZ_API cclzResult_t cclzCommInitFromMpi(cclzComm_t* comm, const void* mpiComm);

/* The MPI creator with a configuration (see cclzCommInitRankConfig); asyncCalls must be 0. */
CCLZ_API cclzResult_t cclzCommInitFromMpiConfig(cclzComm_t* comm, const void* mpiComm,
                                                const cclzCommConfig_t* config);

/* Makes `stream` (a cudaStream_t) wait for every collective queued on comm so far, on a
 * communicator with asyncCalls = 1: the host waits until the proxy thread has queued the last of
 * them on the GPU (not until the GPU has run it), then the stream waits for its work
 * (cudaStreamWaitEvent). After it, the outputs of those calls are ready on `stream`, and their
 * input buffers may be reused by work queued on it. Any stream may be passed, also one no call
 * used. Returns the first error a queued call met on the proxy (the same as
 * cclzCommGetAsyncError; sticky: abort the communicator), after the wait. A stream being
 * captured into a CUDA graph returns cclzInvalidUsage. On a communicator without asyncCalls (and
 * on host ones) it does nothing and returns cclzSuccess: calls are already ordered on their
 * streams. */
CCLZ_API cclzResult_t cclzCommStreamWait(cclzComm_t comm, cclzStream_t stream);

/* Frees the communicator (and destroys the NCCL communicator it created, not a wrapped one).
 * Waits for the proxy thread to queue every call it holds (asyncCalls). Device work queued with
 * it must have completed, and CUDA graphs that captured its calls must have been destroyed: NCCL's
 * destroy waits for them. */
CCLZ_API cclzResult_t cclzCommDestroy(cclzComm_t comm);

/* Stops what the communicator has in flight and frees it, without waiting for the peers. Over
 * NCCL this calls ncclCommAbort, also on a wrapped ncclComm_t (the only way to stop its
 * operations): the caller must then neither use nor destroy that ncclComm_t. */
CCLZ_API cclzResult_t cclzCommAbort(cclzComm_t comm);

/* *asyncError = an error met after a call returned: cclzSuccess when there is none,
 * cclzSystemError for an NCCL asynchronous error (network, peer), cclzCorruptFrame when a device
 * decode of a finished collective rejected a received frame, or (asyncCalls) the error of a call
 * that failed on the proxy thread (the message is in cclzGetLastError(comm)). Does not wait for
 * queued work: a collective still running is not yet judged. Host communicators report every
 * error from the call itself. */
CCLZ_API cclzResult_t cclzCommGetAsyncError(cclzComm_t comm, cclzResult_t* asyncError);

CCLZ_API cclzResult_t cclzCommCount(cclzComm_t comm, int* count);
CCLZ_API cclzResult_t cclzCommUserRank(cclzComm_t comm, int* rank);

/* *pieceBytes = the pipeline piece (input bytes per destination and frame) that comm's
 * collectives use when the largest block one rank sends to one destination is chunkBytes (an
 * all-gather's sendcount, a reduce-scatter's recvcount, an all-reduce's count / ranks, an
 * all-to-all's count per peer, a send's count; times the element size). CCLZ_PIECE_BYTES if it
 * was set when comm was created; else a quarter of chunkBytes rounded up to whole MiB, at least
 * 4 MiB and at most max(4 MiB, 64 MiB / ranks) (docs/collectives.md, "The algorithms"); an fp8
 * call with fp8RowElems then cuts it to whole rows. The communicator's scratch grows with it: up
 * to about 6 x piece x ranks bytes of frames, and for reductions three fp32 accumulators of a
 * piece. */
/* How comm's last collective that got past its checks ran (cclzCommConfig_t.adaptive):
 * cclzPathCompressed through its codec, cclzPathPlain as plain data. An overlapped GEMM
 * (cclzAllGatherMatmul, cclzMatmulReduceScatter) reports cclzPathCompressed where it ran
 * overlapped, as called; where it ran its GEMM and its collective one after the other
 * (docs/overlap.md, "Adaptive calls"), its collective's path plus cclzPathSerial (a flag: 2 or
 * 3). *decided = 1 when its kind's trials are over (always 1 on a communicator that is not
 * adaptive), 0 while it was one of them. Either pointer may be NULL. */
typedef enum CCLZ_ENUM_INT {
  cclzPathCompressed = 0,
  cclzPathPlain = 1,
  cclzPathSerial = 2
} cclzPath_t;
CCLZ_API cclzResult_t cclzCommGetLastPath(cclzComm_t comm, cclzPath_t* path, int* decided);

CCLZ_API cclzResult_t cclzCommGetPieceBytes(cclzComm_t comm, size_t chunkBytes, size_t* pieceBytes);

/* ---- Collectives ----------------------------------------------------------------------------- */

/* Shaped like NCCL's calls, plus the codec: a cclzCodecConfig_t (NULL = the none codec: the bytes
 * move as they are) that every rank passes alike. The data of each call is cut into pieces of
 * CCLZ_PIECE_BYTES (environment, read at communicator creation; default 4 MiB of input per
 * destination), each piece encoded into one frame; on the device, encoding piece i+1, moving
 * piece i and decoding piece i-1 overlap on separate streams.
 *
 * Codecs: none takes any dtype for the calls that do not reduce; lossless, fp8 and qgrad take
 * what their codec takes (bf16, fp16, fp32 for lossless and fp8; bf16, fp32 for qgrad);
 * reductions take bf16, fp16 and fp32. Lossless and none are exact: the result equals plain NCCL's
 * up to the order of the fp32 sum. Lossy codecs quantize each value once on its way to the reducing
 * rank; all-reduce quantizes the reduced shard once more for its all-gather.
 *
 * Buffers: device memory for a device communicator, host memory for a host one; aligned to the
 * element size. In-place calls are allowed where NCCL allows them (all-gather: sendbuff ==
 * recvbuff + rank*sendcount; reduce-scatter: sendbuff + rank*recvcount == recvbuff; all-reduce:
 * sendbuff == recvbuff). Device calls are ordered on stream; lossless frames over NCCL need
 * their sizes on the host, so those calls wait for each piece's size exchange before they return
 * (docs/collectives.md, "Variable-size frames"). On a communicator created with asyncCalls = 1
 * the call returns once its arguments are checked, its work is queued later by the proxy thread,
 * and the stream does not wait for it: see cclzCommStreamWait. */

/* recvbuff[r*sendcount + i] = element i of rank r's sendbuff, for every rank r (its own included,
 * which also goes through the codec, so that every rank holds the same bytes). */
CCLZ_API cclzResult_t cclzAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                    cclzDataType_t dtype, cclzComm_t comm,
                                    const cclzCodecConfig_t* codec, cclzStream_t stream);

/* recvbuff[i] = op over ranks r of element rank*recvcount + i of rank r's sendbuff
 * (recvcount * nranks elements). Each rank encodes each destination's block once, the blocks
 * travel all-to-all, and the receiver decodes and reduces them in fp32. */
CCLZ_API cclzResult_t cclzReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                        cclzDataType_t dtype, cclzRedOp_t op, cclzComm_t comm,
                                        const cclzCodecConfig_t* codec, cclzStream_t stream);

/* recvbuff[i] = op over ranks of sendbuff[i], for any count (it need not divide by the rank
 * count: rank r owns a shard of count/nranks elements, one more for r < count % nranks). A
 * reduce-scatter into the shards, then an all-gather of the reduced shards, each re-encoded once:
 * every rank ends with bit-identical results, also with lossy codecs. */
CCLZ_API cclzResult_t cclzAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    cclzDataType_t dtype, cclzRedOp_t op, cclzComm_t comm,
                                    const cclzCodecConfig_t* codec, cclzStream_t stream);

/* Reduce-scatter and all-reduce with error feedback (qgrad): feedback is this rank's state for
 * the bucket (cclzFeedbackCreate; device state for a device communicator, host for a host one)
 * of recvcount*nranks elements (reduce-scatter) or count elements (all-reduce). The encode of
 * the contributions adds the residual and keeps what quantization left out; the all-reduce also
 * adds the error of re-encoding the shard this rank owns (times the rank count for avg) to the
 * residual of that shard, so that both quantizations are compensated at the next step. The step
 * advances by one per call. Other codecs return cclzNotSupported. */
CCLZ_API cclzResult_t cclzReduceScatterFeedback(const void* sendbuff, void* recvbuff,
                                                size_t recvcount, cclzDataType_t dtype,
                                                cclzRedOp_t op, cclzComm_t comm,
                                                const cclzCodecConfig_t* codec,
                                                cclzFeedback_t feedback, cclzStream_t stream);
CCLZ_API cclzResult_t cclzAllReduceFeedback(const void* sendbuff, void* recvbuff, size_t count,
                                            cclzDataType_t dtype, cclzRedOp_t op, cclzComm_t comm,
                                            const cclzCodecConfig_t* codec, cclzFeedback_t feedback,
                                            cclzStream_t stream);

/* recvbuff[r*count + i] = element rank*count + i of rank r's sendbuff (count per peer; both
 * buffers hold count*nranks elements). */
CCLZ_API cclzResult_t cclzAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                                   cclzDataType_t dtype, cclzComm_t comm,
                                   const cclzCodecConfig_t* codec, cclzStream_t stream);

/* Point to point: count elements to / from peer (not this rank). A cclzSend must meet a cclzRecv
 * with the same count, dtype and codec on the peer. There are no groups: on a host communicator
 * the calls block until the peer has matched them, so two ranks that exchange must order their
 * calls (one sends first); on a device communicator, as with NCCL outside a group, a send and a
 * recv queued on the same stream in the wrong order deadlock. */
CCLZ_API cclzResult_t cclzSend(const void* sendbuff, size_t count, cclzDataType_t dtype, int peer,
                               cclzComm_t comm, const cclzCodecConfig_t* codec,
                               cclzStream_t stream);
CCLZ_API cclzResult_t cclzRecv(void* recvbuff, size_t count, cclzDataType_t dtype, int peer,
                               cclzComm_t comm, const cclzCodecConfig_t* codec,
                               cclzStream_t stream);

/* ---- Tensor-parallel GEMMs with their communication in peer-to-peer steps ------------------ */

/* The GEMMs of tensor + sequence parallelism with their all-gather or reduce-scatter decomposed
 * into peer-to-peer steps scheduled against row chunks of the GEMM (docs/overlap.md). Row-major;
 * op(B) = B^T with B n x k (a Linear's weight: torch's layout, y = x W^T) when transB is non-zero,
 * else B k x n. a, b, c (and gathered, bias) hold dtype: bf16, fp16 or fp32, in the
 * communicator's memory (device memory on a device communicator); products are summed in fp32. codec: NULL (plain) or fp8: each rank's chunk travels as one frame, encoded once.
 * Every rank passes the same m, n, k, transB, dtype and codec (checked as the collectives are:
 * a mismatch fails the call on every rank, or past an op's first call on a device communicator
 * becomes its asynchronous error, CCLZ_CHECK_CALLS). On a host communicator the call is complete when it returns; on a device
 * communicator it is queued on stream: the GEMMs (cuBLASLt) on stream, the steps' transfers on a
 * stream of cclz's own, no host synchronization. With fp8 on a device communicator a chunk (m
 * rows of a, or of c) must fill whole 16-byte words, and gathered (all-gather) or c
 * (reduce-scatter) must be 16-byte aligned (else cclzInvalidArgument).
 *
 * cclzAllGatherMatmul (column-parallel): a is this rank's m x k rows of the gathered matrix (the
 * ranks' rows in rank order, size * m x k); c (size * m x n) = gathered * op(B) + bias; bias (may
 * be NULL) holds n values of dtype, added to every row in fp32 before the rounding (the GEMM's
 * epilogue, as a Linear's bias); gathered (may be NULL) receives the gathered matrix, which the
 * backward pass needs for the weight's gradient. With fp8 every rank decodes every chunk, its
 * own too, so all multiply the same matrix. */
CCLZ_API cclzResult_t cclzAllGatherMatmul(const void* a, const void* b, const void* bias, void* c,
                                          void* gathered, size_t m, size_t n, size_t k,
                                          int transB, cclzDataType_t dtype, cclzComm_t comm,
                                          const cclzCodecConfig_t* codec, cclzStream_t stream);

/* cclzMatmulReduceScatter (row-parallel): a is size * m x k; c (m x n) = rows [rank * m,
 * (rank + 1) * m) of the sum over the ranks of a * op(B), divided by the ranks for cclzAvg: each
 * rank's partial rounded to dtype as a GEMM stores it (and through its frame with fp8, its own
 * too), summed in fp32 as the partials arrive, this rank's own last: the rank order of
 * cclzReduceScatter within fp32 summation-order rounding (docs/overlap.md). */
CCLZ_API cclzResult_t cclzMatmulReduceScatter(const void* a, const void* b, void* c, size_t m,
                                              size_t n, size_t k, int transB,
                                              cclzDataType_t dtype, cclzRedOp_t op,
                                              cclzComm_t comm, const cclzCodecConfig_t* codec,
                                              cclzStream_t stream);

typedef struct {
  size_t size; /* set by the caller: sizeof(cclzFrameInfo_t) */
  cclzCodecType_t codec;
  cclzDataType_t dtype;
  uint64_t count;      /* elements */
  uint64_t frameBytes; /* whole frame, header included */
  unsigned int chunkElems;
  unsigned int numChunks;
} cclzFrameInfo_t;

/* Reads and validates the header of a frame in host memory (at least 64 bytes). */
CCLZ_API cclzResult_t cclzFrameGetInfo(const void* frame, size_t bytes, cclzFrameInfo_t* info);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CCLZ_CCLZ_H_ */
