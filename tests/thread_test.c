/* thread_test.c - the per-thread last error behind ox_last_error() is freed
 * when its thread exits. Thousands of short threads each leave a long error
 * message behind; the process's resident memory must not grow with them
 * (it grew by the messages' size before: 200,000 threads, +53 MB). Under
 * AddressSanitizer, whose quarantine keeps freed memory resident, LeakSanitizer
 * checks instead that no message is left unreachable. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "oxide/oxide.h"

#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN 1
#endif
#endif
#ifdef ASAN
#include <sanitizer/lsan_interface.h>
#endif


enum { LINE = 8000, THREADS = 4000, AT_ONCE = 8 };

static char *src; /* a kernel with an error on a line of over 8,000 bytes */
static int bad_messages;

static long rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  if (!f)
    return -1;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2)
    resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

/* Leaves an error of more than LINE bytes (the diagnostic quotes the line),
 * alternately from the front end and from an argument check, and clears none
 * of them: the thread's exit must free the last one. */
static void *worker(void *arg) {
  ox_compile_options o = {0};
  o.filename = "t.oxk";
  char *out = NULL;
  ox_status s = ox_emit(src, &o, OX_TARGET_CPU, OX_EMIT_IR, &out);
  if (s != OX_ERR_COMPILE || strlen(ox_last_error()) < LINE)
    __atomic_add_fetch(&bad_messages, 1, __ATOMIC_RELAXED);
  if ((intptr_t)arg & 1) { /* replaced by a short one: the long one is freed at once */
    ox_emit(NULL, NULL, OX_TARGET_CPU, OX_EMIT_IR, &out);
    if (!strstr(ox_last_error(), "kernel source is NULL"))
      __atomic_add_fetch(&bad_messages, 1, __ATOMIC_RELAXED);
  }
  return NULL;
}

static void run_threads(int n) {
  for (int i = 0; i < n; i += AT_ONCE) {
    pthread_t th[AT_ONCE];
    int k = 0;
    for (; k < AT_ONCE && i + k < n; k++)
      if (pthread_create(&th[k], NULL, worker, (void *)(intptr_t)(i + k))) {
        CHECK(0, "pthread_create failed");
        break;
      }
    for (int j = 0; j < k; j++)
      pthread_join(th[j], NULL);
  }
}

int main(void) {
  src = malloc(LINE + 256);
  if (!src)
    return 1;
  int n = snprintf(src, 256, "#[kernel]\nfn k(x: u32) {\n  let y = nope; // ");
  memset(src + n, 'x', LINE);
  strcpy(src + n + LINE, "\n}\n");

  run_threads(400); /* warm up: thread stacks, malloc arenas, the front end's first use */
  long before = rss_bytes();
  run_threads(THREADS);
  long after = rss_bytes();
  CHECK(bad_messages == 0, "%d threads did not get the expected error", bad_messages);
  /* the messages alone would be THREADS * LINE = 32 MB */
  long grown = after - before;
  printf("thread_test: %d threads with a %d-byte error each: resident memory %+.1f MB\n", THREADS,
         LINE, grown / 1e6);
#ifdef ASAN
  CHECK(__lsan_do_recoverable_leak_check() == 0, "LeakSanitizer found leaks (above)");
#else
  CHECK(before > 0 && grown < (long)THREADS * LINE / 4, "resident memory grew by %.1f MB (from %.1f MB)",
        grown / 1e6, before / 1e6);
#endif
  /* the main thread's message stays until replaced or cleared */
  worker((void *)0);
  CHECK(strlen(ox_last_error()) > LINE, "the main thread's message is gone");
  ox_clear_error();
  CHECK(!ox_last_error()[0] && ox_last_status() == OX_OK, "ox_clear_error left '%s'", ox_last_error());
  free(src);
  return test_done("thread_test");
}
