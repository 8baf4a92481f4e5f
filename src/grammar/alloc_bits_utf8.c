/*
 * alloc_bits_utf8.c - counted allocation, bitset and hashing helpers of the grammar layer (see alloc_bits_utf8.h).
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* mremap, MREMAP_MAYMOVE */
#endif
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/alloc_bits_utf8.h"

#if defined(__linux__)
#include <malloc.h> /* malloc_usable_size: how much of a malloc'd block to copy into a mapping */
#include <sys/mman.h>
#define GX_HAVE_MREMAP 1
#else
#define GX_HAVE_MREMAP 0
#endif

static _Atomic uint64_t g_allocs;

/* Under LeakSanitizer our mappings are roots: a block that only a mapped array points to (the
 * share's records, for one) is alive, not leaked - LSan scans the heap, stacks and globals,
 * never anonymous mappings. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define GX_LSAN 1
#endif
#endif
#if !defined(GX_LSAN) && defined(__SANITIZE_ADDRESS__)
#define GX_LSAN 1
#endif
#if defined(GX_LSAN) && GX_HAVE_MREMAP
#include <sanitizer/lsan_interface.h>
#define LSAN_ROOT(p, n) __lsan_register_root_region((p), (n))
#define LSAN_UNROOT(p, n) __lsan_unregister_root_region((p), (n))
#else
#define LSAN_ROOT(p, n) ((void)(p), (void)(n))
#define LSAN_UNROOT(p, n) ((void)(p), (void)(n))
#endif

/*
 * Big growable blocks (Linux). Arrays of the mask engine (entries, DFA states, stack arena, lists)
 * grow during a mask computation; realloc of a megabyte block on the brk heap copied it (and
 * faulted in every page of the new copy): single masks of 5-10 ms with almost no trie walk
 * (MaskBench, issue 12). glibc's own mmap path would mremap, but its threshold moves up after
 * each free of a mapped block, so such arrays mostly live on the heap. So a block that
 * sift__gx_grow_realloc (sift__gx_grow, the stack arena) grows to GX_BIG bytes or more becomes our
 * own anonymous mapping, and later growth is
 * mremap(MREMAP_MAYMOVE): in place when the address space after it is free, else the kernel
 * moves page tables - never a copy of the contents. Blocks of 2 MiB or more ask for huge pages
 * (MADV_HUGEPAGE): one fault per 2 MiB instead of 512. The mapped blocks are recorded in a small
 * locked table (pointer -> mapped length) that sift__gx_free/sift__gx_realloc consult only for
 * page-aligned pointers (malloc never returns those for small blocks, glibc never for its own
 * mappings); a full table falls back to realloc. sift__gx_realloc itself never makes a mapping:
 * its blocks may leave the library (sift_json_schema_to_grammar's text is the caller's to free()).
 * A freed mapping is kept as a spare (16 of them, 64 MiB at most) for the next big block: its pages
 * are already faulted in, where a fresh mapping (or a new engine's arrays) faults every page again.
 * Elsewhere everything is plain realloc.
 */
#if GX_HAVE_MREMAP
#define GX_BIG ((size_t)256 << 10)
#define GX_HUGE ((size_t)2 << 20)
#define GX_BIG_SLOTS 1024u /* live mapped blocks at most (each >= 256 KiB: 256 GiB) */

static struct {
    void *p;
    size_t len;
} g_big[GX_BIG_SLOTS];
static atomic_flag g_big_lock = ATOMIC_FLAG_INIT;
static uint32_t g_big_n;
/* freed mappings kept for the next big block (their pages are already faulted in: a new engine's
 * arrays would otherwise fault every page again), 64 MiB at most */
#define GX_SPARE_SLOTS 16u
#define GX_SPARE_BYTES ((size_t)64 << 20)
static struct {
    void *p;
    size_t len;
} g_spare[GX_SPARE_SLOTS];
static uint32_t g_spare_n;
static size_t g_spare_bytes;

static void big_lock(void)
{
    while (atomic_flag_test_and_set_explicit(&g_big_lock, memory_order_acquire)) {
    }
}
static void big_unlock(void) { atomic_flag_clear_explicit(&g_big_lock, memory_order_release); }

static size_t page_round(size_t n)
{
    size_t pg = (size_t)4096;
    return (n + pg - 1) & ~(pg - 1);
}

/* slot of p in g_big, or -1; under the lock */
static int32_t big_find(const void *p)
{
    if (((uintptr_t)p & 4095u) != 0) return -1;
    for (uint32_t k = 0; k < g_big_n; k++)
        if (g_big[k].p == p) return (int32_t)k;
    return -1;
}

static void big_advise(void *p, size_t len)
{
    if (len >= GX_HUGE) (void)madvise(p, len, MADV_HUGEPAGE); /* advice only: may fail (no THP) */
}

/* p: NULL or a malloc'd block; returns a mapping of at least n bytes holding its contents (p freed),
 * or NULL with p untouched (table full or no mapping: the caller falls back to realloc) */
static void *big_from_heap(void *p, size_t n)
{
    size_t len = page_round(n);
    big_lock();
    bool room = g_big_n < GX_BIG_SLOTS;
    big_unlock();
    if (!room) return NULL;
    void *m = MAP_FAILED;
    size_t have = 0;
    big_lock();
    int32_t bi = -1; /* a spare mapping big enough, else the biggest: resized to len below */
    for (uint32_t k = 0; k < g_spare_n; k++)
        if (bi < 0 || (g_spare[k].len >= len && (g_spare[bi].len < len || g_spare[k].len < g_spare[bi].len)) ||
            (g_spare[bi].len < len && g_spare[k].len > g_spare[bi].len))
            bi = (int32_t)k;
    if (bi >= 0) {
        m = g_spare[bi].p;
        have = g_spare[bi].len;
        g_spare_bytes -= have;
        g_spare[bi] = g_spare[--g_spare_n];
    }
    big_unlock();
    if (m != MAP_FAILED && have != len) {
        void *r = mremap(m, have, len, MREMAP_MAYMOVE);
        if (r == MAP_FAILED) munmap(m, have);
        m = r;
    }
    if (m == MAP_FAILED) m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    big_lock();
    if (g_big_n == GX_BIG_SLOTS) {
        big_unlock();
        munmap(m, len);
        return NULL;
    }
    g_big[g_big_n].p = m;
    g_big[g_big_n].len = len;
    g_big_n++;
    big_unlock();
    LSAN_ROOT(m, len);
    big_advise(m, len);
    if (p) {
        size_t old = malloc_usable_size(p);
        memcpy(m, p, old < n ? old : n);
        free(p);
    }
    return m;
}

/* realloc of a mapped block of `old` bytes: mremap, or back to the heap when it shrinks below GX_BIG / 2 */
static void *big_realloc(void *p, size_t old, size_t n)
{
    size_t len = page_round(n);
    if (n < GX_BIG / 2) {
        void *h = malloc(n);
        if (!h) return NULL;
        memcpy(h, p, n);
        sift__gx_free(p);
        return h;
    }
    if (len == old) return p;
    void *m = mremap(p, old, len, MREMAP_MAYMOVE);
    if (m == MAP_FAILED) return NULL;
    LSAN_UNROOT(p, old);
    LSAN_ROOT(m, len);
    big_lock();
    int32_t k = big_find(p); /* found again: another thread's free may have moved the slot */
    g_big[k].p = m;
    g_big[k].len = len;
    big_unlock();
    if (len > old) big_advise(m, len);
    return m;
}
#endif

void *sift__gx_malloc(size_t n)
{
    atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
    return malloc(n ? n : 1);
}

void *sift__gx_calloc(size_t n, size_t size)
{
    atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
    return calloc(n ? n : 1, size ? size : 1);
}

/* realloc that may turn a big block into a mapping (to_map) or keeps it malloc'd; either takes a mapped p */
static void *gx_realloc(void *p, size_t n, bool to_map)
{
    atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
#if GX_HAVE_MREMAP
    if (p && ((uintptr_t)p & 4095u) == 0) {
        big_lock();
        int32_t k = big_find(p);
        size_t old = k >= 0 ? g_big[k].len : 0;
        big_unlock();
        if (k >= 0) {
            if (to_map) return big_realloc(p, old, n);
            void *h = malloc(n ? n : 1);
            if (!h) return NULL;
            memcpy(h, p, old < n ? old : n);
            sift__gx_free(p);
            return h;
        }
    }
    if (to_map && n >= GX_BIG) {
        void *m = big_from_heap(p, n);
        if (m) return m;
    }
#else
    (void)to_map;
#endif
    return realloc(p, n ? n : 1);
}

void *sift__gx_realloc(void *p, size_t n) { return gx_realloc(p, n, false); }

void *sift__gx_grow_realloc(void *p, size_t n) { return gx_realloc(p, n, true); }

void sift__gx_free(void *p)
{
#if GX_HAVE_MREMAP
    if (p && ((uintptr_t)p & 4095u) == 0) {
        big_lock();
        int32_t k = big_find(p);
        size_t len = 0;
        bool kept = false;
        if (k >= 0) {
            len = g_big[k].len;
            g_big[k] = g_big[--g_big_n];
            if (g_spare_n < GX_SPARE_SLOTS && g_spare_bytes + len <= GX_SPARE_BYTES) {
                g_spare[g_spare_n].p = p;
                g_spare[g_spare_n].len = len;
                g_spare_n++;
                g_spare_bytes += len;
                kept = true;
            }
        }
        big_unlock();
        if (k >= 0) {
            LSAN_UNROOT(p, len);
            if (!kept) munmap(p, len);
            return;
        }
    }
#endif
    free(p);
}

uint32_t sift__gx_big_live(void)
{
#if GX_HAVE_MREMAP
    big_lock();
    uint32_t n = g_big_n;
    big_unlock();
    return n;
#else
    return 0;
#endif
}

uint64_t sift__gx_alloc_count(void) { return atomic_load_explicit(&g_allocs, memory_order_relaxed); }

bool sift__gx_grow(void **arr, uint32_t *cap, uint32_t need, size_t size)
{
    if (need <= *cap) return true;
    uint64_t ncap = *cap ? (uint64_t)*cap * 2 : 16;
    while (ncap < need) ncap *= 2;
    if (ncap > UINT32_MAX) ncap = UINT32_MAX;
    if (ncap < need || ncap * size > (uint64_t)SIZE_MAX / 2) return false;
    void *p = sift__gx_grow_realloc(*arr, (size_t)ncap * size);
    if (!p) return false;
    *arr = p;
    *cap = (uint32_t)ncap;
    return true;
}

bool sift__gx_bits_any_in(const uint64_t *b, uint32_t lo, uint32_t hi)
{
    if (lo > hi) return false;
    uint32_t wl = lo >> 6, wh = hi >> 6;
    uint64_t ml = ~(uint64_t)0 << (lo & 63);
    uint64_t mh = ~(uint64_t)0 >> (63 - (hi & 63));
    if (wl == wh) return (b[wl] & ml & mh) != 0;
    if (b[wl] & ml) return true;
    for (uint32_t w = wl + 1; w < wh; w++)
        if (b[w]) return true;
    return (b[wh] & mh) != 0;
}

bool sift__gx_bits_intersect(const uint64_t *a, const uint64_t *b, uint32_t words)
{
    for (uint32_t i = 0; i < words; i++)
        if (a[i] & b[i]) return true;
    return false;
}

uint64_t sift__gx_hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        uint64_t w;
        memcpy(&w, s + k, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    if (k < n) memcpy(&w, s + k, n - k);
    return sift__gx_mix64(h ^ w);
}

uint64_t sift__gx_hash_u32s(const uint32_t *v, uint32_t n, uint64_t seed)
{
    uint64_t h = seed ^ (0x9E3779B97F4A7C15ULL * (n + 1));
    for (uint32_t i = 0; i < n; i++) h = sift__gx_mix64(h ^ (v[i] + 0x632BE59BD9B4E019ULL * (i + 1)));
    return h;
}
