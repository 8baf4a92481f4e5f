/*
 * bench_maskbench.c - `sift bench --maskbench DIR`: JSON-Schema structured output on
 * MaskBench's real-world schemas (../shared/maskbench/README.md), by its method exactly,
 * so that the figures compare with the published LLGuidance / XGrammar / llama.cpp rows.
 *
 * Per schema file ({"schema": ..., "tests": [{"data": ..., "valid": ...}, ...]}):
 *   compile  sift_grammar_compile_json_schema + the grammar sampler      [timed: TTFM]
 *   test     instance = Python's json.dumps(data, indent=None, ensure_ascii=False),
 *            tokenized without special tokens; for each token: fill a full-vocabulary
 *            candidate array (untimed), [timed: TBM] sift_sampler_apply + check the token
 *            kept its logit + sift_sampler_accept; stop at the first refused token.
 *            (MaskBench's runner times compute_mask + commit_token together.)
 *   verdict  compile error; invalidation error (an invalid instance accepted: the hard
 *            line, counted first); validation error (a valid instance rejected); passing.
 *            A valid instance is accepted when every token was allowed (a valid prefix
 *            counts, as in MaskBench's published method). An invalid instance whose every
 *            token was allowed but after which the grammar cannot end (end of text masked,
 *            a continuation forced) is rejected, as MaskBench's reference runner counts it
 *            (llguidance sample_parser json_stats: "we forced EOS"): only top-level numbers
 *            are not self-delimiting, and `1.1` under exclusiveMinimum 1.1 (or `0` under
 *            exclusiveMinimum 0) is a prefix of a valid `1.11` (`0.5`) that an exact grammar
 *            must allow, yet generation can never stop there.
 *   whole    beside that verdict, the same with the end-of-text check on both sides: an
 *            instance is accepted as a whole text only when the grammar may end after its
 *            last token (sift_grammar_sampler_status). Instances accepted only as a prefix
 *            are counted apart (valid ones among them are a grammar that cannot end where
 *            it should; invalid ones are the forced continuations above).
 *
 * Isolation: schemas run in forked worker processes (the vocabulary and its grammar trie,
 * built once in the parent, are shared copy-on-write), one schema at a time each, results
 * through a temporary file; a worker that dies is a crash for its schema, one that outlives
 * --timeout on a schema is killed and counted as a timeout, and a fresh worker goes on.
 * --jobs N workers run at once (the published method is one thread: --jobs 1).
 *
 * json.dumps is re-implemented below on the raw file text (not through a parser that
 * turns numbers into doubles): integers keep every digit, floats print as Python's repr
 * (shortest round-trip digits, exponent form outside 1e-4 .. 1e16), strings escape only
 * '"', '\\' and control characters, separators ", " and ": ".
 *
 *   sift bench --maskbench DIR [--vocab NAME|FILE] [--timeout S] [--jobs N] [--out DIR]
 *              [--every N] [--limit N] [--filter TEXT] [--json] [--llama-conventions] [--draft7] [--no-share]
 *
 * A worker runs many schemas over one vocabulary, as a server runs many requests over one
 * model, so the mask entries every grammar has in common (grammar/share.h: the JSON string
 * pieces) are computed by the first schema that needs them and copied by the next ones.
 * --no-share turns that off (each schema then computes them itself).
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_util.h"
#include "sift.h"
#include "grammar/mask.h" /* sift__gx_grammar_sampler_stats / _describe: the slow-mask log */

const char sift_bench_maskbench_help[] = "MaskBench: JSON-Schema compile/validation errors, TTFM and TBM (µs) per real-world schema";

/* ---- growable byte buffer ---------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n + 1) c *= 2;
        char *q = realloc(b->p, c);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }
static void sb_chr(sbuf *b, char c) { sb_put(b, &c, 1); }

/* ---- json.dumps(data, indent=None, ensure_ascii=False) on raw JSON text ------------------- */

typedef struct {
    const char *s, *e;
    int bad; /* malformed, or a lone surrogate (Python could not encode the text) */
} jr;

static void skip_ws(jr *r)
{
    while (r->s < r->e && (*r->s == ' ' || *r->s == '\t' || *r->s == '\n' || *r->s == '\r')) r->s++;
}

static void put_utf8(sbuf *b, uint32_t cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) u[0] = (char)cp, n = 1;
    else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63)), n = 2;
    else if (cp < 0x10000) u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 63)), u[2] = (char)(0x80 | (cp & 63)), n = 3;
    else u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 63)), u[2] = (char)(0x80 | ((cp >> 6) & 63)), u[3] = (char)(0x80 | (cp & 63)), n = 4;
    sb_put(b, u, n);
}

static int hex4(jr *r, uint32_t *v)
{
    if (r->e - r->s < 4) return -1;
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = r->s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        *v = *v << 4 | (uint32_t)d;
    }
    r->s += 4;
    return 0;
}

/* A code point as json.dumps(ensure_ascii=False) writes it inside a string. */
static void dump_cp(sbuf *b, uint32_t cp)
{
    switch (cp) {
    case '"': sb_str(b, "\\\""); return;
    case '\\': sb_str(b, "\\\\"); return;
    case '\n': sb_str(b, "\\n"); return;
    case '\r': sb_str(b, "\\r"); return;
    case '\t': sb_str(b, "\\t"); return;
    case '\b': sb_str(b, "\\b"); return;
    case '\f': sb_str(b, "\\f"); return;
    }
    if (cp < 0x20) {
        char u[8];
        snprintf(u, sizeof u, "\\u%04x", (unsigned)cp);
        sb_str(b, u);
        return;
    }
    put_utf8(b, cp);
}

static void dump_string(jr *r, sbuf *b)
{
    r->s++; /* '"' */
    sb_chr(b, '"');
    while (r->s < r->e && *r->s != '"') {
        unsigned char c = (unsigned char)*r->s;
        if (c != '\\') {
            if (c < 0x20) dump_cp(b, c);
            else sb_put(b, r->s, 1); /* UTF-8 bytes pass through */
            r->s++;
            continue;
        }
        r->s++;
        if (r->s >= r->e) break;
        char esc = *r->s++;
        uint32_t cp;
        switch (esc) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (hex4(r, &cp)) {
                r->bad = 1;
                return;
            }
            if (cp >= 0xD800 && cp < 0xDC00) {
                uint32_t lo;
                if (r->e - r->s >= 6 && r->s[0] == '\\' && r->s[1] == 'u') {
                    r->s += 2;
                    if (hex4(r, &lo) == 0 && lo >= 0xDC00 && lo < 0xE000) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        break;
                    }
                }
                r->bad = 1; /* lone high surrogate */
                return;
            }
            if (cp >= 0xDC00 && cp < 0xE000) {
                r->bad = 1;
                return;
            }
            break;
        default: r->bad = 1; return;
        }
        dump_cp(b, cp);
    }
    if (r->s >= r->e) {
        r->bad = 1;
        return;
    }
    r->s++;
    sb_chr(b, '"');
}

/* Python's repr(float): the shortest digits that read back to the same double; fixed
 * notation when the decimal point falls in -4 < decpt <= 16, else d[.ddd]e±XX. */
static void dump_double(sbuf *b, double v)
{
    if (isnan(v)) {
        sb_str(b, "NaN");
        return;
    }
    if (isinf(v)) {
        sb_str(b, v < 0 ? "-Infinity" : "Infinity");
        return;
    }
    char t[64];
    for (int p = 0; p <= 17; p++) {
        snprintf(t, sizeof t, "%.*e", p, v);
        if (strtod(t, NULL) == v) break;
    }
    /* t = [-]d[.ddd]e±XX */
    const char *q = t;
    int neg = *q == '-';
    if (neg) q++;
    char dig[32];
    int nd = 0;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') dig[nd++] = *q;
    int exp10 = atoi(q + 1);
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    int decpt = exp10 + 1;
    if (neg) sb_chr(b, '-');
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            sb_str(b, "0.");
            for (int i = 0; i < -decpt; i++) sb_chr(b, '0');
            sb_put(b, dig, (size_t)nd);
        } else if (decpt < nd) {
            sb_put(b, dig, (size_t)decpt);
            sb_chr(b, '.');
            sb_put(b, dig + decpt, (size_t)(nd - decpt));
        } else {
            sb_put(b, dig, (size_t)nd);
            for (int i = nd; i < decpt; i++) sb_chr(b, '0');
            sb_str(b, ".0");
        }
    } else {
        sb_chr(b, dig[0]);
        if (nd > 1) {
            sb_chr(b, '.');
            sb_put(b, dig + 1, (size_t)(nd - 1));
        }
        char e[16];
        snprintf(e, sizeof e, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
        sb_str(b, e);
    }
}

static void dump_number(jr *r, sbuf *b)
{
    const char *st = r->s;
    int is_float = 0;
    if (r->s < r->e && *r->s == '-') r->s++;
    while (r->s < r->e && strchr("0123456789.eE+-", *r->s)) {
        if (*r->s == '.' || *r->s == 'e' || *r->s == 'E') is_float = 1;
        r->s++;
    }
    size_t n = (size_t)(r->s - st);
    if (!n || n > 400) {
        r->bad = 1;
        return;
    }
    if (!is_float) { /* Python int: every digit kept; -0 is 0 */
        const char *d = st + (*st == '-');
        if (d[0] == '0' && (size_t)(d - st) + 1 == n) sb_chr(b, '0');
        else sb_put(b, st, n);
        return;
    }
    char tmp[512];
    memcpy(tmp, st, n);
    tmp[n] = 0;
    dump_double(b, strtod(tmp, NULL));
}

static void dump_value(jr *r, sbuf *b, int depth)
{
    skip_ws(r);
    if (r->s >= r->e || depth > 2000) {
        r->bad = 1;
        return;
    }
    char c = *r->s;
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        r->s++;
        sb_chr(b, c);
        skip_ws(r);
        int first = 1;
        while (!r->bad && r->s < r->e && *r->s != close) {
            if (!first) {
                if (*r->s != ',') {
                    r->bad = 1;
                    return;
                }
                r->s++;
                sb_str(b, ", ");
                skip_ws(r);
            }
            first = 0;
            if (c == '{') {
                if (r->s >= r->e || *r->s != '"') {
                    r->bad = 1;
                    return;
                }
                dump_string(r, b);
                skip_ws(r);
                if (r->s >= r->e || *r->s != ':') {
                    r->bad = 1;
                    return;
                }
                r->s++;
                sb_str(b, ": ");
            }
            dump_value(r, b, depth + 1);
            skip_ws(r);
        }
        if (r->s >= r->e) {
            r->bad = 1;
            return;
        }
        r->s++;
        sb_chr(b, close);
    } else if (c == '"') {
        dump_string(r, b);
    } else if (!strncmp(r->s, "true", 4) || !strncmp(r->s, "null", 4)) {
        sb_put(b, r->s, 4);
        r->s += 4;
    } else if (!strncmp(r->s, "false", 5)) {
        sb_put(b, r->s, 5);
        r->s += 5;
    } else if (!strncmp(r->s, "NaN", 3)) {
        sb_str(b, "NaN");
        r->s += 3;
    } else if (!strncmp(r->s, "Infinity", 8)) {
        sb_str(b, "Infinity");
        r->s += 8;
    } else if (!strncmp(r->s, "-Infinity", 9)) {
        sb_str(b, "-Infinity");
        r->s += 9;
    } else {
        dump_number(r, b);
    }
}

/* ---- the end of a raw JSON value (to slice "schema" and each "data" out of the file) ---- */

static const char *skip_value(const char *s, const char *e)
{
    while (s < e && strchr(" \t\r\n", *s)) s++;
    if (s >= e) return NULL;
    if (*s == '"') {
        for (s++; s < e; s++) {
            if (*s == '\\') s++;
            else if (*s == '"') return s + 1;
        }
        return NULL;
    }
    if (*s == '{' || *s == '[') {
        int d = 0;
        for (; s < e; s++) {
            if (*s == '"') {
                s = skip_value(s, e);
                if (!s) return NULL;
                s--;
            } else if (*s == '{' || *s == '[') d++;
            else if (*s == '}' || *s == ']') {
                if (--d == 0) return s + 1;
            }
        }
        return NULL;
    }
    while (s < e && !strchr(",}] \t\r\n", *s)) s++;
    return s;
}

/* The raw value of key `key` in the object [s, e) (top level only). */
static int find_key(const char *s, const char *e, const char *key, const char **vs, const char **ve)
{
    size_t kl = strlen(key);
    while (s < e && *s != '{') s++;
    if (s >= e) return -1;
    s++;
    for (;;) {
        while (s < e && strchr(" \t\r\n,", *s)) s++;
        if (s >= e || *s != '"') return -1;
        const char *ks = s + 1, *kend = skip_value(s, e);
        if (!kend) return -1;
        s = kend;
        while (s < e && strchr(" \t\r\n:", *s)) s++;
        const char *v = s, *vend = skip_value(s, e);
        if (!vend) return -1;
        while (v < vend && strchr(" \t\r\n", *v)) v++;
        if ((size_t)(kend - 1 - ks) == kl && !memcmp(ks, key, kl)) {
            *vs = v;
            *ve = vend;
            return 0;
        }
        s = vend;
    }
}

/* ---- one schema, in the child ------------------------------------------------------------ */

enum { R_PASS, R_COMPILE, R_VALIDATION, R_INVALIDATION, R_TIMEOUT, R_CRASH, R_NKIND };
static const char *const kind_name[R_NKIND] = {"passing", "compile_error", "validation_error", "invalidation_error", "timeout", "crash"};

typedef struct {
    int32_t kind, n_tests, n_tokens, test; /* test: the failing test's index */
    int32_t kind_whole;                    /* the verdict when accepting needs the end of text too */
    int32_t prefix_valid, prefix_invalid;  /* instances accepted only as a prefix, by validity */
    double ttfm_us, ttfm_cpu_us;
    double ttfm_hit_us; /* --repeat: the same schema compiled again (a cache hit) and its first mask; < 0: not run */
    char msg[512];
} result_head;

/* Each mask's time: wall clock (the method's) and this thread's CPU time (what the work
 * costs when the machine is shared and the thread is not always running). */
typedef struct {
    float wall, cpu;
} mask_time;

typedef struct {
    const sift_vocab *vocab;
    const sift_vocab_view *view;
    sift_candidates cand;
    float *zeros;
    int32_t n_vocab;
    uint32_t schema_flags;
    sift_grammar_compiler *compiler; /* the vocabulary's trie and shared entries, built before the workers fork */
    bool repeat;                     /* --repeat: time a second compile of each schema (the compiler's cache) */
    double slow_us;  /* SIFT_MASKBENCH_SLOW=US: log every mask whose CPU time passes US (0: off) */
} bench_ctx;

/* printable excerpt of text around [at, at+len) for a cause line */
static void excerpt(char *out, size_t cap, const char *text, size_t at, const char *tok, size_t tl)
{
    size_t from = at > 40 ? at - 40 : 0;
    sbuf b = {0};
    for (size_t i = from; i < at; i++) sb_chr(&b, text[i] == '\n' ? ' ' : text[i]);
    sb_str(&b, " >>");
    sb_put(&b, tok, tl);
    sb_str(&b, "<<");
    snprintf(out, cap, "%s", b.p ? b.p : "");
    free(b.p);
}

/* SIFT_MASKBENCH_SLOW: one stderr line per mask over the threshold, to find which grammar
 * situations make the tails - the schema, test and token index, the mask's CPU time, the
 * trie nodes walked and cache entries made for it, the text before the token, and the
 * matcher's stacks (sift__gx_grammar_sampler_describe). Called before the token is accepted. */
static void log_slow(const bench_ctx *bc, const sift_sampler *g, const sift__gx_engine_stats *st0, const char *file, int ti,
                     int32_t k, double cpu_us, const char *text, size_t off, sift_token tk)
{
    if (cpu_us < bc->slow_us) return;
    sift__gx_engine_stats st1;
    char state[1024], ctx[160], piece[64];
    sift__gx_grammar_sampler_stats(g, &st1);
    sift__gx_grammar_sampler_describe(g, state, sizeof state);
    int32_t pl = sift_token_to_piece(bc->vocab, tk, piece, sizeof piece - 1, 0, true);
    piece[pl > 0 ? pl : 0] = 0;
    excerpt(ctx, sizeof ctx, text, off, piece, strlen(piece));
    const char *base = strrchr(file, '/');
    fprintf(stderr, "slow-mask %s test=%d tok=%d cpu_us=%.0f walked=%llu entries=%u dfa=%u | %s | %s\n", base ? base + 1 : file, ti,
            (int)k, cpu_us, (unsigned long long)(st1.trie_nodes_walked - st0->trie_nodes_walked), st1.entries - st0->entries,
            st1.dfa_states - st0->dfa_states, ctx, state);
}

static void run_schema(bench_ctx *bc, const char *file, int out_fd)
{
    result_head h;
    memset(&h, 0, sizeof h);
    h.test = -1;
    mask_time *masks = NULL;
    size_t nm = 0, cm = 0;
    size_t len;
    char *txt = cli_read_file(file, &len);
    const char *ss, *se, *ts, *te;
    if (!txt || find_key(txt, txt + len, "schema", &ss, &se) || find_key(txt, txt + len, "tests", &ts, &te)) {
        h.kind = R_CRASH;
        snprintf(h.msg, sizeof h.msg, "cannot read the schema file");
        goto out;
    }
    double t0 = cli_now_us(), c0 = cli_thread_cpu_us();
    sift_error err = {0};
    sift_compiled_grammar *cg = sift_grammar_compile_json_schema(bc->compiler, ss, (size_t)(se - ss), bc->schema_flags, &err);
    sift_sampler *g = cg ? sift_sampler_init_grammar_compiled(cg, NULL, &err) : NULL;
    h.ttfm_us = cli_now_us() - t0;
    h.ttfm_cpu_us = cli_thread_cpu_us() - c0;
    sift_compiled_grammar_free(cg); /* the sampler holds its own reference */
    h.ttfm_hit_us = -1;
    if (g && bc->repeat) { /* what a server's second request with this schema pays before its first mask */
        double t1 = cli_now_us();
        sift_compiled_grammar *cg2 = sift_grammar_compile_json_schema(bc->compiler, ss, (size_t)(se - ss), bc->schema_flags, &err);
        sift_sampler *g2 = cg2 ? sift_sampler_init_grammar_compiled(cg2, NULL, &err) : NULL;
        if (g2) h.ttfm_hit_us = cli_now_us() - t1;
        sift_sampler_free(g2);
        sift_compiled_grammar_free(cg2);
    }
    if (!g) {
        h.kind = R_COMPILE;
        snprintf(h.msg, sizeof h.msg, "%s", err.msg[0] ? err.msg : sift_status_str(err.status));
        goto out;
    }
    /* walk the tests array */
    const char *p = ts + 1;
    sbuf inst = {0};
    sift_token *toks = NULL;
    int32_t cap_toks = 0;
    int verdict = R_PASS, verdict_whole = R_PASS;
    char vmsg[512] = "";
    int vtest = -1;
    for (int ti = 0;; ti++) {
        while (p < te && strchr(" \t\r\n,", *p)) p++;
        if (p >= te || *p != '{') break;
        const char *oe = skip_value(p, te);
        if (!oe) break;
        const char *ds, *de, *vs, *ve;
        int valid = find_key(p, oe, "valid", &vs, &ve) == 0 && !strncmp(vs, "true", 4);
        int have = find_key(p, oe, "data", &ds, &de) == 0;
        p = oe;
        h.n_tests++;
        inst.n = 0;
        jr r = {ds, de, 0};
        if (have) dump_value(&r, &inst, 0);
        int accepted = 0;
        char why[512] = "";
        if (!have || r.bad || inst.oom) {
            snprintf(why, sizeof why, "instance not encodable (json.dumps/encode would raise)");
        } else {
            /* The instance stands for a model's output after its prompt, so it is tokenized as a
             * continuation: a SentencePiece vocabulary's start-of-text space would put a space
             * before the JSON that the grammar rightly refuses (BPE vocabularies are unaffected). */
            int32_t n = sift_tokenize_ex(bc->vocab, inst.p, inst.n, toks, cap_toks, SIFT_TOKENIZE_CONTINUATION);
            if (n < 0 && n != INT32_MIN) {
                cap_toks = -n;
                free(toks);
                toks = malloc(sizeof *toks * (size_t)cap_toks);
                n = toks ? sift_tokenize_ex(bc->vocab, inst.p, inst.n, toks, cap_toks, SIFT_TOKENIZE_CONTINUATION) : INT32_MIN;
            }
            if (n < 0) {
                snprintf(why, sizeof why, "tokenize failed");
            } else {
                sift_sampler_reset(g);
                accepted = 1;
                size_t off = 0;
                for (int32_t k = 0; k < n; k++) {
                    sift_candidates_fill(&bc->cand, bc->zeros, (size_t)bc->n_vocab);
                    sift__gx_engine_stats st0;
                    if (bc->slow_us > 0) sift__gx_grammar_sampler_stats(g, &st0);
                    double c1 = cli_thread_cpu_us(), t1 = cli_now_us();
                    sift_sampler_apply(g, &bc->cand);
                    if (bc->slow_us > 0) log_slow(bc, g, &st0, file, ti, k, cli_thread_cpu_us() - c1, inst.p, off, toks[k]);
                    sift_token tk = toks[k];
                    /* allowed: among the candidates left (a sparse mask removes the banned
                     * ones, so a position says nothing), with a logit other than -inf */
                    const sift_candidates *cd = &bc->cand;
                    int ok = 0;
                    if ((size_t)tk < cd->size && cd->id[tk] == tk) ok = cd->logit[tk] != -INFINITY;
                    else
                        for (size_t i = 0; i < cd->size; i++)
                            if (cd->id[i] == tk) ok = cd->logit[i] != -INFINITY;
                    if (ok) sift_sampler_accept(g, tk);
                    double dt = cli_now_us() - t1, dc = cli_thread_cpu_us() - c1;
                    if (nm == cm) {
                        cm = cm ? cm * 2 : 4096;
                        mask_time *q = realloc(masks, cm * sizeof *masks);
                        if (!q) abort();
                        masks = q;
                    }
                    masks[nm++] = (mask_time){(float)dt, (float)dc};
                    h.n_tokens++;
                    char piece[256];
                    int32_t pl = sift_token_to_piece(bc->vocab, tk, piece, sizeof piece, 0, true);
                    if (pl < 0) pl = 0;
                    if (!ok) {
                        accepted = 0;
                        excerpt(why, sizeof why, inst.p, off <= inst.n ? off : inst.n, piece, (size_t)pl);
                        break;
                    }
                    off += (size_t)pl;
                }
            }
        }
        int whole = 0, forced = 0;
        if (accepted) {
            sift_grammar_status st = sift_grammar_sampler_status(g);
            whole = st == SIFT_GRAMMAR_CAN_END || st == SIFT_GRAMMAR_DONE;
            forced = st == SIFT_GRAMMAR_ACTIVE; /* end of text masked, a continuation forced */
            if (!whole) {
                if (valid) h.prefix_valid++;
                else h.prefix_invalid++;
            }
        }
        if (whole && !valid) verdict_whole = R_INVALIDATION;
        else if (!whole && valid && verdict_whole == R_PASS) verdict_whole = R_VALIDATION;
        /* an invalid prefix the grammar forces on (it cannot end there) is no false accept */
        if (accepted && !valid && !forced && verdict != R_INVALIDATION) {
            verdict = R_INVALIDATION;
            vtest = ti;
            snprintf(vmsg, sizeof vmsg, "accepted: %.400s", inst.p ? inst.p : "");
        } else if (!accepted && valid && verdict == R_PASS) {
            verdict = R_VALIDATION;
            vtest = ti;
            snprintf(vmsg, sizeof vmsg, "%s", why);
        }
    }
    free(toks);
    free(inst.p);
    sift_sampler_free(g);
    h.kind = verdict;
    h.kind_whole = verdict_whole;
    h.test = vtest;
    snprintf(h.msg, sizeof h.msg, "%s", vmsg);
out:
    if (h.kind == R_COMPILE || h.kind == R_CRASH) h.kind_whole = h.kind;
    free(txt);
    if (write(out_fd, &h, sizeof h) != (ssize_t)sizeof h) _exit(3);
    size_t off = 0;
    while (off < nm * sizeof *masks) {
        ssize_t w = write(out_fd, (char *)masks + off, nm * sizeof *masks - off);
        if (w <= 0) _exit(3);
        off += (size_t)w;
    }
    free(masks);
}

/* ---- the parent: children, timeouts, statistics --------------------------------------- */

typedef struct {
    char *path, *name;
    result_head h;
    float tbm_cpu_max; /* the schema's dearest mask, CPU µs (--out: which schemas make the tails) */
} item;

typedef struct {
    pid_t pid;   /* a worker process, 0: none */
    int cmd;     /* write end: schema indices for the worker */
    int res;     /* read end: one byte per finished schema */
    int fd;      /* the worker's result file (unlinked temporary), rewritten per schema */
    long idx;    /* the schema it is on, -1: idle */
    double start;
} slot;

/* A worker: schemas one at a time from `cmd` (their index), each result into `fd`, then one
 * byte on `res`. It lives for many schemas so that the copy-on-write faults after fork are
 * paid once, not inside every schema's TTFM; a crash or a hang ends only the worker. */
static void worker(bench_ctx *bc, const item *it, int cmd, int res, int fd)
{
    int32_t idx;
    while (read(cmd, &idx, sizeof idx) == (ssize_t)sizeof idx) {
        if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0) _exit(3);
        run_schema(bc, it[idx].path, fd);
        char one = 1;
        if (write(res, &one, 1) != 1) _exit(3);
    }
    _exit(0);
}

/* A worker for slot w. The child closes the other slots' pipe ends: a worker started after
 * another one (a replacement after a timeout) would otherwise hold that one's command pipe
 * open, and neither would see end-of-file when the run ends (the parent waited forever). */
static int spawn(slot *w, const slot *all, long n_all, bench_ctx *bc, const item *it)
{
    int pc[2], pr[2];
    char tmpl[] = "/tmp/sift-maskbench-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0 || pipe(pc) || pipe(pr)) return -1;
    unlink(tmpl);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(pc[1]);
        close(pr[0]);
        for (long j = 0; j < n_all; j++)
            if (&all[j] != w && all[j].pid) {
                close(all[j].cmd);
                close(all[j].res);
                close(all[j].fd);
            }
        worker(bc, it, pc[0], pr[1], fd);
    }
    close(pc[0]);
    close(pr[1]);
    *w = (slot){pid, pc[1], pr[0], fd, -1, 0};
    return 0;
}

static void retire(slot *w)
{
    close(w->cmd);
    close(w->res);
    close(w->fd);
    w->pid = 0;
    w->idx = -1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static float pct(const float *v, size_t n, double q)
{
    if (!n) return 0;
    size_t k = (size_t)ceil(q * (double)n);
    if (k < 1) k = 1;
    return v[k - 1];
}

static const char *default_shared(void)
{
    const char *s = getenv("SIFT_SHARED");
    return s && *s ? s : "../shared";
}

static int has_json(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)) && !n) {
        size_t l = strlen(de->d_name);
        n = l > 5 && !strcmp(de->d_name + l - 5, ".json");
    }
    closedir(d);
    return n;
}

/* DIR holds the .json files, or (the shared folder as it is) public.tar.xz: extract that
 * once into $TMPDIR/sift-maskbench-UID and use it. */
static int resolve_dir(const char *dir, char *out, size_t cap)
{
    snprintf(out, cap, "%s", dir);
    if (has_json(dir)) return 0;
    char tar[2048];
    if (snprintf(tar, sizeof tar, "%s/public.tar.xz", dir) >= (int)sizeof tar) return -1;
    struct stat st;
    if (stat(tar, &st) != 0) {
        fprintf(stderr, "maskbench: no .json files and no public.tar.xz in %s\n", dir);
        return -1;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(out, cap, "%s/sift-maskbench-%u", tmp && *tmp ? tmp : "/tmp", (unsigned)getuid());
    if (has_json(out)) return 0;
    mkdir(out, 0700);
    char cmd[8192];
    if (snprintf(cmd, sizeof cmd, "tar -xJf '%s' -C '%s'", tar, out) >= (int)sizeof cmd) return -1;
    fprintf(stderr, "maskbench: extracting %s into %s\n", tar, out);
    if (system(cmd) != 0 || !has_json(out)) {
        fprintf(stderr, "maskbench: extracting failed\n");
        return -1;
    }
    return 0;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* A cause line with the varying parts (JSON pointers, quoted names, numbers) blanked, so
 * that the same failure on different schemas counts once. */
static void normalize_cause(const char *m, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *s = m; *s && o + 4 < cap; s++) {
        if (*s == '\'' || *s == '"') { /* keep quoted keyword names, they are the cause */
            char q = *s;
            const char *e = strchr(s + 1, q);
            if (e && e - s < 40) {
                size_t n = (size_t)(e - s + 1);
                if (o + n + 1 >= cap) break;
                memcpy(out + o, s, n);
                o += n;
                s = e;
                continue;
            }
        }
        if (*s == '/' && (s == m || s[-1] == ' ')) { /* a JSON pointer */
            while (s[1] && s[1] != ' ' && s[1] != ',' && s[1] != ')' && s[1] != ':') s++;
            out[o++] = '#';
            continue;
        }
        if (*s >= '0' && *s <= '9') {
            while (s[1] >= '0' && s[1] <= '9') s++;
            out[o++] = 'N';
            continue;
        }
        out[o++] = *s;
    }
    out[o] = 0;
}

typedef struct {
    char cause[256];
    int n;
    const char *example;
} cause_count;

static int cmp_cause(const void *a, const void *b)
{
    const cause_count *x = a, *y = b;
    return y->n - x->n;
}

static void print_causes(const item *it, size_t n, int kind, int top)
{
    cause_count *cc = calloc(n ? n : 1, sizeof *cc);
    size_t nc = 0;
    for (size_t i = 0; i < n; i++) {
        if (it[i].h.kind != kind) continue;
        char c[256];
        if (kind == R_COMPILE) normalize_cause(it[i].h.msg, c, sizeof c);
        else snprintf(c, sizeof c, "%s", it[i].name);
        size_t j = 0;
        while (j < nc && strcmp(cc[j].cause, c)) j++;
        if (j == nc) {
            snprintf(cc[nc].cause, sizeof cc[nc].cause, "%s", c);
            cc[nc].example = it[i].name;
            nc++;
        }
        cc[j].n++;
    }
    qsort(cc, nc, sizeof *cc, cmp_cause);
    if (nc) printf("\n%s: top causes\n", kind_name[kind]);
    for (size_t j = 0; j < nc && (int)j < top; j++) {
        if (kind == R_COMPILE) printf("  %5d  %s   (e.g. %s)\n", cc[j].n, cc[j].cause, cc[j].example);
        else {
            for (size_t i = 0; i < n; i++)
                if (it[i].h.kind == kind && !strcmp(it[i].name, cc[j].cause))
                    printf("  %-36s test #%d: %.200s\n", it[i].name, it[i].h.test, it[i].h.msg);
        }
    }
    free(cc);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sift bench --maskbench DIR [options]\n"
            "  DIR                 MaskBench .json files, or a folder with public.tar.xz (extracted to $TMPDIR)\n"
            "  --vocab NAME|FILE   ggml-vocab-NAME.gguf in $SIFT_SHARED/models/vocab, or a GGUF file (default deepseek-llm)\n"
            "  --timeout S         per schema, counted as a failure (default 30)\n"
            "  --jobs N            schemas in parallel (default 1: the published method is one thread)\n"
            "  --out DIR           one result file per schema (verdict, TTFM wall and CPU, dearest mask)\n"
            "  --every N           every Nth schema (sorted by name) only; --limit N: the first N\n"
            "  --filter TEXT       only files whose name contains TEXT\n"
            "  --precompute-budget N  the grammar sampler's precompute budget (sift_grammar_params)\n"
            "  --llama-conventions llama.cpp's converter conventions (SIFT_JSON_SCHEMA_LLAMA)\n"
            "  --draft7            schemas without $schema are draft-07 (SIFT_JSON_SCHEMA_DRAFT7; default 2020-12)\n"
            "  --no-share          no mask entries shared between schemas (grammar/share.h)\n"
            "  --repeat            compile each schema twice, the second time from the compiler's cache, and\n"
            "                      report that TTFM (ttfm_hit_us: a repeated schema in a server)\n"
            "  SIFT_MASKBENCH_SLOW=US (environment) logs each mask over US microseconds of CPU to stderr\n"
            "                      (schema, token, trie nodes walked, entries made, the matcher's stacks)\n"
            "  --json              the summary as one JSON object\n"
            "  --dump-instances    print every instance text (json.dumps) instead of running\n");
}

/* --dump-instances: every test's instance text, one per line (checked against Python's
 * json.dumps by tests/scripts/maskbench_dumps.py) */
static int dump_instances(const char *file)
{
    size_t len;
    char *txt = cli_read_file(file, &len);
    const char *ts, *te;
    if (!txt || find_key(txt, txt + len, "tests", &ts, &te)) {
        free(txt);
        return -1;
    }
    const char *p = ts + 1;
    sbuf inst = {0};
    for (;;) {
        while (p < te && strchr(" \t\r\n,", *p)) p++;
        if (p >= te || *p != '{') break;
        const char *oe = skip_value(p, te), *ds, *de;
        if (!oe) break;
        inst.n = 0;
        if (find_key(p, oe, "data", &ds, &de) == 0) {
            jr r = {ds, de, 0};
            dump_value(&r, &inst, 0);
            if (r.bad) sb_str(&inst, "<not encodable>");
        }
        fwrite(inst.p ? inst.p : "", 1, inst.n, stdout);
        fputc('\n', stdout);
        p = oe;
    }
    free(inst.p);
    free(txt);
    return 0;
}

int sift_bench_maskbench(int argc, char **argv)
{
    const char *dir = NULL, *vocab_arg = "deepseek-llm", *out_dir = NULL, *filter = NULL;
    long timeout_s = 30, jobs = 1, every = 1, limit = 0, budget = 0;
    int as_json = 0, dump = 0;
    sift_grammar_compiler_params cp = sift_grammar_compiler_default_params();
    bool repeat = false;
    cli_malloc_keep(); /* the workers compile schema after schema, as a server does */
    uint32_t flags = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define VAL() (i + 1 < argc ? argv[++i] : (fprintf(stderr, "maskbench: %s needs a value\n", a), (const char *)NULL))
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--vocab")) {
            if (!(vocab_arg = VAL())) return 2;
        } else if (!strcmp(a, "--out")) {
            if (!(out_dir = VAL())) return 2;
        } else if (!strcmp(a, "--filter")) {
            if (!(filter = VAL())) return 2;
        } else if (!strcmp(a, "--timeout") || !strcmp(a, "--jobs") || !strcmp(a, "--every") || !strcmp(a, "--limit") ||
                   !strcmp(a, "--precompute-budget")) {
            const char *v = VAL();
            long x;
            if (!v || !cli_parse_long(v, !strcmp(a, "--limit") ? 0 : 1, 1L << 40, &x)) {
                fprintf(stderr, "maskbench: bad value for %s\n", a);
                return 2;
            }
            if (!strcmp(a, "--timeout")) timeout_s = x;
            else if (!strcmp(a, "--jobs")) jobs = x < 64 ? x : 64;
            else if (!strcmp(a, "--every")) every = x;
            else if (!strcmp(a, "--precompute-budget")) budget = x;
            else limit = x;
        } else if (!strcmp(a, "--json")) {
            as_json = 1;
        } else if (!strcmp(a, "--dump-instances")) {
            dump = 1;
        } else if (!strcmp(a, "--repeat")) {
            repeat = true;
        } else if (!strcmp(a, "--no-share")) {
            cp.no_share = true;
        } else if (!strcmp(a, "--draft7")) {
            flags |= SIFT_JSON_SCHEMA_DRAFT7;
        } else if (!strcmp(a, "--llama-conventions")) {
#ifdef SIFT_JSON_SCHEMA_LLAMA
            flags |= SIFT_JSON_SCHEMA_LLAMA;
#else
            fprintf(stderr, "maskbench: --llama-conventions is not available in this build\n");
            return 2;
#endif
        } else if (a[0] != '-' && !dir) {
            dir = a;
        } else {
            fprintf(stderr, "maskbench: unknown argument %s\n", a);
            usage(stderr);
            return 2;
        }
#undef VAL
    }
    if (!dir) {
        usage(stderr);
        return 2;
    }
    char data_dir[2048];
    if (resolve_dir(dir, data_dir, sizeof data_dir)) return 1;

    /* files */
    DIR *d = opendir(data_dir);
    if (!d) {
        fprintf(stderr, "maskbench: %s: %s\n", data_dir, strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t nn = 0, cn = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l <= 5 || strcmp(de->d_name + l - 5, ".json")) continue;
        if (filter && !strstr(de->d_name, filter)) continue;
        if (nn == cn) {
            cn = cn ? cn * 2 : 1024;
            names = realloc(names, cn * sizeof *names);
            if (!names) return 1;
        }
        names[nn++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, nn, sizeof *names, cmp_str);
    size_t ni = 0;
    item *it = calloc(nn ? nn : 1, sizeof *it);
    for (size_t i = 0; i < nn; i += (size_t)every) {
        if (limit && (long)ni >= limit) break;
        char pth[4096];
        if (snprintf(pth, sizeof pth, "%s/%s", data_dir, names[i]) >= (int)sizeof pth) continue;
        it[ni].path = strdup(pth);
        it[ni].name = names[i];
        ni++;
    }

    if (dump) {
        for (size_t i = 0; i < ni; i++)
            if (dump_instances(it[i].path)) fprintf(stderr, "maskbench: cannot read %s\n", it[i].path);
        for (size_t i = 0; i < ni; i++) free(it[i].path);
        for (size_t i = 0; i < nn; i++) free(names[i]);
        free(names);
        free(it);
        return 0;
    }
    /* vocabulary, loaded once; the children share it */
    char vpath[2048];
    if (strchr(vocab_arg, '/') || strstr(vocab_arg, ".gguf")) snprintf(vpath, sizeof vpath, "%s", vocab_arg);
    else snprintf(vpath, sizeof vpath, "%s/models/vocab/ggml-vocab-%s.gguf", default_shared(), vocab_arg);
    sift_error err = {0};
    sift_vocab *vocab = sift_vocab_load(vpath, &err);
    if (!vocab) {
        fprintf(stderr, "maskbench: %s: %s\n", vpath, err.msg);
        return 1;
    }
    sift_vocab_view view;
    sift_vocab_view_get(vocab, &view);
    bench_ctx bc = {.vocab = vocab, .view = &view, .n_vocab = sift_vocab_n_tokens(vocab), .schema_flags = flags};
    const char *slow = getenv("SIFT_MASKBENCH_SLOW");
    if (slow) bc.slow_us = atof(slow);
    bc.zeros = calloc((size_t)bc.n_vocab, sizeof *bc.zeros);
    if (!bc.zeros || sift_candidates_init(&bc.cand, (size_t)bc.n_vocab) != SIFT_OK) return 1;
    if (out_dir) mkdir(out_dir, 0755);
    /* Everything that depends only on the vocabulary (its grammar trie) is built once per
     * process and shared by every grammar over it, as in the server (one compiler per
     * model): build it here, before the children fork, so that each schema pays only for
     * its own grammar. Every schema is compiled (no cache: TTFM is what compiling costs). */
    cp.precompute_budget = (uint64_t)budget;
    cp.no_cache = !repeat;
    cp.cache_grammars = 1; /* --repeat: the schema just compiled, nothing older */
    bc.repeat = repeat;
    bc.compiler = sift_grammar_compiler_new(&view, &cp, &err);
    if (!bc.compiler) {
        fprintf(stderr, "maskbench: %s\n", err.msg);
        return 1;
    }

    slot *sl = calloc((size_t)jobs, sizeof *sl);
    for (long j = 0; j < jobs; j++) sl[j].pid = 0;
    float *all = NULL, *all_cpu = NULL, *ttfm = NULL, *ttfm_cpu = NULL;
    size_t n_all = 0, c_all = 0, n_ttfm = 0;
    ttfm = malloc(sizeof *ttfm * (ni ? ni : 1));
    ttfm_cpu = malloc(sizeof *ttfm_cpu * (ni ? ni : 1));
    float *ttfm_hit = malloc(sizeof *ttfm_hit * (ni ? ni : 1));
    size_t n_hit = 0;
    size_t next = 0, done = 0;
    double t_start = cli_now_us();
    signal(SIGPIPE, SIG_IGN);
    for (long j = 0; j < jobs; j++) sl[j].idx = -1;
    while (done < ni) {
        /* hand out schemas; a worker is (re)started when needed */
        for (long j = 0; j < jobs && next < ni; j++) {
            if (sl[j].idx >= 0) continue;
            if (!sl[j].pid && spawn(&sl[j], sl, jobs, &bc, it)) {
                perror("maskbench: starting a worker");
                return 1;
            }
            int32_t k = (int32_t)next;
            if (write(sl[j].cmd, &k, sizeof k) != (ssize_t)sizeof k) {
                kill(sl[j].pid, SIGKILL);
                waitpid(sl[j].pid, NULL, 0);
                retire(&sl[j]);
                continue; /* try again with a fresh worker */
            }
            sl[j].idx = (long)next++;
            sl[j].start = cli_now_us();
        }
        /* wait for a result, a death or a timeout */
        struct pollfd pf[64];
        long nj = jobs < 64 ? jobs : 64;
        for (long j = 0; j < nj; j++) pf[j] = (struct pollfd){sl[j].idx >= 0 ? sl[j].res : -1, POLLIN, 0};
        poll(pf, (nfds_t)nj, 50);
        long j = -1;
        int status = 0, finished = 0, timed_out = 0;
        for (long q = 0; q < nj && j < 0; q++) {
            if (sl[q].idx < 0) continue;
            if (pf[q].revents) {
                char one;
                finished = read(sl[q].res, &one, 1) == 1;
                j = q;
            } else if (cli_now_us() - sl[q].start > (double)timeout_s * 1e6) {
                kill(sl[q].pid, SIGKILL);
                timed_out = 1;
                j = q;
            }
        }
        if (j < 0) continue;
        item *x = &it[sl[j].idx];
        memset(&x->h, 0, sizeof x->h);
        x->h.test = -1;
        if (!finished) { /* the worker died (or was killed): this schema is a crash or a timeout */
            waitpid(sl[j].pid, &status, 0);
            if (timed_out) {
                x->h.kind = R_TIMEOUT;
                snprintf(x->h.msg, sizeof x->h.msg, "over %ld s", timeout_s);
            } else {
                x->h.kind = R_CRASH;
                if (WIFSIGNALED(status)) snprintf(x->h.msg, sizeof x->h.msg, "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
                else snprintf(x->h.msg, sizeof x->h.msg, "exit status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
            }
            retire(&sl[j]);
        } else if (pread(sl[j].fd, &x->h, sizeof x->h, 0) != (ssize_t)sizeof x->h) {
            x->h.kind = R_CRASH;
            snprintf(x->h.msg, sizeof x->h.msg, "no result");
        } else {
            /* the masks' times follow the head */
            mask_time buf[2048];
            size_t first_mask = n_all;
            ssize_t r;
            off_t off = (off_t)sizeof x->h;
            while ((r = pread(sl[j].fd, buf, sizeof buf, off)) > 0) {
                off += r;
                size_t k = (size_t)r / sizeof *buf;
                if (n_all + k > c_all) {
                    c_all = (n_all + k) * 2;
                    all = realloc(all, c_all * sizeof *all);
                    all_cpu = realloc(all_cpu, c_all * sizeof *all_cpu);
                    if (!all || !all_cpu) return 1;
                }
                for (size_t q = 0; q < k; q++) all[n_all + q] = buf[q].wall, all_cpu[n_all + q] = buf[q].cpu;
                n_all += k;
            }
            for (size_t q = first_mask; q < n_all; q++) x->tbm_cpu_max = fmaxf(x->tbm_cpu_max, all_cpu[q]);
            if (x->h.kind != R_COMPILE) {
                ttfm[n_ttfm] = (float)x->h.ttfm_us;
                ttfm_cpu[n_ttfm++] = (float)x->h.ttfm_cpu_us;
                if (x->h.ttfm_hit_us > 0) ttfm_hit[n_hit++] = (float)x->h.ttfm_hit_us;
            }
        }
        if (sl[j].pid) sl[j].idx = -1;
        done++;
        if (out_dir) {
            char op[4096];
            FILE *f = snprintf(op, sizeof op, "%s/%s", out_dir, x->name) < (int)sizeof op ? fopen(op, "w") : NULL;
            if (f) {
                fprintf(f, "{\"id\": ");
                json_str(f, x->name);
                fprintf(f,
                        ", \"result\": \"%s\", \"result_whole\": \"%s\", \"prefix_only_valid\": %d, \"prefix_only_invalid\": %d, "
                        "\"ttfm_us\": %.1f, \"ttfm_cpu_us\": %.1f, \"tbm_cpu_max_us\": %.1f, \"num_tests\": %d, \"num_tokens\": %d, "
                        "\"test\": %d, \"message\": ",
                        kind_name[x->h.kind], kind_name[x->h.kind_whole], x->h.prefix_valid, x->h.prefix_invalid, x->h.ttfm_us,
                        x->h.ttfm_cpu_us, x->tbm_cpu_max,
                        x->h.n_tests, x->h.n_tokens, x->h.test);
                json_str(f, x->h.msg);
                if (x->h.ttfm_hit_us >= 0) fprintf(f, ", \"ttfm_hit_us\": %.1f", x->h.ttfm_hit_us);
                fprintf(f, "}\n");
                fclose(f);
            }
        }
        if (!as_json && isatty(2) && done % 50 == 0) fprintf(stderr, "\r%zu / %zu", done, ni);
    }
    if (!as_json && isatty(2)) fprintf(stderr, "\r");

    int count[R_NKIND] = {0}, count_whole[R_NKIND] = {0}, prefix_valid = 0, prefix_invalid = 0;
    for (size_t i = 0; i < ni; i++) {
        count[it[i].h.kind]++;
        /* a timeout or crash has no whole-text verdict of its own */
        count_whole[it[i].h.kind == R_TIMEOUT || it[i].h.kind == R_CRASH ? it[i].h.kind : it[i].h.kind_whole]++;
        prefix_valid += it[i].h.prefix_valid;
        prefix_invalid += it[i].h.prefix_invalid;
    }
    qsort(all, n_all, sizeof *all, cmp_float);
    qsort(ttfm, n_ttfm, sizeof *ttfm, cmp_float);
    qsort(all_cpu, n_all, sizeof *all_cpu, cmp_float);
    qsort(ttfm_cpu, n_ttfm, sizeof *ttfm_cpu, cmp_float);
    qsort(ttfm_hit, n_hit, sizeof *ttfm_hit, cmp_float);
    double la[3] = {0, 0, 0};
    if (getloadavg(la, 3) < 0) la[0] = -1;
    static const double tq[] = {0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0};
    static const char *const tn[] = {"p25", "p50", "p75", "p90", "p95", "p99", "p999", "max"};
    static const double fq[] = {0.5, 0.75, 0.9, 0.99, 1.0};
    static const char *const fn[] = {"p50", "p75", "p90", "p99", "max"};
    if (as_json) {
        printf("{\"schemas\": %zu, \"passing\": %d, \"compile_error\": %d, \"validation_error\": %d, "
               "\"invalidation_error\": %d, \"timeout\": %d, \"crash\": %d, \"tbm_us\": {",
               ni, count[R_PASS], count[R_COMPILE], count[R_VALIDATION], count[R_INVALIDATION], count[R_TIMEOUT], count[R_CRASH]);
        for (int k = 0; k < 8; k++) printf("%s\"%s\": %.1f", k ? ", " : "", tn[k], pct(all, n_all, tq[k]));
        printf("}, \"ttfm_us\": {");
        for (int k = 0; k < 5; k++) printf("%s\"%s\": %.1f", k ? ", " : "", fn[k], pct(ttfm, n_ttfm, fq[k]));
        printf("}, \"tbm_cpu_us\": {");
        for (int k = 0; k < 8; k++) printf("%s\"%s\": %.1f", k ? ", " : "", tn[k], pct(all_cpu, n_all, tq[k]));
        printf("}, \"ttfm_cpu_us\": {");
        for (int k = 0; k < 5; k++) printf("%s\"%s\": %.1f", k ? ", " : "", fn[k], pct(ttfm_cpu, n_ttfm, fq[k]));
        if (repeat) {
            printf("}, \"ttfm_hit_us\": {");
            for (int k = 0; k < 5; k++) printf("%s\"%s\": %.1f", k ? ", " : "", fn[k], pct(ttfm_hit, n_hit, fq[k]));
        }
        printf("}, \"whole_text\": {");
        for (int k = 0; k < R_NKIND; k++) printf("%s\"%s\": %d", k ? ", " : "", kind_name[k], count_whole[k]);
        printf("}, \"prefix_only_valid\": %d, \"prefix_only_invalid\": %d", prefix_valid, prefix_invalid);
        printf(", \"masks\": %zu, \"load_avg\": %.2f, \"vocab\": ", n_all, la[0]);
        json_str(stdout, vocab_arg);
        printf(", \"n_vocab\": %d, \"jobs\": %ld, \"wall_s\": %.1f}\n", bc.n_vocab, jobs, (cli_now_us() - t_start) * 1e-6);
    } else {
        printf("MaskBench: %zu schemas from %s, vocabulary %s (%d tokens), %ld job(s), %.1f s\n\n", ni, data_dir, vocab_arg,
               bc.n_vocab, jobs, (cli_now_us() - t_start) * 1e-6);
        printf("  %-20s %6s  %7s   %s\n", "", "", "", "as whole texts (end-of-text check)");
        for (int k = 0; k < R_NKIND; k++)
            printf("  %-20s %6d  %5.1f %%   %6d\n", kind_name[k], count[k], ni ? 100.0 * count[k] / (double)ni : 0.0, count_whole[k]);
        printf("  instances accepted only as a prefix: %d valid, %d invalid\n", prefix_valid, prefix_invalid);
        printf("\n  TBM µs (%zu masks):", n_all);
        for (int k = 0; k < 8; k++) printf("  %s %.1f", tn[k], pct(all, n_all, tq[k]));
        printf("\n  TTFM µs (%zu schemas):", n_ttfm);
        for (int k = 0; k < 5; k++) printf("  %s %.0f", fn[k], pct(ttfm, n_ttfm, fq[k]));
        printf("\n  TBM CPU µs:");
        for (int k = 0; k < 8; k++) printf("  %s %.1f", tn[k], pct(all_cpu, n_all, tq[k]));
        printf("\n  TTFM CPU µs:");
        for (int k = 0; k < 5; k++) printf("  %s %.0f", fn[k], pct(ttfm_cpu, n_ttfm, fq[k]));
        if (repeat) {
            printf("\n  TTFM µs, the same schema again (compiler cache hit, %zu schemas):", n_hit);
            for (int k = 0; k < 5; k++) printf("  %s %.1f", fn[k], pct(ttfm_hit, n_hit, fq[k]));
        }
        printf("\n  load average %.2f (wall-clock times count the time the thread waited for a CPU)\n", la[0]);
        print_causes(it, ni, R_COMPILE, 25);
        print_causes(it, ni, R_INVALIDATION, 40);
        print_causes(it, ni, R_VALIDATION, 40);
        print_causes(it, ni, R_CRASH, 20);
        print_causes(it, ni, R_TIMEOUT, 20);
    }
    for (size_t i = 0; i < ni; i++) free(it[i].path);
    for (size_t i = 0; i < nn; i++) free(names[i]);
    free(names);
    free(it);
    free(all);
    free(all_cpu);
    free(ttfm);
    free(ttfm_cpu);
    free(ttfm_hit);
    for (long j = 0; j < jobs; j++)
        if (sl[j].pid) {
            int pid = sl[j].pid;
            retire(&sl[j]); /* EOF on its command pipe: the worker exits */
            waitpid(pid, NULL, 0);
        }
    free(sl);
    free(bc.zeros);
    sift_candidates_free(&bc.cand);
    sift_grammar_compiler_free(bc.compiler);
    sift_vocab_free(vocab);
    return count[R_INVALIDATION] || count_whole[R_INVALIDATION] || count[R_CRASH] ? 1 : 0;
}
