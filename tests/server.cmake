# sift serve: unit tests of the server's pure parts (UTF-8, stop strings, chat templates;
# label unit, also under valgrind) and the HTTP integration test: real `sift serve`
# processes on 127.0.0.1 driven by tests/server_test.py (Python standard library only;
# label server, about a second on stories260K). The browser test is separate (see
# tests/browser/README.md) and registered only when Chromium and playwright-core are there.
add_executable(server_unit ${CMAKE_CURRENT_SOURCE_DIR}/server_unit.c ${PROJECT_SOURCE_DIR}/tools/server/stream_text.c
                           ${PROJECT_SOURCE_DIR}/tools/server/chat.c)
target_include_directories(server_unit PRIVATE ${PROJECT_SOURCE_DIR}/tools ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(server_unit PRIVATE ${SIFT_WARN})
target_link_libraries(server_unit PRIVATE sift_static PkgConfig::CMOCKA)
add_test(NAME server_unit COMMAND server_unit)
set_tests_properties(server_unit PROPERTIES LABELS unit ENVIRONMENT "${SIFT_TEST_ENV}")
if(SIFT_VALGRIND AND SIFT_VALGRIND_EXE)
  add_test(NAME memcheck_server_unit COMMAND ${SIFT_VALGRIND_EXE} --error-exitcode=1 --leak-check=full
           --errors-for-leak-kinds=definite,indirect --quiet $<TARGET_FILE:server_unit>)
  set_tests_properties(memcheck_server_unit PROPERTIES LABELS memcheck ENVIRONMENT "${SIFT_TEST_ENV}")
endif()

find_package(Python3 COMPONENTS Interpreter)
if(MHD_FOUND AND Python3_Interpreter_FOUND)
  add_test(NAME server_api
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/server_test.py --sift $<TARGET_FILE:sift>
                   --model ${SIFT_SHARED_DIR}/models/stories260K.gguf)
  set_tests_properties(server_api PROPERTIES LABELS server ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 300)
endif()

# The browser test (headless Chromium + playwright-core): only where both are installed
# (`bash tests/browser/run.sh` installs playwright-core and runs it by hand).
find_program(SIFT_CHROMIUM chromium)
find_program(SIFT_NODE node)
if(MHD_FOUND AND SIFT_CHROMIUM AND SIFT_NODE AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/browser/node_modules/playwright-core)
  add_test(NAME server_browser
           COMMAND ${SIFT_NODE} ${CMAKE_CURRENT_SOURCE_DIR}/browser/playground.test.mjs --sift $<TARGET_FILE:sift>
                   --model ${SIFT_SHARED_DIR}/models/stories260K.gguf --chromium ${SIFT_CHROMIUM}
                   --out ${CMAKE_CURRENT_BINARY_DIR}/browser-artifacts)
  set_tests_properties(server_browser PROPERTIES LABELS "server;browser" ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 120)
endif()
