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
  target_include_directories(gpu_device PRIVATE ${PROJECT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_options(gpu_device PRIVATE ${SIFT_WARN})
  target_link_libraries(gpu_device PRIVATE sift_cuda PkgConfig::CMOCKA)
  add_test(NAME gpu_device COMMAND gpu_device)
  set_tests_properties(gpu_device PROPERTIES LABELS "gpu" SKIP_RETURN_CODE 77 ENVIRONMENT "${SIFT_TEST_ENV}")
endif()
