/* doctor.c - `oxide doctor`: what Oxide sees of its environment. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"

const char *oxa_find_ptxas(char *buf, size_t n) {
  const char *path = getenv("PATH");
  char dir[4096];
  while (path && *path) {
    const char *end = strchr(path, ':');
    size_t len = end ? (size_t)(end - path) : strlen(path);
    if (len && len < sizeof dir) {
      memcpy(dir, path, len);
      dir[len] = 0;
      snprintf(buf, n, "%s/ptxas", dir);
      if (access(buf, X_OK) == 0)
        return buf;
    }
    path = end ? end + 1 : NULL;
  }
  snprintf(buf, n, "/usr/local/cuda/bin/ptxas");
  return access(buf, X_OK) == 0 ? buf : NULL;
}

ox_status ox_doctor(char **out) {
  if (!out)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_doctor: out is NULL");
  oxb_str o = {0};
  oxb_str_addf(&o, "Oxide      %s, build %.16s\n", ox_version(), oxb_build_id());
  oxb_str_addf(&o, "host       %s\n", oxl_target_id(OXL_CPU));
  ox_device cpu;
  if (ox_device_get(OX_DEVICE_CPU, 0, &cpu) == OX_OK)
    oxb_str_addf(&o, "cpu        %s\n", ox_device_name(cpu));
  int n = 0;
  ox_device_count(OX_DEVICE_CUDA, &n);
  int drv = oxr_cuda_driver_version();
  if (!drv) {
    oxr_cuda_load();
    oxb_str_addf(&o, "cuda       no driver: %s\n", ox_last_error());
    ox_clear_error();
  } else {
    oxb_str_addf(&o, "cuda       driver %d.%d, %d GPU%s\n", drv / 1000, (drv % 1000) / 10, n,
                 n == 1 ? "" : "s");
  }
  for (int i = 0; i < n; i++) {
    ox_device d;
    if (ox_device_get(OX_DEVICE_CUDA, i, &d) != OX_OK) {
      oxb_str_addf(&o, "  cuda:%d   unusable: %s\n", i, ox_last_error());
      continue;
    }
    oxb_str_addf(&o, "  cuda:%d   %s, sm_%d, %d SMs, %d KiB shared per block\n", i, ox_device_name(d),
                 d->cc, d->multiprocessors, d->max_shared_per_block / 1024);
  }
  oxb_str_addf(&o, "cache      ");
  oxa_cache_report(&o);
  oxb_str_addf(&o, "\n");
  char buf[4200];
  const char *ptxas = oxa_find_ptxas(buf, sizeof buf);
  oxb_str_addf(&o, "ptxas      %s\n", ptxas ? ptxas : "not found (only needed to validate PTX in tests)");
  *out = oxb_str_take(&o);
  return *out ? OX_OK : oxb_set_error(OX_ERR_OUT_OF_MEMORY, "ox_doctor: out of memory writing the report");
}
