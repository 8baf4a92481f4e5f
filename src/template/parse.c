/*
 * parse.c - Jinja template text -> syntax tree: the lexer (with jinja2's whitespace rules)
 * and a recursive-descent parser with jinja2's operator precedence.
 *
 * Whitespace is settled here, in the lexer, as jinja2 does it, configured the way
 * transformers configures it: newlines normalised to \n and one trailing newline dropped;
 * trim_blocks (the first \n after a block or comment tag goes); lstrip_blocks (blanks from the
 * start of a line up to a block or comment tag go, unless `{%+`); `{%-`/`-%}` strip all
 * whitespace on that side. The renderer then only concatenates.
 *
 * Unknown filters and tests are errors at parse time, as jinja2's compiler reports them
 * (a template using `fromjson` fails to load, whatever the context). Nesting is bounded, so a
 * hostile template cannot exhaust the C stack.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/tpl.h"

typedef enum { K_TEXT, K_VAR_BEGIN, K_VAR_END, K_BLOCK_BEGIN, K_BLOCK_END, K_NAME, K_STRING, K_INT, K_FLOAT, K_OP, K_EOF } tkind;

typedef struct tok {
    tkind k;
    int line;
    const char *s; /* text, name, op, or string value (NUL-terminated, arena) */
    size_t n;
    int64_t i;
    double f;
} tok;

typedef struct parser {
    tpl_mem m;
    tok *toks;
    size_t ntok, cap, pos;
    int depth;
} parser;

#define MAX_DEPTH 200

static _Noreturn void perr(parser *p, int line, const char *fmt, const char *arg)
{
    p->m.fail->line = line;
    sift__tpl_fail(p->m.fail, SIFT_E_PARSE, fmt, arg ? arg : "");
}

static char *pdup(parser *p, const char *s, size_t n)
{
    char *d = sift__tpl_alloc(p->m.arena, p->m.fail, n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

static tok *emit(parser *p, tkind k, int line)
{
    if (p->ntok == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        tok *nt = sift__tpl_alloc(p->m.arena, p->m.fail, cap * sizeof *nt);
        if (p->ntok) memcpy(nt, p->toks, p->ntok * sizeof *nt);
        p->toks = nt;
        p->cap = cap;
    }
    tok *t = &p->toks[p->ntok++];
    memset(t, 0, sizeof *t);
    t->k = k;
    t->line = line;
    return t;
}

/* ---- lexer ------------------------------------------------------------------------------- */
static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1f); }
static bool is_ident0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Newlines to \n and one trailing newline dropped (jinja2's keep_trailing_newline=False). */
static char *normalise(parser *p, const char *src, size_t len, size_t *out_n)
{
    char *o = sift__tpl_alloc(p->m.arena, p->m.fail, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            o[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            o[n++] = src[i];
        }
    }
    if (n && o[n - 1] == '\n') n--;
    o[n] = 0;
    *out_n = n;
    return o;
}

static int count_nl(const char *s, size_t n)
{
    int c = 0;
    for (size_t i = 0; i < n; i++) c += s[i] == '\n';
    return c;
}

/* Lex a string literal at s[*i] (a quote); Python escapes. */
static void lex_string(parser *p, const char *s, size_t n, size_t *i, int *line)
{
    char q = s[*i];
    size_t j = *i + 1;
    tbuf b = {0};
    int start_line = *line;
    while (j < n && s[j] != q) {
        if (s[j] == '\n') (*line)++;
        if (s[j] == '\\' && j + 1 < n) {
            char e = s[j + 1], c;
            j += 2;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case '\\': c = '\\'; break;
            case '\'': c = '\''; break;
            case '"': c = '"'; break;
            case '0': c = 0; break;
            case 'a': c = '\a'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'v': c = '\v'; break;
            case '\n': (*line)++; continue; /* line continuation */
            case 'x': case 'u': case 'U': {
                int w = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                unsigned cp = 0;
                for (int k = 0; k < w; k++, j++) {
                    char h = j < n ? s[j] : 0;
                    int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
                    if (d < 0) perr(p, *line, "TemplateSyntaxError: truncated \\%s escape in a string", e == 'x' ? "x" : "u");
                    cp = cp * 16 + (unsigned)d;
                }
                if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) cp = 0xFFFD;
                char o[4];
                size_t k = 0;
                if (cp < 0x80) o[k++] = (char)cp;
                else if (cp < 0x800) { o[k++] = (char)(0xC0 | cp >> 6); o[k++] = (char)(0x80 | (cp & 0x3F)); }
                else if (cp < 0x10000) { o[k++] = (char)(0xE0 | cp >> 12); o[k++] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[k++] = (char)(0x80 | (cp & 0x3F)); }
                else { o[k++] = (char)(0xF0 | cp >> 18); o[k++] = (char)(0x80 | ((cp >> 12) & 0x3F)); o[k++] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[k++] = (char)(0x80 | (cp & 0x3F)); }
                sift__tbuf_put(&p->m, &b, o, k);
                continue;
            }
            default: /* unknown escapes stay as written */
                sift__tbuf_put(&p->m, &b, "\\", 1);
                c = e;
            }
            sift__tbuf_put(&p->m, &b, &c, 1);
            continue;
        }
        sift__tbuf_put(&p->m, &b, &s[j], 1);
        j++;
    }
    if (j >= n) perr(p, start_line, "TemplateSyntaxError: unterminated string%s", NULL);
    tok *t = emit(p, K_STRING, start_line);
    t->s = b.p ? b.p : "";
    t->n = b.n;
    *i = j + 1;
}

static const char *const OPS2[] = {"//", "**", "==", "!=", "<=", ">=", NULL};
static const char OPS1[] = "+-*/%~<>()[]{},.:|=";

/* Lex the inside of a tag from s[*i] up to its end (`}}` or `%}`); returns the index after
 * the end marker and whether the end had a `-` (strip following whitespace) or `+`. */
static size_t lex_tag(parser *p, const char *s, size_t n, size_t i, int *line, bool block, int *end_mod)
{
    const char *close = block ? "%}" : "}}";
    int bal = 0;
    for (;;) {
        while (i < n && is_space(s[i])) {
            if (s[i] == '\n') (*line)++;
            i++;
        }
        if (i >= n) perr(p, *line, "TemplateSyntaxError: unexpected end of template, expected '%s'", close);
        if (bal == 0) {
            if ((s[i] == '-' || s[i] == '+') && i + 2 < n + 0 && s[i + 1] == close[0] && s[i + 2] == close[1]) {
                *end_mod = s[i];
                emit(p, block ? K_BLOCK_END : K_VAR_END, *line);
                return i + 3;
            }
            if (s[i] == close[0] && i + 1 < n && s[i + 1] == close[1]) {
                *end_mod = 0;
                emit(p, block ? K_BLOCK_END : K_VAR_END, *line);
                return i + 2;
            }
        }
        char c = s[i];
        if (c == '\'' || c == '"') {
            lex_string(p, s, n, &i, line);
            continue;
        }
        if (is_digit(c)) {
            size_t j = i;
            bool isf = false;
            while (j < n && (is_digit(s[j]) || s[j] == '_')) j++;
            if (j + 1 < n && s[j] == '.' && is_digit(s[j + 1])) {
                isf = true;
                j++;
                while (j < n && (is_digit(s[j]) || s[j] == '_')) j++;
            }
            if (j < n && (s[j] == 'e' || s[j] == 'E') &&
                ((j + 1 < n && is_digit(s[j + 1])) || (j + 2 < n && (s[j + 1] == '+' || s[j + 1] == '-') && is_digit(s[j + 2])))) {
                isf = true;
                j += 2;
                while (j < n && is_digit(s[j])) j++;
            }
            char tmp[64];
            size_t k = 0;
            for (size_t q = i; q < j && k < sizeof tmp - 1; q++)
                if (s[q] != '_') tmp[k++] = s[q];
            tmp[k] = 0;
            tok *t = emit(p, isf ? K_FLOAT : K_INT, *line);
            if (isf) t->f = strtod(tmp, NULL);
            else {
                char *e;
                t->i = strtoll(tmp, &e, 10);
                if (k > 18) {
                    t->k = K_FLOAT;
                    t->f = strtod(tmp, NULL);
                }
            }
            i = j;
            continue;
        }
        if (is_ident0(c)) {
            size_t j = i;
            while (j < n && (is_ident0(s[j]) || is_digit(s[j]))) j++;
            tok *t = emit(p, K_NAME, *line);
            t->s = pdup(p, s + i, j - i);
            t->n = j - i;
            i = j;
            continue;
        }
        bool two = false;
        for (int k = 0; OPS2[k]; k++)
            if (i + 1 < n && s[i] == OPS2[k][0] && s[i + 1] == OPS2[k][1]) {
                tok *t = emit(p, K_OP, *line);
                t->s = OPS2[k];
                t->n = 2;
                i += 2;
                two = true;
                break;
            }
        if (two) continue;
        const char *op = strchr(OPS1, c);
        if (!op || c == 0) {
            char tmp[2] = {c, 0};
            perr(p, *line, "TemplateSyntaxError: unexpected char '%s'", tmp);
        }
        if (c == '(' || c == '[' || c == '{') bal++;
        if (c == ')' || c == ']' || c == '}') {
            if (bal == 0) {
                char tmp[2] = {c, 0};
                perr(p, *line, "TemplateSyntaxError: unexpected '%s'", tmp);
            }
            bal--;
        }
        tok *t = emit(p, K_OP, *line);
        t->s = pdup(p, &c, 1);
        t->n = 1;
        i++;
    }
}

/* `{% raw %}...{% endraw %}` starting after the `{%` at s[k]: the body is emitted as text,
 * verbatim (whitespace control of the tags applies); returns the index after the end tag's
 * `%}`, or 0 when the tag is not `raw`. */
static void emit_text(parser *p, const char *s, size_t n, int line);
static size_t tag_word(const char *s, size_t n, size_t k, const char *word)
{
    while (k < n && is_space(s[k])) k++;
    size_t w = strlen(word);
    if (k + w > n || memcmp(s + k, word, w) != 0 || (k + w < n && (is_ident0(s[k + w]) || is_digit(s[k + w])))) return 0;
    k += w;
    while (k < n && is_space(s[k])) k++;
    return k;
}

static size_t raw_block(parser *p, const char *s, size_t n, size_t k, int *line, int *end_mod)
{
    size_t q = tag_word(s, n, k, "raw");
    if (!q) return 0;
    if (q < n && (s[q] == '-' || s[q] == '+')) q++;
    if (q + 1 >= n || s[q] != '%' || s[q + 1] != '}') return 0;
    bool strip_after_open = s[q - 1] == '-';
    size_t body = q + 2;
    for (size_t e = body; e + 1 < n; e++) {
        if (s[e] != '{' || s[e + 1] != '%') continue;
        size_t t = e + 2;
        bool strip_before_close = t < n && s[t] == '-';
        if (t < n && (s[t] == '-' || s[t] == '+')) t++;
        size_t after = tag_word(s, n, t, "endraw");
        if (!after) continue;
        int mod = 0;
        if (after < n && (s[after] == '-' || s[after] == '+')) mod = s[after++];
        if (after + 1 >= n || s[after] != '%' || s[after + 1] != '}') continue;
        size_t b0 = body, b1 = e;
        if (strip_after_open) while (b0 < b1 && is_space(s[b0])) b0++;
        if (strip_before_close) while (b1 > b0 && is_space(s[b1 - 1])) b1--;
        emit_text(p, s + b0, b1 - b0, *line);
        *line += count_nl(s + k, after + 2 - k);
        *end_mod = mod;
        return after + 2;
    }
    perr(p, *line, "TemplateSyntaxError: Missing end of raw directive%s", NULL);
}

static void emit_text(parser *p, const char *s, size_t n, int line)
{
    if (n == 0) return;
    tok *t = emit(p, K_TEXT, line);
    t->s = pdup(p, s, n);
    t->n = n;
}

static void lex(parser *p, const char *s, size_t n)
{
    size_t i = 0;
    int line = 1;
    bool line_starting = true; /* the last thing consumed ended with a newline */
    int strip_next = 0;        /* the previous tag ended with '-' */
    bool trim_next = false;    /* trim_blocks: drop one newline after a block/comment tag */
    while (i <= n) {
        /* find the next tag start */
        size_t j = i;
        while (j + 1 < n && !(s[j] == '{' && (s[j + 1] == '{' || s[j + 1] == '%' || s[j + 1] == '#'))) j++;
        bool found = j + 1 < n;
        if (!found) j = n;
        size_t ts = i, te = j;
        if (strip_next) while (ts < te && is_space(s[ts])) ts++;
        else if (trim_next && ts < te && s[ts] == '\n') ts++;
        if (!found) {
            emit_text(p, s + ts, te - ts, line);
            break;
        }
        char kind = s[j + 1];
        char mod = j + 2 < n ? s[j + 2] : 0;
        if (mod == '-') {
            while (te > ts && is_space(s[te - 1])) te--;
        } else if (mod != '+' && kind != '{') {
            /* lstrip_blocks: the text after its last newline (or all of it, when the
             * previous tag ended a line) is whitespace: drop that part */
            size_t l = te;
            while (l > ts && s[l - 1] != '\n') l--;
            if (l > ts || line_starting) {
                size_t q = l;
                while (q < te && is_space(s[q])) q++;
                if (q == te) te = l;
            }
        }
        emit_text(p, s + ts, te - ts, line);
        line += count_nl(s + i, j - i);
        size_t k = j + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
        int end_mod = 0;
        size_t raw_end;
        if (kind == '%' && (raw_end = raw_block(p, s, n, k, &line, &end_mod)) != 0) {
            i = raw_end;
            trim_next = end_mod != '+';
        } else if (kind == '#') {
            /* comment: up to #} */
            size_t e = k;
            while (e + 1 < n && !(s[e] == '#' && s[e + 1] == '}')) e++;
            if (e + 1 >= n) perr(p, line, "TemplateSyntaxError: missing end of comment tag%s", NULL);
            end_mod = e > k && (s[e - 1] == '-' || s[e - 1] == '+') ? s[e - 1] : 0;
            line += count_nl(s + j, e + 2 - j);
            i = e + 2;
            trim_next = end_mod != '+';
        } else {
            emit(p, kind == '{' ? K_VAR_BEGIN : K_BLOCK_BEGIN, line);
            i = lex_tag(p, s, n, k, &line, kind == '%', &end_mod);
            trim_next = kind == '%' && end_mod != '+';
        }
        strip_next = end_mod == '-';
        /* what the next text's lstrip may look back on: did this tag (with the newline
         * trim_blocks or '-' consumes) end a line? */
        if (strip_next) {
            size_t q = i;
            while (q < n && is_space(s[q])) q++;
            line_starting = q > i && s[q - 1] == '\n';
            line += count_nl(s + i, q - i);
            i = q;
            strip_next = 0;
            trim_next = false;
        } else if (trim_next && i < n && s[i] == '\n') {
            line_starting = true;
            line++;
            i++;
            trim_next = false;
        } else {
            line_starting = false;
            trim_next = false;
        }
        if (i >= n) break;
    }
    emit(p, K_EOF, line);
}

/* ---- parser helpers ---------------------------------------------------------------------- */
static tok *cur(parser *p) { return &p->toks[p->pos]; }
static tok *next(parser *p) { tok *t = &p->toks[p->pos]; if (t->k != K_EOF) p->pos++; return t; }
static bool is_op(parser *p, const char *op) { tok *t = cur(p); return t->k == K_OP && strcmp(t->s, op) == 0; }
static bool is_name(parser *p, const char *nm) { tok *t = cur(p); return t->k == K_NAME && strcmp(t->s, nm) == 0; }

static const char *tokdesc(tok *t)
{
    switch (t->k) {
    case K_NAME: case K_OP: return t->s;
    case K_STRING: return "string";
    case K_INT: case K_FLOAT: return "number";
    case K_VAR_END: return "end of print statement";
    case K_BLOCK_END: return "end of statement block";
    case K_EOF: return "end of template";
    default: return "text";
    }
}

static void expect_op(parser *p, const char *op)
{
    if (!is_op(p, op)) {
        char tmp[96];
        snprintf(tmp, sizeof tmp, "'%s', got '%s'", op, tokdesc(cur(p)));
        perr(p, cur(p)->line, "TemplateSyntaxError: expected token %s", tmp);
    }
    next(p);
}

static const char *expect_name(parser *p)
{
    if (cur(p)->k != K_NAME) perr(p, cur(p)->line, "TemplateSyntaxError: expected a name, got '%s'", tokdesc(cur(p)));
    return next(p)->s;
}

static void expect_block_end(parser *p)
{
    if (cur(p)->k != K_BLOCK_END)
        perr(p, cur(p)->line, "TemplateSyntaxError: expected end of statement block, got '%s'", tokdesc(cur(p)));
    next(p);
}

static tnode *mk(parser *p, tnode_kind k, int line)
{
    tnode *n = sift__tpl_alloc(p->m.arena, p->m.fail, sizeof *n);
    memset(n, 0, sizeof *n);
    n->kind = k;
    n->line = line;
    return n;
}

typedef struct nodelist { tnode **v; int n, cap; } nodelist;

static void nl_push(parser *p, nodelist *l, tnode *x)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        tnode **nv = sift__tpl_alloc(p->m.arena, p->m.fail, (size_t)cap * sizeof *nv);
        if (l->n) memcpy(nv, l->v, (size_t)l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

static void enter(parser *p)
{
    if (++p->depth > MAX_DEPTH) perr(p, cur(p)->line, "TemplateSyntaxError: nested too deeply%s", NULL);
}

/* ---- expressions --------------------------------------------------------------------------- */
static tnode *parse_expr(parser *p, bool with_cond);
static tnode *parse_unary(parser *p, bool with_filter);

static void parse_call_args(parser *p, tnode *call)
{
    nodelist args = {0};
    expect_op(p, "(");
    while (!is_op(p, ")")) {
        if (args.n) expect_op(p, ",");
        if (is_op(p, ")")) break;
        tok *t = cur(p);
        if (t->k == K_NAME && p->toks[p->pos + 1].k == K_OP && strcmp(p->toks[p->pos + 1].s, "=") == 0) {
            tnode *kw = mk(p, N_KWARG, t->line);
            kw->name = t->s;
            p->pos += 2;
            kw->a = parse_expr(p, true);
            nl_push(p, &args, kw);
        } else {
            nl_push(p, &args, parse_expr(p, true));
        }
    }
    next(p);
    call->kids = args.v;
    call->nkids = args.n;
}

static tnode *parse_primary(parser *p)
{
    tok *t = cur(p);
    tnode *n;
    enter(p);
    switch (t->k) {
    case K_NAME:
        next(p);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True")) { n = mk(p, N_LIT, t->line); n->lit = tv_bool(true); }
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False")) { n = mk(p, N_LIT, t->line); n->lit = tv_bool(false); }
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) { n = mk(p, N_LIT, t->line); n->lit = tv_none(); }
        else { n = mk(p, N_NAME, t->line); n->name = t->s; }
        break;
    case K_STRING: {
        tbuf b = {0};
        while (cur(p)->k == K_STRING) { /* adjacent literals concatenate */
            tok *s = next(p);
            sift__tbuf_put(&p->m, &b, s->s, s->n);
        }
        n = mk(p, N_LIT, t->line);
        n->lit = sift__tbuf_value(&p->m, &b);
        break;
    }
    case K_INT: next(p); n = mk(p, N_LIT, t->line); n->lit = tv_int(t->i); break;
    case K_FLOAT: next(p); n = mk(p, N_LIT, t->line); n->lit = tv_float(t->f); break;
    case K_OP:
        if (is_op(p, "(")) {
            next(p);
            if (is_op(p, ")")) { /* empty tuple */
                next(p);
                n = mk(p, N_TUPLE, t->line);
                break;
            }
            tnode *e = parse_expr(p, true);
            if (is_op(p, ",")) {
                nodelist l = {0};
                nl_push(p, &l, e);
                while (is_op(p, ",")) {
                    next(p);
                    if (is_op(p, ")")) break;
                    nl_push(p, &l, parse_expr(p, true));
                }
                n = mk(p, N_TUPLE, t->line);
                n->kids = l.v;
                n->nkids = l.n;
            } else {
                n = e;
            }
            expect_op(p, ")");
            break;
        }
        if (is_op(p, "[")) {
            next(p);
            nodelist l = {0};
            while (!is_op(p, "]")) {
                if (l.n) expect_op(p, ",");
                if (is_op(p, "]")) break;
                nl_push(p, &l, parse_expr(p, true));
            }
            next(p);
            n = mk(p, N_LIST, t->line);
            n->kids = l.v;
            n->nkids = l.n;
            break;
        }
        if (is_op(p, "{")) {
            next(p);
            nodelist l = {0};
            while (!is_op(p, "}")) {
                if (l.n) expect_op(p, ",");
                if (is_op(p, "}")) break;
                nl_push(p, &l, parse_expr(p, true));
                expect_op(p, ":");
                nl_push(p, &l, parse_expr(p, true));
            }
            next(p);
            n = mk(p, N_DICT, t->line);
            n->kids = l.v;
            n->nkids = l.n;
            break;
        }
        /* fall through */
    default:
        perr(p, t->line, "TemplateSyntaxError: unexpected '%s'", tokdesc(t));
    }
    p->depth--;
    return n;
}

static tnode *parse_subscript_arg(parser *p)
{
    /* expr | [expr]:[expr][:[expr]] */
    int line = cur(p)->line;
    tnode *parts[3] = {0};
    int idx = 0;
    bool slice = false;
    if (!is_op(p, ":")) parts[0] = parse_expr(p, true);
    while (is_op(p, ":") && idx < 2) {
        slice = true;
        next(p);
        idx++;
        if (!is_op(p, ":") && !is_op(p, "]")) parts[idx] = parse_expr(p, true);
    }
    if (!slice) return parts[0];
    tnode *s = mk(p, N_SLICE, line);
    s->a = parts[0];
    s->b = parts[1];
    s->c = parts[2];
    return s;
}

static tnode *parse_postfix(parser *p, tnode *n)
{
    for (;;) {
        tok *t = cur(p);
        if (is_op(p, ".")) {
            next(p);
            tok *a = next(p);
            tnode *x;
            if (a->k == K_NAME) {
                x = mk(p, N_ATTR, t->line);
                x->name = a->s;
            } else if (a->k == K_INT) {
                x = mk(p, N_ITEM, t->line);
                x->b = mk(p, N_LIT, t->line);
                x->b->lit = tv_int(a->i);
            } else {
                perr(p, t->line, "TemplateSyntaxError: expected name or number after '.', got '%s'", tokdesc(a));
            }
            x->a = n;
            n = x;
        } else if (is_op(p, "[")) {
            next(p);
            tnode *x = mk(p, N_ITEM, t->line);
            x->a = n;
            x->b = parse_subscript_arg(p);
            expect_op(p, "]");
            n = x;
        } else if (is_op(p, "(")) {
            tnode *x = mk(p, N_CALL, t->line);
            x->a = n;
            parse_call_args(p, x);
            n = x;
        } else {
            return n;
        }
    }
}

static tnode *parse_filter_tail(parser *p, tnode *input)
{
    tok *t = cur(p);
    const char *name = expect_name(p);
    tbuf nb = {0};
    sift__tbuf_puts(&p->m, &nb, name);
    while (is_op(p, ".")) { /* dotted filter names */
        next(p);
        sift__tbuf_puts(&p->m, &nb, ".");
        sift__tbuf_puts(&p->m, &nb, expect_name(p));
    }
    tnode *f = mk(p, N_FILTER, t->line);
    f->op = !sift__tpl_filter(nb.p); /* unknown: an error where it is compiled (check_unknown) */
    f->name = nb.p;
    f->a = input;
    if (is_op(p, "(")) parse_call_args(p, f);
    return f;
}

static tnode *parse_test_tail(parser *p, tnode *input)
{
    tok *t = cur(p);
    bool neg = false;
    if (is_name(p, "not")) { next(p); neg = true; }
    const char *name = expect_name(p);
    tnode *x = mk(p, N_TEST, t->line);
    x->name = name;
    x->a = input;
    x->op = neg | (sift__tpl_has_test(name) ? 0 : 2);
    tok *c = cur(p);
    if (is_op(p, "(")) {
        parse_call_args(p, x);
    } else if ((c->k == K_NAME || c->k == K_STRING || c->k == K_INT || c->k == K_FLOAT || is_op(p, "[") || is_op(p, "{")) &&
               !(c->k == K_NAME && (!strcmp(c->s, "else") || !strcmp(c->s, "or") || !strcmp(c->s, "and") ||
                                    !strcmp(c->s, "if") || !strcmp(c->s, "is") || !strcmp(c->s, "in") || !strcmp(c->s, "not")))) {
        tnode *arg = parse_postfix(p, parse_primary(p));
        x->kids = sift__tpl_alloc(p->m.arena, p->m.fail, sizeof(tnode *));
        x->kids[0] = arg;
        x->nkids = 1;
    }
    return x;
}

static tnode *parse_filter_expr(parser *p, tnode *n)
{
    for (;;) {
        if (is_op(p, "|")) { next(p); n = parse_filter_tail(p, n); }
        else if (is_name(p, "is")) { next(p); n = parse_test_tail(p, n); }
        else if (is_op(p, "(")) {
            tnode *x = mk(p, N_CALL, cur(p)->line);
            x->a = n;
            parse_call_args(p, x);
            n = x;
        } else return n;
    }
}

static tnode *parse_unary(parser *p, bool with_filter)
{
    tok *t = cur(p);
    tnode *n;
    enter(p);
    if (is_op(p, "-") || is_op(p, "+")) {
        next(p);
        n = mk(p, N_UNARY, t->line);
        n->op = t->s[0] == '-' ? OP_NEG : OP_POS;
        n->a = parse_unary(p, false);
    } else {
        n = parse_primary(p);
    }
    n = parse_postfix(p, n);
    if (with_filter) n = parse_filter_expr(p, n);
    p->depth--;
    return n;
}

static tnode *binop(parser *p, int op, tnode *a, tnode *b, int line)
{
    tnode *n = mk(p, N_BINOP, line);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static tnode *parse_pow(parser *p)
{
    tnode *n = parse_unary(p, true);
    while (is_op(p, "**")) {
        int line = next(p)->line;
        n = binop(p, OP_POW, n, parse_unary(p, true), line);
    }
    return n;
}

static tnode *parse_math2(parser *p)
{
    tnode *n = parse_pow(p);
    for (;;) {
        int op = is_op(p, "*") ? OP_MUL : is_op(p, "/") ? OP_DIV : is_op(p, "//") ? OP_FLOORDIV : is_op(p, "%") ? OP_MOD : 0;
        if (!op) return n;
        int line = next(p)->line;
        n = binop(p, op, n, parse_pow(p), line);
    }
}

static tnode *parse_concat(parser *p)
{
    tnode *n = parse_math2(p);
    while (is_op(p, "~")) {
        int line = next(p)->line;
        n = binop(p, OP_CONCAT, n, parse_math2(p), line);
    }
    return n;
}

static tnode *parse_math1(parser *p)
{
    tnode *n = parse_concat(p);
    for (;;) {
        int op = is_op(p, "+") ? OP_ADD : is_op(p, "-") ? OP_SUB : 0;
        if (!op) return n;
        int line = next(p)->line;
        n = binop(p, op, n, parse_concat(p), line);
    }
}

static tnode *parse_compare(parser *p)
{
    int line = cur(p)->line;
    tnode *first = parse_math1(p);
    nodelist ops = {0};
    for (;;) {
        int op = is_op(p, "==") ? OP_EQ : is_op(p, "!=") ? OP_NE : is_op(p, "<") ? OP_LT : is_op(p, "<=") ? OP_LE
               : is_op(p, ">") ? OP_GT : is_op(p, ">=") ? OP_GE : is_name(p, "in") ? OP_IN : 0;
        if (!op && is_name(p, "not") && p->toks[p->pos + 1].k == K_NAME && !strcmp(p->toks[p->pos + 1].s, "in")) {
            next(p);
            op = OP_NOTIN;
        }
        if (!op) break;
        next(p);
        tnode *x = mk(p, N_BINOP, line);
        x->op = op;
        x->b = parse_math1(p);
        nl_push(p, &ops, x);
    }
    if (!ops.n) return first;
    tnode *c = mk(p, N_COMPARE, line);
    c->a = first;
    c->kids = ops.v;
    c->nkids = ops.n;
    return c;
}

static tnode *parse_not(parser *p)
{
    if (is_name(p, "not")) {
        int line = next(p)->line;
        enter(p);
        tnode *n = mk(p, N_NOT, line);
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}

static tnode *parse_and(parser *p)
{
    tnode *n = parse_not(p);
    while (is_name(p, "and")) {
        tnode *x = mk(p, N_AND, next(p)->line);
        x->a = n;
        x->b = parse_not(p);
        n = x;
    }
    return n;
}

static tnode *parse_or(parser *p)
{
    tnode *n = parse_and(p);
    while (is_name(p, "or")) {
        tnode *x = mk(p, N_OR, next(p)->line);
        x->a = n;
        x->b = parse_and(p);
        n = x;
    }
    return n;
}

static tnode *parse_expr(parser *p, bool with_cond)
{
    enter(p);
    tnode *n = parse_or(p);
    if (with_cond) {
        while (is_name(p, "if")) {
            tnode *x = mk(p, N_COND, next(p)->line);
            x->a = n;
            x->b = parse_or(p);
            if (is_name(p, "else")) {
                next(p);
                x->c = parse_expr(p, true);
            }
            n = x;
        }
    }
    p->depth--;
    return n;
}

/* An expression or an unparenthesised tuple (`a, b`), as in {% set %} and {% for %}. */
static tnode *parse_tuple(parser *p, bool with_cond)
{
    int line = cur(p)->line;
    tnode *e = parse_expr(p, with_cond);
    if (!is_op(p, ",")) return e;
    nodelist l = {0};
    nl_push(p, &l, e);
    while (is_op(p, ",")) {
        next(p);
        if (cur(p)->k == K_BLOCK_END || cur(p)->k == K_VAR_END) break;
        nl_push(p, &l, parse_expr(p, with_cond));
    }
    tnode *t = mk(p, N_TUPLE, line);
    t->kids = l.v;
    t->nkids = l.n;
    return t;
}

/* Assignment target: name, name.attr, or names separated by commas. */
static tnode *parse_target(parser *p)
{
    int line = cur(p)->line;
    nodelist l = {0};
    bool paren = is_op(p, "(");
    if (paren) next(p);
    for (;;) {
        tnode *t = mk(p, N_NAME, cur(p)->line);
        t->name = expect_name(p);
        if (is_op(p, ".")) {
            next(p);
            tnode *a = mk(p, N_ATTR, t->line);
            a->a = t;
            a->name = expect_name(p);
            t = a;
        }
        nl_push(p, &l, t);
        if (!is_op(p, ",")) break;
        next(p);
    }
    if (paren) expect_op(p, ")");
    if (l.n == 1) return l.v[0];
    tnode *t = mk(p, N_TUPLE, line);
    t->kids = l.v;
    t->nkids = l.n;
    return t;
}

/* ---- statements ---------------------------------------------------------------------------- */
static tnode *parse_body(parser *p, const char *const *ends, const char **ended, const char *open_tag, int open_line);

static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_FOR[] = {"else", "endfor", NULL};
static const char *const END_ENDFOR[] = {"endfor", NULL};
static const char *const END_ENDIF[] = {"endif", NULL};
static const char *const END_SET[] = {"endset", NULL};
static const char *const END_MACRO[] = {"endmacro", NULL};
static const char *const END_CALL[] = {"endcall", NULL};
static const char *const END_FILTER[] = {"endfilter", NULL};
static const char *const END_GEN[] = {"endgeneration", NULL};

static tnode *parse_if(parser *p, int line)
{
    tnode *n = mk(p, N_IF, line);
    n->a = parse_tuple(p, true);
    expect_block_end(p);
    const char *ended;
    n->b = parse_body(p, END_IF, &ended, "if", line);
    if (!strcmp(ended, "elif")) {
        n->c = parse_if(p, cur(p)->line);
    } else if (!strcmp(ended, "else")) {
        expect_block_end(p);
        n->c = parse_body(p, END_ENDIF, &ended, "if", line);
        expect_block_end(p);
    } else {
        expect_block_end(p);
    }
    return n;
}

static tnode *parse_for(parser *p, int line)
{
    tnode *n = mk(p, N_FOR, line);
    n->d = parse_target(p);
    if (!is_name(p, "in")) perr(p, cur(p)->line, "TemplateSyntaxError: expected 'in', got '%s'", tokdesc(cur(p)));
    next(p);
    n->a = parse_tuple(p, false);
    if (is_name(p, "if")) {
        next(p);
        n->op = 1;
        tnode *cond = parse_expr(p, true);
        n->kids = sift__tpl_alloc(p->m.arena, p->m.fail, sizeof(tnode *));
        n->kids[0] = cond;
        n->nkids = 1;
    }
    if (is_name(p, "recursive")) { /* {% for ... recursive %}: the body may call loop(items) */
        next(p);
        n->op |= 2;
    }
    expect_block_end(p);
    const char *ended;
    n->b = parse_body(p, END_FOR, &ended, "for", line);
    if (!strcmp(ended, "else")) {
        expect_block_end(p);
        n->c = parse_body(p, END_ENDFOR, &ended, "for", line);
    }
    expect_block_end(p);
    return n;
}

/* Filters of a {% filter %} or a block {% set x | f %}: a chain whose innermost input is NULL. */
static tnode *parse_filter_chain(parser *p, tnode *input)
{
    tnode *f = parse_filter_tail(p, input);
    while (is_op(p, "|")) {
        next(p);
        f = parse_filter_tail(p, f);
    }
    return f;
}

static tnode *parse_set(parser *p, int line)
{
    tnode *target = parse_target(p);
    if (is_op(p, "=")) {
        next(p);
        tnode *n = mk(p, N_SET, line);
        n->d = target;
        n->a = parse_tuple(p, true);
        expect_block_end(p);
        return n;
    }
    tnode *n = mk(p, N_SETBLOCK, line);
    n->d = target;
    if (is_op(p, "|")) {
        next(p);
        n->c = parse_filter_chain(p, NULL);
    }
    expect_block_end(p);
    const char *ended;
    n->b = parse_body(p, END_SET, &ended, "set", line);
    expect_block_end(p);
    return n;
}

static void parse_params(parser *p, tnode *n)
{
    nodelist l = {0};
    expect_op(p, "(");
    while (!is_op(p, ")")) {
        if (l.n) expect_op(p, ",");
        tnode *prm = mk(p, N_PARAM, cur(p)->line);
        prm->name = expect_name(p);
        if (is_op(p, "=")) {
            next(p);
            prm->a = parse_expr(p, true);
        }
        nl_push(p, &l, prm);
    }
    next(p);
    n->kids = l.v;
    n->nkids = l.n;
}

static tnode *parse_macro(parser *p, int line)
{
    tnode *n = mk(p, N_MACRO, line);
    n->name = expect_name(p);
    parse_params(p, n);
    expect_block_end(p);
    const char *ended;
    n->b = parse_body(p, END_MACRO, &ended, "macro", line);
    expect_block_end(p);
    return n;
}

static tnode *parse_callblock(parser *p, int line)
{
    tnode *n = mk(p, N_CALLBLOCK, line);
    n->name = "caller";
    if (is_op(p, "(")) parse_params(p, n);
    n->a = parse_expr(p, true);
    if (n->a->kind != N_CALL) perr(p, line, "TemplateSyntaxError: expected a call after 'call'%s", NULL);
    expect_block_end(p);
    const char *ended;
    n->b = parse_body(p, END_CALL, &ended, "call", line);
    expect_block_end(p);
    return n;
}

static tnode *parse_statement(parser *p)
{
    tok *t = cur(p);
    const char *tag = expect_name(p);
    int line = t->line;
    if (!strcmp(tag, "if")) return parse_if(p, line);
    if (!strcmp(tag, "for")) return parse_for(p, line);
    if (!strcmp(tag, "set")) return parse_set(p, line);
    if (!strcmp(tag, "macro")) return parse_macro(p, line);
    if (!strcmp(tag, "call")) return parse_callblock(p, line);
    if (!strcmp(tag, "filter")) {
        tnode *n = mk(p, N_FILTERBLOCK, line);
        n->c = parse_filter_chain(p, NULL);
        expect_block_end(p);
        const char *ended;
        n->b = parse_body(p, END_FILTER, &ended, "filter", line);
        expect_block_end(p);
        return n;
    }
    if (!strcmp(tag, "break") || !strcmp(tag, "continue")) {
        tnode *n = mk(p, tag[0] == 'b' ? N_BREAK : N_CONTINUE, line);
        expect_block_end(p);
        return n;
    }
    if (!strcmp(tag, "generation")) { /* transformers' tag: renders its body */
        expect_block_end(p);
        const char *ended;
        tnode *b = parse_body(p, END_GEN, &ended, "generation", line);
        expect_block_end(p);
        return b;
    }
    perr(p, line, "TemplateSyntaxError: Encountered unknown tag '%s'.", tag);
}

/* Statements up to one of `ends` (NULL: the end of the template). The end tag's name is
 * consumed, its remaining tokens are not. Loop controls outside a loop are checked by the
 * renderer's caller (they are simply a no-op at top level in jinja2's sense: an error). */
static tnode *parse_body(parser *p, const char *const *ends, const char **ended, const char *open_tag, int open_line)
{
    enter(p);
    nodelist l = {0};
    int line = cur(p)->line;
    for (;;) {
        tok *t = cur(p);
        if (t->k == K_EOF) {
            if (ends) {
                char tmp[96];
                snprintf(tmp, sizeof tmp, "'%s' (opened on line %d)", open_tag, open_line);
                perr(p, t->line, "TemplateSyntaxError: Unexpected end of template: unclosed %s", tmp);
            }
            break;
        }
        if (t->k == K_TEXT) {
            next(p);
            tnode *x = mk(p, N_TEXT, t->line);
            x->lit = sift__tv_str(&p->m, t->s, t->n);
            nl_push(p, &l, x);
        } else if (t->k == K_VAR_BEGIN) {
            next(p);
            tnode *x = mk(p, N_OUTPUT, t->line);
            x->a = parse_tuple(p, true);
            if (cur(p)->k != K_VAR_END)
                perr(p, cur(p)->line, "TemplateSyntaxError: expected token 'end of print statement', got '%s'", tokdesc(cur(p)));
            next(p);
            nl_push(p, &l, x);
        } else if (t->k == K_BLOCK_BEGIN) {
            tok *nt = &p->toks[p->pos + 1];
            if (nt->k == K_NAME && ends) {
                for (int i = 0; ends[i]; i++)
                    if (!strcmp(nt->s, ends[i])) {
                        p->pos += 2;
                        *ended = ends[i];
                        goto done;
                    }
            }
            if (nt->k == K_NAME && (!strncmp(nt->s, "end", 3) || !strcmp(nt->s, "elif") || !strcmp(nt->s, "else"))) {
                char tmp[160];
                if (ends)
                    snprintf(tmp, sizeof tmp, "'%s'. The innermost block that needs to be closed is '%s'", nt->s, open_tag);
                else
                    snprintf(tmp, sizeof tmp, "'%s'", nt->s);
                perr(p, nt->line, "TemplateSyntaxError: Encountered unknown tag %s.", tmp);
            }
            next(p);
            nl_push(p, &l, parse_statement(p));
        } else {
            perr(p, t->line, "TemplateSyntaxError: unexpected '%s'", tokdesc(t));
        }
    }
done:;
    tnode *b = mk(p, N_BODY, line);
    b->kids = l.v;
    b->nkids = l.n;
    p->depth--;
    return b;
}

/* jinja2 reports an unknown filter or test when it compiles the template, unless it sits
 * inside an `if` or a conditional expression: there the error waits for run time (and a
 * branch never taken never fails). */
static void check_unknown(parser *p, const tnode *n, bool soft, int depth)
{
    if (!n || depth > 4 * MAX_DEPTH) return;
    if (!soft && n->kind == N_FILTER && n->op) perr(p, n->line, "TemplateAssertionError: No filter named '%s'.", n->name);
    if (!soft && n->kind == N_TEST && (n->op & 2)) perr(p, n->line, "TemplateAssertionError: No test named '%s'.", n->name);
    soft = soft || n->kind == N_IF || n->kind == N_COND;
    check_unknown(p, n->a, soft, depth + 1);
    check_unknown(p, n->b, soft, depth + 1);
    check_unknown(p, n->c, soft, depth + 1);
    check_unknown(p, n->d, soft, depth + 1);
    for (int i = 0; i < n->nkids; i++) check_unknown(p, n->kids[i], soft, depth + 1);
}

sift_status sift__tpl_parse(tpl_parsed *out, const char *src, size_t len, sift_error *err)
{
    tpl_fail fail = {0};
    fail.err = err;
    out->arena.head = NULL;
    out->arena.used = 0;
    out->arena.limit = (size_t)256 << 20;
    out->arena.pool = NULL;
    out->root = NULL;
    parser p = {0};
    p.m.arena = &out->arena;
    p.m.fail = &fail;
    if (setjmp(fail.jb)) {
        sift__tpl_arena_free(&out->arena);
        if (err) {
            err->status = fail.status;
            snprintf(err->msg, sizeof err->msg, "%s", fail.msg);
        }
        return fail.status;
    }
    size_t n;
    char *s = normalise(&p, src, len, &n);
    lex(&p, s, n);
    const char *ended = NULL;
    out->root = parse_body(&p, NULL, &ended, NULL, 0);
    check_unknown(&p, out->root, false, 0);
    return SIFT_OK;
}
