# One set of rules for sampling parameters (src/samplers/params_rules.c): the CLI refuses
# what the server refuses, with the same message, and -1 windows mean the context. Each
# bad value of issue 15 on the 512-token stories260K model, and the smaller CLI fixes.
set(SIFT_PARAMS_MODEL "${SIFT_SHARED_DIR}/models/stories260K.gguf")
set(SIFT_PARAMS_LOGITS "${SIFT_SHARED_DIR}/reference/sampling/logits_v32000.bin")
function(sift_params_test name expect_rc regex)
  add_test(NAME params_${name}
           COMMAND ${CMAKE_COMMAND} -DSIFT=$<TARGET_FILE:sift> -DRC=${expect_rc} "-DREGEX=${regex}"
                   "-DARGS=${ARGN}" -DWORK=${CMAKE_CURRENT_BINARY_DIR} -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/cli_run.cmake)
  set_tests_properties(params_${name} PROPERTIES LABELS "cli" ENVIRONMENT "${SIFT_TEST_ENV}")
endfunction()
set(G generate -m ${SIFT_PARAMS_MODEL} -p Once -n 2 --log-disable)
sift_params_test(top_p 2 "'top_p' \\(--top-p\\) must be a number in \\[0, 1\\], got 2" ${G} --top-p 2)
sift_params_test(temp_nan 2 "'temperature' \\(--temp\\) must be a number in \\[-10, 100\\], got nan" ${G} --temp nan)
sift_params_test(temp_big 2 "'temperature' \\(--temp\\) must be a number in \\[-10, 100\\], got 1000" ${G} --temp 1000)
sift_params_test(min_p 2 "'min_p' \\(--min-p\\) must be a number in \\[0, 1\\], got 5" ${G} --min-p 5)
sift_params_test(xtc_probability 2 "'xtc_probability' \\(--xtc-probability\\) must be a number in \\[0, 1\\], got 2" ${G} --xtc-probability 2)
sift_params_test(repeat_penalty 2 "'repeat_penalty' \\(--repeat-penalty\\) must be a number in \\(0, 10\\], got 0" ${G} --repeat-penalty 0)
sift_params_test(logit_bias 2 "'logit_bias\\[0\\]' \\(--logit-bias\\): token 99999 is not in the vocabulary \\[0, 512\\)" ${G} --logit-bias 99999+1)
sift_params_test(logit_bias_nan 2 "bias must be a number in \\[-1e6, 1e6\\] or -inf, got nan" ${G} --logit-bias 5+nan)
sift_params_test(min_keep 2 "'min_keep' \\(--min-keep\\) must be an integer in \\[0, 512\\]" ${G} --min-keep 600)
sift_params_test(repeat_last_n 2 "'repeat_last_n' \\(--repeat-last-n\\) must be an integer in \\[-1, 16777216\\], got -2" ${G} --repeat-last-n -2)
sift_params_test(replay_top_p 2 "'top_p' \\(--top-p\\) must be a number in \\[0, 1\\], got 2" replay --logits ${SIFT_PARAMS_LOGITS} --top-p 2)
sift_params_test(temp_negative_is_greedy 0 "perf: stopped by n_predict" generate -m ${SIFT_PARAMS_MODEL} -p Once -n 2 --temp -1)
# -1 windows are the context: the samplers are on, not '?penalties' / '?dry'
sift_params_test(windows_context 0 "chain: penalties -> dry -> " replay --logits ${SIFT_PARAMS_LOGITS} --steps 3
                 --repeat-last-n -1 --repeat-penalty 1.3 --dry-penalty-last-n -1 --dry-multiplier 0.8 --dry-sequence-breaker none --time)
sift_params_test(windows_zero_off 0 "chain: \\?penalties -> \\?dry -> " replay --logits ${SIFT_PARAMS_LOGITS} --steps 3
                 --repeat-last-n 0 --repeat-penalty 1.3 --dry-penalty-last-n 0 --dry-multiplier 0.8 --dry-sequence-breaker none --time)
# the smaller things
sift_params_test(samplers_once 2 "sift: --samplers: samplers: col 1: unknown sampler 'foo'\n$" ${G} --samplers foo)
sift_params_test(n_probs_generate 2 "--n-probs: the CLI does not report probabilities" ${G} --n-probs 3)
sift_params_test(n_probs_replay 2 "--n-probs: the CLI does not report probabilities" replay --logits ${SIFT_PARAMS_LOGITS} --n-probs 3)
# (top_k first: infill compares every pair of candidates' texts, seconds on 32000 of them)
sift_params_test(replay_infill_vocab 0 "^[0-9]+\n[0-9]+\n$" replay --logits ${SIFT_PARAMS_LOGITS} --steps 2
                 --samplers top_k%infill --top-k 40 --vocab ${SIFT_SHARED_DIR}/models/vocab/ggml-vocab-llama-spm.gguf)
sift_params_test(replay_infill_no_vocab 1 "infill needs" replay --logits ${SIFT_PARAMS_LOGITS} --steps 2 --samplers infill)
# -f drops one trailing newline, as llama-cli: "Once upon a time\n" is the 5 tokens of -p "Once upon a time"
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/prompt_newline.txt "Once upon a time\n")
sift_params_test(file_newline 0 "prompt +[0-9.]+ ms / +5 tokens" generate -m ${SIFT_PARAMS_MODEL}
                 -f ${CMAKE_CURRENT_BINARY_DIR}/prompt_newline.txt -n 0)
# Ctrl-C ends generation with the perf summary (an endless generation, interrupted)
# (the story itself goes to /dev/null: on a quiet machine two seconds of it are megabytes, and
# CTest cuts a test's output before it matches the regular expression against it)
add_test(NAME params_ctrl_c
         COMMAND sh -c "timeout --preserve-status -s INT 2 \"$0\" generate -m \"$1\" -p Once -n -1 --ignore-eos --context-shift -c 512 >/dev/null"
                 $<TARGET_FILE:sift> ${SIFT_PARAMS_MODEL})
set_tests_properties(params_ctrl_c PROPERTIES LABELS "cli" ENVIRONMENT "${SIFT_TEST_ENV}"
                     PASS_REGULAR_EXPRESSION "sift perf: stopped by interrupt \\(Ctrl-C\\).*sift perf: total")

# Conversation mode through a pseudo-terminal (tests/cli_chat_test.py, Python's pty module):
# the "> " prompt, a reverse prompt, Ctrl-C stopping a reply, a second one ending the session
# with the perf summary, Ctrl-D, and -no-cnv's " [end of text]"; stories260K with vLLM's chatml template
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND AND EXISTS ${SIFT_SHARED_DIR}/chat-templates/templates/vllm-template_chatml.jinja)
  add_test(NAME cli_chat_pty
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cli_chat_test.py --sift $<TARGET_FILE:sift>
                   --model ${SIFT_PARAMS_MODEL} --template ${SIFT_SHARED_DIR}/chat-templates/templates/vllm-template_chatml.jinja)
  set_tests_properties(cli_chat_pty PROPERTIES LABELS "cli" ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 180)
endif()
