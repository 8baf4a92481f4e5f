/*
 * grammar.h - the compiled form of a GBNF grammar, shared by the parser (gbnf.c), the
 * matcher (stacks.c, match.c), the token-mask engine (mask.c) and the sampler.
 *
 * A grammar is one flat array of 32-bit elements, like llama.cpp's rule vectors: each rule
 * is its alternatives one after another, every alternative but the last closed by ALT and
 * the last by END. An element is a type (top 4 bits) and a value (low 28 bits):
 *
 *     REF r        the rule r (a non-terminal)
 *     CLASS c      one code point of character class c (literals are one-character classes)
 *     TOKEN t      exactly the whole token t        (GBNF <[t]> or <text>)
 *     TOKEN_NOT t  any one whole token other than t (GBNF !<[t]>)
 *
 * A position is an index into that array; a parse stack is a list of positions, each "what
 * to do next" at one nesting level (see stacks.h). Repetitions `x{m,n}`, `*`, `+`, `?` are
 * rewritten into helper rules exactly as llama.cpp does, so stacks look like llama.cpp's.
 *
 * Character classes are compiled against one partition of the code points into "symbols":
 * maximal intervals that no class boundary splits. Every class is then a bitset over
 * symbols, and so are the FIRST and FOLLOW sets of rules, which the mask engine uses to
 * prune. Most grammars have a few dozen symbols (every ASCII character they name, the
 * ranges, "everything else").
 */
#ifndef SIFT_GRAMMAR_GRAMMAR_H
#define SIFT_GRAMMAR_GRAMMAR_H

#include <stdio.h>

#include "grammar/alloc_bits_utf8.h"
#include "sift.h"

enum {
    GX_END = 0,
    GX_ALT = 1,
    GX_REF = 2,
    GX_CLASS = 3,
    GX_TOKEN = 4,
    GX_TOKEN_NOT = 5,
};
#define GX_TYPE(e) ((uint32_t)(e) >> 28)
#define GX_VAL(e) ((uint32_t)(e) & 0x0FFFFFFFu)
#define GX_MAKE(t, v) (((uint32_t)(t) << 28) | ((uint32_t)(v) & 0x0FFFFFFFu))
#define GX_MAX_VALUE 0x0FFFFFFFu

static inline bool sift__gx_is_end(uint32_t e) { return GX_TYPE(e) <= GX_ALT; }
static inline bool sift__gx_is_terminal(uint32_t e) { return GX_TYPE(e) >= GX_CLASS; }

struct sift_grammar {
    uint32_t *elems;
    uint32_t n_elems;

    uint32_t n_rules;
    uint32_t *rule_start;  /* first element of each rule */
    char **rule_name;      /* "name" or "name_N" for helper rules */
    uint32_t root;         /* start rule */
    uint32_t *rule_of;     /* per element: the rule it belongs to */

    /* character classes: sorted, merged, non-negated ranges [lo, hi] (negation is applied
     * at compile time against 0..0x10FFFF) */
    uint32_t n_classes;
    uint32_t *class_off;   /* [n_classes + 1] into ranges (pairs) */
    uint32_t *ranges;      /* lo, hi, lo, hi, ... */

    /* the symbol partition */
    uint32_t n_syms, sym_words;
    uint32_t *sym_lo;      /* [n_syms + 1]: symbol s is [sym_lo[s], sym_lo[s+1]); last = 0x110000 */
    uint32_t ascii_sym[128];
    uint64_t *class_syms;  /* [n_classes][sym_words] */

    uint8_t *rule_nullable;
    uint64_t *rule_first;  /* [n_rules][sym_words]: symbols a rule can start with */
    uint64_t *rule_follow; /* [n_rules][sym_words]: symbols that can follow a rule */

    bool has_tokens;       /* any TOKEN / TOKEN_NOT element */
    uint32_t max_token;    /* largest token id named (for checks against a vocabulary) */
};

/* symbol of a code point (binary search above ASCII) */
static inline uint32_t sift__gx_sym_of(const sift_grammar *g, uint32_t cp)
{
    if (cp < 128) return g->ascii_sym[cp];
    /* the top symbol first: in a JSON grammar it holds most of Unicode (CJK tokens) */
    if (cp >= g->sym_lo[g->n_syms - 1]) return g->n_syms - 1;
    uint32_t lo = 0, hi = g->n_syms; /* sym_lo[lo] <= cp < sym_lo[hi] */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (g->sym_lo[mid] <= cp) lo = mid;
        else hi = mid;
    }
    return lo;
}

static inline const uint64_t *sift__gx_class_bits(const sift_grammar *g, uint32_t cls)
{
    return g->class_syms + (size_t)cls * g->sym_words;
}

/* does the terminal element e accept code point cp? (false for TOKEN elements) */
static inline bool sift__gx_elem_accepts_sym(const sift_grammar *g, uint32_t e, uint32_t sym)
{
    return GX_TYPE(e) == GX_CLASS && sift__gx_bit(sift__gx_class_bits(g, GX_VAL(e)), sym);
}

/* The symbols [*s_lo, *s_hi] that intersect code points [lo, hi]. */
void sift__gx_syms_in_range(const sift_grammar *g, uint32_t lo, uint32_t hi, uint32_t *s_lo, uint32_t *s_hi);

/* gbnf_sets.c, for the parser: rule_nullable (a fixpoint, fastest when rules come users
 * before parts), then rule_first in `order` (each rule after its left corners) and
 * rule_follow. SIFT_OK or SIFT_E_NOMEM (err set). */
int sift__gx_compute_nullable(sift_grammar *g, sift_error *err);
int sift__gx_compute_first_follow(sift_grammar *g, const uint32_t *order, sift_error *err);

/* Print the compiled rules in GBNF (helper rules included) - for debugging and tests. */
void sift__gx_grammar_dump(const sift_grammar *g, FILE *f);

#endif
