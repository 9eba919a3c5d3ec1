// Writes seed inputs for decode_fuzzer into a folder: valid frames of every dtype, a few data
// kinds and chunkings, each behind the prefix that makes the harness decode it as it is
// (fuzz_input.h). Usage: make_fuzz_corpus <folder>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "codec/lossless/ref.h"
#include "codec/none/ref.h"
#include "common/float_bits.h"
#include "fuzz_input.h"
#include "support/data.h"

using namespace cclz;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <folder>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  int written = 0;
  auto write = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
      std::perror(path.c_str());
      std::exit(1);
    }
    std::fclose(f);
    ++written;
  };
  const test::DataKind kinds[] = {test::DataKind::kGauss1, test::DataKind::kSpecial,
                                  test::DataKind::kTwoSymbolsPerChunk, test::DataKind::kSkewed,
                                  test::DataKind::kRandomBits};
  const lossless::Params params[] = {{1024}, {2048}, {4096}};
  for (int d = 0; d < 3; ++d) {
    const int dtype = fuzz::kLosslessDtypes[d];
    for (size_t count : {size_t{1}, size_t{7}, size_t{100}, size_t{1500}, size_t{5000}}) {
      for (size_t p = 0; p < std::size(params); ++p) {
        for (size_t k = 0; k < std::size(kinds); ++k) {
          if ((count + p + k) % 2) continue;  // a spread, not the full product
          const auto input = test::makeData(kinds[k], dtype, count, params[p].chunkElems,
                                            test::mixSeed(d, count, p, k));
          std::vector<uint8_t> seed(fuzz::kPrefixBytes +
                                    lossless::maxEncodedBytes(params[p], dtype, count));
          const uint64_t bytes = lossless::encodeRef(params[p], dtype, input.data(), count,
                                                     seed.data() + fuzz::kPrefixBytes,
                                                     seed.size() - fuzz::kPrefixBytes);
          seed.resize(fuzz::kPrefixBytes + bytes);
          const int flags = static_cast<int>((count + k) % 8);  // count from header, fix, API
          fuzz::writePrefix(seed.data(), 0, d, count, flags);
          write("lossless_" + std::string(test::dtypeLabel(dtype)) + "_n" + std::to_string(count) +
                    "_p" + std::to_string(p) + "_" + test::dataKindLabel(kinds[k]),
                seed);
        }
      }
    }
  }
  for (int d = 0; d < 8; ++d) {
    const int dtype = fuzz::kNoneDtypes[d];
    for (size_t count : {size_t{0}, size_t{3}, size_t{300}}) {
      const auto input = test::makeData(test::DataKind::kRandomBits, dtype, count, 0, d + count);
      std::vector<uint8_t> seed(fuzz::kPrefixBytes + none::maxEncodedBytes(dtype, count));
      none::encodeRef(dtype, input.data(), count, seed.data() + fuzz::kPrefixBytes,
                      seed.size() - fuzz::kPrefixBytes);
      fuzz::writePrefix(seed.data(), 1, d, count, static_cast<int>(count % 8));
      write("none_" + std::string(test::dtypeLabel(dtype)) + "_n" + std::to_string(count), seed);
    }
  }
  // The lossy codecs, through the C API's host encode: a few configurations each.
  auto writeApiSeed = [&](const std::string& name, int codec, int dtypeIndex,
                          const cclzCodecConfig_t& config, const std::vector<uint8_t>& input,
                          size_t count) {
    const auto dtype = static_cast<cclzDataType_t>(fuzz::dtypeFor(codec, dtypeIndex));
    cclzCodec_t handle = nullptr;
    size_t capacity = 0, bytes = 0;
    if (cclzCodecCreate(&handle, &config) != cclzSuccess ||
        cclzCodecMaxEncodedSize(handle, count, dtype, &capacity) != cclzSuccess) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), cclzGetLastError(nullptr));
      std::exit(1);
    }
    std::vector<uint8_t> seed(fuzz::kPrefixBytes + capacity);
    if (cclzEncodeHost(handle, input.data(), count, dtype, seed.data() + fuzz::kPrefixBytes,
                       capacity, &bytes) != cclzSuccess) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), cclzGetLastError(nullptr));
      std::exit(1);
    }
    cclzCodecDestroy(handle);
    seed.resize(fuzz::kPrefixBytes + bytes);
    fuzz::writePrefix(seed.data(), codec, dtypeIndex, count, static_cast<int>(count % 8));
    write(name, seed);
  };
  for (int d = 0; d < 2; ++d) {
    const int dtype = fuzz::kQgradDtypes[d];
    for (size_t count : {size_t{1}, size_t{100}, size_t{3000}}) {
      for (int bits : {8, 4, 2}) {
        cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
        config.codec = cclzCodecQgrad;
        config.bits = bits;
        config.blockElems = bits == 4 ? 64 : 32;
        const auto input = test::makeData(test::DataKind::kGauss1, dtype, count, 0, count + bits);
        writeApiSeed("qgrad_" + std::string(test::dtypeLabel(dtype)) + "_n" +
                         std::to_string(count) + "_b" + std::to_string(bits),
                     2, d, config, input, count);
      }
    }
  }
  for (int d = 0; d < 3; ++d) {
    const int dtype = fuzz::kFp8Dtypes[d];
    for (size_t count : {size_t{1}, size_t{100}, size_t{3000}}) {
      for (cclzFp8Format_t format : {cclzFp8E4M3, cclzFp8E5M2, cclzFp8Int8}) {
        cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
        config.codec = cclzCodecFp8;
        config.fp8Format = format;
        config.fp8RowElems = 256;
        config.fp8Rotation = format == cclzFp8E4M3 ? cclzFp8RotateAdaptive : cclzFp8RotateDefault;
        const auto input = test::makeData(test::DataKind::kSpecial, dtype, count, 0, count + format);
        writeApiSeed("fp8_" + std::string(test::dtypeLabel(dtype)) + "_n" + std::to_string(count) +
                         "_f" + std::to_string(format),
                     3, d, config, input, count);
      }
    }
  }
  // Frames with the fields the encoder fills from the data: an auto-shaped frame (params[5],
  // rows chosen, padded slots) and smoothed ones (params[6..7], the shift bytes), one per dtype.
  for (int d = 0; d < 3; ++d) {
    const int dtype = fuzz::kFp8Dtypes[d];
    const size_t count = 128 * 64 + 37;  // 128 whole rows of 64: smoothing is allowed
    std::vector<float> x(count);
    uint64_t state = 17 + d;
    for (size_t i = 0; i < count; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const float u = float(state >> 40) / float(1u << 24) - 0.5f;  // uniform in [-0.5, 0.5)
      x[i] = u * (i % 64 == 9 ? 500.0f : 1.0f);                     // channel 9 is massive
    }
    std::vector<uint8_t> input(count * test::elementSize(dtype));
    for (size_t i = 0; i < count; ++i) {
      if (dtype == cclzFloat32) {
        std::memcpy(&input[4 * i], &x[i], 4);
      } else {
        const uint16_t h = dtype == cclzBfloat16 ? floatToBf16(x[i]) : floatToHalf(x[i]);
        std::memcpy(&input[2 * i], &h, 2);
      }
    }
    cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
    config.codec = cclzCodecFp8;
    config.fp8Format = cclzFp8Int8;
    config.fp8RowElems = 64;
    config.fp8HadamardSize = 32;
    writeApiSeed("fp8_smooth_" + std::string(test::dtypeLabel(dtype)), 3, d, config, input, count);
    config.fp8RowElems = 0;
    config.fp8Format = cclzFp8E4M3;
    config.fp8Rotation = cclzFp8RotateAdaptive;
    writeApiSeed("fp8_auto_" + std::string(test::dtypeLabel(dtype)), 3, d, config, input, count);
  }
  std::printf("%d seeds in %s\n", written, dir.c_str());
  return 0;
}
