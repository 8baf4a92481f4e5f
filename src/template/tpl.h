/*
 * tpl.h - the chat-template (Jinja) engine's internal interface: arena, values, syntax tree.
 *
 * Why it looks like this:
 *   - Everything a parse or a render allocates comes from one arena (tpl_arena) and is
 *     freed at once. Values are then plain structs with pointers into the arena: no
 *     reference counts, nothing to release on an error path.
 *   - Errors unwind with longjmp to the one entry point (parse or render), which frees the
 *     arena and reports the message. With no malloc'd memory outside the arena between
 *     those points, an error anywhere (a filter's bad argument, raise_exception, a budget
 *     exceeded) needs no cleanup code in between.
 *   - A render is bounded: arena bytes, output bytes, evaluation steps and call depth all
 *     have limits, so a hostile template gets an error, never a hang or a crash.
 *   - Values follow Python's data model as jinja2 sees it (str of UTF-8 text, int, float,
 *     bool, None, list, dict keeping insertion order, Undefined with the reason it is
 *     undefined), because the goal is to render exactly what Python jinja2 renders.
 */
#ifndef SIFT_TEMPLATE_TPL_H
#define SIFT_TEMPLATE_TPL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sift.h"

typedef struct tpl_render tpl_render;

/* ---- arena ------------------------------------------------------------------------------- */
typedef struct tpl_chunk tpl_chunk;
typedef struct tpl_arena {
    tpl_chunk *head;
    size_t used, limit; /* bytes taken from malloc, and the most allowed */
    sift_template_pool *pool; /* a budget shared with other renders (NULL: none); `used` is reserved from it */
} tpl_arena;

/* The failure context: where to jump and what went wrong. */
typedef struct tpl_fail {
    jmp_buf jb;
    sift_error *err;
    int line;          /* the line being executed or parsed, for messages */
    sift_status status;
    char msg[SIFT_ERROR_MSG_MAX];
} tpl_fail;

void *sift__tpl_alloc(tpl_arena *a, tpl_fail *f, size_t n);
void sift__tpl_arena_free(tpl_arena *a);
_Noreturn void sift__tpl_fail(tpl_fail *f, sift_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- values -------------------------------------------------------------------------------- */
typedef enum {
    TV_UNDEF, TV_NONE, TV_BOOL, TV_INT, TV_FLOAT, TV_STR, TV_LIST, TV_DICT, TV_NS, TV_FUNC, TV_MACRO
} tv_type;

typedef struct tstr { size_t n; char p[]; } tstr; /* UTF-8, NUL-terminated */
typedef struct tlist tlist;
typedef struct tdict tdict;
typedef struct tfunc tfunc;

typedef struct tv {
    tv_type t;
    union {
        bool b;
        int64_t i;
        double f;
        const tstr *s;
        tlist *l;   /* TV_LIST */
        tdict *d;   /* TV_DICT, TV_NS */
        tfunc *fn;  /* TV_FUNC, TV_MACRO */
        const char *why; /* TV_UNDEF: "'x' is undefined", "'dict object' has no attribute 'y'" */
    };
} tv;

struct tlist { size_t n, cap; tv *v; bool tuple; /* prints as (a, b) */ };
/* Keys in insertion order (k, v, and each key's hash in h); from TDICT_INDEX_MIN keys on, an
 * open-addressing index (slots: entry + 1, 0 empty) finds a key without a scan, so a client's
 * message with many keys costs a linear render, not a quadratic one. */
struct tdict { size_t n, cap; tv *k, *v; uint32_t *h, *slots; size_t nslots; };
#define TDICT_INDEX_MIN 8

typedef struct tnode tnode;
typedef struct tscope tscope;

/* Call arguments: positional, then keyword. */
typedef struct targs {
    int np, nk;
    tv *pos;
    const char **kname;
    tv *kw;
} targs;

typedef tv (*tpl_builtin_fn)(tpl_render *r, tv self, const targs *a);
struct tfunc {
    const char *name;
    tpl_builtin_fn fn; /* TV_FUNC */
    tv self;           /* bound object (a method's string, list, dict; loop.cycle's loop) */
    const tnode *macro; /* TV_MACRO */
    tscope *closure;
    const tnode *caller_body; /* a call block's body: what caller() renders */
    tscope *caller_scope;
    const tnode *caller_params;
};

static inline tv tv_undef(const char *why) { tv v = {.t = TV_UNDEF}; v.why = why; return v; }
static inline tv tv_none(void) { tv v = {.t = TV_NONE}; v.i = 0; return v; }
static inline tv tv_bool(bool b) { tv v = {.t = TV_BOOL}; v.b = b; return v; }
static inline tv tv_int(int64_t i) { tv v = {.t = TV_INT}; v.i = i; return v; }
static inline tv tv_float(double f) { tv v = {.t = TV_FLOAT}; v.f = f; return v; }

/* The memory and failure context every value operation needs, and the render its work is
 * charged to (NULL while parsing: nothing is charged). */
typedef struct tpl_mem { tpl_arena *arena; tpl_fail *fail; tpl_render *r; } tpl_mem;

/* Work on bytes (comparing, scanning, copying strings) costs one step per this many bytes, so
 * `s|length` on a 16 MiB string is two million steps, not one. */
#define TPL_BYTES_PER_STEP 8
/* Count work done inside one value operation (no-op without a render). */
void sift__tpl_mem_charge(tpl_mem *m, uint64_t steps);
static inline void sift__tpl_mem_charge_bytes(tpl_mem *m, size_t n) { sift__tpl_mem_charge(m, n / TPL_BYTES_PER_STEP + 1); }

tv sift__tv_str(tpl_mem *m, const char *p, size_t n);
tv sift__tv_cstr(tpl_mem *m, const char *p);
tv sift__tv_list(tpl_mem *m, size_t cap);
tv sift__tv_dict(tpl_mem *m, size_t cap);
void sift__tv_push(tpl_mem *m, tv list, tv item);
tv *sift__tv_dict_get(tpl_mem *m, const tdict *d, tv key);
tv *sift__tv_dict_getc(const tdict *d, const char *key);
void sift__tv_dict_set(tpl_mem *m, tdict *d, tv key, tv val);

bool sift__tv_truthy(tv v);
/* Python's ==, charged one step per element visited (and per TPL_BYTES_PER_STEP bytes); the
 * same list, dict or string compared with itself is equal at once (Python's identity rule for
 * containers), which is what keeps a list sharing itself 64 levels deep from being 2^64 work. */
bool sift__tv_eq(tpl_mem *m, tv a, tv b);
/* <0, 0, >0; fails (TypeError) for values Python cannot order. */
int sift__tv_cmp(tpl_mem *m, tv a, tv b);
const char *sift__tv_typename(tv v);
bool sift__tv_is_num(tv v);
double sift__tv_num(tv v);

/* A growable byte buffer in the arena, with a hard cap. */
typedef struct tbuf { char *p; size_t n, cap, max; } tbuf;
void sift__tbuf_put(tpl_mem *m, tbuf *b, const char *p, size_t n);
void sift__tbuf_puts(tpl_mem *m, tbuf *b, const char *s);
tv sift__tbuf_value(tpl_mem *m, tbuf *b);

/* Python's str() and repr() of a value, appended to b. */
void sift__tv_write_str(tpl_mem *m, tbuf *b, tv v);
void sift__tv_write_repr(tpl_mem *m, tbuf *b, tv v);
tv sift__tv_to_str(tpl_mem *m, tv v);
void sift__tv_float_repr(double f, char out[40]);

/* json.dumps(v, ensure_ascii, indent (<0: none), separators, sort_keys). */
typedef struct tjson_opts { bool ensure_ascii, sort_keys; int indent; const char *item_sep, *key_sep; } tjson_opts;
void sift__tv_write_json(tpl_mem *m, tbuf *b, tv v, const tjson_opts *o, int depth);
/* JSON text -> value; fails with a message on malformed input. */
tv sift__tv_from_json(tpl_mem *m, const char *p, size_t n);

/* UTF-8 helpers: characters in a string; byte offset of character i. */
size_t sift__utf8_len(tpl_mem *m, const char *p, size_t n);
size_t sift__utf8_offset(tpl_mem *m, const char *p, size_t n, size_t ci);

/* ---- syntax tree ------------------------------------------------------------------------- */
typedef enum {
    /* expressions */
    N_LIT, N_NAME, N_LIST, N_TUPLE, N_DICT, N_ATTR, N_ITEM, N_SLICE, N_CALL, N_KWARG, N_FILTER, N_TEST,
    N_UNARY, N_BINOP, N_AND, N_OR, N_NOT, N_COND, N_COMPARE,
    /* statements */
    N_BODY, N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_CALLBLOCK, N_FILTERBLOCK,
    N_BREAK, N_CONTINUE, N_PARAM
} tnode_kind;

struct tnode {
    tnode_kind kind;
    int line;
    int op;            /* operator token / negated test / slice parts present */
    const char *name;  /* names, attributes, filters, tests, macro names */
    tv lit;            /* N_LIT, N_TEXT */
    tnode *a, *b, *c, *d;
    tnode **kids;      /* list items, call args, body statements, params, compare operands */
    int nkids;
};

/* ops (tnode.op) */
enum { OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
       OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN, OP_NEG, OP_POS };

typedef struct tpl_parsed {
    tpl_arena arena;
    tnode *root;
} tpl_parsed;

/* Parse src into p (its arena holds the tree); SIFT_OK or SIFT_E_PARSE with err set. */
sift_status sift__tpl_parse(tpl_parsed *p, const char *src, size_t len, sift_error *err);

/* ---- the renderer's state, for builtins ------------------------------------------------- */
struct tpl_render {
    tpl_mem m;
    tpl_arena arena;
    tpl_fail fail;
    tbuf *out;
    uint64_t steps, max_steps;
    uint64_t next_poll;       /* steps at which the clock and the abort callback are next looked at */
    uint64_t deadline_ns;     /* CLOCK_MONOTONIC; 0: none */
    uint32_t max_time_ms;
    bool (*abort_cb)(void *data);
    void *abort_data;
    int depth, max_depth, edepth;
    size_t max_output;
    int64_t now;
    bool now_local; /* the current time, shown in local time as datetime.now() does */
    tscope *globals;
    const tdict *ctx; /* the context JSON's object: its keys are variables */
};

/* Builtins (builtins.c). */
tpl_builtin_fn sift__tpl_filter(const char *name);
bool sift__tpl_has_test(const char *name);
bool sift__tpl_test(tpl_render *r, const char *name, tv v, const targs *a);
/* getattr(obj, name) as jinja2's sandbox does it: methods of str/list/dict, then items. */
tv sift__tpl_getattr(tpl_render *r, tv obj, const char *name);
tv sift__tpl_call(tpl_render *r, tv fn, const targs *a);
void sift__tpl_define_globals(tpl_render *r, tscope *s);
void sift__tpl_scope_set(tpl_render *r, tscope *s, const char *name, tv v);
tv sift__tpl_iterable(tpl_render *r, tv v); /* a list of the items `for` would visit */
/* Count k steps of work done inside one operation (sorting, scanning a list). */
void sift__tpl_charge(tpl_render *r, uint64_t k);
/* Python's `fmt % values` for strings (values: one value or a tuple). */
tv sift__tpl_percent(tpl_render *r, tv fmt, tv values);
tv sift__tpl_undefined_error(tpl_render *r, tv u) __attribute__((noreturn));

#endif
