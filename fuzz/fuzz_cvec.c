/*
 * fuzz_cvec.c - libFuzzer target for the control-vector loader (model/cvec.c) on top of the
 * GGUF reader: any bytes are opened as a GGUF; if they open, sift__cvec_add must either
 * accept the file (then the vector's length is a whole number of n_embd rows, and adding
 * the same file again leaves n_embd and len as they were) or refuse it with a message that
 * names the control vector, and never crash. Seeds: fuzz/corpus/gguf (any GGUF), and files
 * with direction.<n> tensors from test_cvec.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/cvec.h"
#include "sift.h"

#define CHECK(c)                    \
    do {                            \
        if (!(c)) __builtin_trap(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sift_error err = {0};
    sift_gguf *g = sift_gguf_open_buffer(data, size, &err);
    if (!g) return 0;
    sift_control_vector *cv = sift__cvec_new();
    CHECK(cv);
    err = (sift_error){0};
    if (sift__cvec_add(cv, g, 0.5f, "fuzz", &err) == SIFT_OK) {
        const int32_t n = sift_control_vector_n_embd(cv);
        const size_t len = sift_control_vector_len(cv);
        CHECK(n > 0 && len % (size_t)n == 0 && sift_control_vector_data(cv));
        CHECK(sift__cvec_add(cv, g, -0.5f, "fuzz", &err) == SIFT_OK);
        CHECK(sift_control_vector_n_embd(cv) == n && sift_control_vector_len(cv) == len);
    } else {
        CHECK(err.status < 0 && strstr(err.msg, "control vector"));
        CHECK(sift_control_vector_n_embd(cv) == 0 && sift_control_vector_len(cv) == 0);
    }
    sift_control_vector_free(cv);
    sift_gguf_close(g);
    return 0;
}
