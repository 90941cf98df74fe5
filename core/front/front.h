/*
 * front.h - the front end: lexer, parser, syntax tree, and semantic analysis
 * (types, ownership rules, bounds-check proofs), which lowers a checked program
 * to Oxide IR. Prefix: oxf_.
 *
 * Everything a compilation allocates lives in one arena (base.h), so an error
 * anywhere cannot leak.
 */
#ifndef OXIDE_FRONT_H
#define OXIDE_FRONT_H

#include "base/base.h"
#include "ir/ir.h"

/* ------------------------------------------------------------------ tokens */

typedef enum oxf_tok_kind {
  OXF_TK_IDENT,
  OXF_TK_INT,
  OXF_TK_FLOAT,
  OXF_TK_PUNCT,   /* operators and delimiters */
  OXF_TK_KEYWORD, /* fn let mut if else ... */
  OXF_TK_EOF
} oxf_tok_kind;

typedef struct oxf_token oxf_token;
struct oxf_token {
  oxf_tok_kind kind;
  const char *text; /* points into the source */
  int len;
  oxb_loc loc;
  uint64_t ival;   /* integer literal value (saturated flag below) */
  double fval;     /* float literal value */
  int suffix;      /* literal suffix as an ox_dtype + 1, 0 if none */
  bool overflow;   /* integer literal does not fit in 64 bits */
  oxf_token *next;
};

/* Splits `src` into tokens. Lexical errors go to `d`; the list always ends
 * with an EOF token. */
oxf_token *oxf_tokenize(oxb_arena *a, oxb_diags *d, const oxb_source *src);

/* ------------------------------------------------------------- syntax tree */

/* Types as written. */
typedef enum oxf_tykind {
  OXF_TY_SCALAR,   /* bool, i32, f32, ... (dtype) */
  OXF_TY_SLICE,    /* &[T]: shared, read-only */
  OXF_TY_MUTSLICE, /* &mut [T]: only in unsafe kernels */
  OXF_TY_ATOMIC,   /* &[Atomic<T>]: shared, atomic updates only */
  OXF_TY_DISJOINT, /* DisjointSlice<T>: each thread writes only its element */
  OXF_TY_SHARED,   /* SharedArray<T, N>: block-shared memory */
  OXF_TY_UNIT,     /* () */
  OXF_TY_TENSOR,   /* &Tensor<T, [dims]>: a whole tensor, read-only (#[tile] kernels) */
  OXF_TY_MUTTENSOR, /* &mut Tensor<T, [tile]>: the block's tile of an output (#[tile] kernels) */
  OXF_TY_ATOMICTENSOR, /* &Tensor<Atomic<T>, [dims]>: a whole tensor blocks add into atomically */
  OXF_TY_TYPEPARAM, /* the declaration of a type generic `T: Float` (oxf_fn.generic_types only) */
  OXF_TY_ARRAY,     /* [T; N]: a thread's own array (`let mut a = [0.0f32; 16];`, SIMT kernels) */
  OXF_TY_TUPLE      /* (T1, T2, ...): a device function's several results (items) */
} oxf_tykind;

/* What a type generic admits (`<T: Float>`): its bound. */
typedef enum oxf_bound {
  OXF_BOUND_FLOAT = 1, /* f16, bf16, f32, f64 */
  OXF_BOUND_INT,       /* i8 .. i64, u8 .. u64 */
  OXF_BOUND_NUM        /* either */
} oxf_bound;

/* A tensor dim as written: >= 1 a literal, OXF_DIM_DYNAMIC (-1, bound at
 * launch), or <= -2 for the function's const generic number g (-2 - g). */
#define OXF_DIM_DYNAMIC (-1)
#define OXF_DIM_GENERIC(g) (-2 - (int64_t)(g))
#define OXF_DIM_IS_GENERIC(d) ((d) <= -2)
#define OXF_DIM_GENERIC_INDEX(d) ((int)(-2 - (d)))

typedef struct oxf_typeexpr {
  oxf_tykind kind;
  ox_dtype elem; /* scalar type, or element type of slices/arrays/tensors */
  int tvar;      /* elem is the function's type generic number tvar - 1 (elem holds its
                    placeholder until oxf_instantiate replaces it); 0: elem as written */
  oxf_bound bound; /* OXF_TY_TYPEPARAM: the generic's bound */
  struct oxf_typeexpr **items; /* OXF_TY_TUPLE: its element types (scalars) */
  int nitems;
  int64_t count; /* SharedArray and [T; N] length */
  int rank;      /* tensors: 1..OXI_MAX_RANK dims (see OXF_DIM_*) */
  int64_t dims[OXI_MAX_RANK];
  oxb_loc loc;
} oxf_typeexpr;

typedef enum oxf_node_kind {
  /* expressions */
  OXF_INT,    /* ival, suffix */
  OXF_FLOAT,  /* fval, suffix */
  OXF_BOOL,   /* ival */
  OXF_NAME,   /* a variable or parameter: name */
  OXF_CALL,   /* path(args): name = "thread::index_1d", generics in `gen` */
  OXF_METHOD, /* lhs.name(args) */
  OXF_INDEX,  /* lhs[rhs] */
  OXF_UNARY,  /* op lhs: '-', '!', '*' (deref) */
  OXF_BINARY, /* lhs op rhs */
  OXF_CAST,   /* lhs as type */
  OXF_IF,     /* if cond then [else els]; also an expression */
  OXF_BLOCK,  /* { stmts; value } */
  OXF_RANGE,  /* lhs..rhs (only as a for-loop range) */
  OXF_ASSIGN, /* lhs op= rhs; op is 0 for plain '=' */
  /* statements */
  OXF_LET,     /* let [mut] name[: type] = init; let (a, mut b, _) = init: name NULL and
                  the names in args (OXF_NAME nodes, is_mut each) */
  OXF_EXPR,    /* expression statement */
  OXF_WHILE,   /* while cond body */
  OXF_LOOP,    /* loop body */
  OXF_FOR,     /* for name in range [.step_by(step)] body */
  OXF_BREAK,
  OXF_CONTINUE,
  OXF_RETURN,  /* return [lhs] */
  OXF_IF_LET,  /* if let Some(name) = lhs then [else els] */
  OXF_UNSAFE,  /* unsafe { body } */
  /* expressions, continued */
  OXF_ARRAY,   /* [e0, e1, ...]: args (sizes and indices of tile partitions and loads; a SIMT
                  thread's array); [e; n] (op 1): the value in args[0], the count in rhs */
  OXF_TYPE,    /* a type as a generic argument of a call path: type */
  OXF_TUPLE,   /* (e0, e1, ...): args */
  OXF_FIELD    /* lhs.N, an element of a tuple: N in ival */
} oxf_node_kind;

typedef struct oxf_node oxf_node;
struct oxf_node {
  oxf_node_kind kind;
  oxb_loc loc;
  const char *name;   /* identifiers, call paths, method names */
  int op;             /* operator: one of the OXF_OP_* values */
  oxf_node *lhs, *rhs;
  oxf_node *cond, *then, *els, *body, *init, *step;
  oxb_vec args;       /* call arguments; block statements */
  oxb_vec gen;        /* generic arguments of a call path: OXF_TYPE or OXF_INT nodes */
  oxf_typeexpr *type; /* let annotation, cast target */
  bool is_mut;        /* let mut */
  oxf_node *value;    /* a block's trailing expression */
  uint64_t ival;
  double fval;
  int suffix; /* literal suffix as an ox_dtype + 1 */
};

/* Binary and unary operators. */
enum {
  OXF_OP_ADD = 1, OXF_OP_SUB, OXF_OP_MUL, OXF_OP_DIV, OXF_OP_REM,
  OXF_OP_AND, OXF_OP_OR, OXF_OP_XOR, OXF_OP_SHL, OXF_OP_SHR,
  OXF_OP_EQ, OXF_OP_NE, OXF_OP_LT, OXF_OP_LE, OXF_OP_GT, OXF_OP_GE,
  OXF_OP_LAND, OXF_OP_LOR,
  OXF_OP_NEG, OXF_OP_NOT, OXF_OP_DEREF
};

typedef struct oxf_param {
  const char *name;
  oxf_typeexpr *type;
  oxb_loc loc;
} oxf_param;

typedef struct oxf_fn {
  const char *name;
  oxb_loc loc;
  bool is_kernel;
  bool is_tile;   /* #[tile]: a tile kernel (docs/tile-design.md) */
  bool is_unsafe;
  /* generics in declaration order: const generics of a #[tile] function
   * (<const B: i32, ...>) and type generics of any function (<T: Float, ...>) */
  oxb_vec generics;      /* const char*: the names */
  oxb_vec generic_types; /* oxf_typeexpr*: a const generic's integer type, or OXF_TY_TYPEPARAM
                            with the bound; at the names' locations */
  int ntypes;            /* how many of them are type generics */
  oxb_vec params; /* oxf_param* */
  oxf_typeexpr *ret; /* NULL: () */
  oxf_node *body;
  /* #[launch_contract(block = (x, y, z), requires = (e, ...))] */
  bool has_contract;
  int64_t block[3]; /* 0 = not given */
  oxb_loc contract_loc;
  oxb_vec requires; /* oxf_node* */
} oxf_fn;

typedef struct oxf_program {
  oxb_vec fns; /* oxf_fn* */
} oxf_program;

/* Parses a whole source file. Syntax errors go to `d`; the parser recovers at
 * statement and item boundaries so that several errors show in one pass. */
oxf_program *oxf_parse(oxb_arena *a, oxb_diags *d, const oxb_source *src);

/* The scalar type named name[0 .. len) ("f32", "usize", ...), if it is one. */
bool oxf_scalar_named(const char *name, size_t len, ox_dtype *out);

/* Appends a readable dump of the syntax tree to `out`. */
void oxf_dump(const oxf_program *p, oxb_str *out);

/* Checks types and ownership rules and lowers every #[kernel] function (with
 * device functions inlined) into `m`. #[tile] functions are checked too, each
 * with every const generic bound to a placeholder (OXF_TILE_PLACEHOLDER), so
 * that their errors show at compile time, but they are not added to `m`: they
 * are lowered per specialization by oxf_check_spec. Errors go to `d`; returns
 * false if any. */
bool oxf_check(oxb_arena *a, oxb_diags *d, const oxf_program *p, oxi_module *m);

#define OXF_TILE_PLACEHOLDER 16

/* Checks generic kernel `fn` of `p` (a #[tile] kernel, or a #[kernel] with
 * type generics) with its generics bound to generics[0 .. fn->generics.len)
 * (declaration order: a const generic's value, a type generic's ox_dtype + 1;
 * NULL: each one's placeholder, oxf_generic_placeholder) and lowers it: a new
 * kernel of `m` named fn->name (tile IR with is_tile set, for a #[tile]
 * kernel). Errors (also those of the binding: a tile shape that is not a
 * static power of two, a value that does not fit its generic's type, a dtype
 * outside a type generic's bound) go to `d`; returns false if any. */
bool oxf_check_spec(oxb_arena *a, oxb_diags *d, const oxf_program *p, const oxf_fn *fn,
                    const int64_t *generics, oxi_module *m);

/* ---------------------------------------------------------- type generics */

/* Whether generic g of fn is a type generic (`T: Float`), not a const one. */
bool oxf_is_type_generic(const oxf_fn *fn, int g);

/* Generic g's placeholder value, that a check without a binding gives it:
 * OXF_TILE_PLACEHOLDER for a const generic; for a type generic its bound's
 * first dtype (f32 for Float and Num, i32 for Int), + 1. */
int64_t oxf_generic_placeholder(const oxf_fn *fn, int g);

/* Whether `bound` admits dtype t. */
bool oxf_bound_admits(oxf_bound bound, ox_dtype t);

/* The bound's name as written ("Float"). */
const char *oxf_bound_name(oxf_bound bound);

/* fn with its type generics bound to generics[] (as oxf_check_spec takes
 * them, every value admitted by its bound): a copy whose every type written
 * with a type generic names the dtype instead; fn itself when it has no type
 * generics. The copy lives in `a`. */
const oxf_fn *oxf_instantiate(oxb_arena *a, const oxf_fn *fn, const int64_t *generics);

/* Name of an operator, for messages ("+", "<=", ...). */
const char *oxf_op_name(int op);

#endif
