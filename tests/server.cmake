# sift serve: unit tests of the server's pure parts (UTF-8, stop strings, chat templates;
# label unit, also under valgrind) and the HTTP integration test: real `sift serve`
# processes on 127.0.0.1 driven by tests/server_test.py (Python standard library only;
# label server, about 10 s on stories260K: the exposure tests wait out 2 s deadlines and a drain).
# The playground's browser test (server_browser, tests/browser) needs chromium and npm.
add_executable(server_unit ${CMAKE_CURRENT_SOURCE_DIR}/server_unit.c ${PROJECT_SOURCE_DIR}/tools/server/conns.c)
target_include_directories(server_unit PRIVATE ${PROJECT_SOURCE_DIR}/tools ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(server_unit PRIVATE ${SIFT_WARN})
target_link_libraries(server_unit PRIVATE sift_cli_common sift_static PkgConfig::CMOCKA)
add_test(NAME server_unit COMMAND server_unit)
set_tests_properties(server_unit PROPERTIES LABELS unit ENVIRONMENT "${SIFT_TEST_ENV}")
if(SIFT_VALGRIND AND SIFT_VALGRIND_EXE)
  add_test(NAME memcheck_server_unit COMMAND ${SIFT_VALGRIND_EXE} --error-exitcode=1 --leak-check=full
           --errors-for-leak-kinds=definite,indirect --quiet $<TARGET_FILE:server_unit>)
  set_tests_properties(memcheck_server_unit PROPERTIES LABELS memcheck ENVIRONMENT "${SIFT_TEST_ENV}")
endif()

# tool calling and reasoning (tools/server/tool_calls.c, tools/common/reasoning.c and tc_format.c): formats,
# grammars, parsers (label unit)
add_executable(server_tools_unit ${CMAKE_CURRENT_SOURCE_DIR}/server_tools_unit.c ${PROJECT_SOURCE_DIR}/tools/server/tool_calls.c
                                 ${PROJECT_SOURCE_DIR}/tools/server/errors.c ${PROJECT_SOURCE_DIR}/tools/server/prio.c)
target_include_directories(server_tools_unit PRIVATE ${PROJECT_SOURCE_DIR}/tools ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(server_tools_unit PRIVATE ${SIFT_WARN})
target_link_libraries(server_tools_unit PRIVATE sift_cli_common sift_static PkgConfig::CMOCKA)
add_test(NAME server_tools_unit COMMAND server_tools_unit)
set_tests_properties(server_tools_unit PROPERTIES LABELS unit ENVIRONMENT "${SIFT_TEST_ENV}")
if(SIFT_VALGRIND AND SIFT_VALGRIND_EXE)
  add_test(NAME memcheck_server_tools_unit COMMAND ${SIFT_VALGRIND_EXE} --error-exitcode=1 --leak-check=full
           --errors-for-leak-kinds=definite,indirect --quiet $<TARGET_FILE:server_tools_unit>)
  set_tests_properties(memcheck_server_tools_unit PROPERTIES LABELS memcheck ENVIRONMENT "${SIFT_TEST_ENV}")
endif()

# The API dialects' adapters, Anthropic's Messages API (tools/server/anthropic.c) and OpenAI's
# Responses API (responses.c): the request conversion, its 400s, the stream converter on
# OpenAI chunks no small model produces (label unit). They link the whole server library, so
# only where libmicrohttpd is (not the aarch64 cross build).
if(MHD_FOUND)
  foreach(t server_anthropic_unit server_responses_unit)
    add_executable(${t} ${CMAKE_CURRENT_SOURCE_DIR}/${t}.c)
    target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/tools ${CMAKE_CURRENT_SOURCE_DIR})
    target_compile_options(${t} PRIVATE ${SIFT_WARN})
    target_link_libraries(${t} PRIVATE sift_server sift_static PkgConfig::CMOCKA)
    add_test(NAME ${t} COMMAND ${t})
    set_tests_properties(${t} PROPERTIES LABELS unit ENVIRONMENT "${SIFT_TEST_ENV}")
    if(SIFT_VALGRIND AND SIFT_VALGRIND_EXE)
      add_test(NAME memcheck_${t} COMMAND ${SIFT_VALGRIND_EXE} --error-exitcode=1 --leak-check=full
               --errors-for-leak-kinds=definite,indirect --quiet $<TARGET_FILE:${t}>)
      set_tests_properties(memcheck_${t} PROPERTIES LABELS memcheck ENVIRONMENT "${SIFT_TEST_ENV}")
    endif()
  endforeach()
endif()

find_package(Python3 COMPONENTS Interpreter)
if(MHD_FOUND AND Python3_Interpreter_FOUND)
  add_test(NAME server_api
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/server_test.py --sift $<TARGET_FILE:sift>
                   --model ${SIFT_SHARED_DIR}/models/stories260K.gguf)
  set_tests_properties(server_api PROPERTIES LABELS server ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 300)
  # issue 29: router mode (--models-dir, --models-preset): several models, each in a sift serve
  # child, loaded on demand, LRU eviction, autoload off, --api-key, streaming through, SIGTERM (about 3 s)
  add_test(NAME server_router
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/server_router.py --sift $<TARGET_FILE:sift>
                   --shared ${SIFT_SHARED_DIR})
  set_tests_properties(server_router PROPERTIES LABELS server ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 300)
  # issue 28: every architecture answers chats through a template of its family
  add_test(NAME server_arch_chat
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/server_arch_chat.py --sift $<TARGET_FILE:sift>
                   --shared ${SIFT_SHARED_DIR})
  set_tests_properties(server_arch_chat PROPERTIES LABELS server ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 300)
  # issues 27 and 29: llama.cpp's own server test suite (../shared/llama-server-tests, read in
  # place, never copied here) against sift serve through tests/llama_server_suite's adapter;
  # fails when the share of the tests that ran (not skipped for a model we lack) falls under
  # --min-pass. Label slow: not under the sanitizers (a few minutes in a normal build).
  # (the suite's packages are Debian's (scripts/deps), so Debian's own interpreter runs it,
  # whatever python3 comes first on the PATH)
  find_program(SIFT_SYSTEM_PYTHON python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(NOT SIFT_SYSTEM_PYTHON)
    set(SIFT_SYSTEM_PYTHON ${Python3_EXECUTABLE})
  endif()
  execute_process(COMMAND ${SIFT_SYSTEM_PYTHON} -c "import pytest, requests, aiohttp"
                  RESULT_VARIABLE SIFT_SUITE_PY_RC OUTPUT_QUIET ERROR_QUIET)
  if(NOT SIFT_SUITE_PY_RC EQUAL 0)
    message(STATUS "llama_server_suite: ${SIFT_SYSTEM_PYTHON} lacks pytest/requests/aiohttp (scripts/deps installs them); not registered")
  endif()
  if(SIFT_SUITE_PY_RC EQUAL 0 AND EXISTS ${SIFT_SHARED_DIR}/llama-server-tests)
    add_test(NAME llama_server_suite
             COMMAND ${SIFT_SYSTEM_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/llama_server_suite/run.py --sift $<TARGET_FILE:sift>
                     --suite ${SIFT_SHARED_DIR}/llama-server-tests --min-pass 90 --failures)
    set_tests_properties(llama_server_suite PROPERTIES LABELS "server;slow" ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 1200)
  endif()
  # issue 29: 43 command lines from llama.cpp's READMEs (llama-completion, llama-server) run
  # against sift generate / serve; each exit status and first line as docs/cli.md's table
  # says, none "unknown option" (about 4 s)
  add_test(NAME dropin_cmdlines
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/dropin_cmdlines.py --sift $<TARGET_FILE:sift>
                   --models ${SIFT_SHARED_DIR}/models --doc ${PROJECT_SOURCE_DIR}/docs/cli.md)
  set_tests_properties(dropin_cmdlines PROPERTIES LABELS "cli;server" ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 300)
  # SIGTERM with 60 queued streams (issue 26): every stream ends with a complete event and the
  # process exits within --drain-timeout + 1 s; 2 runs here (about 4 s), the 100-run check is
  # `tests/server_drain.py --runs 100` (docs/server.md)
  add_test(NAME server_drain
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/server_drain.py --sift $<TARGET_FILE:sift>
                   --model ${SIFT_SHARED_DIR}/models/stories260K.gguf --runs 2 --drain-timeout 1)
  set_tests_properties(server_drain PROPERTIES LABELS server ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 120)
  # the same with an exponential grammar's request among the streams: refused when compiled (about 2 s)
  add_test(NAME server_drain_stuck
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/server_drain.py --sift $<TARGET_FILE:sift>
                   --model ${SIFT_SHARED_DIR}/models/stories260K.gguf --runs 1 --drain-timeout 1 --stuck)
  set_tests_properties(server_drain_stuck PROPERTIES LABELS server ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 120)
  # docs/scale-out.md's recipe, run as written: two replicas behind HAProxy (Debian's haproxy,
  # scripts/deps), one SIGKILLed under load (about 3 s, 40 s under ASan; 240 requests, 127.0.0.1 only)
  find_program(SIFT_HAPROXY haproxy PATHS /usr/sbin /usr/local/sbin)
  if(SIFT_HAPROXY)
    add_test(NAME server_scaleout
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/scaleout_test.py --sift $<TARGET_FILE:sift>
                     --model ${SIFT_SHARED_DIR}/models/stories260K.gguf --haproxy ${SIFT_HAPROXY})
    set_tests_properties(server_scaleout PROPERTIES LABELS server ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 300)
  else()
    message(STATUS "haproxy not found: the scale-out test (server_scaleout) is not registered (scripts/deps installs it)")
  endif()
endif()

# The playground's browser test (tests/browser): Debian's chromium (scripts/deps) driven by
# playwright-core, which run.sh installs with npm ci into the build folder (as the npm client
# tests below do); it skips (77) without node, npm, chromium or the registry. About 12 s;
# the screenshots land in <build>/tests/browser/artifacts.
if(MHD_FOUND)
  add_test(NAME server_browser
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/browser/run.sh $<TARGET_FILE:sift>
                   ${SIFT_SHARED_DIR}/models/stories260K.gguf ${CMAKE_CURRENT_BINARY_DIR}/browser)
  set_tests_properties(server_browser PROPERTIES LABELS "server;browser;npm" ENVIRONMENT "${SIFT_TEST_ENV}"
                       SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

# The playground's vendored npm libraries (tools/server/public/vendor: markdown-it, DOMPurify,
# inlined into the page at build time) equal what `npm ci` of their package-lock.json gives,
# byte for byte, as does their MANIFEST (versions, sha256). Skips (77) without npm or the
# registry; about 3 s the first time (npm ci into the build folder), 1 s after.
add_test(NAME server_webui_vendor
         COMMAND bash ${PROJECT_SOURCE_DIR}/tools/server/public/vendor/update.sh --check ${CMAKE_CURRENT_BINARY_DIR}/webui_vendor)
set_tests_properties(server_webui_vendor PROPERTIES LABELS "server;npm" SKIP_RETURN_CODE 77 TIMEOUT 300)

# The official `openai` npm client against `sift serve` (tests/openai_client): chat, streaming,
# tool calls (auto, required, a named function, the result sent back), n: 2. run.sh installs
# the client with npm ci into the build folder, or skips (77) without node/npm or the registry.
if(MHD_FOUND)
  add_test(NAME server_openai_client
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/openai_client/run.sh $<TARGET_FILE:sift>
                   ${SIFT_SHARED_DIR}/models/stories260K.gguf
                   ${SIFT_SHARED_DIR}/chat-templates/templates/qwen2.5-instruct.jinja
                   ${CMAKE_CURRENT_BINARY_DIR}/openai_client)
  set_tests_properties(server_openai_client PROPERTIES LABELS "server;npm" ENVIRONMENT "${SIFT_TEST_ENV}"
                       SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

# The official Anthropic npm client (@anthropic-ai/sdk) against `sift serve`'s /v1/messages
# (tests/anthropic_client): a message, streaming, count_tokens, tool use and the result sent
# back, stop_sequences, a 400. Installed and skipped as the openai client test is.
if(MHD_FOUND)
  add_test(NAME server_anthropic_client
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/anthropic_client/run.sh $<TARGET_FILE:sift>
                   ${SIFT_SHARED_DIR}/models/stories260K.gguf
                   ${SIFT_SHARED_DIR}/chat-templates/templates/qwen2.5-instruct.jinja
                   ${CMAKE_CURRENT_BINARY_DIR}/anthropic_client)
  set_tests_properties(server_anthropic_client PROPERTIES LABELS "server;npm" ENVIRONMENT "${SIFT_TEST_ENV}"
                       SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
