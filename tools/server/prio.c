/*
 * prio.c - background CPU priority for the work whose cost a client controls.
 *
 * A chat template's render (the model file's code), a GBNF grammar's or a JSON schema's
 * compilation, a tools request's grammar: the client decides how long each takes, up to its
 * budget (milliseconds to seconds). They run on the connection's own thread
 * (MHD_USE_THREAD_PER_CONNECTION). The engine thread and the other clients' connection
 * threads must win every core they share with such work, or one attacker's requests add
 * their CPU time to every other client's latency.
 *
 * How: just before such work, request.c, tool_calls.c and http.c call srv_prio_background();
 * http.c calls srv_prio_restore() once the request's tasks are built, before it waits on
 * the engine, and again whenever a handler returns (error paths), so a stream's writes and a
 * keep-alive connection's next request run at normal priority. Both are per thread and
 * idempotent.
 *
 * The background is nice +19, the lowest (Linux threads have their own nice values; elsewhere
 * this is a no-op): weight 15 against the engine's 1024. Measured with `sift bench --server
 * --hostile` on two cores (2026-11-29, load 1-2): +10 gave 96.5 % and 94.8 % of the
 * legitimate client's answers within 3x its idle latency, +19 gave 97.2, 95.8 and 96.2 %.
 * SCHED_IDLE was tried too and was worse in the tail: a thread that holds a lock (a malloc
 * arena, a task's mutex) and is starved there blocks normal threads behind it, and
 * SCHED_IDLE threads starve whenever the cores are busy. Going back down needs CAP_SYS_NICE
 * or an RLIMIT_NICE that allows it; without, the thread stays niced, which only slows its own
 * connection's later HTTP work.
 */
#include <errno.h>
#include <stdbool.h>

#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "server/server.h"

#define PRIO_NICE 19 /* the nice value of background work: the lowest */

static srv_prio_mode prio_mode = SRV_PRIO_OFF; /* set once by srv_prio_init, before any connection thread */

static _Thread_local bool prio_in; /* this thread is in the background now */
static _Thread_local int prio_was; /* its nice value before */

srv_prio_mode srv_prio_init(bool enable)
{
#ifdef __linux__
    prio_mode = enable ? SRV_PRIO_NICE : SRV_PRIO_OFF;
#else
    (void)enable;
    prio_mode = SRV_PRIO_OFF;
#endif
    return prio_mode;
}

void srv_prio_background(void)
{
#ifdef __linux__
    if (prio_in || prio_mode == SRV_PRIO_OFF) return;
    const id_t tid = (id_t)syscall(SYS_gettid);
    errno = 0;
    const int was = getpriority(PRIO_PROCESS, tid);
    if (errno || setpriority(PRIO_PROCESS, tid, PRIO_NICE) != 0) return;
    prio_was = was;
    prio_in = true;
#endif
}

void srv_prio_restore(void)
{
#ifdef __linux__
    if (!prio_in) return;
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), prio_was) != 0) return; /* stays niced: see the top */
    prio_in = false;
#endif
}
