# Run `sift replay` (SPEC as --chain, or FLAGS as llama.cpp sampling flags) over LOGITS for
# 256 steps and compare its output with EXPECT; on a difference, name the first step.
# EMU: the cross build's emulator command (empty in a native build).
if(DEFINED SPEC) # quoted: the spec's ';' stay inside one argument
  execute_process(COMMAND ${EMU} ${SIFT} replay --logits ${LOGITS} --steps 256 --chain "${SPEC}"
                  OUTPUT_VARIABLE got ERROR_VARIABLE err RESULT_VARIABLE rc)
else()
  execute_process(COMMAND ${EMU} ${SIFT} replay --logits ${LOGITS} --steps 256 ${FLAGS}
                  OUTPUT_VARIABLE got ERROR_VARIABLE err RESULT_VARIABLE rc)
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "sift replay failed (${rc}): ${err}")
endif()
file(READ ${EXPECT} want)
if(NOT got STREQUAL want)
  string(REPLACE "\n" ";" got_l "${got}")
  string(REPLACE "\n" ";" want_l "${want}")
  list(LENGTH want_l n)
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    list(GET want_l ${i} w)
    list(LENGTH got_l gn)
    if(i LESS gn)
      list(GET got_l ${i} g)
    else()
      set(g "(none)")
    endif()
    if(NOT g STREQUAL w)
      message(FATAL_ERROR "stream differs first at step ${i}: sift ${g}, llama.cpp ${w}")
    endif()
  endforeach()
  message(FATAL_ERROR "stream differs (length)")
endif()
message(STATUS "identical: 256 tokens")
