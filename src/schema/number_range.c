/*
 * number_range.c - the JSON numbers within decimal bounds (minimum / maximum /
 * exclusiveMinimum / exclusiveMaximum on "type": "number"), exactly, digit by digit.
 *
 * A number is split by sign: the non-negative part [max(lo, 0), hi] and "-" followed by the
 * magnitudes [max(-hi, 0), -lo]. For magnitudes in [a.f, b.g] (a, b integers, f, g fraction
 * digits without trailing zeros) the integer part i decides:
 *   a < i < b      any fraction            (sift__gbnf_put_int_range for the i)
 *   i = a, i = b   the fraction compared with f and / or g, digit by digit
 * A fraction is the digit string d after the '.', worth 0.d; frac() below writes the
 * non-empty d within the bounds by their first digit: a digit above f's first (below g's)
 * frees that side, an equal one recurses on the rest, trailing zeros included ("1.50" is
 * 1.5). No exponent form is generated (a subset: 1e2 is valid where 100 is, but is not
 * written); "-0" is accepted when 0 is within the bounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/gbnf_writer.h"

typedef struct {
    const char *f; /* the remaining fraction digits of the bound ("" = 0) */
    int on;        /* 0: no bound on this side (or freed), 1: compare */
    bool strict;
} fbound;

static char dig(const char *s) { return *s ? *s : '0'; }

/* May the rest of the fraction be empty (worth 0) under these bounds? */
static bool empty_ok(fbound lo, fbound hi)
{
    bool ok = true;
    if (lo.on) ok &= lo.strict ? false : !*lo.f; /* 0 >= f only when f is 0; 0 > f never */
    if (hi.on) ok &= hi.strict ? *hi.f != 0 : true;
    return ok;
}

/* The non-empty digit strings within the bounds, as alternatives; false when there are none. */
static bool frac(sift__gbnf_sbuf *b, fbound lo, fbound hi)
{
    if (lo.on && !*lo.f && !lo.strict) lo.on = 0; /* d >= 0: always */
    if (hi.on && !*hi.f) {                        /* d <= 0: zeros only; d < 0: nothing */
        if (hi.strict || lo.on) return false;
        sift__gbnf_sb_puts(b, "\"0\"+");
        return true;
    }
    if (lo.on && !*lo.f && !hi.on) { /* d > 0: a non-zero digit somewhere */
        sift__gbnf_sb_puts(b, "\"0\"* [1-9] [0-9]*");
        return true;
    }
    bool any = false;
    int run = -1; /* start of a run of digits that free both sides */
    for (int c = 0; c <= 10; c++) {
        int sl = 2, sh = 2; /* 2 free, 1 recurse, 0 fail */
        if (c < 10) {
            if (lo.on) sl = c > dig(lo.f) - '0' ? 2 : c == dig(lo.f) - '0' ? 1 : 0;
            if (hi.on) sh = c < dig(hi.f) - '0' ? 2 : c == dig(hi.f) - '0' ? 1 : 0;
        }
        bool free = c < 10 && sl == 2 && sh == 2;
        if (free && run < 0) run = c;
        if (!free && run >= 0) {
            sift__gbnf_sb_printf(b, "%s", any ? " | " : "");
            if (run == c - 1) sift__gbnf_sb_printf(b, "[%d] [0-9]*", run);
            else sift__gbnf_sb_printf(b, "[%d-%d] [0-9]*", run, c - 1);
            any = true;
            run = -1;
        }
        if (c == 10 || free || !sl || !sh) continue;
        fbound nl = lo, nh = hi;
        if (sl == 2) nl.on = 0;
        else if (lo.on) nl.f = *lo.f ? lo.f + 1 : lo.f;
        if (sh == 2) nh.on = 0;
        else if (hi.on) nh.f = *hi.f ? hi.f + 1 : hi.f;
        bool e = empty_ok(nl, nh);
        sift__gbnf_sbuf sub = {0};
        bool n = frac(&sub, nl, nh);
        if (e || n) {
            sift__gbnf_sb_printf(b, "%s\"%d\"", any ? " | " : "", c);
            if (n) sift__gbnf_sb_printf(b, " (%s)%s", sub.s, e ? "?" : "");
            any = true;
        }
        sift__gbnf_sb_free(&sub);
    }
    return any;
}

/* i followed by a fraction within the bounds; false when nothing fits */
static bool with_frac(sift__gbnf_sbuf *b, const char *i, fbound lo, fbound hi, bool first)
{
    bool e = empty_ok(lo, hi);
    sift__gbnf_sbuf sub = {0};
    bool n = frac(&sub, lo, hi);
    if (e || n) {
        sift__gbnf_sb_printf(b, "%s\"%s\"", first ? "" : " | ", i);
        if (n) sift__gbnf_sb_printf(b, " (\".\" (%s))%s", sub.s, e ? "?" : "");
    }
    sift__gbnf_sb_free(&sub);
    return e || n;
}

/* split "12.50" into 12 and "5" (trailing zeros dropped) */
static bool split(const char *t, long long *ip, char *fr, size_t cap)
{
    char *end;
    *ip = strtoll(t, &end, 10);
    fr[0] = 0;
    if (*end == '.') {
        size_t n = strlen(end + 1);
        if (n + 1 > cap) return false;
        memcpy(fr, end + 1, n + 1);
        while (n && fr[n - 1] == '0') fr[--n] = 0;
    } else if (*end) {
        return false;
    }
    return true;
}

/* magnitudes within [lo, hi] (hi absent: unbounded, at most 16 integer digits) */
static bool magnitudes(sift__gbnf_sbuf *b, const char *lo, bool lo_strict, const char *hi, bool hi_strict)
{
    long long a, bb = 0;
    char f[64], g[64];
    if (!split(lo, &a, f, sizeof f) || (hi && !split(hi, &bb, g, sizeof g))) return false;
    if (hi && (bb < a || (bb == a && strcmp(g, f) < 0))) return false;
    bool any = false;
    char num[32];
    snprintf(num, sizeof num, "%lld", a);
    fbound L = {f, 1, lo_strict}, H = {hi ? g : "", hi ? 1 : 0, hi_strict}, none = {"", 0, false};
    if (hi && bb == a) return with_frac(b, num, L, H, true);
    any |= with_frac(b, num, L, none, !any);
    if (!hi || bb > a + 1) {
        sift__gbnf_sb_printf(b, "%s(", any ? " | " : "");
        sift__gbnf_put_int_range(b, true, a + 1, hi != NULL, hi ? bb - 1 : 0);
        sift__gbnf_sb_puts(b, ") (\".\" [0-9]+)?");
        any = true;
    }
    if (hi) {
        snprintf(num, sizeof num, "%lld", bb);
        sift__gbnf_sbuf t = {0};
        if (with_frac(&t, num, none, H, true)) {
            sift__gbnf_sb_printf(b, "%s%s", any ? " | " : "", t.s);
            any = true;
        }
        sift__gbnf_sb_free(&t);
    }
    return any;
}

bool sift__gbnf_put_number_range(sift__gbnf_sbuf *b, const char *lo, bool lo_strict, const char *hi, bool hi_strict)
{
    bool any = false;
    sift__gbnf_sbuf t = {0};
    /* non-negative part: [max(lo, 0), hi] */
    bool lo_neg = lo && lo[0] == '-', hi_neg = hi && hi[0] == '-';
    if (!hi_neg) {
        const char *l = lo && !lo_neg ? lo : "0";
        bool ls = lo && !lo_neg ? lo_strict : false;
        if (magnitudes(&t, l, ls, hi, hi_strict)) {
            sift__gbnf_sb_printf(b, "(%s)", t.s);
            any = true;
        }
        sift__gbnf_sb_free(&t);
    }
    /* negative part: "-" magnitudes in [max(-hi, 0), -lo] */
    if (!lo || lo_neg) {
        const char *l = hi_neg ? hi + 1 : "0";
        bool ls = hi_neg ? hi_strict : hi && hi_strict && strtod(hi, NULL) == 0; /* "-0" is 0, not below it */
        if (magnitudes(&t, l, ls, lo ? lo + 1 : NULL, lo_strict)) {
            sift__gbnf_sb_printf(b, "%s\"-\" (%s)", any ? " | " : "", t.s);
            any = true;
        }
        sift__gbnf_sb_free(&t);
    }
    return any;
}
