/*
 * builtins.c - what a template can call: jinja2's filters and tests, the str/list/dict
 * methods chat templates use, and the globals (range, namespace, raise_exception,
 * strftime_now, dict).
 *
 * The set is the one real chat templates use (measured over the conformance templates and
 * llama.cpp's / vLLM's collections), with jinja2's and Python's semantics: `default` only
 * replaces Undefined (not None) unless boolean=true; `tojson` is transformers' json.dumps
 * with ensure_ascii=False; `trim`/`strip` strip Python whitespace; `split()` without a
 * separator splits on runs of whitespace. The sandbox of transformers
 * (ImmutableSandboxedEnvironment) is reproduced where templates meet it: list.append/pop
 * and dict.update/pop raise SecurityError.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "template/tpl.h"

static _Noreturn void bfail(tpl_render *r, const char *fmt, const char *a, const char *b)
{
    sift__tpl_fail(&r->fail, SIFT_E_INVAL, fmt, a ? a : "", b ? b : "");
}

/* Argument i (0 = the filter input / first argument) or keyword `name`; `def` if absent. */
static tv arg(const targs *a, int i, const char *name, tv def)
{
    if (i >= 0 && i < a->np) return a->pos[i];
    for (int k = 0; name && k < a->nk; k++)
        if (!strcmp(a->kname[k], name)) return a->kw[k];
    return def;
}

static tv undef_none(void) { return tv_undef(NULL); }
static bool has(tv v) { return v.t != TV_UNDEF || v.why != NULL; }

static tv need_str(tpl_render *r, tv v, const char *what)
{
    if (v.t != TV_STR) bfail(r, "TypeError: %s expects a string, got %s", what, sift__tv_typename(v));
    return v;
}

static bool is_pyspace(unsigned char c) { return c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f); }

tv sift__tpl_iterable(tpl_render *r, tv v)
{
    tpl_mem *m = &r->m;
    switch (v.t) {
    case TV_LIST: return v;
    case TV_UNDEF: return sift__tv_list(m, 1);
    case TV_DICT: case TV_NS: {
        tv l = sift__tv_list(m, v.d->n + 1);
        for (size_t i = 0; i < v.d->n; i++) sift__tv_push(m, l, v.d->k[i]);
        return l;
    }
    case TV_STR: {
        tv l = sift__tv_list(m, v.s->n + 1);
        size_t i = 0;
        while (i < v.s->n) {
            size_t j = i + 1;
            while (j < v.s->n && ((unsigned char)v.s->p[j] & 0xC0) == 0x80) j++;
            sift__tv_push(m, l, sift__tv_str(m, v.s->p + i, j - i));
            i = j;
        }
        return l;
    }
    default: bfail(r, "TypeError: '%s' object is not iterable%s", sift__tv_typename(v), NULL);
    }
}

/* ---- strings -------------------------------------------------------------------------------- */
static bool in_chars(tv chars, const char *p, size_t n)
{
    /* is the UTF-8 character p[0..n) one of chars? */
    const char *c = chars.s->p;
    size_t cn = chars.s->n, i = 0;
    while (i < cn) {
        size_t j = i + 1;
        while (j < cn && ((unsigned char)c[j] & 0xC0) == 0x80) j++;
        if (j - i == n && memcmp(c + i, p, n) == 0) return true;
        i = j;
    }
    return false;
}

static size_t char_len_at(const char *p, size_t n, size_t i)
{
    size_t j = i + 1;
    while (j < n && ((unsigned char)p[j] & 0xC0) == 0x80) j++;
    return j - i;
}

static size_t char_start_before(const char *p, size_t e)
{
    size_t i = e - 1;
    while (i > 0 && ((unsigned char)p[i] & 0xC0) == 0x80) i--;
    return i;
}

static tv strip(tpl_render *r, tv s, tv chars, bool left, bool right)
{
    size_t b = 0, e = s.s->n;
    const char *p = s.s->p;
    bool custom = chars.t == TV_STR;
    if (left)
        while (b < e) {
            size_t k = char_len_at(p, e, b);
            if (custom ? in_chars(chars, p + b, k) : (k == 1 && is_pyspace((unsigned char)p[b]))) b += k;
            else break;
        }
    if (right)
        while (e > b) {
            size_t st = char_start_before(p, e);
            if (st < b) st = b;
            size_t k = e - st;
            if (custom ? in_chars(chars, p + st, k) : (k == 1 && is_pyspace((unsigned char)p[st]))) e = st;
            else break;
        }
    return sift__tv_str(&r->m, p + b, e - b);
}

static tv str_split(tpl_render *r, tv s, tv sep, int64_t maxsplit)
{
    tpl_mem *m = &r->m;
    tv l = sift__tv_list(m, 4);
    const char *p = s.s->p;
    size_t n = s.s->n;
    if (sep.t != TV_STR) { /* runs of whitespace */
        size_t i = 0;
        int64_t splits = 0;
        while (i < n) {
            while (i < n && is_pyspace((unsigned char)p[i])) i++;
            if (i >= n) break;
            if (maxsplit >= 0 && splits >= maxsplit) {
                size_t e = n;
                while (e > i && is_pyspace((unsigned char)p[e - 1])) e--;
                sift__tv_push(m, l, sift__tv_str(m, p + i, e - i));
                break;
            }
            size_t j = i;
            while (j < n && !is_pyspace((unsigned char)p[j])) j++;
            sift__tv_push(m, l, sift__tv_str(m, p + i, j - i));
            splits++;
            i = j;
        }
        return l;
    }
    if (sep.s->n == 0) bfail(r, "ValueError: empty separator%s%s", NULL, NULL);
    size_t i = 0;
    int64_t splits = 0;
    for (;;) {
        const char *f = maxsplit >= 0 && splits >= maxsplit ? NULL : memmem(p + i, n - i, sep.s->p, sep.s->n);
        if (!f) {
            sift__tv_push(m, l, sift__tv_str(m, p + i, n - i));
            break;
        }
        sift__tv_push(m, l, sift__tv_str(m, p + i, (size_t)(f - (p + i))));
        i = (size_t)(f - p) + sep.s->n;
        splits++;
    }
    return l;
}

static tv str_replace(tpl_render *r, tv s, tv old, tv new_, int64_t count)
{
    tpl_mem *m = &r->m;
    tbuf b = {0};
    size_t i = 0, n = s.s->n;
    int64_t done = 0;
    if (old.s->n == 0) { /* Python inserts `new` between every character */
        size_t k = 0;
        while (k <= n) {
            if (count < 0 || done < count) { sift__tbuf_put(m, &b, new_.s->p, new_.s->n); done++; }
            if (k == n) break;
            size_t c = char_len_at(s.s->p, n, k);
            sift__tbuf_put(m, &b, s.s->p + k, c);
            k += c;
        }
        return sift__tbuf_value(m, &b);
    }
    while (i < n) {
        const char *f = (count >= 0 && done >= count) ? NULL : memmem(s.s->p + i, n - i, old.s->p, old.s->n);
        if (!f) break;
        sift__tbuf_put(m, &b, s.s->p + i, (size_t)(f - (s.s->p + i)));
        sift__tbuf_put(m, &b, new_.s->p, new_.s->n);
        i = (size_t)(f - s.s->p) + old.s->n;
        done++;
    }
    sift__tbuf_put(m, &b, s.s->p + i, n - i);
    return sift__tbuf_value(m, &b);
}

/* 0 lower, 1 upper, 2 capitalize, 3 jinja's title filter (words start after blanks and -({[<),
 * 4 Python's str.title (words start after any uncased character: '2x' -> '2X') */
static tv case_map(tpl_render *r, tv s, int mode)
{
    tv o = sift__tv_str(&r->m, s.s->p, s.s->n);
    char *p = ((tstr *)o.s)->p;
    bool word_start = true;
    for (size_t i = 0; i < o.s->n; i++) {
        char c = p[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        bool up = mode == 1 || (mode == 2 && i == 0) || (mode >= 3 && word_start);
        if (up && c >= 'a' && c <= 'z') p[i] = (char)(c - 32);
        else if (!up && mode != 1 && c >= 'A' && c <= 'Z') p[i] = (char)(c + 32);
        word_start = mode == 4 ? !(alpha || (unsigned char)c >= 0x80) : (is_pyspace((unsigned char)c) || strchr("-({[<", c) != NULL);
    }
    return o;
}

static bool starts_ends(tpl_render *r, tv s, tv x, bool end)
{
    if (x.t == TV_LIST) {
        for (size_t i = 0; i < x.l->n; i++)
            if (starts_ends(r, s, x.l->v[i], end)) return true;
        return false;
    }
    need_str(r, x, end ? "endswith" : "startswith");
    if (x.s->n > s.s->n) return false;
    sift__tpl_charge(r, x.s->n / TPL_BYTES_PER_STEP + 1);
    return memcmp(s.s->p + (end ? s.s->n - x.s->n : 0), x.s->p, x.s->n) == 0;
}

/* ---- methods ----------------------------------------------------------------------------------- */
/* str.rfind: the first match of the reversed needle in the reversed text, so the search is
 * memmem's linear one rather than a memcmp at every position from the end (quadratic). */
static const char *last_occurrence(tpl_render *r, const tstr *hay, const tstr *needle)
{
    if (needle->n > hay->n) return NULL;
    if (needle->n == 0) return hay->p + hay->n;
    char *h = sift__tpl_alloc(&r->arena, &r->fail, hay->n + needle->n);
    char *nd = h + hay->n;
    for (size_t i = 0; i < hay->n; i++) h[i] = hay->p[hay->n - 1 - i];
    for (size_t i = 0; i < needle->n; i++) nd[i] = needle->p[needle->n - 1 - i];
    const char *f = memmem(h, hay->n, nd, needle->n);
    return f ? hay->p + (hay->n - (size_t)(f - h) - needle->n) : NULL;
}

static int64_t int_arg(tpl_render *r, tv v, int64_t def)
{
    if (!has(v) || v.t == TV_NONE) return def;
    if (v.t == TV_INT) return v.i;
    if (v.t == TV_BOOL) return v.b;
    bfail(r, "TypeError: expected an integer, got %s%s", sift__tv_typename(v), NULL);
}

/* One replacement field's format spec, the subset of Python's mini-language templates use:
 * [[fill]align][sign][width][.precision][type], type one of s, d, f, F, % or none. Anything
 * else is refused with a message rather than ignored, so nothing renders differently from
 * jinja2 without saying so. */
static void format_spec(tpl_render *r, tbuf *b, tv v, const char *sp, size_t n)
{
    tpl_mem *m = &r->m;
    const char *e = sp + n;
    char fill = ' ', align = 0, sign = '-', type = 0;
    int width = 0, prec = -1;
    if (e - sp >= 2 && sp[1] && strchr("<>^=", sp[1])) { fill = sp[0]; align = sp[1]; sp += 2; }
    else if (sp < e && *sp && strchr("<>^=", *sp)) align = *sp++;
    if (sp < e && *sp && strchr("+- ", *sp)) sign = *sp++;
    if (sp < e && *sp == '0' && !align) { fill = '0'; align = '='; } /* {:05d}: zero padding after the sign */
    while (sp < e && *sp >= '0' && *sp <= '9' && width < 10000) width = width * 10 + (*sp++ - '0');
    if (sp < e && *sp == '.') {
        prec = 0;
        for (sp++; sp < e && *sp >= '0' && *sp <= '9' && prec < 100; sp++) prec = prec * 10 + (*sp - '0');
    }
    if (sp < e) type = *sp++;
    if (sp != e || (type && !strchr("sdfF%", type)) || width >= 10000 || prec >= 100)
        bfail(r, "ValueError: this format spec is not supported in str.format%s%s", NULL, NULL);
    tbuf t = {0};
    bool num = v.t == TV_INT || v.t == TV_FLOAT || v.t == TV_BOOL;
    if (type == 's' || (!type && !num)) {
        if (num && type == 's') bfail(r, "ValueError: Unknown format code 's' for object of type '%s'", sift__tv_typename(v), NULL);
        tv str = sift__tv_to_str(m, v);
        size_t len = str.s->n;
        if (prec >= 0) len = sift__utf8_offset(&r->m, str.s->p, str.s->n, (size_t)prec);
        sift__tbuf_put(m, &t, str.s->p, len);
        if (!align) align = '<';
    } else {
        if (!num) bfail(r, "ValueError: Unknown format code '%s' for a %s", (char[2]){type, 0}, sift__tv_typename(v));
        char tmp[400];
        double x = sift__tv_num(v);
        if (type == 'd') {
            if (v.t == TV_FLOAT) bfail(r, "ValueError: Unknown format code 'd' for object of type 'float'%s%s", NULL, NULL);
            snprintf(tmp, sizeof tmp, sign == '+' ? "%+lld" : sign == ' ' ? "% lld" : "%lld", (long long)(v.t == TV_BOOL ? v.b : v.i));
        } else if (type == 'f' || type == 'F' || type == '%') {
            if (type == '%') x *= 100;
            snprintf(tmp, sizeof tmp, sign == '+' ? "%+.*f" : sign == ' ' ? "% .*f" : "%.*f", prec < 0 ? 6 : prec, x);
            if (type == '%') strcat(tmp, "%");
        } else if (v.t == TV_FLOAT && prec < 0) { /* no type: str() of the number, with the sign */
            tv str = sift__tv_to_str(m, v);
            snprintf(tmp, sizeof tmp, "%s%.*s", sign == '+' && x >= 0 ? "+" : sign == ' ' && x >= 0 ? " " : "", (int)str.s->n, str.s->p);
        } else if (v.t != TV_FLOAT) {
            snprintf(tmp, sizeof tmp, sign == '+' ? "%+lld" : sign == ' ' ? "% lld" : "%lld", (long long)(v.t == TV_BOOL ? v.b : v.i));
        } else {
            bfail(r, "ValueError: this format spec is not supported in str.format%s%s", NULL, NULL);
        }
        sift__tbuf_puts(m, &t, tmp);
        if (!align) align = '>';
    }
    size_t chars = t.n ? sift__utf8_len(&r->m, t.p, t.n) : 0, pad = (size_t)width > chars ? (size_t)width - chars : 0;
    size_t left = align == '>' || align == '=' ? pad : align == '^' ? pad / 2 : 0;
    size_t signlen = align == '=' && t.n && (t.p[0] == '-' || t.p[0] == '+' || t.p[0] == ' ') ? 1 : 0;
    sift__tbuf_put(m, b, t.p, signlen);
    for (size_t i = 0; i < left; i++) sift__tbuf_put(m, b, &fill, 1);
    sift__tbuf_put(m, b, t.p + signlen, t.n - signlen);
    for (size_t i = left; i < pad; i++) sift__tbuf_put(m, b, &fill, 1);
}

/* Python's str.format for the forms templates use: {} (numbered automatically), {0}, {name},
 * each with an optional !s or !r conversion and format spec, and {{ / }} for braces. */
static tv str_format(tpl_render *r, tv self, const targs *a)
{
    tpl_mem *m = &r->m;
    tbuf b = {0};
    const char *p = self.s->p, *e = p + self.s->n;
    int next_auto = 0;
    while (p < e) {
        const char *q = p;
        while (q < e && *q != '{' && *q != '}') q++;
        sift__tbuf_put(m, &b, p, (size_t)(q - p));
        if (q == e) break;
        if (q + 1 < e && q[1] == q[0]) { /* {{ or }} */
            sift__tbuf_put(m, &b, q, 1);
            p = q + 2;
            continue;
        }
        if (*q == '}') bfail(r, "ValueError: Single '}' encountered in format string%s%s", NULL, NULL);
        const char *f = q + 1, *fe = f;
        while (fe < e && *fe != '}' && *fe != '!' && *fe != ':') fe++;
        char conv = 's';
        const char *close = fe;
        if (close < e && *close == '!') {
            if (close + 1 >= e || (close[1] != 's' && close[1] != 'r')) bfail(r, "ValueError: Unknown conversion specifier%s%s", NULL, NULL);
            conv = close[1];
            close += 2;
        }
        const char *spec = close;
        if (close < e && *close == ':') {
            spec = ++close;
            while (close < e && *close != '}') close++;
        }
        if (close >= e || *close != '}') bfail(r, "ValueError: expected '}' before end of string%s%s", NULL, NULL);
        tv v;
        size_t flen = (size_t)(fe - f);
        if (flen == 0 || (f[0] >= '0' && f[0] <= '9')) {
            int idx = 0;
            if (flen == 0) idx = next_auto++;
            else
                for (const char *d = f; d < fe; d++) {
                    if (*d < '0' || *d > '9' || idx > 100000) bfail(r, "ValueError: bad field name in format string%s%s", NULL, NULL);
                    idx = idx * 10 + (*d - '0');
                }
            if (idx >= a->np) bfail(r, "IndexError: tuple index out of range%s%s", NULL, NULL);
            v = a->pos[idx];
        } else {
            int k = 0;
            while (k < a->nk && !(strlen(a->kname[k]) == flen && memcmp(a->kname[k], f, flen) == 0)) k++;
            if (k == a->nk) {
                tv key = sift__tv_str(m, f, flen);
                bfail(r, "KeyError: '%s'%s", key.s->p, NULL);
            }
            v = a->kw[k];
        }
        if (conv == 'r') {
            tbuf rb = {0};
            sift__tv_write_repr(m, &rb, v);
            v = sift__tbuf_value(m, &rb);
        }
        if (close > spec) format_spec(r, &b, v, spec, (size_t)(close - spec));
        else if (conv == 'r' || v.t == TV_STR) sift__tbuf_put(m, &b, v.s->p, v.s->n);
        else sift__tv_write_str(m, &b, v);
        p = close + 1;
    }
    return sift__tbuf_value(m, &b);
}

static tv m_str(tpl_render *r, tv self, const targs *a, const char *name)
{
    tpl_mem *m = &r->m;
    if (!strcmp(name, "strip")) return strip(r, self, arg(a, 0, "chars", undef_none()), true, true);
    if (!strcmp(name, "lstrip")) return strip(r, self, arg(a, 0, "chars", undef_none()), true, false);
    if (!strcmp(name, "rstrip")) return strip(r, self, arg(a, 0, "chars", undef_none()), false, true);
    if (!strcmp(name, "split")) return str_split(r, self, arg(a, 0, "sep", undef_none()), int_arg(r, arg(a, 1, "maxsplit", undef_none()), -1));
    if (!strcmp(name, "startswith")) return tv_bool(starts_ends(r, self, arg(a, 0, NULL, tv_none()), false));
    if (!strcmp(name, "endswith")) return tv_bool(starts_ends(r, self, arg(a, 0, NULL, tv_none()), true));
    if (!strcmp(name, "replace"))
        return str_replace(r, self, need_str(r, arg(a, 0, NULL, tv_none()), "replace"), need_str(r, arg(a, 1, NULL, tv_none()), "replace"),
                           int_arg(r, arg(a, 2, "count", undef_none()), -1));
    if (!strcmp(name, "upper")) return case_map(r, self, 1);
    if (!strcmp(name, "lower")) return case_map(r, self, 0);
    if (!strcmp(name, "capitalize")) return case_map(r, self, 2);
    if (!strcmp(name, "title")) return case_map(r, self, 4);
    if (!strcmp(name, "find") || !strcmp(name, "index") || !strcmp(name, "count") || !strcmp(name, "rfind")) {
        tv x = need_str(r, arg(a, 0, NULL, tv_none()), name);
        if (!strcmp(name, "count")) {
            int64_t c = 0;
            if (x.s->n == 0) return tv_int((int64_t)sift__utf8_len(&r->m, self.s->p, self.s->n) + 1);
            sift__tpl_charge(r, self.s->n / TPL_BYTES_PER_STEP + 1);
            for (const char *p = self.s->p; (p = memmem(p, self.s->n - (size_t)(p - self.s->p), x.s->p, x.s->n)); p += x.s->n) c++;
            return tv_int(c);
        }
        const char *f = NULL;
        sift__tpl_charge(r, self.s->n / TPL_BYTES_PER_STEP + 1);
        if (name[0] == 'r') f = last_occurrence(r, self.s, x.s);
        else f = x.s->n == 0 ? self.s->p : memmem(self.s->p, self.s->n, x.s->p, x.s->n);
        if (!f && name[0] == 'i') bfail(r, "ValueError: substring not found%s%s", NULL, NULL);
        return tv_int(f ? (int64_t)sift__utf8_len(&r->m, self.s->p, (size_t)(f - self.s->p)) : -1);
    }
    if (!strcmp(name, "join")) {
        tv items = sift__tpl_iterable(r, arg(a, 0, NULL, tv_none()));
        tbuf b = {0};
        for (size_t i = 0; i < items.l->n; i++) {
            if (i) sift__tbuf_put(m, &b, self.s->p, self.s->n);
            sift__tbuf_put(m, &b, need_str(r, items.l->v[i], "join").s->p, items.l->v[i].s->n);
        }
        return sift__tbuf_value(m, &b);
    }
    if (!strcmp(name, "splitlines")) {
        tv l = sift__tv_list(m, 4);
        size_t i = 0, n = self.s->n;
        while (i < n) {
            size_t j = i;
            while (j < n && self.s->p[j] != '\n' && self.s->p[j] != '\r') j++;
            sift__tv_push(m, l, sift__tv_str(m, self.s->p + i, j - i));
            if (j < n && self.s->p[j] == '\r' && j + 1 < n && self.s->p[j + 1] == '\n') j++;
            i = j + 1;
        }
        return l;
    }
    if (!strcmp(name, "isdigit") || !strcmp(name, "isalpha") || !strcmp(name, "isspace") || !strcmp(name, "isalnum") ||
        !strcmp(name, "islower") || !strcmp(name, "isupper")) {
        if (self.s->n == 0) return tv_bool(false);
        bool any_cased = false;
        for (size_t i = 0; i < self.s->n; i++) {
            unsigned char c = (unsigned char)self.s->p[i];
            bool d = c >= '0' && c <= '9', lo = c >= 'a' && c <= 'z', up = c >= 'A' && c <= 'Z';
            any_cased |= lo || up;
            bool ok = name[2] == 'd' ? d : name[2] == 's' ? is_pyspace(c) : name[3] == 'l' && name[2] == 'a' ? (d || lo || up) :
                      name[2] == 'a' ? (lo || up) : name[2] == 'l' ? !up : !lo;
            if (!ok) return tv_bool(false);
        }
        if (name[2] == 'l' || name[2] == 'u') return tv_bool(any_cased);
        return tv_bool(true);
    }
    if (!strcmp(name, "format")) return str_format(r, self, a);
    if (!strcmp(name, "removeprefix") || !strcmp(name, "removesuffix")) {
        tv x = need_str(r, arg(a, 0, NULL, tv_none()), name);
        bool end = name[6] == 's';
        if (starts_ends(r, self, x, end))
            return end ? sift__tv_str(m, self.s->p, self.s->n - x.s->n) : sift__tv_str(m, self.s->p + x.s->n, self.s->n - x.s->n);
        return self;
    }
    bfail(r, "TypeError: str.%s is not supported%s", name, NULL);
}

static tv m_dict(tpl_render *r, tv self, const targs *a, const char *name)
{
    tpl_mem *m = &r->m;
    if (!strcmp(name, "get")) {
        tv *v = sift__tv_dict_get(&r->m, self.d, arg(a, 0, NULL, tv_none()));
        return v ? *v : arg(a, 1, NULL, tv_none());
    }
    if (!strcmp(name, "items") || !strcmp(name, "keys") || !strcmp(name, "values")) {
        tv l = sift__tv_list(m, self.d->n + 1);
        for (size_t i = 0; i < self.d->n; i++) {
            if (name[0] == 'k') sift__tv_push(m, l, self.d->k[i]);
            else if (name[0] == 'v') sift__tv_push(m, l, self.d->v[i]);
            else {
                tv pair = sift__tv_list(m, 2);
                pair.l->tuple = true;
                sift__tv_push(m, pair, self.d->k[i]);
                sift__tv_push(m, pair, self.d->v[i]);
                sift__tv_push(m, l, pair);
            }
        }
        return l;
    }
    bfail(r, "SecurityError: access to attribute '%s' of 'dict' object is unsafe.%s", name, NULL);
}

static tv m_list(tpl_render *r, tv self, const targs *a, const char *name)
{
    if (!strcmp(name, "index") || !strcmp(name, "count")) {
        tv x = arg(a, 0, NULL, tv_none());
        int64_t c = 0;
        sift__tpl_charge(r, self.l->n / 16);
        for (size_t i = 0; i < self.l->n; i++)
            if (sift__tv_eq(&r->m, self.l->v[i], x)) {
                if (name[0] == 'i') return tv_int((int64_t)i);
                c++;
            }
        if (name[0] == 'i') bfail(r, "ValueError: value is not in list%s%s", NULL, NULL);
        return tv_int(c);
    }
    bfail(r, "SecurityError: access to attribute '%s' of 'list' object is unsafe.%s", name, NULL);
}

static tv method_call(tpl_render *r, tv self, const targs *a);

static const char *const STR_METHODS[] = {"strip", "lstrip", "rstrip", "split", "startswith", "endswith", "replace", "upper",
    "lower", "capitalize", "title", "find", "rfind", "index", "count", "join", "splitlines", "isdigit", "isalpha", "isspace",
    "isalnum", "islower", "isupper", "removeprefix", "removesuffix", "format", NULL};
static const char *const DICT_METHODS[] = {"get", "items", "keys", "values", "update", "pop", "popitem", "setdefault", "clear", "copy", NULL};
static const char *const LIST_METHODS[] = {"index", "count", "append", "pop", "insert", "extend", "remove", "clear", "sort", "reverse", "copy", NULL};

static bool in_set(const char *const *set, const char *name)
{
    for (int i = 0; set[i]; i++)
        if (!strcmp(set[i], name)) return true;
    return false;
}

/* A bound method: self is [object, name] packed in a list. */
static tv bind(tpl_render *r, tv obj, const char *name)
{
    tfunc *f = sift__tpl_alloc(&r->arena, &r->fail, sizeof *f);
    memset(f, 0, sizeof *f);
    f->name = name;
    f->fn = method_call;
    f->self = sift__tv_list(&r->m, 2);
    sift__tv_push(&r->m, f->self, obj);
    sift__tv_push(&r->m, f->self, sift__tv_cstr(&r->m, name));
    tv v = {.t = TV_FUNC};
    v.fn = f;
    return v;
}

static tv method_call(tpl_render *r, tv self, const targs *a)
{
    tv obj = self.l->v[0];
    const char *name = self.l->v[1].s->p;
    if (obj.t == TV_STR) return m_str(r, obj, a, name);
    if (obj.t == TV_DICT) return m_dict(r, obj, a, name);
    return m_list(r, obj, a, name);
}

tv sift__tpl_getattr(tpl_render *r, tv obj, const char *name)
{
    tpl_mem *m = &r->m;
    if (obj.t == TV_UNDEF) sift__tpl_undefined_error(r, obj);
    if (obj.t == TV_DICT && in_set(DICT_METHODS, name)) return bind(r, obj, name);
    if (obj.t == TV_STR && in_set(STR_METHODS, name)) return bind(r, obj, name);
    if (obj.t == TV_LIST && in_set(LIST_METHODS, name)) return bind(r, obj, name);
    if (obj.t == TV_DICT || obj.t == TV_NS) {
        tv *v = sift__tv_dict_getc(obj.d, name);
        if (v) return *v;
    }
    tbuf b = {0};
    if (obj.t == TV_NONE) sift__tbuf_puts(m, &b, "'None'");
    else {
        sift__tbuf_puts(m, &b, "'");
        sift__tbuf_puts(m, &b, sift__tv_typename(obj));
        sift__tbuf_puts(m, &b, " object'");
    }
    sift__tbuf_puts(m, &b, " has no attribute '");
    sift__tbuf_puts(m, &b, name);
    sift__tbuf_puts(m, &b, "'");
    return tv_undef(b.p);
}

/* ---- filters ------------------------------------------------------------------------------------ */
#define IN (a->pos[0])

static tv f_length(tpl_render *r, tv self, const targs *a)
{
    switch (IN.t) {
    case TV_STR: return tv_int((int64_t)sift__utf8_len(&r->m, IN.s->p, IN.s->n));
    case TV_LIST: return tv_int((int64_t)IN.l->n);
    case TV_DICT: case TV_NS: return tv_int((int64_t)IN.d->n);
    case TV_UNDEF: return tv_int(0);
    default: bfail(r, "TypeError: object of type '%s' has no len()%s", sift__tv_typename(IN), NULL);
    }
}

static tv f_tojson(tpl_render *r, tv self, const targs *a)
{
    tv ind = arg(a, 1, "indent", tv_none()), seps = arg(a, -1, "separators", tv_none());
    tjson_opts o = {.ensure_ascii = sift__tv_truthy(arg(a, -1, "ensure_ascii", tv_bool(false))),
                    .sort_keys = sift__tv_truthy(arg(a, -1, "sort_keys", tv_bool(false))),
                    .indent = ind.t == TV_INT ? (int)(ind.i < 0 ? 0 : ind.i > 64 ? 64 : ind.i) : -1};
    o.item_sep = o.indent >= 0 ? "," : ", ";
    o.key_sep = ": ";
    if (seps.t == TV_LIST && seps.l->n == 2 && seps.l->v[0].t == TV_STR && seps.l->v[1].t == TV_STR) {
        o.item_sep = seps.l->v[0].s->p;
        o.key_sep = seps.l->v[1].s->p;
    }
    tbuf b = {0};
    sift__tv_write_json(&r->m, &b, IN, &o, 0);
    return sift__tbuf_value(&r->m, &b);
}

static tv f_trim(tpl_render *r, tv self, const targs *a)
{
    return strip(r, sift__tv_to_str(&r->m, IN), arg(a, 1, "chars", undef_none()), true, true);
}

static tv f_string(tpl_render *r, tv self, const targs *a) { return sift__tv_to_str(&r->m, IN); }
static tv f_upper(tpl_render *r, tv self, const targs *a) { return case_map(r, sift__tv_to_str(&r->m, IN), 1); }
static tv f_lower(tpl_render *r, tv self, const targs *a) { return case_map(r, sift__tv_to_str(&r->m, IN), 0); }
static tv f_capitalize(tpl_render *r, tv self, const targs *a) { return case_map(r, sift__tv_to_str(&r->m, IN), 2); }
static tv f_title(tpl_render *r, tv self, const targs *a) { return case_map(r, sift__tv_to_str(&r->m, IN), 3); }
static tv f_safe(tpl_render *r, tv self, const targs *a) { return IN; }

static tv f_default(tpl_render *r, tv self, const targs *a)
{
    bool boolean = sift__tv_truthy(arg(a, 2, "boolean", tv_bool(false)));
    if (IN.t == TV_UNDEF || (boolean && !sift__tv_truthy(IN))) return arg(a, 1, "default_value", sift__tv_cstr(&r->m, ""));
    return IN;
}

/* attribute= lookups of selectattr/map/sort/join: dotted paths, integer parts as indices. */
static tv attr_path(tpl_render *r, tv v, tv path)
{
    if (path.t == TV_INT) return v.t == TV_LIST && path.i >= 0 && (size_t)path.i < v.l->n ? v.l->v[path.i] : tv_undef("no such item");
    const char *p = need_str(r, path, "attribute").s->p;
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        char part[128];
        if (n >= sizeof part) n = sizeof part - 1;
        memcpy(part, p, n);
        part[n] = 0;
        if (v.t == TV_UNDEF) return v;
        if ((v.t == TV_DICT || v.t == TV_NS)) {
            tv *x = sift__tv_dict_getc(v.d, part);
            v = x ? *x : tv_undef("no such attribute");
        } else if (v.t == TV_LIST && part[0] >= '0' && part[0] <= '9') {
            long k = strtol(part, NULL, 10);
            v = (size_t)k < v.l->n ? v.l->v[k] : tv_undef("no such item");
        } else {
            v = sift__tpl_getattr(r, v, part);
        }
        p += n;
        if (*p == '.') p++;
    }
    return v;
}

static tv f_join(tpl_render *r, tv self, const targs *a)
{
    tv items = sift__tpl_iterable(r, IN), sep = arg(a, 1, "d", sift__tv_cstr(&r->m, "")), at = arg(a, 2, "attribute", tv_none());
    sep = sift__tv_to_str(&r->m, sep);
    tbuf b = {0};
    for (size_t i = 0; i < items.l->n; i++) {
        if (i) sift__tbuf_put(&r->m, &b, sep.s->p, sep.s->n);
        tv it = items.l->v[i];
        if (at.t != TV_NONE) it = attr_path(r, it, at);
        sift__tv_write_str(&r->m, &b, it);
    }
    return sift__tbuf_value(&r->m, &b);
}

static tv f_list(tpl_render *r, tv self, const targs *a)
{
    tv items = sift__tpl_iterable(r, IN), l = sift__tv_list(&r->m, items.l->n + 1);
    for (size_t i = 0; i < items.l->n; i++) sift__tv_push(&r->m, l, items.l->v[i]);
    return l;
}

static tv f_first(tpl_render *r, tv self, const targs *a)
{
    tv items = sift__tpl_iterable(r, IN);
    return items.l->n ? items.l->v[0] : tv_undef("No first item, sequence was empty.");
}

static tv f_last(tpl_render *r, tv self, const targs *a)
{
    tv items = sift__tpl_iterable(r, IN);
    return items.l->n ? items.l->v[items.l->n - 1] : tv_undef("No last item, sequence was empty.");
}

static tv f_items(tpl_render *r, tv self, const targs *a)
{
    if (IN.t == TV_UNDEF) return sift__tv_list(&r->m, 1);
    if (IN.t != TV_DICT && IN.t != TV_NS) bfail(r, "TypeError: Can only get item pairs from a mapping.%s%s", NULL, NULL);
    tv d = IN;
    d.t = TV_DICT;
    return m_dict(r, d, a, "items");
}

static int cmp_for_sort(tpl_render *r, tv x, tv y, bool case_sensitive)
{
    if (!case_sensitive && x.t == TV_STR && y.t == TV_STR) {
        x = case_map(r, x, 0);
        y = case_map(r, y, 0);
    }
    return sift__tv_cmp(&r->m, x, y);
}

/* Stable insertion sort by key (lists in templates are short). */
static void sort_values(tpl_render *r, tv *v, tv *keys, size_t n, bool reverse, bool cs)
{
    for (size_t i = 1; i < n; i++) {
        tv x = v[i], kx = keys[i];
        size_t j = i;
        while (j > 0) {
            sift__tpl_charge(r, 1);
            int c = cmp_for_sort(r, keys[j - 1], kx, cs);
            if (reverse ? c >= 0 : c <= 0) break;
            v[j] = v[j - 1];
            keys[j] = keys[j - 1];
            j--;
        }
        v[j] = x;
        keys[j] = kx;
    }
}

static tv f_dictsort(tpl_render *r, tv self, const targs *a)
{
    if (IN.t != TV_DICT && IN.t != TV_NS) bfail(r, "TypeError: dictsort expects a mapping, got %s%s", sift__tv_typename(IN), NULL);
    bool cs = sift__tv_truthy(arg(a, 1, "case_sensitive", tv_bool(false)));
    tv by = arg(a, 2, "by", sift__tv_cstr(&r->m, "key"));
    bool reverse = sift__tv_truthy(arg(a, 3, "reverse", tv_bool(false)));
    tv d = IN;
    d.t = TV_DICT;
    tv items = m_dict(r, d, a, "items");
    size_t n = items.l->n;
    tv *keys = sift__tpl_alloc(&r->arena, &r->fail, (n + 1) * sizeof(tv));
    bool by_value = by.t == TV_STR && !strcmp(by.s->p, "value");
    for (size_t i = 0; i < n; i++) keys[i] = items.l->v[i].l->v[by_value ? 1 : 0];
    sort_values(r, items.l->v, keys, n, reverse, cs);
    return items;
}

static tv f_sort(tpl_render *r, tv self, const targs *a)
{
    tv l = f_list(r, self, a);
    bool reverse = sift__tv_truthy(arg(a, 1, "reverse", tv_bool(false)));
    bool cs = sift__tv_truthy(arg(a, 2, "case_sensitive", tv_bool(false)));
    tv at = arg(a, 3, "attribute", tv_none());
    tv *keys = sift__tpl_alloc(&r->arena, &r->fail, (l.l->n + 1) * sizeof(tv));
    for (size_t i = 0; i < l.l->n; i++) keys[i] = at.t != TV_NONE ? attr_path(r, l.l->v[i], at) : l.l->v[i];
    sort_values(r, l.l->v, keys, l.l->n, reverse, cs);
    return l;
}

static tv f_reverse(tpl_render *r, tv self, const targs *a)
{
    if (IN.t == TV_STR) {
        tv chars = sift__tpl_iterable(r, IN);
        tbuf b = {0};
        for (size_t i = chars.l->n; i-- > 0;) sift__tbuf_put(&r->m, &b, chars.l->v[i].s->p, chars.l->v[i].s->n);
        return sift__tbuf_value(&r->m, &b);
    }
    tv items = sift__tpl_iterable(r, IN), l = sift__tv_list(&r->m, items.l->n + 1);
    for (size_t i = items.l->n; i-- > 0;) sift__tv_push(&r->m, l, items.l->v[i]);
    return l;
}

/* select/reject/selectattr/rejectattr: the test (default: truthiness) on each item or attribute.
 * none is an empty sequence here and in map, as llama.cpp's engine takes it (jinja2 raises):
 * Functionary v3.1's template filters `tools`, which it sets to none when a chat has none. */
static tv select_common(tpl_render *r, const targs *a, bool attr, bool keep)
{
    if (IN.t == TV_NONE) return sift__tv_list(&r->m, 1);
    tv items = sift__tpl_iterable(r, IN), out = sift__tv_list(&r->m, items.l->n + 1);
    int ti = attr ? 2 : 1;
    tv at = attr ? arg(a, 1, NULL, tv_none()) : tv_none();
    tv test = arg(a, ti, NULL, undef_none());
    targs ta = {0};
    if (a->np > ti + 1) {
        ta.np = a->np - ti - 1;
        ta.pos = a->pos + ti + 1;
    }
    if (has(test)) need_str(r, test, "select test name");
    if (has(test) && !sift__tpl_has_test(test.s->p)) bfail(r, "TemplateRuntimeError: No test named '%s'.%s", test.s->p, NULL);
    for (size_t i = 0; i < items.l->n; i++) {
        tv v = attr ? attr_path(r, items.l->v[i], at) : items.l->v[i];
        bool ok = has(test) ? sift__tpl_test(r, test.s->p, v, &ta) : sift__tv_truthy(v);
        if (ok == keep) sift__tv_push(&r->m, out, items.l->v[i]);
    }
    return out;
}

static tv f_selectattr(tpl_render *r, tv self, const targs *a) { return select_common(r, a, true, true); }
static tv f_rejectattr(tpl_render *r, tv self, const targs *a) { return select_common(r, a, true, false); }
static tv f_select(tpl_render *r, tv self, const targs *a) { return select_common(r, a, false, true); }
static tv f_reject(tpl_render *r, tv self, const targs *a) { return select_common(r, a, false, false); }

static tv f_map(tpl_render *r, tv self, const targs *a)
{
    if (IN.t == TV_NONE) return sift__tv_list(&r->m, 1); /* (as select_common) */
    tv items = sift__tpl_iterable(r, IN), out = sift__tv_list(&r->m, items.l->n + 1);
    tv at = arg(a, -1, "attribute", undef_none());
    if (has(at)) {
        tv def = arg(a, -1, "default", undef_none());
        for (size_t i = 0; i < items.l->n; i++) {
            tv v = attr_path(r, items.l->v[i], at);
            sift__tv_push(&r->m, out, v.t == TV_UNDEF && has(def) ? def : v);
        }
        return out;
    }
    tv name = need_str(r, arg(a, 1, NULL, tv_none()), "map");
    tpl_builtin_fn fn = sift__tpl_filter(name.s->p);
    if (!fn) bfail(r, "TemplateRuntimeError: No filter named '%s'.%s", name.s->p, NULL);
    targs fa = {0};
    fa.np = a->np - 1;
    fa.pos = sift__tpl_alloc(&r->arena, &r->fail, (size_t)(fa.np + 1) * sizeof(tv));
    for (int k = 2; k < a->np; k++) fa.pos[k - 1] = a->pos[k];
    fa.nk = a->nk;
    fa.kname = a->kname;
    fa.kw = a->kw;
    for (size_t i = 0; i < items.l->n; i++) {
        fa.pos[0] = items.l->v[i];
        sift__tv_push(&r->m, out, fn(r, tv_none(), &fa));
    }
    return out;
}

static tv f_replace(tpl_render *r, tv self, const targs *a)
{
    tv s = sift__tv_to_str(&r->m, IN);
    return str_replace(r, s, sift__tv_to_str(&r->m, arg(a, 1, "old", tv_none())), sift__tv_to_str(&r->m, arg(a, 2, "new", tv_none())),
                       int_arg(r, arg(a, 3, "count", undef_none()), -1));
}

static tv f_int(tpl_render *r, tv self, const targs *a)
{
    tv def = arg(a, 1, "default", tv_int(0));
    switch (IN.t) {
    case TV_INT: return IN;
    case TV_BOOL: return tv_int(IN.b);
    case TV_FLOAT: return isfinite(IN.f) && fabs(IN.f) < 9.2e18 ? tv_int((int64_t)IN.f) : def;
    case TV_STR: {
        char *e;
        long long v = strtoll(IN.s->p, &e, 10);
        if (e != IN.s->p) {
            while (is_pyspace((unsigned char)*e)) e++;
            if (!*e) return tv_int(v);
        }
        double d = strtod(IN.s->p, &e);
        if (e != IN.s->p && !*e && isfinite(d) && fabs(d) < 9.2e18) return tv_int((int64_t)d);
        return def;
    }
    default: return def;
    }
}

static tv f_float(tpl_render *r, tv self, const targs *a)
{
    tv def = arg(a, 1, "default", tv_float(0.0));
    if (sift__tv_is_num(IN)) return tv_float(sift__tv_num(IN));
    if (IN.t == TV_STR) {
        char *e;
        double d = strtod(IN.s->p, &e);
        if (e != IN.s->p && !*e) return tv_float(d);
    }
    return def;
}

static tv f_abs(tpl_render *r, tv self, const targs *a)
{
    if (IN.t == TV_INT) return tv_int(IN.i < 0 && IN.i != INT64_MIN ? -IN.i : IN.i);
    if (IN.t == TV_FLOAT) return tv_float(fabs(IN.f));
    bfail(r, "TypeError: bad operand type for abs(): '%s'%s", sift__tv_typename(IN), NULL);
}

static tv f_round(tpl_render *r, tv self, const targs *a)
{
    int64_t prec = int_arg(r, arg(a, 1, "precision", tv_int(0)), 0);
    tv method = arg(a, 2, "method", sift__tv_cstr(&r->m, "common"));
    if (!sift__tv_is_num(IN)) bfail(r, "TypeError: round expects a number, got %s%s", sift__tv_typename(IN), NULL);
    if (prec < -15) prec = -15;
    if (prec > 15) prec = 15;
    double x = sift__tv_num(IN), k = pow(10.0, (double)prec), v = x * k;
    const char *mm = method.t == TV_STR ? method.s->p : "common";
    v = !strcmp(mm, "ceil") ? ceil(v) : !strcmp(mm, "floor") ? floor(v) : round(v);
    return tv_float(v / k);
}

static tv f_unique(tpl_render *r, tv self, const targs *a)
{
    tv items = sift__tpl_iterable(r, IN), out = sift__tv_list(&r->m, items.l->n + 1);
    for (size_t i = 0; i < items.l->n; i++) {
        bool seen = false;
        sift__tpl_charge(r, out.l->n / 16 + 1);
        for (size_t j = 0; j < out.l->n && !seen; j++) seen = sift__tv_eq(&r->m, out.l->v[j], items.l->v[i]);
        if (!seen) sift__tv_push(&r->m, out, items.l->v[i]);
    }
    return out;
}

static tv f_sum(tpl_render *r, tv self, const targs *a)
{
    tv items = sift__tpl_iterable(r, IN), at = arg(a, 1, "attribute", tv_none());
    tv acc = arg(a, 2, "start", tv_int(0));
    for (size_t i = 0; i < items.l->n; i++) {
        tv v = at.t != TV_NONE ? attr_path(r, items.l->v[i], at) : items.l->v[i];
        if (!sift__tv_is_num(v) || !sift__tv_is_num(acc)) bfail(r, "TypeError: sum of non-numbers%s%s", NULL, NULL);
        if (acc.t != TV_FLOAT && v.t != TV_FLOAT) acc = tv_int((acc.t == TV_BOOL ? acc.b : acc.i) + (v.t == TV_BOOL ? v.b : v.i));
        else acc = tv_float(sift__tv_num(acc) + sift__tv_num(v));
    }
    return acc;
}

static tv minmax(tpl_render *r, const targs *a, bool max)
{
    tv items = sift__tpl_iterable(r, IN);
    if (!items.l->n) return tv_undef("No aggregated item, sequence was empty.");
    bool cs = sift__tv_truthy(arg(a, 1, "case_sensitive", tv_bool(false)));
    tv best = items.l->v[0];
    for (size_t i = 1; i < items.l->n; i++) {
        int c = cmp_for_sort(r, items.l->v[i], best, cs);
        if (max ? c > 0 : c < 0) best = items.l->v[i];
    }
    return best;
}

static tv f_min(tpl_render *r, tv self, const targs *a) { return minmax(r, a, false); }
static tv f_max(tpl_render *r, tv self, const targs *a) { return minmax(r, a, true); }

static tv f_indent(tpl_render *r, tv self, const targs *a)
{
    tv s = sift__tv_to_str(&r->m, IN), w = arg(a, 1, "width", tv_int(4));
    bool first = sift__tv_truthy(arg(a, 2, "first", tv_bool(false))), blank = sift__tv_truthy(arg(a, 3, "blank", tv_bool(false)));
    tv pad;
    if (w.t == TV_STR) pad = w;
    else {
        int64_t n = int_arg(r, w, 4);
        if (n < 0) n = 0;
        if (n > 256) n = 256;
        char sp[257];
        memset(sp, ' ', (size_t)n);
        pad = sift__tv_str(&r->m, sp, (size_t)n);
    }
    tv lines = str_split(r, s, sift__tv_cstr(&r->m, "\n"), -1);
    tbuf b = {0};
    for (size_t i = 0; i < lines.l->n; i++) {
        tv ln = lines.l->v[i];
        if (i) sift__tbuf_put(&r->m, &b, "\n", 1);
        if ((i > 0 || first) && (blank || ln.s->n)) sift__tbuf_put(&r->m, &b, pad.s->p, pad.s->n);
        sift__tbuf_put(&r->m, &b, ln.s->p, ln.s->n);
    }
    return sift__tbuf_value(&r->m, &b);
}

static tv f_wordcount(tpl_render *r, tv self, const targs *a)
{
    return tv_int((int64_t)str_split(r, sift__tv_to_str(&r->m, IN), tv_none(), -1).l->n);
}

static tv f_center(tpl_render *r, tv self, const targs *a)
{
    tv s = sift__tv_to_str(&r->m, IN);
    int64_t w = int_arg(r, arg(a, 1, "width", tv_int(80)), 80), len = (int64_t)sift__utf8_len(&r->m, s.s->p, s.s->n);
    if (w > 4096) w = 4096;
    if (w <= len) return s;
    int64_t left = (w - len) / 2 + ((w - len) & w & 1), right = w - len - left;
    tbuf b = {0};
    for (int64_t i = 0; i < left; i++) sift__tbuf_put(&r->m, &b, " ", 1);
    sift__tbuf_put(&r->m, &b, s.s->p, s.s->n);
    for (int64_t i = 0; i < right; i++) sift__tbuf_put(&r->m, &b, " ", 1);
    return sift__tbuf_value(&r->m, &b);
}

/* The %-operator of Python on strings (`'%s' % x` and the `format` filter): %s %r %d %i %f
 * %% only. a->pos[0] is the format, the values follow. */
static tv f_format(tpl_render *r, tv self, const targs *a)
{
    tv fmt = need_str(r, IN, "format");
    tbuf b = {0};
    int k = 1;
    for (size_t i = 0; i < fmt.s->n; i++) {
        char c = fmt.s->p[i];
        if (c != '%') { sift__tbuf_put(&r->m, &b, &c, 1); continue; }
        char d = i + 1 < fmt.s->n ? fmt.s->p[++i] : 0;
        if (d == '%') { sift__tbuf_put(&r->m, &b, "%", 1); continue; }
        if (k >= a->np) bfail(r, "TypeError: not enough arguments for format string%s%s", NULL, NULL);
        tv v = a->pos[k++];
        if (d == 's') sift__tv_write_str(&r->m, &b, v);
        else if (d == 'r') sift__tv_write_repr(&r->m, &b, v);
        else if ((d == 'd' || d == 'i') && sift__tv_is_num(v)) {
            char tmp[32];
            snprintf(tmp, sizeof tmp, "%lld", (long long)(v.t == TV_FLOAT ? (int64_t)v.f : v.t == TV_BOOL ? v.b : v.i));
            sift__tbuf_puts(&r->m, &b, tmp);
        } else if (d == 'f' && sift__tv_is_num(v)) {
            char tmp[64];
            snprintf(tmp, sizeof tmp, "%f", sift__tv_num(v));
            sift__tbuf_puts(&r->m, &b, tmp);
        } else bfail(r, "ValueError: unsupported format character%s%s", NULL, NULL);
    }
    if (k < a->np) bfail(r, "TypeError: not all arguments converted during string formatting%s%s", NULL, NULL);
    return sift__tbuf_value(&r->m, &b);
}

tv sift__tpl_percent(tpl_render *r, tv fmt, tv values)
{
    targs a = {0};
    bool many = values.t == TV_LIST && values.l->tuple;
    a.np = 1 + (many ? (int)values.l->n : 1);
    a.pos = sift__tpl_alloc(&r->arena, &r->fail, (size_t)a.np * sizeof(tv));
    a.pos[0] = fmt;
    if (many) memcpy(a.pos + 1, values.l->v, values.l->n * sizeof(tv));
    else a.pos[1] = values;
    return f_format(r, tv_none(), &a);
}

static tv f_escape(tpl_render *r, tv self, const targs *a)
{
    tv s = sift__tv_to_str(&r->m, IN);
    tbuf b = {0};
    for (size_t i = 0; i < s.s->n; i++) {
        char c = s.s->p[i];
        const char *e = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&#34;" : c == '\'' ? "&#39;" : NULL;
        if (e) sift__tbuf_puts(&r->m, &b, e);
        else sift__tbuf_put(&r->m, &b, &c, 1);
    }
    return sift__tbuf_value(&r->m, &b);
}

static tv f_batch(tpl_render *r, tv self, const targs *a)
{
    tv items = sift__tpl_iterable(r, IN), out = sift__tv_list(&r->m, 4), cur = tv_none();
    int64_t n = int_arg(r, arg(a, 1, "linecount", tv_int(1)), 1);
    tv fill = arg(a, 2, "fill_with", undef_none());
    if (n <= 0) bfail(r, "ValueError: batch size must be positive%s%s", NULL, NULL);
    for (size_t i = 0; i < items.l->n; i++) {
        if (cur.t == TV_NONE || (int64_t)cur.l->n == n) {
            cur = sift__tv_list(&r->m, (size_t)(n < 64 ? n : 64));
            sift__tv_push(&r->m, out, cur);
        }
        sift__tv_push(&r->m, cur, items.l->v[i]);
    }
    if (has(fill) && cur.t == TV_LIST)
        while ((int64_t)cur.l->n < n) sift__tv_push(&r->m, cur, fill);
    return out;
}

static tv f_attr(tpl_render *r, tv self, const targs *a)
{
    return sift__tpl_getattr(r, IN, need_str(r, arg(a, 1, NULL, tv_none()), "attr").s->p);
}

typedef struct { const char *name; tpl_builtin_fn fn; } named_fn;
static const named_fn FILTERS[] = {
    {"length", f_length}, {"count", f_length}, {"tojson", f_tojson}, {"trim", f_trim}, {"join", f_join},
    {"string", f_string}, {"default", f_default}, {"d", f_default}, {"upper", f_upper}, {"lower", f_lower},
    {"dictsort", f_dictsort}, {"list", f_list}, {"last", f_last}, {"first", f_first}, {"selectattr", f_selectattr},
    {"rejectattr", f_rejectattr}, {"select", f_select}, {"reject", f_reject}, {"map", f_map}, {"items", f_items},
    {"replace", f_replace}, {"capitalize", f_capitalize}, {"title", f_title}, {"int", f_int}, {"float", f_float},
    {"safe", f_safe}, {"format", f_format}, {"abs", f_abs}, {"round", f_round}, {"unique", f_unique},
    {"sort", f_sort}, {"reverse", f_reverse}, {"sum", f_sum}, {"min", f_min}, {"max", f_max}, {"indent", f_indent},
    {"wordcount", f_wordcount}, {"center", f_center}, {"escape", f_escape}, {"e", f_escape}, {"batch", f_batch},
    {"attr", f_attr}, {NULL, NULL}};

tpl_builtin_fn sift__tpl_filter(const char *name)
{
    for (int i = 0; FILTERS[i].name; i++)
        if (!strcmp(FILTERS[i].name, name)) return FILTERS[i].fn;
    return NULL;
}

/* ---- tests ---------------------------------------------------------------------------------------- */
static const char *const TESTS[] = {"defined", "undefined", "none", "string", "mapping", "iterable", "sequence", "number",
    "integer", "float", "boolean", "true", "false", "even", "odd", "divisibleby", "in", "eq", "equalto", "==", "ne", "!=",
    "lt", "lessthan", "<", "gt", "greaterthan", ">", "le", "<=", "ge", ">=", "sameas", "callable", "lower", "upper",
    "escaped", NULL};

bool sift__tpl_has_test(const char *name) { return in_set(TESTS, name); }

bool sift__tpl_test(tpl_render *r, const char *name, tv v, const targs *a)
{
    tv x = arg(a, 0, NULL, tv_none());
    if (!strcmp(name, "defined")) return v.t != TV_UNDEF;
    if (!strcmp(name, "undefined")) return v.t == TV_UNDEF;
    if (!strcmp(name, "none")) return v.t == TV_NONE;
    if (!strcmp(name, "string")) return v.t == TV_STR;
    if (!strcmp(name, "mapping")) return v.t == TV_DICT || v.t == TV_NS;
    if (!strcmp(name, "iterable")) return v.t == TV_LIST || v.t == TV_DICT || v.t == TV_STR || v.t == TV_NS || v.t == TV_UNDEF;
    if (!strcmp(name, "sequence")) return v.t == TV_LIST || v.t == TV_DICT || v.t == TV_STR || v.t == TV_NS || v.t == TV_UNDEF;
    if (!strcmp(name, "number")) return sift__tv_is_num(v);
    if (!strcmp(name, "integer")) return v.t == TV_INT;
    if (!strcmp(name, "float")) return v.t == TV_FLOAT;
    if (!strcmp(name, "boolean")) return v.t == TV_BOOL;
    if (!strcmp(name, "true")) return v.t == TV_BOOL && v.b;
    if (!strcmp(name, "false")) return v.t == TV_BOOL && !v.b;
    if (!strcmp(name, "callable")) return v.t == TV_FUNC || v.t == TV_MACRO;
    if (!strcmp(name, "escaped")) return false;
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        if (v.t != TV_STR) return false;
        tv c = case_map(r, v, name[0] == 'l' ? 0 : 1);
        return sift__tv_eq(&r->m, c, v);
    }
    if (!strcmp(name, "even") || !strcmp(name, "odd") || !strcmp(name, "divisibleby")) {
        if (v.t != TV_INT && v.t != TV_BOOL) bfail(r, "TypeError: test '%s' needs an integer%s", name, NULL);
        int64_t i = v.t == TV_BOOL ? v.b : v.i;
        if (name[0] == 'e') return i % 2 == 0;
        if (name[0] == 'o') return i % 2 != 0;
        int64_t d = int_arg(r, x, 1);
        if (d == 0) bfail(r, "ZeroDivisionError: integer division or modulo by zero%s%s", NULL, NULL);
        return d == -1 || i % d == 0;
    }
    if (!strcmp(name, "in")) {
        if (x.t == TV_STR) return v.t == TV_STR && (v.s->n == 0 || memmem(x.s->p, x.s->n, v.s->p, v.s->n));
        if (x.t == TV_LIST) {
            for (size_t i = 0; i < x.l->n; i++)
                if (sift__tv_eq(&r->m, x.l->v[i], v)) return true;
            return false;
        }
        if (x.t == TV_DICT || x.t == TV_NS) return sift__tv_dict_get(&r->m, x.d, v) != NULL;
        bfail(r, "TypeError: argument of type '%s' is not iterable%s", sift__tv_typename(x), NULL);
    }
    if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) return sift__tv_eq(&r->m, v, x);
    if (!strcmp(name, "ne") || !strcmp(name, "!=")) return !sift__tv_eq(&r->m, v, x);
    if (!strcmp(name, "sameas")) {
        if (v.t != x.t) return false;
        if (v.t == TV_NONE || v.t == TV_UNDEF) return true;
        if (v.t == TV_BOOL) return v.b == x.b;
        if (v.t == TV_INT) return v.i == x.i;
        if (v.t == TV_STR) return v.s == x.s;
        return v.l == x.l;
    }
    int c = sift__tv_cmp(&r->m, v, x);
    if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<")) return c < 0;
    if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">")) return c > 0;
    if (!strcmp(name, "le") || !strcmp(name, "<=")) return c <= 0;
    return c >= 0;
}

/* ---- globals ----------------------------------------------------------------------------------------- */
static tv g_range(tpl_render *r, tv self, const targs *a)
{
    int64_t start = 0, stop, stepv = 1;
    if (a->np == 1) stop = int_arg(r, a->pos[0], 0);
    else if (a->np >= 2) {
        start = int_arg(r, a->pos[0], 0);
        stop = int_arg(r, a->pos[1], 0);
        if (a->np >= 3) stepv = int_arg(r, a->pos[2], 1);
    } else bfail(r, "TypeError: range expected at least 1 argument, got 0%s%s", NULL, NULL);
    if (stepv == 0) bfail(r, "ValueError: range() arg 3 must not be zero%s%s", NULL, NULL);
    __int128 count = stepv > 0 ? (stop > start ? ((__int128)stop - start + stepv - 1) / stepv : 0)
                               : (start > stop ? ((__int128)start - stop - stepv - 1) / -stepv : 0);
    if (count > 100000) bfail(r, "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).%s%s", NULL, NULL);
    tv l = sift__tv_list(&r->m, (size_t)count + 1);
    for (int64_t i = 0; i < (int64_t)count; i++) sift__tv_push(&r->m, l, tv_int(start + i * stepv));
    return l;
}

static tv g_namespace(tpl_render *r, tv self, const targs *a)
{
    tv d = sift__tv_dict(&r->m, 4);
    for (int i = 0; i < a->np; i++)
        if (a->pos[i].t == TV_DICT)
            for (size_t k = 0; k < a->pos[i].d->n; k++) sift__tv_dict_set(&r->m, d.d, a->pos[i].d->k[k], a->pos[i].d->v[k]);
    for (int k = 0; k < a->nk; k++) sift__tv_dict_set(&r->m, d.d, sift__tv_cstr(&r->m, a->kname[k]), a->kw[k]);
    d.t = TV_NS;
    return d;
}

static tv g_dict(tpl_render *r, tv self, const targs *a)
{
    tv d = g_namespace(r, self, a);
    d.t = TV_DICT;
    return d;
}

static tv g_raise(tpl_render *r, tv self, const targs *a)
{
    tv m = sift__tv_to_str(&r->m, arg(a, 0, "message", tv_none()));
    sift__tpl_fail(&r->fail, SIFT_E_INVAL, "TemplateError: %s", m.s->p);
}

static tv g_strftime_now(tpl_render *r, tv self, const targs *a)
{
    tv fmt = need_str(r, arg(a, 0, "format", tv_none()), "strftime_now");
    time_t t = (time_t)r->now;
    struct tm tm;
    if (r->now_local) localtime_r(&t, &tm);
    else gmtime_r(&t, &tm);
    char out[512];
    size_t n = fmt.s->n ? strftime(out, sizeof out, fmt.s->p, &tm) : 0;
    return sift__tv_str(&r->m, out, n);
}

static void def_fn(tpl_render *r, tscope *s, const char *name, tpl_builtin_fn fn)
{
    tfunc *f = sift__tpl_alloc(&r->arena, &r->fail, sizeof *f);
    memset(f, 0, sizeof *f);
    f->name = name;
    f->fn = fn;
    tv v = {.t = TV_FUNC};
    v.fn = f;
    sift__tpl_scope_set(r, s, name, v);
}

void sift__tpl_define_globals(tpl_render *r, tscope *s)
{
    def_fn(r, s, "range", g_range);
    def_fn(r, s, "namespace", g_namespace);
    def_fn(r, s, "dict", g_dict);
    def_fn(r, s, "raise_exception", g_raise);
    def_fn(r, s, "strftime_now", g_strftime_now);
}
