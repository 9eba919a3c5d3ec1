// libFuzzer harness for the CPU decoders (lossless and none reference decoders, and the C API's
// host decode and frame-info paths). Built with -fsanitize=fuzzer,address,undefined, so any read
// outside the frame or write outside the output (exactly count elements on the heap) is a crash.
//
// Input: [byte 0: options] [bytes 1..3: count, 24-bit little-endian] [frame bytes...]
//   options bit 0    codec: 0 lossless, 1 none
//   options bits 1-3 dtype (lossless: bf16, fp16, fp32; none: one of eight dtypes)
//   options bit 4    take count from the frame header instead (when it is small enough)
//   options bit 5    recompute the header checksum, so that mutated header fields get past it
//   options bit 6    also decode through the C API and require the same verdict and output
// tests/fuzz/make_corpus.cpp writes seeds in this format.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "cclz/cclz.h"
#include "codec/frame.h"
#include "codec/lossless/ref.h"
#include "codec/none/ref.h"
#include "fuzz_input.h"

namespace {

using namespace cclz;

cclzCodec_t apiCodec(int codec) {
  static cclzCodec_t codecs[2] = {nullptr, nullptr};
  if (!codecs[codec]) {
    cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
    config.codec = codec == 0 ? cclzCodecLossless : cclzCodecNone;
    if (cclzCodecCreate(&codecs[codec], &config) != cclzSuccess) std::abort();
  }
  return codecs[codec];
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

  const uint32_t err = o.codec == 0
                           ? lossless::decodeRef(frame.get(), frameBytes, o.dtype, count, out.get())
                           : none::decodeRef(frame.get(), frameBytes, o.dtype, count, out.get());
  if (err >= kFrameNumErrors) std::abort();  // not a FrameError

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
