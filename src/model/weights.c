/*
 * weights.c - where the weight matrices live while a model runs.
 *
 * A matrix is used in place, from the mapping of the GGUF file, wherever its file layout is
 * what its kernel reads: loading then costs the page-table entries of the page cache's
 * pages (populated at load with MADV_POPULATE_READ, as llama.cpp's MAP_POPULATE does, so
 * the first decode takes no faults), the weights are shared with every other process that
 * maps the file, and resident memory is one copy. Only the matrices whose chosen kernel
 * reads another layout (Q4_K, Q5_K, Q6_K and MXFP4 in the x8 layout of repack.h, where the
 * load-time probe measures it faster: model/choose.c; MXFP4 expert stacks too, gpt-oss's
 * experts; Q8_0 only on request, SIFT_PACK_NOW=1 or SIFT_PACK_LATE=1: its plain rows stream
 * as fast, see choose.c) are copied into an anonymous mapping, faulted in 4 KiB pages and
 * marked for transparent huge pages once complete (pages.c), and repacked there: Q4_K and MXFP4 during the load, Q5_K, Q6_K (and Q8_0 with
 * SIFT_PACK_LATE=1) after it (pack_late below: their copy would cost more than the rest of
 * the load), by a thread of its own while the decodes read the plain rows from the mapping;
 * each matrix switches to its packed copy once that is complete (sift__weight_x8). Both
 * layouts give the same numbers bit for bit, so when a matrix switches changes no result.
 *
 * Why not copy everything (the old rule): the copy bought 2 MiB pages (one TLB entry per
 * 2 MiB instead of per 4 KiB page, and a hardware prefetcher not stopped at every 4 KiB),
 * but on a VM that hands freed memory back to the host touching fresh memory costs 1-2 ms
 * per MiB, far more than the reads: a 650 MB Q8_0 model took 0.3 to 4 s to load against
 * llama.cpp's 0.4 s, while generation from the mapping measured within noise of the copy
 * (docs/performance.md has the figures). SIFT_COPY=1 in the environment copies every matrix
 * as before (generation then takes the kernels' rows_huge loops, which read several rows
 * side by side: from 4 KiB pages those streams defeat the prefetcher, so mapped matrices
 * take the one-row loops); SIFT_MMAP=1 copies nothing and repacks nothing.
 *
 * The copy is read with pread() from the file straight into the new mapping, 4 MiB at a
 * time by two threads: nothing of the file is mapped into this process on the way (copying
 * through the mapping faulted every 4 KiB file page in and dropped it again). Each chunk is
 * first populated with MADV_POPULATE_WRITE, so a refused allocation is an error returned
 * here (the copy is given up and the mapping serves), not a fault inside the read. A failed
 * or short read (a file changed under us, an fd-less buffer model) copies the rest from the
 * mapping. The token embeddings stay in the file (one row per token is read, never
 * streamed), and a tied output matrix with them. Placement changes no result, only where
 * the bytes are (and, repacked, their order: the x8 kernels give the plain ones' numbers).
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
#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#endif

#include "core/cpu.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/repack.h"

#define WEIGHT_ALIGN 4096 /* each matrix starts on a page: rows of a group never share a line */
#define HUGE_PAGE ((size_t)2 << 20)
#define CHUNK ((size_t)4 << 20) /* the unit of work of the copy threads (whole huge pages) */

/* Every matrix the forward pass multiplies by, in layer order (n of them into out, at most cap);
 * an expert stack is one matrix of n_expert x its rows (forward.c reads each expert as a row
 * range of it, wherever it lives), so the stacks are populated at load like the rest. */
static int collect(sift_model *m, sift__weight **out, int cap)
{
    int n = 0;
    for (int l = 0; l < m->hp.n_layer; l++) {
        sift__layer *L = &m->layers[l];
        sift__weight *ws[] = {&L->wq,     &L->wk,       &L->wv,          &L->wo,        &L->w_gate,     &L->w_up,
                              &L->w_down, &L->w_router, &L->w_gate_exps, &L->w_up_exps, &L->w_down_exps};
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
 * mem + at; the threads take CHUNK-sized pieces of mem in turn. A part with pack has its
 * first n_groups groups of eight rows (group bytes each) rearranged on the way by pack
 * (repack.h's x8 layout), nb blocks per row; a group belongs to the chunk it starts in. */
typedef struct {
    const char *src;
    uint64_t off;
    size_t at, n;
    void (*pack)(const void *rows, size_t row_bytes, int64_t nb, void *dst);
    size_t row_bytes, group;
    int64_t nb, n_groups;
} part;

#define PACK_BATCH ((size_t)256 << 10) /* bytes of groups read at once before packing */

typedef struct {
    char *mem;
    size_t size;
    int n, fd;
    part *parts;
    atomic_size_t next; /* the next chunk to take */
    atomic_bool failed; /* a chunk could not be populated: give the copy up */
    bool from_map;      /* read the file's bytes from the mapping, not with pread (the late packing) */
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

/* The groups of part P that start in [lo, hi): read from the file a batch at a time into
 * buf (cap bytes, at least one group), packed from there into place. */
static void pack_groups(const copy_job *J, const part *P, size_t lo, size_t hi, char *buf, size_t cap)
{
    const size_t G = P->group;
    int64_t g = lo > P->at ? (int64_t)((lo - P->at + G - 1) / G) : 0;
    int64_t g1 = hi > P->at ? (int64_t)((hi - P->at + G - 1) / G) : 0;
    if (g1 > P->n_groups) g1 = P->n_groups;
    const int64_t per = (int64_t)(cap / G);
    while (g < g1) {
        const int64_t k = g1 - g < per ? g1 - g : per;
        const size_t o = (size_t)g * G;
        const char *from = P->src + o;
        if (!J->from_map) sift__weights_read(buf, J->fd, P->off + o, P->src + o, (size_t)k * G), from = buf;
        for (int64_t i = 0; i < k; i++) P->pack(from + i * G, P->row_bytes, P->nb, J->mem + P->at + o + i * G);
        g += k;
    }
}

/* Chunk c of the copy (populated first with populate, then each part's bytes in it read or
 * packed into place); *buf is the worker's pack buffer (made on first use). False: the
 * memory was refused. */
static bool copy_chunk(copy_job *J, size_t c, char **buf, size_t cap, bool populate)
{
    const size_t lo = c * CHUNK, hi = lo + CHUNK < J->size ? lo + CHUNK : J->size;
#ifdef MADV_POPULATE_WRITE
    /* EINVAL: a kernel before 5.14; the reads fault the pages in instead */
    if (populate && madvise(J->mem + lo, hi - lo, MADV_POPULATE_WRITE) != 0 && errno != EINVAL) return false;
#endif
    for (int i = 0; i < J->n; i++) {
        const part *P = &J->parts[i];
        size_t plain = P->at; /* the plain bytes start here: after the groups */
        if (P->pack) {
            if (!*buf && !(*buf = malloc(cap))) return false;
            pack_groups(J, P, lo, hi, *buf, cap);
            plain += (size_t)P->n_groups * P->group;
        }
        const size_t a = plain > lo ? plain : lo, b = P->at + P->n < hi ? P->at + P->n : hi;
        if (a < b && J->from_map) memcpy(J->mem + a, P->src + (a - P->at), b - a);
        else if (a < b) sift__weights_read(J->mem + a, J->fd, P->off + (a - P->at), P->src + (a - P->at), b - a);
    }
    return true;
}

static size_t pack_cap(const copy_job *J)
{
    size_t cap = PACK_BATCH;
    for (int i = 0; i < J->n; i++)
        if (J->parts[i].pack && J->parts[i].group > cap) cap = J->parts[i].group;
    return cap;
}

static void *copy_worker(void *arg)
{
    copy_job *J = arg;
    const size_t cap = pack_cap(J);
    char *buf = NULL;
    for (;;) {
        const size_t c = atomic_fetch_add(&J->next, 1);
        if (c * CHUNK >= J->size || atomic_load(&J->failed)) break;
        if (!copy_chunk(J, c, &buf, cap, true)) {
            atomic_store(&J->failed, true);
            break;
        }
    }
    free(buf);
    return NULL;
}

/* A 2 MiB-aligned anonymous mapping of size bytes (a multiple of 2 MiB); NULL if refused.
 * With huge_now (SIFT_COPY=1's copy of every matrix, for the rows_huge kernels) it asks for
 * 2 MiB pages before the copy touches it; otherwise the copy faults it in 4 KiB pages and
 * asks once it is complete (pages.c: a hinted fault can wait on compaction or, on a VM, on
 * the host backing a whole 2 MiB block: the Q4_K copy of a 0.6B model took 3-4x the CPU). */
static char *map_aligned(size_t size, bool huge_now)
{
    char *p = mmap(NULL, size + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    const size_t head = round_up((uintptr_t)p, HUGE_PAGE) - (uintptr_t)p;
    if (head) munmap(p, head);
    if (HUGE_PAGE - head) munmap(p + head + size, HUGE_PAGE - head);
    p += head;
    if (huge_now) sift__pages_huge(p, size);
    return p;
}

/* The copy is complete: read-only from now on (shared between contexts, as the file was),
 * and into 2 MiB pages as the kernel finds time (pages.c; a no-op where it was asked before). */
static void copy_done(char *mem, size_t size)
{
    mprotect(mem, size, PROT_READ);
    sift__pages_huge(mem, size);
}

/* The packing after load: one thread takes the chunks in order, and each matrix whose bytes
 * are all in place is published (x8_late, release: a decode that sees the pointer sees the
 * bytes). Stops early when the model is freed or the memory is refused; the published
 * matrices stay in use, the rest keep their plain rows. No MADV_POPULATE_WRITE here: it
 * holds the process's mmap lock for the whole chunk (4 MiB of fresh pages, milliseconds on
 * a VM), and a decode running meanwhile that maps or unmaps memory (a large malloc or free)
 * waited behind it: sampling measured 400-500 µs a token instead of 20. The writes fault
 * the pages in one at a time instead. The rows are packed straight from the file mapping
 * (from_map): the decodes read them there meanwhile, so it is populated and stays, and a
 * copy from it took a third of pread's time into the same memory (626 MiB: 133-214 ms
 * against 400-595 ms on this VM). */
typedef struct {
    copy_job J; /* J.mem: the packed matrices' own block, unmapped with the model */
    sift__weight **ws;
    pthread_t thread;
    bool joined;
} late_pack;

static void *late_worker(void *arg)
{
    late_pack *L = arg;
    copy_job *J = &L->J;
#ifdef __linux__
    /* the lowest priority (Linux sets it per thread): where the decodes keep every core
     * busy the packing waits for them, rather than slowing them; on an idle core it runs
     * at full speed. Advice only: a refusal changes nothing. */
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
#endif
    const size_t cap = pack_cap(J);
    char *buf = NULL;
    int done = 0; /* parts published; they lie in order in the block */
    for (size_t c = 0; c * CHUNK < J->size && !atomic_load(&J->failed); c++) {
        if (!copy_chunk(J, c, &buf, cap, false)) break;
        const size_t hi = (c + 1) * CHUNK;
        for (; done < J->n && J->parts[done].at + J->parts[done].n <= hi; done++)
            __atomic_store_n(&L->ws[done]->x8_late, (const void *)(J->mem + J->parts[done].at), __ATOMIC_RELEASE);
    }
    if (done == J->n) copy_done(J->mem, J->size);
    free(buf);
    return NULL;
}

/* Is w to be read in the x8 layout (k_auto packs its type)? Q4_K, Q5_K, Q6_K and Q8_0 matrices (not
 * expert stacks: their placement is left as it was), and MXFP4 ones,
 * expert stacks too when every expert is whole groups (an expert is then a range of groups,
 * read in place by gemm_x8), where k_auto reads the layout. */
static bool x8_packable(const sift_model *m, const sift__weight *w)
{
    if (!m->k_auto.x8_pack[w->type] || w->n_out < 8) return false;
    const sift__type_traits *tt = sift__type_traits_get(w->type);
    if (w->row_bytes != (size_t)(w->n_in / tt->block_size) * tt->block_bytes) return false; /* whole plain rows */
    /* an MXFP4 expert stack: every expert whole groups of 8 rows; the other types: one matrix */
    return w->type == SIFT_TYPE_MXFP4 ? (w->n_part ? w->n_part : 8) % 8 == 0 : !w->n_part;
}

/* Which x8 types are packed after load rather than during it: Q5_K and Q6_K, and Q8_0 when SIFT_PACK_LATE=1
 * asks for its x8 layout (choose.c: by default it is read in place), whose copy is the
 * largest per parameter: 8.5 bits a value, ~650 MB for a 0.6B model, 450-500 ms on this VM
 * (fresh memory costs ~0.75 ms per MiB to touch), more than llama.cpp's whole load of the
 * mapped file. Q4_K and MXFP4 stay packed during the load (half the bytes; the plain
 * kernels they would run meanwhile are 2.3x slower in generation). SIFT_PACK_NOW=1 packs
 * every type during the load (Q8_0 included). */
static bool pack_late(sift_tensor_type t)
{
    /* Q5_K, Q6_K: 5.5 and 6.6 bits, and their plain kernels within 1.8x of the x8 ones */
    return t == SIFT_TYPE_Q8_0 || t == SIFT_TYPE_Q5_K || t == SIFT_TYPE_Q6_K;
}

/* Copy the matrices k_auto reads in the x8 layout (all of them with all) into one huge-page
 * block, packing those on the way; returns without a copy when the memory is refused. With
 * late (and not all), the copy is made by a thread of its own after load returns (late_worker). */
static void copy_matrices(sift_model *m, bool all, bool late)
{
    const int cap = 11 * m->hp.n_layer + 1;
    sift__weight **ws = malloc((size_t)cap * sizeof *ws);
    copy_job J = {.fd = sift__gguf_fd(m->gguf), .parts = malloc((size_t)cap * sizeof *J.parts)};
    if (!ws || !J.parts) goto done;
    const int n_all = collect(m, ws, cap);
    J.n = 0;
    const bool now = sift__env_on("SIFT_PACK_NOW");
    for (int i = 0; i < n_all; i++) /* the rest stays in the file mapping */
        if (all || (x8_packable(m, ws[i]) && (now ? !late : pack_late(ws[i]->type) == late))) ws[J.n++] = ws[i];
    const uint8_t *base = sift__gguf_bytes(m->gguf);
    size_t total = 0;
    for (int i = 0; i < J.n; i++) {
        const uint8_t *src = ws[i]->data;
        J.parts[i] = (part){.src = ws[i]->data, .off = (uint64_t)(src - base), .at = total, .n = weight_bytes(ws[i])};
        total += round_up(J.parts[i].n, WEIGHT_ALIGN);
        if (x8_packable(m, ws[i])) {
            J.parts[i].pack = m->k_auto.x8_pack[ws[i]->type];
            J.parts[i].row_bytes = ws[i]->row_bytes;
            J.parts[i].group = 8 * ws[i]->row_bytes;
            J.parts[i].nb = ws[i]->n_in / sift__type_traits_get(ws[i]->type)->block_size;
            J.parts[i].n_groups = ws[i]->n_out / 8;
        }
    }
    if (total == 0) goto done;
    J.size = round_up(total, HUGE_PAGE);
    if (!(J.mem = map_aligned(J.size, all))) goto done;
    atomic_init(&J.next, 0);
    atomic_init(&J.failed, false);
    if (late && !all) {
        late_pack *L = malloc(sizeof *L);
        if (L) {
            L->J = J;
            L->J.from_map = true;
            L->ws = ws;
            atomic_init(&L->J.next, 0);
            atomic_init(&L->J.failed, false);
            L->joined = false;
            if (pthread_create(&L->thread, NULL, late_worker, L) == 0) {
                m->packer = L;
                return; /* L owns ws, the parts and the memory now */
            }
            free(L);
        }
        munmap(J.mem, J.size); /* no thread: the rows stay plain */
        goto done;
    }
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
    copy_done(J.mem, J.size);
    for (int i = 0; i < J.n; i++) {
        ws[i]->data = J.mem + J.parts[i].at;
        ws[i]->huge_pages = true;
        ws[i]->x8 = J.parts[i].pack != NULL;
    }
    m->wmem = J.mem;
    m->wmem_size = J.size;
done:
    free(ws);
    free(J.parts);
}

void sift__weights_place(sift_model *m)
{
    const bool map_all = sift__env_on("SIFT_MMAP"), copy_all = !map_all && sift__env_on("SIFT_COPY");
    bool used[SIFT_TYPE_COUNT] = {false};
    const int cap = 11 * m->hp.n_layer + 1;
    sift__weight **ws = malloc((size_t)cap * sizeof *ws);
    const int n = ws ? collect(m, ws, cap) : 0;
    for (int i = 0; i < n; i++)
        if ((int)ws[i]->type >= 0 && ws[i]->type < SIFT_TYPE_COUNT) used[ws[i]->type] = true;
    if (m->output.data && (int)m->output.type >= 0 && m->output.type < SIFT_TYPE_COUNT) used[m->output.type] = true;
    sift__kernels_choose(used, copy_all, &m->k_auto);
    if (map_all) memset(m->k_auto.x8_pack, 0, sizeof m->k_auto.x8_pack);
    if (!map_all) copy_matrices(m, copy_all, false);
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
    /* the packing after load starts once the load's own work is done (not competing with it) */
    if (!map_all && !copy_all) copy_matrices(m, false, true);
    free(ws);
}

void sift__weights_wait(sift_model *m)
{
    late_pack *L = m->packer;
    if (L && !L->joined) pthread_join(L->thread, NULL), L->joined = true;
}

void sift__weights_free(sift_model *m)
{
    late_pack *L = m->packer;
    if (L) { /* stop the packing (after its chunk in progress) before its memory goes */
        atomic_store(&L->J.failed, true);
        sift__weights_wait(m);
        munmap(L->J.mem, L->J.size);
        free(L->ws);
        free(L->J.parts);
        free(L);
        m->packer = NULL;
    }
    if (m->wmem) munmap(m->wmem, m->wmem_size);
    m->wmem = NULL;
    m->wmem_size = 0;
}
