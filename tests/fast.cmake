# The chain's fast paths (core/fast.c): beyond the cmocka test test_fast, the exhaustive
# check of the two expf facts they rest on (every float input; about a minute: slow).
add_executable(fast_exhaustive ${CMAKE_CURRENT_SOURCE_DIR}/fast_exhaustive.c)
target_include_directories(fast_exhaustive PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_options(fast_exhaustive PRIVATE ${SIFT_WARN})
target_link_libraries(fast_exhaustive PRIVATE sift_static)
add_test(NAME fast_exhaustive COMMAND fast_exhaustive)
set_tests_properties(fast_exhaustive PROPERTIES LABELS "slow" ENVIRONMENT "${SIFT_TEST_ENV}")
