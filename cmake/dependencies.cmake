# Finds the well-kept libraries cclz uses: from the system (Debian: libcli11-dev,
# nlohmann-json3-dev, libfmt-dev, libgtest-dev) or, where they are not installed, from
# CCLZ_DEPS_DIR (header-only copies and googletest sources; scripts/dev/prepare-deps.sh).

if(CCLZ_DEPS_DIR)
  list(PREPEND CMAKE_PREFIX_PATH ${CCLZ_DEPS_DIR})
endif()

# CLI11 and nlohmann-json are header-only.
find_package(CLI11 CONFIG QUIET)
if(NOT TARGET CLI11::CLI11)
  find_path(CCLZ_CLI11_INCLUDE CLI/CLI.hpp HINTS ${CCLZ_DEPS_DIR}/include REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${CCLZ_CLI11_INCLUDE})
endif()

find_package(nlohmann_json CONFIG QUIET)
if(NOT TARGET nlohmann_json::nlohmann_json)
  find_path(CCLZ_JSON_INCLUDE nlohmann/json.hpp HINTS ${CCLZ_DEPS_DIR}/include REQUIRED)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  target_include_directories(nlohmann_json::nlohmann_json INTERFACE ${CCLZ_JSON_INCLUDE})
endif()

# fmt: the compiled library if there is one, else its header-only mode.
find_package(fmt CONFIG QUIET)
if(NOT TARGET fmt::fmt)
  find_path(CCLZ_FMT_INCLUDE fmt/format.h HINTS ${CCLZ_DEPS_DIR}/include REQUIRED)
  add_library(fmt::fmt INTERFACE IMPORTED)
  target_include_directories(fmt::fmt INTERFACE ${CCLZ_FMT_INCLUDE})
  target_compile_definitions(fmt::fmt INTERFACE FMT_HEADER_ONLY=1)
endif()

if(CCLZ_BUILD_TESTS)
  find_package(GTest CONFIG QUIET)
  if(NOT TARGET GTest::gtest_main)
    if(CCLZ_DEPS_DIR AND EXISTS ${CCLZ_DEPS_DIR}/googletest/CMakeLists.txt)
      set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
      set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
      add_subdirectory(${CCLZ_DEPS_DIR}/googletest ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
    else()
      find_package(GTest REQUIRED)
    endif()
  endif()
endif()
