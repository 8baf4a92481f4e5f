# `sift serve` build pieces, included by the top-level CMakeLists.txt after the sift_server target:
# the web playground (tools/server/public/index.html) is compiled into the binary as a C
# array, with the npm libraries vendored in public/vendor (markdown-it, DOMPurify: committed,
# so the build needs no network) inlined into it; regenerated whenever one of them changes,
# so an installed `sift` needs no files.
set(SIFT_SERVER_PAGE ${PROJECT_SOURCE_DIR}/tools/server/public/index.html)
set(SIFT_SERVER_VENDOR ${PROJECT_SOURCE_DIR}/tools/server/public/vendor)
set(SIFT_SERVER_PAGE_C ${PROJECT_BINARY_DIR}/generated/server_index_html.c)
file(GLOB SIFT_SERVER_VENDOR_FILES CONFIGURE_DEPENDS ${SIFT_SERVER_VENDOR}/*.js ${SIFT_SERVER_VENDOR}/licenses/*)
add_custom_command(OUTPUT ${SIFT_SERVER_PAGE_C}
  COMMAND ${CMAKE_COMMAND} -DIN=${SIFT_SERVER_PAGE} -DOUT=${SIFT_SERVER_PAGE_C} -DNAME=srv_index_html
          -DVENDOR=${SIFT_SERVER_VENDOR} -P ${PROJECT_SOURCE_DIR}/tools/server/embed.cmake
  DEPENDS ${SIFT_SERVER_PAGE} ${SIFT_SERVER_VENDOR_FILES} ${PROJECT_SOURCE_DIR}/tools/server/embed.cmake
  COMMENT "Embedding the web playground (tools/server/public/index.html, with public/vendor inlined)"
  VERBATIM)
target_sources(sift_server PRIVATE ${SIFT_SERVER_PAGE_C})
