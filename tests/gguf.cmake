# GGUF reader and tensor types: tests beyond the cmocka unit tests (test_gguf, test_ggml_types).
#
# peer_ggml_types compares sift's type table, half conversions and reference
# (de)quantizers bit for bit with llama.cpp's own libggml-base.so from the peer build
# (../shared/peer). The suite must pass without the peer, so the test is registered only
# when the library is there at configure time.
set(SIFT_PEER_GGML "/tmp/sift-peer/package/bins/linux-x64/libggml-base.so" CACHE FILEPATH
    "llama.cpp's libggml-base.so, for the bit-exactness test of the tensor types")
add_executable(peer_ggml_types ${CMAKE_CURRENT_SOURCE_DIR}/peer_ggml_types.c)
target_include_directories(peer_ggml_types PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_options(peer_ggml_types PRIVATE ${SIFT_WARN})
target_link_libraries(peer_ggml_types PRIVATE sift_static ${CMAKE_DL_LIBS})
if(EXISTS "${SIFT_PEER_GGML}")
  add_test(NAME ggml_types_peer COMMAND peer_ggml_types "${SIFT_PEER_GGML}")
  set_tests_properties(ggml_types_peer PROPERTIES LABELS "peer" ENVIRONMENT "${SIFT_TEST_ENV}")
endif()
