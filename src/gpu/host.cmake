# The host half of src/gpu: the plan of a chain's items (plan.c), the handoff to CPU tails
# (handoff.c) and the host reference of the device program (host_reference.c). Plain C
# with no CUDA dependency, so it is built - and its tests run, under the sanitizers and valgrind too -
# in every configuration: src/gpu/CMakeLists.txt includes this file when nvcc is found,
# tests/gpu.cmake when it is not.
if(NOT TARGET sift_gpu_host)
  # The gpu layer's include view ("gpu/x.h"), on top of the CPU layers it plans for.
  set(SIFT_GPU_VIEW ${PROJECT_BINARY_DIR}/layers/gpu)
  file(MAKE_DIRECTORY ${SIFT_GPU_VIEW})
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/gpu ${SIFT_GPU_VIEW}/gpu SYMBOLIC)
  add_library(sift_gpu_inc INTERFACE)
  target_include_directories(sift_gpu_inc INTERFACE ${SIFT_GPU_VIEW})
  target_link_libraries(sift_gpu_inc INTERFACE sift_samplers_inc)
  add_library(sift_gpu_host STATIC
    ${PROJECT_SOURCE_DIR}/src/gpu/plan.c
    ${PROJECT_SOURCE_DIR}/src/gpu/handoff.c
    ${PROJECT_SOURCE_DIR}/src/gpu/host_reference.c)
  target_include_directories(sift_gpu_host PUBLIC ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(sift_gpu_host PUBLIC sift_gpu_inc)
  target_compile_options(sift_gpu_host PRIVATE ${SIFT_WARN})
  target_link_libraries(sift_gpu_host PUBLIC sift_static m)
endif()
