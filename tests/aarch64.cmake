# The aarch64 pass of scripts/test (pass 5): in a cross build (cmake/toolchain-aarch64.cmake)
# these tests carry the label aarch64 and run under qemu-user, once per emulated CPU (the NEON
# and NEON-dotprod tables). They are the ones whose results depend on the architecture's code:
# the CPU check, the kernel tables against the scalar reference, the sampler fast paths and
# their exp, the samplers and the grammar's mask pass, the GGUF types, the tokenizers, the
# model's logits, and the reference streams of the 32000-token vocabulary bit for bit. The
# rest (the server, the CLI scripts, the peer; test_fast, decode_batch, chain, quantize and
# grammar_sampler, minutes each under emulation) is architecture-independent C over these
# kernels, which the native passes cover (docs/aarch64.md).
# (deferred to the end of this directory: the fragments that define some of them come later)
function(sift_label_aarch64_tests)
  set(SIFT_AARCH64_TESTS cpu kernels samplers candidates rng grammar_match gbnf ggml_types gguf
      tokenizer model)
  foreach(t IN LISTS SIFT_AARCH64_TESTS)
    if(TEST ${t})
      set_property(TEST ${t} APPEND PROPERTY LABELS aarch64)
    endif()
  endforeach()
  foreach(n greedy dist_s42 topk40_temp08_dist_s1234 topp09_dist_s7 minp01_temp15_dist_s99 penalties_topk50_dist_s5
          typical09_dist_s3 xtc_dist_s11 topnsigma1_dist_s13 mirostat2_s17 tempext_dist_s19 default_s42 dry_dist_s42
          default_s42_flags)
    if(TEST replay_32000_${n})
      set_property(TEST replay_32000_${n} APPEND PROPERTY LABELS aarch64)
    endif()
  endforeach()
endfunction()
if(CMAKE_CROSSCOMPILING)
  cmake_language(DEFER CALL sift_label_aarch64_tests)
endif()
