/*
 * fuzz_state.c - libFuzzer target for the sequence-state loader (model/state.c,
 * sift_state_seq_load_file), what `sift serve`'s slot restore reads from --slot-save-path.
 *
 * The model is a real one (SIFT_FUZZ_MODEL, default ../shared/models/stories260K.gguf) with a
 * two-sequence context; at start, sequence 0 decodes a short prompt and is saved, and those
 * bytes are the valid file every input is measured against. Each input is loaded twice into
 * sequence 1, as a file of its own bytes and as the valid file patched by it (the first two
 * bytes: where, the third: a new length's change, the rest: bytes written there), so the
 * header's checks are reached without the fuzzer having to invent a magic. For each load:
 *   - accepted: the bytes read equal the file's size, the token count fits the buffer, every
 *     id is in the vocabulary, the sequence's end is inside its cells, and one more token
 *     decodes at that end;
 *   - refused: a status and a message ("state load: ..."), and with SIFT_E_FORMAT or
 *     SIFT_E_INVAL the sequence exactly as it was (its end and cell count).
 * A broken promise calls __builtin_trap(), which libFuzzer reports as a crash.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sift.h"

#define CHECK(c)                    \
    do {                            \
        if (!(c)) __builtin_trap(); \
    } while (0)

static sift_model *model;
static sift_context *ctx;
static int32_t n_vocab;
static unsigned char *valid;
static size_t n_valid;
static int fd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *mp = getenv("SIFT_FUZZ_MODEL");
    if (!mp) mp = "../shared/models/stories260K.gguf";
    sift_error err = {0};
    if (!(model = sift_model_load(mp, &err))) {
        fprintf(stderr, "fuzz_state: %s: %s (set SIFT_FUZZ_MODEL)\n", mp, err.msg);
        exit(1);
    }
    sift_model_info info;
    sift_model_get_info(model, &info);
    n_vocab = info.n_vocab;
    sift_context_params cp = sift_context_default_params();
    cp.n_ctx = 256;
    cp.n_seq_max = 2;
    cp.n_batch = 64;
    cp.n_threads = cp.n_threads_batch = 1;
    if (!(ctx = sift_context_new(model, cp, &err))) exit(1);
    /* the valid file: sequence 0 after eight tokens */
    sift_batch b;
    if (sift_batch_init(&b, 8, 1) != SIFT_OK) exit(1);
    sift_token toks[8];
    const sift_seq_id s0 = 0;
    for (int i = 0; i < 8; i++) toks[i] = (sift_token)(1 + i * 37 % (n_vocab - 1)), sift_batch_add(&b, toks[i], i, &s0, 1, i == 7);
    if (sift_decode(ctx, &b, &err) != SIFT_OK) exit(1);
    sift_batch_free(&b);
    if ((fd = memfd_create("fuzz_state", 0)) < 0) exit(1);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (!(n_valid = sift_state_seq_save_file(ctx, path, 0, toks, 8, &err))) exit(1);
    if (!(valid = malloc(n_valid))) exit(1);
    if (pread(fd, valid, n_valid, 0) != (ssize_t)n_valid) exit(1);
    return 0;
}

static void load_one(const unsigned char *bytes, size_t n)
{
    if (ftruncate(fd, 0) != 0 || (n && pwrite(fd, bytes, n, 0) != (ssize_t)n)) return;
    const sift_pos end0 = sift_kv_seq_pos_max(ctx, 1);
    const int32_t used0 = sift_kv_n_used(ctx);
    sift_token toks[256];
    size_t nt = 12345;
    sift_error err = {0};
    const size_t got = sift_state_seq_load_file(ctx, path, 1, toks, 256, &nt, &err);
    if (got) {
        CHECK(got == n && nt <= 256);
        for (size_t i = 0; i < nt; i++) CHECK(toks[i] >= 0 && toks[i] < n_vocab);
        const sift_pos end = sift_kv_seq_pos_max(ctx, 1);
        CHECK(end >= -1 && end < (sift_pos)sift_n_ctx_seq(ctx));
        if (end + 1 < (sift_pos)sift_n_ctx_seq(ctx)) { /* the restored cells can be read by a decode */
            sift_batch b;
            CHECK(sift_batch_init(&b, 1, 1) == SIFT_OK);
            const sift_seq_id s1 = 1;
            sift_batch_add(&b, 1, end + 1, &s1, 1, true);
            CHECK(sift_decode(ctx, &b, NULL) == SIFT_OK);
            sift_batch_free(&b);
        }
        sift_kv_seq_rm(ctx, 1, -1, -1);
    } else {
        CHECK(err.status < 0 && strstr(err.msg, "state load"));
        if (err.status == SIFT_E_FORMAT || err.status == SIFT_E_INVAL)
            CHECK(sift_kv_seq_pos_max(ctx, 1) == end0 && sift_kv_n_used(ctx) == used0);
        else
            sift_kv_seq_rm(ctx, 1, -1, -1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load_one(data, size);
    if (size < 3) return 0;
    /* the valid file patched: at (data[0] | data[1] << 8) % its size, its length changed by
     * (int8_t)data[2] bytes, data[3..] written there */
    const size_t at = ((size_t)data[0] | (size_t)data[1] << 8) % n_valid;
    const long len = (long)n_valid + (int8_t)data[2];
    unsigned char *p = calloc((size_t)len + size, 1);
    CHECK(p);
    memcpy(p, valid, n_valid < (size_t)len ? n_valid : (size_t)len);
    for (size_t i = 3; i < size && at + i - 3 < (size_t)len; i++) p[at + i - 3] = data[i];
    load_one(p, (size_t)len);
    free(p);
    return 0;
}
