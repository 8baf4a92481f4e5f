/*
 * cli_generate.c - the `sift` generate / quantize / mkmodel / bench --model command lines, run as a
 * user runs them (fork + exec of the real binary, stdout and stderr captured):
 *
 *   - `sift -m stories260K -p "Once upon a time" -n 128`: a story and the perf summary;
 *   - `sift generate --chain greedy()` and the reference sampled chain, on every reference
 *     prompt of both shared models: stdout is byte for byte llama.cpp's continuation;
 *   - the same sampled stream through llama.cpp's flags (--samplers, --top-k, ... --seed);
 *   - classifier-free guidance, --trace, context full / --context-shift, --help;
 *   - usage errors: exit 2 and exactly one line on stderr; a missing model: exit 1;
 *   - `sift quantize` then generating with the result; `sift bench --model --no-peer`;
 *   - `sift mkmodel` (a small random model with the 32000-token vocabulary, Q8_0), then
 *     generating varied text with it and `sift bench --model --batch` on it; bad shapes
 *     exit 2 naming the flag.
 *
 * usage: cli_generate PATH/TO/sift     (SIFT_SHARED names the shared folder)
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "refdata.h"

static const char *sift_bin;
static int failures, checks;
static char out_path[256], err_path[256];

typedef struct run_result {
    int rc;
    char *out, *err;
    size_t out_len, err_len;
} run_result;

static void free_result(run_result *r)
{
    free(r->out);
    free(r->err);
}

/* Run sift with the NULL-terminated argument list. */
static run_result run(const char *first, ...)
{
    const char *argv[64];
    int n = 0;
    argv[n++] = sift_bin;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 63; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    run_result r = {0};
    pid_t pid = fork();
    if (pid == 0) {
        int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600), fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(sift_bin, (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r.out = ref_slurp(out_path, &r.out_len);
    r.err = ref_slurp(err_path, &r.err_len);
    if (!r.out) r.out = calloc(1, 1);
    if (!r.err) r.err = calloc(1, 1);
    return r;
}

static void check(bool ok, const char *fmt, ...)
{
    checks++;
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (!ok) failures++;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static int count_str(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static void test_story(const char *model)
{
    run_result r = run("-m", model, "-p", "Once upon a time", "-n", "128", NULL);
    check(r.rc == 0, "sift -m stories260K -p \"Once upon a time\" -n 128: exit %d", r.rc);
    check(!strncmp(r.out, " Once upon a time", 17) && r.out_len > 200, "  the story (%zu bytes): %.80s...", r.out_len, r.out);
    check(strstr(r.err, "sift perf: load") && strstr(r.err, "sift perf: prompt") && strstr(r.err, "sift perf: generation") &&
              strstr(r.err, "sift perf: sampling") && strstr(r.err, "top-k"),
          "  perf summary with load, prompt, generation, sampling and per-sampler shares");
    free_result(&r);
}

static void test_reference_streams(const char *stem)
{
    ref_model R;
    char model[1024];
    if (ref_load(stem, &R) != 0) {
        check(false, "cannot read the reference of %s", stem);
        return;
    }
    ref_model_path(stem, model, sizeof model);
    const char *sampled = "top_k(40);top_p(0.95,1);min_p(0.05,1);temp(0.8);dist(42)";
    int g_ok = 0, s_ok = 0, f_ok = 0;
    for (int p = 0; p < R.n_prompts; p++) {
        const ref_prompt *rp = &R.prompts[p];
        run_result g = run("generate", "-m", model, "-p", rp->text, "--no-escape", "-n", "64", "-c", "512", "-t", "1",
                           "--chain", "greedy()", "--no-display-prompt", "--log-disable", NULL);
        const bool gsame = g.rc == 0 && g.out_len == (size_t)rp->greedy_text_len + 1 &&
                           !memcmp(g.out, rp->greedy_text, (size_t)rp->greedy_text_len);
        g_ok += gsame;
        if (!gsame) printf("     greedy %s/%s differs: got %.*s\n", stem, rp->id, (int)g.out_len, g.out);
        run_result s = run("generate", "-m", model, "-p", rp->text, "--no-escape", "-n", "64", "-c", "512", "-t", "1",
                           "--chain", sampled, "--no-display-prompt", "--log-disable", NULL);
        const bool ssame = s.rc == 0 && s.out_len == (size_t)rp->sampled_text_len + 1 &&
                           !memcmp(s.out, rp->sampled_text, (size_t)rp->sampled_text_len);
        s_ok += ssame;
        if (!ssame) printf("     sampled %s/%s differs: got %.*s\n", stem, rp->id, (int)s.out_len, s.out);
        /* the same chain from llama.cpp's flags: common builds temp as temp_ext(0.8, 0, 1) */
        run_result f = run("-m", model, "-p", rp->text, "--no-escape", "-n", "64", "-c", "512", "-t", "1", "--samplers",
                           "top_k;top_p;min_p;temperature", "--top-k", "40", "--top-p", "0.95", "--min-p", "0.05", "--temp",
                           "0.8", "--min-keep", "1", "--seed", "42", "--no-display-prompt", "--log-disable", NULL);
        f_ok += f.rc == 0 && f.out_len == s.out_len && !memcmp(f.out, s.out, s.out_len);
        free_result(&g);
        free_result(&s);
        free_result(&f);
    }
    check(g_ok == R.n_prompts, "%s: greedy continuation == llama.cpp's text for %d/%d prompts", stem, g_ok, R.n_prompts);
    check(s_ok == R.n_prompts, "%s: sampled continuation (--chain) == llama.cpp's text for %d/%d prompts", stem, s_ok,
          R.n_prompts);
    check(f_ok == R.n_prompts, "%s: the same stream from llama.cpp's sampling flags for %d/%d prompts", stem, f_ok, R.n_prompts);
}

static void test_features(const char *model)
{
    /* CFG: scale 1 is off (same text as without), another scale changes the text */
    run_result a = run("-m", model, "-p", "Once upon a time", "-n", "48", "--seed", "7", "--log-disable", NULL);
    run_result b = run("-m", model, "-p", "Once upon a time", "-n", "48", "--seed", "7", "--cfg-negative-prompt",
                       "The little dog", "--cfg-scale", "1.0", "--log-disable", NULL);
    run_result c = run("-m", model, "-p", "Once upon a time", "-n", "48", "--seed", "7", "--cfg-negative-prompt",
                       "The little dog", "--cfg-scale", "3.0", NULL);
    check(a.rc == 0 && b.rc == 0 && c.rc == 0, "CFG runs exit 0 (%d %d %d)", a.rc, b.rc, c.rc);
    check(!strcmp(a.out, b.out), "--cfg-scale 1.0 gives the text of no guidance");
    check(strcmp(a.out, c.out) != 0 && !strncmp(c.out, " Once upon a time", 17) && strstr(c.err, "guidance scale 3.00"),
          "--cfg-scale 3 with a negative prompt changes the text: %.70s...", c.out);
    free_result(&a), free_result(&b), free_result(&c);

    /* --trace: one block per generated token, a line per sampler */
    run_result t = run("-m", model, "-p", "Once", "-n", "5", "--seed", "1", "--ignore-eos", "--trace", "--trace-top", "3", NULL);
    check(t.rc == 0 && count_str(t.err, "[trace] step") == 5 && count_str(t.err, "[trace]   top-k") == 5 &&
              count_str(t.err, "[trace]   dist") == 5 && strstr(t.err, "(logits)"),
          "--trace prints the chain inspector for each of 5 tokens (%d steps seen)", count_str(t.err, "[trace] step"));
    free_result(&t);

    /* a full context stops generation, or shifts with --context-shift */
    run_result f = run("-m", model, "-p", "Once upon a time", "-n", "100", "-c", "16", "--ignore-eos", "--seed", "3", NULL);
    check(f.rc == 0 && strstr(f.err, "stopped by context full"), "-c 16: stops when the context is full");
    run_result s = run("-m", model, "-p", "Once upon a time", "-n", "60", "-c", "16", "--ignore-eos", "--seed", "3",
                       "--context-shift", "--keep", "2", NULL);
    check(s.rc == 0 && strstr(s.err, "context shift") && strstr(s.err, "stopped by n_predict") &&
              strstr(s.err, "/    60 tokens"),
          "-c 16 --context-shift: 60 tokens through context shifts");
    free_result(&f), free_result(&s);

    /* a prompt split over several decode calls (-b 3), with and without guidance */
    run_result b1 = run("-m", model, "-p", "Lily and Ben went to the park. They", "-n", "30", "--seed", "4", "--cfg-negative-prompt",
                        "Tom was sad", "--cfg-scale", "2", "--log-disable", NULL);
    run_result b3 = run("-m", model, "-p", "Lily and Ben went to the park. They", "-n", "30", "--seed", "4", "--cfg-negative-prompt",
                        "Tom was sad", "--cfg-scale", "2", "--log-disable", "-b", "3", NULL);
    check(b1.rc == 0 && b3.rc == 0 && !strcmp(b1.out, b3.out), "-b 3 (prompt in chunks, two sequences): the same text as -b 512");
    free_result(&b1), free_result(&b3);

    /* threads and kernels do not change the tokens */
    run_result t1 = run("-m", model, "-p", "Lily", "-n", "40", "--seed", "5", "-t", "1", "--log-disable", NULL);
    run_result t2 = run("-m", model, "-p", "Lily", "-n", "40", "--seed", "5", "-t", "2", "--isa", "scalar", "--log-disable", NULL);
    check(t1.rc == 0 && t2.rc == 0 && !strcmp(t1.out, t2.out), "-t 1 vs -t 2 --isa scalar: the same text");
    free_result(&t1), free_result(&t2);

    /* grammar-constrained generation: the text follows the grammar, then the grammar ends it */
    run_result g = run("-m", model, "-p", "Once upon a time", "-n", "40", "--seed", "3", "--no-display-prompt", "--log-disable",
                       "--grammar", "root ::= \", there was a \" [a-z]+ \".\"", NULL);
    bool g_ok = g.rc == 0 && !strncmp(g.out, ", there was a ", 14) && g.out_len >= 17 && g.out[g.out_len - 2] == '.';
    for (size_t i = 14; g_ok && i + 2 < g.out_len; i++) g_ok = g.out[i] >= 'a' && g.out[i] <= 'z';
    check(g_ok, "--grammar: %.*s", (int)(g.out_len ? g.out_len - 1 : 0), g.out);
    run_result j = run("-m", model, "-p", "Once upon a time", "-n", "60", "--seed", "3", "--no-display-prompt", "--log-disable", "-j",
                       "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":10}},"
                       "\"required\":[\"name\"],\"additionalProperties\":false}",
                       NULL);
    check(j.rc == 0 && j.out[0] == '{' && strstr(j.out, "\"name\"") && strchr(j.out, '}'), "--json-schema: %.*s",
          (int)(j.out_len ? j.out_len - 1 : 0), j.out);
    free_result(&g), free_result(&j);

    /* --help documents every flag of the issue */
    run_result h = run("generate", "--help", NULL);
    const char *flags[] = {"-m,", "-p,", "-f,", "-n,", "-c,", "-t,", "-b,", "--seed", "--temp", "--top-k", "--top-p", "--min-p",
                           "--typical", "--repeat-penalty", "--repeat-last-n", "--presence-penalty", "--frequency-penalty",
                           "--dry-multiplier", "--dry-base", "--dry-allowed-length", "--dry-penalty-last-n",
                           "--dry-sequence-breaker", "--xtc-probability", "--xtc-threshold", "--mirostat ", "--mirostat-lr",
                           "--mirostat-ent", "--top-nsigma", "--dynatemp-range", "--dynatemp-exp", "--logit-bias",
                           "--samplers", "--ignore-eos", "--no-display-prompt", "--log-disable", "--chain",
                           "--cfg-negative-prompt", "--cfg-scale", "--trace", "--grammar", "--json-schema", NULL};
    int missing = 0;
    for (int i = 0; flags[i]; i++)
        if (!strstr(h.out, flags[i])) printf("     --help lacks %s\n", flags[i]), missing++;
    check(h.rc == 0 && missing == 0, "--help documents all %d flags of the issue", (int)(sizeof flags / sizeof *flags) - 1);
    free_result(&h);
}

static void test_errors(const char *model)
{
    const struct {
        const char *why;
        const char *argv[8];
        int rc;
    } cases[] = {
        {"no model", {"generate", "-p", "x"}, 2},
        {"unknown flag", {"-m", model, "--bogus"}, 2},
        {"missing value", {"-m", model, "--temp"}, 2},
        {"-n not a number", {"-m", model, "-n", "abc"}, 2},
        {"-c negative", {"-m", model, "-c", "-5"}, 2},
        {"--top-k not an integer", {"-m", model, "--top-k", "1.5"}, 2},
        {"--cfg-scale not a number", {"-m", model, "--cfg-scale", "x"}, 2},
        {"bad --chain", {"-m", model, "--chain", "top_k(40"}, 2},
        {"--chain with sampling flags", {"-m", model, "--chain", "greedy()", "--top-k", "5"}, 2},
        {"bad --isa", {"-m", model, "--isa", "sse9"}, 2},
        {"-p and -f", {"-m", model, "-p", "x", "-f", "y"}, 2},
        {"--mirostat 3", {"-m", model, "--mirostat", "3"}, 2},
        {"bad --samplers", {"-m", model, "--samplers", "top_k;bogus"}, 2},
        {"bad --logit-bias", {"-m", model, "--logit-bias", "15x"}, 2},
        {"-t 0", {"-m", model, "-t", "0"}, 2},
        {"bad --grammar", {"-m", model, "--grammar", "root ::= x"}, 2},
        {"bad --json-schema", {"-m", model, "--json-schema", "{\"type\":"}, 2},
        {"missing --grammar-file", {"-m", model, "--grammar-file", "/nonexistent.gbnf"}, 2},
        {"--lookup 9", {"-m", model, "--lookup", "9"}, 2},
        {"--lookup and -md", {"-m", model, "--lookup", "2", "-md", model}, 2},
        {"--draft-min > --draft-max", {"-m", model, "--draft-max", "2", "--draft-min", "3"}, 2},
        {"--draft-p-min 2", {"-m", model, "--draft-p-min", "2"}, 2},
        {"--lookup, --context-shift", {"-m", model, "--lookup", "2", "--context-shift"}, 2},
        {"missing model file", {"-m", "/nonexistent/model.gguf", "-n", "1"}, 1},
        {"GGUF v1 model", {"-m", NULL, "-n", "1"}, 1},
    };
    char v1[1024];
    snprintf(v1, sizeof v1, "%s/models/stories260K-gguf-v1.gguf", ref_shared());
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *const *a = cases[i].argv;
        const char *m1 = a[1] ? a[1] : v1;
        run_result r = run(a[0], m1, a[2], a[3], a[4], a[5], NULL);
        check(r.rc == cases[i].rc && count_lines(r.err) == 1 && r.out_len == 0, "%-28s exit %d, %d stderr line: %.*s",
              cases[i].why, r.rc, count_lines(r.err), (int)(r.err_len ? r.err_len - 1 : 0), r.err);
        free_result(&r);
    }
}

/* Speculative decoding: the same text with prompt lookup and with a draft model (the model
 * itself) as without, and the acceptance summary; a draft with another vocabulary refused. */
static void test_speculative(const char *model)
{
    run_result plain = run("-m", model, "-p", "Once upon a time", "-n", "160", "--seed", "7", "--temp", "0.7", "-no-cnv", NULL);
    const char *extra[2][2] = {{"--lookup", "3"}, {"-md", model}};
    for (int i = 0; i < 2; i++) {
        /* (--draft-fixed: the adaptive depth follows measured times, and on a loaded machine may
         * decide that no draft pays; the acceptance check needs drafts) */
        run_result r = run("-m", model, "-p", "Once upon a time", "-n", "160", "--seed", "7", "--temp", "0.7", "-no-cnv",
                           extra[i][0], extra[i][1], "--draft-fixed", NULL);
        check(r.rc == 0 && plain.rc == 0 && r.out_len == plain.out_len && !memcmp(r.out, plain.out, r.out_len),
              "%s: the same %zu bytes as without speculation", extra[i][0], r.out_len);
        const char *acc = strstr(r.err, "n_accept = ");
        check(strstr(r.err, "sift perf: speculative") && acc && atoi(acc + 11) > 0, "  acceptance summary: %.60s", acc ? acc : "(none)");
        free_result(&r);
    }
    free_result(&plain);
    char tiny[1024];
    ref_model_path("llama-2-tiny-random", tiny, sizeof tiny);
    run_result r = run("-m", model, "-md", tiny, "-n", "4", NULL);
    check(r.rc == 2 && count_lines(r.err) == 1 && strstr(r.err, "vocabulary has 32000 tokens"), "-md with another vocabulary: exit %d, %s",
          r.rc, r.err);
    free_result(&r);
}

static void test_quantize_and_bench(const char *model)
{
    char q[300];
    snprintf(q, sizeof q, "%s.q8_0.gguf", out_path);
    run_result a = run("quantize", model, q, "q8_0", NULL);
    check(a.rc == 0 && strstr(a.out, "32 of 48 tensors converted"), "sift quantize stories260K q8_0: %d", a.rc);
    run_result b = run("-m", q, "-p", "Once upon a time", "-n", "32", "--temp", "0", NULL);
    check(b.rc == 0 && !strncmp(b.out, " Once upon a time, there was a little girl", 42), "the Q8_0 model writes: %.60s...",
          b.out);
    run_result c = run("quantize", model, q, "q9_9", NULL);
    check(c.rc == 2 && count_lines(c.err) == 1, "sift quantize with an unknown type: exit %d", c.rc);
    unlink(q);
    run_result d = run("bench", "--model", "-m", model, "--no-peer", "-r", "1", "--n-prompt", "16", "-n", "8", NULL);
    check(d.rc == 0 && strstr(d.out, "stories260K.gguf") && strstr(d.out, "sift"), "sift bench --model --no-peer: %d", d.rc);
    run_result e = run("bench", "--model", "-r", "x", NULL);
    check(e.rc == 2, "sift bench --model -r x: exit %d", e.rc);
    free_result(&a), free_result(&b), free_result(&c), free_result(&d), free_result(&e);
}

static void test_mkmodel(void)
{
    char m[300], vocab[1024];
    snprintf(m, sizeof m, "%s.synth.gguf", out_path);
    ref_model_path("llama-2-tiny-random", vocab, sizeof vocab);
    run_result a = run("mkmodel", "-o", m, "--dim", "128", "--layers", "3", "--heads", "4", "--kv-heads", "2", "--vocab", vocab,
                       NULL);
    check(a.rc == 0 && strstr(a.out, "dim 128, 3 layers, 4 heads (2 KV, head size 32), ff 512, vocab 32000, q8_0"),
          "sift mkmodel --dim 128 --layers 3: %d %.200s", a.rc, a.out);
    run_result b = run("-m", m, "-p", "Once upon a time", "-n", "24", "--seed", "5", NULL);
    /* random weights: nonsense, but not one token repeated */
    bool varied = b.out_len > 40;
    for (size_t i = 20; varied && i + 8 < b.out_len; i++)
        if (!strncmp(b.out + i, b.out + i + 4, 4) && !strncmp(b.out + i, b.out + i + 8, 4)) varied = false;
    check(b.rc == 0 && varied, "the random model samples varied text: %.80s...", b.out);
    run_result c = run("bench", "--model", "--batch", "1,2,5", "-m", m, "-r", "1", "-n", "4", "--n-prompt", "8", NULL);
    check(c.rc == 0 && strstr(c.out, "speed-up/token") && count_lines(c.out) == 6, "sift bench --model --batch 1,2,5: %d\n%s",
          c.rc, c.out);
    unlink(m);
    run_result d = run("mkmodel", "-o", m, "--dim", "100", "--heads", "3", NULL);
    check(d.rc == 2 && count_lines(d.err) == 1 && strstr(d.err, "--heads"), "sift mkmodel --dim 100 --heads 3: exit %d, %s", d.rc,
          d.err);
    run_result e = run("mkmodel", "-o", m, "--type", "q3_x", NULL);
    check(e.rc == 2 && count_lines(e.err) == 1 && strstr(e.err, "--type"), "sift mkmodel --type q3_x: exit %d", e.rc);
    run_result f = run("bench", "--model", "--batch", "0,2", NULL);
    check(f.rc == 2, "sift bench --model --batch 0,2: exit %d", f.rc);
    check(access(m, F_OK) != 0, "no model left behind");
    free_result(&a), free_result(&b), free_result(&c), free_result(&d), free_result(&e), free_result(&f);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: cli_generate PATH/TO/sift\n");
        return 2;
    }
    sift_bin = argv[1];
    snprintf(out_path, sizeof out_path, "/tmp/sift_cli_generate_%d.out", (int)getpid());
    snprintf(err_path, sizeof err_path, "/tmp/sift_cli_generate_%d.err", (int)getpid());
    char stories[1024];
    ref_model_path("stories260K", stories, sizeof stories);
    test_story(stories);
    test_reference_streams("stories260K");
    test_reference_streams("llama-2-tiny-random");
    test_features(stories);
    test_errors(stories);
    test_speculative(stories);
    test_quantize_and_bench(stories);
    test_mkmodel();
    unlink(out_path);
    unlink(err_path);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
