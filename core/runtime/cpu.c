/*
 * cpu.c - the CPU executor: runs a kernel's grid on a pool of worker threads,
 * with the semantics the kernel has on a GPU.
 *
 * Blocks. A launch hands the grid's blocks out, by linear index (x fastest),
 * through an atomic counter to the pool's workers and to the launching thread.
 * A block runs from start to end on one OS thread, so its shared memory and
 * its fiber scheduler belong to that worker and need no locks. The pool
 * (oxr_cpu_threads() - 1 threads, started on the first launch) runs one launch
 * at a time: concurrent launches from several host threads queue on a mutex,
 * and a kernel must not launch (it would wait for itself).
 *
 * Threads of a block. A kernel without barriers or warp operations comes as a
 * block_fn that loops over the threads itself. Any other comes as a thread_fn,
 * and each GPU thread of the block runs on its own fiber (a ucontext with its
 * own stack); the block's fibers take turns on the worker's OS thread. A fiber
 * runs until it waits (barrier, warp operation) or returns; then the next
 * runnable fiber runs, in FIFO (round-robin) order. Fibers switch directly to
 * one another; the worker's own context (the "hub") is resumed only when the
 * whole block is done. swapcontext makes a sigprocmask system call per switch;
 * that dominates barrier-heavy kernels (a hand-written x86-64 switch would
 * avoid it), but is acceptable for now.
 *
 * Semantics of the rendezvous, for correct programs as on the GPU:
 *  - barrier: completes when every thread of the block that has not returned
 *    has arrived. A thread that returns counts as arrived, so a kernel whose
 *    threads return early does not hang (as on current NVIDIA GPUs).
 *  - warp operations (shfl, vote): the lanes of a warp rendezvous; the op
 *    completes when every lane of the warp that has not returned has arrived,
 *    and is computed over those lanes ("present" lanes). Lanes are numbered
 *    linearly (x fastest); warp w is threads [32w, 32w+32), and the last warp
 *    of a block may be partial. A shuffle whose source lane is absent (beyond
 *    the end of a partial warp, or returned) yields the caller's own value.
 *    As in PTX shfl.sync, only bits 4:0 of the lane/delta/mask count (a down
 *    shuffle by 33 is one by 1). Votes count the present lanes only (ballot
 *    bits of absent lanes are 0; "all" over the present lanes).
 *  - deadlock: if every thread that has not returned waits and nothing can
 *    complete (some lanes of a warp sit at a warp op while others of the same
 *    warp sit at the barrier: an incorrect program, which would hang or give
 *    undefined results on a GPU), every pending warp op is completed with the
 *    lanes present, as above. That releases someone, so a launch never hangs.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "runtime/runtime.h"

/* Stack switching confuses AddressSanitizer unless every switch is announced
 * to it (__sanitizer_{start,finish}_switch_fiber). With that, fibers are fully
 * checked, stack frames and fake stacks (detect_stack_use_after_return)
 * included; ASan still prints a one-time warning that it does not fully
 * support swapcontext. */
#if defined(__SANITIZE_ADDRESS__)
#define OXR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OXR_ASAN 1
#endif
#endif
#ifdef OXR_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

enum {
  MAX_THREADS = 1024, /* threads per block, as on every CUDA GPU */
  WARP = 32,
  MAX_WARPS = MAX_THREADS / WARP,
};

/* The stack of one fiber (one GPU thread). Kernels do not recurse and keep
 * small frames, so 64 KiB leaves ample room, also for ASan's bigger frames and
 * a sanitizer report. The stacks are reserved, not committed: only the pages a
 * kernel touches cost memory. */
#define FIBER_STACK_SIZE ((size_t)64 << 10)
/* Each stack has a PROT_NONE guard page below it, but each guard splits the
 * mapping and costs two kernel memory maps (vm.max_map_count is 65530 by
 * default, shared with the rest of the process), so only this many stacks in
 * the process get one. Every stack has a canary at its bottom, checked when the
 * fiber returns. */
#define MAX_GUARDED_STACKS 8192
#define STACK_CANARY 0x4f5849444553544bull

/* ------------------------------------------------------------ fibers */

enum { F_READY, F_RUNNING, F_BARRIER, F_WARP, F_DONE };
enum { OP_SHFL = 0 /* + mode 0..3 */, OP_VOTE = 4 /* + mode 0..2 */ };

typedef struct fiber {
  ucontext_t uc;
  char *stack; /* lowest address of its FIBER_STACK_SIZE bytes */
  uint32_t tid[3];
  uint8_t state;
  uint8_t op;       /* the pending warp op */
  uint32_t arg;     /* its lane, delta or mask */
  uint64_t val;     /* its operand (a vote's predicate) */
  uint64_t res;     /* its result, written when the op completes */
  void *fake_stack; /* ASan's fake stack while switched out */
} fiber;

typedef struct warp_state {
  uint32_t live;    /* lanes that have not returned */
  uint32_t arrived; /* lanes waiting in the pending warp op */
} warp_state;

/* One worker's scheduler; runs the fibers of one block at a time. */
typedef struct sched {
  oxr_cpu_ctx *ctx;
  const oxr_cpu_kernel *k;
  void **args;
  fiber *fib;     /* MAX_THREADS, allocated once: a ucontext must not move */
  char *stacks;   /* one mapping: per fiber, a guard page and the stack */
  uint32_t ready; /* fib[0..ready) have a stack and a context */
  uint32_t n;     /* threads of the current block */
  uint32_t live;  /* of which not returned */
  fiber *cur;     /* the running fiber */
  uint16_t rq[MAX_THREADS]; /* runnable fibers, a ring */
  uint32_t rq_head, rq_len;
  uint16_t bar[MAX_THREADS]; /* fibers waiting at the barrier */
  uint32_t bar_n;
  warp_state warps[MAX_WARPS];
  ucontext_t hub; /* the worker's own context, resumed when the block is done */
  sigset_t sigmask; /* the running thread's: swapcontext installs the fiber's */
  /* ASan: the hub's fake stack and stack bounds (learnt on the first switch). */
  void *hub_fake;
  const void *hub_bottom;
  size_t hub_size;
  bool from_hub;
} sched;

static _Thread_local sched *tl_sched; /* the scheduler running on this thread */
static atomic_uint g_guarded;         /* stacks with a guard page, process-wide */
static size_t g_page;

/* Gives fibers [s->ready, n) a stack and a context. */
static bool sched_reserve(sched *s, uint32_t n) {
  size_t slot = g_page + FIBER_STACK_SIZE;
  if (!s->fib) {
    s->fib = calloc(MAX_THREADS, sizeof(fiber));
    void *p = mmap(NULL, slot * MAX_THREADS, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!s->fib || p == MAP_FAILED) {
      free(s->fib);
      s->fib = NULL;
      if (p != MAP_FAILED) munmap(p, slot * MAX_THREADS);
      return false;
    }
    s->stacks = p;
  }
  for (; s->ready < n; s->ready++) {
    fiber *f = &s->fib[s->ready];
    char *base = s->stacks + slot * s->ready;
    /* A failed mprotect (map count exhausted) only costs the guard. */
    if (atomic_fetch_add(&g_guarded, 1) < MAX_GUARDED_STACKS) mprotect(base, g_page, PROT_NONE);
    f->stack = base + g_page;
    if (getcontext(&f->uc) != 0) return false; /* done once; makecontext reuses it */
  }
  return true;
}

/* Switches from context `from` to `to`, whose stack is [bottom, bottom+size).
 * `fake` keeps ASan's fake stack of the context we leave; NULL when we leave
 * it for good (a returned fiber), which frees it. */
static void switch_to(ucontext_t *from, void **fake, ucontext_t *to, const void *bottom,
                      size_t size) {
#ifdef OXR_ASAN
  __sanitizer_start_switch_fiber(fake, bottom, size);
#endif
  int rc = swapcontext(from, to);
  assert(rc == 0);
  OXB_UNUSED(rc);
#ifdef OXR_ASAN
  __sanitizer_finish_switch_fiber(fake ? *fake : NULL, NULL, NULL);
#endif
  OXB_UNUSED(fake), OXB_UNUSED(bottom), OXB_UNUSED(size);
}

static void rq_push(sched *s, fiber *f) {
  assert(s->rq_len < s->n);
  f->state = F_READY;
  s->rq[(s->rq_head + s->rq_len++) % MAX_THREADS] = (uint16_t)(f - s->fib);
}

static void release_barrier(sched *s) {
  for (uint32_t i = 0; i < s->bar_n; i++) rq_push(s, &s->fib[s->bar[i]]);
  s->bar_n = 0;
}

/* Completes warp `w`'s pending op over the lanes that arrived, and makes them
 * runnable (all but `self`, the running fiber, which just goes on). */
static void complete_warp_op(sched *s, warp_state *w, fiber *self) {
  uint32_t present = w->arrived, voters = 0, yes = 0;
  fiber *lanes = s->fib + (w - s->warps) * WARP;
  w->arrived = 0;
  for (uint32_t m = present; m; m &= m - 1) {
    uint32_t l = (uint32_t)__builtin_ctz(m);
    if (lanes[l].op >= OP_VOTE) {
      voters |= 1u << l;
      if (lanes[l].val) yes |= 1u << l;
    }
  }
  for (uint32_t m = present; m; m &= m - 1) {
    uint32_t l = (uint32_t)__builtin_ctz(m), src = l;
    fiber *g = &lanes[l];
    /* Like PTX shfl.sync, which reads only bits 4:0 of the lane/delta/mask. */
    uint32_t d = g->arg & (WARP - 1);
    switch (g->op) {
    case OP_SHFL + 0: src = d; break;
    case OP_SHFL + 1: src = l >= d ? l - d : l; break;
    case OP_SHFL + 2: src = l + d < WARP ? l + d : l; break;
    case OP_SHFL + 3: src = l ^ d; break;
    case OP_VOTE + 0: g->res = yes == voters; break;
    case OP_VOTE + 1: g->res = yes != 0; break;
    case OP_VOTE + 2: g->res = yes; break;
    default: assert(!"bad warp op");
    }
    if (g->op < OP_VOTE) g->res = (present >> src & 1) ? lanes[src].val : g->val;
    if (g != self) rq_push(s, g);
  }
}

/* The next fiber to run, or NULL when every fiber has returned. */
static fiber *pick_next(sched *s) {
  if (s->rq_len == 0 && s->live > 0) {
    /* Deadlock: every fiber that has not returned waits. Not all at the
     * barrier (it would have completed when the last one arrived or returned),
     * so some warp has lanes waiting in a warp op: complete those ops with the
     * lanes present (see the top of the file). */
    for (uint32_t w = 0; w < (s->n + WARP - 1) / WARP; w++)
      if (s->warps[w].arrived) complete_warp_op(s, &s->warps[w], NULL);
    assert(s->rq_len > 0);
  }
  if (s->rq_len == 0) return NULL;
  fiber *f = &s->fib[s->rq[s->rq_head]];
  s->rq_head = (s->rq_head + 1) % MAX_THREADS;
  s->rq_len--;
  return f;
}

/* Called by the running fiber `f` once it waits or has returned: runs the next
 * fiber, or the hub after the last one. Returns when `f` runs again. */
static void run_next(sched *s, fiber *f) {
  fiber *next = pick_next(s);
  if (next == f) { /* released by the deadlock rule: go on */
    f->state = F_RUNNING;
    return;
  }
  void **fake = f->state == F_DONE ? NULL : &f->fake_stack;
  s->cur = next;
  if (!next) {
    assert(f->state == F_DONE && s->live == 0);
    switch_to(&f->uc, fake, &s->hub, s->hub_bottom, s->hub_size);
  } else {
    next->state = F_RUNNING;
    switch_to(&f->uc, fake, &next->uc, next->stack, FIBER_STACK_SIZE);
  }
}

static void fiber_main(void) {
  sched *s = tl_sched;
#ifdef OXR_ASAN
  const void *bottom;
  size_t size;
  __sanitizer_finish_switch_fiber(NULL, &bottom, &size);
  if (s->from_hub) { /* the block's first fiber: learn where the hub's stack is */
    s->hub_bottom = bottom, s->hub_size = size;
    s->from_hub = false;
  }
#endif
  fiber *f = s->cur;
  s->k->thread_fn(s->ctx, s->args, f->tid[0], f->tid[1], f->tid[2]);

  if (*(volatile uint64_t *)f->stack != STACK_CANARY) {
    fprintf(stderr, "oxide: a CPU kernel thread overflowed its %zu KiB stack\n",
            FIBER_STACK_SIZE >> 10);
    abort();
  }
  uint32_t i = (uint32_t)(f - s->fib);
  warp_state *w = &s->warps[i / WARP];
  f->state = F_DONE;
  s->live--;
  w->live &= ~(1u << i % WARP);
  /* A returned thread counts as arrived at the barrier, and leaves its warp. */
  if (s->bar_n > 0 && s->bar_n == s->live) release_barrier(s);
  if (w->arrived && w->arrived == w->live) complete_warp_op(s, w, NULL);
  run_next(s, f);
  assert(!"a returned fiber was resumed");
  abort();
}

/* Runs all threads of the block whose index is in s->ctx, each on a fiber. */
static void run_block_fibers(sched *s) {
  const uint32_t *bd = s->ctx->block_dim;
  uint32_t n = bd[0] * bd[1] * bd[2];
  assert(n >= 1 && n <= s->ready);
  s->n = s->live = n;
  s->bar_n = s->rq_head = s->rq_len = 0;
  for (uint32_t w = 0; w < (n + WARP - 1) / WARP; w++) {
    uint32_t lanes = n - w * WARP < WARP ? n - w * WARP : WARP;
    s->warps[w] = (warp_state){.live = lanes == WARP ? ~0u : (1u << lanes) - 1, .arrived = 0};
  }
  for (uint32_t i = 0; i < n; i++) {
    fiber *f = &s->fib[i];
    f->tid[0] = i % bd[0], f->tid[1] = i / bd[0] % bd[1], f->tid[2] = i / bd[0] / bd[1];
#ifdef OXR_ASAN
    /* Frames of the fiber that last ran here never returned: drop their poison. */
    ASAN_UNPOISON_MEMORY_REGION(f->stack, FIBER_STACK_SIZE);
#endif
    *(uint64_t *)f->stack = STACK_CANARY;
    f->uc.uc_stack.ss_sp = f->stack;
    f->uc.uc_stack.ss_size = FIBER_STACK_SIZE;
    f->uc.uc_link = NULL; /* fiber_main never returns */
    /* Else the fibers would run with the mask of whichever thread last ran
     * them (slot 0 serves every launching thread). */
    f->uc.uc_sigmask = s->sigmask;
    makecontext(&f->uc, fiber_main, 0);
#ifdef OXR_ASAN
    /* ASan's swapcontext interceptor unpoisons the whole uc_stack of the
     * context it enters, which would erase the redzones of the frames the
     * fiber had when it was switched out. Only makecontext reads uc_stack
     * (swapcontext restores the stack pointer from the saved registers), and
     * our switches are annotated, so hide it. */
    f->uc.uc_stack = (stack_t){0};
#endif
    rq_push(s, f);
  }
  tl_sched = s;
  s->cur = pick_next(s);
  s->cur->state = F_RUNNING;
  s->from_hub = true;
  switch_to(&s->hub, &s->hub_fake, &s->cur->uc, s->cur->stack, FIBER_STACK_SIZE);
  assert(s->live == 0 && s->cur == NULL);
}

/* ------------------------------------------------- ctx callbacks (fibers) */

static sched *ctx_sched(oxr_cpu_ctx *ctx) {
  sched *s = ctx->sched;
  assert(s && s->cur && s->cur->state == F_RUNNING); /* only thread_fn kernels */
  return s;
}

static void cpu_barrier(oxr_cpu_ctx *ctx) {
  sched *s = ctx_sched(ctx);
  fiber *f = s->cur;
  if (s->bar_n + 1 == s->live) { /* the last to arrive releases the others, goes on */
    release_barrier(s);
    return;
  }
  s->bar[s->bar_n++] = (uint16_t)(f - s->fib);
  f->state = F_BARRIER;
  run_next(s, f);
}

static uint64_t warp_op(oxr_cpu_ctx *ctx, uint8_t op, uint64_t val, uint32_t arg) {
  sched *s = ctx_sched(ctx);
  fiber *f = s->cur;
  uint32_t i = (uint32_t)(f - s->fib);
  warp_state *w = &s->warps[i / WARP];
  uint32_t bit = 1u << i % WARP;
  assert((w->live & bit) && !(w->arrived & bit));
  f->op = op, f->val = val, f->arg = arg;
  w->arrived |= bit;
  if (w->arrived == w->live) {
    complete_warp_op(s, w, f);
  } else {
    f->state = F_WARP;
    run_next(s, f);
  }
  return f->res; /* written by whichever lane completed the op */
}

static uint64_t cpu_shfl(oxr_cpu_ctx *ctx, uint64_t value, uint32_t arg, uint32_t mode) {
  assert(mode <= 3);
  return warp_op(ctx, (uint8_t)(OP_SHFL + mode), value, arg);
}

static uint32_t cpu_vote(oxr_cpu_ctx *ctx, uint32_t pred, uint32_t mode) {
  assert(mode <= 2);
  return (uint32_t)warp_op(ctx, (uint8_t)(OP_VOTE + mode), pred != 0, 0);
}

static uint32_t cpu_lane(oxr_cpu_ctx *ctx) {
  sched *s = ctx_sched(ctx);
  return (uint32_t)(s->cur - s->fib) % WARP;
}

/* ------------------------------------------------------------ the pool */

typedef struct worker {
  pthread_t thread;
  uint32_t id; /* 0: the slot of the launching thread */
  char *shared;
  size_t shared_cap;
  oxr_cpu_ctx ctx; /* of its current block */
  sched s;
} worker;

typedef struct job {
  const oxr_cpu_kernel *k;
  uint32_t grid[3], block[3];
  void **args;
  oxr_errrec *err;
  uint32_t tag;
  uint64_t nblocks;
  _Atomic uint64_t next; /* the next block to hand out */
  uint32_t helpers;      /* workers 1..helpers take part */
} job;

static struct {
  pthread_once_t once;
  pthread_mutex_t launch_mu; /* held for a whole launch: one launch at a time */
  pthread_mutex_t mu;        /* guards gen, done, and job while set up */
  pthread_cond_t wake, finished;
  uint64_t gen; /* launches so far */
  uint32_t done; /* helpers finished with the current launch */
  uint32_t nworkers; /* including slot 0 */
  worker *workers;
  job job;
} P = {.once = PTHREAD_ONCE_INIT,
       .launch_mu = PTHREAD_MUTEX_INITIALIZER,
       .mu = PTHREAD_MUTEX_INITIALIZER,
       .wake = PTHREAD_COND_INITIALIZER,
       .finished = PTHREAD_COND_INITIALIZER};

int oxr_cpu_threads(void) {
  const char *env = getenv("OXIDE_CPU_THREADS");
  if (env && *env) {
    char *end;
    errno = 0;
    long v = strtol(env, &end, 10);
    if (errno == 0 && *end == 0 && v >= 1 && v <= 1024) return (int)v;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  /* In a container (cpuset), fewer cores may be ours than are online. */
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0 && CPU_COUNT(&set) < n)
    n = CPU_COUNT(&set);
  return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

/* Makes `w` ready for blocks of kernel `k` with `nthreads` threads. */
static bool worker_prepare(worker *w, const oxr_cpu_kernel *k, uint32_t nthreads) {
  size_t need = k->shared_bytes ? k->shared_bytes : 16;
  if (need > w->shared_cap) {
    void *p;
    if (posix_memalign(&p, 64, need) != 0) return false;
    free(w->shared);
    w->shared = p, w->shared_cap = need;
  }
  return !k->thread_fn || sched_reserve(&w->s, nthreads);
}

static void run_blocks(worker *w, job *j) {
  oxr_cpu_ctx *c = &w->ctx;
  *c = (oxr_cpu_ctx){.block_dim = {j->block[0], j->block[1], j->block[2]},
                     .grid_dim = {j->grid[0], j->grid[1], j->grid[2]},
                     .tag = j->tag,
                     .err = j->err,
                     .shared = w->shared,
                     .sched = j->k->thread_fn ? &w->s : NULL,
                     .barrier = cpu_barrier,
                     .shfl = cpu_shfl,
                     .vote = cpu_vote,
                     .lane = cpu_lane};
  w->s.ctx = c, w->s.k = j->k, w->s.args = j->args;
  if (j->k->thread_fn) pthread_sigmask(SIG_SETMASK, NULL, &w->s.sigmask);
  for (;;) {
    uint64_t b = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
    if (b >= j->nblocks) break;
    c->block_idx[0] = (uint32_t)(b % j->grid[0]);
    c->block_idx[1] = (uint32_t)(b / j->grid[0] % j->grid[1]);
    c->block_idx[2] = (uint32_t)(b / j->grid[0] / j->grid[1]);
    if (j->k->block_fn)
      j->k->block_fn(c, j->args);
    else
      run_block_fibers(&w->s);
  }
}

static void *worker_main(void *arg) {
  worker *w = arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&P.mu);
  for (;;) {
    while (P.gen == seen || w->id > P.job.helpers) pthread_cond_wait(&P.wake, &P.mu);
    seen = P.gen;
    pthread_mutex_unlock(&P.mu);
    /* The job stays put until every helper has checked in below. A worker that
     * cannot prepare takes no block; the launching thread takes the rest. */
    job *j = &P.job;
    if (worker_prepare(w, j->k, j->block[0] * j->block[1] * j->block[2])) run_blocks(w, j);
    pthread_mutex_lock(&P.mu);
    if (++P.done == P.job.helpers) pthread_cond_signal(&P.finished);
  }
  return NULL;
}

/* fork() keeps only the forking thread: hold the locks across it so that the
 * child gets them in a consistent state, and let the child run launches alone. */
static void fork_prepare(void) {
  pthread_mutex_lock(&P.launch_mu);
  pthread_mutex_lock(&P.mu);
}
static void fork_parent(void) {
  pthread_mutex_unlock(&P.mu);
  pthread_mutex_unlock(&P.launch_mu);
}
static void fork_child(void) {
  P.nworkers = 1;
  pthread_cond_init(&P.wake, NULL);
  pthread_cond_init(&P.finished, NULL);
  pthread_mutex_unlock(&P.mu);
  pthread_mutex_unlock(&P.launch_mu);
}

static void pool_init(void) {
  g_page = (size_t)sysconf(_SC_PAGESIZE);
  uint32_t n = (uint32_t)oxr_cpu_threads();
  P.workers = calloc(n, sizeof(worker));
  if (!P.workers) return;
  P.nworkers = 1;
  /* Workers block all signals, which then go to the application's threads. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  for (uint32_t i = 1; i < n; i++) {
    P.workers[i].id = i;
    if (pthread_create(&P.workers[i].thread, NULL, worker_main, &P.workers[i]) != 0) break;
    P.nworkers++;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

ox_status oxr_cpu_launch(const oxr_cpu_kernel *k, const uint32_t grid[3], const uint32_t block[3],
                         void **args, oxr_errrec *err, uint32_t tag) {
  if (!k || !grid || !block || !k->block_fn == !k->thread_fn)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         "CPU launch: needs a kernel with exactly one of block_fn, thread_fn");
  uint64_t nthreads = (uint64_t)block[0] * block[1] * block[2];
  uint64_t nblocks = (uint64_t)grid[0] * grid[1] * grid[2];
  if (nblocks == 0 || nthreads == 0 || nthreads > MAX_THREADS)
    return oxb_set_error(OX_ERR_LAUNCH,
                         "CPU launch: grid (%u, %u, %u) and block (%u, %u, %u) must be non-empty, "
                         "with at most %d threads per block",
                         grid[0], grid[1], grid[2], block[0], block[1], block[2], MAX_THREADS);
  pthread_once(&P.once, pool_init);
  if (!P.workers) return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "CPU launch: no worker pool");

  pthread_mutex_lock(&P.launch_mu);
  if (!worker_prepare(&P.workers[0], k, (uint32_t)nthreads)) {
    pthread_mutex_unlock(&P.launch_mu);
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY,
                         "CPU launch: cannot allocate fiber stacks or %u bytes of shared memory",
                         k->shared_bytes);
  }
  pthread_mutex_lock(&P.mu);
  job *j = &P.job;
  j->k = k, j->args = args, j->err = err, j->tag = tag, j->nblocks = nblocks;
  memcpy(j->grid, grid, sizeof j->grid);
  memcpy(j->block, block, sizeof j->block);
  atomic_store(&j->next, 0);
  /* A grid of one block runs on the caller alone; no more helpers than blocks. */
  j->helpers = (uint32_t)(nblocks - 1 < P.nworkers - 1 ? nblocks - 1 : P.nworkers - 1);
  P.done = 0;
  P.gen++;
  if (j->helpers) pthread_cond_broadcast(&P.wake);
  pthread_mutex_unlock(&P.mu);

  run_blocks(&P.workers[0], j);

  pthread_mutex_lock(&P.mu);
  while (P.done < j->helpers) pthread_cond_wait(&P.finished, &P.mu);
  pthread_mutex_unlock(&P.mu);
  pthread_mutex_unlock(&P.launch_mu);
  return OX_OK;
}
