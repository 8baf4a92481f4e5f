# `sift replay` as a command: usage errors exit 2 with a message naming the flag or the
# column of a bad spec; a missing, truncated or oversized logits file exits 1 naming the
# offset; --trace shows every sampler's candidates. ('%' stands for ';' in arguments: CMake
# lists split on ';'.)
set(SIFT_REF32 "${SIFT_SHARED_DIR}/reference/sampling/logits_v32000.bin")
function(sift_cli_test name expect_rc regex)
  add_test(NAME cli_replay_${name}
           COMMAND ${CMAKE_COMMAND} -DSIFT=$<TARGET_FILE:sift> -DRC=${expect_rc} "-DREGEX=${regex}"
                   "-DARGS=${ARGN}" -DWORK=${CMAKE_CURRENT_BINARY_DIR} -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/cli_run.cmake)
  set_tests_properties(cli_replay_${name} PROPERTIES LABELS "cli" ENVIRONMENT "${SIFT_TEST_ENV}")
endfunction()
sift_cli_test(help 0 "usage: sift replay" replay --help)
sift_cli_test(no_logits 2 "--logits FILE is required" replay --steps 3)
sift_cli_test(bad_spec 2 "col 7: top_k: k must be an integer" replay --logits ${SIFT_REF32} --steps 3 --chain "top_k(4.5)")
sift_cli_test(bad_steps 2 "--steps: bad value" replay --logits ${SIFT_REF32} --steps -4 --chain "greedy()")
sift_cli_test(bad_flag 2 "--top-k: not an integer" replay --logits ${SIFT_REF32} --top-k many)
sift_cli_test(unknown_flag 2 "unknown or incomplete option '--frobnicate'" replay --logits ${SIFT_REF32} --frobnicate)
sift_cli_test(chain_and_flags 2 "exclude each other" replay --logits ${SIFT_REF32} --chain "greedy()" --top-k 5)
sift_cli_test(missing_file 1 "cannot open" replay --logits /nonexistent/x.bin --chain "greedy()")
sift_cli_test(truncated 1 "offset 12: file ends inside vector 0" replay --logits @TRUNCATED@ --chain "greedy()")
sift_cli_test(no_selector 1 "step 0: the chain selected no token" replay --logits ${SIFT_REF32} --steps 2 --chain "top_k(4)")
sift_cli_test(trace 0 "top-k +n=40 +sorted.*selected=[0-9]+.*token [0-9]+" replay --logits ${SIFT_REF32} --steps 2 --chain "top_k(40)%dist(1)" --trace)
sift_cli_test(time 0 "samplers: [0-9.]+ us/step" replay --logits ${SIFT_REF32} --steps 4 --chain "top_k(40)%dist(1)" --time)
sift_cli_test(samplers_flag 2 "unknown sampler 'topq'" replay --logits ${SIFT_REF32} --samplers "top_k%topq")
