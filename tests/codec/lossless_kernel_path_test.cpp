// CCLZ_LOSSLESS_PATH, CCLZ_LOSSLESS_WINDOW and CCLZ_LOSSLESS_ENCODE_WARPS
// (src/codec/lossless/kernel_path.h): which version 2 kernels, which staged decode loop and how
// many warps per staged encoded chunk run. The kernels themselves are tested on every path by the
// GPU suite (registered more than once, see tests/codec/CMakeLists.txt); here only the parsing and
// the size rule, which need no device.
#include <gtest/gtest.h>

#include "codec/lossless/kernel_path.h"
#include "common/error.h"

namespace cclz::test {
namespace {

using lossless::v2::KernelPath;
using lossless::v2::kStagedChunksPerSM;
using lossless::v2::parseEncodeWarps;
using lossless::v2::parseKernelPath;
using lossless::v2::parseWindowLoop;
using lossless::v2::useStagedKernels;

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

// CCLZ_LOSSLESS_WINDOW: the staged decoder's pair-window loop, on unless the value is `off`.
TEST(LosslessKernelPath, ParsesTheWindowSwitch) {
  EXPECT_TRUE(parseWindowLoop(nullptr));  // the default
  EXPECT_TRUE(parseWindowLoop(""));
  EXPECT_TRUE(parseWindowLoop("on"));
  EXPECT_FALSE(parseWindowLoop("off"));
}

TEST(LosslessKernelPath, RejectsOtherWindowValuesWithTheVariableNamed) {
  for (const char* bad : {"ON", "0", "1", "false", "off "}) {
    try {
      parseWindowLoop(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclzInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("CCLZ_LOSSLESS_WINDOW"), std::string::npos) << e.what();
    }
  }
}

// CCLZ_LOSSLESS_ENCODE_WARPS: warps per chunk in the staged encoder, 4 unless set to 1 or 2.
TEST(LosslessKernelPath, ParsesTheEncodeWarps) {
  EXPECT_EQ(parseEncodeWarps(nullptr), 4);  // the default
  EXPECT_EQ(parseEncodeWarps(""), 4);
  EXPECT_EQ(parseEncodeWarps("1"), 1);
  EXPECT_EQ(parseEncodeWarps("2"), 2);
  EXPECT_EQ(parseEncodeWarps("4"), 4);
}

TEST(LosslessKernelPath, RejectsOtherEncodeWarpsWithTheVariableNamed) {
  for (const char* bad : {"0", "3", "8", "two", "2 ", "on", "-2", "02"}) {
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
  const uint64_t limit = kStagedChunksPerSM * sms;
  EXPECT_TRUE(useStagedKernels(KernelPath::Auto, 512, sms));  // 4 MiB of bf16
  EXPECT_TRUE(useStagedKernels(KernelPath::Auto, limit, sms));
  EXPECT_FALSE(useStagedKernels(KernelPath::Auto, limit + 1, sms));
  EXPECT_FALSE(useStagedKernels(KernelPath::Auto, 65536, sms));  // 256 MiB of bf16
  EXPECT_TRUE(useStagedKernels(KernelPath::Staged, 65536, sms));
  EXPECT_FALSE(useStagedKernels(KernelPath::General, 1, sms));
}

}  // namespace
}  // namespace cclz::test
