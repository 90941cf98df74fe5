/*
 * api.h - the api layer: what oxide.h promises on top of the layers below.
 * module.c compiles kernel text (front end -> IR -> backend), caches the
 * result and loads it on a device; launch.c checks and queues launches;
 * doctor.c reports the environment. Prefix: oxa_.
 */
#ifndef OXIDE_API_H
#define OXIDE_API_H

#include "backend/backend.h"
#include "front/front.h"
#include "ir/ir.h"
#include "runtime/runtime.h"

#define OXA_MAX_PARAMS 64

struct ox_kernel_s {
  ox_module mod;
  const oxi_kernel *ir; /* lives in the module's arena */
  uint32_t tag;         /* identifies the kernel in device-side error records */
  int nflat;            /* flattened parameter count (slices count twice) */
  CUfunction cu_fn;
  oxr_cpu_kernel cpu;
};

struct ox_module_s {
  ox_device dev;
  oxb_arena arena;
  oxi_module ir;
  oxb_source src;
  char *text; /* a copy of the source, for messages */
  int nkernels;
  struct ox_kernel_s *kernels;
  CUmodule cu_mod;
  oxl_jit *jit;
  int from_cache;
};

/* Runs the front end on `source`: on success the IR is in `m` (allocated in
 * `a`); on failure returns OX_ERR_COMPILE with every diagnostic as the last
 * error. `ast` (optional) receives the syntax-tree dump. */
ox_status oxa_front(oxb_arena *a, const char *source, const char *filename, oxi_module *m,
                    oxb_str *ast);

/* Finds where ptxas is (PATH, then /usr/local/cuda/bin), or NULL. */
const char *oxa_find_ptxas(char *buf, size_t n);

#endif
