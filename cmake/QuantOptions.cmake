# Compiler flags shared by every target: warnings, sanitizers, fuzzing.

add_compile_options(-Wall -Wextra)
if(QUANT_WERROR)
  add_compile_options(-Werror)
endif()

if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  # Every ABSL_GUARDED_BY member touched only with its mutex held
  # (core/base/mutex.h). GCC ignores the attributes; for GCC builds
  # scripts/check_thread_safety.sh runs the same analysis.
  add_compile_options(-Wthread-safety)
endif()

if(QUANT_SANITIZE)
  # -O1: at -O0 the Eigen kernels made the end-to-end tests ~10x slower than
  # the release build, an hour of CI; -g1 (line tables, enough for sanitizer
  # reports) keeps the objects small enough to link on CI's disk. Both come
  # after the build type's flags, so they win.
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined -O1 -g1)
  add_link_options(-fsanitize=address,undefined)
endif()

if(QUANT_TSAN)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "QUANT_TSAN needs clang (CXX=clang++)")
  endif()
  if(QUANT_SANITIZE OR QUANT_FUZZ)
    message(FATAL_ERROR "QUANT_TSAN cannot be combined with ASan builds")
  endif()
  # -O1 -g1 for the same reasons as the ASan build. Only code compiled here
  # is instrumented: Debian's absl and gRPC are not, which is why the
  # project's mutex wraps std::mutex (core/base/mutex.h) and why the TSan
  # build runs the tests that need no gRPC (scripts/test.sh --tsan).
  add_compile_options(-fsanitize=thread -O1 -g1)
  add_link_options(-fsanitize=thread)
endif()

if(QUANT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "QUANT_FUZZ needs clang (CXX=clang++)")
  endif()
  # Every object is instrumented for coverage; the fuzz targets link libFuzzer.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# Test binaries carry the whole project's debug info (~300 MB each, 11 GB
# for the release build's tests), and CI's disk is small. The release
# build's tests link with their debug sections compressed (zstd: 3.6x
# smaller, ~1.5 s a binary; zlib took 10 s). The sanitizer builds keep
# theirs plain so that their reports' symbolizer can read line tables, and
# programs keep theirs for perf (Debian 12's elfutils reads no zstd).
include(CheckLinkerFlag)
set(QUANT_TEST_LINK_OPTIONS "")
if(NOT QUANT_SANITIZE AND NOT QUANT_TSAN AND NOT QUANT_FUZZ)
  check_linker_flag(CXX "-Wl,--compress-debug-sections=zstd"
                    QUANT_LINKER_COMPRESSES_ZSTD)
  if(QUANT_LINKER_COMPRESSES_ZSTD)
    set(QUANT_TEST_LINK_OPTIONS "-Wl,--compress-debug-sections=zstd")
  endif()
endif()

# quant_add_test(NAME SOURCES... LIBS ...): one gtest binary, tests discovered
# by ctest. Tests find ../shared through QUANT_SHARED_DIR and fixtures through
# QUANT_FIXTURES_DIR.
function(quant_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_options(${name} PRIVATE ${QUANT_TEST_LINK_OPTIONS})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} quant_test_support
                        GTest::gmock GTest::gtest_main)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60
    # One ENVIRONMENT keyword per variable: a ;-joined list loses all but
    # the first on its way through gtest_discover_tests.
    PROPERTIES
      ENVIRONMENT "QUANT_SHARED_DIR=${QUANT_SHARED_DIR}"
      ENVIRONMENT "QUANT_FIXTURES_DIR=${QUANT_SOURCE_DIR}/tests/fixtures"
      ENVIRONMENT "QUANT_BINARY_DIR=${CMAKE_BINARY_DIR}"
      # `ctest -L NAME` runs one binary's tests (scripts/test.sh --tsan).
      LABELS "${name}")
endfunction()
