# (Not in a sanitizer build: programs built outside it cannot load an instrumented libsift.)
if(NOT SIFT_SANITIZE)
# The installed library as a user meets it: `cmake --install` into a fresh prefix, then
# examples/ built out of the tree with pkg-config and find_package(sift), dynamic and
# static, and the README's example as printed (tests/scripts/install_examples.sh).
add_test(NAME install_examples
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/install_examples.sh ${PROJECT_SOURCE_DIR}
                 ${PROJECT_BINARY_DIR} ${CMAKE_CURRENT_BINARY_DIR}/install_examples)
set_tests_properties(install_examples PROPERTIES LABELS "install" TIMEOUT 600)

# scripts/deps's install branch with stand-in package tools (CI's machine has the packages,
# so scripts/test alone never runs it).
add_test(NAME deps_stub
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/deps_stub.sh ${PROJECT_SOURCE_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/deps_stub)
set_tests_properties(deps_stub PROPERTIES LABELS "install")
endif()
