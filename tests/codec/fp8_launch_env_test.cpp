// CCLZ_FP8_PDL (src/codec/fp8/launch_env.h): whether the sampling kernels use programmatic
// dependent launch. The frames are the same either way (the GPU suite); here only the parsing.
#include <gtest/gtest.h>

#include <string>

#include "codec/fp8/launch_env.h"
#include "common/error.h"

namespace cclz::test {
namespace {

TEST(Fp8LaunchEnv, ParsesOnAndOff) {
  EXPECT_TRUE(fp8::parseProgrammaticLaunch(nullptr));  // the default
  EXPECT_TRUE(fp8::parseProgrammaticLaunch(""));
  EXPECT_TRUE(fp8::parseProgrammaticLaunch("1"));
  EXPECT_FALSE(fp8::parseProgrammaticLaunch("0"));
}

TEST(Fp8LaunchEnv, RejectsOtherValuesWithTheVariableNamed) {
  for (const char* bad : {"on", "off", "2", " 0", "true"}) {
    try {
      fp8::parseProgrammaticLaunch(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclzInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("CCLZ_FP8_PDL"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace cclz::test
