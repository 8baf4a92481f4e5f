# The chat-template engine against the conformance set of shared/chat-templates (its
# README): every golden rendered by `sift apply-template` must match byte for byte, and
# every case where jinja2 raised must fail. Unit tests of the engine: test_template.c.
add_test(NAME template_goldens
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/template/check_goldens.sh $<TARGET_FILE:sift>
                 ${SIFT_SHARED_DIR}/chat-templates)
set_tests_properties(template_goldens PROPERTIES LABELS cli ENVIRONMENT "${SIFT_TEST_ENV}")
# usage errors exit 2 (a missing --context, an unknown flag)
add_test(NAME cli_apply_template_usage COMMAND sift apply-template --template x.jinja)
set_tests_properties(cli_apply_template_usage PROPERTIES LABELS cli WILL_FAIL TRUE)
add_test(NAME cli_apply_template_bad_flag COMMAND sift apply-template --nope)
set_tests_properties(cli_apply_template_bad_flag PROPERTIES LABELS cli WILL_FAIL TRUE)
