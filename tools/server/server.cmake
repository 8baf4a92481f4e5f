# `sift serve` build pieces, included by the top-level CMakeLists.txt after the sift_server target:
# the web playground (tools/server/public/index.html) is compiled into the binary as a C
# array, regenerated whenever the page changes, so an installed `sift` needs no files.
set(SIFT_SERVER_PAGE ${PROJECT_SOURCE_DIR}/tools/server/public/index.html)
set(SIFT_SERVER_PAGE_C ${PROJECT_BINARY_DIR}/generated/server_index_html.c)
add_custom_command(OUTPUT ${SIFT_SERVER_PAGE_C}
  COMMAND ${CMAKE_COMMAND} -DIN=${SIFT_SERVER_PAGE} -DOUT=${SIFT_SERVER_PAGE_C} -DNAME=srv_index_html
          -P ${PROJECT_SOURCE_DIR}/tools/server/embed.cmake
  DEPENDS ${SIFT_SERVER_PAGE} ${PROJECT_SOURCE_DIR}/tools/server/embed.cmake
  COMMENT "Embedding the web playground (tools/server/public/index.html)"
  VERBATIM)
target_sources(sift_server PRIVATE ${SIFT_SERVER_PAGE_C})
