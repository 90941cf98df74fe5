/* ptx_test - the PTX of every example kernel is accepted by ptxas (from the
 * CUDA toolkit) for sm_80 and sm_90. Without ptxas the test fails, unless
 * OXIDE_NO_PTXAS=1 says the machine has no CUDA toolkit on purpose. */
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
    free(s);
    s = NULL;
  }
  if (s)
    s[n] = 0;
  fclose(f);
  return s;
}

int main(void) {
  const char *src_dir = getenv("OXIDE_SOURCE_DIR");
  char ptxas[4096] = "ptxas";
  if (system("command -v ptxas >/dev/null 2>&1") != 0) {
    if (access("/usr/local/cuda/bin/ptxas", X_OK) == 0) {
      snprintf(ptxas, sizeof ptxas, "/usr/local/cuda/bin/ptxas");
    } else {
      const char *skip = getenv("OXIDE_NO_PTXAS");
      printf("ptxas not found%s\n", skip ? " (OXIDE_NO_PTXAS set: skipped)" : "");
      return skip ? 0 : 1;
    }
  }
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/examples", src_dir ? src_dir : ".");
  DIR *d = opendir(dir);
  CHECK(d != NULL, "cannot open %s", dir);
  if (!d)
    return test_done("ptx_test");
  struct dirent *e;
  int files = 0;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".oxk"))
      continue;
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    char *text = slurp(path);
    CHECK(text != NULL, "cannot read %s", path);
    if (!text)
      continue;
    files++;
    static const int archs[] = {80, 90};
    for (int i = 0; i < 2; i++) {
      ox_compile_options o = {.filename = path, .sm = archs[i]};
      char *ptx = NULL;
      CHECK_OK(ox_emit(text, &o, OX_TARGET_CUDA, OX_EMIT_PTX, &ptx));
      if (!ptx)
        continue;
      if (!strcmp(e->d_name, "vecadd.oxk")) {
        /* the contract's exact block shape, and read-only slices on the
         * non-coherent read-only path with their bounds checks proven away */
        CHECK(strstr(ptx, ".reqntid 256, 1, 1") != NULL, "vecadd PTX lacks .reqntid");
        CHECK(strstr(ptx, "ld.global.nc.f32") != NULL, "vecadd PTX lacks ld.global.nc");
        CHECK(strstr(ptx, "__oxide_check_failed") == NULL || strstr(ptx, "call") == NULL,
              "vecadd PTX still calls the bounds-check failure path");
      }
      char tmp[] = "/tmp/oxide-ptx-XXXXXX";
      int fd = mkstemp(tmp);
      CHECK(fd >= 0, "mkstemp");
      size_t n = strlen(ptx);
      CHECK(write(fd, ptx, n) == (ssize_t)n, "write");
      close(fd);
      char cmd[9000];
      snprintf(cmd, sizeof cmd, "%s -arch=sm_%d %s -o /dev/null", ptxas, archs[i], tmp);
      int rc = system(cmd);
      CHECK(rc == 0, "ptxas rejected %s for sm_%d", e->d_name, archs[i]);
      unlink(tmp);
      ox_free(ptx);
    }
    free(text);
  }
  closedir(d);
  CHECK(files >= 5, "only %d example kernels found in %s", files, dir);
  return test_done("ptx_test");
}
