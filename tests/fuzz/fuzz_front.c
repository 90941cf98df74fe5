/* fuzz_front.c - libFuzzer target for the front end: lexer, parser, semantic
 * analysis and the IR verifier, through ox_emit(..., OX_EMIT_IR, ...).
 *
 * Any crash, sanitizer report, leak or hang is a bug. A compile error is an
 * ordinary outcome; an OX_ERR_INTERNAL (the IR verifier rejected what sema
 * produced) is a bug too, and aborts so that libFuzzer keeps the input.
 *
 * Build and run: tools/fuzz.sh [SECONDS]. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oxide/oxide.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every "fuzz.oxk:LINE:COL:" in the diagnostics must name a place in `src`
 * (the column may be one past the end of the line, for "end of input"). */
static void check_locations(const char *src, const char *msg) {
  int nlines = 1;
  for (const char *p = src; *p; p++)
    nlines += *p == '\n';
  for (const char *p = msg; (p = strstr(p, "fuzz.oxk:")) != NULL; p++) {
    int line, col;
    if (sscanf(p, "fuzz.oxk:%d:%d:", &line, &col) != 2)
      continue;
    bool ok = line >= 1 && line <= nlines && col >= 1;
    if (ok) {
      const char *l = src;
      for (int i = 1; i < line; i++)
        l = strchr(l, '\n') + 1;
      const char *e = strchr(l, '\n');
      ok = col <= (e ? (int)(e - l) : (int)strlen(l)) + 1;
    }
    if (!ok) {
      fprintf(stderr, "diagnostic with a bad location %d:%d:\n%s\n", line, col, msg);
      abort();
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *src = malloc(size + 1);
  if (!src)
    return 0;
  memcpy(src, data, size);
  src[size] = 0; /* the text ends at the first NUL, as for any C caller */
  ox_compile_options opts = {0};
  opts.filename = "fuzz.oxk";
  opts.no_cache = 1;
  char *out = NULL;
  ox_status s = ox_emit(src, &opts, OX_TARGET_CPU, OX_EMIT_IR, &out);
  if (s == OX_OK) {
    if (!out || !strstr(out, "kernel ")) {
      fprintf(stderr, "ox_emit succeeded without kernel IR\n");
      abort();
    }
  } else {
    const char *msg = ox_last_error();
    if (s != OX_ERR_COMPILE || !msg[0]) {
      fprintf(stderr, "ox_emit returned %s: %s\n", ox_status_name(s), msg);
      abort();
    }
    check_locations(src, msg);
  }
  ox_free(out);
  ox_clear_error();
  free(src);
  return 0;
}
