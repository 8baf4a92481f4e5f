# Grammar tests beyond the cmocka unit tests (test_gbnf, test_grammar_match,
# test_grammar_sampler, test_json_schema):
#
#   grammar_generate     seeded generations per grammar (five grammar files and two JSON
#                        schemas) over random logits on the llama-spm 32000 and deepseek-llm
#                        102400 vocabularies; every document must be a sentence of its grammar,
#                        JSON must parse (cJSON) and validate against its schema. Label slow.
#                        CTest runs 50 documents per grammar (CI time); the acceptance run is
#                        `build/tests/grammar_generate` (200) and `... --model models/stories260K.gguf`.
#   grammar_mask_vocab   the cached token masks against the reference matcher, token by token,
#                        on the real vocabularies along random generations. Label slow.
#   json_schema_cli      `sift json-schema-to-grammar`: output, exit codes, error messages.
add_executable(grammar_generate ${CMAKE_CURRENT_SOURCE_DIR}/grammar_generate.c)
target_include_directories(grammar_generate PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(grammar_generate PRIVATE sift_internal_inc)
target_compile_options(grammar_generate PRIVATE ${SIFT_WARN})
target_link_libraries(grammar_generate PRIVATE sift_static PkgConfig::CJSON PkgConfig::PCRE2 m)
add_test(NAME grammar_generate COMMAND grammar_generate --docs 50)
set_tests_properties(grammar_generate PROPERTIES LABELS slow ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 1800)

add_executable(grammar_mask_vocab ${CMAKE_CURRENT_SOURCE_DIR}/grammar_mask_vocab.c)
target_include_directories(grammar_mask_vocab PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(grammar_mask_vocab PRIVATE sift_internal_inc)
target_compile_options(grammar_mask_vocab PRIVATE ${SIFT_WARN})
target_link_libraries(grammar_mask_vocab PRIVATE sift_static m)
add_test(NAME grammar_mask_vocab COMMAND grammar_mask_vocab --steps 40)
set_tests_properties(grammar_mask_vocab PROPERTIES LABELS slow ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 1800)

add_test(NAME json_schema_cli COMMAND ${CMAKE_COMMAND} -DSIFT=$<TARGET_FILE:sift>
         -DSRC=${PROJECT_SOURCE_DIR} -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/json_schema_cli.cmake)
set_tests_properties(json_schema_cli PROPERTIES ENVIRONMENT "${SIFT_TEST_ENV}")

# grammar_generate_model: the same checks with ../shared/models/stories260K.gguf's real forward
# pass (50 documents per grammar here, 200 in the acceptance run; rejection and grammar-first
# modes alternate). Label slow.
add_test(NAME grammar_generate_model COMMAND grammar_generate --docs 50 --model models/stories260K.gguf)
set_tests_properties(grammar_generate_model PROPERTIES LABELS slow ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 1800)

# grammar_no_token_cli: a grammar that leaves no token never makes `sift generate` sample a
# forbidden one (issue 12): a stop when the grammar is complete, an error when it is stuck.
add_test(NAME grammar_no_token_cli COMMAND ${CMAKE_COMMAND} -DSIFT=$<TARGET_FILE:sift>
         -DMODEL=${SIFT_SHARED_DIR}/models/stories260K.gguf -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/grammar_no_token_cli.cmake)
set_tests_properties(grammar_no_token_cli PROPERTIES ENVIRONMENT "${SIFT_TEST_ENV}")

# maskbench_sample: a fixed sample of ~200 real-world schemas (../shared/maskbench) through
# `sift bench --maskbench`: 0 invalidation errors, 0 crashes (no timings). Label slow.
# maskbench_dumps: the bench's instance texts equal Python's json.dumps on every public instance.
add_test(NAME maskbench_sample COMMAND ${CMAKE_COMMAND} -DSIFT=$<TARGET_FILE:sift> -DSHARED=${SIFT_SHARED_DIR}
         -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/maskbench_sample.cmake)
set_tests_properties(maskbench_sample PROPERTIES LABELS slow ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 1800)
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND AND EXISTS ${SIFT_SHARED_DIR}/maskbench/public.tar.xz)
  add_test(NAME maskbench_dumps COMMAND ${CMAKE_COMMAND} -E env sh -c
           "d=\${TMPDIR:-/tmp}/sift-maskbench-`id -u`; test -n \"`ls $d 2>/dev/null | head -1`\" || { mkdir -p $d && tar -xJf ${SIFT_SHARED_DIR}/maskbench/public.tar.xz -C $d; }; ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/scripts/maskbench_dumps.py $<TARGET_FILE:sift> $d 7")
  set_tests_properties(maskbench_dumps PROPERTIES ENVIRONMENT "${SIFT_TEST_ENV}")
endif()

# jsts_suite: the JSON-Schema-Test-Suite (../shared/jsonschema-suite, every group as a MaskBench
# file) through bench/jsts_table.py: no invalid instance accepted (as a whole text, or by its tokens
# where the grammar does not force a continuation) in any suite
# (draft2020-12, draft7, their optional groups), and the draft2020-12 keyword files' mean pass
# fraction not below 0.60 (this branch: 0.676). About 10 s.
if(Python3_FOUND AND EXISTS ${SIFT_SHARED_DIR}/jsonschema-suite/jsts.tar.xz)
  add_test(NAME jsts_suite COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/bench/jsts_table.py --sift $<TARGET_FILE:sift>
           --jsts ${CMAKE_CURRENT_BINARY_DIR}/jsts/jsts --tar ${SIFT_SHARED_DIR}/jsonschema-suite/jsts.tar.xz --jobs 2 --min-mean 0.60)
  set_tests_properties(jsts_suite PROPERTIES ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 600)
endif()

# llama_grammar_cases: llama.cpp's own grammar tests (test-grammar-integration.cpp,
# test-json-schema-to-grammar.cpp) from their data (tests/data/llama_grammar_tests.json, made by
# tests/scripts/llama_grammar_tests.py): every passing / failing string and compile verdict
# agrees, except the differences listed in tests/data/llama_grammar_differences.json
# (docs/fidelity.md). Under a second.
add_executable(llama_grammar_cases ${CMAKE_CURRENT_SOURCE_DIR}/llama_grammar_cases.c)
target_include_directories(llama_grammar_cases PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(llama_grammar_cases PRIVATE sift_internal_inc)
target_compile_options(llama_grammar_cases PRIVATE ${SIFT_WARN})
target_link_libraries(llama_grammar_cases PRIVATE sift_static PkgConfig::CJSON m)
add_test(NAME llama_grammar_cases COMMAND llama_grammar_cases)
set_tests_properties(llama_grammar_cases PROPERTIES ENVIRONMENT "${SIFT_TEST_ENV}")
