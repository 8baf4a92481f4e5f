# The runtime's command-line tests (the cmocka tests test_model, test_kernels and
# test_quantize are registered by tests/CMakeLists.txt).
#
# cli_generate runs the real `sift` binary: the story of `sift -m stories260K -p "Once upon
# a time" -n 128`, the reference greedy and sampled continuations of both shared models
# byte for byte through `sift generate`, guidance, --trace, context shift, usage errors
# (exit 2, one line), `sift quantize` and `sift bench --model --no-peer`.
add_executable(cli_generate ${CMAKE_CURRENT_SOURCE_DIR}/cli_generate.c)
target_include_directories(cli_generate PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(cli_generate PRIVATE ${SIFT_WARN})
target_link_libraries(cli_generate PRIVATE PkgConfig::CJSON)
add_test(NAME cli_generate COMMAND cli_generate $<TARGET_FILE:sift>)
set_tests_properties(cli_generate PROPERTIES LABELS "model;cli" ENVIRONMENT "${SIFT_TEST_ENV}")
