/* Uses only the installed header and library: the version, a lossless round trip on the host
 * through the C API, and a rejected argument with its message. Exit 0 on success. */
#include <cclz/cclz.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                 \
  do {                                                                              \
    cclzResult_t r = (call);                                                        \
    if (r != cclzSuccess) {                                                         \
      fprintf(stderr, "%s: %s (%s)\n", #call, cclzGetErrorString(r), cclzGetLastError(NULL)); \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

int main(void) {
  int version = 0;
  CHECK(cclzGetVersion(&version));
  if (version != CCLZ_VERSION_CODE) {
    fprintf(stderr, "library version %d, header %d\n", version, CCLZ_VERSION_CODE);
    return 1;
  }

  enum { kCount = 10000 };
  uint16_t* src = malloc(kCount * sizeof *src);
  uint16_t* out = malloc(kCount * sizeof *out);
  for (int i = 0; i < kCount; ++i) src[i] = (uint16_t)(0x3f80 + (i * 37) % 97); /* bf16 near 1 */

  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  cclzCodec_t codec;
  CHECK(cclzCodecCreate(&codec, &config));
  size_t capacity = 0, frameBytes = 0;
  CHECK(cclzCodecMaxEncodedSize(codec, kCount, cclzBfloat16, &capacity));
  unsigned char* frame = malloc(capacity);
  CHECK(cclzEncodeHost(codec, src, kCount, cclzBfloat16, frame, capacity, &frameBytes));
  CHECK(cclzDecodeHost(codec, frame, frameBytes, out, kCount, cclzBfloat16));
  if (memcmp(src, out, kCount * sizeof *src) != 0) {
    fprintf(stderr, "round trip differs\n");
    return 1;
  }
  if (cclzCodecCreate(NULL, &config) != cclzInvalidArgument || !*cclzGetLastError(NULL)) {
    fprintf(stderr, "a NULL handle was not rejected with a message\n");
    return 1;
  }
  CHECK(cclzCodecDestroy(codec));
  printf("cclz %d: %d bf16 values in a %zu-byte frame and back\n", version, kCount, frameBytes);
  free(frame);
  free(out);
  free(src);
  return 0;
}
