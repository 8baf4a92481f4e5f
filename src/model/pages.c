/*
 * pages.c - when the runtime's large fresh blocks (the KV cache, the repacked weights) ask
 * the kernel for transparent huge pages: after they are touched, not before.
 *
 * 2 MiB pages pay once the memory is in use: attention at depth reads the transposed K/V
 * rows of every head, one 4 KiB page each, and with 2 MiB pages those reads missed the TLB
 * less (an attention-bound model at depth 1024 decoded 7-10% faster); the x8 weight copy
 * streamed ~5% faster in generation. But asking for them before the first touch
 * (MADV_HUGEPAGE on fresh memory) makes every fault take a whole free 2 MiB block, and
 * where those are expensive the wait lands inside the load or sift_context_new:
 *
 *  - with /sys/kernel/mm/transparent_hugepage/defrag at "madvise" (a common default), a
 *    hinted fault compacts memory synchronously when no free 2 MiB block is left;
 *  - on a VM with free page reporting (virtio-balloon; this machine reports every free
 *    block of 2 MiB and more to the host, which discards it) a free 2 MiB block has usually
 *    been handed back, and touching it waits for the host to back all of it again, while a
 *    4 KiB fault is served from the small free fragments the guest kept. Measured right
 *    after llama.cpp's process exited: 64 MiB of K/V cache zeroed in 170-520 ms hinted
 *    against 40-90 ms unhinted (one thread); the 305 MiB Q4_K copy of a 0.6B model in
 *    750-950 ms of CPU against 210-240 ms.
 *
 * llama.cpp's buffers are plain malloc'd 4 KiB pages. So the blocks are faulted in 4 KiB
 * pages, and once populated, sift__pages_huge marks them: khugepaged, the kernel's
 * background thread, then collapses them into 2 MiB pages at its own pace (its own defrag
 * setting, on its own CPU time; 16 MiB per 10 s with the default scan rate), so a context
 * or model that lives long gets the TLB gain without anyone waiting for it. Read-only
 * mappings are collapsed too (checked: mprotect(PROT_READ) after the hint). The one place
 * that still asks before the touch is SIFT_COPY=1 (weights.c), the explicit request for
 * every matrix in huge pages that the rows_huge kernels were written for.
 */
#include <stdint.h>
#include <sys/mman.h>

#include "model/model.h"

void sift__pages_huge(void *p, size_t n)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20; /* the 2 MiB pages wholly inside [p, p + n) */
    const uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), b = ((uintptr_t)p + n) & ~(huge - 1);
    if (b > a) (void)madvise((void *)a, b - a, MADV_HUGEPAGE); /* advice: refused (no THP) changes nothing */
#else
    (void)p, (void)n;
#endif
}
