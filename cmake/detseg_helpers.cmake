# Small helpers shared by the library, tests and benchmarks.

function(detseg_warnings target)
  # nvcc takes host-compiler warnings only through -Xcompiler.
  target_compile_options(${target} PRIVATE
    "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wno-unused-parameter>"
    "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>")
endfunction()

# Precompiled headers, measured here with g++ 12 -O3: a file that uses ATen compiles in ~3 s with an
# <ATen/ATen.h> PCH and ~10 s without; a PCH of the whole <torch/torch.h> costs every file ~15 s even
# when it uses none of it, so each kind of code gets the smallest header set it needs.
#   ATEN: tensor code (ops, losses, data, eval); NN: + torch::nn and torch::optim (models, train);
#   CLI: + CLI11 (its header alone costs ~15 s a file); TEST: + GoogleTest.
function(detseg_pch target kind)
  set(headers <ATen/ATen.h> <vector> <string> <memory> <unordered_map> <algorithm> <cmath>)
  if(kind STREQUAL "NN")
    list(APPEND headers <torch/nn/module.h> <torch/nn/modules/conv.h> <torch/nn/modules/batchnorm.h>
         <torch/nn/functional.h> <torch/optim.h>)
  elseif(kind STREQUAL "CLI")
    list(APPEND headers <CLI/CLI.hpp>)
  elseif(kind STREQUAL "TEST")
    list(APPEND headers <gtest/gtest.h>)
  endif()
  target_precompile_headers(${target} PRIVATE ${headers})
endfunction()

# One GoogleTest executable per test folder (tests/ops, tests/eval, ...).
function(detseg_add_test_dir name dir)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${dir}/*.cpp)
  if(NOT srcs)
    return()
  endif()
  add_executable(${name} ${srcs} ${PROJECT_SOURCE_DIR}/tests/test_main.cpp)
  target_link_libraries(${name} PRIVATE detseg_lib detseg_test_paths GTest::gtest GTest::gmock)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  add_dependencies(${name} detseg)
  target_precompile_headers(${name} REUSE_FROM detseg_test_pch)
  detseg_warnings(${name})
  # One ctest entry per program, not per case: every process start loads LibTorch (~0.5-3 s), which
  # made per-case entries dominate the suite's time. --output-on-failure shows the failing cases.
  add_test(NAME ${name} COMMAND ${name} --gtest_brief=1)
  # ctest runs two programs at once on two cores: spinning OpenMP threads would then fight each other
  # (see docs/cli.md; `detseg` sets the same for its engine). The TIMEOUT is each program's limit
  # under every kernel set (ctest's --timeout does not override a test's own TIMEOUT): the slowest
  # program, test_learning under ATen default + oneDNN SSE41, takes about 60% of it on a 2-core
  # AMD EPYC.
  set_tests_properties(${name} PROPERTIES LABELS ${name} TIMEOUT 1200 ENVIRONMENT "OMP_WAIT_POLICY=passive")
endfunction()

function(detseg_add_bench name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE detseg_lib detseg_test_paths benchmark::benchmark)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  add_dependencies(${name} detseg)
  # One precompiled header for all of them (each its own cost ~40 s of a 2-core build).
  if(TARGET detseg_bench_pch)
    target_precompile_headers(${name} REUSE_FROM detseg_bench_pch)
  else()
    detseg_pch(${name} ATEN)
  endif()
  detseg_warnings(${name})
endfunction()

# tests/test_paths.h's values for this build, in one generated object (not -D flags on every test
# object, which would make each clone's compile commands differ and defeat ccache).
function(detseg_add_test_paths source_dir python)
  set(DETSEG_PATHS_SOURCE ${source_dir})
  set(DETSEG_PATHS_PYTHON ${python})
  configure_file(${source_dir}/cmake/test_paths.cpp.in ${CMAKE_CURRENT_BINARY_DIR}/test_paths.cpp.gen @ONLY)
  file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/test_paths.cpp INPUT ${CMAKE_CURRENT_BINARY_DIR}/test_paths.cpp.gen)
  add_library(detseg_test_paths STATIC ${CMAKE_CURRENT_BINARY_DIR}/test_paths.cpp)
  target_include_directories(detseg_test_paths PRIVATE ${source_dir}/tests)
endfunction()
