/* cfg.c - an LLVM function's control-flow graph for the passes that run after
 * optimization (target_cpu.c's cancellation polls, target_cuda.c's grid wait):
 * its blocks in layout order, a block's index by binary search over their
 * addresses, and each block's predecessors. */
#include <assert.h>
#include <stdlib.h>

#include "backend/codegen.h"

static int key_cmp(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)((const oxl_bb_key *)a)->bb, y = (uintptr_t)((const oxl_bb_key *)b)->bb;
  return x < y ? -1 : x > y;
}

void oxl_cfg_build(oxl_cfg *g, LLVMValueRef fn, bool preds) {
  unsigned n = LLVMCountBasicBlocks(fn);
  g->n = n;
  g->bbs = oxb_malloc((n ? n : 1) * sizeof *g->bbs);
  g->keys = oxb_malloc((n ? n : 1) * sizeof *g->keys);
  LLVMGetBasicBlocks(fn, g->bbs);
  for (unsigned i = 0; i < n; i++)
    g->keys[i] = (oxl_bb_key){g->bbs[i], i};
  qsort(g->keys, n, sizeof *g->keys, key_cmp);
  g->preds = NULL;
  g->npred = NULL;
  g->pred_mem = NULL;
  if (!preds)
    return;
  /* two passes: count, then fill one array cut into the blocks' lists */
  g->npred = oxb_calloc(n ? n : 1, sizeof *g->npred);
  unsigned edges = 0;
  for (unsigned i = 0; i < n; i++) {
    LLVMValueRef term = LLVMGetBasicBlockTerminator(g->bbs[i]);
    for (unsigned s = 0; term && s < LLVMGetNumSuccessors(term); s++, edges++)
      g->npred[oxl_cfg_index(g, LLVMGetSuccessor(term, s))]++;
  }
  g->preds = oxb_malloc((n ? n : 1) * sizeof *g->preds);
  unsigned *all = g->pred_mem = oxb_malloc((edges ? edges : 1) * sizeof *all), at = 0;
  for (unsigned i = 0; i < n; i++) {
    g->preds[i] = all + at;
    at += g->npred[i];
    g->npred[i] = 0;
  }
  for (unsigned i = 0; i < n; i++) {
    LLVMValueRef term = LLVMGetBasicBlockTerminator(g->bbs[i]);
    for (unsigned s = 0; term && s < LLVMGetNumSuccessors(term); s++) {
      unsigned j = oxl_cfg_index(g, LLVMGetSuccessor(term, s));
      g->preds[j][g->npred[j]++] = i;
    }
  }
}

unsigned oxl_cfg_index(const oxl_cfg *g, LLVMBasicBlockRef bb) {
  oxl_bb_key k = {bb, 0};
  const oxl_bb_key *hit = bsearch(&k, g->keys, g->n, sizeof k, key_cmp);
  assert(hit);
  return hit->index;
}

void oxl_cfg_free(oxl_cfg *g) {
  free(g->bbs);
  free(g->keys);
  free(g->pred_mem);
  free(g->preds);
  free(g->npred);
}
