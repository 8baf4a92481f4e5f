# The Python package (python/): installed offline with pip into a fresh folder and tested
# with pytest there (tests/scripts/python_test.sh): the 26 reference streams identical to
# llama.cpp's and to `sift replay`, JSON-schema-constrained generation, the tokenizer, the
# adapters for other engines.
if(EXISTS /usr/bin/python3)
  add_test(NAME python_pytest
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/python_test.sh ${PROJECT_SOURCE_DIR}
                   $<TARGET_FILE:sift_shared> $<TARGET_FILE:sift> ${CMAKE_CURRENT_BINARY_DIR}/python_test)
  set_tests_properties(python_pytest PROPERTIES LABELS "python;slow" TIMEOUT 900 ENVIRONMENT "${SIFT_TEST_ENV}")
endif()
