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
# issue 29: docs/python.md's two commands (`bash scripts/run`, then the venv and pip install) run
# as written in a fresh copy of the checkout, then `import sift` with no environment variable
# (tests/scripts/python_two_commands.sh). The first command is a whole build of its own: about
# 4 minutes on 2 cores the first time; the copy's objects are kept, so later runs take seconds
# (label slow).
if(EXISTS /usr/bin/python3 AND EXISTS ${SIFT_SHARED_DIR}/models/stories260K.gguf)
  add_test(NAME python_two_commands
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/python_two_commands.sh ${PROJECT_SOURCE_DIR} ${SIFT_SHARED_DIR}
                   ${CMAKE_CURRENT_BINARY_DIR}/python_two_commands)
  set_tests_properties(python_two_commands PROPERTIES LABELS "python;slow" TIMEOUT 1800)
endif()
