/*
 * base.h - what every layer uses: arenas, growable strings, diagnostics with
 * source locations, the per-thread last error, and content hashing.
 * Prefix: oxb_.
 */
#ifndef OXIDE_BASE_H
#define OXIDE_BASE_H

#include <assert.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oxide/oxide.h"

#define OXB_UNUSED(x) ((void)(x))
#define OXB_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- out of memory. A compile runs protected, as Lua runs a chunk: an
 * allocation that fails inside oxb_protected (oxb_alloc, oxb_malloc,
 * oxb_calloc, a heap string's growth) longjmps back to it, and it returns
 * OX_ERR_OUT_OF_MEMORY with the last error set; the hundreds of allocations
 * in between need no checks. So that nothing leaks or stays locked:
 * - keep what must be freed (arenas, heap strings, LLVM objects) where the
 *   caller of oxb_protected reaches it (in `arg`), and free it there whatever
 *   the status; heap temporaries of the unwound frames leak (only on this path);
 * - take no lock inside a region that is held across an allocation (a lock
 *   around the whole oxb_protected call is fine: the unwind ends inside it);
 * - never unwind through foreign frames: code that LLVM calls back (its
 *   diagnostic handler) uses plain malloc and checks it.
 * Regions nest (the innermost catches). Outside any region oxb_alloc,
 * oxb_malloc and oxb_calloc print a message and abort (only the internal
 * tests and the fuzzer call the layers below the API there), and a heap
 * string stops growing instead (oxb_str.failed). */
typedef ox_status (*oxb_protected_fn)(void *arg);
ox_status oxb_protected(oxb_protected_fn fn, void *arg);
/* An allocation of n bytes failed: unwinds the innermost region, else aborts. */
_Noreturn void oxb_oom(size_t n);
void *oxb_malloc(size_t n);              /* malloc; failure is oxb_oom */
void *oxb_calloc(size_t n, size_t size); /* calloc; failure is oxb_oom */

/* ---- arena: all nodes of one compilation live in one arena, freed at once,
 * so an error anywhere in the front end cannot leak. */
typedef struct oxb_arena_chunk oxb_arena_chunk;
typedef struct oxb_arena {
  oxb_arena_chunk *head;
} oxb_arena;

void *oxb_alloc(oxb_arena *a, size_t n); /* zeroed, 16-byte aligned; failure is oxb_oom */
char *oxb_strndup(oxb_arena *a, const char *s, size_t n);
void oxb_arena_free(oxb_arena *a);

/* ---- growable array of pointers (arena-backed). */
typedef struct oxb_vec {
  void **items;
  int len, cap;
} oxb_vec;
void oxb_vec_push(oxb_arena *a, oxb_vec *v, void *item);

/* ---- growable heap string. Out of memory inside a region unwinds it;
 * outside one the string keeps the text it had (buf stays NUL-terminated, or
 * NULL) and sets `failed`, and later additions are dropped. */
typedef struct oxb_str {
  char *buf;
  size_t len, cap;
  bool failed; /* an addition was dropped: the text is incomplete */
} oxb_str;
void oxb_str_addf(oxb_str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void oxb_str_vaddf(oxb_str *s, const char *fmt, va_list ap);
void oxb_str_add(oxb_str *s, const char *text, size_t n);
/* Returns the malloc'ed text ("" if empty), or NULL when `failed` (or when
 * even "" cannot be allocated); s is reset either way. */
char *oxb_str_take(oxb_str *s);
void oxb_str_free(oxb_str *s);

/* ---- source files and locations. */
typedef struct oxb_source {
  const char *name; /* file name shown in diagnostics */
  const char *text; /* NUL-terminated */
  size_t len;
} oxb_source;

typedef struct oxb_loc {
  int line, col; /* 1-based; 0 = unknown */
  int offset;    /* byte offset into the source */
} oxb_loc;

/* ---- diagnostics: collected during a compilation, rendered chibicc-style. */
typedef struct oxb_diags {
  const oxb_source *src;
  oxb_str text; /* all rendered messages */
  int errors;
  int max_errors; /* stop collecting after this many (0 = 20) */
} oxb_diags;

void oxb_error_at(oxb_diags *d, oxb_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void oxb_note_at(oxb_diags *d, oxb_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool oxb_too_many_errors(const oxb_diags *d);

/* ---- the per-thread last error behind ox_last_error(). Returns `s`. Never
 * fails: without heap memory for the message, its first 255 bytes are kept. */
ox_status oxb_set_error(ox_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ox_status oxb_set_error_text(ox_status s, const char *text);

/* ---- content hashing (BLAKE3, as shipped by LLVM). */
typedef struct oxb_hasher {
  unsigned char state[2048]; /* holds an llvm_blake3_hasher */
} oxb_hasher;
void oxb_hash_init(oxb_hasher *h);
void oxb_hash_update(oxb_hasher *h, const void *data, size_t n);
void oxb_hash_str(oxb_hasher *h, const char *s); /* hashes length and bytes */
void oxb_hash_final_hex(oxb_hasher *h, char out[65]);

/* ---- handles (handle.c): the public handles of oxide.h are generation-
 * checked indices into one table, so a handle used after its object was
 * released, a handle of another kind, or a value that never was a handle is
 * refused instead of reaching memory that another object may now use. */
typedef enum oxb_hkind {
  OXB_H_TENSOR = 1,
  OXB_H_STREAM,
  OXB_H_EVENT,
  OXB_H_MODULE,
  OXB_H_KERNEL,
  OXB_H_CHAIN,
} oxb_hkind;
/* A new handle for `obj`; 0 when out of memory (or 2^28 live handles). */
uint64_t oxb_handle_new(oxb_hkind kind, void *obj);
/* The object of live handle `h` of `kind`, or NULL for anything else. */
void *oxb_handle_get(oxb_hkind kind, uint64_t h);
/* Ends handle `h`: later lookups of it fail. Ignores handles not live. */
void oxb_handle_free(uint64_t h);
/* Live handles of every kind (for leak tests). */
int64_t oxb_handle_live(void);

/* ---- small helpers. */
/* malloc'ed, NUL-terminated; NULL on error, with errno (ENOMEM: out of memory) */
char *oxb_read_file(const char *path, size_t *len);
uint64_t oxb_now_ns(void);
/* Identifies this build of Oxide (its ELF build id), for cache keys. */
const char *oxb_build_id(void);

#endif
