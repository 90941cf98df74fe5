/* match.h - matching compiler output in the front-end tests: lines that
 * contain every part of a pattern, and diagnostics at a file:line:col. */
#ifndef OXIDE_TESTS_MATCH_H
#define OXIDE_TESTS_MATCH_H

#include <stdio.h>
#include <string.h>

/* Does a line of `text` contain every '|'-separated part of `pat`? */
static inline int has_line(const char *text, const char *pat) {
  char parts[4][160];
  int np = 0;
  for (const char *p = pat; np < 4;) {
    const char *bar = strchr(p, '|');
    size_t n = bar ? (size_t)(bar - p) : strlen(p);
    snprintf(parts[np++], sizeof parts[0], "%.*s", (int)n, p);
    if (!bar)
      break;
    p = bar + 1;
  }
  for (const char *l = text; *l;) {
    const char *e = strchr(l, '\n');
    size_t len = e ? (size_t)(e - l) : strlen(l);
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)len, l);
    int all = 1;
    for (int i = 0; i < np && all; i++)
      all = strstr(line, parts[i]) != NULL;
    if (all)
      return 1;
    l += len + (e ? 1 : 0);
  }
  return 0;
}

/* "L:C text": a diagnostic line "t.oxk:L:C: ..." containing text. */
static inline int has_diag(const char *msg, const char *want) {
  int line, col, used = 0;
  if (sscanf(want, "%d:%d %n", &line, &col, &used) == 2 && used) {
    char loc[64];
    snprintf(loc, sizeof loc, "t.oxk:%d:%d: ", line, col);
    for (const char *l = msg; *l;) {
      const char *e = strchr(l, '\n');
      size_t len = e ? (size_t)(e - l) : strlen(l);
      char buf[1024];
      snprintf(buf, sizeof buf, "%.*s", (int)len, l);
      if (!strncmp(buf, loc, strlen(loc)) && strstr(buf, want + used))
        return 1;
      l += len + (e ? 1 : 0);
    }
    return 0;
  }
  return has_line(msg, want);
}

#endif
