# The differential reference: `sift replay` must print exactly the token streams llama.cpp
# produced for 13 chains x 2 vocabulary sizes (../shared/reference/sampling, 256 steps).
# (';' between samplers is written '%' in the table: CMake lists split on ';')
# One CTest test per stream (replay_<vocab>_<chain>); tests/replay_diff.cmake runs the
# command and compares byte for byte, naming the first differing step.
set(SIFT_REPLAY_REF "${SIFT_SHARED_DIR}/reference/sampling")
# in a cross build the script runs sift under the emulator (CMake applies it only to a
# COMMAND that names a target, not to one inside a script)
string(REPLACE ";" "$<SEMICOLON>" SIFT_REPLAY_EMU "${CMAKE_CROSSCOMPILING_EMULATOR}")
set(SIFT_REPLAY_CHAINS
  "greedy|greedy()"
  "dist_s42|dist(42)"
  "topk40_temp08_dist_s1234|top_k(40)%temp(0.8)%dist(1234)"
  "topp09_dist_s7|top_p(0.9,1)%dist(7)"
  "minp01_temp15_dist_s99|min_p(0.1,1)%temp(1.5)%dist(99)"
  "penalties_topk50_dist_s5|penalties(64,1.3,0.2,0.1)%top_k(50)%dist(5)"
  "typical09_dist_s3|typical(0.9,1)%dist(3)"
  "xtc_dist_s11|xtc(0.5,0.1,1,11)%dist(11)"
  "topnsigma1_dist_s13|top_n_sigma(1.0)%dist(13)"
  "mirostat2_s17|mirostat_v2(17,5,0.1)"
  "tempext_dist_s19|temp_ext(0.8,0.5,1.0)%dist(19)"
  "default_s42|penalties(64,1.0,0.0,0.0)%top_k(40)%typical(1.0,0)%top_p(0.95,0)%min_p(0.05,0)%xtc(0.0,0.1,0,42)%temp_ext(0.8,0.0,1.0)%dist(42)")
set(SIFT_REPLAY_DRY_32000 "dry(0.8,1.75,2,256,[12009],[5644],[14116],[16941 31217])%dist(42)")
set(SIFT_REPLAY_DRY_151936 "dry(0.8,1.75,2,256,[101475],[30689],[20632],[58181 33492])%dist(42)")

foreach(vocab 32000 151936)
  foreach(entry IN LISTS SIFT_REPLAY_CHAINS ITEMS "dry_dist_s42|${SIFT_REPLAY_DRY_${vocab}}")
    string(FIND "${entry}" "|" bar)
    string(SUBSTRING "${entry}" 0 ${bar} name)
    math(EXPR from "${bar} + 1")
    string(SUBSTRING "${entry}" ${from} -1 spec)
    string(REPLACE "%" "$<SEMICOLON>" spec "${spec}") # ';' survives add_test this way
    add_test(NAME replay_${vocab}_${name}
             COMMAND ${CMAKE_COMMAND} -DSIFT=$<TARGET_FILE:sift> "-DEMU=${SIFT_REPLAY_EMU}"
                     -DLOGITS=${SIFT_REPLAY_REF}/logits_v${vocab}.bin
                     -DEXPECT=${SIFT_REPLAY_REF}/v${vocab}/${name}.txt
                     "-DSPEC=${spec}" -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/replay_diff.cmake)
    # the 151936-token streams take seconds each (full sorts of the vocabulary per step):
    # label them slow, so the sanitizer pass runs the 32000-token half only
    if(vocab EQUAL 151936)
      set(labels "replay;slow")
    else()
      set(labels "replay")
    endif()
    set_tests_properties(replay_${vocab}_${name} PROPERTIES LABELS "${labels}" ENVIRONMENT "${SIFT_TEST_ENV}")
  endforeach()
endforeach()

# The same default chain built the llama.cpp way (common's defaults, --seed 42).
add_test(NAME replay_32000_default_s42_flags
         COMMAND ${CMAKE_COMMAND} -DSIFT=$<TARGET_FILE:sift> "-DEMU=${SIFT_REPLAY_EMU}"
                 -DLOGITS=${SIFT_REPLAY_REF}/logits_v32000.bin
                 -DEXPECT=${SIFT_REPLAY_REF}/v32000/default_s42.txt
                 "-DFLAGS=--seed;42" -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/replay_diff.cmake)
set_tests_properties(replay_32000_default_s42_flags PROPERTIES LABELS "replay" ENVIRONMENT "${SIFT_TEST_ENV}")

# Random chains against llama.cpp itself, when ../shared/peer has been built
# (/tmp/sift-peer/peer_replay); skipped otherwise.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME peer_diff
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/peer_diff.py --cases 300
                   --sift $<TARGET_FILE:sift> --shared ${SIFT_SHARED_DIR})
  set_tests_properties(peer_diff PROPERTIES LABELS "peer" SKIP_RETURN_CODE 77 ENVIRONMENT "${SIFT_TEST_ENV}")
endif()
