/*
 * bench_gguf.c - `sift bench --gguf [options] [FILE.gguf ...]`: how long opening a GGUF
 * file takes (map + validate + index the metadata), next to llama.cpp's
 * gguf_init_from_file (no_alloc: metadata only, as llama.cpp's loader calls it) when the
 * peer's libggml-base.so is there.
 *
 * The two are timed interleaved in the same run (sift, ggml, sift, ggml, ...) and the best
 * of -r repetitions is reported, so a busy machine disturbs both alike. Default files: the
 * shared models and the largest vocabularies.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sift.h"

const char sift_bench_gguf_help[] = "GGUF open time (map + validate + index), next to llama.cpp's gguf_init_from_file";

struct ggml_gguf_init_params {
    bool no_alloc;
    void **ctx;
};
typedef void *(*gguf_init_fn)(const char *, struct ggml_gguf_init_params);
typedef void (*gguf_free_fn)(void *);

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int sift_bench_gguf(int argc, char **argv)
{
    int reps = 20;
    bool csv = false;
    const char *peer = getenv("SIFT_PEER_GGML");
    if (!peer) peer = "/tmp/sift-peer/package/bins/linux-x64/libggml-base.so";
    const char *files[64];
    int n_files = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--csv")) csv = true;
        else if (!strcmp(argv[i], "--peer") && i + 1 < argc) peer = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: sift bench --gguf [-r REPS] [--csv] [--peer libggml-base.so] [FILE.gguf ...]\n");
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "sift bench --gguf: unknown option '%s'\n", argv[i]);
            return 2;
        } else if (n_files < 64) files[n_files++] = argv[i];
    }
    if (reps < 1) {
        fprintf(stderr, "sift bench --gguf: -r needs a positive count\n");
        return 2;
    }
    static char defaults[4][512];
    if (n_files == 0) {
        const char *root = getenv("SIFT_SHARED");
        const char *rel[4] = {"models/stories260K.gguf", "models/llama-2-tiny-random.gguf",
                              "models/vocab/ggml-vocab-gpt-2.gguf", "models/vocab/ggml-vocab-deepseek-llm.gguf"};
        for (int i = 0; i < 4; i++) {
            snprintf(defaults[i], sizeof defaults[i], "%s/%s", root ? root : "../shared", rel[i]);
            files[n_files++] = defaults[i];
        }
    }
    void *lib = dlopen(peer, RTLD_NOW | RTLD_LOCAL);
    gguf_init_fn ginit = lib ? (gguf_init_fn)dlsym(lib, "gguf_init_from_file") : NULL;
    gguf_free_fn gfree = lib ? (gguf_free_fn)dlsym(lib, "gguf_free") : NULL;
    if (!ginit || !gfree) fprintf(stderr, "sift bench --gguf: llama.cpp's libggml-base not found (%s): sift only\n", peer);

    if (csv) printf("file,bytes,kv,tensors,sift_ms,llama_ms,speedup\n");
    else printf("%-44s %10s %6s %7s %10s %10s %8s\n", "file (best of -r runs)", "bytes", "kv", "tensors", "sift ms",
                "llama ms", "speedup");
    int rc = 0;
    for (int f = 0; f < n_files; f++) {
        sift_error err = {0};
        sift_gguf *g = sift_gguf_open(files[f], &err);
        if (!g) {
            fprintf(stderr, "sift bench --gguf: %s\n", err.msg);
            rc = 1;
            continue;
        }
        unsigned long long bytes = (unsigned long long)sift_gguf_file_size(g);
        long long n_kv = (long long)sift_gguf_n_kv(g), n_t = (long long)sift_gguf_n_tensors(g);
        sift_gguf_close(g);
        double best_s = 1e30, best_l = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = now_s();
            g = sift_gguf_open(files[f], NULL);
            double t1 = now_s();
            sift_gguf_close(g);
            if (t1 - t0 < best_s) best_s = t1 - t0;
            if (ginit) {
                struct ggml_gguf_init_params p = {true, NULL};
                t0 = now_s();
                void *c = ginit(files[f], p);
                t1 = now_s();
                if (c) gfree(c);
                if (t1 - t0 < best_l) best_l = t1 - t0;
            }
        }
        const char *name = strrchr(files[f], '/') ? strrchr(files[f], '/') + 1 : files[f];
        if (csv)
            printf("%s,%llu,%lld,%lld,%.4f,%.4f,%.2f\n", name, bytes, n_kv, n_t, best_s * 1e3, ginit ? best_l * 1e3 : 0,
                   ginit ? best_l / best_s : 0);
        else if (ginit)
            printf("%-44s %10llu %6lld %7lld %10.3f %10.3f %7.1fx\n", name, bytes, n_kv, n_t, best_s * 1e3, best_l * 1e3,
                   best_l / best_s);
        else
            printf("%-44s %10llu %6lld %7lld %10.3f %10s %8s\n", name, bytes, n_kv, n_t, best_s * 1e3, "-", "-");
    }
    if (lib) dlclose(lib);
    return rc;
}
