# GGUF reader and tensor types: tests beyond the cmocka unit tests (test_gguf, test_ggml_types).
#
# peer_ggml_types compares sift's type table, half conversions and reference
# (de)quantizers bit for bit with llama.cpp's own libggml-base.so from the peer build
# (../shared/peer). The suite must pass without the peer, so the test is registered only
# when the library is there at configure time.
set(SIFT_PEER_GGML "/tmp/sift-peer/package/bins/linux-x64/libggml-base.so" CACHE FILEPATH
    "llama.cpp's libggml-base.so, for the bit-exactness test of the tensor types")
add_executable(peer_ggml_types ${CMAKE_CURRENT_SOURCE_DIR}/peer_ggml_types.c)
target_link_libraries(peer_ggml_types PRIVATE sift_internal_inc)
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
target_link_libraries(gguf_corrupt PRIVATE sift_internal_inc)
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

# `sift info` on good and refused files: exit codes and the lines that must be there.
# (No square brackets in the patterns: CMake does not split lists inside them.)
function(sift_info_test name rc file)
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:sift>;info;${file}" -DEXPECT_RC=${rc}
           "-DEXPECT_RE=${ARGN}" "-DREJECT_RE=Sanitizer;runtime error"
           -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/expect_run.cmake)
  set_tests_properties(${name} PROPERTIES LABELS "gguf;cli" ENVIRONMENT "${SIFT_TEST_ENV}")
endfunction()
sift_info_test(cli_info_stories260k 0 ${SIFT_SHARED_DIR}/models/stories260K.gguf
  "GGUF version 3, 1185376 bytes, alignment 32, tensor data at offset 14176"
  "UINT32     \\|        1 \\| llama.embedding_length = 64"
  ".STRING.   \\|      512 \\| tokenizer.ggml.tokens = .'<unk>', '<s>', '</s>'"
  "special: bos 1 '<s>', eos 2 '</s>'"
  "1:         32768 \\|     64,    512,     1,     1 \\| f32     \\|            0 \\|       131072 \\| token_embd.weight"
  "total: 48 tensors, 292800 elements")
sift_info_test(cli_info_llama2_tiny 0 ${SIFT_SHARED_DIR}/models/llama-2-tiny-random.gguf
  "32000 tokens" "by type: f32 [0-9]+ \\([0-9]+ bytes\\) f16")
sift_info_test(cli_info_vocab_deepseek 0 ${SIFT_SHARED_DIR}/models/vocab/ggml-vocab-deepseek-llm.gguf
  "vocabulary: model gpt2, pre-tokenizer deepseek-llm, 102400 tokens, 99757 merges" "tensors: 0")
sift_info_test(cli_info_v1 1 ${SIFT_SHARED_DIR}/models/stories260K-gguf-v1.gguf
  "sift info: .*: gguf: header: GGUF version 1 is not supported")
# a file the loader refuses (Q8_0 rows of 172) is still shown, the bad tensors marked '!',
# the problem said at the end, exit 1 (sift generate refuses it: test_model)
sift_info_test(cli_info_q8_0_rows 1 ${SIFT_SHARED_DIR}/models/tinyllamas-stories-260k-q8_0.gguf
  "GGUF version 2, 327648 bytes"
  "7!         11008 \\|    172,     64,     1,     1 \\| q8_0 .* blk.0.ffn_down.weight  .rows are not whole blocks: no data."
  "total: 48 tensors"
  "PROBLEM: 5 tensors cannot be read"
  "blk.0.ffn_down.weight': type q8_0 has 172 elements per row, not a multiple of block size \\(32\\)")
sift_info_test(cli_info_missing 1 ${SIFT_SHARED_DIR}/models/no-such-file.gguf "cannot open")
sift_info_test(cli_info_usage 2 "--frobnicate" "unknown option '--frobnicate'")
