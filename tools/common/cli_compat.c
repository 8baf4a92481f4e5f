/*
 * cli_compat.c - llama.cpp flags that change nothing in sift (see cli_compat.h). One table for
 * both commands: a flag lives here once, with the commands it is taken by, how its value is
 * read (none, one, or an optional on/off/auto the way llama.cpp's -fa reads it) and the
 * reason it changes nothing, which is what the user is told.
 */
#include "cli_compat.h"

#include <stdbool.h>
#include <string.h>

typedef enum { V_NONE, V_ONE, V_ONOFF } value_kind;

typedef struct compat_flag {
    const char *names[3]; /* spellings; unused slots NULL */
    value_kind v;
    unsigned which;       /* CLI_COMPAT_GENERATE | CLI_COMPAT_SERVE */
    const char *why;
} compat_flag;

#define GEN CLI_COMPAT_GENERATE
#define SRV CLI_COMPAT_SERVE
static const compat_flag FLAGS[] = {
    {{"-ngl", "--gpu-layers", "--n-gpu-layers"}, V_ONE, GEN | SRV, "sift decodes on the CPU"},
    {{"-fa", "--flash-attn", NULL}, V_ONOFF, GEN | SRV, "no flash-attention kernels here"},
    {{"-dev", "--device", NULL}, V_ONE, GEN | SRV, "sift decodes on the CPU"},
    {{"-sm", "--split-mode", NULL}, V_ONE, GEN | SRV, "one CPU device, nothing to split"},
    {{"-mg", "--main-gpu", NULL}, V_ONE, GEN | SRV, "sift decodes on the CPU"},
    {{"-ts", "--tensor-split", NULL}, V_ONE, GEN | SRV, "one CPU device, nothing to split"},
    {{"-nkvo", "--no-kv-offload", NULL}, V_NONE, GEN | SRV, "the KV cache is in CPU memory already"},
    {{"--mlock", NULL, NULL}, V_NONE, GEN | SRV, "the model is read into memory as a whole"},
    {{"--no-mmap", NULL, NULL}, V_NONE, GEN | SRV, "the model is read into memory as a whole"},
    {{"--numa", NULL, NULL}, V_ONE, GEN | SRV, "no NUMA placement here"},
    {{"--no-warmup", NULL, NULL}, V_NONE, GEN | SRV, "there is no warm-up run to skip"},
    {{"-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft"}, V_ONE, GEN | SRV, "sift decodes on the CPU"},
    {{"-devd", "--device-draft", NULL}, V_ONE, GEN | SRV, "sift decodes on the CPU"},
    {{"-ctkd", "--cache-type-k-draft", NULL}, V_ONE, GEN | SRV, "the KV cache is always F32"},
    {{"-ctvd", "--cache-type-v-draft", NULL}, V_ONE, GEN | SRV, "the KV cache is always F32"},
    {{"-cd", "--ctx-size-draft", NULL}, V_ONE, GEN | SRV, "the draft model's context is the target's (a slot's)"},
    {{"-td", "--threads-draft", NULL}, V_ONE, GEN | SRV, "the draft model runs with the target's threads"},
    {{"-tbd", "--threads-batch-draft", NULL}, V_ONE, GEN | SRV, "the draft model runs with the target's threads"},
    {{"-ctk", "--cache-type-k", NULL}, V_ONE, GEN | SRV, "the KV cache is always F32"},
    {{"-ctv", "--cache-type-v", NULL}, V_ONE, GEN | SRV, "the KV cache is always F32"},
    {{"-kvu", "--kv-unified", NULL}, V_NONE, GEN, "one sequence: nothing to share"},
    {{"-dt", "--defrag-thold", NULL}, V_ONE, GEN | SRV, "the KV cache is per sequence; nothing to defragment"},
    {{"--swa-full", NULL, NULL}, V_NONE, GEN | SRV, "the KV cache keeps every cell already"},
    {{"--prio", NULL, NULL}, V_ONE, GEN | SRV, "threads run at the process's priority"},
    {{"-C", "--cpu-mask", NULL}, V_ONE, GEN | SRV, "threads are placed by the OS"},
    {{"--offline", NULL, NULL}, V_NONE, GEN | SRV, "sift never downloads"},
    {{"-kvo", "--kv-offload", NULL}, V_NONE, GEN | SRV, "the KV cache is in CPU memory"},
    {{"--repack", "-nr", "--no-repack"}, V_NONE, GEN | SRV, "weights are used as the file has them"},
    {{"--no-host", NULL, NULL}, V_NONE, GEN | SRV, "one CPU buffer type"},
    {{"-fit", "--fit", NULL}, V_ONOFF, GEN | SRV, "no device memory to fit"},
    {{"-fitt", "--fit-target", NULL}, V_ONE, GEN | SRV, "no device memory to fit"},
    {{"-fitc", "--fit-ctx", NULL}, V_ONE, GEN | SRV, "no device memory to fit"},
    {{"--check-tensors", NULL, NULL}, V_NONE, GEN | SRV, "the loader checks every tensor's shape and size already"},
    {{"--op-offload", "--no-op-offload", NULL}, V_NONE, GEN | SRV, "sift decodes on the CPU"},
    {{"-cmoe", "--cpu-moe", NULL}, V_NONE, GEN | SRV, "every weight is in CPU memory"},
    {{"-ncmoe", "--n-cpu-moe", NULL}, V_ONE, GEN | SRV, "every weight is in CPU memory"},
    {{"-ot", "--override-tensor", NULL}, V_ONE, GEN | SRV, "one CPU buffer type"},
    {{"--mmap", NULL, NULL}, V_NONE, GEN | SRV, "the model is read into memory as a whole"},
    {{"-lm", "--load-mode", NULL}, V_ONE, GEN | SRV, "the model is read into memory as a whole"},
    {{"-dio", "--direct-io", "-ndio"}, V_NONE, GEN | SRV, "the model is read into memory as a whole"},
    {{"--no-direct-io", NULL, NULL}, V_NONE, GEN | SRV, "the model is read into memory as a whole"},
    {{"--poll", "--poll-batch", NULL}, V_ONE, GEN | SRV, "worker threads wait on a condition variable"},
    {{"-Cr", "--cpu-range", NULL}, V_ONE, GEN | SRV, "threads are placed by the OS"},
    {{"--cpu-strict", NULL, NULL}, V_ONE, GEN | SRV, "threads are placed by the OS"},
    {{"--warmup", NULL, NULL}, V_NONE, GEN | SRV, "there is no warm-up run"},
    {{"-bs", "--backend-sampling", NULL}, V_NONE, GEN | SRV, "sampling runs in libsift on the CPU"},
    {{"--perf", NULL, NULL}, V_NONE, GEN | SRV, "timings are always measured"},
    {{"--simple-io", NULL, NULL}, V_NONE, GEN, "input is read line by line already"},
    {{"-lv", "--verbosity", "--log-verbosity"}, V_ONE, GEN | SRV, "log levels are not selectable"},
    {{"-v", "--verbose", "--log-verbose"}, V_NONE, GEN, "log levels are not selectable"},
    {{"--log-file", NULL, NULL}, V_ONE, GEN | SRV, "logs go to stderr"},
    {{"--log-colors", NULL, NULL}, V_ONOFF, GEN | SRV, "logs are plain text"},
    {{"--log-prefix", NULL, NULL}, V_NONE, GEN | SRV, "logs are plain text"},
    {{"--log-timestamps", NULL, NULL}, V_NONE, GEN | SRV, "logs are plain text"},
    {{"--log-disable", NULL, NULL}, V_NONE, SRV, "the server logs its start and errors only (-v adds requests)"},
    {{"--threads-http", NULL, NULL}, V_ONE, SRV, "libmicrohttpd runs one thread per connection"},
    {{"--cache-reuse", NULL, NULL}, V_ONE, SRV, "prompt prefixes are reused by cache_prompt already; no KV shifting"},
    {{"--cache-ram", "-cram", NULL}, V_ONE, SRV, "no host-memory prompt cache beyond the slots"},
    {{"-ctxcp", "--ctx-checkpoints", "--swa-checkpoints"}, V_ONE, SRV, "no context checkpoints"},
    {{"--sleep-idle-seconds", NULL, NULL}, V_ONE, SRV, "the model stays loaded"},
    {{"-cb", "--cont-batching", NULL}, V_NONE, SRV, "continuous batching is always on"},
    {{"--ui", "--no-ui", NULL}, V_NONE, SRV, "the playground is a static page; it serves nothing else"},
    {{"-no-kvu", "--no-kv-unified", NULL}, V_NONE, SRV, "the KV buffer layout is fixed"},
    {{"-cms", "--checkpoint-min-step", NULL}, V_ONE, SRV, "no context checkpoints"},
    {{"--cache-idle-slots", "--no-cache-idle-slots", NULL}, V_NONE, SRV, "no host-memory prompt cache beyond the slots"},
    {{"--sse-ping-interval", NULL, NULL}, V_ONE, SRV, "streams send no pings; -to closes silent connections"},
    {{"--reuse-port", NULL, NULL}, V_NONE, SRV, "one listening socket"},
    {{"--no-mmproj", "--mmproj-auto", "--no-mmproj-auto"}, V_NONE, SRV, "no multimodal projectors here"},
    {{"--mmproj-offload", "--no-mmproj-offload", NULL}, V_NONE, SRV, "no multimodal projectors here"},
    {{"-nocb", "--no-cont-batching", NULL}, V_NONE, SRV, "continuous batching is always on"},
};
#undef GEN
#undef SRV

void cli_compat_normalize(char *arg)
{
    if (arg[0] != '-' || arg[1] != '-') return;
    for (char *p = arg + 2; *p && *p != '='; p++)
        if (*p == '_') *p = '-';
}

static const compat_flag *find(const char *a, unsigned which)
{
    for (size_t k = 0; k < sizeof FLAGS / sizeof *FLAGS; k++) {
        if (!(FLAGS[k].which & which)) continue;
        for (int j = 0; j < 3 && FLAGS[k].names[j]; j++)
            if (!strcmp(a, FLAGS[k].names[j])) return &FLAGS[k];
    }
    return NULL;
}

static bool is_onoff(const char *v)
{
    static const char *const words[] = {"on", "off", "auto", "true", "false", "1", "0", "enabled", "disabled"};
    for (size_t k = 0; v && k < sizeof words / sizeof *words; k++)
        if (!strcmp(v, words[k])) return true;
    return false;
}

int cli_compat_flag(const char *tool, unsigned which, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const compat_flag *f = find(a, which);
    if (!f) return 0;
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (f->v == V_ONE) {
        if (!v) {
            fprintf(stderr, "%s: %s: missing value\n", tool, a);
            return -1;
        }
        (*i)++;
    } else if (f->v == V_ONOFF && is_onoff(v)) {
        (*i)++;
    }
    fprintf(stderr, "%s: note: %s ignored (%s)\n", tool, a, f->why);
    return 1;
}

void cli_compat_help(FILE *f, unsigned which)
{
    int col = 2;
    fprintf(f, " ");
    for (size_t k = 0; k < sizeof FLAGS / sizeof *FLAGS; k++) {
        if (!(FLAGS[k].which & which)) continue;
        for (int j = 0; j < 3 && FLAGS[k].names[j]; j++) {
            const int w = (int)strlen(FLAGS[k].names[j]) + 1;
            if (col + w > 110) {
                fprintf(f, "\n ");
                col = 2;
            }
            fprintf(f, " %s", FLAGS[k].names[j]);
            col += w;
        }
    }
    fprintf(f, "\n");
}
