# maskbench_sample: `sift bench --maskbench` on a fixed sample of MaskBench (every 28th of the
# public half's 5,557 schemas sorted by name: 199 schemas, deepseek-llm vocabulary, one job).
# Asserts the hard lines only - 0 invalidation errors (no invalid instance accepted) and 0
# crashes - not timings. The data stays in ../shared (extracted to $TMPDIR by the bench);
# without it the test is skipped. (cmake -P; SIFT = the binary, SHARED = the shared folder)
if(NOT EXISTS ${SHARED}/maskbench/public.tar.xz OR NOT EXISTS ${SHARED}/models/vocab/ggml-vocab-deepseek-llm.gguf)
  message("maskbench data not found under ${SHARED}: skipped")
  return()
endif()
execute_process(COMMAND ${SIFT} bench --maskbench ${SHARED}/maskbench --every 28 --jobs 1 --timeout 60 --json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(JSON schemas ERROR_VARIABLE jerr GET "${out}" schemas)
if(jerr)
  message(FATAL_ERROR "no summary (exit ${rc}): ${out}\n${err}")
endif()
string(JSON inval GET "${out}" invalidation_error)
string(JSON crash GET "${out}" crash)
message("${out}")
if(NOT schemas EQUAL 199 OR NOT inval EQUAL 0 OR NOT crash EQUAL 0)
  message(FATAL_ERROR "maskbench sample: ${schemas} schemas, ${inval} invalidation errors, ${crash} crashes (want 199, 0, 0)")
endif()
