# The chain's fast paths (core/fast.c): beyond the cmocka test test_fast, the exhaustive
# check of the two expf facts they rest on (every float input; about a minute: slow).
add_executable(fast_exhaustive ${CMAKE_CURRENT_SOURCE_DIR}/fast_exhaustive.c)
target_link_libraries(fast_exhaustive PRIVATE sift_internal_inc)
target_compile_options(fast_exhaustive PRIVATE ${SIFT_WARN})
target_link_libraries(fast_exhaustive PRIVATE sift_static)
add_test(NAME fast_exhaustive COMMAND fast_exhaustive)
set_tests_properties(fast_exhaustive PROPERTIES LABELS "slow" ENVIRONMENT "${SIFT_TEST_ENV}")

# `sift bench` (the sampling suite) runs, on small vocabularies and few steps, without the
# peer: every configuration appears in the CSV and the JSON (no time is checked).
add_test(NAME cli_bench_sampling_csv COMMAND sift bench -V 3000,1500 -r 1 -n 3 --no-peer --csv)
set_tests_properties(cli_bench_sampling_csv PROPERTIES LABELS "cli" ENVIRONMENT "${SIFT_TEST_ENV}"
  PASS_REGULAR_EXPRESSION "1500,g_topk0_topp095_temp08_dist,3,")
add_test(NAME cli_bench_sampling_json COMMAND sift bench -V 2000 -c af -r 1 -n 2 --no-peer --json)
set_tests_properties(cli_bench_sampling_json PROPERTIES LABELS "cli" ENVIRONMENT "${SIFT_TEST_ENV}"
  PASS_REGULAR_EXPRESSION "\"config\": \"f_default_chain\"")
add_test(NAME cli_bench_sampling_usage COMMAND sift bench -c z)
set_tests_properties(cli_bench_sampling_usage PROPERTIES LABELS "cli" WILL_FAIL TRUE)
