/*
 * router_sources.c - router mode's models (router.h): where `sift serve` without -m finds them,
 * as llama-server's router does.
 *
 *   - the Hugging Face cache, as llama.cpp fills it (-hf downloads): LLAMA_CACHE, else
 *     HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub,
 *     ~/.cache/huggingface/hub; each models--OWNER--REPO/snapshots/<the ref main's commit>
 *     GGUF whose name ends in a quantization tag (-Q8_0, .F32, ...) is the model
 *     OWNER/REPO:TAG (the first shard of a split one; projectors and draft sidecars are not
 *     models). sift downloads nothing: the cache is read only;
 *   - --models-dir DIR: a GGUF file is the model named after the file without .gguf; a
 *     subdirectory holding one model (a projector beside it, or the shards of a split one)
 *     is the model named after the subdirectory;
 *   - --models-preset FILE.ini: [*] options for every model, [NAME] a model's own (NAME one
 *     of the models above, or a new one with model = PATH or hf-repo = OWNER/REPO[:TAG] from
 *     the cache). Keys are option names without dashes (c, n-predict, jinja = true/false),
 *     or environment variable names (LLAMA_ARG_CTX_SIZE); what the router sets (host, port,
 *     keys, alias) is refused with the line's number.
 *
 * A later source wins for a name: --models-dir over the cache, the preset's options onto
 * either. Everything here runs at start and at GET /models?reload=1, never per request. No
 * HTTP here: cmd_serve.c asks rt_cache_count and srv_router_own_flag in any build.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "server/router.h"

/* ---- the router's own options ---------------------------------------------------------------- */

bool srv_router_own_flag(const char *flag)
{
    static const char *const own[] = {"-m", "--model", "--host", "--port", "--api-key", "--api-key-file", "-a", "--alias",
                                      "--models-dir", "--models-preset", "--models-max", "--models-autoload",
                                      "--no-models-autoload", "--allowed-hosts", "--cors-origin"};
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        if (!strcmp(flag, own[i])) return true;
    return false;
}

void rt_strv_free(strv *l)
{
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    *l = (strv){0};
}

bool rt_strv_add(strv *l, const char *s)
{
    char *c = strdup(s);
    char **p = c ? realloc(l->v, (size_t)(l->n + 2) * sizeof *p) : NULL;
    if (!p) {
        free(c);
        return false;
    }
    p[l->n++] = c;
    p[l->n] = NULL;
    l->v = p;
    return true;
}

bool rt_strv_same(const strv *a, const strv *b)
{
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->v[i], b->v[i])) return false;
    return true;
}

void rt_msrc_free(msrc *m)
{
    free(m->id);
    free(m->path);
    rt_strv_free(&m->args);
    rt_strv_free(&m->env);
}


/* ---- sources: --models-dir and --models-preset ----------------------------------------------------- */

static bool has_suffix_ci(const char *s, const char *suf)
{
    const size_t n = strlen(s), k = strlen(suf);
    return n > k && !strcasecmp(s + n - k, suf);
}

/* "dir/name", malloc'd (NULL: out of memory). */
static char *join_path(const char *dir, const char *name)
{
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    if (p) sprintf(p, "%s/%s", dir, name);
    return p;
}

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A subdirectory's model: its one GGUF that is not a projector (mmproj*), or the first shard
 * of a split one (-00001-of-); NULL when there is none or the choice is not clear. */
static char *dir_model(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char *pick = NULL;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !has_suffix_ci(e->d_name, ".gguf") || !strncasecmp(e->d_name, "mmproj", 6)) continue;
        const bool shard = strstr(e->d_name, "-of-") != NULL;
        if (shard && !strstr(e->d_name, "-00001-of-")) continue;
        n++;
        free(pick);
        pick = strdup(e->d_name);
    }
    closedir(d);
    if (n != 1 || !pick) {
        free(pick);
        return NULL;
    }
    char *path = join_path(dir, pick);
    free(pick);
    return path;
}

msrc *rt_src_find(msrc *v, int n, const char *id)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i].id, id)) return &v[i];
    return NULL;
}

static msrc *src_add(msrc **v, int *n, const char *id, char *path)
{
    msrc *p = realloc(*v, (size_t)(*n + 1) * sizeof *p);
    if (!p) return NULL;
    *v = p;
    p[*n] = (msrc){.id = strdup(id), .path = path};
    if (!p[*n].id) return NULL;
    return &p[(*n)++];
}

/* The GGUFs of --models-dir. 0, or -1 with err. */
static int scan_dir(const char *dir, msrc **v, int *n, char *err, size_t cap)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, cap, "--models-dir %s: %s", dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *path = join_path(dir, e->d_name);
        if (!path) {
            rc = -1;
            break;
        }
        struct stat st;
        if (stat(path, &st) != 0) {
            free(path);
            continue;
        }
        char id[NAME_MAX + 1];
        snprintf(id, sizeof id, "%s", e->d_name);
        if (S_ISDIR(st.st_mode)) {
            char *inner = dir_model(path);
            free(path);
            path = inner;
        } else if (!S_ISREG(st.st_mode) || !has_suffix_ci(id, ".gguf") || !strncasecmp(id, "mmproj", 6)) {
            free(path);
            path = NULL;
        } else {
            id[strlen(id) - 5] = 0;
        }
        if (!path) continue;
        msrc *same = rt_src_find(*v, *n, id); /* a cached model of that name: the directory's wins */
        if (same) {
            free(same->path);
            same->path = path;
            same->source = "models_dir";
            continue;
        }
        msrc *m = src_add(v, n, id, path);
        if (m) {
            m->source = "models_dir";
        } else {
            free(path);
            rc = -1;
        }
    }
    closedir(d);
    if (rc) snprintf(err, cap, "out of memory reading --models-dir");
    return rc;
}

static int cmp_src(const void *a, const void *b) { return strcmp(((const msrc *)a)->id, ((const msrc *)b)->id); }

/* ---- the Hugging Face cache ---------------------------------------------------------------------- */

/* Where llama.cpp keeps its downloads; false when no variable says (no HOME either). */
static bool cache_dir(char *out, size_t cap)
{
    static const struct {
        const char *var, *sub;
    } env[] = {{"LLAMA_CACHE", ""},   {"HF_HUB_CACHE", ""},           {"HUGGINGFACE_HUB_CACHE", ""},
               {"HF_HOME", "/hub"}, {"XDG_CACHE_HOME", "/huggingface/hub"}, {"HOME", "/.cache/huggingface/hub"}};
    for (size_t i = 0; i < sizeof env / sizeof *env; i++) {
        const char *v = getenv(env[i].var);
        if (v && *v) {
            snprintf(out, cap, "%s%s", v, env[i].sub);
            return true;
        }
    }
    return false;
}

static bool all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return false;
    return true;
}

/* A GGUF name's quantization tag, as llama.cpp reads it (the last [-.]WORD of the name without
 * .gguf and a -NNNNN-of-NNNNN shard suffix, upper-cased; "" when none) and its shard index
 * (1 when not split; 0 when not a GGUF). */
static void gguf_tag(const char *name, char *tag, size_t cap, int *index)
{
    size_t n = strlen(name);
    tag[0] = 0;
    *index = has_suffix_ci(name, ".gguf") ? 1 : 0;
    if (!*index) return;
    n -= 5;
    if (n > 15 && name[n - 15] == '-' && all_digits(name + n - 14, 5) && !strncasecmp(name + n - 9, "-of-", 4) &&
        all_digits(name + n - 5, 5)) {
        *index = atoi(name + n - 14);
        n -= 15;
    }
    size_t k = n;
    while (k > 0 && (isalnum((unsigned char)name[k - 1]) || name[k - 1] == '_')) k--;
    if (k == 0 || k == n || (name[k - 1] != '-' && name[k - 1] != '.') || n - k >= cap) return;
    for (size_t i = k; i < n; i++) tag[i - k] = (char)toupper((unsigned char)name[i]);
    tag[n - k] = 0;
}

/* A projector or a speculative sidecar: beside a model, not one. */
static bool sidecar(const char *name)
{
    static const char *const words[] = {"mmproj", "mtp-", "eagle3-", "dflash-", "dspark-", "imatrix"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (strcasestr(name, words[i])) return true;
    return false;
}

/* The models under a snapshot directory (a few levels deep): OWNER/REPO:TAG each. */
static int walk_snapshot(const char *dir, int depth, const char *repo, msrc **v, int *n)
{
    DIR *d = depth < 4 ? opendir(dir) : NULL;
    if (!d) return 0;
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *path = join_path(dir, e->d_name);
        if (!path) {
            rc = -1;
            break;
        }
        struct stat st;
        char tag[64], id[512];
        int index = 0;
        const bool seen = stat(path, &st) == 0; /* (a dangling link: skipped, st unread) */
        if (seen && S_ISDIR(st.st_mode)) {
            rc = walk_snapshot(path, depth + 1, repo, v, n);
        } else if (seen && S_ISREG(st.st_mode) && !sidecar(e->d_name) && (gguf_tag(e->d_name, tag, sizeof tag, &index), index == 1) &&
                   tag[0] && snprintf(id, sizeof id, "%s:%s", repo, tag) < (int)sizeof id && !rt_src_find(*v, *n, id)) {
            msrc *m = src_add(v, n, id, path);
            if (!m) rc = -1;
            else path = NULL, m->source = "cache";
        }
        free(path);
    }
    closedir(d);
    return rc;
}

/* The commit a repository's cache points at: refs/main, else its first ref. */
static bool cache_ref(const char *repo_dir, char *commit, size_t cap)
{
    char p[PATH_MAX + 300];
    snprintf(p, sizeof p, "%s/refs/main", repo_dir);
    FILE *f = fopen(p, "r");
    if (!f) {
        snprintf(p, sizeof p, "%s/refs", repo_dir);
        DIR *d = opendir(p);
        struct dirent *e;
        while (d && !f && (e = readdir(d)))
            if (e->d_name[0] != '.') {
                char q[PATH_MAX + 600];
                snprintf(q, sizeof q, "%s/%s", p, e->d_name);
                f = fopen(q, "r");
            }
        if (d) closedir(d);
    }
    if (!f) return false;
    const bool ok = fgets(commit, (int)cap, f) != NULL;
    fclose(f);
    commit[strcspn(commit, " \t\r\n")] = 0;
    return ok && commit[0] && !strchr(commit, '/') && strcmp(commit, "..");
}

/* The cache's models (only_repo: that repository's alone). A missing cache is no error. */
static int scan_cache(const char *only_repo, msrc **v, int *n)
{
    char root[PATH_MAX];
    if (!cache_dir(root, sizeof root)) return 0;
    DIR *d = opendir(root);
    if (!d) return 0;
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        if (strncmp(e->d_name, "models--", 8)) continue;
        char repo[NAME_MAX + 1];
        snprintf(repo, sizeof repo, "%s", e->d_name + 8);
        char *sep = strstr(repo, "--");
        if (!sep || strstr(sep + 2, "--") || !sep[2] || sep == repo) continue; /* exactly OWNER--REPO */
        memmove(sep + 1, sep + 2, strlen(sep + 2) + 1);
        *sep = '/';
        if (only_repo && strcmp(repo, only_repo)) continue;
        char dir[PATH_MAX + 260], commit[128], snap[PATH_MAX + 400];
        snprintf(dir, sizeof dir, "%s/%s", root, e->d_name);
        if (!cache_ref(dir, commit, sizeof commit)) continue;
        snprintf(snap, sizeof snap, "%s/snapshots/%s", dir, commit);
        rc = walk_snapshot(snap, 0, repo, v, n);
    }
    closedir(d);
    return rc;
}

int rt_cache_count(void)
{
    msrc *v = NULL;
    int n = 0;
    scan_cache(NULL, &v, &n);
    for (int i = 0; i < n; i++) rt_msrc_free(&v[i]);
    free(v);
    return n;
}

/* A preset's hf-repo = OWNER/REPO[:TAG]: the cached file (the tag's, else Q4_K_M's, else the
 * first in name order), as a new string; NULL when the cache does not have it. */
static char *cache_resolve(const char *repo_tag)
{
    char repo[512], tag[64] = "";
    snprintf(repo, sizeof repo, "%s", repo_tag);
    char *colon = strchr(repo, ':');
    if (colon) {
        *colon = 0;
        for (size_t i = 0; colon[1 + i] && i < sizeof tag - 1; i++) tag[i] = (char)toupper((unsigned char)colon[1 + i]), tag[i + 1] = 0;
    }
    msrc *v = NULL;
    int n = 0;
    char *path = NULL;
    if (scan_cache(repo, &v, &n) == 0 && n) {
        qsort(v, (size_t)n, sizeof *v, cmp_src);
        const msrc *pick = NULL;
        char id[600];
        snprintf(id, sizeof id, "%s:%s", repo, tag[0] ? tag : "Q4_K_M");
        pick = rt_src_find(v, n, id);
        if (!pick && !tag[0]) pick = &v[0];
        if (pick) path = strdup(pick->path);
    }
    for (int i = 0; i < n; i++) rt_msrc_free(&v[i]);
    free(v);
    return path;
}

/* ---- --models-preset --------------------------------------------------------------------------- */

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *z = s + strlen(s);
    while (z > s && isspace((unsigned char)z[-1])) *--z = 0;
    return s;
}

static bool truthy(const char *v)
{
    return !strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "on") || !strcasecmp(v, "yes") || !strcasecmp(v, "enabled");
}

/* One preset key = value -> the child's command-line words (or environment). 0, or -1 with
 * err. The keys the router owns (listening, keys, other presets) are refused: the router
 * sets them. */
static int preset_opt(const char *file, int line, const char *key, const char *val, strv *args, strv *env, char *err, size_t cap)
{
    while (*key == '-') key++;
    if (!strncmp(key, "LLAMA_", 6) || !strncmp(key, "SIFT_", 5)) { /* an environment variable's name */
        char *kv = malloc(strlen(key) + strlen(val) + 2);
        if (!kv) return -1;
        sprintf(kv, "%s=%s", key, val);
        const bool ok = rt_strv_add(env, kv);
        free(kv);
        return ok ? 0 : -1;
    }
    char flag[128];
    /* llama.cpp's short spellings (c, np, ngl, ctk, kvu, rea, ...) are one dash */
    snprintf(flag, sizeof flag, "%s%s", strlen(key) <= 3 && !strchr(key, '-') ? "-" : "--", key);
    for (char *p = flag + 2; *p; p++)
        if (*p == '_') *p = '-';
    if (srv_router_own_flag(flag)) {
        snprintf(err, cap, "%s:%d: '%s' is set by the router, not by a preset", file, line, key);
        return -1;
    }
    if (!strcasecmp(val, "true")) return rt_strv_add(args, flag) ? 0 : -1;
    if (!strcasecmp(val, "false")) {
        char neg[140];
        snprintf(neg, sizeof neg, "--no-%s", flag + (flag[1] == '-' ? 2 : 1));
        return rt_strv_add(args, neg) ? 0 : -1;
    }
    return rt_strv_add(args, flag) && rt_strv_add(args, val) ? 0 : -1;
}

/* A --models-preset INI file: [*] options for every model, [NAME] a model's (a --models-dir
 * model of that name, or a new one with model = PATH). Applied onto v. 0, or -1 with err. */
static int read_preset(const char *file, msrc **v, int *n, int n_dir, char *err, size_t cap)
{
    FILE *f = fopen(file, "r");
    if (!f) {
        snprintf(err, cap, "--models-preset %s: %s", file, strerror(errno));
        return -1;
    }
    strv gargs = {0}, genv = {0};
    msrc *cur = NULL;
    bool global = false, in_section = false;
    char *line = NULL;
    size_t lcap = 0;
    int ln = 0, rc = 0;
    while (!rc && getline(&line, &lcap, f) >= 0) {
        ln++;
        char *s = trim(line);
        if (!*s || *s == ';' || *s == '#') continue;
        if (*s == '[') {
            char *z = strchr(s, ']');
            if (!z || z == s + 1) {
                snprintf(err, cap, "%s:%d: a section is [NAME]", file, ln);
                rc = -1;
                break;
            }
            *z = 0;
            const char *name = trim(s + 1);
            in_section = true;
            global = !strcmp(name, "*");
            cur = NULL;
            if (!global && !(cur = rt_src_find(*v, *n, name)) && !(cur = src_add(v, n, name, NULL))) rc = -1;
            if (cur) cur->source = "preset";
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, cap, "%s:%d: expected key = value", file, ln);
            rc = -1;
            break;
        }
        *eq = 0;
        const char *key = trim(s), *val = trim(eq + 1);
        if (!in_section) continue; /* version = 1, and the like */
        if (!strcmp(key, "load-on-startup")) {
            if (cur) cur->load_on_startup = truthy(val);
        } else if (!strcmp(key, "stop-timeout")) {
            /* (llama-server's; here the child's own --drain-timeout says how long an unload waits) */
        } else if (!strcmp(key, "hf-repo") || !strcmp(key, "hf") || !strcmp(key, "hfr") || !strcmp(key, "hf_repo")) {
            if (!cur) {
                snprintf(err, cap, "%s:%d: hf-repo belongs in a model's section, not [*]", file, ln);
                rc = -1;
            } else if (!(cur->path = (free(cur->path), cache_resolve(val)))) {
                char dir[PATH_MAX] = "(no cache directory: set LLAMA_CACHE or HOME)";
                cache_dir(dir, sizeof dir);
                snprintf(err, cap, "%s:%d: hf-repo %s is not in the Hugging Face cache %s (sift downloads nothing: "
                         "download it with llama.cpp or give model = PATH)", file, ln, val, dir);
                rc = -1;
            }
        } else if (!strcmp(key, "model") || !strcmp(key, "m")) {
            if (!cur) {
                snprintf(err, cap, "%s:%d: model = PATH belongs in a model's section, not [*]", file, ln);
                rc = -1;
            } else {
                free(cur->path);
                if (!(cur->path = strdup(val))) rc = -1;
            }
        } else {
            rc = preset_opt(file, ln, key, val, cur ? &cur->args : &gargs, cur ? &cur->env : &genv, err, cap);
        }
    }
    free(line);
    fclose(f);
    /* [*] first, so that a model's own options (later on its command line) win */
    for (int i = 0; !rc && i < *n; i++) {
        msrc *m = &(*v)[i];
        if (!m->path) {
            snprintf(err, cap, "%s: [%s] names no model of --models-dir and gives no model = PATH", file, m->id);
            rc = -1;
            break;
        }
        if (i >= n_dir && !is_file(m->path)) {
            snprintf(err, cap, "%s: [%s]: model %s is not a file", file, m->id, m->path);
            rc = -1;
            break;
        }
        strv a = {0}, e = {0};
        for (int k = 0; k < gargs.n; k++) rc |= !rt_strv_add(&a, gargs.v[k]);
        for (int k = 0; k < m->args.n; k++) rc |= !rt_strv_add(&a, m->args.v[k]);
        for (int k = 0; k < genv.n; k++) rc |= !rt_strv_add(&e, genv.v[k]);
        for (int k = 0; k < m->env.n; k++) rc |= !rt_strv_add(&e, m->env.v[k]);
        rt_strv_free(&m->args);
        rt_strv_free(&m->env);
        m->args = a;
        m->env = e;
    }
    if (rc && !err[0]) snprintf(err, cap, "out of memory reading --models-preset");
    rt_strv_free(&gargs);
    rt_strv_free(&genv);
    return rc;
}


/* Every model the sources name, sorted by id. 0, or -1 with err. */
int rt_read_sources(const srv_config *cfg, msrc **out, int *n_out, char *err, size_t cap)
{
    msrc *v = NULL;
    int n = 0, rc = 0;
    err[0] = 0;
    if (scan_cache(NULL, &v, &n)) {
        snprintf(err, cap, "out of memory reading the Hugging Face cache");
        rc = -1;
    }
    if (!rc && cfg->models_dir) rc = scan_dir(cfg->models_dir, &v, &n, err, cap);
    if (!rc && cfg->models_preset) rc = read_preset(cfg->models_preset, &v, &n, n, err, cap);
    if (rc) {
        for (int i = 0; i < n; i++) rt_msrc_free(&v[i]);
        free(v);
        return -1;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_src);
    *out = v;
    *n_out = n;
    return 0;
}

