# Turn a file into a C array (for the server's web page, so an installed binary serves it):
#   cmake -DIN=file -DOUT=file.c -DNAME=symbol [-DVENDOR=dir] -P embed.cmake
# defines `const unsigned char NAME[]` (NUL-terminated) and `const size_t NAME_len`.
#
# With VENDOR (tools/server/public/vendor: npm libraries copied there by its update.sh), the
# page's `<script src="vendor/FILE"></script>` tags are replaced by FILE's text in a <script>,
# and the licenses in VENDOR/licenses are put in an HTML comment before the first of them:
# the page served then fetches nothing, and the source page still works opened from disk.
# The assembled page is also written to OUT.html (what the binary serves, to look at).
if(VENDOR)
  file(READ "${IN}" page)
  string(REGEX MATCHALL "<script src=\"vendor/[A-Za-z0-9._-]+\"></script>" tags "${page}")
  if(NOT tags)
    message(FATAL_ERROR "embed.cmake: ${IN} has no <script src=\"vendor/...\"></script> to inline")
  endif()
  file(GLOB licenses "${VENDOR}/licenses/*")
  list(SORT licenses)
  set(notice "<!-- The libraries below are vendored npm packages (tools/server/public/vendor/MANIFEST); their licenses:\n")
  foreach(lic IN LISTS licenses)
    file(READ "${lic}" text)
    get_filename_component(lname "${lic}" NAME)
    string(APPEND notice "\n==== ${lname}\n${text}")
  endforeach()
  if(notice MATCHES "-->")
    message(FATAL_ERROR "embed.cmake: a license in ${VENDOR}/licenses holds '-->', which would end the HTML comment")
  endif()
  set(first TRUE)
  foreach(tag IN LISTS tags)
    string(REGEX REPLACE "^<script src=\"vendor/([^\"]+)\"></script>$" "\\1" file "${tag}")
    if(NOT EXISTS "${VENDOR}/${file}")
      message(FATAL_ERROR "embed.cmake: ${IN} names vendor/${file}, which ${VENDOR} does not have (see its update.sh)")
    endif()
    file(READ "${VENDOR}/${file}" js)
    # inside <script>, "</script" would end it early and "<script" after "<!--" would keep it
    # open; neither is in today's builds, and a future one holding them must be looked at
    string(TOLOWER "${js}" low)
    if(low MATCHES "<(/)?script")
      message(FATAL_ERROR "embed.cmake: vendor/${file} holds '<script' or '</script', which cannot be inlined as it is")
    endif()
    # the source map is not shipped: its comment would send DevTools to a missing URL
    string(REGEX REPLACE "\n//# sourceMappingURL=[^\n]*\n?$" "\n" js "${js}")
    set(inline "<script>/* vendor/${file} */\n${js}</script>")
    if(first)
      set(inline "${notice}-->\n${inline}")
      set(first FALSE)
    endif()
    string(REPLACE "${tag}" "${inline}" page "${page}")
  endforeach()
  file(WRITE "${OUT}.html" "${page}")
  set(IN "${OUT}.html")
endif()

file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# a line break every 32 bytes keeps the generated file readable by tools
string(REGEX REPLACE "((0x..,){32})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}" "/* generated from ${IN} by tools/server/embed.cmake: do not edit */\n#include <stddef.h>\n"
                    "const unsigned char ${NAME}[] = {\n${bytes}0x00};\nconst size_t ${NAME}_len = ${len};\n")
