/* two_copies_test - two copies of liboxide in one process (two wheels, or a
 * wheel and a system library): each works, and a handle made by one is
 * refused by the other (each copy keys its handles), instead of being taken
 * for one of its own objects. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "oxide/oxide.h"

typedef struct lib {
  void *dl;
  ox_status (*device_get)(ox_device_type, int, ox_device *);
  ox_status (*zeros)(ox_device, ox_stream, ox_dtype, int, const int64_t *, ox_tensor *);
  int64_t (*numel)(ox_tensor);
  void (*release)(ox_tensor);
  const char *(*last_error)(void);
  ox_status (*last_status)(void);
} lib;

static int failures;
#define EXPECT(c)                                                                  \
  do {                                                                             \
    if (!(c)) {                                                                    \
      fprintf(stderr, "%s:%d: EXPECT(%s) failed\n", __FILE__, __LINE__, #c);      \
      failures++;                                                                  \
    }                                                                              \
  } while (0)

static int open_lib(lib *l, const char *path) {
  l->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!l->dl) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    return 0;
  }
  *(void **)&l->device_get = dlsym(l->dl, "ox_device_get");
  *(void **)&l->zeros = dlsym(l->dl, "ox_tensor_zeros");
  *(void **)&l->numel = dlsym(l->dl, "ox_tensor_numel");
  *(void **)&l->release = dlsym(l->dl, "ox_tensor_release");
  *(void **)&l->last_error = dlsym(l->dl, "ox_last_error");
  *(void **)&l->last_status = dlsym(l->dl, "ox_last_status");
  return l->device_get && l->zeros && l->numel && l->release && l->last_error && l->last_status;
}

int main(void) {
  /* the second copy: the same file under another name loads separately */
  char copy[] = "/tmp/oxide-copy-XXXXXX";
  int fd = mkstemp(copy);
  FILE *in = fopen(OXIDE_LIBRARY_PATH, "rb"), *out = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (!in || !out) {
    fprintf(stderr, "cannot copy %s\n", OXIDE_LIBRARY_PATH);
    return 1;
  }
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    fwrite(buf, 1, n, out);
  fclose(in);
  fclose(out);
  lib a, b;
  if (!open_lib(&a, OXIDE_LIBRARY_PATH) || !open_lib(&b, copy))
    return 1;
  unlink(copy);
  EXPECT(a.device_get != b.device_get); /* two copies, not one */
  ox_device da, db;
  EXPECT(a.device_get(OX_DEVICE_CPU, 0, &da) == OX_OK && b.device_get(OX_DEVICE_CPU, 0, &db) == OX_OK);
  int64_t shape[1] = {5};
  int refused = 0;
  for (int i = 0; i < 200; i++) {
    ox_tensor ta, tb;
    EXPECT(a.zeros(da, NULL, OX_F32, 1, shape, &ta) == OX_OK);
    EXPECT(b.zeros(db, NULL, OX_F32, 1, shape, &tb) == OX_OK);
    EXPECT(a.numel(ta) == 5 && b.numel(tb) == 5);
    /* crossed: each copy refuses the other's handle (same slot, same generation) */
    refused += b.numel(ta) == 0 && b.last_status() == OX_ERR_INVALID_ARGUMENT;
    refused += a.numel(tb) == 0 && a.last_status() == OX_ERR_INVALID_ARGUMENT;
    a.release(ta);
    b.release(tb);
  }
  EXPECT(refused == 400);
  EXPECT(strstr(a.last_error(), "not live") != NULL);
  /* a device of one copy is not a device of the other */
  ox_tensor t;
  EXPECT(b.zeros(da, NULL, OX_F32, 1, shape, &t) == OX_ERR_INVALID_ARGUMENT);
  printf("two_copies_test: %s\n", failures ? "FAILED" : "PASSED");
  return failures != 0;
}
