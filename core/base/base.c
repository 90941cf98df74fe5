/* base.c - arenas, strings, diagnostics, last error, hashing. */
#include "base/base.h"

#include <errno.h>
#include <llvm-c/blake3.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>

/* ------------------------------------------------------- out of memory */

/* The innermost protected region of this thread (base.h). */
typedef struct region {
  jmp_buf jb;
  struct region *prev;
} region;
static _Thread_local region *tl_region;
static _Thread_local size_t tl_oom_bytes; /* the failed allocation's size */

ox_status oxb_protected(oxb_protected_fn fn, void *arg) {
  region r;
  r.prev = tl_region;
  tl_region = &r;
  /* (r.prev is not written after setjmp, so it is valid after the longjmp) */
  if (setjmp(r.jb)) {
    tl_region = r.prev;
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory: an allocation of %zu bytes failed "
                         "while compiling (the process's memory or address space is exhausted)",
                         tl_oom_bytes);
  }
  ox_status s = fn(arg);
  tl_region = r.prev;
  return s;
}

_Noreturn void oxb_oom(size_t n) {
  region *r = tl_region;
  if (r) {
    tl_oom_bytes = n;
    longjmp(r->jb, 1);
  }
  fprintf(stderr, "oxide: out of memory (an allocation of %zu bytes failed outside a compile)\n", n);
  abort();
}

void *oxb_malloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p)
    oxb_oom(n);
  return p;
}

void *oxb_calloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p)
    oxb_oom(n * size);
  return p;
}

/* ------------------------------------------------------------------ arena */

struct oxb_arena_chunk {
  oxb_arena_chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
};

void *oxb_alloc(oxb_arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  oxb_arena_chunk *c = a->head;
  if (!c || c->used + n > c->cap) {
    size_t cap = n > 60000 ? n : 60000;
    c = malloc(sizeof(*c) + cap);
    if (!c)
      oxb_oom(sizeof(*c) + cap);
    c->cap = cap;
    c->used = 0;
    c->next = a->head;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += n;
  memset(p, 0, n);
  return p;
}

char *oxb_strndup(oxb_arena *a, const char *s, size_t n) {
  char *p = oxb_alloc(a, n + 1);
  memcpy(p, s, n);
  return p;
}

void oxb_arena_free(oxb_arena *a) {
  oxb_arena_chunk *c = a->head;
  while (c) {
    oxb_arena_chunk *next = c->next;
    free(c);
    c = next;
  }
  a->head = NULL;
}

void oxb_vec_push(oxb_arena *a, oxb_vec *v, void *item) {
  if (v->len == v->cap) {
    int cap = v->cap ? v->cap * 2 : 8;
    void **items = oxb_alloc(a, sizeof(void *) * (size_t)cap);
    if (v->len)
      memcpy(items, v->items, sizeof(void *) * (size_t)v->len);
    v->items = items;
    v->cap = cap;
  }
  v->items[v->len++] = item;
}

/* ----------------------------------------------------------------- string */

/* Room for `extra` more bytes; false when the string failed (base.h). */
static bool str_reserve(oxb_str *s, size_t extra) {
  if (s->failed)
    return false;
  size_t want = extra < SIZE_MAX - s->len - 1 ? s->len + extra + 1 : SIZE_MAX;
  if (want <= s->cap)
    return true;
  size_t cap = s->cap ? s->cap : 256;
  while (cap < want && cap <= SIZE_MAX / 2)
    cap *= 2;
  char *buf = cap >= want && want < SIZE_MAX ? realloc(s->buf, cap) : NULL;
  if (!buf) {
    s->failed = true;
    if (tl_region) /* (s->buf, still valid, leaks unless its owner frees it) */
      oxb_oom(cap);
    return false;
  }
  s->buf = buf;
  s->cap = cap;
  return true;
}

void oxb_str_add(oxb_str *s, const char *text, size_t n) {
  if (!str_reserve(s, n))
    return;
  memcpy(s->buf + s->len, text, n);
  s->len += n;
  s->buf[s->len] = 0;
}

void oxb_str_vaddf(oxb_str *s, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0 || !str_reserve(s, (size_t)n))
    return;
  vsnprintf(s->buf + s->len, (size_t)n + 1, fmt, ap);
  s->len += (size_t)n;
}

void oxb_str_addf(oxb_str *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  oxb_str_vaddf(s, fmt, ap);
  va_end(ap);
}

char *oxb_str_take(oxb_str *s) {
  char *p = s->buf;
  if (s->failed) {
    free(p);
    p = NULL;
  } else if (!p && (p = malloc(1))) {
    p[0] = 0;
  }
  s->buf = NULL;
  s->len = s->cap = 0;
  s->failed = false;
  return p;
}

void oxb_str_free(oxb_str *s) {
  free(s->buf);
  s->buf = NULL;
  s->len = s->cap = 0;
  s->failed = false;
}

/* ------------------------------------------------------------ diagnostics */

/* Prints "file:line:col: kind: message", then the source line and a caret under
 * the column, as chibicc does. */
static void diag_v(oxb_diags *d, oxb_loc loc, const char *kind, const char *fmt, va_list ap) {
  const oxb_source *src = d->src;
  const char *name = src && src->name ? src->name : "<input>";
  if (loc.line > 0)
    oxb_str_addf(&d->text, "%s:%d:%d: %s: ", name, loc.line, loc.col, kind);
  else
    oxb_str_addf(&d->text, "%s: %s: ", name, kind);
  oxb_str_vaddf(&d->text, fmt, ap);
  oxb_str_add(&d->text, "\n", 1);
  if (loc.line <= 0 || !src || !src->text)
    return;
  size_t off = (size_t)loc.offset <= src->len ? (size_t)loc.offset : src->len;
  size_t start = off, end = off;
  while (start > 0 && src->text[start - 1] != '\n')
    start--;
  while (end < src->len && src->text[end] != '\n')
    end++;
  oxb_str_addf(&d->text, "%5d | ", loc.line);
  oxb_str_add(&d->text, src->text + start, end - start);
  oxb_str_add(&d->text, "\n      | ", 9);
  for (size_t i = start; i < off; i++)
    oxb_str_add(&d->text, src->text[i] == '\t' ? "\t" : " ", 1);
  oxb_str_add(&d->text, "^\n", 2);
}

void oxb_error_at(oxb_diags *d, oxb_loc loc, const char *fmt, ...) {
  if (oxb_too_many_errors(d))
    return;
  d->errors++;
  va_list ap;
  va_start(ap, fmt);
  diag_v(d, loc, "error", fmt, ap);
  va_end(ap);
}

void oxb_note_at(oxb_diags *d, oxb_loc loc, const char *fmt, ...) {
  if (oxb_too_many_errors(d))
    return;
  va_list ap;
  va_start(ap, fmt);
  diag_v(d, loc, "note", fmt, ap);
  va_end(ap);
}

bool oxb_too_many_errors(const oxb_diags *d) {
  return d->errors >= (d->max_errors ? d->max_errors : 20);
}

/* ------------------------------------------------------------- last error */

/* The message is heap memory owned by the thread; a pthread key's destructor
 * frees it when the thread exits (a _Thread_local pointer alone would leak it
 * at every thread exit). The key holds the same pointer as tl_message. */
static _Thread_local ox_status tl_status;
static _Thread_local char *tl_message;
/* the message's start when there was no heap memory for it (tl_message NULL) */
static _Thread_local char tl_short[256];
static pthread_key_t tl_key;
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;
static bool tl_key_ok;

static void tl_message_free(void *p) {
  /* runs at thread exit; a later destructor that sets an error again makes
   * the key non-NULL again, and pthreads then calls this once more */
  if (p == tl_message)
    tl_message = NULL;
  free(p);
}

static void tl_key_init(void) { tl_key_ok = pthread_key_create(&tl_key, tl_message_free) == 0; }

/* Replaces the thread's message with `m` (malloc'ed, or NULL). */
static void set_message(char *m) {
  free(tl_message);
  tl_message = m;
  tl_short[0] = 0;
  pthread_once(&tl_once, tl_key_init);
  if (tl_key_ok) /* (without a key, as before: the message leaks at thread exit) */
    pthread_setspecific(tl_key, m);
}

ox_status oxb_set_error_text(ox_status s, const char *text) {
  text = text ? text : "";
  char *m = strdup(text);
  set_message(m);
  if (!m)
    snprintf(tl_short, sizeof tl_short, "%s", text);
  tl_status = s;
  return s;
}

/* (formats without oxb_str: an error is set inside regions, where a failed
 * string would unwind) */
ox_status oxb_set_error(ox_status s, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  char *m = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (m)
    vsnprintf(m, (size_t)n + 1, fmt, ap);
  set_message(m);
  if (!m)
    vsnprintf(tl_short, sizeof tl_short, fmt, ap);
  va_end(ap);
  tl_status = s;
  return s;
}

const char *ox_last_error(void) { return tl_message ? tl_message : tl_short; }
ox_status ox_last_status(void) { return tl_status; }
void ox_clear_error(void) {
  set_message(NULL);
  tl_status = OX_OK;
}

const char *ox_status_name(ox_status s) {
  static const char *const names[] = {
      "OX_OK",           "OX_ERR_INVALID_ARGUMENT", "OX_ERR_COMPILE",      "OX_ERR_NOT_FOUND",
      "OX_ERR_NO_DEVICE", "OX_ERR_DRIVER",          "OX_ERR_OUT_OF_MEMORY", "OX_ERR_LAUNCH",
      "OX_ERR_BOUNDS",   "OX_ERR_IO",               "OX_ERR_UNSUPPORTED",  "OX_ERR_INTERNAL",
      "OX_ERR_CANCELLED"};
  if ((unsigned)s < OXB_COUNT(names))
    return names[s];
  return "OX_ERR_UNKNOWN";
}

void ox_free(void *p) { free(p); }

/* ---------------------------------------------------------------- hashing */

_Static_assert(sizeof(llvm_blake3_hasher) <= sizeof(((oxb_hasher *)0)->state),
               "oxb_hasher too small for llvm_blake3_hasher");

void oxb_hash_init(oxb_hasher *h) { llvm_blake3_hasher_init((llvm_blake3_hasher *)h->state); }
void oxb_hash_update(oxb_hasher *h, const void *data, size_t n) {
  llvm_blake3_hasher_update((llvm_blake3_hasher *)h->state, data, n);
}
void oxb_hash_str(oxb_hasher *h, const char *s) {
  uint64_t n = s ? strlen(s) : 0;
  oxb_hash_update(h, &n, sizeof n);
  if (n)
    oxb_hash_update(h, s, n);
}
void oxb_hash_final_hex(oxb_hasher *h, char out[65]) {
  uint8_t digest[32];
  llvm_blake3_hasher_finalize((llvm_blake3_hasher *)h->state, digest, sizeof digest);
  for (int i = 0; i < 32; i++)
    snprintf(out + 2 * i, 3, "%02x", digest[i]);
}

/* ---------------------------------------------------------------- helpers */

char *oxb_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  oxb_str s = {0};
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    oxb_str_add(&s, buf, n);
  int bad = ferror(f), err = errno;
  fclose(f);
  if (bad || s.failed) {
    oxb_str_free(&s);
    errno = bad ? err : ENOMEM;
    return NULL;
  }
  if (len)
    *len = s.len;
  char *p = oxb_str_take(&s);
  if (!p)
    errno = ENOMEM;
  return p;
}

uint64_t oxb_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ----------------------------------------------------------------- dtypes */

size_t ox_dtype_size(ox_dtype t) {
  static const unsigned char sizes[] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 1, 1, 4};
  _Static_assert(sizeof sizes == OX_DTYPE_COUNT, "dtype sizes");
  return (unsigned)t < OX_DTYPE_COUNT ? sizes[t] : 0;
}

const char *ox_dtype_name(ox_dtype t) {
  static const char *const names[] = {"bool", "i8",  "i16", "i32",  "i64", "u8",  "u16",
                                      "u32",  "u64", "f16", "bf16", "f32", "f64",
                                      "f8e4m3", "f8e5m2", "tf32"};
  _Static_assert(OXB_COUNT(names) == OX_DTYPE_COUNT, "dtype names");
  return (unsigned)t < OX_DTYPE_COUNT ? names[t] : "?";
}

/* --------------------------------------------------------------- build id */

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

typedef struct build_id_search {
  uintptr_t addr;
  char hex[2 * 64 + 1];
} build_id_search;

/* Finds the GNU build-id note of the loaded object that contains `addr`. */
static int find_build_id(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  build_id_search *s = data;
  bool mine = false;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && s->addr >= lo && s->addr < lo + ph->p_memsz)
      mine = true;
  }
  if (!mine)
    return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE)
      continue;
    const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
    const unsigned char *end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
      const unsigned char *name = p + sizeof *nh;
      const unsigned char *desc = name + ((nh->n_namesz + 3) & ~3u);
      if (desc + nh->n_descsz > end)
        break;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4)) {
        size_t n = nh->n_descsz > 64 ? 64 : nh->n_descsz;
        for (size_t j = 0; j < n; j++)
          snprintf(s->hex + 2 * j, 3, "%02x", desc[j]);
        return 1;
      }
      p = desc + ((nh->n_descsz + 3) & ~3u);
    }
  }
  return 1;
}

/* The build of Oxide that is running: its ELF build id, which changes with
 * every change to the code, so the kernel cache never serves code made by
 * another build. Falls back to the compile time when there is no build id. */
static char build_id[2 * 64 + 1];
static pthread_once_t build_id_once = PTHREAD_ONCE_INIT;

static void init_build_id(void) {
  build_id_search s = {(uintptr_t)&oxb_build_id, {0}};
  dl_iterate_phdr(find_build_id, &s);
  if (s.hex[0])
    snprintf(build_id, sizeof build_id, "%s", s.hex);
  else
    snprintf(build_id, sizeof build_id, "built %s %s", __DATE__, __TIME__);
}

const char *oxb_build_id(void) {
  pthread_once(&build_id_once, init_build_id);
  return build_id;
}
