# The runtime's command-line tests (the cmocka tests test_model, test_kernels and
# test_quantize are registered by tests/CMakeLists.txt).
#
# cli_generate runs the real `sift` binary: the story of `sift -m stories260K -p "Once upon
# a time" -n 128`, the reference greedy and sampled continuations of both shared models
# byte for byte through `sift generate`, guidance, --trace, context shift, usage errors
# (exit 2, one line), `sift quantize` and `sift bench --model --no-peer`.
add_executable(cli_generate ${CMAKE_CURRENT_SOURCE_DIR}/cli_generate.c)
target_include_directories(cli_generate PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(cli_generate PRIVATE ${SIFT_WARN})
target_link_libraries(cli_generate PRIVATE PkgConfig::CJSON)
add_test(NAME cli_generate COMMAND cli_generate $<TARGET_FILE:sift>)
set_tests_properties(cli_generate PROPERTIES LABELS "model;cli" ENVIRONMENT "${SIFT_TEST_ENV}")

# sift bench --kernels: every table x type timed once, the load's choice and the probe's cost
# printed (figures not checked: the machine may be busy).
add_test(NAME bench_kernels COMMAND sift bench --kernels -r 1)
set_tests_properties(bench_kernels PROPERTIES LABELS "model;bench" ENVIRONMENT "${SIFT_TEST_ENV}"
                     PASS_REGULAR_EXPRESSION "q4_K +chosen: gen [a-z0-9-]+ .*worst chosen/fastest: [0-9.]+x")

# sift bench --model --depth: attention at depth, tiny figures on stories260K (sift only).
add_test(NAME bench_model_depth COMMAND sift bench --model --depth 0,64,200 --no-peer -r 1 --n-prompt 8 -n 4
         -m ${SIFT_SHARED_DIR}/models/stories260K.gguf)
set_tests_properties(bench_model_depth PROPERTIES LABELS "model;bench" ENVIRONMENT "${SIFT_TEST_ENV}"
                     PASS_REGULAR_EXPRESSION "sift +1 +200 +8 +4 +[0-9.]+ +[0-9.]+")

# peer_model_arch: qwen2 (QKV bias, neox RoPE), qwen3 (q/k norm, decoupled head size) and a
# llama with GQA 4:1 and linear RoPE scaling, as random models written at test time, against
# llama.cpp's own logits (../shared/peer's model_ref). The suite must pass without the peer,
# so the test exists only when model_ref was there at configure time.
set(SIFT_PEER_MODEL_REF "/tmp/sift-peer/model_ref" CACHE FILEPATH "llama.cpp's model_ref, for peer_model_arch")
add_executable(peer_model_arch ${CMAKE_CURRENT_SOURCE_DIR}/peer_model_arch.c)
target_include_directories(peer_model_arch PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(peer_model_arch PRIVATE sift_internal_inc)
target_compile_options(peer_model_arch PRIVATE ${SIFT_WARN})
target_link_libraries(peer_model_arch PRIVATE sift_static)
if(EXISTS "${SIFT_PEER_MODEL_REF}")
  add_test(NAME model_arch_peer COMMAND peer_model_arch "${SIFT_PEER_MODEL_REF}")
  set_tests_properties(model_arch_peer PROPERTIES LABELS "peer;model" ENVIRONMENT "${SIFT_TEST_ENV}")
endif()

# peer_generate_arch: every architecture (tiny mkmodel shapes, F32/Q8_0/Q4_K) generates the
# same 16 greedy tokens with `sift generate` as with llama.cpp's peer_generate (about 10 s).
set(SIFT_PEER_GENERATE "/tmp/sift-peer/peer_generate" CACHE FILEPATH "llama.cpp's peer_generate, for peer_generate_arch")
if(EXISTS "${SIFT_PEER_GENERATE}")
  add_test(NAME peer_generate_arch COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/peer_generate_arch.sh $<TARGET_FILE:sift>
                                           "${SIFT_PEER_GENERATE}" ${SIFT_SHARED_DIR})
  set_tests_properties(peer_generate_arch PROPERTIES LABELS "peer;model" ENVIRONMENT "${SIFT_TEST_ENV}" TIMEOUT 300)
endif()

# peer_agree: llama.cpp (the peer's libllama, linked) loads and runs sift's Q4_K_M file
# (top-1 agreement of the two engines' logits >= 90 %) and applies sift's control vector
# file with the same result as sift. Only when the peer's library is there at configure time.
set(SIFT_PEER_LIBDIR "/tmp/sift-peer/package/bins/linux-x64" CACHE PATH "the peer's libllama folder, for peer_agree")
if(EXISTS "${SIFT_PEER_LIBDIR}/libllama.v0.5.0.so" AND EXISTS "${SIFT_SHARED_DIR}/peer/model_ref_api.h")
  add_executable(peer_agree ${CMAKE_CURRENT_SOURCE_DIR}/peer_agree.c)
  target_include_directories(peer_agree PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} "${SIFT_SHARED_DIR}/peer")
  target_compile_options(peer_agree PRIVATE ${SIFT_WARN})
  target_link_libraries(peer_agree PRIVATE sift_internal_inc sift_static PkgConfig::CJSON
                        "${SIFT_PEER_LIBDIR}/libllama.v0.5.0.so" "${SIFT_PEER_LIBDIR}/libggml.v0.5.0.so"
                        "${SIFT_PEER_LIBDIR}/libggml-base.so")
  set_target_properties(peer_agree PROPERTIES BUILD_RPATH "${SIFT_PEER_LIBDIR}")
  add_test(NAME quant_peer_agree COMMAND peer_agree)
  set_tests_properties(quant_peer_agree PROPERTIES LABELS "peer;model" ENVIRONMENT "${SIFT_TEST_ENV}")
endif()

# test_decode_alloc counts every malloc/calloc/realloc (link-time wrapping) during decode
# and sampling steps: there must be none.
target_link_options(test_decode_alloc PRIVATE "LINKER:--wrap=malloc,--wrap=calloc,--wrap=realloc")

# peer_embeddings: sift_get_embeddings_ith / _seq for pooling none, mean, cls and last against
# llama.cpp's llama_get_embeddings_ith / _seq on the two shared models (libllama from the peer
# build, loaded with dlopen). Registered only when the peer library was there at configure time.
set(SIFT_PEER_LIBDIR "/tmp/sift-peer/package/bins/linux-x64" CACHE PATH "the peer build's libllama folder")
add_executable(peer_embeddings ${CMAKE_CURRENT_SOURCE_DIR}/peer_embeddings.c)
target_compile_options(peer_embeddings PRIVATE ${SIFT_WARN})
target_link_libraries(peer_embeddings PRIVATE sift_static ${CMAKE_DL_LIBS} m)
if(EXISTS "${SIFT_PEER_LIBDIR}/libllama.v0.5.0.so")
  add_test(NAME embeddings_peer COMMAND peer_embeddings "${SIFT_PEER_LIBDIR}" "${SIFT_SHARED_DIR}/models")
  set_tests_properties(embeddings_peer PROPERTIES LABELS "peer;model" ENVIRONMENT "${SIFT_TEST_ENV}")
endif()

# The AVX-512 Q4_K kernels exist with and without AVX512-VNNI (kernels_avx512.c); the table
# takes the VNNI ones where the CPU has them, so test_kernels run once more with them off
# checks the others too.
add_test(NAME kernels_no_vnni COMMAND test_kernels)
set_tests_properties(kernels_no_vnni PROPERTIES LABELS unit ENVIRONMENT "${SIFT_TEST_ENV};SIFT_NO_VNNI=1")
