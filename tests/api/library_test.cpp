// Library-wide entry points: version, result names, last error, build information.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <thread>

#include "cclz/cclz.h"

namespace {

TEST(Library, Version) {
  int version = -1;
  ASSERT_EQ(cclzGetVersion(&version), cclzSuccess);
  EXPECT_EQ(version, CCLZ_VERSION_CODE);
  EXPECT_EQ(version, CCLZ_MAJOR * 10000 + CCLZ_MINOR * 100 + CCLZ_PATCH);
  EXPECT_EQ(cclzGetVersion(nullptr), cclzInvalidArgument);
  EXPECT_STRNE(cclzGetLastError(nullptr), "");
}

TEST(Library, ErrorStrings) {
  std::set<std::string> names;
  for (int r = 0; r < cclzNumResults; ++r) {
    const char* s = cclzGetErrorString(static_cast<cclzResult_t>(r));
    ASSERT_NE(s, nullptr) << r;
    EXPECT_GT(std::strlen(s), 0u) << r;
    names.insert(s);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(cclzNumResults)) << "names are distinct";
  for (int r : {-1, static_cast<int>(cclzNumResults), 100, 1 << 30}) {
    const char* s = cclzGetErrorString(static_cast<cclzResult_t>(r));
    ASSERT_NE(s, nullptr) << r;
    EXPECT_EQ(names.count(s), 0u) << "out-of-range code " << r << " named like a real one";
  }
}

TEST(Library, BuildInfo) {
  cclzBuildInfo_t info;
  std::memset(&info, 0x7F, sizeof info);
  info.size = sizeof info;
  ASSERT_EQ(cclzGetBuildInfo(&info), cclzSuccess);
  EXPECT_EQ(info.version, CCLZ_VERSION_CODE);
#ifdef CCLZ_HAVE_CUDA
  EXPECT_EQ(info.hasCuda, 1);
  EXPECT_GT(info.cudaRuntimeVersion, 0);
  EXPECT_GT(std::strlen(info.cudaArchs), 0u);
#else
  EXPECT_EQ(info.hasCuda, 0);
  EXPECT_EQ(info.cudaRuntimeVersion, 0);
  EXPECT_STREQ(info.cudaArchs, "");
#endif
  EXPECT_TRUE(info.hasNccl == 0 || info.hasNccl == 1);
  EXPECT_TRUE(info.hasMpi == 0 || info.hasMpi == 1);
  EXPECT_LT(std::strlen(info.compiler), sizeof info.compiler);
  EXPECT_GT(std::strlen(info.compiler), 0u);
  EXPECT_LT(std::strlen(info.cudaArchs), sizeof info.cudaArchs);

  EXPECT_EQ(cclzGetBuildInfo(nullptr), cclzInvalidArgument);
  info.size = sizeof info + 8;
  EXPECT_EQ(cclzGetBuildInfo(&info), cclzInvalidArgument);
  info.size = 0;
  EXPECT_EQ(cclzGetBuildInfo(&info), cclzInvalidArgument);
}

// The last error belongs to the thread that made the call.
TEST(Library, LastErrorIsPerThread) {
  ASSERT_EQ(cclzGetVersion(nullptr), cclzInvalidArgument);
  const std::string mine = cclzGetLastError(nullptr);
  ASSERT_FALSE(mine.empty());
  std::string other = "unset";
  std::thread t([&] { other = cclzGetLastError(nullptr); });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(mine, cclzGetLastError(nullptr));
  int version = 0;
  ASSERT_EQ(cclzGetVersion(&version), cclzSuccess);
  EXPECT_STREQ(cclzGetLastError(nullptr), "");
}

}  // namespace
