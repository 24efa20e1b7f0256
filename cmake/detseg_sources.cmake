# Source lists shared by the main build (CMakeLists.txt) and the sanitized torch-free build
# (fuzz/CMakeLists.txt), so the two cannot drift apart. Expects DETSEG_ROOT (the repository).

# The torch-free base: errors/files/JSON/logging, the config, the evaluators, the annotation
# readers and the weights download (hub/). The `detseg` front binary links only this, so `detseg
# coco-eval` starts in milliseconds instead of paying LibTorch's ~1 s load.
file(GLOB_RECURSE DETSEG_BASE_SOURCES CONFIGURE_DEPENDS
     ${DETSEG_ROOT}/detseg/core/*.cpp ${DETSEG_ROOT}/detseg/config/*.cpp
     ${DETSEG_ROOT}/detseg/eval/*.cpp ${DETSEG_ROOT}/detseg/data/readers/*.cpp
     ${DETSEG_ROOT}/detseg/hub/*.cpp)
list(REMOVE_ITEM DETSEG_BASE_SOURCES ${DETSEG_ROOT}/detseg/core/threads.cpp)

# The torch-free `detseg` front: main.cpp (the whole grammar), the subcommands it runs itself, and
# front.cpp, which forwards the others to detseg-engine (and is in the front only).
set(DETSEG_FRONT_ONLY ${DETSEG_ROOT}/cli/front.cpp)
set(DETSEG_FRONT_SOURCES ${DETSEG_ROOT}/cli/main.cpp ${DETSEG_ROOT}/cli/cmd_coco_eval.cpp
    ${DETSEG_ROOT}/cli/cmd_config.cpp ${DETSEG_ROOT}/cli/cmd_fetch.cpp ${DETSEG_FRONT_ONLY})
