/* target_cpu.c - the CPU side of code generation. A kernel body becomes an
 * internal function of (ctx, tx, ty, tz, params...) that is inlined into one of
 * two entry points the CPU executor calls (runtime.h):
 *   <name>.block(ctx, args)              every thread of a block in turn, for
 *                                        kernels whose threads never wait on
 *                                        each other (LLVM may vectorize the loop),
 *                                        or the block once, for kernels made to
 *                                        loop over their threads (IR threads.c);
 *   <name>.thread(ctx, args, tx, ty, tz) one thread, run on its own fiber, for
 *                                        kernels with barriers or warp operations
 *                                        that threads.c does not take.
 * `args` points to the flattened argument values, as for cuLaunchKernel.
 *
 * After optimization (oxl_cpu_finish) two things are added that the executor
 * relies on: a poll of the launch's cancel word on every loop back-edge, so
 * that a launch can be stopped (ox_stream_cancel), and the request that LLVM
 * report each function's frame size, from which oxl_cpu_stack_table computes
 * the stack each entry point needs (fiber stacks are sized from it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/codegen.h"

/* oxr_cpu_ctx field indices (runtime.h; keep in step). */
enum { CTX_BLOCK_IDX, CTX_BLOCK_DIM, CTX_GRID_DIM, CTX_TAG, CTX_ERR, CTX_SHARED, CTX_SCHED,
       CTX_BARRIER, CTX_SHFL, CTX_VOTE, CTX_LANE, CTX_CANCEL, CTX_RENDEZVOUS, CTX_NFIELDS };

static LLVMTypeRef i32t(cg_t *C) { return LLVMInt32TypeInContext(C->ctx); }
static LLVMTypeRef i64t(cg_t *C) { return LLVMInt64TypeInContext(C->ctx); }
static LLVMTypeRef ptr(cg_t *C) { return LLVMPointerTypeInContext(C->ctx, 0); }

static LLVMTypeRef ctx_type(cg_t *C) {
  LLVMTypeRef a3 = LLVMArrayType2(i32t(C), 3);
  LLVMTypeRef f[CTX_NFIELDS] = {a3,     a3,     a3,     i32t(C), ptr(C), ptr(C),
                                ptr(C), ptr(C), ptr(C), ptr(C),  ptr(C), ptr(C), ptr(C)};
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
  if (which == OXI_SREG_ON_CPU)
    return LLVMConstInt(i32t(C), 1, 0);
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

static LLVMValueRef rendezvous(cg_t *C, int64_t offset, LLVMValueRef n) {
  LLVMValueRef fnp = field(C, CTX_RENDEZVOUS, -1, ptr(C));
  LLVMTypeRef ps[2] = {ptr(C), i32t(C)};
  LLVMTypeRef fty = LLVMFunctionType(i64t(C), ps, 2, 0);
  LLVMValueRef args[2] = {shared_ptr(C, offset), n};
  return LLVMBuildCall2(C->b, fty, fnp, args, 2, "");
}

static const cg_hooks cpu_hooks = {sreg, barrier, shfl, vote, shared_ptr, err_ptr, tag, rendezvous};

/* Loads the flattened arguments from the `args` array (one pointer per value). */
static void load_args(cg_t *C, LLVMValueRef args, LLVMTypeRef *types, int n, LLVMValueRef *out) {
  for (int i = 0; i < n; i++) {
    LLVMValueRef idx = LLVMConstInt(i64t(C), (uint64_t)i, 0);
    LLVMValueRef slot = LLVMBuildInBoundsGEP2(C->b, ptr(C), args, &idx, 1, "");
    LLVMValueRef p = LLVMBuildLoad2(C->b, ptr(C), slot, "");
    out[i] = LLVMBuildLoad2(C->b, types[i], p, "");
  }
}

bool oxl_cpu_threaded(const oxi_kernel *k) { return k->uses_sync && !oxi_can_loop_threads(k); }

void oxl_cpu_entry_name(const oxi_kernel *k, char *buf, size_t n) {
  snprintf(buf, n, "%s.%s", k->name, oxl_cpu_threaded(k) ? "thread" : "block");
}

void oxl_cg_kernel_cpu(cg_t *C) {
  const oxi_kernel *k = C->k;
  if (k->uses_sync && oxi_can_loop_threads(k)) { /* its threads in loops, not on fibers */
    oxi_module tmp = {.arena = &C->scratch, .filename = C->m->filename};
    C->k = k = oxi_loop_threads(&tmp, k);
  }
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
  if (oxl_cpu_threaded(k)) {
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
  if (k->looped) { /* the body loops over the threads itself */
    /* its shared memory for the executor, <name>.shared: u32 bytes, and u32 bytes more per
       thread of the block (the threads' state and variables) */
    char sname[300];
    snprintf(sname, sizeof sname, "%s.shared", k->name);
    LLVMValueRef g = LLVMAddGlobal(C->mod, LLVMArrayType2(i32t(C), 2), sname);
    LLVMValueRef sizes[2] = {LLVMConstInt(i32t(C), (uint64_t)k->shared_bytes, 0),
                             LLVMConstInt(i32t(C), (uint64_t)k->thread_bytes, 0)};
    LLVMSetInitializer(g, LLVMConstArray2(i32t(C), sizes, 2));
    LLVMSetGlobalConstant(g, 1);
    for (int i = 0; i < 3; i++)
      call_args[1 + i] = LLVMConstInt(i32t(C), 0, 0);
    LLVMBuildCall2(C->b, bty, body, call_args, (unsigned)np + 4, "");
    LLVMBuildRetVoid(C->b);
    return;
  }
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

/* ------------------------------------------- cancellation polls (after -O) */

/* Routes every edge u -> v through a new block that reads the cancel word
 * (`cancel`, loaded once in the entry block) and returns when its cancel bit
 * is set. The read is relaxed (monotonic) and the branch marked unlikely: a
 * load, a test and a not-taken branch per loop iteration. */
static void poll_edge(cg_t *C, LLVMValueRef fn, LLVMBasicBlockRef u, LLVMBasicBlockRef v,
                      LLVMValueRef cancel, LLVMBasicBlockRef *ret_bb) {
  LLVMValueRef term = LLVMGetBasicBlockTerminator(u);
  unsigned ns = LLVMGetNumSuccessors(term);
  bool any = false;
  for (unsigned i = 0; i < ns; i++)
    any |= LLVMGetSuccessor(term, i) == v;
  if (!any) /* an edge already routed (a switch with two cases to v) */
    return;
  if (!*ret_bb) {
    *ret_bb = LLVMAppendBasicBlockInContext(C->ctx, fn, "cancelled");
    LLVMPositionBuilderAtEnd(C->b, *ret_bb);
    LLVMBuildRetVoid(C->b);
  }
  LLVMBasicBlockRef p = LLVMInsertBasicBlockInContext(C->ctx, v, "cancel.poll");
  LLVMPositionBuilderAtEnd(C->b, p);
  LLVMValueRef w = LLVMBuildLoad2(C->b, i64t(C), cancel, "");
  LLVMSetOrdering(w, LLVMAtomicOrderingMonotonic);
  LLVMSetAlignment(w, 8);
  LLVMValueRef bit = LLVMBuildAnd(C->b, w, LLVMConstInt(i64t(C), 1, 0), "");
  LLVMValueRef set = LLVMBuildICmp(C->b, LLVMIntNE, bit, LLVMConstInt(i64t(C), 0, 0), "");
  LLVMValueRef br = LLVMBuildCondBr(C->b, set, *ret_bb, v);
  LLVMValueRef md[3] = {LLVMMDStringInContext(C->ctx, "branch_weights", 14),
                        LLVMConstInt(i32t(C), 1, 0), LLVMConstInt(i32t(C), 1u << 20, 0)};
  LLVMSetMetadata(br, LLVMGetMDKindIDInContext(C->ctx, "prof", 4), LLVMMDNodeInContext(C->ctx, md, 3));
  for (unsigned i = 0; i < ns; i++)
    if (LLVMGetSuccessor(term, i) == v)
      LLVMSetSuccessor(term, i, p);
  /* v's phis now come from p instead of u (one entry: all of u's edges to v
   * became the one edge p -> v). The C API cannot change an incoming block,
   * so each such phi is rebuilt. */
  LLVMValueRef next;
  for (LLVMValueRef phi = LLVMGetFirstInstruction(v); phi && LLVMIsAPHINode(phi); phi = next) {
    next = LLVMGetNextInstruction(phi);
    unsigned n = LLVMCountIncoming(phi);
    bool from_u = false;
    for (unsigned i = 0; i < n; i++)
      from_u |= LLVMGetIncomingBlock(phi, i) == u;
    if (!from_u)
      continue;
    LLVMPositionBuilderBefore(C->b, phi);
    LLVMValueRef np = LLVMBuildPhi(C->b, LLVMTypeOf(phi), "");
    bool added = false;
    for (unsigned i = 0; i < n; i++) {
      LLVMBasicBlockRef from = LLVMGetIncomingBlock(phi, i);
      LLVMValueRef val = LLVMGetIncomingValue(phi, i);
      if (from == u) {
        if (added)
          continue;
        from = p, added = true;
      }
      LLVMAddIncoming(np, &val, &from, 1);
    }
    LLVMReplaceAllUsesWith(phi, np);
    LLVMInstructionEraseFromParent(phi);
  }
}

typedef struct dfs_frame {
  unsigned b, next; /* a block, and the next of its successors to visit */
} dfs_frame;
typedef struct dfs_edge {
  unsigned u, v;
} dfs_edge;

/* Adds a poll on every retreating edge of `fn` (an edge to a block that is on
 * the depth-first search's stack): every cycle of the control-flow graph has
 * one, so no loop can run forever without reading the cancel word, and edges
 * that are no back-edges get none. */
static void add_polls(cg_t *C, LLVMValueRef fn) {
  oxl_cfg g;
  oxl_cfg_build(&g, fn, false);
  unsigned n = g.n;
  LLVMBasicBlockRef *bbs = g.bbs;
  uint8_t *state = oxb_calloc(n, 1); /* 0 unseen, 1 on the stack, 2 done */
  dfs_frame *stack = oxb_malloc(n * sizeof *stack);
  dfs_edge *edges = oxb_malloc(n * sizeof *edges * 2);
  unsigned nedges = 0, cap = 2 * n;
  unsigned sp = 0;
  stack[sp++] = (dfs_frame){0, 0};
  state[0] = 1;
  while (sp) {
    unsigned b = stack[sp - 1].b;
    LLVMValueRef term = LLVMGetBasicBlockTerminator(bbs[b]);
    unsigned ns = term ? LLVMGetNumSuccessors(term) : 0;
    if (stack[sp - 1].next == ns) {
      state[b] = 2;
      sp--;
      continue;
    }
    unsigned v = oxl_cfg_index(&g, LLVMGetSuccessor(term, stack[sp - 1].next++));
    if (state[v] == 0) {
      state[v] = 1;
      stack[sp++] = (dfs_frame){v, 0};
    } else if (state[v] == 1) {
      if (nedges == cap) {
        cap *= 2;
        dfs_edge *e = realloc(edges, cap * sizeof *edges);
        if (!e)
          oxb_oom(cap * sizeof *edges);
        edges = e;
      }
      edges[nedges].u = b, edges[nedges].v = v, nedges++;
    }
  }
  if (nedges) {
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(fn);
    LLVMPositionBuilderBefore(C->b, LLVMGetFirstInstruction(entry));
    C->cpu_ctx = LLVMGetParam(fn, 0);
    LLVMValueRef cancel = field(C, CTX_CANCEL, -1, ptr(C));
    LLVMBasicBlockRef ret_bb = NULL;
    for (unsigned i = 0; i < nedges; i++)
      poll_edge(C, fn, bbs[edges[i].u], bbs[edges[i].v], cancel, &ret_bb);
  }
  oxl_cfg_free(&g);
  free(state);
  free(stack);
  free(edges);
}

void oxl_cpu_finish(cg_t *C) {
  for (int i = 0; i < C->m->kernels.len; i++) {
    char name[300];
    oxl_cpu_entry_name(C->m->kernels.items[i], name, sizeof name);
    LLVMValueRef fn = LLVMGetNamedFunction(C->mod, name);
    assert(fn && !LLVMIsDeclaration(fn));
    add_polls(C, fn);
  }
  /* Threshold 0: LLVM reports the frame of every function that has one
   * (PrologEpilogInserter, "stack frame size (N) exceeds limit (0) in
   * function 'f'"), N being the bytes the prologue reserves: locals, spill
   * slots and the callee-saved registers it pushes, not the return address. */
  for (LLVMValueRef f = LLVMGetFirstFunction(C->mod); f; f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f))
      LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                              LLVMCreateStringAttribute(C->ctx, "warn-stack-size", 15, "0", 1));
}

/* ------------------------------------------------------------ stack sizes */

void oxl_cpu_diagnostic(LLVMDiagnosticInfoRef di, void *cg) {
  cg_t *C = cg;
  char *d = LLVMGetDiagInfoDescription(di);
  static const char size_key[] = "stack frame size (", fn_key[] = "in function '";
  const char *s = strstr(d, size_key), *f = strstr(d, fn_key);
  const char *end = f ? strrchr(f + sizeof fn_key - 1, '\'') : NULL;
  /* (called from inside LLVM: out of memory is noted in C->oom, never unwound) */
  if (s && end) {
    void *p = NULL;
    if (C->nframes == C->cap_frames) {
      int cap = C->cap_frames ? 2 * C->cap_frames : 16;
      if ((p = realloc(C->frames, (size_t)cap * sizeof *C->frames)))
        C->frames = p, C->cap_frames = cap;
    }
    f += sizeof fn_key - 1;
    char *name = C->nframes < C->cap_frames ? strndup(f, (size_t)(end - f)) : NULL;
    if (name) {
      struct oxl_frame *fr = &C->frames[C->nframes++];
      fr->bytes = strtoull(s + sizeof size_key - 1, NULL, 10);
      fr->fn = name;
    } else {
      C->oom = true; /* a frame size lost: the stack table would be wrong */
    }
  } else if (LLVMGetDiagInfoSeverity(di) == LLVMDSError && !C->diag_error) {
    if (!(C->diag_error = strdup(d)))
      C->oom = true;
  }
  LLVMDisposeMessage(d);
}

/* Per frame beyond what LLVM reports: the return address, and alignment. */
#define FRAME_SLACK 32

/* The stack `f` needs: its frame and the deepest chain of calls to functions
 * of the module (the IR has no calls of its own: device functions are
 * inlined, so there is no recursion; the check-failure routine is the callee).
 * Calls into the process (libm, memcpy) and the executor's callbacks are
 * covered by the executor's margin. Sets *bounded false for a variable-sized
 * alloca (generated code has none) or an implausibly deep chain. */
static uint64_t stack_need(cg_t *C, LLVMValueRef f, int depth, bool *bounded) {
  if (depth > 32) {
    *bounded = false;
    return 0;
  }
  size_t len;
  const char *name = LLVMGetValueName2(f, &len);
  uint64_t own = FRAME_SLACK, deepest = 0;
  for (int i = 0; i < C->nframes; i++)
    if (strlen(C->frames[i].fn) == len && memcmp(C->frames[i].fn, name, len) == 0)
      own += C->frames[i].bytes;
  for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b; b = LLVMGetNextBasicBlock(b))
    for (LLVMValueRef in = LLVMGetFirstInstruction(b); in; in = LLVMGetNextInstruction(in)) {
      if (LLVMIsAAllocaInst(in) && !LLVMIsAConstantInt(LLVMGetOperand(in, 0)))
        *bounded = false;
      if (!LLVMIsACallInst(in))
        continue;
      LLVMValueRef g = LLVMGetCalledValue(in);
      if (g && LLVMIsAFunction(g) && !LLVMIsDeclaration(g)) {
        uint64_t n = stack_need(C, g, depth + 1, bounded);
        deepest = n > deepest ? n : deepest;
      }
    }
  return own + deepest;
}

ox_status oxl_cpu_stack_table(cg_t *C, char **obj, size_t *len) {
  oxb_str t = {0};
  uint32_t count = 0;
  for (int i = 0; i < C->m->kernels.len; i++) {
    const oxi_kernel *k = C->m->kernels.items[i];
    char name[300];
    oxl_cpu_entry_name(k, name, sizeof name);
    LLVMValueRef fn = LLVMGetNamedFunction(C->mod, name);
    bool bounded = true;
    uint64_t need = fn ? stack_need(C, fn, 0, &bounded) : 0;
    uint32_t limit = C->opt->cpu_stack_max ? C->opt->cpu_stack_max : OXL_CPU_STACK_MAX;
    if (!fn || !bounded || need > limit) {
      oxb_str_free(&t);
      if (!fn || !bounded)
        return oxb_set_error(OX_ERR_INTERNAL,
                             "%s:%d:%d: kernel '%s': the stack its CPU code needs cannot be bounded",
                             C->m->filename, k->line, k->col, k->name);
      return oxb_set_error(OX_ERR_COMPILE,
                           "%s:%d:%d: kernel '%s' needs %llu KiB of stack per thread on the CPU, "
                           "more than the %u KiB the CPU executor allows; keep fewer values live at "
                           "once (a loop instead of unrolled code, or a shared array)",
                           C->m->filename, k->line, k->col, k->name,
                           (unsigned long long)(need + 1023) / 1024, limit / 1024);
    }
    uint32_t bytes = (uint32_t)need;
    uint16_t n = (uint16_t)strlen(name);
    oxb_str_add(&t, (const char *)&bytes, sizeof bytes);
    oxb_str_add(&t, (const char *)&n, sizeof n);
    oxb_str_add(&t, name, n);
    count++;
  }
  uint32_t tbytes = (uint32_t)t.len;
  oxb_str_add(&t, (const char *)&count, sizeof count);
  oxb_str_add(&t, (const char *)&tbytes, sizeof tbytes);
  oxb_str_add(&t, "OXSTACK1", 8);
  char *p = realloc(*obj, *len + t.len + 1);
  if (!p) {
    oxb_str_free(&t);
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  }
  memcpy(p + *len, t.buf, t.len);
  *len += t.len;
  p[*len] = 0;
  *obj = p;
  oxb_str_free(&t);
  return OX_OK;
}
