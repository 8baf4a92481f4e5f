/*
 * gbnf.c - the GBNF parser: text -> compiled grammar (grammar.h).
 *
 * Syntax and meaning follow llama.cpp's grammars/README.md and its parser (llama-grammar.cpp),
 * so that a grammar means the same thing in both:
 *
 *   rule      ::= name ws0 "::=" ws alternates (newline | end)
 *   alternates::= sequence ( "|" ws sequence )*          newline allowed after "|"
 *   sequence  ::= ( item postfix* )*                     newlines allowed inside ( )
 *   item      ::= "literal" | [class] | [^class] | name | ( alternates ) | . | <[id]> | <text>
 *                 | !<[id]> | !<text>
 *   postfix   ::= * | + | ? | {m} | {m,} | {m,n}
 *
 * Names are letters, digits and '-'. Comments run from '#' to the end of the line. Escapes
 * in literals and classes: \xHH \uHHHH \UHHHHHHHH \t \r \n \\ \" \[ \] \-. A rule defined
 * twice keeps its last definition (as in llama.cpp).
 *
 * Repetitions are rewritten as llama.cpp rewrites them, with helper rules named name_N:
 *   S{m,n} -> S ... S (m times) S'(n-m),  S'(x) ::= S S'(x-1) | ,  S'(1) ::= S |
 *   S{m,}  -> S ... S (m times) S',       S'    ::= S S' |
 * and with llama.cpp's limits (at most 2000 repetitions; an upper bound above 2000 means
 * "unbounded"; the product of nested repetition counts must stay below 2000), plus a cap on
 * the total size so that no input can exhaust memory. Helper rules with equal bodies are one
 * rule (helper_find: the same group or repetition written many times is parsed, analysed and
 * walked once); the limits still count every copy, so what is refused does not change.
 *
 * After parsing: every referenced rule must be defined, the root must exist, and no rule may
 * reach itself through a left corner (left recursion would make the matcher loop); then the
 * symbol partition, class bitsets, nullable / FIRST / FOLLOW sets (gbnf_sets.c) are
 * computed (grammar.h).
 *
 * Errors say where ("line:col", columns count characters) and what was expected; parsing
 * never recurses deeper than GBNF_MAX_DEPTH nested groups.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/status.h"
#include "grammar/grammar.h"

#define GBNF_MAX_REPETITION 2000      /* llama.cpp's MAX_REPETITION_THRESHOLD */
#define GBNF_MAX_ELEMS (1u << 22)     /* total elements of all rules */
#define GBNF_MAX_RULES (1u << 20)
#define GBNF_MAX_DEPTH 200            /* nested parentheses */
#define GBNF_MAX_SYMBIT ((uint64_t)1 << 28) /* bits of class / rule symbol bitsets */

typedef struct {
    char *name;
    size_t len;              /* strlen(name) */
    uint64_t hash;           /* sift__gx_hash_bytes(name) */
    sift__gx_u32vec body;    /* elements, ALT-separated, END-terminated once defined */
    bool defined, helper;
    size_t first_use;  /* offset of the first reference, for "undefined rule" */
    size_t def_at;     /* offset of the (last) definition, for "left recursion" */
} pr_rule;

typedef struct {
    uint32_t *v; /* lo, hi pairs */
    uint32_t n, cap;
} range_vec;

typedef struct {
    const char *s;
    size_t n, i;
    const sift_vocab_view *vocab;
    sift_error *err;
    int status; /* first error, SIFT_OK while fine */

    pr_rule *rules;
    uint32_t n_rules, cap_rules;
    uint32_t *ht; /* name -> rule id + 1, open addressing */
    uint32_t ht_cap;

    /* interned classes */
    sift__gx_u32vec cls_off;   /* start of each class in cls_rng (n_classes + 1 entries) */
    sift__gx_u32vec cls_rng;   /* lo, hi pairs */
    uint32_t *cls_ht;
    uint32_t cls_ht_cap;
    range_vec tmp;       /* ranges of the class being parsed */
    uint32_t ascii_cls[128]; /* single_char_class of an ASCII character + 1, 0 = not yet */

    uint32_t *hh; /* helper rules by body (helper_find): rule id + 1, open addressing */
    uint32_t hh_cap, hh_n;
    uint32_t n_counted; /* rules as if no helper were shared: the limits count these */

    uint64_t total_elems;
    int depth;
    bool has_tokens;
    uint32_t max_token;
} gbnf_parser;

/* ---- errors ---------------------------------------------------------------------------- */

static void pos_of(const gbnf_parser *p, size_t at, unsigned *line, unsigned *col)
{
    unsigned l = 1, c = 1;
    for (size_t k = 0; k < at && k < p->n; k++) {
        unsigned char b = (unsigned char)p->s[k];
        if (b == '\n') {
            l++;
            c = 1;
        } else if ((b & 0xC0) != 0x80) {
            c++;
        }
    }
    *line = l;
    *col = c;
}

static const char *describe(const gbnf_parser *p, size_t at, char *buf, size_t cap)
{
    if (at >= p->n) return "end of input";
    unsigned char b = (unsigned char)p->s[at];
    if (b == '\n' || b == '\r') return "end of line";
    if (b >= 0x20 && b < 0x7F) snprintf(buf, cap, "'%c'", b);
    else snprintf(buf, cap, "byte 0x%02X", b);
    return buf;
}

__attribute__((format(printf, 3, 4))) static bool fail_at(gbnf_parser *p, size_t at, const char *fmt, ...)
{
    if (p->status != SIFT_OK) return false;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    unsigned line, col;
    pos_of(p, at, &line, &col);
    p->status = SIFT_E_PARSE;
    sift__error_set(p->err, SIFT_E_PARSE, "%u:%u: %s", line, col, msg);
    return false;
}

static bool oom(gbnf_parser *p)
{
    if (p->status == SIFT_OK) {
        p->status = SIFT_E_NOMEM;
        sift__error_set(p->err, SIFT_E_NOMEM, "out of memory while parsing the grammar");
    }
    return false;
}

/* ---- lexing helpers -------------------------------------------------------------------- */

static int peek(const gbnf_parser *p) { return p->i < p->n ? (unsigned char)p->s[p->i] : -1; }
static int peek_at(const gbnf_parser *p, size_t k) { return p->i + k < p->n ? (unsigned char)p->s[p->i + k] : -1; }

static bool is_name_char(int c) { return ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || (c >= '0' && c <= '9') || c == '-'; }
/* The end of the rule name starting at p->i (names in schema grammars run to 100+
 * characters: 16 bytes a step where SSE2 is (x86-64 always), then a bitmap test per byte). */
static size_t scan_name(const gbnf_parser *p)
{
    static const uint64_t name_bits[2] = {0x03FF200000000000ULL, 0x07FFFFFE07FFFFFEULL}; /* - 0-9, A-Z a-z */
    const unsigned char *s = (const unsigned char *)p->s;
    size_t i = p->i;
#ifdef __SSE2__
    for (; i + 16 <= p->n; i += 16) { /* signed compares: bytes from 0x80 are below every range */
        const __m128i v = _mm_loadu_si128((const __m128i *)(s + i)), l = _mm_or_si128(v, _mm_set1_epi8(0x20));
        const __m128i al = _mm_and_si128(_mm_cmpgt_epi8(l, _mm_set1_epi8('a' - 1)), _mm_cmplt_epi8(l, _mm_set1_epi8('z' + 1)));
        const __m128i dg = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('0' - 1)), _mm_cmplt_epi8(v, _mm_set1_epi8('9' + 1)));
        const unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(al, dg), _mm_cmpeq_epi8(v, _mm_set1_epi8('-'))));
        if (m != 0xFFFFu) return i + (size_t)__builtin_ctz(~m);
    }
#endif
    while (i < p->n && s[i] < 128 && (name_bits[s[i] >> 6] >> (s[i] & 63) & 1)) i++;
    return i;
}

static void skip_space(gbnf_parser *p, bool newline_ok)
{
    for (;;) {
        int c = peek(p);
        if (c == ' ' || c == '\t') {
            p->i++;
        } else if (c == '#') {
            while (p->i < p->n && p->s[p->i] != '\r' && p->s[p->i] != '\n') p->i++;
        } else if (newline_ok && (c == '\r' || c == '\n')) {
            p->i++;
        } else {
            return;
        }
    }
}

static bool parse_hex(gbnf_parser *p, int ndigits, uint32_t *out)
{
    uint64_t v = 0;
    size_t start = p->i;
    for (int k = 0; k < ndigits; k++) {
        int c = peek(p);
        int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0) {
            char b[16];
            return fail_at(p, p->i, "expected %d hex digits after '\\%c', got %s", ndigits,
                           p->s[start - 1], describe(p, p->i, b, sizeof b));
        }
        v = v * 16 + (uint64_t)d;
        p->i++;
    }
    *out = v > 0x7FFFFFFF ? 0x7FFFFFFF : (uint32_t)v;
    return true;
}

/* One character of a literal or class: an escape or one UTF-8 encoded code point.
 * Values above U+10FFFF (from \U) are kept; they match nothing. */
static bool parse_char(gbnf_parser *p, uint32_t *cp)
{
    int c = peek(p);
    if (c < 0) return fail_at(p, p->i, "unexpected end of input");
    if (c == '\\') {
        int e = peek_at(p, 1);
        p->i += 2;
        switch (e) {
        case 'x': return parse_hex(p, 2, cp);
        case 'u': return parse_hex(p, 4, cp);
        case 'U': return parse_hex(p, 8, cp);
        case 't': *cp = '\t'; return true;
        case 'r': *cp = '\r'; return true;
        case 'n': *cp = '\n'; return true;
        case '\\': case '"': case '[': case ']': case '-':
            *cp = (uint32_t)e;
            return true;
        default:
            if (e < 0) return fail_at(p, p->i - 2, "unexpected end of input after '\\'");
            return fail_at(p, p->i - 2, "unknown escape '\\%c' (expected one of \\x \\u \\U \\t \\r \\n \\\\ \\\" \\[ \\] \\-)",
                           e >= 0x20 && e < 0x7F ? e : '?');
        }
    }
    sift__gx_utf8 u = {0};
    size_t start = p->i;
    for (;;) {
        int b = peek(p);
        if (b < 0) return fail_at(p, start, "truncated UTF-8 character");
        p->i++;
        int32_t r = sift__gx_utf8_feed(&u, (uint8_t)b);
        if (r == GX_UTF8_BAD) return fail_at(p, start, "invalid UTF-8 in the grammar text");
        if (r >= 0) {
            *cp = (uint32_t)r;
            return true;
        }
    }
}

/* ---- rules and symbols ------------------------------------------------------------------- */

static bool ht_rehash(gbnf_parser *p, uint32_t ncap)
{
    uint32_t *nt = sift__gx_calloc(ncap, sizeof *nt);
    if (!nt) return oom(p);
    for (uint32_t r = 0; r < p->n_rules; r++) {
        if (p->rules[r].helper) continue;
        uint32_t k = (uint32_t)p->rules[r].hash & (ncap - 1);
        while (nt[k]) k = (k + 1) & (ncap - 1);
        nt[k] = r + 1;
    }
    sift__gx_free(p->ht);
    p->ht = nt;
    p->ht_cap = ncap;
    return true;
}

static uint32_t new_rule(gbnf_parser *p, const char *name, size_t len, uint64_t h, bool helper, size_t at);

/* One more rule against the limit, also when a helper is shared (the limits, and so what is
 * refused, are what they were before helpers were shared). */
static bool count_rule(gbnf_parser *p, size_t at)
{
    if (p->n_counted >= GBNF_MAX_RULES)
        return fail_at(p, at, "too many rules (more than %u, counting repetition helpers)", GBNF_MAX_RULES);
    p->n_counted++;
    return true;
}

/* Id of the rule called name[0..len), creating an undefined one if new (UINT32_MAX on error). */
static uint32_t rule_id(gbnf_parser *p, const char *name, size_t len, size_t at)
{
    uint64_t h = sift__gx_hash_bytes(name, len);
    if (p->ht_cap) {
        uint32_t k = (uint32_t)h & (p->ht_cap - 1);
        while (p->ht[k]) {
            pr_rule *r = &p->rules[p->ht[k] - 1];
            if (r->hash == h && r->len == len && !memcmp(r->name, name, len)) return p->ht[k] - 1;
            k = (k + 1) & (p->ht_cap - 1);
        }
    }
    return new_rule(p, name, len, h, false, at);
}

/* Append a rule; a helper (its name has a '_', which no name in the text can have) is never
 * looked up, so it stays out of the name table: repetitions make thousands of them. */
static uint32_t new_rule(gbnf_parser *p, const char *name, size_t len, uint64_t h, bool helper, size_t at)
{
    if (!count_rule(p, at)) return UINT32_MAX;
    if (!GX_GROW(p->rules, p->cap_rules, p->n_rules + 1)) return oom(p), UINT32_MAX;
    pr_rule *r = &p->rules[p->n_rules];
    memset(r, 0, sizeof *r);
    r->name = sift__gx_malloc(len + 1);
    if (!r->name) return oom(p), UINT32_MAX;
    memcpy(r->name, name, len);
    r->name[len] = 0;
    r->len = len;
    r->hash = h;
    r->first_use = at;
    r->helper = helper;
    p->n_rules++;
    if (helper) return p->n_rules - 1;
    if ((uint64_t)p->n_rules * 2 > p->ht_cap) {
        if (!ht_rehash(p, p->ht_cap ? p->ht_cap * 2 : 64)) return UINT32_MAX; /* inserts all */
    } else {
        uint32_t k = (uint32_t)h & (p->ht_cap - 1);
        while (p->ht[k]) k = (k + 1) & (p->ht_cap - 1);
        p->ht[k] = p->n_rules;
    }
    return p->n_rules - 1;
}

/* A fresh helper rule "base_N" (N = its id, as in llama.cpp). */
static uint32_t helper_rule(gbnf_parser *p, const char *base, size_t at)
{
    /* as snprintf("%.100s_%u") would write it (snprintf was a tenth of parsing) */
    char buf[160];
    const char *z = memchr(base, 0, 100);
    size_t len = z ? (size_t)(z - base) : 100;
    memcpy(buf, base, len);
    buf[len++] = '_';
    char digits[16];
    size_t nd = 0;
    uint32_t v = p->n_rules;
    do digits[nd++] = (char)('0' + v % 10);
    while (v /= 10);
    while (nd) buf[len++] = digits[--nd];
    return new_rule(p, buf, len, 0, true, at);
}

/* Helper rules are shared: a schema grammar writes the same group or repetition thousands
 * of times (3,783 `char*` and 1,054 `( "," space x-kv )*` in a Kubernetes schema's text,
 * 105 of those distinct), and every copy was a rule for the parser, the analyses and the
 * mask engine. A helper's body is all its language (it has no name in the text, and a REF
 * is a rule id), so equal bodies are one rule. HELPER_SELF marks the helper's reference to
 * itself in a body being looked up. */
#define HELPER_SELF GX_MAKE(GX_REF, GX_MAX_VALUE)

static uint64_t helper_hash(const uint32_t *v, uint32_t n, uint32_t self)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    for (uint32_t k = 0; k < n; k++) h = (h ^ (v[k] == GX_MAKE(GX_REF, self) ? HELPER_SELF : v[k])) * 0xFF51AFD7ED558CCDULL;
    return sift__gx_mix64(h);
}

/* The helper whose body is v[0..n) (HELPER_SELF, or a REF to `self`, for itself); UINT32_MAX
 * if none. */
static uint32_t helper_find(const gbnf_parser *p, const uint32_t *v, uint32_t n, uint32_t self, uint64_t h)
{
    if (!p->hh_cap) return UINT32_MAX;
    for (uint32_t k = (uint32_t)h & (p->hh_cap - 1); p->hh[k]; k = (k + 1) & (p->hh_cap - 1)) {
        const uint32_t id = p->hh[k] - 1;
        const pr_rule *r = &p->rules[id];
        if (r->hash != h || r->body.n != n) continue;
        uint32_t j = 0;
        for (const uint32_t me = GX_MAKE(GX_REF, id), it = GX_MAKE(GX_REF, self); j < n; j++) {
            const uint32_t a = v[j] == it ? HELPER_SELF : v[j], b = r->body.v[j] == me ? HELPER_SELF : r->body.v[j];
            if (a != b) break;
        }
        if (j == n) return id;
    }
    return UINT32_MAX;
}

/* File helper id (defined) under its body's hash h. */
static bool helper_file(gbnf_parser *p, uint32_t id, uint64_t h)
{
    if ((p->hh_n + 1) * 2 > p->hh_cap) {
        uint32_t nc = p->hh_cap ? p->hh_cap * 2 : 256, *nt = sift__gx_calloc(nc, sizeof *nt);
        if (!nt) return oom(p);
        for (uint32_t q = 0; q < p->hh_cap; q++) {
            if (!p->hh[q]) continue;
            uint32_t k = (uint32_t)p->rules[p->hh[q] - 1].hash & (nc - 1);
            while (nt[k]) k = (k + 1) & (nc - 1);
            nt[k] = p->hh[q];
        }
        sift__gx_free(p->hh);
        p->hh = nt;
        p->hh_cap = nc;
    }
    p->rules[id].hash = h;
    uint32_t k = (uint32_t)h & (p->hh_cap - 1);
    while (p->hh[k]) k = (k + 1) & (p->hh_cap - 1);
    p->hh[k] = id + 1;
    p->hh_n++;
    return true;
}

static bool count_elems(gbnf_parser *p, uint64_t add, size_t at)
{
    p->total_elems += add;
    if (p->total_elems > GBNF_MAX_ELEMS)
        return fail_at(p, at, "grammar too large (more than %u elements after expanding repetitions)", GBNF_MAX_ELEMS);
    return true;
}

static bool define_rule(gbnf_parser *p, uint32_t id, sift__gx_u32vec *body, size_t at)
{
    pr_rule *r = &p->rules[id];
    r->def_at = at;
    if (r->defined) p->total_elems -= r->body.n; /* redefinition: the last one wins */
    sift__gx_u32_free(&r->body);
    r->body = *body;
    memset(body, 0, sizeof *body);
    r->defined = true;
    return true;
}

/* ---- character classes ----------------------------------------------------------------- */

static int cmp_range(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

static bool tmp_push(gbnf_parser *p, uint32_t lo, uint32_t hi)
{
    if (lo > 0x10FFFF) return true;   /* matches nothing */
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    if (lo > hi) return true;         /* reversed range: empty, as in llama.cpp */
    if (!GX_GROW(p->tmp.v, p->tmp.cap, p->tmp.n + 2)) return oom(p);
    p->tmp.v[p->tmp.n++] = lo;
    p->tmp.v[p->tmp.n++] = hi;
    return true;
}

/* Normalize p->tmp (sort, merge, negate) and intern it; returns the class id. */
static uint32_t intern_class(gbnf_parser *p, bool negated)
{
    uint32_t n = p->tmp.n / 2;
    if (n > 1) qsort(p->tmp.v, n, 2 * sizeof(uint32_t), cmp_range);
    uint32_t m = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t lo = p->tmp.v[2 * k], hi = p->tmp.v[2 * k + 1];
        if (m && lo <= p->tmp.v[2 * m - 1] + 1) {
            if (hi > p->tmp.v[2 * m - 1]) p->tmp.v[2 * m - 1] = hi;
        } else {
            p->tmp.v[2 * m] = lo;
            p->tmp.v[2 * m + 1] = hi;
            m++;
        }
    }
    if (negated) {
        /* complement against [0, 0x10FFFF]: at most m + 1 ranges */
        if (!GX_GROW(p->tmp.v, p->tmp.cap, 2 * m + 2)) return oom(p), UINT32_MAX;
        uint32_t out[2 * 64], *buf = out;
        if (m + 1 > 64 && !(buf = sift__gx_malloc((2 * m + 2) * sizeof *buf))) return oom(p), UINT32_MAX;
        uint32_t k2 = 0, next = 0;
        for (uint32_t k = 0; k < m; k++) {
            uint32_t lo = p->tmp.v[2 * k], hi = p->tmp.v[2 * k + 1];
            if (lo > next) {
                buf[2 * k2] = next;
                buf[2 * k2 + 1] = lo - 1;
                k2++;
            }
            next = hi + 1;
        }
        if (next <= 0x10FFFF) {
            buf[2 * k2] = next;
            buf[2 * k2 + 1] = 0x10FFFF;
            k2++;
        }
        memcpy(p->tmp.v, buf, 2 * k2 * sizeof *buf);
        if (buf != out) sift__gx_free(buf);
        m = k2;
    }
    p->tmp.n = 2 * m;

    uint64_t h = sift__gx_hash_u32s(p->tmp.v, p->tmp.n, 7);
    uint32_t n_cls = p->cls_off.n ? p->cls_off.n - 1 : 0;
    if (p->cls_ht_cap) {
        uint32_t k = (uint32_t)h & (p->cls_ht_cap - 1);
        while (p->cls_ht[k]) {
            uint32_t c = p->cls_ht[k] - 1;
            uint32_t o = p->cls_off.v[c], len = p->cls_off.v[c + 1] - o;
            if (len == p->tmp.n && !memcmp(p->cls_rng.v + o, p->tmp.v, len * sizeof(uint32_t))) return c;
            k = (k + 1) & (p->cls_ht_cap - 1);
        }
    }
    if (n_cls >= GX_MAX_VALUE) return fail_at(p, p->i, "too many character classes"), UINT32_MAX;
    if (p->cls_off.n == 0 && !sift__gx_u32_push(&p->cls_off, 0)) return oom(p), UINT32_MAX;
    for (uint32_t k = 0; k < p->tmp.n; k++)
        if (!sift__gx_u32_push(&p->cls_rng, p->tmp.v[k])) return oom(p), UINT32_MAX;
    if (!sift__gx_u32_push(&p->cls_off, p->cls_rng.n)) return oom(p), UINT32_MAX;
    uint32_t c = n_cls;
    n_cls++;
    if ((uint64_t)n_cls * 2 > p->cls_ht_cap) {
        uint32_t ncap = p->cls_ht_cap ? p->cls_ht_cap * 2 : 64;
        uint32_t *nt = sift__gx_calloc(ncap, sizeof *nt);
        if (!nt) return oom(p), UINT32_MAX;
        for (uint32_t q = 0; q < n_cls; q++) {
            uint32_t o = p->cls_off.v[q];
            uint64_t hq = sift__gx_hash_u32s(p->cls_rng.v + o, p->cls_off.v[q + 1] - o, 7);
            uint32_t k = (uint32_t)hq & (ncap - 1);
            while (nt[k]) k = (k + 1) & (ncap - 1);
            nt[k] = q + 1;
        }
        sift__gx_free(p->cls_ht);
        p->cls_ht = nt;
        p->cls_ht_cap = ncap;
    } else {
        uint32_t k = (uint32_t)h & (p->cls_ht_cap - 1);
        while (p->cls_ht[k]) k = (k + 1) & (p->cls_ht_cap - 1);
        p->cls_ht[k] = c + 1;
    }
    return c;
}

static uint32_t single_char_class(gbnf_parser *p, uint32_t cp)
{
    /* an ASCII literal character's class is remembered: literals are most of a schema
     * grammar's elements (every key's text), and each was a sort, hash and probe */
    if (cp < 128 && p->ascii_cls[cp]) return p->ascii_cls[cp] - 1;
    p->tmp.n = 0;
    if (!tmp_push(p, cp, cp)) return UINT32_MAX;
    const uint32_t c = intern_class(p, false);
    if (cp < 128 && c != UINT32_MAX) p->ascii_cls[cp] = c + 1;
    return c;
}

/* ---- the recursive-descent parser ------------------------------------------------------ */

static bool parse_alternates(gbnf_parser *p, uint32_t rule, bool nested, size_t open_at);

/* Apply a repetition {min, max} (max UINT64_MAX = unbounded) to the last item of `out`,
 * which starts at element `last`; see the rewrite rules in the file comment. */
static bool repeat_last(gbnf_parser *p, sift__gx_u32vec *out, uint32_t last, uint64_t *n_prev_rules, uint64_t min,
                        uint64_t max, const char *rule_name, size_t at)
{
    bool no_max = max == UINT64_MAX;
    if (last == out->n) return fail_at(p, at, "'*', '+', '?' or '{' must follow an item to repeat");
    uint64_t total = 1;
    if (!no_max && max > 0) total = max;
    else if (min > 0) total = min;
    if (*n_prev_rules * total >= GBNF_MAX_REPETITION)
        return fail_at(p, at, "nested repetitions expand to %llu copies (the limit is %d)",
                       (unsigned long long)(*n_prev_rules * total), GBNF_MAX_REPETITION);

    uint32_t item_len = out->n - last;
    uint32_t *item = sift__gx_malloc(item_len * sizeof *item);
    if (!item) return oom(p);
    memcpy(item, out->v + last, item_len * sizeof *item);

    bool ok = true;
    if (min == 0) {
        out->n = last;
    } else {
        ok = count_elems(p, (uint64_t)item_len * (min - 1), at);
        for (uint64_t k = 1; ok && k < min; k++)
            for (uint32_t e = 0; ok && e < item_len; e++) ok = sift__gx_u32_push(out, item[e]) || oom(p);
    }
    uint64_t n_opt = no_max ? 1 : max - min;
    uint32_t last_rec = 0;
    for (uint64_t k = 0; ok && k < n_opt; k++) {
        sift__gx_u32vec body = {0};
        ok = count_elems(p, item_len + 3, at);
        for (uint32_t e = 0; ok && e < item_len; e++) ok = sift__gx_u32_push(&body, item[e]) || oom(p);
        if (ok && (k > 0 || no_max)) ok = sift__gx_u32_push(&body, no_max ? HELPER_SELF : GX_MAKE(GX_REF, last_rec)) || oom(p);
        if (ok) ok = (sift__gx_u32_push(&body, GX_MAKE(GX_ALT, 0)) && sift__gx_u32_push(&body, GX_MAKE(GX_END, 0))) || oom(p);
        const uint64_t h = ok ? helper_hash(body.v, body.n, GX_MAX_VALUE) : 0;
        uint32_t rec = ok ? helper_find(p, body.v, body.n, GX_MAX_VALUE, h) : UINT32_MAX;
        if (ok && rec != UINT32_MAX) {
            ok = count_rule(p, at); /* shared: counted as the copy it was */
        } else if (ok) {
            rec = helper_rule(p, rule_name, at);
            ok = rec != UINT32_MAX;
            for (uint32_t e = 0; ok && e < body.n; e++)
                if (body.v[e] == HELPER_SELF) body.v[e] = GX_MAKE(GX_REF, rec);
            if (ok) define_rule(p, rec, &body, at);
            if (ok) ok = helper_file(p, rec, h);
        }
        sift__gx_u32_free(&body);
        last_rec = rec;
    }
    if (ok && n_opt > 0) ok = sift__gx_u32_push(out, GX_MAKE(GX_REF, last_rec)) || oom(p);
    sift__gx_free(item);
    *n_prev_rules *= total;
    return ok;
}

static bool parse_uint(gbnf_parser *p, uint64_t *out)
{
    int c = peek(p);
    if (c < '0' || c > '9') {
        char b[16];
        return fail_at(p, p->i, "expected a number, got %s", describe(p, p->i, b, sizeof b));
    }
    uint64_t v = 0;
    while ((c = peek(p)) >= '0' && c <= '9') {
        if (v < (uint64_t)1 << 40) v = v * 10 + (uint64_t)(c - '0');
        p->i++;
    }
    *out = v;
    return true;
}

/* <[id]> or <text> (p->i at '<'); *tok = the token id */
static bool parse_token_ref(gbnf_parser *p, uint32_t *tok)
{
    size_t start = p->i;
    p->i++;
    if (peek(p) == '[') {
        p->i++;
        uint64_t id;
        if (!parse_uint(p, &id)) return false;
        if (peek(p) != ']' || peek_at(p, 1) != '>') {
            char b[16];
            return fail_at(p, p->i, "expected ']>' to close the token id, got %s", describe(p, p->i, b, sizeof b));
        }
        p->i += 2;
        if (id > GX_MAX_VALUE) return fail_at(p, start, "token id %llu is too large", (unsigned long long)id);
        if (p->vocab && id >= (uint64_t)p->vocab->n_tokens)
            return fail_at(p, start, "token id %llu is not in the vocabulary (%d tokens)", (unsigned long long)id,
                           p->vocab->n_tokens);
        *tok = (uint32_t)id;
        return true;
    }
    while (p->i < p->n && p->s[p->i] != '>' && p->s[p->i] != '\n') p->i++;
    if (peek(p) != '>') return fail_at(p, start, "unterminated token reference (expected '>')");
    p->i++;
    const char *text = p->s + start;
    size_t len = p->i - start;
    if (!p->vocab) return fail_at(p, start, "token reference '%.*s' needs a vocabulary (use <[id]> without one)", (int)(len > 60 ? 60 : len), text);
    /* the token whose text is exactly "<...>": prefer control / user-defined tokens */
    int64_t best = -1;
    for (int32_t t = 0; t < p->vocab->n_tokens; t++) {
        if (p->vocab->piece_len[t] != len || memcmp(p->vocab->piece[t], text, len)) continue;
        bool special = p->vocab->attr && (p->vocab->attr[t] & (SIFT_TOKEN_ATTR_CONTROL | SIFT_TOKEN_ATTR_USER));
        if (best < 0 || special) best = t;
        if (special) break;
    }
    if (best < 0) return fail_at(p, start, "'%.*s' is not a token of the vocabulary", (int)(len > 60 ? 60 : len), text);
    *tok = (uint32_t)best;
    return true;
}

static bool parse_sequence(gbnf_parser *p, uint32_t rule, sift__gx_u32vec *out, bool nested)
{
    uint32_t last = out->n;  /* start of the last item, for repetitions */
    uint64_t n_prev_rules = 1;
    char bdesc[16];
    while (p->status == SIFT_OK && p->i < p->n) {
        int c = peek(p);
        size_t at = p->i;
        if (c == '"') {
            p->i++;
            last = out->n;
            n_prev_rules = 1;
            while (peek(p) != '"') {
                if (p->i >= p->n) return fail_at(p, at, "unterminated string literal");
                uint32_t cp;
                if (!parse_char(p, &cp)) return false;
                uint32_t cls = single_char_class(p, cp);
                if (cls == UINT32_MAX) return false;
                if (!count_elems(p, 1, at) || !sift__gx_u32_push(out, GX_MAKE(GX_CLASS, cls))) return p->status == SIFT_OK ? oom(p) : false;
            }
            p->i++;
            skip_space(p, nested);
        } else if (c == '[') {
            p->i++;
            bool neg = false;
            if (peek(p) == '^') {
                neg = true;
                p->i++;
            }
            last = out->n;
            n_prev_rules = 1;
            p->tmp.n = 0;
            while (peek(p) != ']') {
                if (p->i >= p->n) return fail_at(p, at, "unterminated character class (expected ']')");
                uint32_t lo, hi;
                if (!parse_char(p, &lo)) return false;
                hi = lo;
                if (peek(p) == '-' && peek_at(p, 1) != ']') {
                    p->i++;
                    if (p->i >= p->n) return fail_at(p, at, "unterminated character class (expected ']')");
                    if (!parse_char(p, &hi)) return false;
                }
                if (!tmp_push(p, lo, hi)) return false;
            }
            p->i++;
            uint32_t cls = intern_class(p, neg);
            if (cls == UINT32_MAX) return false;
            if (!count_elems(p, 1, at) || !sift__gx_u32_push(out, GX_MAKE(GX_CLASS, cls))) return p->status == SIFT_OK ? oom(p) : false;
            skip_space(p, nested);
        } else if (c == '<' || c == '!') {
            uint32_t type = GX_TOKEN;
            if (c == '!') {
                p->i++;
                type = GX_TOKEN_NOT;
                if (peek(p) != '<') return fail_at(p, p->i, "expected '<' after '!', got %s", describe(p, p->i, bdesc, sizeof bdesc));
            }
            uint32_t tok = 0;
            if (!parse_token_ref(p, &tok)) return false;
            last = out->n;
            n_prev_rules = 1;
            p->has_tokens = true;
            if (tok > p->max_token) p->max_token = tok;
            if (!count_elems(p, 1, at) || !sift__gx_u32_push(out, GX_MAKE(type, tok))) return p->status == SIFT_OK ? oom(p) : false;
            skip_space(p, nested);
        } else if (is_name_char(c)) {
            size_t s0 = p->i;
            p->i = scan_name(p);
            if (peek(p) == '_')
                return fail_at(p, p->i, "rule names may contain only letters, digits and '-'");
            uint32_t ref = rule_id(p, p->s + s0, p->i - s0, s0);
            if (ref == UINT32_MAX) return false;
            skip_space(p, nested);
            last = out->n;
            n_prev_rules = 1;
            if (!count_elems(p, 1, at) || !sift__gx_u32_push(out, GX_MAKE(GX_REF, ref))) return p->status == SIFT_OK ? oom(p) : false;
        } else if (c == '(') {
            if (++p->depth > GBNF_MAX_DEPTH) return fail_at(p, at, "groups nested more than %d deep", GBNF_MAX_DEPTH);
            p->i++;
            skip_space(p, true);
            uint32_t before = p->n_counted;
            uint32_t sub = helper_rule(p, p->rules[rule].name, at);
            if (sub == UINT32_MAX) return false;
            if (!parse_alternates(p, sub, true, at)) return false;
            n_prev_rules = p->n_counted - before > 1 ? p->n_counted - before : 1;
            if (sub + 1 == p->n_rules) { /* the last rule made (nothing inside it was new): shared when seen before */
                const pr_rule *r = &p->rules[sub];
                const uint64_t h = helper_hash(r->body.v, r->body.n, sub);
                const uint32_t twin = helper_find(p, r->body.v, r->body.n, sub, h);
                if (twin != UINT32_MAX) {
                    sift__gx_free(p->rules[sub].name);
                    sift__gx_u32_free(&p->rules[sub].body);
                    p->n_rules--;
                    sub = twin;
                } else if (!helper_file(p, sub, h)) {
                    return false;
                }
            }
            last = out->n;
            if (!count_elems(p, 1, at) || !sift__gx_u32_push(out, GX_MAKE(GX_REF, sub))) return p->status == SIFT_OK ? oom(p) : false;
            if (peek(p) != ')') {
                unsigned ol, oc;
                pos_of(p, at, &ol, &oc);
                return fail_at(p, p->i, "expected ')' to close the '(' at %u:%u, got %s", ol, oc,
                               describe(p, p->i, bdesc, sizeof bdesc));
            }
            p->i++;
            p->depth--;
            skip_space(p, nested);
        } else if (c == '.') {
            p->i++;
            p->tmp.n = 0;
            if (!tmp_push(p, 0, 0x10FFFF)) return false;
            uint32_t cls = intern_class(p, false);
            if (cls == UINT32_MAX) return false;
            last = out->n;
            n_prev_rules = 1;
            if (!count_elems(p, 1, at) || !sift__gx_u32_push(out, GX_MAKE(GX_CLASS, cls))) return p->status == SIFT_OK ? oom(p) : false;
            skip_space(p, nested);
        } else if (c == '*' || c == '+' || c == '?') {
            p->i++;
            skip_space(p, nested);
            uint64_t mn = c == '+' ? 1 : 0, mx = c == '?' ? 1 : UINT64_MAX;
            if (!repeat_last(p, out, last, &n_prev_rules, mn, mx, p->rules[rule].name, at)) return false;
        } else if (c == '{') {
            p->i++;
            skip_space(p, nested);
            uint64_t mn, mx;
            if (!parse_uint(p, &mn)) return false;
            skip_space(p, nested);
            if (peek(p) == '}') {
                mx = mn;
                p->i++;
            } else if (peek(p) == ',') {
                p->i++;
                skip_space(p, nested);
                mx = UINT64_MAX;
                if (peek(p) >= '0' && peek(p) <= '9') {
                    if (!parse_uint(p, &mx)) return false;
                    skip_space(p, nested);
                }
                if (peek(p) != '}') return fail_at(p, p->i, "expected '}' to close the repetition, got %s", describe(p, p->i, bdesc, sizeof bdesc));
                p->i++;
            } else {
                return fail_at(p, p->i, "expected ',' or '}' in the repetition, got %s", describe(p, p->i, bdesc, sizeof bdesc));
            }
            skip_space(p, nested);
            if (mn > GBNF_MAX_REPETITION) return fail_at(p, at, "repetition minimum %llu exceeds %d", (unsigned long long)mn, GBNF_MAX_REPETITION);
            if (mx != UINT64_MAX && mx > GBNF_MAX_REPETITION) mx = UINT64_MAX; /* llama.cpp: treated as unbounded */
            if (mx != UINT64_MAX && mx < mn) return fail_at(p, at, "repetition {%llu,%llu}: the maximum is below the minimum", (unsigned long long)mn, (unsigned long long)mx);
            if (!repeat_last(p, out, last, &n_prev_rules, mn, mx, p->rules[rule].name, at)) return false;
        } else {
            break;
        }
    }
    return p->status == SIFT_OK;
}

static bool parse_alternates(gbnf_parser *p, uint32_t rule, bool nested, size_t open_at)
{
    sift__gx_u32vec body = {0};
    bool ok = parse_sequence(p, rule, &body, nested);
    while (ok && peek(p) == '|') {
        ok = (count_elems(p, 1, p->i) && sift__gx_u32_push(&body, GX_MAKE(GX_ALT, 0))) || (p->status == SIFT_OK && oom(p));
        p->i++;
        skip_space(p, true);
        if (ok) ok = parse_sequence(p, rule, &body, nested);
    }
    if (ok) ok = (count_elems(p, 1, open_at) && sift__gx_u32_push(&body, GX_MAKE(GX_END, 0))) || (p->status == SIFT_OK && oom(p));
    if (ok) define_rule(p, rule, &body, open_at);
    sift__gx_u32_free(&body);
    return ok;
}

static bool parse_rule(gbnf_parser *p)
{
    size_t s0 = p->i;
    char b[16];
    p->i = scan_name(p);
    if (p->i == s0) return fail_at(p, p->i, "expected a rule name, got %s", describe(p, p->i, b, sizeof b));
    if (peek(p) == '_') return fail_at(p, p->i, "rule names may contain only letters, digits and '-'");
    size_t name_end = p->i;
    skip_space(p, false);
    if (!(peek(p) == ':' && peek_at(p, 1) == ':' && peek_at(p, 2) == '='))
        return fail_at(p, p->i, "expected '::=' after the rule name '%.*s', got %s", (int)(name_end - s0 > 60 ? 60 : name_end - s0),
                       p->s + s0, describe(p, p->i, b, sizeof b));
    uint32_t id = rule_id(p, p->s + s0, name_end - s0, s0);
    if (id == UINT32_MAX) return false;
    p->i += 3;
    skip_space(p, true);
    if (!parse_alternates(p, id, false, s0)) return false;
    int c = peek(p);
    if (c == '\r') {
        p->i += peek_at(p, 1) == '\n' ? 2 : 1;
    } else if (c == '\n') {
        p->i++;
    } else if (c >= 0) {
        if (c == ')') return fail_at(p, p->i, "unmatched ')'");
        return fail_at(p, p->i, "expected an item, '|' or the end of the line, got %s", describe(p, p->i, b, sizeof b));
    }
    skip_space(p, true);
    return true;
}

/* ---- compile: flatten, symbols, checks ------------------------------------------------- */

static void grammar_free_parts(sift_grammar *g)
{
    if (!g) return;
    if (g->rule_name)
        for (uint32_t r = 0; r < g->n_rules; r++) sift__gx_free(g->rule_name[r]);
    sift__gx_free(g->rule_name);
    sift__gx_free(g->elems);
    sift__gx_free(g->rule_start);
    sift__gx_free(g->rule_of);
    sift__gx_free(g->class_off);
    sift__gx_free(g->ranges);
    sift__gx_free(g->sym_lo);
    sift__gx_free(g->class_syms);
    sift__gx_free(g->rule_nullable);
    sift__gx_free(g->rule_first);
    sift__gx_free(g->rule_follow);
}

void sift_grammar_free(sift_grammar *g)
{
    grammar_free_parts(g);
    sift__gx_free(g);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

void sift__gx_syms_in_range(const sift_grammar *g, uint32_t lo, uint32_t hi, uint32_t *s_lo, uint32_t *s_hi)
{
    *s_lo = sift__gx_sym_of(g, lo);
    *s_hi = sift__gx_sym_of(g, hi > 0x10FFFF ? 0x10FFFF : hi);
}

static int build_symbols(sift_grammar *g, sift_error *err)
{
    uint32_t nr = g->class_off[g->n_classes] / 2;
    uint32_t *b = sift__gx_malloc(((size_t)2 * nr + 2) * sizeof *b);
    if (!b) return sift__error_set(err, SIFT_E_NOMEM, "out of memory");
    uint32_t nb = 0;
    b[nb++] = 0;
    for (uint32_t k = 0; k < nr; k++) {
        b[nb++] = g->ranges[2 * k];
        if (g->ranges[2 * k + 1] + 1 <= 0x10FFFF) b[nb++] = g->ranges[2 * k + 1] + 1;
    }
    qsort(b, nb, sizeof *b, cmp_u32);
    uint32_t m = 0;
    for (uint32_t k = 0; k < nb; k++)
        if (m == 0 || b[k] != b[m - 1]) b[m++] = b[k];
    g->n_syms = m;
    g->sym_words = sift__gx_words(m);
    b[m] = 0x110000;
    g->sym_lo = b;
    for (uint32_t c = 0; c < 128; c++) {
        uint32_t lo = 0, hi = m;
        while (hi - lo > 1) {
            uint32_t mid = (lo + hi) / 2;
            if (b[mid] <= c) lo = mid;
            else hi = mid;
        }
        g->ascii_sym[c] = lo;
    }
    if ((uint64_t)g->n_classes * g->sym_words * 64 > GBNF_MAX_SYMBIT ||
        (uint64_t)g->n_rules * g->sym_words * 64 * 2 > GBNF_MAX_SYMBIT)
        return sift__error_set(err, SIFT_E_PARSE, "grammar too complex: %u character classes and %u rules over %u distinct character ranges",
                              g->n_classes, g->n_rules, m);
    g->class_syms = sift__gx_calloc((size_t)g->n_classes * g->sym_words, sizeof(uint64_t));
    if (!g->class_syms) return sift__error_set(err, SIFT_E_NOMEM, "out of memory");
    for (uint32_t c = 0; c < g->n_classes; c++) {
        uint64_t *bits = g->class_syms + (size_t)c * g->sym_words;
        for (uint32_t k = g->class_off[c]; k < g->class_off[c + 1]; k += 2) {
            uint32_t s0 = sift__gx_sym_of(g, g->ranges[k]), s1 = sift__gx_sym_of(g, g->ranges[k + 1]);
            for (uint32_t s = s0; s <= s1; s++) sift__gx_bit_set(bits, s);
        }
    }
    return SIFT_OK;
}

/* nullable rules: a worklist over "number of not-yet-nullable references" per alternative */
/* Left corners: rule r -> rule s when s can be the first thing r matches (every element
 * before it in the alternative is a nullable rule). A cycle is left recursion, which would
 * make stack expansion loop forever. Iterative DFS over these edges (white/grey/black); it
 * also yields a post-order (each rule after its left corners) used for FIRST. */
static int check_left_recursion(sift_grammar *g, uint32_t *order, const gbnf_parser *p, sift_error *err)
{
    sift__gx_u32vec head = {0}, adj = {0};
    uint8_t *color = sift__gx_calloc(g->n_rules, 1);
    uint32_t *stk = sift__gx_malloc((size_t)g->n_rules * sizeof *stk), *it = sift__gx_malloc((size_t)g->n_rules * sizeof *it);
    int rc = SIFT_OK;
    if (!color || !stk || !it) goto nomem;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        if (!sift__gx_u32_push(&head, adj.n)) goto nomem;
        bool at_start = true;
        for (uint32_t pos = g->rule_start[r]; GX_TYPE(g->elems[pos]) != GX_END; pos++) {
            uint32_t e = g->elems[pos];
            if (GX_TYPE(e) == GX_ALT) {
                at_start = true;
            } else if (at_start) {
                if (GX_TYPE(e) == GX_REF) {
                    if (!sift__gx_u32_push(&adj, GX_VAL(e))) goto nomem;
                    at_start = g->rule_nullable[GX_VAL(e)];
                } else {
                    at_start = false;
                }
            }
        }
    }
    if (!sift__gx_u32_push(&head, adj.n)) goto nomem;
    uint32_t n_order = 0;
    for (uint32_t r0 = 0; r0 < g->n_rules && rc == SIFT_OK; r0++) {
        if (color[r0]) continue;
        uint32_t sp = 0;
        stk[sp] = r0;
        it[sp++] = head.v[r0];
        color[r0] = 1;
        while (sp) {
            uint32_t r = stk[sp - 1];
            if (it[sp - 1] == head.v[r + 1]) {
                color[r] = 2;
                order[n_order++] = r;
                sp--;
                continue;
            }
            uint32_t s = adj.v[it[sp - 1]++];
            if (color[s] == 1) {
                char base[128];
                snprintf(base, sizeof base, "%s", g->rule_name[s]);
                char *u = strchr(base, '_');
                if (u) *u = 0;
                unsigned line, col;
                pos_of(p, p->rules[s].def_at, &line, &col);
                rc = sift__error_set(err, SIFT_E_PARSE,
                                    "%u:%u: left recursion: rule '%s'%s can begin with itself (rewrite it with repetition, e.g. x ::= y (op y)*)",
                                    line, col, base, u ? " (through a group or repetition)" : "");
                break;
            }
            if (color[s] == 0) {
                color[s] = 1;
                stk[sp] = s;
                it[sp++] = head.v[s];
            }
        }
    }
    goto done;
nomem:
    rc = sift__error_set(err, SIFT_E_NOMEM, "out of memory");
done:
    sift__gx_u32_free(&head);
    sift__gx_u32_free(&adj);
    sift__gx_free(color);
    sift__gx_free(stk);
    sift__gx_free(it);
    return rc;
}

static int compile(gbnf_parser *p, sift_grammar *g, const char *root, sift_error *err)
{
    /* undefined rules */
    for (uint32_t r = 0; r < p->n_rules; r++)
        if (!p->rules[r].defined) {
            fail_at(p, p->rules[r].first_use, "undefined rule '%s'", p->rules[r].name);
            return p->status;
        }
    if (p->n_rules == 0) return sift__error_set(err, SIFT_E_PARSE, "1:1: the grammar has no rules");
    uint32_t root_id = UINT32_MAX; /* lengths first: strcmp fetched every name, a cache miss each */
    for (size_t r = 0, rl = strlen(root); r < p->n_rules; r++)
        if (p->rules[r].len == rl && !memcmp(p->rules[r].name, root, rl)) root_id = (uint32_t)r;
    if (root_id == UINT32_MAX) return sift__error_set(err, SIFT_E_PARSE, "the grammar has no rule named '%s' (the start rule)", root);

    g->n_rules = p->n_rules;
    g->root = root_id;
    g->rule_start = sift__gx_malloc((size_t)p->n_rules * sizeof *g->rule_start);
    g->rule_name = sift__gx_calloc(p->n_rules, sizeof *g->rule_name);
    uint64_t total = 0;
    for (uint32_t r = 0; r < p->n_rules; r++) total += p->rules[r].body.n;
    g->elems = sift__gx_malloc((size_t)total * sizeof *g->elems);
    g->rule_of = sift__gx_malloc((size_t)total * sizeof *g->rule_of);
    if (!g->rule_start || !g->rule_name || !g->elems || !g->rule_of) return sift__error_set(err, SIFT_E_NOMEM, "out of memory");
    uint32_t at = 0;
    for (uint32_t r = 0; r < p->n_rules; r++) {
        g->rule_start[r] = at;
        memcpy(g->elems + at, p->rules[r].body.v, p->rules[r].body.n * sizeof *g->elems);
        for (uint32_t k = 0; k < p->rules[r].body.n; k++) g->rule_of[at + k] = r;
        at += p->rules[r].body.n;
        g->rule_name[r] = p->rules[r].name;
        p->rules[r].name = NULL;
    }
    g->n_elems = at;
    g->n_classes = p->cls_off.n ? p->cls_off.n - 1 : 0;
    g->class_off = p->cls_off.n ? p->cls_off.v : sift__gx_calloc(1, sizeof(uint32_t));
    g->ranges = p->cls_rng.v;
    p->cls_off.v = p->cls_rng.v = NULL;
    p->cls_off.n = p->cls_rng.n = 0;
    if (!g->class_off) return sift__error_set(err, SIFT_E_NOMEM, "out of memory");
    g->has_tokens = p->has_tokens;
    g->max_token = p->max_token;

    int rc = build_symbols(g, err);
    if (rc == SIFT_OK) rc = sift__gx_compute_nullable(g, err);
    uint32_t *order = NULL;
    if (rc == SIFT_OK) {
        order = sift__gx_malloc((size_t)g->n_rules * sizeof *order);
        if (!order) rc = sift__error_set(err, SIFT_E_NOMEM, "out of memory");
    }
    if (rc == SIFT_OK) rc = check_left_recursion(g, order, p, err);
    if (rc == SIFT_OK) rc = sift__gx_compute_first_follow(g, order, err);
    sift__gx_free(order);
    return rc;
}

sift_grammar *sift_grammar_parse(const char *text, size_t len, const char *root, const sift_vocab_view *vocab,
                                 sift_error *err)
{
    if (!text && len) {
        sift__error_set(err, SIFT_E_INVAL, "grammar text is NULL");
        return NULL;
    }
    gbnf_parser p = {.s = text, .n = len, .vocab = vocab, .err = err, .status = SIFT_OK};
    /* never-NULL pools: empty classes still have a valid base pointer */
    if (!GX_GROW(p.cls_rng.v, p.cls_rng.cap, 16) || !GX_GROW(p.tmp.v, p.tmp.cap, 16)) oom(&p);
    skip_space(&p, true);
    while (p.status == SIFT_OK && p.i < p.n) parse_rule(&p);
    sift_grammar *g = NULL;
    int rc = p.status;
    if (rc == SIFT_OK) {
        g = sift__gx_calloc(1, sizeof *g);
        if (!g) rc = sift__error_set(err, SIFT_E_NOMEM, "out of memory");
        else rc = compile(&p, g, root ? root : "root", err);
    }
    for (uint32_t r = 0; r < p.n_rules; r++) {
        sift__gx_free(p.rules[r].name);
        sift__gx_u32_free(&p.rules[r].body);
    }
    sift__gx_free(p.rules);
    sift__gx_free(p.ht);
    sift__gx_free(p.hh);
    sift__gx_u32_free(&p.cls_off);
    sift__gx_u32_free(&p.cls_rng);
    sift__gx_free(p.cls_ht);
    sift__gx_free(p.tmp.v);
    if (rc != SIFT_OK) {
        sift_grammar_free(g);
        return NULL;
    }
    return g;
}

/* ---- dump -------------------------------------------------------------------------------- */

static void dump_char(FILE *f, uint32_t c, bool in_class)
{
    if (c == '"' && !in_class) fputs("\\\"", f);
    else if (c == '\\') fputs("\\\\", f);
    else if (in_class && (c == ']' || c == '-' || c == '^' || c == '[')) fprintf(f, "\\%c", (char)c);
    else if (c >= 0x20 && c < 0x7F) fputc((int)c, f);
    else if (c < 0x100) fprintf(f, "\\x%02X", c);
    else if (c < 0x10000) fprintf(f, "\\u%04X", c);
    else fprintf(f, "\\U%08X", c);
}

void sift__gx_grammar_dump(const sift_grammar *g, FILE *f)
{
    for (uint32_t r = 0; r < g->n_rules; r++) {
        fprintf(f, "%s ::=", g->rule_name[r]);
        for (uint32_t pos = g->rule_start[r];; pos++) {
            uint32_t e = g->elems[pos];
            uint32_t v = GX_VAL(e);
            if (GX_TYPE(e) == GX_END) break;
            switch (GX_TYPE(e)) {
            case GX_ALT: fputs(" |", f); break;
            case GX_REF: fprintf(f, " %s", g->rule_name[v]); break;
            case GX_TOKEN: fprintf(f, " <[%u]>", v); break;
            case GX_TOKEN_NOT: fprintf(f, " !<[%u]>", v); break;
            case GX_CLASS: {
                uint32_t o = g->class_off[v], n = (g->class_off[v + 1] - o) / 2;
                if (n == 1 && g->ranges[o] == g->ranges[o + 1]) {
                    fputs(" \"", f);
                    dump_char(f, g->ranges[o], false);
                    fputc('"', f);
                } else {
                    fputs(" [", f);
                    for (uint32_t k = 0; k < n; k++) {
                        dump_char(f, g->ranges[o + 2 * k], true);
                        if (g->ranges[o + 2 * k + 1] != g->ranges[o + 2 * k]) {
                            fputc('-', f);
                            dump_char(f, g->ranges[o + 2 * k + 1], true);
                        }
                    }
                    fputc(']', f);
                }
                break;
            }
            }
        }
        fputc('\n', f);
    }
}
