// CCLZ_LOSSLESS_PATH and CCLZ_LOSSLESS_ENCODE_WARPS (src/codec/lossless/kernel_path.h): which
// kernel family and how many warps per staged encoded chunk run. The kernels themselves are tested
// on every path by the GPU suite (registered more than once, see tests/codec/CMakeLists.txt); here
// only the parsing and the size rule, which need no device.
#include <gtest/gtest.h>

#include "codec/lossless/kernel_path.h"
#include "common/error.h"

namespace cclz::test {
namespace {

using lossless::KernelPath;
using lossless::kStagedChunksPerSM;
using lossless::parseEncodeWarps;
using lossless::parseKernelPath;
using lossless::useStagedKernels;
using Direction = lossless::Direction;

TEST(LosslessKernelPath, ParsesTheThreeNames) {
  EXPECT_EQ(parseKernelPath(nullptr), KernelPath::Auto);  // the default
  EXPECT_EQ(parseKernelPath(""), KernelPath::Auto);
  EXPECT_EQ(parseKernelPath("general"), KernelPath::General);
  EXPECT_EQ(parseKernelPath("staged"), KernelPath::Staged);
  EXPECT_EQ(parseKernelPath("auto"), KernelPath::Auto);
}

TEST(LosslessKernelPath, RejectsOtherValuesWithTheVariableNamed) {
  for (const char* bad : {"Staged", "1", "stage", "general "}) {
    try {
      parseKernelPath(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclzInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("CCLZ_LOSSLESS_PATH"), std::string::npos) << e.what();
    }
  }
}

// CCLZ_LOSSLESS_ENCODE_WARPS: warps per chunk in the staged encoder, auto (0: encodeWarpsPerChunk
// decides by size) unless set to 2 or 4.
TEST(LosslessKernelPath, ParsesTheEncodeWarps) {
  EXPECT_EQ(parseEncodeWarps(nullptr), 0);  // the default: auto
  EXPECT_EQ(parseEncodeWarps(""), 0);
  EXPECT_EQ(parseEncodeWarps("auto"), 0);
  EXPECT_EQ(parseEncodeWarps("2"), 2);
  EXPECT_EQ(parseEncodeWarps("4"), 4);
}

TEST(LosslessKernelPath, AutoEncodeWarpsAreFourWhileEveryChunkIsInFlight) {
  const int sms = 132;  // H200
  const uint64_t limit = lossless::kFourWarpChunksPerSM * sms;
  EXPECT_EQ(lossless::encodeWarpsPerChunk(0, 512, sms), 4);  // 4 MiB of bf16
  EXPECT_EQ(lossless::encodeWarpsPerChunk(0, limit, sms), 4);
  EXPECT_EQ(lossless::encodeWarpsPerChunk(0, limit + 1, sms), 2);
  for (int configured : {2, 4})  // the variable's choice stands at every size
    for (uint64_t chunks : {uint64_t{1}, limit + 1, uint64_t{65536}})
      EXPECT_EQ(lossless::encodeWarpsPerChunk(configured, chunks, sms), configured);
}

TEST(LosslessKernelPath, RejectsOtherEncodeWarpsWithTheVariableNamed) {
  for (const char* bad : {"0", "1", "3", "8", "two", "2 ", "on", "-2", "02", "Auto"}) {
    try {
      parseEncodeWarps(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclzInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("CCLZ_LOSSLESS_ENCODE_WARPS"), std::string::npos)
          << e.what();
    }
  }
}

TEST(LosslessKernelPath, AutoStagesUpToItsChunksPerMultiprocessor) {
  const int sms = 132;  // H200
  auto staged = [&](Direction d, int dtype, uint64_t chunks, bool whole = true) {
    return useStagedKernels(KernelPath::Auto, d, dtype, whole, chunks, sms);
  };
  EXPECT_TRUE(staged(Direction::Encode, cclzBfloat16, 512));        // 4 MiB
  EXPECT_TRUE(staged(Direction::Encode, cclzBfloat16, 128 * 132));  // 132 MiB
  EXPECT_FALSE(staged(Direction::Encode, cclzBfloat16, 128 * 132 + 1));
  EXPECT_TRUE(staged(Direction::Decode, cclzBfloat16, 16 * 132));  // 16.5 MiB
  EXPECT_FALSE(staged(Direction::Decode, cclzBfloat16, 16 * 132 + 1));
  EXPECT_FALSE(staged(Direction::Decode, cclzBfloat16, 65536));  // 256 MiB
  for (Direction d : {Direction::Encode, Direction::Decode})
    EXPECT_TRUE(staged(d, cclzFloat16, uint64_t{1} << 30));
  EXPECT_TRUE(staged(Direction::Encode, cclzFloat32, 16384));  // 256 MiB
  EXPECT_TRUE(staged(Direction::Encode, cclzFloat32, uint64_t{1} << 30));
  EXPECT_TRUE(staged(Direction::Decode, cclzFloat32, 6 * 132));  // 12.4 MiB
  EXPECT_FALSE(staged(Direction::Decode, cclzFloat32, 6 * 132 + 1));
  // Chunks not taken whole (other sizes, unaligned sources): every chunk resident at once.
  for (Direction d : {Direction::Encode, Direction::Decode})
    for (int dtype : {cclzBfloat16, cclzFloat32}) {
      EXPECT_TRUE(staged(d, dtype, kStagedChunksPerSM * sms, false));
      EXPECT_FALSE(staged(d, dtype, kStagedChunksPerSM * sms + 1, false));
    }
  EXPECT_TRUE(
      useStagedKernels(KernelPath::Staged, Direction::Decode, cclzBfloat16, true, 65536, sms));
  EXPECT_FALSE(useStagedKernels(KernelPath::General, Direction::Encode, cclzFloat32, true, 1, sms));
}

}  // namespace
}  // namespace cclz::test
