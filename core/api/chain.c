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
  int nargs;
  ox_tensor dst, src;
} step;

struct ox_chain_s {
  ox_device dev;
  step *steps;
  int n, cap;
  CUgraph graph;
  CUgraphExec exec;
  ox_stream captured_on;
};

ox_status ox_chain_create(ox_device dev, ox_chain *out) {
  if (!out)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_chain_create: out is NULL");
  *out = NULL;
  if (!dev)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_chain_create: device is NULL");
  ox_chain c = calloc(1, sizeof *c);
  if (!c)
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  c->dev = dev;
  *out = c;
  return OX_OK;
}

static void drop_graph(ox_chain c) {
  if (c->exec)
    oxr_cu.cuGraphExecDestroy(c->exec);
  if (c->graph)
    oxr_cu.cuGraphDestroy(c->graph);
  c->exec = NULL;
  c->graph = NULL;
  c->captured_on = NULL;
}

void ox_chain_destroy(ox_chain c) {
  if (!c)
    return;
  if (c->graph && oxr_cuda_make_current(c->dev) == OX_OK)
    drop_graph(c);
  for (int i = 0; i < c->n; i++) {
    step *s = &c->steps[i];
    for (int a = 0; a < s->nargs; a++)
      if (s->args[a].kind == OX_ARG_TENSOR)
        ox_tensor_release(s->args[a].v.tensor);
    ox_tensor_release(s->dst);
    ox_tensor_release(s->src);
  }
  free(c->steps);
  free(c);
}

static step *new_step(ox_chain c) {
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

ox_status ox_chain_launch(ox_chain c, ox_kernel k, const ox_launch_config *cfg, const ox_arg *args,
                          int nargs) {
  if (!c)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_chain_launch: chain is NULL");
  ox_stream s;
  ox_status st = ox_device_stream(c->dev, &s);
  if (!st)
    st = ox_launch_check(k, s, cfg, args, nargs);
  if (st)
    return st;
  step *sp = new_step(c);
  if (!sp)
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  sp->k = k;
  if (cfg) /* tile kernels take their grid from the partitions: cfg may be NULL */
    sp->cfg = *cfg;
  sp->nargs = nargs;
  for (int i = 0; i < nargs; i++) {
    sp->args[i] = args[i];
    if (args[i].kind == OX_ARG_TENSOR)
      ox_tensor_retain(args[i].v.tensor);
  }
  c->n++;
  drop_graph(c); /* a captured graph no longer matches */
  return OX_OK;
}

ox_status ox_chain_copy(ox_chain c, ox_tensor dst, ox_tensor src) {
  if (!c)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_chain_copy: chain is NULL");
  if (!oxr_tensor_valid(dst) || !oxr_tensor_valid(src))
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_chain_copy: a tensor is NULL or released");
  step *sp = new_step(c);
  if (!sp)
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  ox_tensor_retain(dst);
  ox_tensor_retain(src);
  sp->dst = dst;
  sp->src = src;
  c->n++;
  drop_graph(c);
  return OX_OK;
}

static ox_status run_steps(ox_chain c, ox_stream s) {
  for (int i = 0; i < c->n; i++) {
    step *sp = &c->steps[i];
    ox_status st = sp->k ? ox_launch(sp->k, s, sp->k->fn ? NULL : &sp->cfg, sp->args, sp->nargs)
                         : ox_tensor_copy(sp->dst, sp->src, s);
    if (st)
      return oxb_set_error(st, "chain step %d: %s", i + 1, ox_last_error());
  }
  return OX_OK;
}

ox_status ox_chain_run(ox_chain c, ox_stream s) {
  if (!c)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_chain_run: chain is NULL");
  ox_status st = oxr_resolve_stream("ox_chain_run", c->dev, &s);
  if (st)
    return st;
  if (!c->exec)
    return run_steps(c, s);
  if (s != c->captured_on)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         "ox_chain_run: a captured chain replays on the stream it was captured on "
                         "(its kernels report errors through that stream)");
  /* the graph's work is ordered after other streams' pending work on its tensors */
  for (int i = 0; i < c->n; i++) {
    step *sp = &c->steps[i];
    for (int a = 0; a < sp->nargs; a++)
      if (sp->args[a].kind == OX_ARG_TENSOR && (st = oxr_tensor_use(sp->args[a].v.tensor, s, true)))
        return st;
    if (!sp->k && ((st = oxr_tensor_use(sp->src, s, false)) || (st = oxr_tensor_use(sp->dst, s, true))))
      return st;
  }
  if ((st = oxr_cuda_make_current(c->dev)))
    return st;
  CUresult r = oxr_cu.cuGraphLaunch(c->exec, s->cu);
  return r ? oxr_cuda_error(r, "cuGraphLaunch") : OX_OK;
}

ox_status ox_chain_capture(ox_chain c, ox_stream s) {
  if (!c)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_chain_capture: chain is NULL");
  ox_status st = oxr_resolve_stream("ox_chain_capture", c->dev, &s);
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
