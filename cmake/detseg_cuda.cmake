# CUDA kernels (detseg/ops/*.cu): built when nvcc and a CUDA LibTorch are both found, so a CPU-only
# LibTorch still builds with them off. Included right after find_package(Torch): a CUDA LibTorch's
# config has already enabled the CUDA language then and set CAFFE2_USE_CUDA.
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER AND CAFFE2_USE_CUDA)
  set(DETSEG_CUDA_FOUND ON)
else()
  set(DETSEG_CUDA_FOUND OFF)
endif()
option(DETSEG_WITH_CUDA "Build the CUDA kernels (needs a CUDA LibTorch and nvcc)" ${DETSEG_CUDA_FOUND})
# LibTorch's config resets CMAKE_CUDA_ARCHITECTURES (it wants TORCH_CUDA_ARCH_LIST), so ours is a
# separate setting: Ampere and Hopper machine code plus compute_90 PTX for later GPUs to JIT.
set(DETSEG_CUDA_ARCHITECTURES "80-real;90-real;90-virtual" CACHE STRING
    "CUDA_ARCHITECTURES of the detseg kernels")
if(DETSEG_WITH_CUDA)
  if(NOT DETSEG_CUDA_FOUND)
    message(FATAL_ERROR "DETSEG_WITH_CUDA=ON needs nvcc and a CUDA build of LibTorch "
                        "(nvcc: '${CMAKE_CUDA_COMPILER}', LibTorch CUDA: '${CAFFE2_USE_CUDA}')")
  endif()
  enable_language(CUDA)
  # LibTorch's config appends -gencode flags for every architecture it knows (11 with CUDA 13, when
  # no GPU is visible) to CMAKE_CUDA_FLAGS; CUDA_ARCHITECTURES below picks ours instead.
  string(REGEX REPLACE "-gencode[ =]+arch=[^ ]+" "" CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS}")
  # LibTorch links the shared CUDA runtime; one runtime per process, not a second static copy.
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  message(STATUS "detseg: CUDA kernels ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                 "architectures ${DETSEG_CUDA_ARCHITECTURES})")
else()
  message(STATUS "detseg: CUDA kernels OFF")
endif()

# Adds detseg/ops/*.cu to `target` and defines DETSEG_WITH_CUDA=1 for it and its users.
function(detseg_add_cuda_kernels target)
  if(NOT DETSEG_WITH_CUDA)
    return()
  endif()
  file(GLOB cuda_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/detseg/ops/*.cu)
  target_sources(${target} PRIVATE ${cuda_sources})
  # The C++ precompiled header is g++'s; nvcc cannot use it.
  set_source_files_properties(${cuda_sources} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES "${DETSEG_CUDA_ARCHITECTURES}")
  target_compile_definitions(${target} PUBLIC DETSEG_WITH_CUDA=1)
  # The __CUDA_NO_* macros keep CUDA's half operators from clashing with c10::Half's (as torch's own
  # extensions build); no FMA contraction so the kernels round like the CPU kernels.
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr;--fmad=false;-D__CUDA_NO_HALF_OPERATORS__;-D__CUDA_NO_HALF_CONVERSIONS__;-D__CUDA_NO_BFLOAT16_CONVERSIONS__;-D__CUDA_NO_HALF2_OPERATORS__>")
endfunction()

# c10d's ProcessGroupNCCL (train.distributed.backend on GPUs) compiles against the nccl.h LibTorch
# was built with: the nvidia-nccl wheel beside the torch wheel, else the CUDA toolkit's. Without it
# multi-GPU runs use Gloo (through the host) and backend nccl is refused in one line.
function(detseg_add_nccl source)
  if(NOT DETSEG_WITH_CUDA)
    return()
  endif()
  find_path(DETSEG_NCCL_INCLUDE_DIR nccl.h
            HINTS "${Torch_DIR}/../../../../nvidia/nccl/include" ${CUDAToolkit_INCLUDE_DIRS}
                  "${CMAKE_CUDA_COMPILER_TOOLKIT_ROOT}/include")
  if(NOT DETSEG_NCCL_INCLUDE_DIR)
    message(STATUS "detseg: NCCL OFF (no nccl.h)")
    return()
  endif()
  message(STATUS "detseg: NCCL ON (${DETSEG_NCCL_INCLUDE_DIR}/nccl.h)")
  set_property(SOURCE ${source} APPEND PROPERTY INCLUDE_DIRECTORIES ${DETSEG_NCCL_INCLUDE_DIR})
  set_property(SOURCE ${source} APPEND PROPERTY COMPILE_DEFINITIONS DETSEG_WITH_NCCL=1)
endfunction()
