/*
 * sema.h - what the parts of semantic analysis share: build.c (errors, IR
 * emission, bindings), sema.c (the language as a whole, SIMT kernels, device
 * functions), tile.c (#[tile] kernels: tensors, tiles, their ops) and check.c
 * (the program kernel by kernel). Internal to core/front; prefix oxs_.
 */
#ifndef OXIDE_SEMA_H
#define OXIDE_SEMA_H

#include "front/front.h"
#include "front/limits.h"

/* ---------------------------------------------------------------- values */

typedef enum vkind {
  V_ERR,     /* an error was reported; suppress follow-on errors */
  V_UNIT,    /* () */
  V_SCALAR,  /* v: a scalar SSA value */
  V_WITNESS, /* a thread-index witness (binding b) */
  V_MEM,     /* a slice parameter, shared array or tensor parameter (binding b) */
  V_OPTION,  /* the Option that get_mut returns: mem + witness */
  V_MUTREF,  /* `out` of if-let Some(out) = c.get_mut(i) */
  V_NEVER,   /* the expression does not complete (return/break) */
  V_TILE,    /* v: a tile value (v->tshape set, v->type its dtype); tile kernels only */
  V_PART,    /* x.partition([..]) of a tensor parameter (binding b, kind B_PART) */
  V_TUPLE    /* (a, b, ...): binding b (kind B_TUPLE, maybe unnamed) holds its values */
} vkind;

typedef struct oxs_tuple { /* a tuple's values (tuple.c) */
  int n;
  oxi_instr *v[OXF_MAX_TUPLE];
} oxs_tuple;

typedef struct binding binding;

typedef struct val {
  vkind k;
  oxi_instr *v;
  binding *b;   /* V_WITNESS, V_MEM, V_MUTREF, V_PART */
  binding *w;   /* V_OPTION: the witness */
} val; /* (4 words: values are passed by value through deep recursions) */

typedef enum bkind { B_VALUE, B_SLOT, B_MEM, B_WITNESS, B_MUTREF, B_PART, B_TUPLE } bkind;

/* How a witness deals out the elements (section 6 of docs/language.md): each kind
 * gives element e to one thread, but to a different one per kind, so an output is
 * written through one kind only (index_2d: with one width, the same for every thread). */
typedef enum wkind { W_NONE, W_INDEX_1D, W_INDEX_2D, W_BLOCK, W_STRIDE, W_CHUNK } wkind;

typedef struct name_rec name_rec; /* sema.c: the bindings of one name */

struct binding {
  bkind kind;
  const char *name;
  /* lookup by name in constant time: the name's record, this binding's
   * index in sema.binds, and the index of the binding of the same name it
   * hides (-1 if none) */
  name_rec *rec;
  int idx, shadow;
  oxb_loc loc;
  oxi_type type;    /* B_VALUE, B_SLOT; element type for B_MEM/B_MUTREF/B_PART */
  oxi_instr *v;     /* B_VALUE: the value; B_WITNESS: the index (u64); B_MUTREF: index */
  oxi_instr *row, *col; /* B_WITNESS from index_2d */
  /* B_WITNESS: its kind, and index_2d's width (launch-uniform). B_MEM of a
   * DisjointSlice: the kind and width of the first witness given to its get_mut,
   * and where (W_NONE before any) */
  wkind wk;
  oxi_instr *width;
  oxb_loc wloc;
  int slot;         /* B_SLOT */
  oxi_mem mem;      /* B_MEM, B_MUTREF, B_PART */
  oxf_tykind mkind; /* B_MEM: what kind of memory (slice, disjoint, shared, tensor...) */
  bool is_mut;      /* B_SLOT */
  bool poisoned;    /* a 'let' whose value had an error: uses give V_ERR, silently */
  /* B_MEM of an &mut Tensor: its tile shape; B_PART: the partition's tile shape */
  const oxi_tshape *tile;
  const oxs_tuple *tuple; /* B_TUPLE: its values */
  /* a const generic of a tile kernel (B_VALUE, v NULL): its bound value */
  bool is_generic;
  int64_t gval;
};

typedef struct fact { /* witness w is < len(mem) here */
  binding *w;
  oxi_mem mem;
} fact;

typedef struct loopctx {
  oxi_block *brk, *cont;
} loopctx;

typedef struct frame { /* an inlined device-function call */
  const oxf_fn *fn;
  oxb_loc call;  /* the call, for the notes of a size-limit error */
  oxi_block *exit;
  int ret_slot; /* -1 for () and tuples */
  oxi_type ret_type;
  int nret;     /* a tuple's values (0: not a tuple), each in its slot */
  int ret_slots[OXF_MAX_TUPLE];
  oxi_type ret_types[OXF_MAX_TUPLE];
  int base;     /* bindings below this index are invisible */
  int loop_base;
} frame;

typedef struct sema {
  oxb_arena *a;
  oxb_diags *d;
  const oxf_program *prog;
  oxi_module *m;
  oxi_kernel *k;
  const oxf_fn *kfn;
  bool stride_known, stride_any_owner; /* oxs_strides_any_owner's answer for this kernel */
  oxi_block *cur;
  binding **binds;
  int nbinds, capbinds;
  name_rec **names; /* hash table of the names bound so far (open addressing) */
  int nnames, capnames;
  fact *facts;
  int nfacts, capfacts;
  loopctx loops[OXF_MAX_LOOP_NESTING];
  int nloops;
  frame frames[OXF_MAX_INLINE_DEPTH];
  int nframes;
  int unsafe_depth;
  /* device functions inlined somewhere (the others are checked on their own) */
  const oxf_fn *called[OXF_MAX_FUNCTIONS];
  int ncalled;
  /* for the size limits (limits.h): the construct being lowered (where an
   * instruction-count limit reports), the device-function calls inlined into
   * this kernel, and the instructions made for the whole source */
  oxb_loc at;
  int ncalls;
  int64_t local_bytes; /* in the kernel's own arrays so far (local.c) */
  /* the statements after the one being checked in its block, and the block's value: a
     'let' scope, where an untyped literal's variable may find its type (infer.c) */
  const oxf_node *const *rest;
  int nrest;
  const oxf_node *rest_value;
  int64_t emitted;
  bool source_full; /* the source's instruction limit was reported: lower nothing more */
  /* launch-contract relations len(a) >= len(b), as param-index pairs */
  int rel_ge[32][2];
  int nrel;
  /* hashes of the errors reported so far (see oxs_error) */
  uint64_t *seen;
  int nseen, capseen;
  bool too_big; /* this kernel crossed a size limit (reported once): lower nothing more */
  /* a #[tile] kernel is being checked: tile values and ops are allowed, SIMT
   * builtins are not */
  bool is_tile;
  binding *out; /* its first &mut Tensor parameter: tile_id/num_tiles refer to it */
  /* checks and lowers statement n: oxs_stmt (stmt.c), set by check.c, so that sema.c's
     expressions reach statements (blocks) without sema.c and stmt.c calling each other */
  void (*stmt)(struct sema *S, const oxf_node *n);
  /* the tile calls, methods and broadcasting (tile.c), set by check.c for the same reason:
     tile.c checks their arguments with sema.c's expressions */
  val (*tile_call)(struct sema *S, const oxf_node *n, oxi_type hint, bool *handled);
  val (*tile_method)(struct sema *S, const oxf_node *n, val recv, oxi_type hint);
  bool (*tile_unify)(struct sema *S, oxb_loc loc, oxi_instr **ops, int n);
  /* philox, rand, randint, randn (rng.c), set by check.c for the same reason */
  val (*rng_call)(struct sema *S, const oxf_node *n, oxi_type hint, bool *handled);
  val (*local_array)(struct sema *S, const oxf_node *n, oxi_type hint); /* local.c */
  val (*tuple)(struct sema *S, const oxf_node *n, oxi_type hint);       /* tuple.c */
  val (*call_fn)(struct sema *S, const oxf_node *n, const oxf_fn *fn, oxi_type hint); /* inline.c */
} sema;

/* ---- build.c: errors, size limits, emitting IR, bindings, facts */

/* Reports an error once per location and message (code checked several times
 * would repeat it). Returns whether it reported. */
bool oxs_error(sema *S, oxb_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define ERR(S, loc, ...) oxs_error((S), (loc), __VA_ARGS__)
/* Reports a size limit (limits.h) crossed at `loc`, once for the kernel, with
 * the chain of inlined calls that led there; lowers nothing more of it. */
void oxs_size_error(sema *S, oxb_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "kernel 'k'" or "device function 'f'": what is being checked. */
const char *oxs_unit_name(sema *S);
/* Starts checking kernel (or device function) `fn` into `k`: per-kernel state reset. */
void oxs_begin(sema *S, const oxf_fn *fn, oxi_kernel *k);
val oxs_value(oxi_instr *v); /* V_TILE if v has a tile shape, else V_SCALAR */
bool oxs_is_numeric(oxi_type t);
const char *oxs_vdesc(sema *S, val v); /* what a value is, for messages */

/* Emits into the current block (opening a new one after a terminator). */
oxi_instr *oxs_emit(sema *S, oxi_op op, oxi_type t);
/* The same into the current block, which must be open (oxs_ensure_open). */
oxi_instr *oxs_append(sema *S, oxi_op op, oxi_type t);
/* Counts a loop of the kernel being checked at `loc` (the loop limit). */
void oxs_count_loop(sema *S, oxb_loc loc);
oxi_block *oxs_new_block(sema *S);
void oxs_set_block(sema *S, oxi_block *b); /* continues in b */
bool oxs_terminated(sema *S);              /* the current block has its terminator */
void oxs_br(sema *S, oxi_block *to);       /* unless terminated */
void oxs_condbr(sema *S, oxi_instr *c, oxi_block *t, oxi_block *f);
void oxs_ensure_open(sema *S); /* a new block after a terminator (code after return) */
oxi_instr *oxs_const_int(sema *S, oxi_type t, uint64_t v);
oxi_instr *oxs_const_float(sema *S, oxi_type t, double v);
/* A unary / binary operation `op` (`sub`: its kind) of type t; an elementwise one takes its
 * operands' tile shape. */
oxi_instr *oxs_op1(sema *S, oxi_op op, int sub, oxi_type t, oxi_instr *a);
oxi_instr *oxs_op2(sema *S, oxi_op op, int sub, oxi_type t, oxi_instr *a, oxi_instr *b);
oxi_instr *oxs_cast_to(sema *S, oxi_instr *v, oxi_type t); /* v converted to t (no-op if it is t) */
oxi_instr *oxs_sreg(sema *S, int which);   /* a special register (u32) */
oxi_instr *oxs_sreg64(sema *S, int which); /* ... widened to u64 */
oxi_instr *oxs_var_get(sema *S, int slot);
void oxs_var_set(sema *S, int slot, oxi_instr *v);

/* Element idx[0..rank) of tensor parameter x, 0 outside it (tile kernels). */
oxi_instr *oxs_tensor_element(sema *S, const binding *x, oxi_instr *const *idx, int rank);
/* Element idx[0..rank) of tile t as a scalar, 0 outside it (tile kernels). */
oxi_instr *oxs_tile_element(sema *S, oxi_instr *t, oxi_instr *const *idx);
/* The thread's linear index in the grid (u64): unique per thread. */
oxi_instr *oxs_linear_index(sema *S);
/* stride.c: whether every grid_stride loop of the kernel may give its elements to any
 * thread in any order (the CPU then runs them over contiguous runs: stmt.c). */
bool oxs_strides_any_owner(sema *S);
/* Binds `name` (in the current scope) as a new binding of `kind`. */
binding *oxs_bind(sema *S, bkind kind, const char *name, oxb_loc loc);
/* Gives binding b (made without one) the name `name`, hiding earlier ones. */
void oxs_name_binding(sema *S, binding *b, const char *name);
void oxs_unbind_to(sema *S, int n); /* ends the scopes down to n bindings */
binding *oxs_lookup(sema *S, const char *name); /* the visible binding of `name`, or NULL */
/* Records that witness w is in bounds of `mem` (until its scope ends). */
void oxs_push_fact(sema *S, binding *w, oxi_mem mem);
/* Whether witness w is known in bounds of `mem` here. */
bool oxs_proven(sema *S, binding *w, oxi_mem mem);

/* "[128, 64]", in the arena. */
const char *oxs_shape_text(sema *S, const oxi_tshape *s);

/* ---- sema.c, for tile.c and check.c */
/* Reports parameter i of `fn` if an earlier one has its name. */
void oxs_check_param_name(sema *S, const oxf_fn *fn, int i);
/* Reports parameter p if it is tf32 (a compute type that no tensor, slice or
 * launch argument holds). Returns whether it reported. */
bool oxs_check_param_dtype(sema *S, const oxf_param *p);
val oxs_expr(sema *S, const oxf_node *n, oxi_type hint);
val oxs_block_expr(sema *S, const oxf_node *n, oxi_type hint);
/* A scalar (tiles are refused), or with `tiles` a scalar or a tile; reports
 * `what` otherwise and returns NULL. */
oxi_instr *oxs_operand(sema *S, const oxf_node *n, oxi_type hint, const char *what, bool tiles);
bool oxs_untyped_literal(const oxf_node *n);
/* A type's named constant: `name` is "T::C" with T a scalar type (not tf32)
 * and C one of MAX and MIN (the largest finite value and its negation for
 * floats), and for floats INFINITY, NEG_INFINITY, NAN and EPSILON. Sets its
 * type and value (imm for integers, fimm for floats); false if it is none. */
bool oxs_type_constant(const char *name, oxi_type *t, uint64_t *imm, double *fimm);
/* ---- inline.c: device-function calls */
/* Call n of device function fn, inlined; its value. */
val oxs_call_fn(sema *S, const oxf_node *n, const oxf_fn *fn, oxi_type hint);
/* Checks device function fn's body, inlined at `call` with its parameters
 * bound to argb; its value (none for a unit function). */
val oxs_inline_body(sema *S, const oxf_fn *fn, binding **argb, oxb_loc call);

/* Arguments of call n: exactly `want`, else an error naming `name`. */
bool oxs_argc(sema *S, const oxf_node *n, int want, const char *name);
/* A scalar; reports `what` otherwise and returns NULL. */
oxi_instr *oxs_scalar_expr(sema *S, const oxf_node *n, oxi_type hint, const char *what);
/* The text of index expression n ("a[i]"), for bounds-check messages. */
const char *oxs_access_text(sema *S, const oxf_node *n);
/* An index: a usize scalar, or a witness (*w, which may prove the access). */
oxi_instr *oxs_index_value(sema *S, const oxf_node *n, binding **w);
/* A load or store `op` of memory binding mb at idx, bounds-checked (the
 * check reports `what` at `loc`) unless witness w is proven in bounds or the
 * code is unsafe. */
oxi_instr *oxs_mem_access(sema *S, oxi_op op, binding *mb, oxi_instr *idx, binding *w, oxb_loc loc,
                          const char *what);

/* ---- hints.c: what Oxide writes for a CUDA, Triton or NumPy name (in a tile
 * kernel when `tile`), or NULL */
const char *oxs_spelled_otherwise(bool tile, const char *name);

/* ---- rng.c: the random-number builtins; *handled says whether n is one */
val oxs_rng_call(sema *S, const oxf_node *n, oxi_type hint, bool *handled);

/* ---- tile_ops.c, for tile.c: tile sizes and shapes as the source writes
 * them, and the tile built-ins it checks (scans, sorts, top-k, cat, zeros,
 * ones); it calls nothing of tile.c */
/* Elements a tile holds at most: what the tile lowering handles. */
#define OXS_MAX_TILE_ELEMS ((int64_t)1 << 16)

/* A tile size: an integer literal, a const generic, or an expression of them
 * with + - * / % << >> and casts ([D / 2, BM * 2]), evaluated now (the generics
 * are bound); `text` says how it came about, for messages ("B = 12", "12").
 * Reports and returns false otherwise. */
bool oxs_const_size(sema *S, const oxf_node *e, int64_t *v, char *text, size_t n);
/* A tile shape of `rank` dims, in the arena. */
oxi_tshape *oxs_new_shape(sema *S, int rank, const int64_t *dims);
/* A static tile shape written as an array: sizes (oxs_const_size), each a power
 * of two, at most OXS_MAX_TILE_ELEMS elements; `what` names it in messages. */
const oxi_tshape *oxs_shape_arg(sema *S, const oxf_node *a, const char *what);
/* cumsum, cumprod, cummax, cummin, sort, argsort, topk, topk_indices, cat,
 * zeros, ones: sets *handled when `n` calls one of them (and the program has no
 * device function of that name, which takes the call instead). */
val oxs_tile_op_call(sema *S, const oxf_node *n, oxi_type hint, bool *handled);

/* ---- infer.c: the type an untyped literal's variable `name` takes from its
 * first use in stmts[0..nstmts) and value (its scope) that says one, of the
 * literal's kind (is_float); OXI_VOID if none does */
oxi_type oxs_infer_type(sema *S, const char *name, bool is_float, const oxf_node *const *stmts, int nstmts,
                        const oxf_node *value);
/* Whether n is untyped literals and arithmetic alone (`8`, `(3) + 1`): its type is the context's. */
bool oxs_untyped_expr(const oxf_node *n);

/* ---- tuple.c: tuples, (a, b) and t.0 (oxs_tuple_expr), their bindings
 * (let t = .., let (a, mut b) = ..) and a device function's tuple result */
val oxs_tuple_expr(sema *S, const oxf_node *n, oxi_type hint);
/* The tuple value of t's values. */
val oxs_tuple_val(sema *S, const oxs_tuple *t);
/* Binds the names of 'let' n to tuple v (one name: the tuple; a pattern: its values). */
void oxs_let_tuple(sema *S, const oxf_node *n, val v);
/* Sets the result slots of inlined call f from v (a return's or the body's value) at `at`. */
void oxs_return_tuple(sema *S, frame *f, val v, oxb_loc at);
/* The result of inlined call f: its slots' values. */
val oxs_tuple_result(sema *S, const frame *f);
/* Makes the result slots of inlined call f for tuple type t; false after an error. */
bool oxs_tuple_frame(sema *S, frame *f, const oxf_typeexpr *t);

/* ---- local.c: a thread's own array, `[v; n]` or `[a, b, ..]` (SIMT kernels) */
val oxs_local_array(sema *S, const oxf_node *n, oxi_type hint);

/* ---- own.c: the ownership rule across witnesses */
/* Whether v is the same in every thread and everywhere in the kernel; reports
 * `what` at `at` otherwise. */
bool oxs_check_uniform(sema *S, const oxi_instr *v, oxb_loc at, const char *what);
/* Output `out` (a DisjointSlice) is written through witness w at `at`: reports
 * a witness of another kind (or index_2d width) than its first one, in safe kernels. */
bool oxs_claim(sema *S, binding *out, const binding *w, oxb_loc at);
/* thread::index_chunk(n), n a uniform usize: a witness for the n elements
 * from t * n (t the thread's linear index), itself naming the first. */
binding *oxs_chunk_witness(sema *S, oxi_instr *n, oxb_loc loc);
/* c.at(j) of chunk witness c: element j of the chunk (no element where j >= n). */
binding *oxs_chunk_at(sema *S, const binding *c, oxi_instr *j, oxb_loc loc);

/* ---- stmt.c */
void oxs_stmt(sema *S, const oxf_node *n);

/* ---- tile.c */
/* Checks and lowers #[tile] function `fn` into a new kernel of S->m, its const
 * generics bound to `generics`. */
void oxs_tile_kernel(sema *S, const oxf_fn *fn, const int64_t *generics);
/* Makes the operands of one elementwise op the same shape: when one is a
 * tile, scalars are splatted to its shape; tiles of different shapes are an
 * error (reported at `loc`; returns false). Without tiles, does nothing. */
bool oxs_tile_unify(sema *S, oxb_loc loc, oxi_instr **ops, int n);
/* The same, where the result must have `shape` (an assignment to a tile). */
bool oxs_tile_unify_to(sema *S, oxb_loc loc, oxi_instr **ops, int n, const oxi_tshape *shape);
/* Tile builtins (load_tile_like, tile_id, num_tiles, select): sets *handled
 * when `n` names one. */
val oxs_tile_call(sema *S, const oxf_node *n, oxi_type hint, bool *handled);
/* Methods of tensor parameters and partitions. */
val oxs_tile_method(sema *S, const oxf_node *n, val recv, oxi_type hint);

#endif
