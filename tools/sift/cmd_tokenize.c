/*
 * cmd_tokenize.c - `sift tokenize`: llama.cpp's llama-tokenize, same flags, same output.
 *
 *   sift tokenize -m MODEL.gguf (-p TEXT | -f FILE | --stdin) [--ids] [--no-bos]
 *                 [--no-escape] [--no-parse-special] [--show-count] [--log-disable]
 *
 * Only the vocabulary is read from the file (a vocab-only GGUF works). As llama-tokenize
 * does: escape sequences in the prompt (\n \r \t \' \" \\ \xHH) are processed unless
 * --no-escape; the text is tokenized with add_special = the vocabulary's add_bos unless
 * --no-bos, and parse_special unless --no-parse-special; each token is printed as
 * "%6d -> 'piece'" with its piece as token_to_piece(special = true) renders it (up to a NUL
 * byte, as llama-tokenize's printf does), or with --ids the ids alone as "[1, 2, 3]";
 * --show-count adds "Total number of tokens: N". --log-disable is accepted for
 * compatibility: sift logs nothing while loading.
 *
 * Exit status: 0 ok, 1 runtime failure (unreadable file, bad model), 2 usage error.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

const char sift_cmd_tokenize_help[] = "tokenize text with a model's vocabulary (llama-tokenize's flags)";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sift tokenize -m MODEL.gguf (-p TEXT | -f FILE | --stdin) [options]\n"
            "\n"
            "Tokenizes a prompt with the model's vocabulary and prints the tokens, as llama-tokenize.\n"
            "\n"
            "  -m, --model PATH       the GGUF file (a model or a vocab-only file)\n"
            "  -p, --prompt TEXT      tokenize TEXT\n"
            "  -f, --file FILE        tokenize the contents of FILE\n"
            "  --stdin                tokenize standard input\n"
            "  --ids                  print only the token ids, as [1, 2, 3]\n"
            "  --no-bos               never add the BOS token (even if the model asks for it)\n"
            "  --no-escape            do not process escapes (\\n, \\t, \\xHH, ...) in the prompt\n"
            "  --no-parse-special     do not turn control-token texts into control tokens\n"
            "  --show-count           print the total number of tokens\n"
            "  --log-disable          accepted for compatibility (sift does not log while loading)\n"
            "  -h, --help             this text\n");
}

static int usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "sift tokenize: %s%s%s (try `sift tokenize --help`)\n", msg, arg ? " " : "", arg ? arg : "");
    return 2;
}

/* Read all of f; NULL on failure. */
static char *read_all(FILE *f, size_t *len)
{
    size_t cap = 1 << 16, n = 0, r;
    char *buf = malloc(cap);
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *nb = cap < ((size_t)1 << 40) ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (buf && ferror(f)) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* llama.cpp's string_process_escapes, in place; returns the new length. */
static size_t process_escapes(char *s, size_t n)
{
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            s[out++] = s[i];
            continue;
        }
        char c = s[++i];
        switch (c) {
        case 'n': s[out++] = '\n'; break;
        case 'r': s[out++] = '\r'; break;
        case 't': s[out++] = '\t'; break;
        case '\'': s[out++] = '\''; break;
        case '"': s[out++] = '"'; break;
        case '\\': s[out++] = '\\'; break;
        case 'x':
            if (i + 2 < n) {
                char hex[3] = {s[i + 1], s[i + 2], 0}, *end;
                long val = strtol(hex, &end, 16);
                if (end == hex + 2) {
                    i += 2;
                    s[out++] = (char)val;
                    break;
                }
            }
            /* fall through */
        default:
            s[out++] = '\\';
            s[out++] = c;
            break;
        }
    }
    return out;
}

int sift_cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool from_stdin = false, ids = false, no_bos = false, no_escape = false, no_parse_special = false,
         show_count = false;
    int sources = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!has_value) return usage_error("option requires an argument:", a);
            if (model) return usage_error("the model path is given twice:", a);
            model = argv[++i];
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!has_value) return usage_error("option requires an argument:", a);
            prompt = argv[++i];
            sources++;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!has_value) return usage_error("option requires an argument:", a);
            file = argv[++i];
            sources++;
        } else if (!strcmp(a, "--stdin")) {
            from_stdin = true;
            sources++;
        } else if (!strcmp(a, "--ids")) {
            ids = true;
        } else if (!strcmp(a, "--no-bos")) {
            no_bos = true;
        } else if (!strcmp(a, "--no-escape")) {
            no_escape = true;
        } else if (!strcmp(a, "--no-parse-special")) {
            no_parse_special = true;
        } else if (!strcmp(a, "--show-count")) {
            show_count = true;
        } else if (!strcmp(a, "--log-disable")) {
            /* nothing to silence */
        } else {
            return usage_error("unknown option", a);
        }
    }
    if (!model) return usage_error("the model path is required (-m)", NULL);
    if (sources == 0) return usage_error("a prompt is required (-p, -f or --stdin)", NULL);
    if (sources > 1) return usage_error("-p, -f and --stdin are mutually exclusive", NULL);

    sift_error err = {0};
    sift_vocab *vocab = sift_vocab_load(model, &err);
    if (!vocab) {
        fprintf(stderr, "sift tokenize: %s: %s\n", model, err.msg);
        return 1;
    }
    char *text;
    size_t len;
    if (prompt) {
        len = strlen(prompt);
        text = malloc(len + 1);
        if (text) memcpy(text, prompt, len + 1);
    } else if (file) {
        FILE *f = fopen(file, "rb");
        if (!f) {
            fprintf(stderr, "sift tokenize: -f: cannot open '%s'\n", file);
            sift_vocab_free(vocab);
            return 1;
        }
        text = read_all(f, &len);
        fclose(f);
    } else {
        text = read_all(stdin, &len);
    }
    if (!text) {
        fprintf(stderr, "sift tokenize: cannot read the prompt (%s)\n", file ? file : from_stdin ? "stdin" : "-p");
        sift_vocab_free(vocab);
        return 1;
    }
    if (!no_escape) len = process_escapes(text, len);

    bool add_special = sift_vocab_add_bos(vocab) && !no_bos;
    int32_t cap = (int32_t)(len < (size_t)INT32_MAX / 2 ? len + 16 : INT32_MAX / 2);
    sift_token *tokens = malloc(sizeof *tokens * (size_t)cap);
    int32_t n = tokens ? sift_tokenize(vocab, text, len, tokens, cap, add_special, !no_parse_special) : INT32_MIN;
    if (n < 0 && n != INT32_MIN) { /* more tokens than bytes + 16: only with special tokens */
        cap = -n;
        sift_token *nt = realloc(tokens, sizeof *tokens * (size_t)cap);
        tokens = nt;
        n = nt ? sift_tokenize(vocab, text, len, tokens, cap, add_special, !no_parse_special) : INT32_MIN;
    }
    int rc = 0;
    if (n < 0) {
        fprintf(stderr, "sift tokenize: tokenization failed (out of memory, or the prompt is too long)\n");
        rc = 1;
    } else if (ids) {
        putchar('[');
        for (int32_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", tokens[i]);
        printf("]\n");
    } else {
        char piece[256];
        for (int32_t i = 0; i < n; i++) {
            int32_t k = sift_token_to_piece(vocab, tokens[i], piece, sizeof piece - 1, 0, true);
            char *p = piece, *big = NULL;
            if (k < 0) {
                big = malloc((size_t)-k + 1);
                k = big ? sift_token_to_piece(vocab, tokens[i], big, -k, 0, true) : 0;
                p = big ? big : piece;
            }
            p[k > 0 ? k : 0] = 0;
            printf("%6d -> '%s'\n", tokens[i], p); /* a NUL ends the piece, as in llama-tokenize */
            free(big);
        }
    }
    if (rc == 0 && show_count) printf("Total number of tokens: %d\n", n);
    if (fflush(stdout) != 0) rc = 1;
    free(tokens);
    free(text);
    sift_vocab_free(vocab);
    return rc;
}
