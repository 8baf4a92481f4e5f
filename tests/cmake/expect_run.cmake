# Runs CMD (a ;-list) and checks its exit code (EXPECT_RC) and that its combined output
# matches every regular expression in EXPECT_RE (a ;-list) and none in REJECT_RE.
#   cmake -DCMD="prog;arg" -DEXPECT_RC=1 -DEXPECT_RE="re1;re2" -P expect_run.cmake
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "exit code ${rc}, expected ${EXPECT_RC}; output:\n${all}")
endif()
foreach(re IN LISTS EXPECT_RE)
  if(NOT all MATCHES "${re}")
    message(FATAL_ERROR "output does not match '${re}':\n${all}")
  endif()
endforeach()
foreach(re IN LISTS REJECT_RE)
  if(all MATCHES "${re}")
    message(FATAL_ERROR "output matches '${re}':\n${all}")
  endif()
endforeach()
