/*
 * codegen.h - internal to the backend: the state of one LLVM code generation
 * and the per-target hooks (cuda.c, cpu.c in this folder).
 */
#ifndef OXIDE_BACKEND_CODEGEN_H
#define OXIDE_BACKEND_CODEGEN_H

#include <llvm-c/Core.h>

#include "backend/backend.h"

typedef struct cg_t cg_t;

/* What differs between targets. */
typedef struct cg_hooks {
  LLVMValueRef (*sreg)(cg_t *C, int which);       /* u32 thread/block indices */
  void (*barrier)(cg_t *C);                       /* block-wide barrier */
  LLVMValueRef (*shfl)(cg_t *C, int mode, LLVMValueRef v, LLVMValueRef arg);
  LLVMValueRef (*vote)(cg_t *C, int mode, LLVMValueRef pred);
  LLVMValueRef (*shared_ptr)(cg_t *C, int64_t offset); /* the block's shared memory */
  LLVMValueRef (*err_ptr)(cg_t *C);               /* the stream's error record */
  LLVMValueRef (*tag)(cg_t *C);                   /* the launch tag (i32) */
  /* CPU: a looped kernel's rendezvous (OXI_RENDEZVOUS) of n threads at shared byte `offset` */
  LLVMValueRef (*rendezvous)(cg_t *C, int64_t offset, LLVMValueRef n);
} cg_hooks;

struct cg_t {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  const oxi_module *m;
  const oxl_options *opt;
  const cg_hooks *hooks;
  /* generates the entry points of C->k: the target's oxl_cg_kernel_*, set by
     emit.c, so that codegen.c and the targets (which call its body) do not call each other */
  void (*kernel)(cg_t *C);
  const oxi_kernel *k; /* the kernel being generated */
  LLVMValueRef fn;     /* the function its body goes into */
  LLVMValueRef fail_fn;
  /* per kernel: values of IR params, slots, blocks */
  LLVMValueRef *ptrs, *lens, *scalars;
  LLVMValueRef (*dims)[OXI_MAX_RANK], (*strides)[OXI_MAX_RANK]; /* tensor parameters */
  LLVMValueRef *vals, *slots, *locals;
  LLVMBasicBlockRef *bbs;
  /* per target */
  LLVMValueRef cpu_ctx; /* CPU: the oxr_cpu_ctx pointer */
  LLVMValueRef cpu_tid[3];
  LLVMValueRef gpu_err, gpu_tag, gpu_shared;
  /* CPU: frame sizes LLVM reported while emitting (oxl_cpu_diagnostic) */
  struct oxl_frame {
    char *fn;
    uint64_t bytes;
  } *frames;
  int nframes, cap_frames;
  char *diag_error; /* the first error diagnostic LLVM reported, if any */
  oxb_arena scratch; /* CPU: the looped kernels (threads.c) made for generation */
  bool oom;         /* the diagnostic handler ran out of memory */
};

/* values.c */
LLVMValueRef oxl_cg_fn(cg_t *C, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, int n,
                       LLVMTypeRef *fty);
LLVMValueRef oxl_cg_call(cg_t *C, const char *name, LLVMTypeRef ret, LLVMValueRef *args, int n);
/* "f32", "f64", "f16", "i1" ... "i64": an intrinsic's type suffix */
const char *oxl_type_suffix(LLVMTypeRef t);
/* llvm.BASE.SUFFIX of one or two operands of a's type */
LLVMValueRef oxl_intrinsic1(cg_t *C, const char *base, LLVMValueRef a);
LLVMValueRef oxl_intrinsic2(cg_t *C, const char *base, LLVMValueRef a, LLVMValueRef b);
/* PTX instruction `insn` ("ex2.approx.ftz.f32") of one f32 operand, as inline assembly */
LLVMValueRef oxl_ptx_f32(cg_t *C, const char *insn, LLVMValueRef a);

/* math.c: math function `fn` (OXI_M_*) of f32 or f64 operands `a` (the
 * formulas of docs/language.md section 5.5); and whether the GPU lacks it for
 * type t (f64 transcendentals) */
LLVMValueRef oxl_math_float(cg_t *C, int fn, oxi_type t, LLVMValueRef *a);
bool oxl_math_gpu_lacks(int fn, oxi_type t);
/* math.c: word `w` of Philox4x32-10 of key a[0..1] and counter a[2..5] (i32 values) */
LLVMValueRef oxl_philox(cg_t *C, LLVMValueRef *a, int w);

/* codegen.c */
void oxl_cg_body(cg_t *C);
void oxl_cg_map_params(cg_t *C, LLVMValueRef *params);
int oxl_cg_param_types(cg_t *C, LLVMTypeRef *out, unsigned ptr_as);
void oxl_cg_param_attrs(cg_t *C, LLVMValueRef fn, int first);
ox_status oxl_cg_module(cg_t *C);

/* target_cuda.c / target_cpu.c: generate the entry points of C->k */
void oxl_cg_kernel_cuda(cg_t *C);
void oxl_cg_kernel_cpu(cg_t *C);

/* target_cpu.c, after optimization: adds the cancellation polls at loop
 * back-edges and asks LLVM to report every function's frame size. */
void oxl_cpu_finish(cg_t *C);
/* target_cuda.c, after optimization: a wait for wgmma groups after a join
 * gets a copy on each incoming edge, so that ptxas keeps the groups in
 * flight (see there). */
void oxl_cuda_finish(cg_t *C);

/* cfg.c: an LLVM function's blocks in layout order, a block's index, and (if
 * asked) each block's predecessors, for the passes after optimization. */
typedef struct oxl_bb_key {
  LLVMBasicBlockRef bb;
  unsigned index;
} oxl_bb_key;
typedef struct oxl_cfg {
  unsigned n;
  LLVMBasicBlockRef *bbs; /* [n] */
  oxl_bb_key *keys;       /* sorted by address */
  unsigned **preds, *npred, *pred_mem;
} oxl_cfg;
void oxl_cfg_build(oxl_cfg *g, LLVMValueRef fn, bool preds);
unsigned oxl_cfg_index(const oxl_cfg *g, LLVMBasicBlockRef bb);
void oxl_cfg_free(oxl_cfg *g);
/* The diagnostic handler of a CPU code generation (context: the cg_t): keeps
 * the frame sizes and the first error. */
void oxl_cpu_diagnostic(LLVMDiagnosticInfoRef di, void *cg);
/* After emitting the object: appends the stack-size table (see backend.h) to
 * *obj; fails with OX_ERR_COMPILE for a kernel whose stack need is above
 * OXL_CPU_STACK_MAX or cannot be bounded. */
ox_status oxl_cpu_stack_table(cg_t *C, char **obj, size_t *len);

#endif
