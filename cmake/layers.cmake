# The layers of libsift, one CMake library each (docs/architecture.md).
#
#   core -> samplers -> grammar -> schema -> gguf -> vocab -> model; template on core
#   (each sees only the layers it names in CMakeLists.txt, all of them below it)
#
# Every layer is an OBJECT library over src/<layer>/*.c. Its internal headers are included
# as "<layer>/x.h", and a layer's include path holds only itself and the layers it links:
# each layer gets a view folder, <build>/layers/<layer>/, with one entry, a symbolic link
# named <layer> to src/<layer>. Linking a lower layer brings that layer's view along
# (PUBLIC usage requirements), so `#include "model/model.h"` inside src/vocab fails to
# compile: the folder is simply not on vocab's path.
#
# Includes are half the rule; calls are the other. For each layer a shared library,
# sift_layercheck_<layer>, is linked from that layer's objects and those of the layers
# below it with -Wl,--no-undefined: a call from a lower layer into a higher one (as
# core/chain.c once called samplers/seed.c) is an undefined symbol there and fails the
# build. The checks only link, they compile nothing again.
#
# libsift itself (sift_static / sift_shared) is every layer's objects together.

# One definition of the ISA-specific flags, for the library and for the fuzz build (which
# compiles the same sources again): files named *_avx2.c / *_avx512.c / *_avx512vnni.c get them, and must
# only be entered after the run-time CPU check of src/core/cpu.c. Source properties are per
# directory, so every directory that compiles these files calls this.
set(SIFT_ISA_AVX2_FLAGS "-mavx2;-mfma;-mf16c;-mpopcnt;-mbmi;-mbmi2")
set(SIFT_ISA_AVX512_FLAGS "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx2;-mfma;-mf16c;-mpopcnt;-mbmi;-mbmi2")
set(SIFT_ISA_AVX512VNNI_FLAGS "${SIFT_ISA_AVX512_FLAGS};-mavx512vnni")
#
# The SIMD files are per architecture: *_avx2.c / *_avx512*.c exist only in an x86-64 build,
# *_neon*.c only in an aarch64 one (sift_arch_sources drops the others from a source list).
# On aarch64 the baseline is ARMv8.0 with NEON (every aarch64 CPU has it); *_neon.c needs no
# flag, *_neon_dotprod.c gets the SDOT/UDOT extension and *_neon_i8mm.c SMMLA as well, and
# those two are entered only after core/cpu.c found the feature (getauxval's HWCAPs).
set(SIFT_ISA_NEON_DOTPROD_FLAGS "-march=armv8.2-a+dotprod")
set(SIFT_ISA_NEON_I8MM_FLAGS "-march=armv8.2-a+dotprod+i8mm")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i[3-6]86)$")
  set(SIFT_ARCH x86)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
  set(SIFT_ARCH arm64)
else()
  set(SIFT_ARCH other)
endif()
function(sift_arch_sources var)
  set(out "")
  foreach(f IN LISTS ${var})
    if(f MATCHES "_avx(2|512[a-z]*)\\.c$" AND NOT SIFT_ARCH STREQUAL "x86")
      continue()
    endif()
    if(f MATCHES "_neon[a-z0-9_]*\\.c$" AND NOT SIFT_ARCH STREQUAL "arm64")
      continue()
    endif()
    list(APPEND out ${f})
  endforeach()
  set(${var} ${out} PARENT_SCOPE)
endfunction()
function(sift_isa_flags)
  foreach(f IN LISTS ARGN)
    if(f MATCHES "_avx2\\.c$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${SIFT_ISA_AVX2_FLAGS}")
    elseif(f MATCHES "_avx512\\.c$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${SIFT_ISA_AVX512_FLAGS}")
    elseif(f MATCHES "_avx512vnni\\.c$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${SIFT_ISA_AVX512VNNI_FLAGS}")
    elseif(f MATCHES "_neon_dotprod\\.c$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${SIFT_ISA_NEON_DOTPROD_FLAGS}")
    elseif(f MATCHES "_neon_i8mm\\.c$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${SIFT_ISA_NEON_I8MM_FLAGS}")
    endif()
  endforeach()
endfunction()

# sift_layer(<name> [DEPS <lower layers...>] [LIBS <external libraries...>])
function(sift_layer name)
  cmake_parse_arguments(L "" "" "DEPS;LIBS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.c)
  sift_arch_sources(srcs)
  sift_isa_flags(${srcs})
  set_property(GLOBAL APPEND PROPERTY SIFT_LAYER_SOURCES ${srcs})
  set_property(GLOBAL APPEND PROPERTY SIFT_LAYERS ${name})

  set(view ${PROJECT_BINARY_DIR}/layers/${name})
  file(MAKE_DIRECTORY ${view})
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${name} ${view}/${name} SYMBOLIC)

  # sift_<layer>_inc: the layer's include view (and those of the layers below it), alone.
  # What a program outside src/ links to include a layer's internal headers: tests, fuzz
  # targets, the CLI's `info` and `mkmodel`. It brings no objects (libsift does).
  add_library(sift_${name}_inc INTERFACE)
  target_include_directories(sift_${name}_inc INTERFACE ${view} ${PROJECT_SOURCE_DIR}/include)

  add_library(sift_${name} OBJECT ${srcs})
  target_link_libraries(sift_${name} PUBLIC sift_${name}_inc)
  target_compile_options(sift_${name} PRIVATE ${SIFT_WARN} -fvisibility=hidden)
  target_compile_definitions(sift_${name} PRIVATE SIFT_BUILD)
  target_link_libraries(sift_${name} PUBLIC ${L_LIBS})
  set(objs $<TARGET_OBJECTS:sift_${name}>)
  foreach(d IN LISTS L_DEPS)
    if(NOT TARGET sift_${d})
      message(FATAL_ERROR "layer ${name}: dependency ${d} must be declared before it")
    endif()
    target_link_libraries(sift_${name} PUBLIC sift_${d})
    target_link_libraries(sift_${name}_inc INTERFACE sift_${d}_inc)
    get_property(dobjs GLOBAL PROPERTY SIFT_LAYER_OBJS_${d})
    list(APPEND objs ${dobjs})
  endforeach()
  list(REMOVE_DUPLICATES objs)
  set_property(GLOBAL PROPERTY SIFT_LAYER_OBJS_${name} ${objs})

  # The call check: this layer and those below it, linked alone, must leave nothing undefined.
  add_library(sift_layercheck_${name} SHARED ${objs})
  set(libs ${L_LIBS})
  foreach(d IN LISTS L_DEPS)
    get_property(dl GLOBAL PROPERTY SIFT_LAYER_LIBS_${d})
    list(APPEND libs ${dl})
  endforeach()
  list(REMOVE_DUPLICATES libs)
  set_property(GLOBAL PROPERTY SIFT_LAYER_LIBS_${name} ${libs})
  target_link_libraries(sift_layercheck_${name} PRIVATE ${libs})
  if(NOT SIFT_SANITIZE) # the sanitizer runtimes resolve their symbols at load time
    target_link_options(sift_layercheck_${name} PRIVATE -Wl,--no-undefined)
  endif()
  set_target_properties(sift_layercheck_${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/layercheck)
endfunction()
