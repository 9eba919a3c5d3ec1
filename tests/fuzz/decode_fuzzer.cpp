// libFuzzer harness for the CPU decoders of every codec (lossless, none, qgrad, fp8), their
// decode-and-accumulate paths, and the C API's host decode and frame-info paths. Built with
// -fsanitize=fuzzer,address,undefined, so any read outside the frame or write outside the output
// (exactly count elements on the heap) is a crash.
//
// Input: [byte 0: options] [bytes 1..3: count, 24-bit little-endian] [frame bytes...]
//   options bits 0, 7  codec: 0 lossless, 1 none, 2 qgrad, 3 fp8 (bit 7 is the high bit)
//   options bits 1-3   dtype among the codec's (fuzz_input.h)
//   options bit 4      take count from the frame header instead (when it is small enough)
//   options bit 5      recompute the header checksum, so that mutated header fields get past it
//   options bit 6      also decode through the C API and require the same verdict and output
// tests/fuzz/make_corpus.cpp writes seeds in this format.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "cclz/cclz.h"
#include "codec/codec.h"
#include "codec/frame.h"
#include "fuzz_input.h"

namespace {

using namespace cclz;

cclzCodecConfig_t defaultConfig(int codec) {
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  config.codec = fuzz::kCodecTypes[codec];
  return config;
}

cclzCodec_t apiCodec(int codec) {
  static cclzCodec_t codecs[fuzz::kNumCodecs] = {};
  if (!codecs[codec]) {
    const cclzCodecConfig_t config = defaultConfig(codec);
    if (cclzCodecCreate(&codecs[codec], &config) != cclzSuccess) std::abort();
  }
  return codecs[codec];
}

// Decode-and-accumulate: a rejected frame must leave the accumulator as it was, and it must
// agree with the plain decode on whether the frame is valid.
void checkAccumulate(const Codec& impl, const cclzCodecConfig_t& config, const uint8_t* frame,
                     size_t frameBytes, int dtype, uint64_t count, uint32_t decodeErr) {
  if (dtype != cclzBfloat16 && dtype != cclzFloat16 && dtype != cclzFloat32) return;
  std::unique_ptr<float[]> acc(new float[count]), before(new float[count]);
  for (uint64_t i = 0; i < count; ++i) acc[i] = before[i] = static_cast<float>(i % 7) - 3.0f;
  const uint32_t err = impl.decodeAccumulateHost(config, frame, frameBytes, dtype, count, acc.get());
  if ((err == kFrameOk) != (decodeErr == kFrameOk)) std::abort();
  if (err != kFrameOk && count && std::memcmp(acc.get(), before.get(), count * sizeof(float)) != 0)
    std::abort();  // a corrupt frame must lose nothing
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < fuzz::kPrefixBytes) return 0;
  const fuzz::Options o = fuzz::parseOptions(data);
  // The frame in its own heap block of exactly its size.
  const size_t frameBytes = size - fuzz::kPrefixBytes;
  std::unique_ptr<uint8_t[]> frame(new uint8_t[frameBytes]);
  if (frameBytes) std::memcpy(frame.get(), data + fuzz::kPrefixBytes, frameBytes);

  uint64_t count = o.count;
  if (frameBytes >= kFrameHeaderBytes) {
    FrameHeader h;
    std::memcpy(&h, frame.get(), sizeof h);
    if (o.countFromHeader && h.count <= fuzz::kMaxCount) count = h.count;
    if (o.fixChecksum) {
      h.checksum = headerChecksum(h);
      std::memcpy(frame.get(), &h, sizeof h);
    }
  }
  const size_t esize = fuzz::elementSize(o.dtype);
  const size_t outBytes = static_cast<size_t>(count) * esize;
  std::unique_ptr<uint8_t[]> out(new uint8_t[outBytes]);  // exactly count elements

  const cclzCodecConfig_t config = defaultConfig(o.codec);
  const Codec& impl = codecFor(config.codec);
  const uint32_t err = impl.decodeHost(config, frame.get(), frameBytes, o.dtype, count, out.get());
  if (err >= kFrameNumErrors) std::abort();  // not a FrameError
  checkAccumulate(impl, config, frame.get(), frameBytes, o.dtype, count, err);

  cclzFrameInfo_t info{};
  info.size = sizeof info;
  const cclzResult_t infoResult = cclzFrameGetInfo(frame.get(), frameBytes, &info);
  if (err == kFrameOk && infoResult != cclzSuccess) std::abort();  // decodable but invalid header

  if (o.viaApi) {
    std::unique_ptr<uint8_t[]> apiOut(new uint8_t[outBytes]);
    const cclzResult_t r = cclzDecodeHost(apiCodec(o.codec), frame.get(), frameBytes, apiOut.get(),
                                          count, static_cast<cclzDataType_t>(o.dtype));
    if ((r == cclzSuccess) != (err == kFrameOk))
      std::abort();  // the API and the reference disagree
    if (r != cclzSuccess && r != cclzCorruptFrame) std::abort();
    if (r == cclzSuccess && outBytes && std::memcmp(out.get(), apiOut.get(), outBytes) != 0)
      std::abort();
  }
  return 0;
}
