# Tokenizer tests against llama.cpp's results (included by tests/CMakeLists.txt).
#
#  vocab_<name>        every .inp string of ../shared/models/vocab/ggml-vocab-<name>.gguf gives
#                      the ids of its .out file (from the shared folder, or, for the vocabularies
#                      whose .out the shared folder lacks, from tests/data/vocab/, generated with
#                      llama.cpp - see tests/data/vocab/README.md), and detokenize(tokenize(s))
#                      restores exactly the strings llama.cpp restores;
#  model_prompts_<m>   the prompt tokenizations and continuation pieces of
#                      ../shared/reference/model/<m>.json;
#  cli_tokenize_*      `sift tokenize` output;
#  tokenizer_peer      (label peer;slow; only when llama.cpp's library is in SIFT_PEER_DIR)
#                      everything against libllama in one process: facts, every piece, the .inp
#                      strings and a generated corpus in 16 flag combinations, every code point;
#                      and the gpt-2 vocabulary rewritten with every pre-tokenizer name sift knows.
add_executable(tokenizer_vocab ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer_vocab.c)
target_link_libraries(tokenizer_vocab PRIVATE sift_internal_inc)
target_compile_options(tokenizer_vocab PRIVATE ${SIFT_WARN})
target_link_libraries(tokenizer_vocab PRIVATE sift_static PkgConfig::CJSON)

set(SIFT_VOCAB_DIR ${SIFT_SHARED_DIR}/models/vocab)
# name | strings llama.cpp does not restore by detokenize(tokenize(s)) (tests/tokenizer_peer.c)
set(SIFT_VOCAB_TESTS
  "bert-bge|!2,29,33,44"
  "deepseek-coder|none"
  "deepseek-llm|none"
  "falcon|32,45"
  "gpt-2|32,45"
  "llama-spm|none"
  "mpt|32,45"
  "phi-3|none"
  "refact|32,45"
  "starcoder|32,45")
foreach(entry IN LISTS SIFT_VOCAB_TESTS)
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 name)
  list(GET parts 1 lossy)
  set(out ${SIFT_VOCAB_DIR}/ggml-vocab-${name}.gguf.out)
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/data/vocab/ggml-vocab-${name}.gguf.out)
    set(out ${CMAKE_CURRENT_SOURCE_DIR}/data/vocab/ggml-vocab-${name}.gguf.out)
  endif()
  add_test(NAME vocab_${name}
           COMMAND tokenizer_vocab inp ${SIFT_VOCAB_DIR}/ggml-vocab-${name}.gguf ${out} "${lossy}")
  set_tests_properties(vocab_${name} PROPERTIES LABELS tokenizer ENVIRONMENT "${SIFT_TEST_ENV}")
endforeach()

foreach(m stories260K llama-2-tiny-random)
  add_test(NAME model_prompts_${m}
           COMMAND tokenizer_vocab json ${SIFT_SHARED_DIR}/reference/model/${m}.json ${SIFT_SHARED_DIR}/models)
  set_tests_properties(model_prompts_${m} PROPERTIES LABELS tokenizer ENVIRONMENT "${SIFT_TEST_ENV}")
endforeach()

# `sift tokenize`: the prompt of the model reference, ids and the default listing
add_test(NAME cli_tokenize_ids
         COMMAND sift tokenize -m ${SIFT_SHARED_DIR}/models/stories260K.gguf -p "Once upon a time" --ids)
set_tests_properties(cli_tokenize_ids PROPERTIES LABELS "tokenizer;cli" ENVIRONMENT "${SIFT_TEST_ENV}"
                     PASS_REGULAR_EXPRESSION "^\\[1, 403, 407, 261, 378\\]\n$")
add_test(NAME cli_tokenize_listing
         COMMAND sift tokenize -m ${SIFT_VOCAB_DIR}/ggml-vocab-llama-spm.gguf -p "Hello<s>\\n" --show-count)
set_tests_properties(cli_tokenize_listing PROPERTIES LABELS "tokenizer;cli" ENVIRONMENT "${SIFT_TEST_ENV}"
                     PASS_REGULAR_EXPRESSION
                     "^     1 -> '<s>'\n 15043 -> ' Hello'\n     1 -> '<s>'\n 29871 -> ' '\n    13 -> '\n'\nTotal number of tokens: 5\n$")
add_test(NAME cli_tokenize_no_flags
         COMMAND sift tokenize -m ${SIFT_VOCAB_DIR}/ggml-vocab-llama-spm.gguf -p "<s>a\\n" --no-bos
                 --no-parse-special --no-escape --ids --log-disable)
set_tests_properties(cli_tokenize_no_flags PROPERTIES LABELS "tokenizer;cli" ENVIRONMENT "${SIFT_TEST_ENV}"
                     PASS_REGULAR_EXPRESSION "^\\[529, 29879, 29958, 29874, 29905, 29876\\]\n$")
# refusals: exit 2 and the flag named for usage errors, exit 1 and the reason for a bad file
function(sift_tokenize_fails name rc re)
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:sift>;tokenize;${ARGN}" -DEXPECT_RC=${rc}
           "-DEXPECT_RE=${re}" "-DREJECT_RE=Sanitizer;runtime error" -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/expect_run.cmake)
  set_tests_properties(${name} PROPERTIES LABELS "tokenizer;cli" ENVIRONMENT "${SIFT_TEST_ENV}")
endfunction()
sift_tokenize_fails(cli_tokenize_no_model 2 "model path is required \\(-m\\)" -p x)
sift_tokenize_fails(cli_tokenize_two_sources 2 "mutually exclusive" -m x.gguf -p x --stdin)
sift_tokenize_fails(cli_tokenize_missing_value 2 "requires an argument: -p" -m x.gguf -p)
sift_tokenize_fails(cli_tokenize_unknown_flag 2 "unknown option --frobnicate" -m x.gguf -p x --frobnicate)
sift_tokenize_fails(cli_tokenize_v1_file 1 "GGUF version 1 is not supported"
                    -m ${SIFT_SHARED_DIR}/models/stories260K-gguf-v1.gguf -p x)
sift_tokenize_fails(cli_tokenize_missing_file 1 "-f: cannot open"
                    -m ${SIFT_SHARED_DIR}/models/stories260K.gguf -f /nonexistent/prompt.txt)

# Against llama.cpp itself, when its library is present (make -C ../shared/peer).
set(SIFT_PEER_DIR "/tmp/sift-peer" CACHE PATH "where make -C ../shared/peer put llama.cpp's library")
set(SIFT_PEER_LIBDIR ${SIFT_PEER_DIR}/package/bins/linux-x64)
if(EXISTS ${SIFT_PEER_LIBDIR}/libllama.v0.5.0.so AND EXISTS ${SIFT_SHARED_DIR}/peer/model_ref_api.h)
  add_executable(tokenizer_peer ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer_peer.c)
  target_include_directories(tokenizer_peer PRIVATE ${SIFT_SHARED_DIR}/peer)
  target_link_libraries(tokenizer_peer PRIVATE sift_internal_inc)
  target_compile_options(tokenizer_peer PRIVATE ${SIFT_WARN})
  target_link_libraries(tokenizer_peer PRIVATE sift_static
    -L${SIFT_PEER_LIBDIR} -Wl,-rpath,${SIFT_PEER_LIBDIR} -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so)
  file(GLOB SIFT_PEER_VOCABS ${SIFT_VOCAB_DIR}/ggml-vocab-*.gguf)
  add_test(NAME tokenizer_peer COMMAND tokenizer_peer --pre-variants ${SIFT_VOCAB_DIR}/ggml-vocab-gpt-2.gguf
           --gemma4-from ${SIFT_VOCAB_DIR}/ggml-vocab-llama-spm.gguf
           ${SIFT_PEER_VOCABS}
           ${SIFT_SHARED_DIR}/models/stories260K.gguf ${SIFT_SHARED_DIR}/models/llama-2-tiny-random.gguf)
  set_tests_properties(tokenizer_peer PROPERTIES LABELS "tokenizer;peer;slow" ENVIRONMENT "${SIFT_TEST_ENV}"
                       SKIP_RETURN_CODE 77 TIMEOUT 1800) # (about 200 s alone; CI runs it beside whole builds)
  # the vocabularies `sift mkmodel --fim-style qwen|codellama` writes (for /infill): llama.cpp
  # reads the same FIM, EOT and end-of-generation ids from them (about a second)
  add_test(NAME tokenizer_peer_fim COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/tokenizer_peer_fim.sh $<TARGET_FILE:sift>
           ${SIFT_SHARED_DIR}/models/stories260K.gguf $<TARGET_FILE:tokenizer_peer>)
  set_tests_properties(tokenizer_peer_fim PROPERTIES LABELS "tokenizer;peer" ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 120)
endif()
