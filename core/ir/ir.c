/* ir.c - building, verifying and printing Oxide IR. */
#include "ir/ir.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------------- building */

oxi_kernel *oxi_kernel_new(oxi_module *m, const char *name) {
  oxi_kernel *k = oxb_alloc(m->arena, sizeof *k);
  k->name = name;
  oxb_vec_push(m->arena, &m->kernels, k);
  return k;
}

oxi_block *oxi_block_new(oxi_module *m, oxi_kernel *k) {
  oxi_block *b = oxb_alloc(m->arena, sizeof *b);
  b->id = k->blocks.len;
  oxb_vec_push(m->arena, &k->blocks, b);
  return b;
}

oxi_instr *oxi_emit(oxi_module *m, oxi_kernel *k, oxi_block *b, oxi_op op, oxi_type type) {
  oxi_instr *in = oxb_alloc(m->arena, sizeof *in);
  in->op = op;
  in->type = type;
  in->id = type == OXI_VOID ? -1 : k->next_id++;
  k->ninstrs++;
  if (b)
    oxb_vec_push(m->arena, &b->instrs, in);
  return in;
}

int oxi_slot_new(oxi_module *m, oxi_kernel *k, oxi_type t) {
  oxb_vec_push(m->arena, &k->slots, (void *)(intptr_t)t);
  return k->slots.len - 1;
}

oxi_type oxi_slot_type(const oxi_kernel *k, int slot) {
  assert(slot >= 0 && slot < k->slots.len);
  return (oxi_type)(intptr_t)k->slots.items[slot];
}

oxi_instr *oxi_terminator(const oxi_block *b) {
  if (!b->instrs.len)
    return NULL;
  oxi_instr *last = b->instrs.items[b->instrs.len - 1];
  return (last->op == OXI_BR || last->op == OXI_CONDBR || last->op == OXI_RET) ? last : NULL;
}

ox_dtype oxi_mem_dtype(const oxi_kernel *k, oxi_mem mem) {
  if (mem.kind == OXI_MEM_PARAM) {
    assert(mem.index >= 0 && mem.index < k->params.len);
    return ((oxi_param *)k->params.items[mem.index])->dtype;
  }
  const oxb_vec *arrays = mem.kind == OXI_MEM_LOCAL ? &k->locals : &k->shared;
  assert(mem.index >= 0 && mem.index < arrays->len);
  return ((oxi_shared *)arrays->items[mem.index])->dtype;
}

/* ----------------------------------------------------------------- names */

bool oxi_is_float(oxi_type t) {
  return t == OX_F16 || t == OX_BF16 || t == OX_F32 || t == OX_F64 || t == OX_TF32;
}
bool oxi_is_fp8(oxi_type t) { return t == OX_F8E4M3 || t == OX_F8E5M2; }
bool oxi_is_int(oxi_type t) { return t >= OX_I8 && t <= OX_U64; }
bool oxi_is_signed(oxi_type t) { return t >= OX_I8 && t <= OX_I64; }

const char *oxi_type_name(oxi_type t) {
  return t == OXI_VOID ? "void" : t == OXI_V4 ? "v4" : oxi_is_vacc(t) ? (oxi_vacc_is_int(t) ? "vi32" : "vf32") : ox_dtype_name((ox_dtype)t);
}

const char *oxi_op_name(oxi_op op) {
  static const char *const names[] = {"const",  "param",   "len",     "load",   "store",
                                      "atomic", "bin",     "cmp",     "neg",    "not",
                                      "cast",   "select",  "var.get", "var.set", "sreg",
                                      "barrier", "shfl",   "vote",    "math",   "assume", "aligned",
                                      "dim",    "stride",  "t.load",  "t.store", "t.splat",
                                      "t.id",   "t.count", "t.reduce", "t.broadcast",
                                      "t.reshape", "t.permute", "t.iota", "t.gather", "t.slice", "t.scan", "t.sort", "t.extract", "t.dot", "t.prefetch", "t.atomic_add",
                                      "ldmatrix", "mma", "cp.async", "cp.commit", "cp.wait", "prefetch", "pack", "unpack", "pack2",
                                      "vset", "shared.addr", "wgmma", "wgmma.sync", "fence.async", "mbar.init", "mbar.expect",
                                      "mbar.wait", "tma.load", "named.bar", "setmaxnreg", "rendezvous",
                                      "br",     "condbr",  "ret"};
  _Static_assert(OXB_COUNT(names) == OXI_OP_COUNT, "op names");
  return (unsigned)op < OXI_OP_COUNT ? names[op] : "?";
}

const char *oxi_math_name(int m) {
  static const char *const names[] = {"sqrt", "rsqrt", "exp", "exp2", "log",   "log2",
                                      "sin",  "cos",   "tanh", "pow", "fma",   "abs",
                                      "min",  "max",   "floor", "ceil", "recip", "erf",
                                      "sigmoid", "round", "trunc", "tan", "atan", "atan2",
                                      "signum", "clamp", "philox0", "philox1", "philox2", "philox3"};
  _Static_assert(OXB_COUNT(names) == OXI_M_COUNT, "math names");
  return (m >= 0 && m < OXI_M_COUNT) ? names[m] : "?";
}

static const char *bin_name(int s) {
  static const char *const names[] = {"add", "sub", "mul", "div", "rem", "and", "or",
                                      "xor", "shl", "shr", "min", "max", "xchg", "cas"};
  return (s >= 0 && (size_t)s < OXB_COUNT(names)) ? names[s] : "?";
}

static const char *cmp_name(int s) {
  static const char *const names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  return (s >= 0 && (size_t)s < OXB_COUNT(names)) ? names[s] : "?";
}

static const char *sreg_name(int s) {
  static const char *const names[] = {"tid.x",   "tid.y",   "tid.z",   "ctaid.x", "ctaid.y",
                                      "ctaid.z", "ntid.x",  "ntid.y",  "ntid.z",  "nctaid.x",
                                      "nctaid.y", "nctaid.z", "laneid",  "on_cpu"};
  return (s >= 0 && (size_t)s < OXB_COUNT(names)) ? names[s] : "?";
}

/* -------------------------------------------------------------- printing */

static void print_mem(const oxi_kernel *k, oxi_mem mem, oxb_str *o) {
  if (mem.kind == OXI_MEM_PARAM)
    oxb_str_addf(o, "%%%s", ((oxi_param *)k->params.items[mem.index])->name);
  else
    oxb_str_addf(o, "%s%d", mem.kind == OXI_MEM_LOCAL ? "local" : "shared", mem.index);
}

static void print_instr(const oxi_kernel *k, const oxi_instr *in, oxb_str *o) {
  oxb_str_add(o, "    ", 4);
  if (in->id >= 0 && in->tshape) {
    oxb_str_addf(o, "v%d: %s[", in->id, oxi_type_name(in->type));
    for (int d = 0; d < in->tshape->rank; d++)
      oxb_str_addf(o, "%s%lld", d ? "x" : "", (long long)in->tshape->dims[d]);
    oxb_str_add(o, "] = ", 4);
  } else if (in->id >= 0) {
    oxb_str_addf(o, "v%d: %s", in->id, oxi_type_name(in->type));
    oxb_str_addf(o, oxi_is_vacc(in->type) ? "x%d = " : " = ", oxi_vacc_len(in->type));
  }
  oxb_str_addf(o, "%s", oxi_op_name(in->op));
  switch (in->op) {
  case OXI_BIN: case OXI_ATOMIC: oxb_str_addf(o, ".%s%s", bin_name(in->sub), in->nuw ? ".nuw" : ""); break;
  case OXI_T_REDUCE: case OXI_T_SCAN: oxb_str_addf(o, ".%s axis %d,", bin_name(in->sub), in->index); break;
  case OXI_T_SORT:
    oxb_str_addf(o, "%s%s axis %d,", in->sub & 1 ? ".desc" : "", in->sub & 2 ? ".index" : "", in->index);
    break;
  case OXI_T_LOAD: oxb_str_addf(o, "%s", in->sub ? ".at" : ""); break;
  case OXI_CMP: oxb_str_addf(o, ".%s", cmp_name(in->sub)); break;
  case OXI_SREG: oxb_str_addf(o, " %s", sreg_name(in->sub)); break;
  case OXI_MATH: oxb_str_addf(o, ".%s", oxi_math_name(in->sub)); break;
  case OXI_SHFL: {
    static const char *const m[] = {"idx", "up", "down", "xor"};
    oxb_str_addf(o, ".%s", m[in->sub & 3]);
    break;
  }
  case OXI_VOTE: {
    static const char *const m[] = {"all", "any", "ballot", "?"};
    oxb_str_addf(o, ".%s", m[in->sub & 3]);
    break;
  }
  case OXI_CONST:
    if (oxi_is_float(in->type) || oxi_is_fp8(in->type))
      oxb_str_addf(o, " %.9g", in->fimm);
    else if (oxi_is_signed(in->type))
      oxb_str_addf(o, " %lld", (long long)in->imm);
    else
      oxb_str_addf(o, " %llu", (unsigned long long)in->imm);
    break;
  case OXI_PARAM:
    oxb_str_addf(o, " %%%s", ((oxi_param *)k->params.items[in->index])->name);
    break;
  case OXI_VAR_GET: case OXI_VAR_SET: oxb_str_addf(o, " $%d", in->index); break;
  case OXI_LDMATRIX: oxb_str_addf(o, "%s", in->sub ? ".trans" : ""); break;
  case OXI_MMA: oxb_str_addf(o, ".%s b%d", oxi_type_name(in->sub), in->index); break;
  case OXI_UNPACK: case OXI_VSET: oxb_str_addf(o, " %d,", in->index); break;
  case OXI_WGMMA: oxb_str_addf(o, ".m64n%lluk16.%s", (unsigned long long)in->imm, oxi_type_name(in->sub)); break;
  case OXI_SETMAXNREG: oxb_str_addf(o, ".%s %llu", in->sub ? "inc" : "dec", (unsigned long long)in->imm); break;
  case OXI_RENDEZVOUS: oxb_str_addf(o, " @%llu", (unsigned long long)in->imm); break;
  case OXI_WGMMA_SYNC:
    if (in->sub == 1 || in->sub == 2)
      oxb_str_addf(o, in->sub == 1 ? ".commit.wait %llu%s" : ".wait %llu%s", (unsigned long long)in->imm,
                   in->nops ? "," : "");
    else
      oxb_str_addf(o, "%s", in->sub ? (in->nops ? ".commit," : ".commit") : ".fence");
    break;
  default: break;
  }
  if (in->op == OXI_LEN || in->op == OXI_LOAD || in->op == OXI_STORE || in->op == OXI_ATOMIC ||
      in->op == OXI_ALIGNED || in->op == OXI_DIM || in->op == OXI_STRIDE || in->op == OXI_T_LOAD ||
      in->op == OXI_T_STORE || in->op == OXI_T_ID || in->op == OXI_T_COUNT || in->op == OXI_LDMATRIX ||
      in->op == OXI_CP_ASYNC || in->op == OXI_T_ATOMIC_ADD || in->op == OXI_SHARED_ADDR || in->op == OXI_T_GATHER ||
      in->op == OXI_T_PREFETCH || in->op == OXI_PREFETCH) {
    oxb_str_add(o, " ", 1);
    print_mem(k, in->mem, o);
  }
  if (in->op == OXI_DIM || in->op == OXI_STRIDE || in->op == OXI_T_ID || in->op == OXI_T_COUNT)
    oxb_str_addf(o, ".%d", in->index);
  if (in->op == OXI_ALIGNED)
    oxb_str_addf(o, ", %llu", (unsigned long long)in->imm);
  for (int i = 0; i < in->nops; i++)
    oxb_str_addf(o, "%s v%d", (i || in->op == OXI_VAR_SET || in->op == OXI_LEN ||
                               in->op == OXI_LOAD || in->op == OXI_STORE || in->op == OXI_ATOMIC)
                                  ? ","
                                  : "",
                 in->ops[i] ? in->ops[i]->id : -1);
  if (in->op == OXI_BR)
    oxb_str_addf(o, " bb%d", in->target[0]->id);
  if (in->op == OXI_CONDBR)
    oxb_str_addf(o, ", bb%d, bb%d", in->target[0]->id, in->target[1]->id);
  if (in->op == OXI_LOAD || in->op == OXI_STORE || in->op == OXI_ATOMIC) {
    if (in->check) {
      const oxi_site *s = k->sites.items[in->check - 1];
      oxb_str_addf(o, "  [checked %d:%d]", s->line, s->col);
    } else {
      oxb_str_add(o, "  [unchecked]", 13);
    }
  }
  oxb_str_add(o, "\n", 1);
}

static void print_hexpr(const oxi_kernel *k, const oxi_hexpr *e, oxb_str *o) {
  switch (e->kind) {
  case OXI_H_CONST: oxb_str_addf(o, "%lld", (long long)e->value); return;
  case OXI_H_LEN: oxb_str_addf(o, "len(%%%s)", ((oxi_param *)k->params.items[e->param])->name); return;
  case OXI_H_PARAM: oxb_str_addf(o, "%%%s", ((oxi_param *)k->params.items[e->param])->name); return;
  case OXI_H_NOT: oxb_str_add(o, "!", 1); print_hexpr(k, e->a, o); return;
  default: break;
  }
  oxb_str_add(o, "(", 1);
  print_hexpr(k, e->a, o);
  oxb_str_addf(o, " %s ", e->kind == OXI_H_AND ? "and" : e->kind == OXI_H_OR ? "or"
                           : e->kind == OXI_H_CMP ? cmp_name(e->sub) : bin_name(e->sub));
  print_hexpr(k, e->b, o);
  oxb_str_add(o, ")", 1);
}

void oxi_print(const oxi_module *m, oxb_str *o) {
  for (int ki = 0; ki < m->kernels.len; ki++) {
    const oxi_kernel *k = m->kernels.items[ki];
    /* one name per oxi_pkind, in its order */
    static const char *const pk[] = {"", "&[]", "&mut []", "&[Atomic]", "DisjointSlice", "&Tensor",
                                     "&mut Tensor", "&Tensor Atomic", "TensorMap"};
    _Static_assert(OXB_COUNT(pk) == OXI_P_TMAP + 1, "a name for every parameter kind");
    oxb_str_addf(o, "kernel %s%s(", k->is_unsafe ? "unsafe " : "", k->name);
    for (int i = 0; i < k->params.len; i++) {
      const oxi_param *p = k->params.items[i];
      assert((unsigned)p->kind < OXB_COUNT(pk));
      oxb_str_addf(o, "%s%%%s: %s%s%s", i ? ", " : "", p->name, pk[p->kind],
                   p->kind == OXI_P_SCALAR ? "" : " ", ox_dtype_name(p->dtype));
    }
    oxb_str_add(o, ")", 1);
    if (k->block[0])
      oxb_str_addf(o, " block(%d, %d, %d)", k->block[0], k->block[1], k->block[2]);
    if (k->uses_sync)
      oxb_str_add(o, " sync", 5);
    oxb_str_add(o, " {\n", 3);
    for (int i = 0; i < k->requires.len; i++) {
      const oxi_requires *r = k->requires.items[i];
      oxb_str_add(o, "  requires ", 11);
      print_hexpr(k, r->expr, o);
      oxb_str_add(o, "\n", 1);
    }
    for (int i = 0; i < k->shared.len; i++) {
      const oxi_shared *s = k->shared.items[i];
      oxb_str_addf(o, "  shared%d: [%s; %lld] at %lld", i, ox_dtype_name(s->dtype),
                   (long long)s->count, (long long)s->offset);
      oxb_str_addf(o, s->align ? ", align %lld\n" : "\n", (long long)s->align);
    }
    for (int i = 0; i < k->locals.len; i++) {
      const oxi_shared *s = k->locals.items[i];
      oxb_str_addf(o, "  local%d: [%s; %lld]\n", i, ox_dtype_name(s->dtype), (long long)s->count);
    }
    for (int i = 0; i < k->slots.len; i++) {
      oxb_str_addf(o, "  $%d: %s", i, oxi_type_name(oxi_slot_type(k, i)));
      oxb_str_addf(o, oxi_is_vacc(oxi_slot_type(k, i)) ? "x%d\n" : "\n", oxi_vacc_len(oxi_slot_type(k, i)));
    }
    for (int bi = 0; bi < k->blocks.len; bi++) {
      const oxi_block *b = k->blocks.items[bi];
      oxb_str_addf(o, "  bb%d:\n", b->id);
      for (int ii = 0; ii < b->instrs.len; ii++)
        print_instr(k, b->instrs.items[ii], o);
    }
    oxb_str_add(o, "}\n", 2);
  }
}

/* ------------------------------------------------------------- verifying */

typedef struct verifier {
  const oxi_kernel *k;
  oxb_str *err;
  bool ok;
  /* per value id: the block that defines it and its position there */
  int *def_block, *def_pos;
  /* the dominator tree, numbered by a depth-first walk: a dominates b iff
   * b's interval [pre, post] lies in a's. Unreachable blocks have pre -1. */
  int *pre, *post;
} verifier;

static void fail(verifier *V, const oxi_block *b, const oxi_instr *in, const char *msg) {
  V->ok = false;
  oxb_str_addf(V->err, "IR verifier: kernel %s, bb%d, %s (v%d): %s\n", V->k->name, b ? b->id : -1,
               in ? oxi_op_name(in->op) : "-", in ? in->id : -1, msg);
}

/* Code in an unreachable block never runs, so any definition "dominates" it
 * (what the dataflow formulation gives, and what code generation needs: it
 * drops such blocks). */
static bool dominates(verifier *V, int a, int b) {
  if (V->pre[b] < 0)
    return true;
  return V->pre[a] >= 0 && V->pre[a] <= V->pre[b] && V->post[b] <= V->post[a];
}

/* Successor s (0 or 1) of block p, or -1. */
static int succ(const oxi_kernel *k, int p, int s) {
  const oxi_instr *t = oxi_terminator(k->blocks.items[p]);
  if (!t || t->op == OXI_RET || (t->op == OXI_BR && s > 0) || !t->target[s])
    return -1;
  return t->target[s]->id;
}

/* The dominator tree by Cooper, Harvey and Kennedy's iteration over reverse
 * post-order ("A Simple, Fast Dominance Algorithm"), then its depth-first
 * numbering. Near linear in the blocks: the front end makes kernels of up to
 * tens of thousands of blocks, where dominator bit sets took seconds to
 * minutes. Returns false when out of memory. */
static bool compute_dominators(verifier *V) {
  const oxi_kernel *k = V->k;
  int n = k->blocks.len; /* >= 1: the verifier rejects kernels without blocks */
  size_t un = (size_t)(unsigned)n;
  int *first = oxb_calloc(un + 1, sizeof(int)), *pred = oxb_calloc(un * 2 + 1, sizeof(int));
  int *fill = oxb_calloc(un + 1, sizeof(int)), *rpo = oxb_malloc(un * sizeof(int));
  int *order = oxb_malloc(un * sizeof(int)), *idom = oxb_malloc(un * sizeof(int));
  int *stack = oxb_malloc(un * sizeof(int)), *edge = oxb_calloc(un, sizeof(int));
  V->pre = oxb_malloc(un * sizeof(int));
  V->post = oxb_malloc(un * sizeof(int));
  bool ok = first && pred && fill && rpo && order && idom && stack && edge && V->pre && V->post;
  if (ok) {
    /* predecessor lists (CSR: preds of b are pred[first[b] .. first[b + 1])) */
    for (int p = 0; p < n; p++)
      for (int s = 0; s < 2; s++)
        if (succ(k, p, s) >= 0)
          first[succ(k, p, s) + 1]++;
    for (int b = 0; b < n; b++)
      first[b + 1] += first[b];
    for (int p = 0; p < n; p++)
      for (int s = 0; s < 2; s++) {
        int b = succ(k, p, s);
        if (b >= 0)
          pred[first[b] + fill[b]++] = p;
      }
    /* post-order from the entry, iteratively (deep CFGs must not overflow the
     * C stack); order[b] is b's post-order number, -1 if unreachable */
    for (int b = 0; b < n; b++)
      order[b] = -1, idom[b] = -1, V->pre[b] = V->post[b] = -1;
    int sp = 0, npo = 0;
    stack[sp++] = 0;
    V->pre[0] = 0; /* marks "visited" during this walk */
    while (sp) {
      int b = stack[sp - 1];
      if (edge[b] < 2) {
        int s = succ(k, b, edge[b]++);
        if (s >= 0 && V->pre[s] < 0) {
          V->pre[s] = 0;
          stack[sp++] = s;
        }
        continue;
      }
      sp--;
      order[b] = npo;
      rpo[n - 1 - npo] = b;
      npo++;
    }
    int *r = rpo + (n - npo); /* the reachable blocks in reverse post-order; r[0] is the entry */
    idom[0] = 0;
    for (bool changed = true; changed;) {
      changed = false;
      for (int i = 1; i < npo; i++) {
        int b = r[i], nd = -1;
        for (int j = first[b]; j < first[b + 1]; j++) {
          int p = pred[j];
          if (idom[p] < 0) /* unreachable, or not reached yet in this pass */
            continue;
          if (nd < 0) {
            nd = p;
            continue;
          }
          int x = p, y = nd; /* intersect: climb to the common dominator */
          while (x != y) {
            while (order[x] < order[y])
              x = idom[x];
            while (order[y] < order[x])
              y = idom[y];
          }
          nd = x;
        }
        if (nd >= 0 && idom[b] != nd) {
          idom[b] = nd;
          changed = true;
        }
      }
    }
    /* number the tree: children lists in CSR (reuse first/pred/fill) */
    memset(first, 0, (un + 1) * sizeof(int));
    memset(fill, 0, (un + 1) * sizeof(int));
    for (int i = 1; i < npo; i++)
      first[idom[r[i]] + 1]++;
    for (int b = 0; b < n; b++)
      first[b + 1] += first[b];
    for (int i = 1; i < npo; i++)
      pred[first[idom[r[i]]] + fill[idom[r[i]]]++] = r[i];
    for (int b = 0; b < n; b++)
      V->pre[b] = -1, edge[b] = 0;
    int clock = 0;
    sp = 0;
    stack[sp++] = 0;
    V->pre[0] = clock++;
    while (sp) {
      int b = stack[sp - 1];
      if (first[b] + edge[b] < first[b + 1]) {
        int c = pred[first[b] + edge[b]++];
        V->pre[c] = clock++;
        stack[sp++] = c;
        continue;
      }
      sp--;
      V->post[b] = clock++;
    }
  }
  free(first);
  free(pred);
  free(fill);
  free(rpo);
  free(order);
  free(idom);
  free(stack);
  free(edge);
  return ok;
}

static void check_operand(verifier *V, const oxi_block *b, int pos, const oxi_instr *in, int i) {
  const oxi_instr *v = in->ops[i];
  if (!v) {
    fail(V, b, in, "missing operand");
    return;
  }
  if (v->id < 0 || v->id >= V->k->next_id || V->def_block[v->id] < 0) {
    fail(V, b, in, "operand is not a value placed in this kernel");
    return;
  }
  int db = V->def_block[v->id];
  if (db == b->id ? V->def_pos[v->id] >= pos : !dominates(V, db, b->id))
    fail(V, b, in, "operand is used where its definition does not dominate the use");
}

static void verify_instr(verifier *V, const oxi_block *b, int pos, const oxi_instr *in) {
  const oxi_kernel *k = V->k;
  bool ok_before = V->ok;
  V->ok = true;
  for (int i = 0; i < in->nops; i++)
    check_operand(V, b, pos, in, i);
  bool operands_ok = V->ok;
  V->ok = ok_before && operands_ok;
  if (!operands_ok) /* the checks below read the operands' types */
    return;
  oxi_type t0 = in->nops > 0 ? in->ops[0]->type : OXI_VOID;
  oxi_type t1 = in->nops > 1 ? in->ops[1]->type : OXI_VOID;
  bool mem_op = in->op == OXI_LEN || in->op == OXI_LOAD || in->op == OXI_STORE ||
                in->op == OXI_ATOMIC || in->op == OXI_ALIGNED;
  if (mem_op) {
    int limit = in->mem.kind == OXI_MEM_PARAM    ? k->params.len
                : in->mem.kind == OXI_MEM_LOCAL ? k->locals.len
                                                : k->shared.len;
    if (in->mem.index < 0 || in->mem.index >= limit) {
      fail(V, b, in, "memory reference out of range");
      return;
    }
    if (in->mem.kind == OXI_MEM_LOCAL && in->op != OXI_LOAD && in->op != OXI_STORE && in->op != OXI_LEN) {
      fail(V, b, in, "a local array takes loads and stores only");
      return;
    }
    if (in->mem.kind == OXI_MEM_PARAM &&
        ((oxi_param *)k->params.items[in->mem.index])->kind == OXI_P_SCALAR) {
      fail(V, b, in, "memory reference names a scalar parameter");
      return;
    }
    if (in->op != OXI_LEN && in->op != OXI_ALIGNED && t0 != OX_U64)
      fail(V, b, in, "index must be u64");
    if (in->check > k->sites.len || in->check < 0)
      fail(V, b, in, "bad check site");
  }
  ox_dtype md = mem_op ? oxi_mem_dtype(k, in->mem) : OX_BOOL;
  switch (in->op) {
  case OXI_CONST: if (in->type == OXI_VOID) fail(V, b, in, "void constant"); break;
  case OXI_PARAM:
    if (in->index < 0 || in->index >= k->params.len ||
        ((oxi_param *)k->params.items[in->index])->kind != OXI_P_SCALAR ||
        ((oxi_param *)k->params.items[in->index])->dtype != (ox_dtype)in->type)
      fail(V, b, in, "param does not name a scalar parameter of this type");
    break;
  case OXI_LEN: if (in->type != OX_U64 || in->nops) fail(V, b, in, "len is u64 of no operands"); break;
  case OXI_LOAD:
    if (in->nops != 1 || (in->type != (oxi_type)md &&
                          !(in->type == OXI_V4 && (ox_dtype_size(md) == 2 || ox_dtype_size(md) == 4) && !in->check) &&
                          !((in->type == OX_U64 || in->type == OX_U32) && ox_dtype_size(md) == 2 && !in->check)))
      fail(V, b, in, "load type differs from memory");
    if (in->mem.kind == OXI_MEM_PARAM &&
        ((oxi_param *)k->params.items[in->mem.index])->kind == OXI_P_ATOMIC)
      fail(V, b, in, "plain load from an atomic slice");
    break;
  case OXI_STORE: {
    /* a vector store: four 16-bit elements as a u64, or 16 bytes of 2- or 4-byte ones as a v4 */
    bool vec = in->nops == 2 && !in->check && ((t1 == OX_U64 && ox_dtype_size(md) == 2) ||
                                               (t1 == OXI_V4 && (ox_dtype_size(md) == 2 || ox_dtype_size(md) == 4)));
    if (in->nops != 2 || (t1 != (oxi_type)md && !vec)) fail(V, b, in, "stored value type differs from memory");
    if (in->mem.kind == OXI_MEM_PARAM) {
      oxi_pkind pk = ((oxi_param *)k->params.items[in->mem.index])->kind;
      if (pk == OXI_P_SLICE || pk == OXI_P_ATOMIC)
        fail(V, b, in, "store to a read-only or atomic slice");
    }
    break;
  }
  case OXI_ATOMIC:
    if (in->nops != (in->sub == OXI_CAS ? 3 : 2) || t1 != (oxi_type)md || in->type != (oxi_type)md)
      fail(V, b, in, "atomic operand types differ from memory");
    break;
  case OXI_BIN:
    if (in->nops != 2 || t0 != t1 || in->type != t0 || (t0 == OX_BOOL && in->sub < OXI_AND))
      fail(V, b, in, "binary operands must share the result type");
    else if (in->sub < OXI_ADD || in->sub > OXI_SHR || (oxi_is_float(t0) && in->sub > OXI_REM) ||
             (t0 == OX_BOOL && in->sub > OXI_XOR))
      fail(V, b, in, "binary operation not defined for its type"); /* float shl, bool add... */
    break;
  case OXI_CMP:
    if (in->nops != 2 || t0 != t1 || in->type != OX_BOOL) fail(V, b, in, "cmp of mismatched types");
    break;
  case OXI_NEG: case OXI_NOT:
    if (in->nops != 1 || in->type != t0) fail(V, b, in, "unary type mismatch");
    else if (in->op == OXI_NEG ? t0 == OX_BOOL : oxi_is_float(t0))
      fail(V, b, in, "unary operation not defined for its type");
    break;
  case OXI_CAST: if (in->nops != 1 || in->type == OXI_VOID) fail(V, b, in, "bad cast"); break;
  case OXI_SELECT:
    if (in->nops != 3 || t0 != OX_BOOL || in->ops[1]->type != in->ops[2]->type ||
        in->type != in->ops[1]->type)
      fail(V, b, in, "select types");
    break;
  case OXI_VAR_GET:
  case OXI_VAR_SET:
    if (in->index < 0 || in->index >= k->slots.len) {
      fail(V, b, in, "no such variable slot");
      break;
    }
    if (in->op == OXI_VAR_GET ? in->type != oxi_slot_type(k, in->index)
                              : (in->nops != 1 || t0 != oxi_slot_type(k, in->index)))
      fail(V, b, in, "variable slot type mismatch");
    break;
  case OXI_SREG: if (in->type != OX_U32) fail(V, b, in, "special registers are u32"); break;
  case OXI_BARRIER: case OXI_ASSUME: break;
  case OXI_ALIGNED:
    if (in->type != OX_BOOL || in->nops || in->mem.kind != OXI_MEM_PARAM || !in->imm ||
        (in->imm & (in->imm - 1)))
      fail(V, b, in, "aligned is a bool of a slice parameter and a power of two");
    break;
  case OXI_SHFL:
    if (in->nops != 2 || in->type != t0 || t1 != OX_U32) fail(V, b, in, "shfl operands");
    break;
  case OXI_VOTE:
    if (in->nops != 1 || t0 != OX_BOOL) fail(V, b, in, "vote of a non-bool");
    break;
  case OXI_MATH:
    for (int i = 0; i < in->nops; i++)
      if (in->ops[i]->type != in->type) fail(V, b, in, "math operand type differs from result");
    break;
  case OXI_DIM:
  case OXI_STRIDE:
  case OXI_T_ID:
  case OXI_T_COUNT: {
    const oxi_param *p = in->mem.kind == OXI_MEM_PARAM && in->mem.index >= 0 && in->mem.index < k->params.len
                             ? k->params.items[in->mem.index] : NULL;
    bool tile_op = in->op == OXI_T_ID || in->op == OXI_T_COUNT;
    if (!p || (tile_op ? p->kind != OXI_P_TILE : !oxi_is_tensor_kind(p->kind)) ||
        in->index < 0 || in->index >= p->rank || in->type != OX_U64 || in->nops)
      fail(V, b, in, "dim/stride/t.id/t.count need a tensor (t.*: an output tile) parameter and an axis below its rank");
    break;
  }
  case OXI_T_LOAD:
  case OXI_T_STORE: {
    const oxi_param *p = in->mem.kind == OXI_MEM_PARAM && in->mem.index >= 0 && in->mem.index < k->params.len
                             ? k->params.items[in->mem.index] : NULL;
    if (!p || (p->kind != OXI_P_TENSOR && p->kind != OXI_P_TILE)) {
      fail(V, b, in, "tile load/store needs a tensor parameter");
      break;
    }
    if (in->op == OXI_T_STORE) {
      const oxi_tshape *ts = in->nops == 1 ? in->ops[0]->tshape : NULL;
      bool same = ts && p->kind == OXI_P_TILE && ts->rank == p->rank && t0 == (oxi_type)p->dtype;
      for (int d = 0; same && d < p->rank; d++)
        same = ts->dims[d] == p->dims[d];
      if (!same)
        fail(V, b, in, "t.store needs a tile of the output's tile shape and dtype");
    } else {
      bool ok = in->tshape && in->tshape->rank == p->rank && in->nops == p->rank &&
                in->type == (oxi_type)p->dtype;
      for (int d = 0; ok && d < in->nops; d++)
        ok = in->ops[d]->type == OX_U64 && !in->ops[d]->tshape;
      if (!ok)
        fail(V, b, in, "t.load needs one u64 coordinate per dim and the tensor's dtype and rank");
    }
    break;
  }
  case OXI_T_SPLAT:
    if (in->nops != 1 || !in->tshape || in->ops[0]->tshape || t0 != in->type)
      fail(V, b, in, "t.splat makes a tile from a scalar of its dtype");
    break;
  case OXI_T_REDUCE:
  case OXI_T_BROADCAST: {
    const oxi_tshape *a = in->nops == 1 ? in->ops[0]->tshape : NULL, *r = in->tshape;
    bool ok = a && r && a->rank == r->rank && t0 == in->type;
    bool red = in->op == OXI_T_REDUCE;
    if (ok && red)
      ok = in->index >= 0 && in->index < a->rank && (in->sub == OXI_ADD || in->sub == OXI_MUL ||
                                                     in->sub == OXI_MIN || in->sub == OXI_MAX) &&
           in->type != OX_BOOL;
    for (int d = 0; ok && d < a->rank; d++)
      ok = red ? r->dims[d] == (d == in->index ? 1 : a->dims[d])
               : (a->dims[d] == r->dims[d] || a->dims[d] == 1);
    if (!ok)
      fail(V, b, in, red ? "t.reduce: a tile, an axis below its rank, and the result shape with that axis 1"
                         : "t.broadcast: dims of the operand equal to the result's or 1");
    break;
  }
  case OXI_T_RESHAPE:
  case OXI_T_PERMUTE: {
    const oxi_tshape *a = in->nops == 1 ? in->ops[0]->tshape : NULL, *r = in->tshape;
    bool ok = a && r && t0 == in->type;
    if (ok && in->op == OXI_T_RESHAPE) {
      int64_t ea = 1, er = 1;
      for (int d = 0; d < a->rank; d++)
        ea *= a->dims[d];
      for (int d = 0; d < r->rank; d++)
        er *= r->dims[d];
      ok = ea == er;
    } else if (ok) {
      unsigned seen = 0;
      ok = a->rank == r->rank;
      for (int d = 0; ok && d < r->rank; d++) {
        int pd = (int)((in->imm >> (4 * d)) & 15);
        ok = pd < a->rank && !(seen & (1u << pd)) && r->dims[d] == a->dims[pd];
        seen |= 1u << pd;
      }
    }
    if (!ok)
      fail(V, b, in, "t.reshape keeps the element count; t.permute is a permutation of the dims");
    break;
  }
  case OXI_T_GATHER: {
    const oxi_param *p = in->mem.kind == OXI_MEM_PARAM && in->mem.index >= 0 && in->mem.index < k->params.len
                             ? k->params.items[in->mem.index] : NULL;
    bool ok = p && p->kind == OXI_P_TENSOR && in->tshape && in->nops == p->rank && in->type == (oxi_type)p->dtype;
    for (int i = 0; ok && i < in->nops; i++) {
      const oxi_tshape *a = in->ops[i]->tshape;
      ok = a && in->ops[i]->type == OX_U64 && a->rank == in->tshape->rank;
      for (int d = 0; ok && d < a->rank; d++)
        ok = a->dims[d] == in->tshape->dims[d];
    }
    if (!ok)
      fail(V, b, in, "t.gather: an input tensor of the result's dtype, one u64 index tile of the result's shape a dim");
    break;
  }
  case OXI_T_SLICE: {
    const oxi_tshape *a = in->nops == 1 ? in->ops[0]->tshape : NULL, *r = in->tshape;
    bool ok = a && r && a->rank == r->rank && in->type == t0;
    for (int d = 0; ok && d < r->rank; d++)
      ok = (int64_t)((in->imm >> (16 * d)) & 0xffff) + r->dims[d] <= a->dims[d];
    if (!ok)
      fail(V, b, in, "t.slice: a sub-tile of its operand's rank, inside it");
    break;
  }
  case OXI_T_SCAN:
  case OXI_T_SORT: {
    const oxi_tshape *a = in->nops == 1 ? in->ops[0]->tshape : NULL, *r = in->tshape;
    bool scan = in->op == OXI_T_SCAN;
    bool ok = a && r && a->rank == r->rank && in->index >= 0 && in->index < a->rank && t0 != OX_BOOL &&
              (scan ? in->type == t0 && (in->sub == OXI_ADD || in->sub == OXI_MUL || in->sub == OXI_MIN ||
                                         in->sub == OXI_MAX)
                    : in->sub >= 0 && in->sub <= 3 && in->type == (in->sub & 2 ? OX_I32 : t0));
    for (int d = 0; ok && d < a->rank; d++)
      ok = a->dims[d] == r->dims[d];
    if (!ok)
      fail(V, b, in, scan ? "t.scan: a numeric tile of the result's shape and type, an axis below its rank"
                          : "t.sort: a numeric tile of the result's shape, an axis below its rank, its type (i32 for indices)");
    break;
  }
  case OXI_T_EXTRACT:
    if (in->nops != 2 || !in->ops[0]->tshape || in->ops[1]->tshape || t1 != OX_U64 || in->tshape ||
        in->type != t0)
      fail(V, b, in, "t.extract: a scalar of a tile's dtype, at a u64 position");
    break;
  case OXI_T_IOTA:
    if (in->nops || !in->tshape || in->index < 0 || in->index >= in->tshape->rank || in->type == OX_BOOL)
      fail(V, b, in, "t.iota: a numeric tile and an axis below its rank");
    break;
  case OXI_T_DOT: {
    const oxi_tshape *a = in->nops >= 2 ? in->ops[0]->tshape : NULL, *bs = a ? in->ops[1]->tshape : NULL,
                     *c = in->nops == 3 ? in->ops[2]->tshape : NULL, *r = in->tshape;
    bool ok = a && bs && r && a->rank == 2 && bs->rank == 2 && r->rank == 2 &&
              (t0 == t1 || (oxi_is_fp8(t0) && oxi_is_fp8(t1))) &&
              in->type == (oxi_is_int(t0) ? OX_I32 : OX_F32) && a->dims[1] == bs->dims[0] && r->dims[0] == a->dims[0] &&
              r->dims[1] == bs->dims[1] && (in->nops == 2 || (c && in->ops[2]->type == in->type &&
                                                               c->rank == 2 && c->dims[0] == r->dims[0] &&
                                                               c->dims[1] == r->dims[1]));
    if (!ok)
      fail(V, b, in, "t.dot: f32 (i32 for integers) [M, N] from [M, K] x [K, N] of one dtype or two fp8 ones (+ the same [M, N])");
    break;
  }
  case OXI_LDMATRIX:
    if (in->type != OXI_V4 || in->nops != 1 || t0 != OX_U64 || in->mem.kind != OXI_MEM_SHARED ||
        in->mem.index < 0 || in->mem.index >= k->shared.len ||
        (ox_dtype_size(oxi_mem_dtype(k, in->mem)) != 2 && oxi_mem_dtype(k, in->mem) != OX_TF32 &&
         oxi_mem_dtype(k, in->mem) != OX_I8 && oxi_mem_dtype(k, in->mem) != OX_U8) ||
        (in->sub && ox_dtype_size(oxi_mem_dtype(k, in->mem)) != 2))
      fail(V, b, in, "ldmatrix: v4 from 16-bit (or tf32, i8, u8: not transposed) shared memory at a u64 index");
    break;
  case OXI_MMA:
    if (in->type != OXI_V4 || in->nops != 3 || t0 != OXI_V4 || t1 != OXI_V4 ||
        in->ops[2]->type != OXI_V4 || (in->index != 0 && in->index != 1) ||
        (in->sub != OX_BF16 && in->sub != OX_F16 && in->sub != OX_TF32 && in->sub != OX_I8 && in->sub != OX_U8))
      fail(V, b, in, "mma: v4 from three v4 operands, B half 0 or 1, bf16, f16, tf32, i8 or u8 inputs");
    break;
  case OXI_CP_ASYNC: {
    const oxi_param *p = in->mem.kind == OXI_MEM_PARAM && in->mem.index >= 0 && in->mem.index < k->params.len
                             ? k->params.items[in->mem.index] : NULL;
    if (!p || p->kind == OXI_P_SCALAR || in->nops != 3 || t0 != OX_U64 || t1 != OX_U64 ||
        in->ops[2]->type != OX_U32 || in->index < 0 || in->index >= k->shared.len)
      fail(V, b, in, "cp.async: from a tensor parameter at a u64 index to a shared array at a u64 "
                     "index, u32 bytes");
    break;
  }
  case OXI_PREFETCH:
  case OXI_T_PREFETCH: {
    const oxi_param *p = in->mem.kind == OXI_MEM_PARAM && in->mem.index >= 0 && in->mem.index < k->params.len
                             ? k->params.items[in->mem.index] : NULL;
    bool ok = p && oxi_is_tensor_kind(p->kind) && in->type == OXI_VOID;
    if (ok && in->op == OXI_PREFETCH)
      ok = in->nops == 1 && t0 == OX_U64 && !in->tshape;
    else if (ok)
      ok = in->tshape && in->tshape->rank == p->rank && in->nops == p->rank;
    for (int d = 0; ok && d < in->nops; d++)
      ok = in->ops[d]->type == OX_U64 && !in->ops[d]->tshape;
    if (!ok)
      fail(V, b, in, "prefetch: a tensor parameter, and a u64 element index (t.prefetch: u64 tile coordinates "
                     "of its rank)");
    break;
  }
  case OXI_CP_COMMIT:
  case OXI_CP_WAIT: if (in->nops || in->imm > 7) fail(V, b, in, "cp.commit/cp.wait: no operands, wait 0 to 7"); break;
  case OXI_PACK:
    for (int i = 0; i < 4; i++)
      if (in->nops != 4 || ox_dtype_size((ox_dtype)in->ops[i < in->nops ? i : 0]->type) != 4 ||
          in->ops[i < in->nops ? i : 0]->type == OXI_V4 || in->type != OXI_V4)
        fail(V, b, in, "pack: v4 from four 32-bit scalars");
    break;
  case OXI_PACK2:
    if (in->nops != 2 || (t0 != OX_BF16 && t0 != OX_F16) || t1 != t0 || in->type != OX_U32)
      fail(V, b, in, "pack2: a u32 from two bf16 or two f16");
    break;
  case OXI_UNPACK:
    if (t0 == OX_U32) {
      if (in->nops != 1 || (in->type != OX_BF16 && in->type != OX_F16) || (unsigned)in->index > 1)
        fail(V, b, in, "unpack: a bf16 or f16 from half 0 or 1 of a u32");
      break;
    }
    if (in->nops != 1 || (t0 != OXI_V4 && !oxi_is_vacc(t0)) || in->index < 0 ||
        in->index >= (t0 == OXI_V4 ? 4 : oxi_vacc_len(t0)) || in->type >= OX_DTYPE_COUNT ||
        ox_dtype_size((ox_dtype)in->type) != 4 || (t0 != OXI_V4 && in->type != oxi_vacc_elem(t0)))
      fail(V, b, in, "unpack: a 32-bit scalar from a v4, or an f32 from a vf32 (i32 from a vi32)");
    break;
  case OXI_VSET:
    if (in->nops != 2 || !oxi_is_vacc(t0) || in->type != t0 || t1 != oxi_vacc_elem(t0) || in->index < 0 ||
        in->index >= oxi_vacc_len(t0))
      fail(V, b, in, "vset: a vf32 (vi32) with one register replaced by an f32 (i32)");
    break;
  case OXI_SHARED_ADDR:
    if (in->nops != 1 || t0 != OX_U64 || in->type != OX_U64 || in->mem.kind != OXI_MEM_SHARED ||
        in->mem.index < 0 || in->mem.index >= k->shared.len)
      fail(V, b, in, "shared.addr: u64 address of a shared array's element at a u64 index");
    break;
  case OXI_WGMMA:
    if ((in->nops != 3 && in->nops != 2) || (t0 != OX_U64 && t0 != OXI_V4) || t1 != OX_U64 || in->imm < 8 ||
        in->imm > 256 || in->imm % 8 || (in->nops == 3 && in->ops[2]->type != in->type) ||
        in->type != oxi_vacc((int)in->imm / 2, in->sub == OX_I8 || in->sub == OX_U8 ? OX_I32 : OX_F32) ||
        (unsigned)in->index > 1 ||
        !(in->sub == OX_BF16 || in->sub == OX_F16 ||
          ((oxi_is_fp8(in->sub) || in->sub == OX_I8 || in->sub == OX_U8) && in->index == 1 && t0 == OX_U64)))
      fail(V, b, in, "wgmma: vf32 x N/2 from A (a u64 descriptor or a v4), a u64 descriptor of B and a "
                     "vf32 x N/2, N 8 to 256 by 8, bf16 or f16 inputs, or fp8 (vi32: i8, u8) inputs from "
                     "shared memory with K-major B");
    break;
  case OXI_WGMMA_SYNC:
    if ((in->nops == 1 ? !oxi_is_vacc(t0) || in->type != t0 : in->nops || in->type != OXI_VOID) ||
        in->sub < 0 || in->sub > 3 || in->imm > 7)
      fail(V, b, in, "wgmma.sync: a vf32 or vi32 (or nothing) through a fence (0), a commit and a wait (1) or a "
                     "wait (2) for at most 0 to 7 groups, or a commit (3)");
    break;
  case OXI_FENCE_ASYNC:
    if (in->nops || in->type != OXI_VOID || (unsigned)in->sub > 1)
      fail(V, b, in, "fence.async: no operands, sub 0 or 1");
    break;
  case OXI_MBAR_INIT:
  case OXI_MBAR_EXPECT:
    if (t0 != OX_U64 || in->type != OXI_VOID || in->nops != (in->op == OXI_MBAR_EXPECT && !in->imm ? 2 : 1) ||
        (in->op == OXI_MBAR_INIT && !in->imm) || (in->nops == 2 && t1 != OX_BOOL))
      fail(V, b, in, "mbarrier init/expect: a u64 shared address and a nonzero count, or (a plain arrival) a "
                     "bool predicate");
    break;
  case OXI_MBAR_WAIT:
    if (in->nops != 2 || t0 != OX_U64 || t1 != OX_U64 || in->type != OXI_VOID)
      fail(V, b, in, "mbarrier wait: a u64 shared address and a u64 parity");
    break;
  case OXI_NAMED_BAR:
    if (in->nops < 1 || in->nops > 2 || t0 != OX_U64 || (in->nops == 2 && t1 != OX_BOOL) ||
        in->type != OXI_VOID || (unsigned)in->sub > 1 || !in->imm || in->imm % 32 || in->imm > 1024)
      fail(V, b, in, "named.bar: a u64 barrier id, maybe a bool predicate, sync (0) or arrive (1), and a "
                     "count of threads that is a multiple of 32");
    break;
  case OXI_SETMAXNREG:
    if (in->nops || in->type != OXI_VOID || (unsigned)in->sub > 1 || in->imm < 24 || in->imm > 256 || in->imm % 8)
      fail(V, b, in, "setmaxnreg: no operands, dec (0) or inc (1), 24 to 256 registers by 8");
    break;
  case OXI_RENDEZVOUS:
    if (in->nops != 1 || t0 != OX_U32 || in->type != OX_U64 || in->imm % 16 || !k->looped)
      fail(V, b, in, "rendezvous: a looped kernel's, of a u32 thread count, u64, at 16-byte aligned shared memory");
    break;
  case OXI_TMA_LOAD: {
    const oxi_param *p = in->index >= 0 && in->index < k->params.len ? k->params.items[in->index] : NULL;
    bool ok = p && p->kind == OXI_P_TMAP && p->rank >= 2 && p->rank <= 5 && in->nops == 2 + p->rank &&
              t0 == OX_U64 && t1 == OX_U64 && in->type == OXI_VOID && in->imm;
    for (int i = 2; ok && i < in->nops; i++)
      ok = in->ops[i]->type == OX_U64;
    if (!ok)
      fail(V, b, in, "tma load: a tensor map parameter (rank 2 to 5), u64 destination, mbarrier and a u64 "
                     "coordinate a dim");
    break;
  }
  case OXI_T_ATOMIC_ADD: {
    const oxi_param *p = in->mem.kind == OXI_MEM_PARAM && in->mem.index >= 0 && in->mem.index < k->params.len
                             ? k->params.items[in->mem.index] : NULL;
    bool ok = p && p->kind == OXI_P_ATENSOR && in->type == OXI_VOID;
    if (ok && in->sub == 0) {
      const oxi_instr *v = in->nops == p->rank + 1 ? in->ops[p->rank] : NULL;
      ok = v && v->tshape && v->tshape->rank == p->rank && v->type == (oxi_type)p->dtype;
      for (int d = 0; ok && d < p->rank; d++)
        ok = in->ops[d]->type == OX_U64 && !in->ops[d]->tshape;
    } else if (ok) {
      const oxi_tshape *a = in->nops == 2 ? in->ops[0]->tshape : NULL, *v = a ? in->ops[1]->tshape : NULL;
      ok = in->sub == 1 && p->rank == 1 && v && t0 == OX_U64 && t1 == (oxi_type)p->dtype && a->rank == v->rank;
      for (int d = 0; ok && d < a->rank; d++)
        ok = a->dims[d] == v->dims[d];
    }
    if (!ok)
      fail(V, b, in, "t.atomic_add: an atomic tensor, and a tile of its dtype at u64 tile coordinates "
                     "(or at a u64 index tile of its shape, rank 1)");
    break;
  }
  case OXI_BR: if (!in->target[0]) fail(V, b, in, "branch without target"); break;
  case OXI_CONDBR:
    if (!in->target[0] || !in->target[1] || t0 != OX_BOOL) fail(V, b, in, "condbr needs bool and 2 targets");
    break;
  case OXI_RET: break;
  default: fail(V, b, in, "unknown op"); break;
  }
  if (in->op == OXI_ASSUME && (in->nops != 1 || t0 != OX_BOOL))
    fail(V, b, in, "assume of a non-bool");
  /* Tile values: only in tile kernels, and elementwise operands share the
   * result's shape (the front end splats scalars and rejects mixed shapes). */
  bool elementwise = in->op == OXI_BIN || in->op == OXI_CMP || in->op == OXI_NEG || in->op == OXI_NOT ||
                     in->op == OXI_CAST || in->op == OXI_SELECT || in->op == OXI_MATH;
  if (!k->is_tile) {
    if (in->tshape || (in->op >= OXI_T_LOAD && in->op <= OXI_T_ATOMIC_ADD))
      fail(V, b, in, "tile value or op outside a tile kernel (or after the tile lowering)");
  } else if (elementwise) {
    for (int i = 0; i < in->nops; i++) {
      const oxi_tshape *a = in->ops[i]->tshape, *r = in->tshape;
      if (in->op == OXI_SELECT && i == 0 && !a)
        continue; /* a scalar condition */
      bool same = (a == NULL) == (r == NULL);
      if (same && a) {
        same = a->rank == r->rank;
        for (int d = 0; same && d < a->rank; d++)
          same = a->dims[d] == r->dims[d];
      }
      if (!same)
        fail(V, b, in, "elementwise operands must have the result's tile shape");
    }
  } else if (in->tshape && (in->op < OXI_T_LOAD || in->op > OXI_T_ATOMIC_ADD) && in->op != OXI_VAR_GET) {
    fail(V, b, in, "only tile ops and elementwise ops make tile values");
  }
}

bool oxi_verify(const oxi_module *m, oxb_str *err) {
  bool all_ok = true;
  for (int ki = 0; ki < m->kernels.len; ki++) {
    const oxi_kernel *k = m->kernels.items[ki];
    verifier V = {k, err, true, NULL, NULL, NULL, NULL};
    if (!k->blocks.len) {
      fail(&V, NULL, NULL, "kernel has no blocks");
      all_ok = false;
      continue;
    }
    V.def_block = oxb_malloc(sizeof(int) * (size_t)(k->next_id + 1));
    V.def_pos = oxb_malloc(sizeof(int) * (size_t)(k->next_id + 1));
    for (int i = 0; i <= k->next_id; i++)
      V.def_block[i] = -1;
    for (int bi = 0; bi < k->blocks.len; bi++) {
      const oxi_block *b = k->blocks.items[bi];
      if (b->id != bi)
        fail(&V, b, NULL, "block numbering");
      if (!oxi_terminator(b))
        fail(&V, b, NULL, "block does not end in a terminator");
      for (int ii = 0; ii < b->instrs.len; ii++) {
        const oxi_instr *in = b->instrs.items[ii];
        bool term = in->op == OXI_BR || in->op == OXI_CONDBR || in->op == OXI_RET;
        if (term && ii != b->instrs.len - 1)
          fail(&V, b, in, "terminator in the middle of a block");
        if (in->id >= 0) {
          if (in->id >= k->next_id || V.def_block[in->id] >= 0)
            fail(&V, b, in, "value defined twice");
          else {
            V.def_block[in->id] = bi;
            V.def_pos[in->id] = ii;
          }
        }
        for (int t = 0; t < 2; t++)
          if (in->target[t] && (in->target[t]->id < 0 || in->target[t]->id >= k->blocks.len ||
                                k->blocks.items[in->target[t]->id] != in->target[t]))
            fail(&V, b, in, "branch to a block of another kernel");
      }
    }
    if (V.ok && !compute_dominators(&V))
      fail(&V, NULL, NULL, "out of memory");
    if (V.ok) {
      for (int bi = 0; bi < k->blocks.len; bi++) {
        const oxi_block *b = k->blocks.items[bi];
        for (int ii = 0; ii < b->instrs.len; ii++)
          verify_instr(&V, b, ii, b->instrs.items[ii]);
      }
    }
    free(V.def_block);
    free(V.def_pos);
    free(V.pre);
    free(V.post);
    all_ok &= V.ok;
  }
  return all_ok;
}
