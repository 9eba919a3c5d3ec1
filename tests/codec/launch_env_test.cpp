// CCLZ_PDL (src/codec/launch_env.h): whether the codecs' kernels use programmatic dependent
// launch. The frames are the same either way (the GPU suites); here only the parsing.
#include <gtest/gtest.h>

#include <string>

#include "codec/launch_env.h"
#include "common/error.h"

namespace cclz::test {
namespace {

TEST(LaunchEnv, ParsesOnAndOff) {
  EXPECT_TRUE(parseProgrammaticLaunch(nullptr));  // the default
  EXPECT_TRUE(parseProgrammaticLaunch(""));
  EXPECT_TRUE(parseProgrammaticLaunch("1"));
  EXPECT_FALSE(parseProgrammaticLaunch("0"));
}

TEST(LaunchEnv, RejectsOtherValuesWithTheVariableNamed) {
  for (const char* bad : {"on", "off", "2", " 0", "true"}) {
    try {
      parseProgrammaticLaunch(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclzInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("CCLZ_PDL"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace cclz::test
