/*
 * regex_length.c - a string schema with both `pattern` and minLength / maxLength, exactly.
 *
 * A GBNF expression cannot intersect two languages, so the pattern is turned into an
 * automaton first and the length is counted in its states:
 *
 * 1. The pattern (the ECMA-262 subset regex_to_gbnf.c reads, with the same lexer: regex_int.h)
 *    becomes a Glushkov automaton: one state per character class occurring in the expression
 *    ("position"), an edge p -> q when q's character may follow p's, no empty moves. A
 *    quantifier X{m,n} is X's text read again for each copy (X X X? X? ...), so positions
 *    multiply with the counts; GL_MAX_POS bounds them. An open end (no ^ or no $) is one
 *    more position, any character, looping on itself.
 * 2. The product with a character counter: state (p, k) is "k characters read, the last one
 *    at position p". k runs up to maxLength, or, without one, up to minLength where it stops
 *    counting ("minLength or more"). Only the states reachable from the start that can still
 *    reach an accepting state become rules (the others would be dead ends a sampler walks
 *    into), at most GL_MAX_RULES of them.
 * 3. Each state is a GBNF rule: one alternative per successor q, q's character class (in its
 *    JSON-string form, sift__put_json_chars) followed by the rule of (q, k + 1), and "" when
 *    the state may end. Rules are created first with placeholder bodies, then filled, since
 *    states at the counter's ceiling refer to each other.
 *
 * JSON Schema counts a string's length in code points of the decoded string, and each
 * position consumes exactly one (an escape such as \n in the JSON text is one character), so
 * the counter is exact. A pattern or length this cannot take (too many positions or states,
 * an anchor inside a group, a construct the lexer refuses) is reported as not handled, and
 * the caller refuses the schema as before.
 */
#include <stdio.h>
#include <string.h>

#include "schema/json_schema_int.h"
#include "schema/regex_int.h"

#define GL_MAX_POS 256      /* positions of the automaton (4 x 64-bit sets) */
#define GL_MAX_STATES 1048576L /* (positions + 1) x (counter + 1) examined */
#define GL_MAX_RULES 4096   /* live states written as rules */

typedef struct {
    uint64_t w[GL_MAX_POS / 64];
} pset;

typedef struct {
    pset first, last;
    bool nullable;
} frag;

typedef struct {
    rx r;
    int npos;
    bool full;       /* GL_MAX_POS reached */
    uint64_t any[GL_MAX_POS / 64]; /* positions that are the builtin `char` (an open end) */
    char *mark;      /* [GL_MAX_POS]: '^' / '$' for an anchor inside the pattern (it reads no
                      * character: closure() steps over it), 0 for a character position */
    cpset *cls;      /* [GL_MAX_POS] */
    pset *follow;    /* [GL_MAX_POS] */
} gl;

static void ps_set(pset *s, int i) { s->w[i >> 6] |= 1ull << (i & 63); }
static bool ps_has(const pset *s, int i) { return (s->w[i >> 6] >> (i & 63)) & 1; }
static void ps_or(pset *a, const pset *b)
{
    for (int k = 0; k < GL_MAX_POS / 64; k++) a->w[k] |= b->w[k];
}

static bool gl_new_pos(gl *g, const cpset *cs, frag *f)
{
    if (g->npos >= GL_MAX_POS) {
        g->full = true;
        return sift__rx_fail(&g->r, "too many positions for a length-counting automaton");
    }
    int p = g->npos++;
    g->cls[p] = *cs;
    *f = (frag){0};
    ps_set(&f->first, p);
    ps_set(&f->last, p);
    return true;
}

/* every last position of a may be followed by every first one of b */
static void gl_link(gl *g, const pset *last, const pset *first)
{
    for (int p = 0; p < g->npos; p++)
        if (ps_has(last, p)) ps_or(&g->follow[p], first);
}

static frag gl_cat(gl *g, frag a, frag b)
{
    gl_link(g, &a.last, &b.first);
    frag f = {a.first, b.last, a.nullable && b.nullable};
    if (a.nullable) ps_or(&f.first, &b.first);
    if (b.nullable) ps_or(&f.last, &a.last);
    return f;
}

static frag gl_or(frag a, frag b)
{
    ps_or(&a.first, &b.first);
    ps_or(&a.last, &b.last);
    a.nullable = a.nullable || b.nullable;
    return a;
}

static bool gl_alt(gl *g, frag *f, bool top);

/* one atom without its quantifier */
static bool gl_base(gl *g, frag *f)
{
    rx *r = &g->r;
    char ch = r->s[r->i];
    cpset cs = {0};
    if (ch == '(') {
        r->i++;
        if (r->i < r->n && r->s[r->i] == '?') {
            if (r->i + 1 < r->n && r->s[r->i + 1] == ':') r->i += 2;
            else return sift__rx_fail(r, "lookaround and named groups are not supported");
        }
        if (++r->depth > 64) return sift__rx_fail(r, "groups nested too deep");
        if (!gl_alt(g, f, false)) return false;
        r->depth--;
        if (r->i >= r->n || r->s[r->i] != ')') return sift__rx_fail(r, "missing ')'");
        r->i++;
        return true;
    }
    if (ch == '[') {
        r->i++;
        if (!sift__rx_class(r, &cs)) return false;
    } else if (ch == '.') {
        r->i++;
        cs.neg = true;
        sift__cps_add(&cs, '\n', '\n');
        sift__cps_add(&cs, '\r', '\r');
        sift__cps_add(&cs, 0x2028, 0x2029);
    } else if (ch == '\\') {
        r->i++;
        uint32_t cp;
        int k = sift__rx_escape(r, &cp, &cs);
        if (!k) return false;
        if (k == 1) sift__cps_add(&cs, cp, cp);
    } else if (ch == '*' || ch == '+' || ch == '?' || ch == '^' || ch == '$') {
        return sift__rx_fail(r, "a quantifier or anchor where an atom belongs");
    } else {
        uint32_t cp;
        if (!sift__rx_char(r, &cp)) return false;
        sift__cps_add(&cs, cp, cp);
    }
    return gl_new_pos(g, &cs, f);
}

/* a quantifier at r->i: its bounds (mx < 0 unbounded), false when none is there */
static bool gl_quant(rx *r, long *mn, long *mx)
{
    if (r->i >= r->n) return false;
    char q = r->s[r->i];
    size_t j = r->i + 1;
    if (q == '*') *mn = 0, *mx = -1;
    else if (q == '+') *mn = 1, *mx = -1;
    else if (q == '?') *mn = 0, *mx = 1;
    else if (q == '{') {
        if (j >= r->n || r->s[j] < '0' || r->s[j] > '9') return false; /* a literal '{' */
        *mn = 0;
        while (j < r->n && r->s[j] >= '0' && r->s[j] <= '9' && *mn < 100000) *mn = *mn * 10 + (r->s[j++] - '0');
        *mx = *mn;
        if (j < r->n && r->s[j] == ',') {
            j++;
            *mx = -1;
            if (j < r->n && r->s[j] >= '0' && r->s[j] <= '9')
                for (*mx = 0; j < r->n && r->s[j] >= '0' && r->s[j] <= '9' && *mx < 100000;) *mx = *mx * 10 + (r->s[j++] - '0');
        }
        if (j >= r->n || r->s[j] != '}') return false;
        j++;
    } else return false;
    if (j < r->n && r->s[j] == '?') j++; /* lazy: the same set of strings */
    r->i = j;
    return true;
}

/* an atom and its quantifier: X{m,n} is m copies of X, then n - m optional ones (X* and the
 * copy after the m-th loop back) */
static bool gl_atom(gl *g, frag *f)
{
    rx *r = &g->r;
    size_t start = r->i;
    if (!gl_base(g, f)) return false;
    long mn, mx;
    if (!gl_quant(r, &mn, &mx)) return true;
    size_t after = r->i;
    long dummy_mn, dummy_mx;
    if (gl_quant(r, &dummy_mn, &dummy_mx)) return sift__rx_fail(r, "two quantifiers on one atom");
    if (mx >= 0 && mx < mn) return sift__rx_fail(r, "repetition {m,n} with n < m");
    long copies = mx < 0 ? (mn > 1 ? mn : 1) : mx;
    if (copies > GL_MAX_POS) {
        g->full = true;
        return sift__rx_fail(r, "too many positions for a length-counting automaton");
    }
    frag all = {.nullable = true}, one = *f;
    for (long k = 0; k < copies; k++) {
        if (k) {
            r->i = start;
            if (!gl_base(g, &one)) return false;
        }
        bool last_loop = mx < 0 && k == copies - 1;
        if (last_loop) gl_link(g, &one.last, &one.first);
        if (k >= mn) one.nullable = true;
        all = k ? gl_cat(g, all, one) : one;
    }
    if (copies == 0) all = (frag){.nullable = true};
    r->i = after;
    *f = all;
    return true;
}

/* any characters (an open end of the pattern): the builtin `char`, looping; a position of its
 * own at each end (one shared by both ends would let "any characters" alone end the match) */
static bool gl_any(gl *g, frag *f)
{
    cpset all = {.neg = true};
    if (!gl_new_pos(g, &all, f)) return false;
    int p = g->npos - 1;
    g->any[p >> 6] |= 1ull << (p & 63);
    ps_set(&g->follow[p], p);
    f->nullable = true;
    return true;
}

static bool gl_seq(gl *g, frag *f, bool top)
{
    rx *r = &g->r;
    *f = (frag){.nullable = true};
    bool anch_start = false, anch_end = false;
    if (top && r->i < r->n && r->s[r->i] == '^') r->i++, anch_start = true;
    if (top && !anch_start && !gl_any(g, f)) return false;
    while (r->i < r->n && r->s[r->i] != '|' && r->s[r->i] != ')') {
        if (top && r->s[r->i] == '$' && (r->i + 1 == r->n || r->s[r->i + 1] == '|')) {
            r->i++, anch_end = true;
            break;
        }
        frag a;
        if (r->s[r->i] == '^' || r->s[r->i] == '$') { /* an anchor inside: a marker position */
            cpset none = {0};
            char kind = r->s[r->i++];
            if (!gl_new_pos(g, &none, &a)) return false;
            g->mark[g->npos - 1] = kind;
            long qm, qx;
            if (gl_quant(r, &qm, &qx)) return sift__rx_fail(r, "a quantifier on an anchor");
        } else if (!gl_atom(g, &a)) return false;
        *f = gl_cat(g, *f, a);
    }
    if (top && !anch_end) {
        frag a;
        if (!gl_any(g, &a)) return false;
        *f = gl_cat(g, *f, a);
    }
    return true;
}

static bool gl_alt(gl *g, frag *f, bool top)
{
    if (!gl_seq(g, f, top)) return false;
    while (g->r.i < g->r.n && g->r.s[g->r.i] == '|') {
        g->r.i++;
        frag b;
        if (!gl_seq(g, &b, top)) return false;
        *f = gl_or(*f, b);
    }
    return true;
}

/* position q's character class as a rule of its own (its name into *out), the builtin `char`
 * for an open end */
static bool class_rule(conv *c, const gl *g, int q, const char *ch, const char *rule_name, char **out)
{
    const char *cr = ch;
    if (!((g->any[q >> 6] >> (q & 63)) & 1)) {
        sift__gbnf_sbuf b = {0};
        sift__put_json_chars(&b, &g->cls[q]);
        if (b.oom) return sift__gbnf_sb_free(&b), sift__js_coom(c), false;
        int same = 0; /* the first position with this class names the rule: one rule per class */
        const cpset *a = &g->cls[q];
        for (; same < q; same++) {
            const cpset *o = &g->cls[same];
            if (o->n == a->n && o->neg == a->neg && !memcmp(o->r, a->r, 2 * (size_t)a->n * sizeof *a->r)) break;
        }
        char nm[300];
        snprintf(nm, sizeof nm, "%s-c%d", rule_name, same);
        cr = sift__js_add_rule(c, nm, sift__gbnf_sb_take(&b));
    }
    if (cr && !(*out = sift__js_dupstr(cr))) sift__js_coom(c);
    return cr && *out;
}

/* The character positions that may follow state p (npos: the start state) and whether the
 * string may end at p, stepping over anchor markers: a '^' only from the start, and after a
 * '$' no character (the string must end there, which it may when the marker is last). */
static void closure(const gl *g, const frag *whole, int p, pset *next, bool *may_end)
{
    const pset *f0 = p == g->npos ? &whole->first : &g->follow[p];
    pset seen[2] = {{{0}}, {{0}}}; /* markers visited, before / after a '$' */
    int stack[2 * GL_MAX_POS], ended[2 * GL_MAX_POS], n = 0;
    *next = (pset){{0}};
    *may_end = p == g->npos ? whole->nullable : ps_has(&whole->last, p);
    for (int q = 0; q < g->npos; q++) {
        if (!ps_has(f0, q)) continue;
        if (!g->mark[q]) ps_set(next, q);
        else if (!ps_has(&seen[0], q)) ps_set(&seen[0], q), stack[n] = q, ended[n++] = 0;
    }
    while (n) {
        int m = stack[--n], e = ended[n];
        if (g->mark[m] == '^' && p != g->npos) continue; /* a character was read before it */
        if (g->mark[m] == '$') e = 1;
        if (ps_has(&whole->last, m)) *may_end = true;
        for (int q = 0; q < g->npos; q++) {
            if (!ps_has(&g->follow[m], q)) continue;
            if (!g->mark[q]) {
                if (!e) ps_set(next, q);
            } else if (!ps_has(&seen[e], q)) {
                ps_set(&seen[e], q);
                stack[n] = q, ended[n++] = e;
            }
        }
    }
}

const char *sift__js_pattern_with_length(conv *c, const char *pat, size_t n, long mn, long mx, const char *rule_name, bool quoted, bool *handled)
{
    *handled = false;
    sift_error e = {0};
    gl g = {.r = {.s = pat, .n = n, .err = &e, .status = SIFT_OK}};
    g.cls = sift__gx_calloc(GL_MAX_POS, sizeof *g.cls);
    g.follow = sift__gx_calloc(GL_MAX_POS, sizeof *g.follow);
    g.mark = sift__gx_calloc(GL_MAX_POS, 1);
    pset *esucc = NULL; /* closure() of each state */
    bool *eend = NULL;
    const char *out = NULL;
    uint8_t *st = NULL; /* per state (p, k): 1 reached, 2 live too */
    const char **names = NULL;
    char **cls_txt = NULL;
    long *work = NULL;
    if (!g.cls || !g.follow || !g.mark) goto oom;
    frag whole;
    if (!gl_alt(&g, &whole, true) || g.r.i < g.r.n) goto done;
    esucc = sift__gx_calloc((size_t)g.npos + 1, sizeof *esucc);
    eend = sift__gx_calloc((size_t)g.npos + 1, sizeof *eend);
    if (!esucc || !eend) goto oom;
    for (int p = 0; p <= g.npos; p++)
        if (p == g.npos || !g.mark[p]) closure(&g, &whole, p, &esucc[p], &eend[p]);
    long top = mx >= 0 ? mx : mn; /* the counter's ceiling */
    long np = g.npos + 1, ns = np * (top + 1);
    if (top > GL_MAX_STATES || ns > GL_MAX_STATES) goto done;
    st = sift__gx_calloc((size_t)ns, 1);
    work = sift__gx_malloc((size_t)ns * sizeof *work);
    if (!st || !work) goto oom;
#define NEXT_K(k) (mx >= 0 ? (k) + 1 : ((k) + 1 > top ? top : (k) + 1))
#define ACCEPTS(p, k) ((k) >= mn && eend[p])
    /* reachable from (start, 0) */
    long nw = 0;
    st[g.npos] = 1;
    work[nw++] = g.npos;
    long n_reached = 1;
    while (nw) {
        if (n_reached > 4 * GL_MAX_RULES) goto done; /* far more states than rules allowed */
        long s = work[--nw], p = s % np, k = s / np, k2 = NEXT_K(k);
        if (k2 > top) continue;
        const pset *nx = &esucc[p];
        for (int q = 0; q < g.npos; q++)
            if (ps_has(nx, q) && !st[k2 * np + q]) st[k2 * np + q] = 1, work[nw++] = k2 * np + q, n_reached++;
    }
    /* live: may still end; sweeps from the highest count down until nothing changes */
    for (bool changed = true; changed;) {
        changed = false;
        for (long s = ns - 1; s >= 0; s--) {
            if (st[s] != 1) continue;
            long p = s % np, k = s / np, k2 = NEXT_K(k);
            bool live = ACCEPTS(p, k);
            const pset *nx = &esucc[p];
            for (int q = 0; q < g.npos && !live && k2 <= top; q++) live = ps_has(nx, q) && st[k2 * np + q] == 2;
            if (live) st[s] = 2, changed = true;
        }
    }
    *handled = true;
    if (st[g.npos] != 2) {
        c->unsat = c->status == SIFT_OK;
        sift__js_cfail(c, SIFT_E_INVAL, "no string matches both 'pattern' and minLength / maxLength");
        goto done;
    }
    long n_live = 0;
    for (long s = 0; s < ns; s++) n_live += st[s] == 2;
    if (n_live > GL_MAX_RULES) {
        *handled = false;
        goto done;
    }
    names = sift__gx_calloc((size_t)ns, sizeof *names);
    cls_txt = sift__gx_calloc((size_t)g.npos, sizeof *cls_txt);
    if (!names || !cls_txt) goto oom;
    bool open_end = false;
    for (int k = 0; k < GL_MAX_POS / 64; k++) open_end |= g.any[k] != 0;
    const char *ch = open_end ? sift__js_use_builtin(c, "char") : "";
    if (!ch || (quoted && !sift__js_use_builtin(c, "space"))) goto done;
    /* the rules, with placeholder bodies that name them (no two alike: add_rule would share) */
    for (long s = 0; s < ns; s++) {
        if (st[s] != 2) continue;
        char nm[300], ph[340];
        snprintf(nm, sizeof nm, "%s-n%ld-%ld", rule_name, s % np, s / np);
        snprintf(ph, sizeof ph, "\"placeholder %s\"", nm);
        names[s] = sift__js_add_rule(c, nm, sift__js_dupstr(ph));
        if (!names[s]) goto done;
    }
    for (long s = 0; s < ns; s++) {
        if (st[s] != 2) continue;
        long p = s % np, k = s / np, k2 = NEXT_K(k);
        sift__gbnf_sbuf b = {0};
        const pset *nx = &esucc[p];
        int alts = 0;
        for (int q = 0; q < g.npos && k2 <= top; q++) {
            if (!ps_has(nx, q) || st[k2 * np + q] != 2) continue;
            if (!cls_txt[q] && !class_rule(c, &g, q, ch, rule_name, &cls_txt[q])) {
                sift__gbnf_sb_free(&b);
                goto done;
            }
            sift__gbnf_sb_printf(&b, "%s%s %s", alts++ ? " | " : "", cls_txt[q], names[k2 * np + q]);
        }
        if (ACCEPTS(p, k)) sift__gbnf_sb_printf(&b, "%s\"\"", alts ? " | " : "");
        if (b.oom) goto oom;
        jrule *r = sift__js_rule_written(c, names[s]);
        sift__gx_free(r->body);
        r->body = sift__gbnf_sb_take(&b);
    }
#undef NEXT_K
#undef ACCEPTS
    {
        sift__gbnf_sbuf b = {0};
        if (quoted) sift__gbnf_sb_printf(&b, "\"\\\"\" %s \"\\\"\" space", names[g.npos]);
        else sift__gbnf_sb_puts(&b, names[g.npos]);
        out = b.oom ? (sift__gbnf_sb_free(&b), sift__js_coom(c)) : sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
    }
    goto done;
oom:
    *handled = true;
    sift__js_coom(c);
done:
    if (e.status == SIFT_E_NOMEM) *handled = true, sift__js_coom(c);
    for (int q = 0; cls_txt && q < g.npos; q++) sift__gx_free(cls_txt[q]);
    sift__gx_free(cls_txt);
    sift__gx_free(names);
    sift__gx_free(work);
    sift__gx_free(st);
    sift__gx_free(g.cls);
    sift__gx_free(g.follow);
    sift__gx_free(g.mark);
    sift__gx_free(esucc);
    sift__gx_free(eend);
    return out;
}
