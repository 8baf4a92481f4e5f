/*
 * weights.c - where the weight matrices live while a model runs.
 *
 * Generation reads every weight byte once per token, so the memory the matrices sit in
 * matters as much as the kernels: straight from the file mapping, each 4 KiB page-cache
 * page is a TLB entry of its own (a 350 MB model is ~85,000 of them, far more than the
 * TLB holds, so nearly every page costs a page walk), and the hardware prefetcher stops at
 * every page boundary. llama.cpp avoids both by copying (repacking) the weights at load
 * into anonymous memory. Here the matrices the forward pass multiplies by are copied, as
 * they are, into one anonymous mapping that is asked for in transparent huge pages
 * (MADV_HUGEPAGE: THP is commonly 'madvise' only), 2 MiB per TLB entry; the file pages
 * they came from are then dropped from this process's mapping (the page cache keeps them;
 * resident memory stays one copy).
 *
 * The page size changes which generation loop is fastest: from 2 MiB pages a tile of four
 * rows read side by side (sharing each activation load and reduction) streams as fast as
 * one row at a time and costs far less work; from 4 KiB pages the four streams defeat the
 * prefetcher. So a copied matrix is marked huge_pages, and the forward pass takes the
 * kernel table's rows_huge loop for it (kernels.h).
 *
 * The token embeddings stay in the file (one row per token is read, never streamed), and a
 * tied output matrix with them. SIFT_MMAP=1 in the environment skips the copy (loading
 * then costs nothing but the page-table walk, and the model's weights are shared with
 * every other process mapping the file); so does a refused allocation. The copy changes
 * no byte, only the address: every result is the same.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/model.h"

#define WEIGHT_ALIGN 4096 /* each matrix starts on a page: rows of a group never share a line */

/* Every matrix the forward pass multiplies by, in layer order (n of them into out, at most cap). */
static int collect(sift_model *m, sift__weight **out, int cap)
{
    int n = 0;
    for (int l = 0; l < m->hp.n_layer; l++) {
        sift__layer *L = &m->layers[l];
        sift__weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof ws / sizeof *ws; i++)
            if (ws[i]->data && n < cap) out[n++] = ws[i];
    }
    if (!m->tied_output && m->output.data && n < cap) out[n++] = &m->output;
    return n;
}

static size_t weight_bytes(const sift__weight *w)
{
    return w->row_bytes * (size_t)w->n_out;
}

static size_t round_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

/* Drop the file pages wholly inside [p, p + n) from this process's mapping: the copy
 * serves from now on, and the page cache still holds them for the next process. */
static void drop_file_pages(const void *p, size_t n)
{
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = round_up((uintptr_t)p, pg), b = ((uintptr_t)p + n) / pg * pg;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

void sift__weights_copy(sift_model *m)
{
    const char *env = getenv("SIFT_MMAP");
    if (env && *env && strcmp(env, "0") != 0) return;
    const int cap = 7 * m->hp.n_layer + 1;
    sift__weight **ws = malloc((size_t)cap * sizeof *ws);
    if (!ws) return;
    const int n = collect(m, ws, cap);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += round_up(weight_bytes(ws[i]), WEIGHT_ALIGN);
    if (total == 0) {
        free(ws);
        return;
    }
    const size_t huge = (size_t)2 << 20;
    const size_t size = round_up(total, huge);
    void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        free(ws);
        return;
    }
#ifdef MADV_HUGEPAGE
    madvise(mem, size, MADV_HUGEPAGE); /* advice only: small pages still work */
#endif
    char *dst = mem;
    for (int i = 0; i < n; i++) {
        const size_t b = weight_bytes(ws[i]);
        memcpy(dst, ws[i]->data, b);
        drop_file_pages(ws[i]->data, b);
        ws[i]->data = dst;
        ws[i]->huge_pages = true;
        dst += round_up(b, WEIGHT_ALIGN);
    }
    mprotect(mem, size, PROT_READ); /* shared read-only between contexts, as the file was */
    m->wmem = mem;
    m->wmem_size = size;
    free(ws);
}

void sift__weights_free(sift_model *m)
{
    if (m->wmem) munmap(m->wmem, m->wmem_size);
    m->wmem = NULL;
    m->wmem_size = 0;
}
