/*
 * backend.h - Oxide IR to LLVM IR through the LLVM C API, optimized, then to
 * PTX (NVPTX) or to host machine code, and a host JIT for the CPU device.
 * Prefix: oxl_.
 */
#ifndef OXIDE_BACKEND_H
#define OXIDE_BACKEND_H

#include "base/base.h"
#include "ir/ir.h"

typedef enum oxl_target { OXL_CUDA, OXL_CPU } oxl_target;

typedef enum oxl_output {
  OXL_OUT_LLVM, /* optimized LLVM IR, text */
  OXL_OUT_PTX,  /* PTX text (CUDA) */
  OXL_OUT_ASM,  /* host assembly text (CPU) */
  OXL_OUT_OBJ   /* host object file (CPU), for the JIT and the cache */
} oxl_output;

typedef struct oxl_options {
  oxl_target target;
  int sm;        /* CUDA: 80, 86, 89, 90... */
  int opt_level; /* 0..3 */
} oxl_options;

/* Generates code for every kernel of `m`. On success *out holds malloc'ed
 * bytes (NUL-terminated for text) and *len their count. Errors (a feature the
 * target lacks, an LLVM failure) set the last error. */
ox_status oxl_generate(const oxi_module *m, const oxl_options *opt, oxl_output kind, char **out,
                       size_t *len);

/* Identifies what generated code depends on besides the IR: the LLVM version,
 * and for the CPU the host CPU and its features. Fed into cache keys. */
const char *oxl_target_id(oxl_target t);

/* Name of the CPU entry points of kernel `k`: "<name>.block" (all threads of a
 * block in turn) or "<name>.thread" (one thread, for kernels that synchronize). */
void oxl_cpu_entry_name(const oxi_kernel *k, char *buf, size_t n);

/* ---- the host JIT */
typedef struct oxl_jit oxl_jit;
ox_status oxl_jit_load(const void *obj, size_t len, oxl_jit **out);
void *oxl_jit_lookup(oxl_jit *j, const char *name);
void oxl_jit_destroy(oxl_jit *j);

#endif
