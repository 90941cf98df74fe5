/*
 * cpu.c - the CPU executor: runs a kernel's grid on a pool of worker threads,
 * with the semantics the kernel has on a GPU.
 *
 * Launches. Each launch is a job in a slot of a fixed table (g_jobs). The
 * launching thread always works on its own job's blocks; the pool's workers
 * (oxr_cpu_threads() - 1 threads, started on the first launch) take blocks of
 * any open job, and move on when another job opens, so launches from several
 * host threads run at the same time and a launch completes even when every
 * worker is busy with another (for instance an endless kernel): its launching
 * thread alone runs it then. Launches on one stream run one after another (a
 * launch waits until the stream's previous one has returned), as the stream's
 * order demands. A kernel cannot launch, so a kernel cannot wait on the pool.
 *
 * Blocks. A job hands its blocks out, by linear index (x fastest), through an
 * atomic counter. A block runs from start to end on one OS thread, so its
 * shared memory and its fiber scheduler belong to that worker and need no
 * locks.
 *
 * Cancellation. A job's state word holds its launch id, a running bit and a
 * cancel bit. ox_stream_cancel and the SIGINT handler (ox_cancel_on_sigint)
 * set the cancel bit with a compare-and-swap that checks the id, so they are
 * async-signal-safe and never hit a later launch that reuses the slot.
 * Generated code reads the word at every loop back-edge (oxr_cpu_ctx.cancel;
 * backend/target_cpu.c) and returns; the executor starts no further block, and
 * the launch returns OX_ERR_CANCELLED. The table is static, so a signal handler
 * never touches freed memory.
 *
 * Threads of a block. A kernel without barriers or warp operations comes as a
 * block_fn that loops over the threads itself. Any other comes as a thread_fn,
 * and each GPU thread of the block runs on its own fiber (a context with its
 * own stack, fctx.c); the block's fibers take turns on the worker's OS thread. A fiber
 * runs until it waits (barrier, warp operation) or returns; then the next
 * runnable fiber runs, in FIFO (round-robin) order. Fibers switch directly to
 * one another; the worker's own context (the "hub") is resumed only when the
 * whole block is done. A switch is a few instructions and no system call
 * (fctx.c; swapcontext's sigprocmask call per switch used to dominate
 * barrier-heavy kernels).
 *
 * Stacks. The backend measures the stack each kernel entry point needs (the
 * frames LLVM laid out, of the entry and of what it calls; the kernel language
 * has no recursion) and refuses kernels above OXR_CPU_STACK_MAX. Fiber stacks
 * are that need plus a margin for the executor's callbacks, libm and a signal
 * handler that runs on the fiber (at least 64 KiB); they are reserved, not
 * committed, with a guard page below each. A block_fn runs on the stack of the
 * thread it is on when it needs little (a launching thread's stack is the
 * application's: Oxide neither knows nor sets its size), else on one fiber of
 * that size. Measuring beats catching overflows (a guard page and a SIGSEGV
 * handler that unwinds the fiber): that would need a process-wide signal
 * handler and an alternate signal stack on every thread, in competition with
 * those of Python, JVMs and sanitizers, and would leave the block's state
 * undefined.
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
 *  - cancellation: a thread that returns at a poll counts as returned, so the
 *    others pass their barriers and reach a poll too.
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
#include <unistd.h>

#include "runtime/runtime.h"

/* Stack switching confuses AddressSanitizer unless every switch is announced
 * to it (__sanitizer_{start,finish}_switch_fiber). With that, fibers are fully
 * checked, stack frames and fake stacks (detect_stack_use_after_return)
 * included; ASan still prints a one-time warning that it does not fully
 * support swapcontext (which it has no way to tell from our own switch). */
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

/* ThreadSanitizer keeps a fixed-size shadow call stack per thread (64K
 * entries), pushed and popped by hooks at each instrumented function's entry
 * and exit. A block's fibers take turns on one thread: one sequential
 * execution, which TSan's clock for the thread orders as the executor does.
 * But a fiber ends by switching away inside fiber_main, which never returns,
 * so its entries stayed pushed, until the stack overflowed (a TSan build
 * crashed once some 64K GPU threads had run on one thread). So fiber_main and
 * the switches below it get no hooks; every other frame on a fiber returns
 * before its block ends. The fibers' entries interleave (a report's stack
 * taken on a fiber may show its block-mates' frames) but balance. TSan's
 * fiber API would instead make each fiber stack a TSan thread: in GCC's
 * runtime about 1 MB and a vector-clock exchange per switch each, at most
 * 8128 at once (tsan_fiber_test: 28 times slower, 5.5 GB). */
#if defined(__SANITIZE_THREAD__)
#define OXR_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define OXR_TSAN 1
#endif
#endif
#ifndef OXR_TSAN
#define OXR_NO_TSAN_HOOKS
#elif defined(__clang__) && __has_attribute(disable_sanitizer_instrumentation)
/* clang's no_sanitize("thread") keeps the entry/exit hooks */
#define OXR_NO_TSAN_HOOKS __attribute__((disable_sanitizer_instrumentation))
#else
#define OXR_NO_TSAN_HOOKS __attribute__((no_sanitize("thread")))
#endif

enum {
  MAX_THREADS = 1024, /* threads per block, as on every CUDA GPU */
  WARP = 32,
  MAX_WARPS = MAX_THREADS / WARP,
};

/* Fiber stacks: the kernel's need plus this margin, at least FIBER_STACK_MIN.
 * The margin covers what runs on a fiber besides the kernel's own frames:
 * fiber_main, the executor's callbacks down to swapcontext, libm functions,
 * and a signal handler with its signal frame (a few KiB of saved vector
 * registers), also under ASan, whose frames are bigger and whose reports
 * need room. The stacks are reserved, not committed: only the pages a kernel
 * touches cost memory. */
#ifdef OXR_ASAN
#define STACK_MARGIN ((size_t)96 << 10)
#else
#define STACK_MARGIN ((size_t)32 << 10)
#endif
#define FIBER_STACK_MIN ((size_t)64 << 10)
/* A block_fn that needs at most this much runs on the stack of the thread it
 * is on (every thread has this much to spare); one that needs more runs on a
 * fiber sized for it. */
#define BLOCK_ON_THREAD_MAX ((size_t)16 << 10)
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
  oxr_fctx uc;
  char *stack; /* lowest address of its stack (sched.stack_size bytes) */
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
  fiber *fib;     /* MAX_THREADS, allocated once */
  char *stacks;   /* one mapping: per fiber, a guard page and the stack */
  size_t stack_size;  /* of each stack in it */
  uint32_t nstacks;   /* stacks in it */
  uint32_t nguarded;  /* of which have a guard page */
  uint32_t n;     /* threads of the current block */
  uint32_t live;  /* of which not returned */
  fiber *cur;     /* the running fiber */
  uint16_t rq[MAX_THREADS]; /* runnable fibers, a ring */
  uint32_t rq_head, rq_len;
  uint16_t bar[MAX_THREADS]; /* fibers waiting at the barrier */
  uint32_t bar_n;
  warp_state warps[MAX_WARPS];
  oxr_fctx hub; /* the worker's own context, resumed when the block is done */
  /* ASan: the hub's fake stack and stack bounds (learnt on the first switch). */
  void *hub_fake;
  const void *hub_bottom;
  size_t hub_size;
  bool from_hub;
} sched;

static _Thread_local sched *tl_sched; /* the scheduler running on this thread */
static atomic_uint g_guarded;         /* stacks with a guard page, process-wide */
static size_t g_page;

static void unmap_stacks(sched *s) {
  if (!s->stacks)
    return;
  size_t len = (g_page + s->stack_size) * s->nstacks;
#ifdef OXR_ASAN
  ASAN_UNPOISON_MEMORY_REGION(s->stacks, len); /* the next mapping there starts clean */
#endif
  munmap(s->stacks, len);
  atomic_fetch_sub(&g_guarded, s->nguarded);
  s->stacks = NULL;
  s->nstacks = s->nguarded = 0;
}

/* Gives fibers [0, n) a stack of at least `size` bytes. */
static bool sched_reserve(sched *s, uint32_t n, size_t size) {
  if (!s->fib && !(s->fib = calloc(MAX_THREADS, sizeof(fiber))))
    return false;
  if (n > s->nstacks || size > s->stack_size) {
    /* No fiber of this scheduler is alive between blocks: remap. */
    uint32_t nn = n > s->nstacks ? n : s->nstacks;
    size_t sz = size > s->stack_size ? size : s->stack_size, slot = g_page + sz;
    unmap_stacks(s);
    void *p = mmap(NULL, slot * nn, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      return false;
    s->stacks = p, s->nstacks = nn, s->stack_size = sz;
    for (uint32_t i = 0; i < nn; i++) {
      char *base = s->stacks + slot * i;
      /* A failed mprotect (map count exhausted) only costs the guard. */
      if (atomic_fetch_add(&g_guarded, 1) < MAX_GUARDED_STACKS && mprotect(base, g_page, PROT_NONE) == 0)
        s->nguarded++;
      else
        atomic_fetch_sub(&g_guarded, 1);
      s->fib[i].stack = base + g_page;
    }
  }
  return true;
}

/* Switches from context `from` to `to`, whose stack is [bottom, bottom+size).
 * `fake` keeps ASan's fake stack of the context we leave; NULL when we leave
 * it for good (a returned fiber), which frees it. */
static OXR_NO_TSAN_HOOKS void switch_to(oxr_fctx *from, void **fake, oxr_fctx *to,
                                        const void *bottom, size_t size) {
#ifdef OXR_ASAN
  __sanitizer_start_switch_fiber(fake, bottom, size);
#endif
  oxr_fctx_switch(from, to);
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
static OXR_NO_TSAN_HOOKS void run_next(sched *s, fiber *f) {
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
    switch_to(&f->uc, fake, &next->uc, next->stack, s->stack_size);
  }
}

/* Runs the thread of the running fiber `f` to its end. (Not inlined into
 * fiber_main, where it would lose its TSan checks.) */
static __attribute__((noinline)) void fiber_body(sched *s, fiber *f) {
  /* A cancelled launch does not start its remaining threads. */
  if (!(atomic_load_explicit(s->ctx->cancel, memory_order_relaxed) & 1)) {
    if (s->k->thread_fn)
      s->k->thread_fn(s->ctx, s->args, f->tid[0], f->tid[1], f->tid[2]);
    else /* a block_fn too big for the thread's own stack */
      s->k->block_fn(s->ctx, s->args);
  }

  if (*(volatile uint64_t *)f->stack != STACK_CANARY) {
    /* Only a hand-written kernel that declares too small a stack gets here. */
    fprintf(stderr, "oxide: CPU kernel '%s' overflowed its %zu KiB stack\n",
            s->k->name ? s->k->name : "?", s->stack_size >> 10);
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
}

static OXR_NO_TSAN_HOOKS void fiber_main(void) {
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
  fiber_body(s, f);
  run_next(s, f);
  assert(!"a returned fiber was resumed");
  abort();
}

/* Runs all n threads of the block whose index is in s->ctx, each on a fiber
 * (a block_fn: n = 1, the whole block on one fiber). */
static void run_block_fibers(sched *s, uint32_t n) {
  const uint32_t *bd = s->ctx->block_dim;
  assert(n >= 1 && n <= s->nstacks);
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
    ASAN_UNPOISON_MEMORY_REGION(f->stack, s->stack_size);
#endif
    *(uint64_t *)f->stack = STACK_CANARY;
    oxr_fctx_make(&f->uc, f->stack, s->stack_size, fiber_main);
    rq_push(s, f);
  }
  tl_sched = s;
  s->cur = pick_next(s);
  s->cur->state = F_RUNNING;
  s->from_hub = true;
  switch_to(&s->hub, &s->hub_fake, &s->cur->uc, s->cur->stack, s->stack_size);
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

/* ------------------------------------------ looped kernels' rendezvous */

typedef struct loop_area {
  uint32_t *state, *arg;
  uint64_t *val, *res;
} loop_area;

static bool waiting(uint32_t st) { return st >= 0x80000000u && st != OXR_LOOP_DONE; }
static uint32_t wait_kind(uint32_t st) { return st >> 24 & 0x7F; }
static uint64_t region_bit(uint32_t r) { return UINT64_C(1) << (r < 63 ? r : 63); }

/* Completes warp w's ops (its lanes [32w, 32w + 32) of n) when every lane of
 * it that has not returned waits at one, or (`force`, the deadlock rule) over
 * the lanes that wait: complete_warp_op's semantics. Returns the regions the
 * lanes go on to. */
static uint64_t loop_warp(const loop_area *a, uint32_t w, uint32_t n, bool force) {
  uint32_t base = w * WARP, lanes = n - base < WARP ? n - base : WARP;
  uint32_t live = 0, present = 0, voters = 0, yes = 0;
  for (uint32_t l = 0; l < lanes; l++) {
    uint32_t t = base + l, st = a->state[t];
    if (st == OXR_LOOP_DONE) continue;
    live |= 1u << l;
    if (waiting(st) && wait_kind(st) >= 1) {
      present |= 1u << l;
      if (wait_kind(st) >= 5) {
        voters |= 1u << l;
        if ((uint8_t)a->val[t]) yes |= 1u << l;
      }
    }
  }
  if (!present || (!force && present != live)) return 0;
  uint64_t ready = 0;
  for (uint32_t m = present; m; m &= m - 1) {
    uint32_t l = (uint32_t)__builtin_ctz(m), t = base + l, src = l, kind = wait_kind(a->state[t]);
    uint32_t d = a->arg[t] & (WARP - 1); /* as PTX shfl.sync: bits 4:0 */
    switch (kind) {
    case 1: src = d; break;
    case 2: src = l >= d ? l - d : l; break;
    case 3: src = l + d < WARP ? l + d : l; break;
    case 4: src = l ^ d; break;
    case 5: a->res[t] = yes == voters; break;
    case 6: a->res[t] = yes != 0; break;
    case 7: a->res[t] = yes; break;
    default: assert(!"bad warp op");
    }
    if (kind < 5) a->res[t] = (present >> src & 1) ? a->val[base + src] : a->val[t];
  }
  for (uint32_t m = present; m; m &= m - 1) { /* once every result is made (they read the states) */
    uint32_t t = base + (uint32_t)__builtin_ctz(m), c = a->state[t] & 0xFFFFFF;
    a->state[t] = c;
    ready |= region_bit(c);
  }
  return ready;
}

/* One pass over the threads in the common cases (every thread at one barrier, or
 * ready); warps are looked at only where a lane waits at a warp op. */
static uint64_t cpu_rendezvous(void *area, uint32_t n) {
  assert(n >= 1 && n <= OXR_LOOP_THREADS);
  uint32_t *u = area;
  loop_area a = {u, u + OXR_LOOP_THREADS, (uint64_t *)(u + 2 * OXR_LOOP_THREADS),
                 (uint64_t *)(u + 2 * OXR_LOOP_THREADS) + OXR_LOOP_THREADS};
  uint32_t nwarps = (n + WARP - 1) / WARP, live = 0, at_barrier = 0;
  uint64_t mask = 0, warp_ops = 0; /* warps (bit min(w, 63)) with a lane at a warp op */
  for (uint32_t t = 0; t < n; t++) {
    uint32_t st = a.state[t];
    if (st == OXR_LOOP_DONE) continue;
    live++;
    if (!waiting(st))
      mask |= region_bit(st);
    else if (wait_kind(st) == 0)
      at_barrier++;
    else
      warp_ops |= UINT64_C(1) << (t / WARP < 63 ? t / WARP : 63);
  }
  for (uint32_t w = 0; warp_ops && w < nwarps; w++)
    if (warp_ops >> (w < 63 ? w : 63) & 1) mask |= loop_warp(&a, w, n, false);
  /* a barrier completes when every thread that has not returned has arrived */
  if (live && at_barrier == live)
    for (uint32_t t = 0; t < n; t++)
      if (waiting(a.state[t])) {
        uint32_t c = a.state[t] = a.state[t] & 0xFFFFFF;
        mask |= region_bit(c);
      }
  if (!mask && live) { /* deadlock: the fibers' rule (top of the file) */
    for (uint32_t w = 0; w < nwarps; w++) mask |= loop_warp(&a, w, n, true);
    assert(mask);
  }
  return mask;
}

/* ------------------------------------------------------------ the pool */

typedef struct worker {
  pthread_t thread;
  char *shared;
  size_t shared_cap;
  uint64_t skip; /* a launch this pool worker could not prepare for: leave it */
  oxr_cpu_ctx ctx; /* of its current block */
  sched s;
} worker;

/* A job's state word: the launch id above these bits. */
#define ST_CANCEL 1u
#define ST_RUNNING 2u
/* A stream's cpu_running word: slot + 1 in the top 16 bits, the low 48 bits
 * of the launch id below. */
#define ID_MASK ((UINT64_C(1) << 48) - 1)
enum { MAX_JOBS = 1024 }; /* launches running (or waiting for workers) at once */

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "the cancel word must be lock-free (signal handlers)");

typedef struct job {
  /* under P.mu */
  bool used;     /* a launch holds the slot */
  bool open;     /* pool workers may take its blocks */
  uint32_t busy; /* pool workers inside run_blocks for it */
  /* set while the slot is claimed, constant until it is released */
  const oxr_cpu_kernel *k;
  uint32_t grid[3], block[3];
  void **args;
  oxr_errrec *err;
  uint32_t tag;
  uint32_t nthreads; /* per block */
  uint64_t nblocks;
  uint64_t chunk;    /* blocks a runner claims at a time */
  size_t stack;      /* fiber stack per thread; 0: a block_fn on the thread's own stack */
  _Atomic uint64_t next;  /* the next block to hand out */
  _Atomic uint64_t state; /* id << 2 | ST_RUNNING | ST_CANCEL; 0 when idle */
  worker *launcher; /* what the launching thread runs blocks with; kept with the slot */
} job;

static job g_jobs[MAX_JOBS];

static struct {
  pthread_once_t once;
  pthread_mutex_t mu; /* guards the jobs' used, open, busy, and what follows */
  pthread_cond_t wake; /* pool workers: a job opened */
  pthread_cond_t done; /* a job's busy count fell to 0, or a slot or a stream is free */
  uint32_t nworkers;   /* pool threads */
  worker *workers;
  uint32_t rr;         /* where workers start looking for a job */
  uint64_t last_id;    /* of the last launch */
  _Atomic uint32_t nslots;  /* slots [0, nslots) were ever used (read by signal handlers) */
  _Atomic uint64_t opened;  /* jobs opened so far: a worker moves on when it changes */
} P = {.once = PTHREAD_ONCE_INIT,
       .mu = PTHREAD_MUTEX_INITIALIZER,
       .wake = PTHREAD_COND_INITIALIZER,
       .done = PTHREAD_COND_INITIALIZER};

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

/* The fiber stack for kernel k: 0 for a block_fn that runs on the thread's
 * own stack. */
static size_t fiber_stack(const oxr_cpu_kernel *k) {
  size_t need = k->stack_bytes;
  if (k->block_fn && need <= BLOCK_ON_THREAD_MAX)
    return 0;
  size_t size = need + STACK_MARGIN < FIBER_STACK_MIN ? FIBER_STACK_MIN : need + STACK_MARGIN;
  return (size + g_page - 1) / g_page * g_page;
}

/* Makes `w` ready for blocks of job `j`. */
static bool worker_prepare(worker *w, const job *j) {
  size_t need = j->k->shared_bytes + (size_t)j->nthreads * j->k->thread_shared_bytes;
  if (!need) need = 16;
  if (need > w->shared_cap) {
    void *p;
    if (posix_memalign(&p, 64, need) != 0) return false;
    free(w->shared);
    w->shared = p, w->shared_cap = need;
  }
  return !j->stack || sched_reserve(&w->s, j->k->thread_fn ? j->nthreads : 1, j->stack);
}

/* Runs blocks of `j` until none is left or the launch is cancelled; a pool
 * worker (pool) also leaves when another job opens (`opened` changes), so that
 * the workers spread over the launches that run. */
static void run_blocks(worker *w, job *j, bool pool, uint64_t opened) {
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
                     .lane = cpu_lane,
                     .cancel = &j->state,
                     .rendezvous = cpu_rendezvous};
  w->s.ctx = c, w->s.k = j->k, w->s.args = j->args;
  uint32_t nfibers = j->k->thread_fn ? j->nthreads : 1;
  for (;;) {
    if (atomic_load_explicit(&j->state, memory_order_relaxed) & ST_CANCEL) break;
    if (pool && atomic_load_explicit(&P.opened, memory_order_relaxed) != opened) break;
    uint64_t b = atomic_fetch_add_explicit(&j->next, j->chunk, memory_order_relaxed);
    if (b >= j->nblocks) break;
    uint64_t first = b, end = j->nblocks - b > j->chunk ? b + j->chunk : j->nblocks;
    for (; b < end; b++) {
      if (b != first && atomic_load_explicit(&j->state, memory_order_relaxed) & ST_CANCEL) break;
      c->block_idx[0] = (uint32_t)(b % j->grid[0]);
      c->block_idx[1] = (uint32_t)(b / j->grid[0] % j->grid[1]);
      c->block_idx[2] = (uint32_t)(b / j->grid[0] / j->grid[1]);
      if (!j->stack)
        j->k->block_fn(c, j->args);
      else
        run_block_fibers(&w->s, nfibers);
    }
  }
}

/* An open job with blocks left that worker `w` may take, round-robin over
 * the slots; under P.mu. */
static job *find_job(const worker *w) {
  uint32_t n = atomic_load(&P.nslots);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t slot = (P.rr + i) % n;
    job *j = &g_jobs[slot];
    if (!j->open || atomic_load_explicit(&j->next, memory_order_relaxed) >= j->nblocks) continue;
    uint64_t st = atomic_load(&j->state);
    if ((st & ST_CANCEL) || st >> 2 == w->skip) continue;
    P.rr = slot + 1;
    return j;
  }
  return NULL;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  pthread_mutex_lock(&P.mu);
  for (;;) {
    job *j = find_job(w);
    if (!j) {
      pthread_cond_wait(&P.wake, &P.mu);
      continue;
    }
    /* The slot stays claimed and its fields unchanged while busy > 0. */
    j->busy++;
    uint64_t opened = atomic_load(&P.opened);
    pthread_mutex_unlock(&P.mu);
    /* A worker that cannot prepare takes no block; the launching thread and
     * the other workers run them. */
    if (worker_prepare(w, j))
      run_blocks(w, j, true, opened);
    else
      w->skip = atomic_load(&j->state) >> 2;
    pthread_mutex_lock(&P.mu);
    if (--j->busy == 0) pthread_cond_broadcast(&P.done);
  }
  return NULL;
}

static pthread_mutex_t g_sig_mu = PTHREAD_MUTEX_INITIALIZER; /* ox_cancel_on_sigint */

/* fork() keeps only the forking thread: hold the locks across it so that the
 * child gets the table in a consistent state, and let the child run launches
 * alone. A launch that another thread of the parent was running is gone in
 * the child: its slot is freed, so its stream is free too. */
static void fork_prepare(void) {
  pthread_mutex_lock(&g_sig_mu);
  pthread_mutex_lock(&P.mu);
}
static void fork_parent(void) {
  pthread_mutex_unlock(&P.mu);
  pthread_mutex_unlock(&g_sig_mu);
}
static void fork_child(void) {
  P.nworkers = 0;
  uint32_t n = atomic_load(&P.nslots);
  for (uint32_t i = 0; i < n; i++) {
    g_jobs[i].used = g_jobs[i].open = false;
    g_jobs[i].busy = 0;
    atomic_store(&g_jobs[i].state, 0);
  }
  pthread_cond_init(&P.wake, NULL);
  pthread_cond_init(&P.done, NULL);
  pthread_mutex_unlock(&P.mu);
  pthread_mutex_unlock(&g_sig_mu);
}

static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
static void register_fork(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

static void pool_init(void) {
  g_page = (size_t)sysconf(_SC_PAGESIZE);
  uint32_t n = (uint32_t)oxr_cpu_threads() - 1;
  /* Without workers (no memory for them), launching threads run every block. */
  P.workers = n ? calloc(n, sizeof(worker)) : NULL;
  if (P.workers) {
    /* Workers block all signals, which then go to the application's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (uint32_t i = 0; i < n; i++) {
      if (pthread_create(&P.workers[i].thread, NULL, worker_main, &P.workers[i]) != 0) break;
      P.nworkers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  pthread_once(&g_fork_once, register_fork);
}

/* True while a launch runs on `s` (under P.mu). */
static bool stream_busy(oxr_stream *s) {
  uint64_t w = atomic_load(&s->cpu_running);
  if (!w) return false;
  const job *j = &g_jobs[(w >> 48) - 1];
  return j->used && (atomic_load(&j->state) >> 2 & ID_MASK) == (w & ID_MASK);
}

/* A free slot, or MAX_JOBS (under P.mu). */
static uint32_t free_slot(void) {
  for (uint32_t i = 0; i < MAX_JOBS; i++)
    if (!g_jobs[i].used) return i;
  return MAX_JOBS;
}

ox_status oxr_cpu_launch(const oxr_cpu_kernel *k, const uint32_t grid[3], const uint32_t block[3],
                         void **args, oxr_errrec *err, uint32_t tag, oxr_stream *s) {
  if (!k || !grid || !block || !k->block_fn == !k->thread_fn)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         "CPU launch: needs a kernel with exactly one of block_fn, thread_fn");
  const char *name = k->name ? k->name : "?";
  uint64_t nthreads = (uint64_t)block[0] * block[1] * block[2];
  uint64_t nblocks = (uint64_t)grid[0] * grid[1] * grid[2];
  if (nblocks == 0 || nthreads == 0 || nthreads > MAX_THREADS)
    return oxb_set_error(OX_ERR_LAUNCH,
                         "CPU launch: grid (%u, %u, %u) and block (%u, %u, %u) must be non-empty, "
                         "with at most %d threads per block",
                         grid[0], grid[1], grid[2], block[0], block[1], block[2], MAX_THREADS);
  if (k->stack_bytes > OXR_CPU_STACK_MAX) /* the backend refuses such kernels */
    return oxb_set_error(OX_ERR_LAUNCH,
                         "CPU launch of kernel '%s': it needs %u KiB of stack per thread, more "
                         "than the %u KiB the CPU executor allows",
                         name, (k->stack_bytes + 1023) / 1024, OXR_CPU_STACK_MAX / 1024);
  pthread_once(&P.once, pool_init);

  /* Claim a slot once the stream is free (its previous launch returned). */
  pthread_mutex_lock(&P.mu);
  uint32_t slot;
  while ((s && stream_busy(s)) || (slot = free_slot()) == MAX_JOBS)
    pthread_cond_wait(&P.done, &P.mu);
  job *j = &g_jobs[slot];
  j->used = true;
  uint64_t id = ++P.last_id;
  j->k = k, j->args = args, j->err = err, j->tag = tag;
  j->nblocks = nblocks, j->nthreads = (uint32_t)nthreads;
  /* Runs of consecutive blocks: one claim (an atomic add on a line the runners share) per
     run rather than per block, which cost half the bandwidth of a one-element-a-thread
     kernel on two cores (bench/cpu_stream.py), and each runner streams through memory in
     order. At most 1/16 of a runner's share, so the last runs still balance. */
  uint64_t share = nblocks / ((uint64_t)P.nworkers + 1) / 16;
  j->chunk = share < 1 ? 1 : share > 64 ? 64 : share;
  memcpy(j->grid, grid, sizeof j->grid);
  memcpy(j->block, block, sizeof j->block);
  j->stack = fiber_stack(k);
  atomic_store(&j->next, 0);
  atomic_store(&j->state, id << 2 | ST_RUNNING);
  if (slot >= atomic_load(&P.nslots)) atomic_store(&P.nslots, slot + 1);
  if (s) atomic_store(&s->cpu_running, (uint64_t)(slot + 1) << 48 | (id & ID_MASK));
  pthread_mutex_unlock(&P.mu);

  if (!j->launcher) j->launcher = calloc(1, sizeof(worker));
  bool ok = j->launcher && worker_prepare(j->launcher, j);
  if (ok && nblocks > 1 && P.nworkers > 0) {
    pthread_mutex_lock(&P.mu);
    j->open = true;
    atomic_fetch_add(&P.opened, 1);
    pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.mu);
  }
  if (ok) run_blocks(j->launcher, j, false, 0);

  /* No block is left to start; wait for the workers' blocks of this job. */
  pthread_mutex_lock(&P.mu);
  j->open = false;
  while (j->busy) pthread_cond_wait(&P.done, &P.mu);
  uint64_t st = atomic_exchange(&j->state, 0);
  if (s) atomic_store(&s->cpu_running, 0);
  j->used = false;
  pthread_cond_broadcast(&P.done);
  pthread_mutex_unlock(&P.mu);

  if (!ok)
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY,
                         "CPU launch of kernel '%s': cannot allocate %zu KiB fiber stacks or %zu "
                         "bytes of shared memory",
                         name, j->stack >> 10, k->shared_bytes + (size_t)j->nthreads * k->thread_shared_bytes);
  if (st & ST_CANCEL)
    return oxb_set_error(OX_ERR_CANCELLED,
                         "CPU launch of kernel '%s' was cancelled (ox_stream_cancel, or SIGINT "
                         "with ox_cancel_on_sigint); what it wrote is incomplete",
                         name);
  return OX_OK;
}

/* ----------------------------------------------------------- cancellation */

/* Sets the cancel bit of slot `slot`'s launch if it runs and (unless any)
 * has the id `id` (its low 48 bits). Lock-free: callable from signal handlers. */
static void cancel_slot(uint32_t slot, bool any, uint64_t id) {
  _Atomic uint64_t *st = &g_jobs[slot].state;
  uint64_t v = atomic_load(st);
  while ((v & ST_RUNNING) && !(v & ST_CANCEL) && (any || (v >> 2 & ID_MASK) == id))
    if (atomic_compare_exchange_weak(st, &v, v | ST_CANCEL)) break;
}

ox_status ox_stream_cancel(ox_stream h) {
  /* No error messages here: formatting one allocates, which a signal handler
   * must not do; the handle lookup only reads the table (atomic loads). */
  oxr_stream *s = h ? oxb_handle_get(OXB_H_STREAM, (uint64_t)(uintptr_t)h) : NULL;
  if (!s || !s->live) return OX_ERR_INVALID_ARGUMENT;
  if (s->dev->type != OX_DEVICE_CPU) return OX_ERR_UNSUPPORTED;
  uint64_t w = atomic_load(&s->cpu_running);
  if (w && (w >> 48) <= MAX_JOBS) cancel_slot((uint32_t)(w >> 48) - 1, false, w & ID_MASK);
  return OX_OK;
}

/* ox_cancel_on_sigint: the handler that was installed before ours. */
static struct {
  int count;      /* enabling calls not undone */
  bool installed; /* ours is installed (by us; someone may have replaced it) */
  struct sigaction prev;
} SIG; /* under g_sig_mu */

static void on_sigint(int sig, siginfo_t *info, void *uc) {
  /* A handler installed after ours that passes the signal on to ours, and that
     ours was then put in front of again (ox_cancel_on_sigint re-installs it),
     would call us back: the second time in, only cancel. */
  static volatile sig_atomic_t inside;
  int saved = errno;
  uint32_t n = atomic_load(&P.nslots);
  for (uint32_t i = 0; i < n; i++) cancel_slot(i, true, 0);
  if (inside) {
    errno = saved;
    return;
  }
  inside = 1;
  /* Pass it on, as if ours were not there. SIG.prev is not written while ours
   * is installed. */
  if (SIG.prev.sa_flags & SA_SIGINFO) {
    SIG.prev.sa_sigaction(sig, info, uc);
  } else if (SIG.prev.sa_handler == SIG_DFL) {
    /* The default action (terminate): restore it and raise the signal again;
     * it is delivered when this handler returns. */
    sigaction(sig, &SIG.prev, NULL);
    raise(sig);
  } else if (SIG.prev.sa_handler != SIG_IGN) {
    SIG.prev.sa_handler(sig);
  }
  inside = 0;
  errno = saved;
}

static bool ours(const struct sigaction *sa) {
  return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_sigint;
}

ox_status ox_cancel_on_sigint(int enable) {
  ox_status st = OX_OK;
  pthread_once(&g_fork_once, register_fork);
  pthread_mutex_lock(&g_sig_mu);
  if (!enable && SIG.count == 0) {
    st = oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                       "ox_cancel_on_sigint(0) without a matching ox_cancel_on_sigint(1)");
  } else if (enable ? (SIG.count++, true) : --SIG.count == 0) {
    /* every enabling call checks that ours is still installed (one query): a
       handler set since (Python's signal.signal) goes under ours again */
    struct sigaction cur;
    if (sigaction(SIGINT, NULL, &cur) != 0) {
      st = oxb_set_error(OX_ERR_INTERNAL, "sigaction(SIGINT): %s", strerror(errno));
    } else if (enable && !ours(&cur) && (cur.sa_flags & SA_SIGINFO || cur.sa_handler != SIG_IGN)) {
      /* Install ours (unless SIGINT is ignored: Ctrl-C then stops nothing). */
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_sigaction = on_sigint;
      sa.sa_mask = cur.sa_mask;
      sa.sa_flags = SA_SIGINFO | (cur.sa_flags & (SA_RESTART | SA_ONSTACK));
      SIG.prev = cur;
      if (sigaction(SIGINT, &sa, NULL) != 0)
        st = oxb_set_error(OX_ERR_INTERNAL, "sigaction(SIGINT): %s", strerror(errno));
      else
        SIG.installed = true;
    } else if (!enable && SIG.installed) {
      /* Put the previous handler back, unless ours was replaced meanwhile. */
      if (ours(&cur)) sigaction(SIGINT, &SIG.prev, NULL);
      SIG.installed = false;
    }
    if (st && enable) SIG.count--;
  }
  pthread_mutex_unlock(&g_sig_mu);
  return st;
}
