/* chain.c - chains: launches and copies recorded now and run later on a
 * stream, in order; on CUDA captured once as a graph and replayed.
 *
 * Recording checks each launch as ox_launch_check does and retains its
 * tensors, so a chain cannot outlive its data. The kernels' module must
 * outlive the chain (modules are not reference-counted). */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

typedef struct step {
  ox_kernel k; /* NULL: a copy */
  ox_launch_config cfg;
  ox_arg args[OXA_MAX_PARAMS];
  oxr_tensor *tens[OXA_MAX_PARAMS]; /* the arguments' tensors, retained */
  int nargs;
  oxr_tensor *dst, *src; /* a copy's, retained */
} step;

typedef struct oxa_chain {
  ox_chain handle;
  ox_device dev;
  step *steps;
  int n, cap;
  CUgraph graph;
  CUgraphExec exec;
  oxr_stream *captured_on;
} oxa_chain;

/* The chain behind handle `h`, or NULL with the last error set. */
static oxa_chain *chain_get(const char *fn, ox_chain h) {
  if (!h) {
    oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: chain is NULL", fn);
    return NULL;
  }
  oxa_chain *c = oxb_handle_get(OXB_H_CHAIN, (uint64_t)(uintptr_t)h);
  if (!c)
    oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                  "%s: the chain handle is not live (the chain was destroyed, or it is not a "
                  "chain handle)",
                  fn);
  return c;
}

ox_status ox_chain_create(ox_device dev, ox_chain *out) {
  if (!out)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_chain_create: out is NULL");
  *out = NULL;
  if (!oxr_device_check(__func__, dev))
    return ox_last_status();
  oxa_chain *c = calloc(1, sizeof *c);
  uint64_t h = c ? oxb_handle_new(OXB_H_CHAIN, c) : 0;
  if (!h) {
    free(c);
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  }
  c->handle = (ox_chain)(uintptr_t)h;
  c->dev = dev;
  *out = c->handle;
  return OX_OK;
}

static void drop_graph(oxa_chain *c) {
  if (c->exec)
    oxr_cu.cuGraphExecDestroy(c->exec);
  if (c->graph)
    oxr_cu.cuGraphDestroy(c->graph);
  c->exec = NULL;
  c->graph = NULL;
  c->captured_on = NULL;
}

void ox_chain_destroy(ox_chain h) {
  if (!h)
    return;
  oxa_chain *c = chain_get(__func__, h);
  if (!c)
    return;
  oxb_handle_free((uint64_t)(uintptr_t)h);
  if (c->graph && oxr_cuda_make_current(c->dev) == OX_OK)
    drop_graph(c);
  for (int i = 0; i < c->n; i++) {
    step *s = &c->steps[i];
    for (int a = 0; a < s->nargs; a++)
      oxr_tensor_release(s->tens[a]);
    oxr_tensor_release(s->dst);
    oxr_tensor_release(s->src);
  }
  free(c->steps);
  free(c);
}

static step *new_step(oxa_chain *c) {
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 8;
    step *ns = realloc(c->steps, sizeof *ns * (size_t)cap);
    if (!ns)
      return NULL;
    c->steps = ns;
    c->cap = cap;
  }
  step *s = &c->steps[c->n];
  memset(s, 0, sizeof *s);
  return s;
}

ox_status ox_chain_launch(ox_chain h, ox_kernel kh, const ox_launch_config *cfg, const ox_arg *args,
                          int nargs) {
  oxa_chain *c = chain_get(__func__, h);
  if (!c)
    return ox_last_status();
  oxa_kernel *k = oxa_kernel_get(__func__, kh);
  if (!k)
    return ox_last_status();
  if (k->mod->dev->type != c->dev->type) /* (its code is loaded on the chain's device if need be) */
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: the kernel's module was compiled for %s, the chain is on %s",
                         __func__, k->mod->dev->label, c->dev->label);
  oxr_tensor *tens[OXA_MAX_PARAMS];
  ox_status st = oxa_arg_tensors(k, args, nargs, tens);
  if (!st)
    st = oxa_launch(k, c->dev->default_stream, cfg, args, nargs, tens, false);
  if (st)
    return st;
  step *sp = new_step(c);
  if (!sp)
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  sp->k = kh;
  if (cfg) /* tile kernels take their grid from the partitions: cfg may be NULL */
    sp->cfg = *cfg;
  sp->nargs = nargs;
  for (int i = 0; i < nargs; i++) {
    sp->args[i] = args[i];
    sp->tens[i] = tens[i];
    if (tens[i])
      oxr_tensor_retain(tens[i]);
  }
  c->n++;
  drop_graph(c); /* a captured graph no longer matches */
  return OX_OK;
}

ox_status ox_chain_copy(ox_chain h, ox_tensor dst_h, ox_tensor src_h) {
  oxa_chain *c = chain_get(__func__, h);
  if (!c)
    return ox_last_status();
  oxr_tensor *dst = oxr_tensor_get("ox_chain_copy (dst)", dst_h);
  oxr_tensor *src = dst ? oxr_tensor_get("ox_chain_copy (src)", src_h) : NULL;
  if (!src)
    return ox_last_status();
  step *sp = new_step(c);
  if (!sp)
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  oxr_tensor_retain(dst);
  oxr_tensor_retain(src);
  sp->dst = dst;
  sp->src = src;
  c->n++;
  drop_graph(c);
  return OX_OK;
}

static ox_status run_steps(oxa_chain *c, oxr_stream *s) {
  for (int i = 0; i < c->n; i++) {
    step *sp = &c->steps[i];
    ox_status st;
    if (sp->k) {
      /* the module must outlive the chain: a destroyed one ends the kernel handle */
      oxa_kernel *k = oxa_kernel_get("ox_chain_run", sp->k);
      st = k ? oxa_launch(k, s, k->fn && k->fn->is_tile ? NULL : &sp->cfg, sp->args, sp->nargs, sp->tens, true)
             : ox_last_status();
    } else {
      st = ox_tensor_copy(sp->dst->handle, sp->src->handle, s->handle);
    }
    if (st)
      return oxb_set_error(st, "chain step %d: %s", i + 1, ox_last_error());
  }
  return OX_OK;
}

ox_status ox_chain_run(ox_chain h, ox_stream sh) {
  oxa_chain *c = chain_get(__func__, h);
  oxr_stream *s;
  if (!c)
    return ox_last_status();
  ox_status st = oxr_resolve_stream("ox_chain_run", c->dev, sh, &s);
  if (st)
    return st;
  if (!c->exec)
    return run_steps(c, s);
  if (s != c->captured_on)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         "ox_chain_run: a captured chain replays on the stream it was captured on "
                         "(its kernels report errors through that stream)");
  /* the graph's work is ordered after other streams' pending work on its
   * tensors; its kernels' code must still be loaded (a destroyed module's
   * kernel handle is no longer live) */
  for (int i = 0; i < c->n; i++) {
    step *sp = &c->steps[i];
    if (sp->k && !oxa_kernel_get("ox_chain_run", sp->k))
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "chain step %d: %s", i + 1, ox_last_error());
    for (int a = 0; a < sp->nargs; a++)
      if (sp->tens[a] && (st = oxr_tensor_use(sp->tens[a], s, true)))
        return st;
    if (!sp->k && ((st = oxr_tensor_use(sp->src, s, false)) || (st = oxr_tensor_use(sp->dst, s, true))))
      return st;
  }
  if ((st = oxr_cuda_make_current(c->dev)))
    return st;
  CUresult r = oxr_cu.cuGraphLaunch(c->exec, s->cu);
  return r ? oxr_cuda_error(r, "cuGraphLaunch") : OX_OK;
}

ox_status ox_chain_capture(ox_chain h, ox_stream sh) {
  oxa_chain *c = chain_get(__func__, h);
  oxr_stream *s;
  if (!c)
    return ox_last_status();
  ox_status st = oxr_resolve_stream("ox_chain_capture", c->dev, sh, &s);
  if (st || c->dev->type != OX_DEVICE_CUDA)
    return st; /* the CPU runs chains step by step */
  if (!oxr_cu.cuStreamBeginCapture || !oxr_cu.cuGraphInstantiateWithFlags)
    return oxb_set_error(OX_ERR_UNSUPPORTED, "ox_chain_capture: the CUDA driver has no graph support");
  if (!s->cu || s->borrowed)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         "ox_chain_capture: capture needs a stream made by ox_stream_create (not a "
                         "default or borrowed stream)");
  if ((st = oxr_cuda_make_current(c->dev)))
    return st;
  drop_graph(c);
  CUresult r = oxr_cu.cuStreamBeginCapture(s->cu, CU_STREAM_CAPTURE_MODE_RELAXED);
  if (r)
    return oxr_cuda_error(r, "cuStreamBeginCapture");
  s->capturing = 1;
  st = run_steps(c, s);
  s->capturing = 0;
  CUgraph g = NULL;
  r = oxr_cu.cuStreamEndCapture(s->cu, &g);
  if (st) {
    if (g)
      oxr_cu.cuGraphDestroy(g);
    return st;
  }
  if (r)
    return oxr_cuda_error(r, "cuStreamEndCapture");
  CUgraphExec e = NULL;
  r = oxr_cu.cuGraphInstantiateWithFlags(&e, g, 0);
  if (r) {
    oxr_cu.cuGraphDestroy(g);
    return oxr_cuda_error(r, "cuGraphInstantiateWithFlags");
  }
  c->graph = g;
  c->exec = e;
  c->captured_on = s;
  return OX_OK;
}
