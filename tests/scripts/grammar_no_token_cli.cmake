# Regression (issue 12): `sift generate` never prints a token its grammar forbids. With
# `root ::= "x" | "y"` and --ignore-eos the output is " Once" plus one of x / y, then a stop
# ("grammar complete"), exit 0; with `root ::= "\x00"` (no token can hold a NUL) it fails
# with a message, exit 1, and prints nothing after the prompt. (cmake -P; SIFT = the binary,
# MODEL = stories260K.gguf)
execute_process(COMMAND ${SIFT} -m ${MODEL} -p Once -n 5 -s 1 --grammar "root ::= \"x\" | \"y\"" --ignore-eos
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^ Once[xy]\n*$" OR NOT err MATCHES "stopped by grammar complete")
  message(FATAL_ERROR "x|y --ignore-eos: rc ${rc}\nstdout: [${out}]\nstderr: ${err}")
endif()
execute_process(COMMAND ${SIFT} -m ${MODEL} -p Once -n 5 -s 1 --grammar "root ::= \"\\x00\""
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT out MATCHES "^ Once\n*$" OR NOT err MATCHES "the grammar allows no token")
  message(FATAL_ERROR "\\x00: rc ${rc}\nstdout: [${out}]\nstderr: ${err}")
endif()
