/* check.h - a minimal test harness: CHECK records a failure and goes on, so
 * one run shows every broken case; test_done() prints the summary. */
#ifndef OXIDE_TESTS_CHECK_H
#define OXIDE_TESTS_CHECK_H

#include <oxide/oxide.h>
#include <stdio.h>
#include <string.h>

static int test_failures, test_checks;

#define CHECK(cond, ...)                                                        \
  do {                                                                          \
    test_checks++;                                                              \
    if (!(cond)) {                                                              \
      test_failures++;                                                          \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);  \
      fprintf(stderr, __VA_ARGS__);                                             \
      fprintf(stderr, "\n  last error: %s\n", ox_last_error());                 \
    }                                                                           \
  } while (0)

#define CHECK_OK(call) CHECK((call) == OX_OK, "%s", #call)

/* The status and that the message contains `needle`. */
#define CHECK_ERR(call, status, needle)                                           \
  do {                                                                            \
    ox_status s_ = (call);                                                        \
    CHECK(s_ == (status) && strstr(ox_last_error(), (needle)) != NULL,            \
          "%s returned %s, expected %s with \"%s\"", #call, ox_status_name(s_),   \
          ox_status_name(status), needle);                                        \
  } while (0)

static inline int test_done(const char *name) {
  printf("%s: %d checks, %d failed\n", name, test_checks, test_failures);
  if (!test_failures)
    printf("PASSED\n");
  return test_failures != 0;
}

#endif
