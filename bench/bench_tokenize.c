/*
 * bench_tokenize.c - `sift bench --tokenize`: tokenizer throughput, sift next to llama.cpp.
 *
 *   sift bench --tokenize [-m VOCAB.gguf]... [-f TEXT] [--mb N] [-r ROUNDS]
 *                         [--peer PATH | --no-peer] [--csv | --json]
 *
 * The text (default: about 4 MB made of the shared vocab test files and the licenses in
 * /usr/share/common-licenses, repeated, as ../shared/peer/README.md describes) is tokenized
 * whole, in one call, add_special = parse_special = false - llama.cpp's test-tokenizer-0
 * settings, the ones peer_tokenize uses. Each round times one sift call in this process
 * and then runs peer_tokenize (llama.cpp's libllama, ../shared/peer) for one timed call on
 * the same file, so both see the same machine state; the table reports medians over the
 * rounds and the ratio. The first round also checks that both produce the same token ids.
 * Default vocabularies: deepseek-llm (102400 tokens, byte-level BPE) and llama-spm (32000,
 * SentencePiece). Nothing here passes or fails on a time.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sift.h"

const char sift_bench_tokenize_help[] = "tokenizer MB/s on a few MB of text, next to llama.cpp's (peer_tokenize)";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static const char *shared_dir(void)
{
    const char *s = getenv("SIFT_SHARED");
    return s && *s ? s : SIFT_SOURCE_DIR "/../shared";
}

static int append_file(char **buf, size_t *n, size_t *cap, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char chunk[1 << 16];
    size_t r;
    while ((r = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (*n + r > *cap) {
            size_t nc = *cap ? *cap * 2 : 1 << 20;
            while (nc < *n + r) nc *= 2;
            char *nb = realloc(*buf, nc);
            if (!nb) {
                fclose(f);
                return -1;
            }
            *buf = nb;
            *cap = nc;
        }
        memcpy(*buf + *n, chunk, r);
        *n += r;
    }
    fclose(f);
    return 0;
}

/* The default text: the .inp files and the licenses, repeated up to `bytes`. */
static char *default_text(size_t bytes, size_t *len)
{
    char *base = NULL;
    size_t n = 0, cap = 0;
    char path[4096];
    static const char *const vocabs[] = {"bert-bge", "deepseek-coder", "deepseek-llm", "falcon", "gpt-2",
                                         "llama-spm", "mpt", "phi-3", "refact", "starcoder"};
    for (size_t i = 0; i < sizeof vocabs / sizeof *vocabs; i++) {
        snprintf(path, sizeof path, "%s/models/vocab/ggml-vocab-%s.gguf.inp", shared_dir(), vocabs[i]);
        append_file(&base, &n, &cap, path);
    }
    static const char *const licenses[] = {"Apache-2.0", "Artistic", "BSD", "CC0-1.0", "GFDL-1.3", "GPL-2",
                                           "GPL-3", "LGPL-2", "LGPL-2.1", "LGPL-3", "MPL-1.1", "MPL-2.0"};
    for (size_t i = 0; i < sizeof licenses / sizeof *licenses; i++) {
        snprintf(path, sizeof path, "/usr/share/common-licenses/%s", licenses[i]);
        append_file(&base, &n, &cap, path);
    }
    if (!n) {
        free(base);
        return NULL;
    }
    char *text = malloc(bytes);
    if (!text) {
        free(base);
        return NULL;
    }
    for (size_t k = 0; k < bytes; k += n) memcpy(text + k, base, bytes - k < n ? bytes - k : n);
    free(base);
    *len = bytes;
    return text;
}

/* Run peer_tokenize once (-r 1) on path; fills *ms (its timed call) and, with ids, the ids
 * it printed. Returns 0 on success. */
static int run_peer(const char *peer, const char *vocab, const char *path, bool want_ids, double *ms, int32_t *n_tokens,
                    sift_token **ids)
{
    char out_path[] = "/tmp/sift-bench-peer-out-XXXXXX", err_path[] = "/tmp/sift-bench-peer-err-XXXXXX";
    int fo = mkstemp(out_path), fe = mkstemp(err_path);
    if (fo < 0 || fe < 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fo, 1);
        dup2(fe, 2);
        char *args[] = {(char *)peer, "-m", (char *)vocab, "-f", (char *)path, "-r", "1", "--no-header",
                        want_ids ? "--ids" : NULL, NULL};
        execv(peer, args);
        _exit(127);
    }
    int status = -1;
    if (pid > 0) waitpid(pid, &status, 0);
    close(fo);
    close(fe);
    int rc = -1;
    FILE *csv = fopen(want_ids ? err_path : out_path, "r");
    char line[8192];
    /* vocab,file,bytes,tokens,reps,median_ms,min_ms,mb_s */
    if (csv && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        while (fgets(line, sizeof line, csv)) {
            char *f[8];
            int k = 0;
            for (char *p = strtok(line, ","); p && k < 8; p = strtok(NULL, ",")) f[k++] = p;
            if (k == 8) {
                *n_tokens = (int32_t)atol(f[3]);
                *ms = atof(f[5]);
                rc = 0;
            }
        }
    }
    if (csv) fclose(csv);
    if (rc == 0 && want_ids) {
        FILE *fi = fopen(out_path, "r");
        *ids = malloc(sizeof **ids * (size_t)(*n_tokens + 1));
        for (int32_t i = 0; fi && *ids && i < *n_tokens; i++)
            if (fscanf(fi, "%d", &(*ids)[i]) != 1) rc = -1;
        if (fi) fclose(fi);
    }
    unlink(out_path);
    unlink(err_path);
    return rc;
}

typedef struct {
    const char *name;
    size_t bytes;
    int32_t tokens, peer_tokens;
    double load_ms, sift_ms, peer_ms;
    int same_ids; /* 1 yes, 0 no, -1 not checked */
} result;

int sift_bench_tokenize(int argc, char **argv)
{
    const char *vocabs[16];
    int n_vocabs = 0, rounds = 3;
    const char *file = NULL, *peer = NULL;
    bool no_peer = false, csv = false, json = false;
    double mb = 4.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool hv = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: sift bench --tokenize [-m VOCAB.gguf]... [-f TEXT] [--mb N] [-r ROUNDS]\n"
                   "                             [--peer PATH | --no-peer] [--csv | --json]\n"
                   "  -m      vocabulary (repeatable; default deepseek-llm and llama-spm from the shared folder)\n"
                   "  -f      text to tokenize (default: the shared .inp files and common licenses, repeated)\n"
                   "  --mb    size of the default text in MB (default 4)\n"
                   "  -r      rounds, each one timed sift call and one timed llama.cpp call (default 3)\n"
                   "  --peer  path of peer_tokenize (default $SIFT_PEER_DIR/peer_tokenize or\n"
                   "          /tmp/sift-peer/peer_tokenize); --no-peer: sift only\n");
            return 0;
        } else if (!strcmp(a, "-m") && hv) {
            if (n_vocabs == 16) {
                fprintf(stderr, "sift bench --tokenize: -m: at most 16 vocabularies\n");
                return 2;
            }
            vocabs[n_vocabs++] = argv[++i];
        } else if (!strcmp(a, "-f") && hv) {
            file = argv[++i];
        } else if (!strcmp(a, "--mb") && hv) {
            mb = atof(argv[++i]);
            if (!(mb > 0 && mb <= 1024)) {
                fprintf(stderr, "sift bench --tokenize: --mb: expected 0 < N <= 1024\n");
                return 2;
            }
        } else if (!strcmp(a, "-r") && hv) {
            rounds = atoi(argv[++i]);
            if (rounds < 1 || rounds > 1000) {
                fprintf(stderr, "sift bench --tokenize: -r: expected 1..1000\n");
                return 2;
            }
        } else if (!strcmp(a, "--peer") && hv) {
            peer = argv[++i];
        } else if (!strcmp(a, "--no-peer")) {
            no_peer = true;
        } else if (!strcmp(a, "--csv")) {
            csv = true;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else {
            fprintf(stderr, "sift bench --tokenize: unknown or incomplete option '%s'\n", a);
            return 2;
        }
    }
    static char def_paths[2][4096];
    if (!n_vocabs) {
        snprintf(def_paths[0], sizeof def_paths[0], "%s/models/vocab/ggml-vocab-deepseek-llm.gguf", shared_dir());
        snprintf(def_paths[1], sizeof def_paths[1], "%s/models/vocab/ggml-vocab-llama-spm.gguf", shared_dir());
        vocabs[n_vocabs++] = def_paths[0];
        vocabs[n_vocabs++] = def_paths[1];
    }
    char peer_buf[4096];
    if (!peer && !no_peer) {
        const char *dir = getenv("SIFT_PEER_DIR");
        snprintf(peer_buf, sizeof peer_buf, "%s/peer_tokenize", dir && *dir ? dir : "/tmp/sift-peer");
        peer = peer_buf;
    }
    if (peer && access(peer, X_OK) != 0) {
        fprintf(stderr, "sift bench --tokenize: %s not found; timing sift only (make -C ../shared/peer builds it)\n",
                peer);
        peer = NULL;
    }

    /* the text, and a file of it for peer_tokenize */
    char *text = NULL;
    size_t len = 0;
    char tmp_path[] = "/tmp/sift-bench-text-XXXXXX";
    const char *text_path = file;
    if (file) {
        FILE *f = fopen(file, "rb");
        size_t cap = 0;
        if (!f || (fclose(f), append_file(&text, &len, &cap, file) != 0)) {
            fprintf(stderr, "sift bench --tokenize: -f: cannot read '%s'\n", file);
            return 1;
        }
    } else {
        text = default_text((size_t)(mb * 1e6), &len);
        if (!text) {
            fprintf(stderr, "sift bench --tokenize: cannot build the default text (is %s there?)\n", shared_dir());
            return 1;
        }
        int fd = mkstemp(tmp_path);
        if (fd < 0 || write(fd, text, len) != (ssize_t)len) {
            fprintf(stderr, "sift bench --tokenize: cannot write %s: %s\n", tmp_path, strerror(errno));
            free(text);
            return 1;
        }
        close(fd);
        text_path = tmp_path;
    }
    if (len > (size_t)INT32_MAX / 2) {
        fprintf(stderr, "sift bench --tokenize: the text is too large\n");
        free(text);
        return 2;
    }

    result res[16];
    int rc = 0;
    sift_token *tokens = malloc(sizeof *tokens * (len + 16));
    double *t_sift = malloc(sizeof(double) * (size_t)rounds), *t_peer = malloc(sizeof(double) * (size_t)rounds);
    for (int v = 0; v < n_vocabs && tokens; v++) {
        result *r = &res[v];
        memset(r, 0, sizeof *r);
        r->name = strrchr(vocabs[v], '/') ? strrchr(vocabs[v], '/') + 1 : vocabs[v];
        r->bytes = len;
        r->same_ids = -1;
        sift_error err = {0};
        double t0 = now_s();
        sift_vocab *vocab = sift_vocab_load(vocabs[v], &err);
        r->load_ms = (now_s() - t0) * 1e3;
        if (!vocab) {
            fprintf(stderr, "sift bench --tokenize: %s: %s\n", vocabs[v], err.msg);
            rc = 1;
            continue;
        }
        sift_tokenize(vocab, text, len, tokens, (int32_t)len + 16, false, false); /* warm-up */
        int n_peer = 0;
        for (int k = 0; k < rounds; k++) {
            t0 = now_s();
            r->tokens = sift_tokenize(vocab, text, len, tokens, (int32_t)len + 16, false, false);
            t_sift[k] = (now_s() - t0) * 1e3;
            if (peer) {
                sift_token *pids = NULL;
                double ms = 0;
                if (run_peer(peer, vocabs[v], text_path, k == 0, &ms, &r->peer_tokens, &pids) == 0) {
                    t_peer[n_peer++] = ms;
                    if (k == 0 && pids)
                        r->same_ids = r->peer_tokens == r->tokens &&
                                      !memcmp(pids, tokens, sizeof *tokens * (size_t)(r->tokens > 0 ? r->tokens : 0));
                } else {
                    fprintf(stderr, "sift bench --tokenize: peer_tokenize failed on %s\n", r->name);
                }
                free(pids);
            }
        }
        r->sift_ms = median(t_sift, rounds);
        r->peer_ms = n_peer ? median(t_peer, n_peer) : 0;
        sift_vocab_free(vocab);
    }

    if (csv) printf("vocab,bytes,tokens,rounds,sift_ms,sift_mb_s,llama_ms,llama_mb_s,ratio,same_ids,load_ms\n");
    else if (json) printf("[\n");
    else {
        printf("tokenizer throughput: %zu bytes (%s), one call per round, median of %d rounds, interleaved\n", len,
               file ? file : "shared .inp files + common licenses", rounds);
        printf("%-30s %9s %10s %10s %12s %7s %8s %8s\n", "vocab", "tokens", "sift MB/s", "llama MB/s", "sift/llama",
               "same", "sift ms", "load ms");
    }
    for (int v = 0; v < n_vocabs; v++) {
        result *r = &res[v];
        if (!r->name || r->tokens <= 0) continue;
        double s_mbs = (double)r->bytes / 1e6 / (r->sift_ms / 1e3);
        double p_mbs = r->peer_ms > 0 ? (double)r->bytes / 1e6 / (r->peer_ms / 1e3) : 0;
        double ratio = p_mbs > 0 ? s_mbs / p_mbs : 0;
        const char *same = r->same_ids < 0 ? "-" : r->same_ids ? "yes" : "NO";
        if (csv)
            printf("%s,%zu,%d,%d,%.3f,%.3f,%.3f,%.3f,%.2f,%s,%.1f\n", r->name, r->bytes, r->tokens, rounds, r->sift_ms,
                   s_mbs, r->peer_ms, p_mbs, ratio, same, r->load_ms);
        else if (json)
            printf("  {\"vocab\": \"%s\", \"bytes\": %zu, \"tokens\": %d, \"rounds\": %d, \"sift_ms\": %.3f, "
                   "\"sift_mb_s\": %.3f, \"llama_ms\": %.3f, \"llama_mb_s\": %.3f, \"ratio\": %.2f, \"same_ids\": %s, "
                   "\"load_ms\": %.1f}%s\n",
                   r->name, r->bytes, r->tokens, rounds, r->sift_ms, s_mbs, r->peer_ms, p_mbs, ratio,
                   r->same_ids < 0 ? "null" : r->same_ids ? "true" : "false", r->load_ms, v + 1 < n_vocabs ? "," : "");
        else if (p_mbs > 0)
            printf("%-30s %9d %10.2f %10.2f %11.1fx %7s %8.1f %8.1f\n", r->name, r->tokens, s_mbs, p_mbs, ratio, same,
                   r->sift_ms, r->load_ms);
        else
            printf("%-30s %9d %10.2f %10s %12s %7s %8.1f %8.1f\n", r->name, r->tokens, s_mbs, "-", "-", same, r->sift_ms,
                   r->load_ms);
        if (r->same_ids == 0) rc = 1;
    }
    if (json) printf("]\n");
    if (!file) unlink(tmp_path);
    free(t_sift);
    free(t_peer);
    free(tokens);
    free(text);
    return rc;
}
