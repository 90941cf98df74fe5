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
  uint32_t cpu_stack_max; /* CPU: the stack limit per thread; 0: OXL_CPU_STACK_MAX (tests lower it) */
} oxl_options;

/* Generates code for every kernel of `m`. On success *out holds malloc'ed
 * bytes (NUL-terminated for text) and *len their count. Errors (a feature the
 * target lacks, an LLVM failure) set the last error. */
ox_status oxl_generate(const oxi_module *m, const oxl_options *opt, oxl_output kind, char **out,
                       size_t *len);

/* Initializes LLVM, once; OX_ERR_OUT_OF_MEMORY (with the last error) when the
 * process's memory limit leaves too little for it (emit.c: memory for LLVM).
 * oxl_generate and oxl_jit_load call it; so do compiles, before
 * oxl_target_id, which would initialize LLVM without the check. */
ox_status oxl_init(void);

/* Identifies what generated code depends on besides the IR: the LLVM version,
 * and for the CPU the host CPU and its features. Fed into cache keys. */
const char *oxl_target_id(oxl_target t);

/* Name of the CPU entry points of kernel `k`: "<name>.block" (all threads of a
 * block in turn) or "<name>.thread" (one thread, for kernels that synchronize). */
void oxl_cpu_entry_name(const oxi_kernel *k, char *buf, size_t n);
/* Whether kernel k's CPU entry point runs one thread (on a fiber: the
 * executor's thread_fn), not a whole block (block_fn). */
bool oxl_cpu_threaded(const oxi_kernel *k);

/* The most stack one GPU thread of a CPU kernel may need (its entry point's
 * frame and the frames of what it calls, as LLVM laid them out). A kernel that
 * needs more fails to compile for the CPU. Equal to OXR_CPU_STACK_MAX
 * (runtime.h; launch.c checks). 4 MiB: eight times the local memory a CUDA
 * thread may have (512 KiB), so any kernel that can run on a GPU fits, while a
 * block of 1024 fibers still reserves (not commits) only 4 GiB of addresses. */
#define OXL_CPU_STACK_MAX (4u << 20)

/* ---- the host JIT
 * The CPU artifact (OXL_OUT_OBJ) is the host object followed by a table of the
 * stack each kernel entry point needs, so that the number survives the
 * compiled-kernel cache with the code it describes:
 *   object bytes | records | u32 count | u32 records' bytes | "OXSTACK1"
 * where a record is u32 stack bytes, u16 name length, the name (no NUL), all
 * in host byte order. oxl_jit_load strips and parses it. */
typedef struct oxl_jit oxl_jit;
ox_status oxl_jit_load(const void *obj, size_t len, oxl_jit **out);
void *oxl_jit_lookup(oxl_jit *j, const char *name);
/* The stack bytes entry point `name` needs (from the table); 0 if unknown. */
uint32_t oxl_jit_stack_bytes(const oxl_jit *j, const char *name);
void oxl_jit_destroy(oxl_jit *j);

#endif
