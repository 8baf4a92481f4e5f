# Turn a file into a C array (for the server's web page, so an installed binary serves it):
#   cmake -DIN=file -DOUT=file.c -DNAME=symbol -P embed.cmake
# defines `const unsigned char NAME[]` (NUL-terminated) and `const size_t NAME_len`.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# a line break every 32 bytes keeps the generated file readable by tools
string(REGEX REPLACE "((0x..,){32})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}" "/* generated from ${IN} by tools/server/embed.cmake: do not edit */\n#include <stddef.h>\n"
                    "const unsigned char ${NAME}[] = {\n${bytes}0x00};\nconst size_t ${NAME}_len = ${len};\n")
