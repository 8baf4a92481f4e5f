# Run `sift ARGS...` ('%' in ARGS stands for ';'), check the exit status RC and that stdout+stderr match REGEX.
# @TRUNCATED@ in ARGS becomes a logits file whose header promises more than it holds.
if(ARGS MATCHES "@TRUNCATED@")
  set(trunc ${WORK}/truncated_logits.bin)
  # an 8-byte header (n_vocab 4, n_vectors 1) and only 4 of the 16 data bytes
  execute_process(COMMAND printf "\\004\\000\\000\\000\\001\\000\\000\\000abcd" OUTPUT_FILE ${trunc})
  string(REPLACE "@TRUNCATED@" "${trunc}" ARGS "${ARGS}")
endif()
string(REPLACE "%" "\\;" ARGS "${ARGS}") # '%' stands for ';' inside an argument
execute_process(COMMAND ${SIFT} ${ARGS} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL RC)
  message(FATAL_ERROR "exit status ${rc}, expected ${RC}\nstdout: ${out}\nstderr: ${err}")
endif()
if(NOT "${out}${err}" MATCHES "${REGEX}")
  message(FATAL_ERROR "output does not match '${REGEX}'\nstdout: ${out}\nstderr: ${err}")
endif()
