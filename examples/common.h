/* common.h - what every example host program shares: picking the device from
 * the command line, finding the kernel file, and failing loudly. */
#ifndef OXIDE_EXAMPLES_COMMON_H
#define OXIDE_EXAMPLES_COMMON_H

#include <oxide/oxide.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

/* Stops the example with Oxide's error message if a call fails. */
#define OX_CHECK(call)                                                                       \
  do {                                                                                       \
    ox_status s_ = (call);                                                                   \
    if (s_ != OX_OK) {                                                                       \
      fprintf(stderr, "%s:%d: %s failed: %s\n%s\n", __FILE__, __LINE__, #call,               \
              ox_status_name(s_), ox_last_error());                                          \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

/* The device: argv[1] = "cpu", "cuda" or "cuda:N"; without it, Oxide's default
 * (a GPU when one is usable, else the CPU; $OXIDE_DEVICE overrides). */
static inline ox_device example_device(int argc, char **argv) {
  ox_device d;
  if (argc > 1 && !strcmp(argv[1], "cpu"))
    OX_CHECK(ox_device_get(OX_DEVICE_CPU, 0, &d));
  else if (argc > 1 && !strncmp(argv[1], "cuda", 4))
    OX_CHECK(ox_device_get(OX_DEVICE_CUDA, argv[1][4] == ':' ? atoi(argv[1] + 5) : 0, &d));
  else
    OX_CHECK(ox_device_default(&d));
  return d;
}

/* Compiles examples/NAME.oxk for `dev`. */
static inline ox_module example_module(ox_device dev, const char *name) {
  char path[4096];
  const char *dir = getenv("OXIDE_EXAMPLES_DIR");
  snprintf(path, sizeof path, "%s/%s.oxk", dir ? dir : OXIDE_EXAMPLES_DIR, name);
  ox_module m;
  OX_CHECK(ox_module_compile_file(dev, path, NULL, &m));
  return m;
}

/* f32 -> bf16, rounding to nearest even (finite inputs). */
static inline uint16_t example_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* bf16 -> the double it is exactly. */
static inline double example_from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* f8e4m3 (E4M3FN: bias 7, no infinities, S.1111.111 NaN) -> the double it is exactly. */
static inline double example_from_e4m3(uint8_t c) {
  int e = (c >> 3) & 15, m = c & 7;
  double v = (c & 0x7f) == 0x7f ? NAN : e ? ldexp(8 + m, e - 10) : ldexp(m, -9);
  return c & 0x80 ? -v : v;
}

/* A small deterministic generator, so failures reproduce. */
static inline float example_rand(unsigned *state) {
  *state = *state * 1664525u + 1013904223u;
  return (float)(*state >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

static inline int example_finish(const char *name, ox_device dev, int failures) {
  if (failures) {
    printf("%s on %s: FAILED (%d mismatches)\n", name, ox_device_name(dev), failures);
    return 1;
  }
  printf("%s on %s: PASSED\n", name, ox_device_name(dev));
  return 0;
}

#endif
