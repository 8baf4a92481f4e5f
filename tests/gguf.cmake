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

# Corrupted files generated at test time from the shared models (nothing is committed):
# every variant must be refused with a reader message, in process and through
# `sift info` (exit 1, no sanitizer report); random mutations must not crash.
add_executable(gguf_corrupt ${CMAKE_CURRENT_SOURCE_DIR}/gguf_corrupt.c)
target_include_directories(gguf_corrupt PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_options(gguf_corrupt PRIVATE ${SIFT_WARN})
target_link_libraries(gguf_corrupt PRIVATE sift_static)
foreach(spec
    "stories260k|models/stories260K.gguf|"
    "llama2_tiny|models/llama-2-tiny-random.gguf|"
    "v2_q8_0|models/stories260K.gguf|--v2-quant"
    "vocab_bert|models/vocab/ggml-vocab-bert-bge.gguf|"
    "vocab_gpt2|models/vocab/ggml-vocab-gpt-2.gguf|--random;300"
    "v1|models/stories260K-gguf-v1.gguf|--refused")
  string(REPLACE "|" ";" parts "${spec}")
  list(GET parts 0 name)
  list(GET parts 1 file)
  list(SUBLIST parts 2 -1 extra)
  add_test(NAME gguf_corrupt_${name}
           COMMAND gguf_corrupt --sift $<TARGET_FILE:sift> ${extra} ${SIFT_SHARED_DIR}/${file})
  set_tests_properties(gguf_corrupt_${name} PROPERTIES LABELS "gguf;corrupt" ENVIRONMENT "${SIFT_TEST_ENV}")
endforeach()
