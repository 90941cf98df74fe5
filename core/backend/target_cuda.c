/* target_cuda.c - the CUDA side of code generation: PTX special registers,
 * barriers and warp intrinsics, shared memory in address space 3, the
 * kernel entry with its hidden error-record and tag parameters, and, after
 * optimization, the shape ptxas needs to keep wgmma groups in flight. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/codegen.h"

#define PTX_KERNEL_CC 71 /* llvm::CallingConv::PTX_Kernel */

static LLVMTypeRef i32t(cg_t *C) { return LLVMInt32TypeInContext(C->ctx); }

static LLVMValueRef sreg(cg_t *C, int which) {
  if (which == OXI_SREG_ON_CPU)
    return LLVMConstInt(i32t(C), 0, 0);
  static const char *const names[] = {
      "tid.x",   "tid.y",   "tid.z",   "ctaid.x",  "ctaid.y",  "ctaid.z", "ntid.x",
      "ntid.y",  "ntid.z",  "nctaid.x", "nctaid.y", "nctaid.z", "laneid"};
  char name[64];
  snprintf(name, sizeof name, "llvm.nvvm.read.ptx.sreg.%s", names[which]);
  return oxl_cg_call(C, name, i32t(C), NULL, 0);
}

static void barrier(cg_t *C) { oxl_cg_call(C, "llvm.nvvm.barrier0", LLVMVoidTypeInContext(C->ctx), NULL, 0); }

/* shfl.sync on 32 bits; 64-bit values move as two halves. The clamp operand
 * is 0x1f for idx/down/xor and 0 for up (a full 32-lane warp). */
static LLVMValueRef shfl32(cg_t *C, int mode, LLVMValueRef v32, LLVMValueRef arg) {
  static const char *const names[] = {"llvm.nvvm.shfl.sync.idx.i32", "llvm.nvvm.shfl.sync.up.i32",
                                      "llvm.nvvm.shfl.sync.down.i32", "llvm.nvvm.shfl.sync.bfly.i32"};
  LLVMValueRef args[4] = {LLVMConstInt(i32t(C), 0xffffffffu, 0), v32, arg,
                          LLVMConstInt(i32t(C), mode == 1 ? 0 : 0x1f, 0)};
  return oxl_cg_call(C, names[mode], i32t(C), args, 4);
}

static LLVMValueRef shfl(cg_t *C, int mode, LLVMValueRef v, LLVMValueRef arg) {
  LLVMTypeRef t = LLVMTypeOf(v);
  LLVMTypeRef i64 = LLVMInt64TypeInContext(C->ctx);
  unsigned bits = LLVMGetTypeKind(t) == LLVMIntegerTypeKind ? LLVMGetIntTypeWidth(t)
                  : LLVMGetTypeKind(t) == LLVMDoubleTypeKind ? 64 : 32;
  if (bits == 32) {
    LLVMValueRef x = LLVMBuildBitCast(C->b, v, i32t(C), "");
    return LLVMBuildBitCast(C->b, shfl32(C, mode, x, arg), t, "");
  }
  LLVMValueRef x = LLVMBuildBitCast(C->b, v, i64, "");
  LLVMValueRef lo = LLVMBuildTrunc(C->b, x, i32t(C), "");
  LLVMValueRef hi = LLVMBuildTrunc(C->b, LLVMBuildLShr(C->b, x, LLVMConstInt(i64, 32, 0), ""), i32t(C), "");
  lo = LLVMBuildZExt(C->b, shfl32(C, mode, lo, arg), i64, "");
  hi = LLVMBuildZExt(C->b, shfl32(C, mode, hi, arg), i64, "");
  LLVMValueRef r = LLVMBuildOr(C->b, lo, LLVMBuildShl(C->b, hi, LLVMConstInt(i64, 32, 0), ""), "");
  return LLVMBuildBitCast(C->b, r, t, "");
}

static LLVMValueRef vote(cg_t *C, int mode, LLVMValueRef pred) {
  LLVMValueRef args[2] = {LLVMConstInt(i32t(C), 0xffffffffu, 0), pred};
  if (mode == 2)
    return oxl_cg_call(C, "llvm.nvvm.vote.ballot.sync", i32t(C), args, 2);
  return oxl_cg_call(C, mode == 0 ? "llvm.nvvm.vote.all.sync" : "llvm.nvvm.vote.any.sync",
                     LLVMInt1TypeInContext(C->ctx), args, 2);
}

static LLVMValueRef shared_ptr(cg_t *C, int64_t offset) {
  LLVMValueRef o = LLVMConstInt(LLVMInt64TypeInContext(C->ctx), (uint64_t)offset, 0);
  return LLVMBuildInBoundsGEP2(C->b, LLVMInt8TypeInContext(C->ctx), C->gpu_shared, &o, 1, "");
}

static LLVMValueRef err_ptr(cg_t *C) { return C->gpu_err; }
static LLVMValueRef tag(cg_t *C) { return C->gpu_tag; }

static const cg_hooks cuda_hooks = {sreg, barrier, shfl, vote, shared_ptr, err_ptr, tag, NULL};

static void annotate(cg_t *C, LLVMValueRef fn, const char *key, int value) {
  LLVMValueRef md[3] = {fn, LLVMMDStringInContext(C->ctx, key, (unsigned)strlen(key)),
                        LLVMConstInt(i32t(C), (uint64_t)value, 0)};
  LLVMAddNamedMetadataOperand(C->mod, "nvvm.annotations", LLVMMDNodeInContext(C->ctx, md, 3));
}

/* A PTX statement without operands that stays where it is ("memory"). */
static void ptx_stmt(cg_t *C, const char *text) {
  LLVMTypeRef fty = LLVMFunctionType(LLVMVoidTypeInContext(C->ctx), NULL, 0, 0);
  LLVMValueRef asmv = LLVMGetInlineAsm(fty, (char *)text, strlen(text), "~{memory}", 9, 1, 0,
                                       LLVMInlineAsmDialectATT, 0);
  LLVMBuildCall2(C->b, fty, asmv, NULL, 0, "");
}

/* The kernel entry: user parameters flattened, then the error record and the tag. */
void oxl_cg_kernel_cuda(cg_t *C) {
  const oxi_kernel *k = C->k;
  C->hooks = &cuda_hooks;
  LLVMTypeRef params[OXI_MAX_PARAM_VALUES];
  int n = oxl_cg_param_types(C, params, 1);
  params[n++] = LLVMPointerTypeInContext(C->ctx, 1);
  params[n++] = i32t(C);
  LLVMTypeRef fty = LLVMFunctionType(LLVMVoidTypeInContext(C->ctx), params, (unsigned)n, 0);
  LLVMValueRef fn = LLVMAddFunction(C->mod, k->name, fty);
  LLVMSetFunctionCallConv(fn, PTX_KERNEL_CC);
  oxl_cg_param_attrs(C, fn, 0);
  annotate(C, fn, "kernel", 1);
  for (int i = 0, j = 0; i < k->params.len; j += oxi_param_width(k->params.items[i]), i++)
    if (((const oxi_param *)k->params.items[i])->kind == OXI_P_TMAP) {
      /* __grid_constant__: the tensor map is read in place in the param space,
         by its generic address (cvta.param), not copied to local memory */
      LLVMValueRef idx = LLVMConstInt(i32t(C), (uint64_t)j + 1, 0);
      LLVMValueRef md[3] = {fn, LLVMMDStringInContext(C->ctx, "grid_constant", 13),
                            LLVMMDNodeInContext(C->ctx, &idx, 1)};
      LLVMAddNamedMetadataOperand(C->mod, "nvvm.annotations", LLVMMDNodeInContext(C->ctx, md, 3));
    }
  if (k->block[0]) {
    annotate(C, fn, "reqntidx", k->block[0]);
    annotate(C, fn, "reqntidy", k->block[1]);
    annotate(C, fn, "reqntidz", k->block[2]);
  }
  if (k->min_blocks)
    annotate(C, fn, "minctasm", k->min_blocks);
  C->fn = fn;
  LLVMValueRef ps[OXI_MAX_PARAM_VALUES];
  for (int i = 0; i < n; i++)
    ps[i] = LLVMGetParam(fn, (unsigned)i);
  C->gpu_err = ps[n - 2];
  C->gpu_tag = ps[n - 1];
  C->gpu_shared = NULL;
  if (k->shared_bytes > 0) {
    char name[300];
    snprintf(name, sizeof name, "__oxide_shared_%s", k->name);
    /* more than the static limit: an extern array, sized by the launch */
    bool dynamic = k->shared_bytes > OXI_STATIC_SHARED_MAX;
    LLVMTypeRef at = LLVMArrayType2(LLVMInt8TypeInContext(C->ctx), dynamic ? 0 : (uint64_t)k->shared_bytes);
    LLVMValueRef g = LLVMAddGlobalInAddressSpace(C->mod, at, name, 3);
    if (dynamic) {
      LLVMSetLinkage(g, LLVMExternalLinkage);
    } else {
      LLVMSetInitializer(g, LLVMGetUndef(at));
      LLVMSetLinkage(g, LLVMInternalLinkage);
    }
    unsigned align = 16; /* the most any array's offset needs */
    for (int i = 0; i < k->shared.len; i++) {
      const oxi_shared *sh = k->shared.items[i];
      if (sh->align > align)
        align = (unsigned)sh->align;
    }
    LLVMSetAlignment(g, align);
    C->gpu_shared = g;
  }
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(C->ctx, fn, "entry");
  LLVMPositionBuilderAtEnd(C->b, entry);
  if (C->opt->sm >= 90) {
    /* Programmatic dependent launch (the runtime launches code for sm_90 and newer with
       programmatic stream serialization, oxr_cuda_launch): this grid may start while the
       kernel before it on the stream finishes, so before touching memory it waits for that
       grid to complete and its writes to be visible (a no-op when launched without the
       attribute). Then it lets the next kernel launch: its blocks take the SMs this grid's
       tail leaves idle and wait there, so the launch's latency is hidden. */
    ptx_stmt(C, "griddepcontrol.wait;");
    ptx_stmt(C, "griddepcontrol.launch_dependents;");
  }
  oxl_cg_map_params(C, ps);
  oxl_cg_body(C);
}

/* ---- after optimization */

/* Whether `w` is a plain wait for wgmma groups (OXI_WGMMA_SYNC sub 2) that
 * passes accumulator registers through. */
static bool is_wgmma_wait(LLVMValueRef w) {
  if (!w || !LLVMIsACallInst(w) || !LLVMIsAInlineAsm(LLVMGetCalledValue(w)) || !LLVMGetNumArgOperands(w))
    return false;
  size_t n;
  const char *s = LLVMGetInlineAsmAsmString(LLVMGetCalledValue(w), &n);
  static const char wait[] = "wgmma.wait_group.sync.aligned";
  return n >= sizeof wait - 1 && !strncmp(s, wait, sizeof wait - 1);
}

/* The index of `pred` among the incoming blocks of `phi`; -1 if it is not
 * one, or is one twice (two edges from one block). */
static int incoming_index(LLVMValueRef phi, LLVMBasicBlockRef pred) {
  int found = -1;
  for (unsigned i = 0; i < LLVMCountIncoming(phi); i++)
    if (LLVMGetIncomingBlock(phi, i) == pred) {
      if (found >= 0)
        return -1;
      found = (int)i;
    }
  return found;
}

/* Block `bb` starts with phis and then the wait `w`, whose operands are all
 * phis of bb: each incoming edge gets a block of its own with a copy of the
 * wait on the values of that edge, and bb's phis take the copies' results. */
static void split_wait(cg_t *C, LLVMBasicBlockRef bb, LLVMValueRef w) {
  unsigned na = (unsigned)LLVMGetNumArgOperands(w);
  LLVMValueRef phi0 = LLVMGetFirstInstruction(bb);
  unsigned np = LLVMCountIncoming(phi0);
  for (unsigned a = 0; a < na; a++) {
    LLVMValueRef x = LLVMGetOperand(w, a);
    if (!LLVMIsAPHINode(x) || LLVMGetInstructionParent(x) != bb || LLVMCountIncoming(x) != np)
      return;
  }
  for (LLVMValueRef p = phi0; LLVMIsAPHINode(p); p = LLVMGetNextInstruction(p))
    for (unsigned i = 0; i < np; i++)
      if (incoming_index(p, LLVMGetIncomingBlock(phi0, i)) < 0)
        return;
  LLVMBasicBlockRef *edge = oxb_malloc(sizeof *edge * np), *pred = oxb_malloc(sizeof *pred * np);
  LLVMValueRef *waited = oxb_malloc(sizeof *waited * np), *args = oxb_malloc(sizeof *args * na);
  LLVMTypeRef fty = LLVMGetCalledFunctionType(w);
  for (unsigned i = 0; i < np; i++) {
    pred[i] = LLVMGetIncomingBlock(phi0, i);
    edge[i] = LLVMInsertBasicBlockInContext(C->ctx, bb, "waited");
    LLVMPositionBuilderAtEnd(C->b, edge[i]);
    for (unsigned a = 0; a < na; a++) {
      LLVMValueRef x = LLVMGetOperand(w, a);
      args[a] = LLVMGetIncomingValue(x, (unsigned)incoming_index(x, pred[i]));
    }
    waited[i] = LLVMBuildCall2(C->b, fty, LLVMGetCalledValue(w), args, na, "");
    LLVMValueRef term = LLVMGetBasicBlockTerminator(pred[i]);
    for (unsigned s = 0; s < LLVMGetNumSuccessors(term); s++)
      if (LLVMGetSuccessor(term, s) == bb)
        LLVMSetSuccessor(term, s, edge[i]);
  }
  /* new phis over the edge blocks: a wait operand's from its copy's result */
  LLVMValueRef p = phi0;
  while (LLVMIsAPHINode(p)) {
    LLVMValueRef next = LLVMGetNextInstruction(p);
    int arg = -1;
    for (unsigned a = 0; a < na && arg < 0; a++)
      if (LLVMGetOperand(w, a) == p)
        arg = (int)a;
    LLVMValueRef *vals = oxb_malloc(sizeof *vals * np);
    for (unsigned i = 0; i < np; i++) {
      if (arg >= 0) {
        LLVMPositionBuilderAtEnd(C->b, edge[i]); /* no terminator yet */
        vals[i] = na == 1 ? waited[i] : LLVMBuildExtractValue(C->b, waited[i], (unsigned)arg, "");
      } else {
        vals[i] = LLVMGetIncomingValue(p, (unsigned)incoming_index(p, pred[i]));
      }
    }
    LLVMPositionBuilderBefore(C->b, phi0);
    LLVMValueRef q = LLVMBuildPhi(C->b, LLVMTypeOf(p), "");
    LLVMAddIncoming(q, vals, edge, np);
    LLVMReplaceAllUsesWith(p, q);
    if (p == phi0)
      phi0 = q;
    LLVMInstructionEraseFromParent(p);
    free(vals);
    p = next;
  }
  for (unsigned i = 0; i < np; i++) {
    LLVMPositionBuilderAtEnd(C->b, edge[i]);
    LLVMBuildBr(C->b, bb);
  }
  free(edge);
  free(pred);
  free(waited);
  free(args);
}

/* ---- the grid dependency wait after a kernel's prefetches */

/* The text of inline-asm call `in`, or NULL (n: its length). */
static const char *asm_text(LLVMValueRef in, size_t *n) {
  if (!LLVMIsACallInst(in) || !LLVMIsAInlineAsm(LLVMGetCalledValue(in)))
    return NULL;
  return LLVMGetInlineAsmAsmString(LLVMGetCalledValue(in), n);
}

static bool starts(const char *s, size_t n, const char *prefix) {
  size_t p = strlen(prefix);
  return s && n >= p && !strncmp(s, prefix, p);
}

/* Whether instruction `in` may touch global memory (or leave the kernel) and
 * so must follow griddepcontrol.wait: the memory the grid before writes is
 * only visible after it. Shared, local and parameter memory, arithmetic,
 * special registers, block barriers and L2 prefetches (hints, which read
 * nothing into the kernel) need not. Unknown calls and asm count as touching. */
static bool touches_global(LLVMValueRef in) {
  LLVMOpcode op = LLVMGetInstructionOpcode(in);
  if (op == LLVMLoad || op == LLVMStore || op == LLVMAtomicRMW || op == LLVMAtomicCmpXchg) {
    LLVMValueRef ptr = LLVMGetOperand(in, op == LLVMStore ? 1 : 0);
    unsigned as = LLVMGetPointerAddressSpace(LLVMTypeOf(ptr));
    return as != 3 && as != 4 && as != 5 && as != 101;
  }
  if (op == LLVMRet || op == LLVMFence)
    return true;
  if (op != LLVMCall)
    return false;
  size_t n;
  const char *text = asm_text(in, &n);
  if (text)
    return !starts(text, n, "prefetch.") && !starts(text, n, "griddepcontrol.") && !starts(text, n, "mbarrier.init") &&
           !starts(text, n, "fence.mbarrier_init") && !starts(text, n, "setmaxnreg");
  LLVMValueRef f = LLVMGetCalledValue(in);
  size_t fl = 0;
  const char *name = LLVMIsAFunction(f) ? LLVMGetValueName2(f, &fl) : NULL;
  static const char *const pure[] = {"llvm.nvvm.read.ptx.sreg.", "llvm.nvvm.barrier", "llvm.assume", "llvm.fma",
                                     "llvm.umin", "llvm.umax", "llvm.smin", "llvm.smax", "llvm.ctlz", "llvm.cttz",
                                     "llvm.abs", "llvm.nvvm.mul.hi", "llvm.lifetime."};
  for (size_t i = 0; name && i < sizeof pure / sizeof *pure; i++)
    if (starts(name, fl, pure[i]))
      return false;
  return true;
}

/* Moves kernel fn's griddepcontrol.wait (at its entry, oxl_cg_kernel_cuda)
 * down past its L2 prefetches, when it has any: to the deepest block that
 * dominates every instruction touching global memory and every return, out
 * of any loop, before the first such instruction there. With programmatic
 * dependent launch the prefetches of weights (which the kernel before does
 * not write) then run while that kernel finishes. Every path out of the
 * kernel still passes the wait. */
static void place_grid_wait(cg_t *C, LLVMValueRef fn) {
  LLVMBasicBlockRef entry = LLVMGetFirstBasicBlock(fn);
  if (!entry)
    return;
  LLVMValueRef wait = NULL;
  for (LLVMValueRef in = LLVMGetFirstInstruction(entry); in && !wait; in = LLVMGetNextInstruction(in)) {
    size_t n;
    if (starts(asm_text(in, &n), n, "griddepcontrol.wait"))
      wait = in;
  }
  bool prefetches = false;
  for (LLVMBasicBlockRef bb = entry; wait && bb && !prefetches; bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in && !prefetches; in = LLVMGetNextInstruction(in)) {
      size_t n;
      prefetches = starts(asm_text(in, &n), n, "prefetch.");
    }
  if (!prefetches)
    return;
  oxl_cfg g;
  oxl_cfg_build(&g, fn, true);
  int nb = (int)g.n, words = (nb + 63) / 64;
  /* dominators: dom[b] a bit set over blocks, by iteration to the fixed point (in layout
     order, which LLVM keeps close to a reverse postorder) */
  uint64_t *dom = oxb_malloc(sizeof *dom * (size_t)nb * (size_t)words), *t = oxb_malloc(sizeof *t * (size_t)words);
#define DOMINATES(a, b) (dom[(size_t)(b) * words + (size_t)(a) / 64] >> ((a) % 64) & 1)
  for (int i = 0; i < nb; i++)
    for (int w = 0; w < words; w++)
      dom[(size_t)i * words + w] = i ? ~(uint64_t)0 : 0;
  dom[0] = 1;
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 1; i < nb; i++) {
      for (int w = 0; w < words; w++)
        t[w] = g.npred[i] ? ~(uint64_t)0 : 0;
      for (unsigned p = 0; p < g.npred[i]; p++)
        for (int w = 0; w < words; w++)
          t[w] &= dom[(size_t)g.preds[i][p] * words + w];
      t[i / 64] |= (uint64_t)1 << (i % 64);
      for (int w = 0; w < words; w++)
        if (t[w] != dom[(size_t)i * words + w]) {
          dom[(size_t)i * words + w] = t[w];
          changed = true;
        }
    }
  }
  /* the blocks that dominate every touching block; the deepest of them has the most dominators */
  for (int w = 0; w < words; w++)
    t[w] = ~(uint64_t)0;
  for (int i = 0; i < nb; i++) {
    bool touching = false;
    for (LLVMValueRef in = LLVMGetFirstInstruction(g.bbs[i]); in && !touching; in = LLVMGetNextInstruction(in))
      touching = in != wait && touches_global(in);
    for (int w = 0; touching && w < words; w++)
      t[w] &= dom[(size_t)i * words + w];
  }
  int best = 0, best_n = -1;
  for (int i = 0; i < nb; i++) {
    if (!(t[i / 64] >> (i % 64) & 1))
      continue;
    /* out of loops: a block between a loop's header j and a back edge p -> j (j dominates
       p) that it dominates is in that loop */
    bool in_loop = false;
    for (int j = 0; j < nb && !in_loop; j++)
      for (unsigned p = 0; p < g.npred[j] && !in_loop; p++)
        in_loop = DOMINATES(j, g.preds[j][p]) && DOMINATES(j, i) && DOMINATES(i, g.preds[j][p]);
    int count = 0;
    for (int w = 0; w < words; w++)
      count += __builtin_popcountll(dom[(size_t)i * words + w]);
    if (!in_loop && count > best_n) {
      best = i;
      best_n = count;
    }
  }
#undef DOMINATES
  LLVMValueRef at = NULL;
  for (LLVMValueRef in = LLVMGetFirstInstruction(g.bbs[best]); in && !at; in = LLVMGetNextInstruction(in))
    if (in != wait && (touches_global(in) || in == LLVMGetBasicBlockTerminator(g.bbs[best])))
      at = in;
  if (at && at != LLVMGetNextInstruction(wait)) {
    LLVMInstructionRemoveFromParent(wait);
    LLVMPositionBuilderBefore(C->b, at);
    LLVMInsertIntoBuilder(C->b, wait);
  }
  oxl_cfg_free(&g);
  free(dom);
  free(t);
}

/* ptxas serializes every wgmma of a kernel (its info C7514: each HGMMA then
 * waits for the one before) when a wait that retires wgmma groups follows a
 * join of a path with groups pending and one without: a K loop's exit, which
 * LLVM's loop rotation joins with the path that skips the loop. Giving each
 * incoming edge its own copy of the wait keeps the groups of the loop's
 * path pending across its iterations (seen with ptxas -v and in the SASS). */
void oxl_cuda_finish(cg_t *C) {
  for (LLVMValueRef fn = LLVMGetFirstFunction(C->mod); fn; fn = LLVMGetNextFunction(fn))
    place_grid_wait(C, fn);
  for (LLVMValueRef fn = LLVMGetFirstFunction(C->mod); fn; fn = LLVMGetNextFunction(fn))
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
      LLVMValueRef w = LLVMGetFirstInstruction(bb);
      if (!w || !LLVMIsAPHINode(w))
        continue;
      while (LLVMIsAPHINode(w))
        w = LLVMGetNextInstruction(w);
      if (is_wgmma_wait(w))
        split_wait(C, bb, w);
    }
}
