/* stride.c - whether a kernel's grid_stride loops may give their elements to
 * any thread in any order. On the GPU an element's owner is fixed, (element /
 * 4) mod T; a CPU core running a block's threads in turn would then walk
 * memory with the grid's stride, a thread at a time. Where the owner makes no
 * difference, the CPU runs each loop block by block over contiguous runs of
 * elements instead (stmt.c: grid_stride_for).
 *
 * The owner makes no difference when what the loop does for element i
 * depends on i and on memory alone. Its body, and the functions it calls:
 *   - read no thread or block identity and no warp or barrier operation
 *     (thread::*, warp::*, sync_threads);
 *   - assign no variable declared outside the loop: nothing is carried from
 *     one element to the next or out of the loop (a per-thread sum is), and
 *     no local or shared array declared outside it is written. Writes
 *     through the kernel's slice parameters are memory, the same whichever
 *     thread makes them;
 *   - neither break out of the loop nor return.
 * Every grid_stride loop of the kernel must qualify, so that an element has
 * one owner in all of them (the CPU's owner does not depend on the limit).
 * And the kernel as a whole reads no thread identity and takes no atomic's
 * result (a ticket) outside its grid_stride loops: then every value the loops
 * read from before them is the same in every thread. */
#include <string.h>

#include "front/sema.h"

enum { MAX_NAMES = 256, MAX_DEPTH = 16 };

typedef struct scan {
  const oxf_program *prog;
  const oxf_fn *kernel;
  const char *names[MAX_NAMES]; /* declared inside the loop (or the called function), in scope */
  int nnames;
  int inner; /* loops nested inside the grid_stride loop: a break there is theirs */
  int depth; /* calls followed */
  bool callee;
  bool pure;
} scan;

static void walk(scan *s, const oxf_node *n);

static void declare(scan *s, const char *name) {
  if (!name)
    return;
  if (s->nnames == MAX_NAMES) {
    s->pure = false; /* too many to follow: the GPU's owners, which are always right */
    return;
  }
  s->names[s->nnames++] = name;
}

static bool declared(const scan *s, const char *name) {
  for (int i = s->nnames - 1; i >= 0; i--)
    if (!strcmp(s->names[i], name))
      return true;
  return false;
}

static bool kernel_param(const scan *s, const char *name) {
  for (int i = 0; i < s->kernel->params.len; i++)
    if (!strcmp(((const oxf_param *)s->kernel->params.items[i])->name, name))
      return true;
  return false;
}

static const oxf_fn *function(const scan *s, const char *name) {
  for (int i = 0; i < s->prog->fns.len; i++) {
    const oxf_fn *f = s->prog->fns.items[i];
    if (!f->is_kernel && !f->is_tile && !strcmp(f->name, name))
      return f;
  }
  return NULL;
}

static bool starts(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

/* An assignment to `lhs`: to a variable of the loop (or of the called
 * function), or to memory through a slice parameter of the kernel. */
static void assigned(scan *s, const oxf_node *lhs) {
  const oxf_node *root = lhs;
  while (root && (root->kind == OXF_INDEX || root->kind == OXF_UNARY || root->kind == OXF_FIELD))
    root = root->lhs;
  if (!root || root->kind != OXF_NAME) {
    s->pure = false;
    return;
  }
  if (declared(s, root->name))
    return;
  /* a parameter's memory (root indexed: `y[j] = ..`), not a scalar parameter itself */
  if (!s->callee && root != lhs && kernel_param(s, root->name))
    return;
  s->pure = false;
}

static void walk_all(scan *s, const oxb_vec *v) {
  for (int i = 0; i < v->len && s->pure; i++)
    walk(s, v->items[i]);
}

static void walk(scan *s, const oxf_node *n) {
  if (!n || !s->pure)
    return;
  int saved = s->nnames;
  switch (n->kind) {
  case OXF_CALL: {
    if (starts(n->name, "thread::") || starts(n->name, "warp::") || starts(n->name, "block::") ||
        !strcmp(n->name, "sync_threads")) {
      s->pure = false;
      return;
    }
    walk_all(s, &n->args);
    const oxf_fn *f = function(s, n->name);
    if (f) {
      if (s->depth == MAX_DEPTH) {
        s->pure = false;
        return;
      }
      scan c = *s;
      c.nnames = 0, c.inner = 0, c.depth++, c.callee = true;
      for (int i = 0; i < f->params.len; i++)
        declare(&c, ((const oxf_param *)f->params.items[i])->name);
      walk(&c, f->body);
      s->pure = c.pure;
    }
    return;
  }
  case OXF_ASSIGN:
    assigned(s, n->lhs);
    walk(s, n->lhs);
    walk(s, n->rhs);
    return;
  case OXF_LET:
    walk(s, n->init);
    declare(s, n->name);
    for (int i = 0; i < n->args.len; i++)
      declare(s, ((const oxf_node *)n->args.items[i])->name);
    return; /* in scope until the enclosing block ends */
  case OXF_BREAK:
    s->pure &= s->inner > 0 || s->callee;
    return;
  case OXF_RETURN:
    s->pure &= s->callee;
    walk(s, n->lhs);
    return;
  case OXF_WHILE:
  case OXF_LOOP:
  case OXF_FOR:
    walk(s, n->cond);
    walk(s, n->init);
    walk(s, n->step);
    s->inner++;
    declare(s, n->kind == OXF_FOR ? n->name : NULL);
    walk(s, n->body);
    s->inner--;
    break;
  case OXF_IF_LET:
    walk(s, n->lhs);
    declare(s, n->name);
    walk(s, n->then);
    s->nnames = saved;
    walk(s, n->els);
    break;
  default:
    walk(s, n->lhs);
    walk(s, n->rhs);
    walk(s, n->cond);
    walk(s, n->then);
    walk(s, n->els);
    walk(s, n->body);
    walk(s, n->init);
    walk(s, n->step);
    walk_all(s, &n->args);
    walk(s, n->value);
    break;
  }
  s->nnames = saved; /* a block's (a loop's, a branch's) names end with it */
}

static bool is_stride(const oxf_node *n) {
  return n->kind == OXF_FOR && n->init && n->init->kind == OXF_CALL && !strcmp(n->init->name, "thread::grid_stride");
}

/* No thread identity anywhere under `n` (in the kernel or a function it
 * calls) but grid_stride itself, and no atomic read-modify-write outside the
 * grid_stride loops (`in_loop`). */
static void identity_free(scan *s, const oxf_node *n, bool in_loop) {
  if (!n || !s->pure)
    return;
  if (n->kind == OXF_CALL && !is_stride(n) && strcmp(n->name, "thread::grid_stride") &&
      (starts(n->name, "thread::") || starts(n->name, "warp::") || starts(n->name, "block::") ||
       !strcmp(n->name, "sync_threads"))) {
    s->pure = false;
    return;
  }
  if (n->kind == OXF_METHOD && !in_loop && n->name && starts(n->name, "atomic_")) { /* its old value: a ticket */
    s->pure = false;
    return;
  }
  const oxf_fn *f = n->kind == OXF_CALL ? function(s, n->name) : NULL;
  if (f) {
    if (s->depth == MAX_DEPTH) {
      s->pure = false;
      return;
    }
    s->depth++;
    identity_free(s, f->body, in_loop);
    s->depth--;
  }
  in_loop |= is_stride(n);
  const oxf_node *kids[] = {n->lhs, n->rhs, n->cond, n->then, n->els, n->body, n->init, n->step, n->value};
  for (size_t i = 0; i < sizeof kids / sizeof *kids; i++)
    identity_free(s, kids[i], in_loop);
  for (int i = 0; i < n->args.len; i++)
    identity_free(s, n->args.items[i], in_loop);
}

/* Every grid_stride loop under `n` (in the kernel or a function it calls)
 * qualifies. */
static bool loops_pure(scan *s, const oxf_node *n) {
  if (!n || !s->pure)
    return s->pure;
  if (is_stride(n)) {
    scan b = *s;
    b.nnames = 0, b.inner = 0, b.callee = false;
    declare(&b, n->name);
    walk(&b, n->body);
    walk_all(&b, &n->init->args);
    s->pure = b.pure;
    return s->pure;
  }
  const oxf_fn *f = n->kind == OXF_CALL ? function(s, n->name) : NULL;
  if (f && s->depth < MAX_DEPTH) {
    s->depth++;
    loops_pure(s, f->body);
    s->depth--;
  }
  const oxf_node *kids[] = {n->lhs, n->rhs, n->cond, n->then, n->els, n->body, n->init, n->step, n->value};
  for (size_t i = 0; i < sizeof kids / sizeof *kids; i++)
    loops_pure(s, kids[i]);
  for (int i = 0; i < n->args.len; i++)
    loops_pure(s, n->args.items[i]);
  return s->pure;
}

bool oxs_strides_any_owner(sema *S) {
  if (!S->stride_known) {
    scan s = {.prog = S->prog, .kernel = S->kfn, .pure = true};
    identity_free(&s, S->kfn->body, false);
    S->stride_any_owner = loops_pure(&s, S->kfn->body);
    S->stride_known = true;
  }
  return S->stride_any_owner;
}
