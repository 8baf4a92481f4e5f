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
 * (MADV_HUGEPAGE: THP is commonly 'madvise' only), 2 MiB per TLB entry.
 *
 * The page size changes which generation loop is fastest: from 2 MiB pages a tile of four
 * rows read side by side (sharing each activation load and reduction) streams as fast as
 * one row at a time and costs far less work; from 4 KiB pages the four streams defeat the
 * prefetcher. So a copied matrix is marked huge_pages, and the forward pass takes the
 * kernel table's rows_huge loop for it (kernels.h).
 *
 * The copy is read with pread() from the file straight into the new mapping, 4 MiB at a
 * time by two threads: nothing of the file is mapped into this process on the way, so
 * resident memory is one copy (copying through the mapping faulted every 4 KiB file page
 * in and dropped it again: ~10,000 faults, and as many page-table updates, per 650 MB).
 * Each chunk is first populated with MADV_POPULATE_WRITE, so a refused allocation is an
 * error returned here (the copy is given up and the mapping serves), not a fault inside
 * the read. On a VM that hands freed memory back to the host, touching fresh memory is
 * the main cost of loading (1-2 ms per MiB here), more than the reads.
 *
 * The token embeddings stay in the file (one row per token is read, never streamed), and a
 * tied output matrix with them. SIFT_MMAP=1 in the environment skips the copy (loading
 * then costs nothing but the page-table walk, and the model's weights are shared with
 * every other process mapping the file); so does a refused allocation. A failed or short
 * read (a file changed under us, an fd-less buffer model) copies the rest from the mapping.
 * The copy changes no byte, only the address: every result is the same.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "model/model.h"

#define WEIGHT_ALIGN 4096 /* each matrix starts on a page: rows of a group never share a line */
#define HUGE_PAGE ((size_t)2 << 20)
#define CHUNK ((size_t)4 << 20) /* the unit of work of the copy threads (whole huge pages) */

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

/* The copy in progress: matrix i, n bytes at file offset off (src in the mapping), goes to
 * mem + at; the threads take CHUNK-sized pieces of mem in turn. */
typedef struct {
    const char *src;
    uint64_t off;
    size_t at, n;
} part;

typedef struct {
    char *mem;
    size_t size;
    int n, fd;
    part *parts;
    atomic_size_t next; /* the next chunk to take */
    atomic_bool failed; /* a chunk could not be populated: give the copy up */
} copy_job;

void sift__weights_read(char *dst, int fd, uint64_t off, const char *src, size_t n)
{
    size_t done = 0;
    while (fd >= 0 && done < n) {
        const ssize_t r = pread(fd, dst + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        done += (size_t)r;
    }
    if (done < n) {
        memcpy(dst + done, src + done, n - done);
        drop_file_pages(src + done, n - done);
    }
}

static void *copy_worker(void *arg)
{
    copy_job *J = arg;
    for (;;) {
        const size_t c = atomic_fetch_add(&J->next, 1), lo = c * CHUNK;
        if (lo >= J->size || atomic_load(&J->failed)) break;
        const size_t hi = lo + CHUNK < J->size ? lo + CHUNK : J->size;
#ifdef MADV_POPULATE_WRITE
        /* EINVAL: a kernel before 5.14; the reads fault the pages in instead */
        if (madvise(J->mem + lo, hi - lo, MADV_POPULATE_WRITE) != 0 && errno != EINVAL) {
            atomic_store(&J->failed, true);
            break;
        }
#endif
        for (int i = 0; i < J->n; i++) {
            const part *P = &J->parts[i];
            const size_t a = P->at > lo ? P->at : lo, b = P->at + P->n < hi ? P->at + P->n : hi;
            if (a < b) sift__weights_read(J->mem + a, J->fd, P->off + (a - P->at), P->src + (a - P->at), b - a);
        }
    }
    return NULL;
}

/* A 2 MiB-aligned anonymous mapping of size bytes (a multiple of 2 MiB), in huge pages where
 * the kernel lends them; NULL if refused. */
static char *map_huge(size_t size)
{
    char *p = mmap(NULL, size + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    const size_t head = round_up((uintptr_t)p, HUGE_PAGE) - (uintptr_t)p;
    if (head) munmap(p, head);
    if (HUGE_PAGE - head) munmap(p + head + size, HUGE_PAGE - head);
    p += head;
#ifdef MADV_HUGEPAGE
    madvise(p, size, MADV_HUGEPAGE); /* advice only: small pages still work */
#endif
    return p;
}

/* Copy the matrices marked in sel (all of them with all) into one huge-page block; returns
 * without a copy when the memory is refused. */
static void copy_matrices(sift_model *m, bool all)
{
    const int cap = 7 * m->hp.n_layer + 1;
    sift__weight **ws = malloc((size_t)cap * sizeof *ws);
    copy_job J = {.fd = sift__gguf_fd(m->gguf), .parts = malloc((size_t)cap * sizeof *J.parts)};
    if (!ws || !J.parts) goto done;
    const int n_all = collect(m, ws, cap);
    J.n = 0;
    for (int i = 0; i < n_all; i++) /* the rest stays in the file mapping */
        if (all || m->k_auto.x8_pack[ws[i]->type]) ws[J.n++] = ws[i];
    const uint8_t *base = sift__gguf_bytes(m->gguf);
    size_t total = 0;
    for (int i = 0; i < J.n; i++) {
        const uint8_t *src = ws[i]->data;
        J.parts[i] = (part){.src = ws[i]->data, .off = (uint64_t)(src - base), .at = total, .n = weight_bytes(ws[i])};
        total += round_up(J.parts[i].n, WEIGHT_ALIGN);
    }
    if (total == 0) goto done;
    J.size = round_up(total, HUGE_PAGE);
    if (!(J.mem = map_huge(J.size))) goto done;
    atomic_init(&J.next, 0);
    atomic_init(&J.failed, false);
    /* a second thread where there is a second CPU: the page clearing and the copies are
     * memory-bound work that two cores do faster than one */
    pthread_t helper;
    const bool two =
        sysconf(_SC_NPROCESSORS_ONLN) > 1 && J.size > CHUNK && pthread_create(&helper, NULL, copy_worker, &J) == 0;
    copy_worker(&J);
    if (two) pthread_join(helper, NULL);
    if (atomic_load(&J.failed)) {
        munmap(J.mem, J.size); /* the mapping serves, as with SIFT_MMAP=1 */
        goto done;
    }
    mprotect(J.mem, J.size, PROT_READ); /* shared read-only between contexts, as the file was */
    for (int i = 0; i < J.n; i++) {
        ws[i]->data = J.mem + J.parts[i].at;
        ws[i]->huge_pages = true;
    }
    m->wmem = J.mem;
    m->wmem_size = J.size;
done:
    free(ws);
    free(J.parts);
}

static bool env_set(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

void sift__weights_place(sift_model *m)
{
    const bool map_all = env_set("SIFT_MMAP"), copy_all = !map_all && env_set("SIFT_COPY");
    bool used[SIFT_TYPE_COUNT] = {false};
    const int cap = 7 * m->hp.n_layer + 1;
    sift__weight **ws = malloc((size_t)cap * sizeof *ws);
    const int n = ws ? collect(m, ws, cap) : 0;
    for (int i = 0; i < n; i++)
        if ((int)ws[i]->type >= 0 && ws[i]->type < SIFT_TYPE_COUNT) used[ws[i]->type] = true;
    if (m->output.data && (int)m->output.type >= 0 && m->output.type < SIFT_TYPE_COUNT) used[m->output.type] = true;
    sift__kernels_choose(used, copy_all, &m->k_auto);
    if (map_all) memset(m->k_auto.x8_pack, 0, sizeof m->k_auto.x8_pack);
    if (!map_all) copy_matrices(m, copy_all);
    sift__weights_repack(m);
#ifdef MADV_POPULATE_READ
    /* the mapped matrices' page tables now, as llama.cpp's MAP_POPULATE does, rather than one
     * fault per 4 KiB page inside the first decode (the file is in the page cache) */
    for (int i = 0; i < n; i++)
        if (!ws[i]->huge_pages) {
            const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
            const uintptr_t a = (uintptr_t)ws[i]->data / pg * pg, b = (uintptr_t)ws[i]->data + weight_bytes(ws[i]);
            (void)madvise((void *)a, b - a, MADV_POPULATE_READ); /* advice: EINVAL before 5.14 */
        }
#endif
    free(ws);
}

void sift__weights_free(sift_model *m)
{
    if (m->wmem) munmap(m->wmem, m->wmem_size);
    m->wmem = NULL;
    m->wmem_size = 0;
}
