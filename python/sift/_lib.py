"""The C side: libsift.so opened with cffi in ABI mode, and the declarations of include/sift.h
this package uses (copied by hand: ABI mode parses no headers, so the struct layouts here
must match sift.h field for field; tests/test_layout.py checks them against the library).

The library is found, in order, through:
  SIFT_LIBRARY   the full path of libsift.so (e.g. build/libsift.so in a checkout)
  the package    sift/libsift.so, copied in by `pip install ./python` from the checkout's
                 build/libsift.so (setup.py; `bash scripts/run` builds it)
  the checkout   build/libsift.so of the checkout the package was installed from (built
                 after the install)
  the loader     "libsift.so.0" on the system path: an install prefix's lib folder in
                 LD_LIBRARY_PATH, or a prefix ldconfig knows
"""
import os

from cffi import FFI

ffi = FFI()
ffi.cdef(
    """
typedef int32_t sift_token;
typedef struct sift_error { int status; char msg[256]; } sift_error;
const char *sift_version(void);
const char *sift_status_str(int status);

typedef struct sift_workspace sift_workspace;
typedef struct sift_candidates {
    sift_token *id; float *logit; float *p;
    size_t size; size_t capacity; int64_t selected; bool sorted; uint32_t flags;
    sift_workspace *ws;
} sift_candidates;
const float *sift_candidates_probs(sift_candidates *cand);
void sift_candidates_sort(sift_candidates *cand);

typedef struct sift_sampler sift_sampler;
const char *sift_sampler_name(const sift_sampler *smpl);
void sift_sampler_accept(sift_sampler *smpl, sift_token token);
void sift_sampler_apply(sift_sampler *smpl, sift_candidates *cand);
void sift_sampler_reset(sift_sampler *smpl);
sift_sampler *sift_sampler_clone(const sift_sampler *smpl);
void sift_sampler_free(sift_sampler *smpl);

typedef struct sift_chain sift_chain;
typedef struct sift_chain_params { bool no_perf; } sift_chain_params;
void sift_chain_free(sift_chain *chain);
int32_t sift_chain_n(const sift_chain *chain);
sift_sampler *sift_chain_get(const sift_chain *chain, int32_t i);
sift_token sift_chain_sample(sift_chain *chain, const float *logits, int32_t n_vocab);
int sift_chain_fill(sift_chain *chain, const float *logits, int32_t n_vocab, sift_error *err);
sift_token sift_chain_apply(sift_chain *chain, sift_candidates *cand);
void sift_chain_accept(sift_chain *chain, sift_token token);
void sift_chain_reset(sift_chain *chain);
sift_chain *sift_chain_clone(const sift_chain *chain);
sift_candidates *sift_chain_candidates(sift_chain *chain);
int sift_chain_describe(const sift_chain *chain, char *buf, size_t cap);

typedef struct sift_logit_bias { sift_token token; float bias; } sift_logit_bias;

typedef struct sift_vocab_view {
    int32_t n_tokens;
    const char *const *piece;
    const uint32_t *piece_len;
    const uint8_t *attr;
    int32_t (*tokenize)(void *ctx, const char *text, size_t len, sift_token *out, int32_t cap);
    void *tokenize_ctx;
    uint64_t identity;
} sift_vocab_view;

typedef struct sift_chain_env {
    int32_t n_vocab; const sift_vocab_view *vocab; sift_token eot; uint32_t default_seed;
} sift_chain_env;
sift_chain *sift_chain_from_spec(const char *spec, const sift_chain_env *env, sift_error *err);

typedef struct sift_sampling_params {
    uint32_t seed; int32_t n_prev; int32_t n_probs; int32_t min_keep; int32_t top_k;
    float top_p; float min_p; float xtc_probability; float xtc_threshold; float typ_p; float temp;
    float dynatemp_range; float dynatemp_exponent;
    int32_t penalty_last_n; float penalty_repeat; float penalty_freq; float penalty_present;
    float dry_multiplier; float dry_base; int32_t dry_allowed_length; int32_t dry_penalty_last_n;
    float adaptive_target; float adaptive_decay;
    int32_t mirostat; float top_n_sigma; float mirostat_tau; float mirostat_eta;
    bool ignore_eos; bool no_perf;
    char dry_sequence_breakers[16][64]; int32_t n_dry_sequence_breakers;
    int32_t samplers[32]; int32_t n_samplers;
    const sift_logit_bias *logit_bias; size_t n_logit_bias;
} sift_sampling_params;
sift_sampling_params sift_sampling_default_params(void);
int sift_sampling_set_samplers(sift_sampling_params *params, const char *names, sift_error *err);
sift_chain *sift_chain_from_params(const sift_sampling_params *params, const sift_chain_env *env, sift_error *err);
int sift_sampling_params_validate(const sift_sampling_params *params, int32_t n_vocab, sift_error *err);
void sift_sampling_params_set_context(sift_sampling_params *params, int32_t n_ctx);

typedef struct sift_vocab sift_vocab;
sift_vocab *sift_vocab_load(const char *path, sift_error *err);
void sift_vocab_free(sift_vocab *vocab);
int32_t sift_vocab_n_tokens(const sift_vocab *vocab);
sift_token sift_vocab_bos(const sift_vocab *vocab);
sift_token sift_vocab_eos(const sift_vocab *vocab);
sift_token sift_vocab_eot(const sift_vocab *vocab);
bool sift_vocab_is_eog(const sift_vocab *vocab, sift_token token);
const sift_token *sift_vocab_suppress_tokens(const sift_vocab *vocab, int32_t *n);
int32_t sift_tokenize(const sift_vocab *vocab, const char *text, size_t len, sift_token *tokens,
                      int32_t cap, bool add_special, bool parse_special);
int32_t sift_token_to_piece(const sift_vocab *vocab, sift_token token, char *buf, int32_t len,
                            int32_t lstrip, bool special);
int32_t sift_detokenize(const sift_vocab *vocab, const sift_token *tokens, int32_t n_tokens, char *text,
                        int32_t cap, bool remove_special, bool unparse_special);
int sift_vocab_view_get(const sift_vocab *vocab, sift_vocab_view *view);

sift_sampler *sift_sampler_init_grammar(const sift_vocab_view *vocab, const char *gbnf, const char *root,
                                        sift_error *err);
bool sift_grammar_sampler_allows(sift_sampler *smpl, sift_token token);
int sift_grammar_sampler_status(const sift_sampler *smpl);
sift_token sift_grammar_chain_sample(sift_sampler *grammar, sift_chain *chain, const float *logits,
                                     int32_t n_vocab, int mode, bool *refused);
char *sift_json_schema_to_grammar(const char *schema, size_t len, uint32_t flags, sift_error *err);

typedef struct sift_model sift_model;
typedef struct sift_context sift_context;
sift_model *sift_model_load(const char *path, sift_error *err);
void sift_model_free(sift_model *model);
const sift_vocab *sift_model_vocab(const sift_model *model);
int32_t sift_model_n_vocab(const sift_model *model);
typedef struct sift_context_params {
    uint32_t n_ctx; uint32_t n_batch; uint32_t n_seq_max; int32_t n_threads; int32_t n_threads_batch; int isa;
} sift_context_params;
sift_context_params sift_context_default_params(void);
sift_context *sift_context_new(const sift_model *model, sift_context_params params, sift_error *err);
void sift_context_free(sift_context *ctx);
uint32_t sift_n_ctx_seq(const sift_context *ctx);
typedef struct sift_batch {
    int32_t n_tokens; sift_token *token; int32_t *pos; int32_t *n_seq_id; int32_t **seq_id; int8_t *logits;
    int32_t capacity; int32_t seq_capacity;
} sift_batch;
int sift_decode(sift_context *ctx, const sift_batch *batch, sift_error *err);
float *sift_get_logits_ith(sift_context *ctx, int32_t i);
void sift_kv_clear(sift_context *ctx);

void free(void *p);
"""
)

TOKEN_NULL = -1
DEFAULT_SEED = 0xFFFFFFFF


class SiftError(RuntimeError):
    """A libsift call failed; the message is libsift's (it says where and what)."""

    def __init__(self, msg, status=None):
        super().__init__(msg)
        self.status = status


def _checkout():
    """The checkout this package was installed from (setup.py writes _checkout.py), or None."""
    try:
        from ._checkout import CHECKOUT
    except ImportError:  # run from the source folder, not installed
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        CHECKOUT = here if os.path.isfile(os.path.join(here, "scripts", "run")) else None
    return CHECKOUT


def _open():
    path = os.environ.get("SIFT_LIBRARY")
    if path:
        if not os.path.isfile(path):
            raise OSError(f"SIFT_LIBRARY={path}: no such file (it must be the full path of libsift.so)")
        return ffi.dlopen(path)
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libsift.so")
    if os.path.isfile(bundled):
        return ffi.dlopen(bundled)
    checkout = _checkout()
    built = os.path.join(checkout, "build", "libsift.so") if checkout else None
    if built and os.path.isfile(built):
        return ffi.dlopen(built)
    try:
        return ffi.dlopen("libsift.so.0")
    except OSError as e:
        if checkout:
            how = (f"build it: `bash scripts/run` in {checkout} (or `cmake --build {os.path.join(checkout, 'build')} "
                   f"--target sift_shared`), which writes {built}; this package loads it from there")
        else:
            how = "set SIFT_LIBRARY to its full path (e.g. build/libsift.so of a checkout)"
        raise OSError(f"cannot find libsift.so: {how}; or put an install prefix's lib folder in LD_LIBRARY_PATH") from e


lib = _open()


def new_error():
    return ffi.new("sift_error *")


def raise_error(err, what):
    msg = ffi.string(err.msg).decode("utf-8", "replace") if err.msg[0] != b"\0" else "failed"
    if not msg.startswith(what + ":"):  # libsift's messages often name the thing already
        msg = f"{what}: {msg}"
    raise SiftError(msg, int(err.status))
