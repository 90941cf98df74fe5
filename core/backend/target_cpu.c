/* target_cpu.c - the CPU side of code generation. A kernel body becomes an
 * internal function of (ctx, tx, ty, tz, params...) that is inlined into one of
 * two entry points the CPU executor calls (runtime.h):
 *   <name>.block(ctx, args)              every thread of a block in turn, for
 *                                        kernels whose threads never wait on
 *                                        each other (LLVM may vectorize the loop);
 *   <name>.thread(ctx, args, tx, ty, tz) one thread, run on its own fiber, for
 *                                        kernels with barriers or warp operations.
 * `args` points to the flattened argument values, as for cuLaunchKernel. */
#include <stdio.h>
#include <stdlib.h>

#include "backend/codegen.h"

/* oxr_cpu_ctx field indices (runtime.h; keep in step). */
enum { CTX_BLOCK_IDX, CTX_BLOCK_DIM, CTX_GRID_DIM, CTX_TAG, CTX_ERR, CTX_SHARED, CTX_SCHED,
       CTX_BARRIER, CTX_SHFL, CTX_VOTE, CTX_LANE, CTX_NFIELDS };

static LLVMTypeRef i32t(cg_t *C) { return LLVMInt32TypeInContext(C->ctx); }
static LLVMTypeRef i64t(cg_t *C) { return LLVMInt64TypeInContext(C->ctx); }
static LLVMTypeRef ptr(cg_t *C) { return LLVMPointerTypeInContext(C->ctx, 0); }

static LLVMTypeRef ctx_type(cg_t *C) {
  LLVMTypeRef a3 = LLVMArrayType2(i32t(C), 3);
  LLVMTypeRef f[CTX_NFIELDS] = {a3, a3, a3, i32t(C), ptr(C), ptr(C), ptr(C), ptr(C), ptr(C), ptr(C), ptr(C)};
  return LLVMStructTypeInContext(C->ctx, f, CTX_NFIELDS, 0);
}

static LLVMValueRef field(cg_t *C, int f, int elem, LLVMTypeRef t) {
  LLVMValueRef idx[3] = {LLVMConstInt(i32t(C), 0, 0), LLVMConstInt(i32t(C), (uint64_t)f, 0),
                         LLVMConstInt(i32t(C), (uint64_t)elem, 0)};
  LLVMValueRef p = LLVMBuildInBoundsGEP2(C->b, ctx_type(C), C->cpu_ctx, idx, elem >= 0 ? 3 : 2, "");
  LLVMValueRef v = LLVMBuildLoad2(C->b, t, p, "");
  /* the context does not change during a launch */
  LLVMSetMetadata(v, LLVMGetMDKindIDInContext(C->ctx, "invariant.load", 14), LLVMMDNodeInContext(C->ctx, NULL, 0));
  return v;
}

static LLVMValueRef sreg(cg_t *C, int which) {
  if (which <= 2)
    return C->cpu_tid[which];
  if (which == 12) {
    /* laneid: warps are runs of 32 threads in linear order, as on the GPU,
     * so the lane follows from the thread index (no fiber needed) */
    LLVMValueRef bx = field(C, CTX_BLOCK_DIM, 0, i32t(C)), by = field(C, CTX_BLOCK_DIM, 1, i32t(C));
    LLVMValueRef lin = LLVMBuildAdd(
        C->b, C->cpu_tid[0],
        LLVMBuildMul(C->b, bx, LLVMBuildAdd(C->b, C->cpu_tid[1], LLVMBuildMul(C->b, by, C->cpu_tid[2], ""), ""), ""),
        "");
    return LLVMBuildAnd(C->b, lin, LLVMConstInt(i32t(C), 31, 0), "");
  }
  int f = which <= 5 ? CTX_BLOCK_IDX : which <= 8 ? CTX_BLOCK_DIM : CTX_GRID_DIM;
  return field(C, f, (which - 3) % 3, i32t(C));
}

static void barrier(cg_t *C) {
  LLVMValueRef fnp = field(C, CTX_BARRIER, -1, ptr(C));
  LLVMTypeRef p = ptr(C);
  LLVMTypeRef fty = LLVMFunctionType(LLVMVoidTypeInContext(C->ctx), &p, 1, 0);
  LLVMBuildCall2(C->b, fty, fnp, &C->cpu_ctx, 1, "");
}

static LLVMValueRef shfl(cg_t *C, int mode, LLVMValueRef v, LLVMValueRef arg) {
  LLVMTypeRef t = LLVMTypeOf(v);
  bool wide = LLVMGetTypeKind(t) == LLVMDoubleTypeKind ||
              (LLVMGetTypeKind(t) == LLVMIntegerTypeKind && LLVMGetIntTypeWidth(t) == 64);
  LLVMValueRef bits = LLVMBuildBitCast(C->b, v, wide ? i64t(C) : i32t(C), "");
  if (!wide)
    bits = LLVMBuildZExt(C->b, bits, i64t(C), "");
  LLVMValueRef fnp = field(C, CTX_SHFL, -1, ptr(C));
  LLVMTypeRef ps[4] = {ptr(C), i64t(C), i32t(C), i32t(C)};
  LLVMTypeRef fty = LLVMFunctionType(i64t(C), ps, 4, 0);
  LLVMValueRef args[4] = {C->cpu_ctx, bits, arg, LLVMConstInt(i32t(C), (uint64_t)mode, 0)};
  LLVMValueRef r = LLVMBuildCall2(C->b, fty, fnp, args, 4, "");
  if (!wide)
    r = LLVMBuildTrunc(C->b, r, i32t(C), "");
  return LLVMBuildBitCast(C->b, r, t, "");
}

static LLVMValueRef vote(cg_t *C, int mode, LLVMValueRef pred) {
  LLVMValueRef fnp = field(C, CTX_VOTE, -1, ptr(C));
  LLVMTypeRef ps[3] = {ptr(C), i32t(C), i32t(C)};
  LLVMTypeRef fty = LLVMFunctionType(i32t(C), ps, 3, 0);
  LLVMValueRef args[3] = {C->cpu_ctx, LLVMBuildZExt(C->b, pred, i32t(C), ""),
                          LLVMConstInt(i32t(C), (uint64_t)mode, 0)};
  LLVMValueRef r = LLVMBuildCall2(C->b, fty, fnp, args, 3, "");
  if (mode == 2)
    return r;
  return LLVMBuildICmp(C->b, LLVMIntNE, r, LLVMConstInt(i32t(C), 0, 0), "");
}

static LLVMValueRef shared_ptr(cg_t *C, int64_t offset) {
  LLVMValueRef base = field(C, CTX_SHARED, -1, ptr(C));
  LLVMValueRef o = LLVMConstInt(i64t(C), (uint64_t)offset, 0);
  return LLVMBuildInBoundsGEP2(C->b, LLVMInt8TypeInContext(C->ctx), base, &o, 1, "");
}

static LLVMValueRef err_ptr(cg_t *C) { return field(C, CTX_ERR, -1, ptr(C)); }
static LLVMValueRef tag(cg_t *C) { return field(C, CTX_TAG, -1, i32t(C)); }

static const cg_hooks cpu_hooks = {sreg, barrier, shfl, vote, shared_ptr, err_ptr, tag};

/* Loads the flattened arguments from the `args` array (one pointer per value). */
static void load_args(cg_t *C, LLVMValueRef args, LLVMTypeRef *types, int n, LLVMValueRef *out) {
  for (int i = 0; i < n; i++) {
    LLVMValueRef idx = LLVMConstInt(i64t(C), (uint64_t)i, 0);
    LLVMValueRef slot = LLVMBuildInBoundsGEP2(C->b, ptr(C), args, &idx, 1, "");
    LLVMValueRef p = LLVMBuildLoad2(C->b, ptr(C), slot, "");
    out[i] = LLVMBuildLoad2(C->b, types[i], p, "");
  }
}

void oxl_cg_kernel_cpu(cg_t *C) {
  const oxi_kernel *k = C->k;
  C->hooks = &cpu_hooks;
  /* the body: (ctx, tx, ty, tz, flattened params) */
  LLVMTypeRef ptypes[4 + OXI_MAX_PARAM_VALUES];
  ptypes[0] = ptr(C);
  ptypes[1] = ptypes[2] = ptypes[3] = i32t(C);
  int np = oxl_cg_param_types(C, ptypes + 4, 0);
  LLVMTypeRef bty = LLVMFunctionType(LLVMVoidTypeInContext(C->ctx), ptypes, (unsigned)np + 4, 0);
  char name[300];
  snprintf(name, sizeof name, "%s.body", k->name);
  LLVMValueRef body = LLVMAddFunction(C->mod, name, bty);
  LLVMSetLinkage(body, LLVMInternalLinkage);
  LLVMAddAttributeAtIndex(body, LLVMAttributeFunctionIndex,
                          LLVMCreateEnumAttribute(C->ctx, LLVMGetEnumAttributeKindForName("alwaysinline", 12), 0));
  oxl_cg_param_attrs(C, body, 4);
  C->fn = body;
  C->cpu_ctx = LLVMGetParam(body, 0);
  for (int i = 0; i < 3; i++)
    C->cpu_tid[i] = LLVMGetParam(body, (unsigned)i + 1);
  LLVMValueRef ps[OXI_MAX_PARAM_VALUES];
  for (int i = 0; i < np; i++)
    ps[i] = LLVMGetParam(body, (unsigned)i + 4);
  LLVMPositionBuilderAtEnd(C->b, LLVMAppendBasicBlockInContext(C->ctx, body, "entry"));
  oxl_cg_map_params(C, ps);
  oxl_cg_body(C);

  /* the entry point */
  oxl_cpu_entry_name(k, name, sizeof name);
  LLVMValueRef call_args[4 + OXI_MAX_PARAM_VALUES];
  if (k->uses_sync) {
    LLVMTypeRef et[5] = {ptr(C), ptr(C), i32t(C), i32t(C), i32t(C)};
    LLVMValueRef fn = LLVMAddFunction(C->mod, name, LLVMFunctionType(LLVMVoidTypeInContext(C->ctx), et, 5, 0));
    LLVMPositionBuilderAtEnd(C->b, LLVMAppendBasicBlockInContext(C->ctx, fn, "entry"));
    call_args[0] = LLVMGetParam(fn, 0);
    for (int i = 0; i < 3; i++)
      call_args[1 + i] = LLVMGetParam(fn, (unsigned)i + 2);
    load_args(C, LLVMGetParam(fn, 1), ptypes + 4, np, call_args + 4);
    LLVMBuildCall2(C->b, bty, body, call_args, (unsigned)np + 4, "");
    LLVMBuildRetVoid(C->b);
    return;
  }
  LLVMTypeRef et[2] = {ptr(C), ptr(C)};
  LLVMValueRef fn = LLVMAddFunction(C->mod, name, LLVMFunctionType(LLVMVoidTypeInContext(C->ctx), et, 2, 0));
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(C->ctx, fn, "entry");
  LLVMPositionBuilderAtEnd(C->b, entry);
  C->cpu_ctx = LLVMGetParam(fn, 0);
  call_args[0] = C->cpu_ctx;
  load_args(C, LLVMGetParam(fn, 1), ptypes + 4, np, call_args + 4);
  LLVMValueRef dim[3];
  for (int i = 0; i < 3; i++)
    dim[i] = field(C, CTX_BLOCK_DIM, i, i32t(C));
  /* for z { for y { for x { body } } } */
  LLVMBasicBlockRef heads[3], bodies[3], latches[3];
  LLVMValueRef iv[3];
  LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(C->ctx, fn, "exit");
  LLVMBasicBlockRef pre = entry;
  for (int d = 2; d >= 0; d--) {
    heads[d] = LLVMAppendBasicBlockInContext(C->ctx, fn, "head");
    bodies[d] = LLVMAppendBasicBlockInContext(C->ctx, fn, "loop");
    latches[d] = LLVMAppendBasicBlockInContext(C->ctx, fn, "latch");
    LLVMPositionBuilderAtEnd(C->b, pre);
    LLVMBuildBr(C->b, heads[d]);
    LLVMPositionBuilderAtEnd(C->b, heads[d]);
    iv[d] = LLVMBuildPhi(C->b, i32t(C), "");
    LLVMValueRef zero = LLVMConstInt(i32t(C), 0, 0);
    LLVMAddIncoming(iv[d], &zero, &pre, 1);
    LLVMBuildCondBr(C->b, LLVMBuildICmp(C->b, LLVMIntULT, iv[d], dim[d], ""), bodies[d],
                    d == 2 ? exit : latches[d + 1]);
    pre = bodies[d];
  }
  LLVMPositionBuilderAtEnd(C->b, bodies[0]);
  for (int i = 0; i < 3; i++)
    call_args[1 + i] = iv[i];
  LLVMBuildCall2(C->b, bty, body, call_args, (unsigned)np + 4, "");
  LLVMBuildBr(C->b, latches[0]);
  for (int d = 0; d < 3; d++) {
    LLVMPositionBuilderAtEnd(C->b, latches[d]);
    LLVMValueRef next = LLVMBuildAdd(C->b, iv[d], LLVMConstInt(i32t(C), 1, 0), "");
    LLVMAddIncoming(iv[d], &next, &latches[d], 1);
    LLVMBuildBr(C->b, heads[d]);
  }
  LLVMPositionBuilderAtEnd(C->b, exit);
  LLVMBuildRetVoid(C->b);
}
