# Device chain tests (docs/gpu.md).
#
# test_gpu_host (a tests/test_*.c unit test, so it also runs under valgrind and the
# sanitizers) checks everything that needs no GPU: the spec split, per-sequence specs,
# sampling params -> spec, the handoff, and the host reference of every kernel against the
# CPU samplers and llama.cpp's reference streams. It links the host half of src/gpu, built
# here when nvcc is absent.
#
# gpu_device runs the kernels themselves against the CPU samplers and the host reference;
# it needs a CUDA device and exits 77 (CTest: skipped) without one. Label "gpu". Run it
# under compute-sanitizer with `compute-sanitizer --tool memcheck build/tests/gpu_device`
# (and racecheck, synccheck, initcheck).
if(NOT TARGET sift_gpu_host)
  include(${PROJECT_SOURCE_DIR}/src/gpu/host.cmake)
endif()
target_link_libraries(test_gpu_host PRIVATE sift_gpu_host)

if(TARGET sift_cuda)
  add_executable(gpu_device ${CMAKE_CURRENT_SOURCE_DIR}/gpu_device.c)
  target_include_directories(gpu_device PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(gpu_device PRIVATE sift_internal_inc)
  target_compile_options(gpu_device PRIVATE ${SIFT_WARN})
  target_link_libraries(gpu_device PRIVATE sift_cuda PkgConfig::CMOCKA)
  add_test(NAME gpu_device COMMAND gpu_device)
  set_tests_properties(gpu_device PROPERTIES LABELS "gpu" SKIP_RETURN_CODE 77 ENVIRONMENT "${SIFT_TEST_ENV}")
endif()

# gpu_emu: the same device tests, on smaller inputs, with src/gpu/kernels.cu and chain.c
# compiled against the CUDA emulator of tests/cuda_emu (host C++: blocks run one after
# another in shuffled order, a block's threads as coroutines with real barrier and shuffle
# semantics, deadlock and shared-memory overrun checks). It runs the kernels' parallel
# mechanics on machines without a GPU; what it cannot show is in tests/cuda_emu/README.md.
# Not in sanitizer builds (the emulator's coroutines switch stacks under ASan's feet).
if(NOT SIFT_SANITIZE AND NOT CMAKE_CROSSCOMPILING) # (the emulator is host C++)
  include(CheckLanguage)
  check_language(CXX)
  if(CMAKE_CXX_COMPILER)
    enable_language(CXX)
    add_executable(gpu_emu ${CMAKE_CURRENT_SOURCE_DIR}/gpu_device.c ${PROJECT_SOURCE_DIR}/src/gpu/chain.c
                           ${CMAKE_CURRENT_SOURCE_DIR}/cuda_emu/kernels_emu.cpp ${CMAKE_CURRENT_SOURCE_DIR}/cuda_emu/emu.cpp)
    target_include_directories(gpu_emu BEFORE PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/cuda_emu)
    target_include_directories(gpu_emu PRIVATE ${PROJECT_SOURCE_DIR}/include
                                               ${CMAKE_CURRENT_SOURCE_DIR})
    target_link_libraries(gpu_emu PRIVATE sift_internal_inc)
    target_compile_definitions(gpu_emu PRIVATE SIFT_GPU_EMU=1)
    target_compile_options(gpu_emu PRIVATE $<$<COMPILE_LANGUAGE:C>:${SIFT_WARN}>
                                           $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra $<$<BOOL:${SIFT_WERROR}>:-Werror> -Wno-unused-parameter -Wno-unknown-pragmas>)
    target_link_libraries(gpu_emu PRIVATE sift_gpu_host sift_static PkgConfig::CMOCKA)
    add_test(NAME gpu_emu COMMAND gpu_emu)
    set_tests_properties(gpu_emu PROPERTIES LABELS "gpu;emu" ENVIRONMENT "${SIFT_TEST_ENV}")
  endif()
endif()
