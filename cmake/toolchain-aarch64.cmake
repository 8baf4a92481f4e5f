# Cross build for aarch64 Linux with Debian's cross compiler, tests run under qemu-user:
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake -DSIFT_CUDA=OFF
#   cmake --build build-aarch64 -j2 && ctest --test-dir build-aarch64 -L aarch64
# Packages (scripts/deps --aarch64): gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user,
# and the arm64 -dev packages of the libraries sift links (dpkg --add-architecture arm64;
# libpcre2-dev:arm64, libcjson-dev:arm64, libcmocka-dev:arm64 for the tests). pkg-config looks only in the arm64
# multiarch folders, so no x86 library is ever picked up.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(SIFT_CROSS_TRIPLE aarch64-linux-gnu)

find_program(CMAKE_C_COMPILER ${SIFT_CROSS_TRIPLE}-gcc REQUIRED)
set(CMAKE_FIND_ROOT_PATH /usr/${SIFT_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config: the multiarch .pc files of the arm64 -dev packages only
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${SIFT_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
# multiarch libraries live in /usr/lib/aarch64-linux-gnu (not under the cross root)
list(APPEND CMAKE_FIND_ROOT_PATH /)
set(CMAKE_LIBRARY_ARCHITECTURE ${SIFT_CROSS_TRIPLE})

# Tests run under qemu; QEMU_CPU in the environment picks the emulated CPU (max: dotprod and
# i8mm; cortex-a53: plain ARMv8.0 NEON), so one build tests every kernel table. The programs
# load the multiarch arm64 libraries (-L /: /lib/ld-linux-aarch64.so.1 and
# /usr/lib/aarch64-linux-gnu, from libc6:arm64, which the -dev packages above pull in). Not
# -L /usr/aarch64-linux-gnu: with Debian 12's cross libc (2.36-8cross1) under qemu 7.2 every
# pthread_create spins forever in a lock; the multiarch libc (2.36-9) runs them.
find_program(SIFT_QEMU_AARCH64 qemu-aarch64)
if(SIFT_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${SIFT_QEMU_AARCH64} -L /)
endif()

# llama.cpp's prebuilt peer (../shared/peer) is an x86-64 build: none of the tests or tools
# that link it can exist here. Pointing its paths nowhere leaves them out.
foreach(v SIFT_PEER_LIB SIFT_PEER_GGML SIFT_PEER_MODEL_REF SIFT_PEER_LIBDIR SIFT_PEER_DIR)
  set(${v} "/nonexistent/x86-64-peer" CACHE PATH "the x86-64 peer, not usable in an aarch64 build")
endforeach()
