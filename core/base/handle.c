/*
 * handle.c - the table behind every public handle (tensor, stream, event,
 * module, kernel, chain).
 *
 * A public handle is not the object's address but a 64-bit value: the slot
 * index in this table (bits 0..27), the object's kind (bits 28..31) and the
 * slot's generation (bits 32..63, keyed as below; never 0). Releasing an object frees its
 * slot and bumps the generation, so a stale handle (used after release, or a
 * copy kept by a binding) no longer matches its slot and is refused, even
 * when the slot and the object's memory have been reused by another object.
 * A handle of the wrong kind, or any value that was never a handle, is
 * refused the same way, without touching memory outside the table.
 *
 * The generation is stored XORed with a random key drawn when this copy of
 * liboxide makes its first handle, so that a process which loads two copies
 * (two wheels, a wheel and a system library) has two handle spaces: a handle
 * of one copy passed to the other is refused, except with odds of 2^-32.
 *
 * Slots live in chunks that are never freed or moved, so a lookup reads only
 * table memory and needs no lock: the slot's `id` (the live handle, or 0) is
 * published with release order after `obj`. Lookup and release of the same
 * handle on two threads at once is a race in the caller (as for any C
 * object): the lookup may return an object that is being freed.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"

enum {
  INDEX_BITS = 28,
  CHUNK_BITS = 12,
  CHUNK = 1 << CHUNK_BITS,
  MAX_CHUNKS = (1 << INDEX_BITS) / CHUNK,
};

typedef struct slot {
  _Atomic uint64_t id; /* the live handle in this slot, 0 when free */
  void *obj;
  uint32_t gen;       /* the generation of the last handle given out here */
  uint32_t next_free; /* index + 1 of the next free slot, 0 = none */
} slot;

static _Atomic(slot *) chunks[MAX_CHUNKS];
static _Atomic uint32_t nslots; /* slots [0, nslots) exist */
static uint32_t free_head;      /* index + 1 of the first free slot, 0 = none */
static uint32_t key;            /* this copy of liboxide's key (see the top); set once */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static slot *slot_at(uint32_t i) {
  slot *c = atomic_load_explicit(&chunks[i >> CHUNK_BITS], memory_order_acquire);
  return &c[i & (CHUNK - 1)];
}

/* A random 32-bit key: getrandom, else a mix of the clock, the pid and an
 * address of this copy's data (distinct between two loaded copies). */
static uint32_t draw_key(void) {
  uint32_t k = 0;
  if (getrandom(&k, sizeof k, GRND_NONBLOCK) != (ssize_t)sizeof k) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t x = (uint64_t)t.tv_nsec ^ (uint64_t)t.tv_sec << 20 ^ (uint64_t)getpid() << 40 ^
                 (uint64_t)(uintptr_t)&key;
    x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33;
    k = (uint32_t)x;
  }
  return k;
}

uint64_t oxb_handle_new(oxb_hkind kind, void *obj) {
  assert(kind > 0 && kind < 16 && obj);
  pthread_mutex_lock(&lock);
  if (!key)
    key = draw_key() | 1;
  uint32_t i;
  if (free_head) {
    i = free_head - 1;
    free_head = slot_at(i)->next_free;
  } else {
    i = atomic_load_explicit(&nslots, memory_order_relaxed);
    if ((i & (CHUNK - 1)) == 0) {
      if (i >> CHUNK_BITS >= MAX_CHUNKS) {
        pthread_mutex_unlock(&lock);
        return 0;
      }
      slot *c = calloc(CHUNK, sizeof *c);
      if (!c) {
        pthread_mutex_unlock(&lock);
        return 0;
      }
      atomic_store_explicit(&chunks[i >> CHUNK_BITS], c, memory_order_release);
    }
    atomic_store_explicit(&nslots, i + 1, memory_order_release);
  }
  slot *s = slot_at(i);
  /* a generation whose keyed value is 0 is skipped: no handle is 0 */
  do
    s->gen++;
  while ((s->gen ^ key) == 0);
  s->next_free = 0;
  s->obj = obj;
  uint64_t h = (uint64_t)(s->gen ^ key) << 32 | (uint64_t)kind << INDEX_BITS | i;
  atomic_store_explicit(&s->id, h, memory_order_release);
  pthread_mutex_unlock(&lock);
  return h;
}

void *oxb_handle_get(oxb_hkind kind, uint64_t h) {
  uint32_t i = (uint32_t)(h & ((1u << INDEX_BITS) - 1));
  if (h == 0 || (h >> INDEX_BITS & 15) != (uint64_t)kind ||
      i >= atomic_load_explicit(&nslots, memory_order_acquire))
    return NULL;
  slot *s = slot_at(i);
  if (atomic_load_explicit(&s->id, memory_order_acquire) != h)
    return NULL;
  return s->obj;
}

void oxb_handle_free(uint64_t h) {
  uint32_t i = (uint32_t)(h & ((1u << INDEX_BITS) - 1));
  pthread_mutex_lock(&lock);
  if (h && i < atomic_load_explicit(&nslots, memory_order_relaxed)) {
    slot *s = slot_at(i);
    if (atomic_load_explicit(&s->id, memory_order_relaxed) == h) {
      atomic_store_explicit(&s->id, 0, memory_order_release);
      s->obj = NULL;
      s->next_free = free_head;
      free_head = i + 1;
    }
  }
  pthread_mutex_unlock(&lock);
}

int64_t oxb_handle_live(void) {
  pthread_mutex_lock(&lock);
  int64_t n = atomic_load_explicit(&nslots, memory_order_relaxed);
  for (uint32_t i = free_head; i; i = slot_at(i - 1)->next_free)
    n--;
  pthread_mutex_unlock(&lock);
  return n;
}
