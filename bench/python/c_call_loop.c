/* The C side of call_overhead.py: host time per cclzAllGather call, CALLS calls queued back to
 * back (no synchronization between them), on the caller's communicator, tensors and stream.
 * Loaded by call_overhead.py with ctypes, so that each round times C, raw ctypes and the Python
 * method one after the other in one process (paired rounds: the host's drift between rounds
 * cancels in the differences).
 *   cc -O2 -shared -fPIC c_call_loop.c -I include -L build/src -lcclz -o c_call_loop.so
 * Returns the microseconds per call, or -1 when a call failed (cclzGetLastError says why). */
#include <cclz/cclz.h>
#include <time.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

double c_call_loop(const void* in, void* out, size_t count, cclzComm_t comm,
                   const cclzCodecConfig_t* codec, cclzStream_t stream, int calls) {
  const double t0 = now_us();
  for (int i = 0; i < calls; ++i)
    if (cclzAllGather(in, out, count, cclzBfloat16, comm, codec, stream) != cclzSuccess) return -1;
  return (now_us() - t0) / calls;
}
