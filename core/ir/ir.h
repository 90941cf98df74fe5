/*
 * ir.h - Oxide IR: a typed SSA IR shared by both pipelines. Prefix: oxi_.
 *
 * A module holds kernels. A kernel is a control-flow graph of basic blocks;
 * each instruction defines at most one value, once (SSA). Mutable source
 * variables live in typed variable slots (var.get / var.set), the way LLVM
 * front ends use allocas: the backend turns them into registers, so the front
 * end never has to place phi nodes itself. Memory is reached only through
 * memory references: a kernel's slice parameters and its shared arrays, each
 * with a length, so that every access can carry its bounds check.
 *
 * Device functions are inlined by the front end: the IR has no calls.
 */
#ifndef OXIDE_IR_H
#define OXIDE_IR_H

#include "base/base.h"

/* Value types: the scalar dtypes, plus void for instructions without a value,
 * plus v4: four 32-bit registers of one thread that a warp-wide matrix
 * instruction reads or writes (a tensor-core fragment; GPU lowering only),
 * plus vf32 x n: n f32 registers of one thread that a warpgroup's wgmma
 * accumulates into (oxi_vf32(n), n from 1 to OXI_VF32_MAX; GPU lowering only),
 * and vi32 x n, its i32 twin for integer products. */
typedef int oxi_type;
#define OXI_VOID ((oxi_type)OX_DTYPE_COUNT)
#define OXI_V4 ((oxi_type)OX_DTYPE_COUNT + 1)
#define OXI_VF32_MAX 128
static inline oxi_type oxi_vf32(int n) { return (oxi_type)OX_DTYPE_COUNT + 1 + n; }
/* vi32 x n: the same for an integer wgmma's i32 sums */
static inline oxi_type oxi_vi32(int n) { return oxi_vf32(OXI_VF32_MAX) + n; }
/* an accumulator vector, vf32 or vi32 */
static inline bool oxi_is_vacc(oxi_type t) { return t > OXI_V4 && t <= oxi_vi32(OXI_VF32_MAX); }
static inline bool oxi_vacc_is_int(oxi_type t) { return t > oxi_vf32(OXI_VF32_MAX); }
static inline int oxi_vacc_len(oxi_type t) { return t - (oxi_vacc_is_int(t) ? oxi_vf32(OXI_VF32_MAX) : OXI_V4); }
static inline oxi_type oxi_vacc_elem(oxi_type t) { return oxi_vacc_is_int(t) ? OX_I32 : OX_F32; }
/* the accumulator vector of n elements of type `elem` (f32 or i32) */
static inline oxi_type oxi_vacc(int n, oxi_type elem) { return elem == OX_I32 ? oxi_vi32(n) : oxi_vf32(n); }

typedef enum oxi_op {
  OXI_CONST,   /* imm / fimm of `type` (a vf32: all zeros) */
  OXI_PARAM,   /* the value of scalar parameter `index` */
  OXI_LEN,     /* u64: the element count of memory `mem` */
  OXI_LOAD,    /* mem[ops0]; or, of type v4, the 16 bytes from mem[ops0] on (a vector load: ops0
                 a multiple of 16 bytes from a 16-byte aligned start; unchecked); or, a u64 (u32)
                 from 16-bit memory, four (two) elements from mem[ops0] on, aligned to their size */
  OXI_STORE,   /* mem[ops0] = ops1; or, a u64 ops1 into 16-bit memory: four elements from
                 mem[ops0] on (a vector store: ops0 a multiple of 4 where the memory is 8-byte
                 aligned; unchecked) */
  OXI_ATOMIC,  /* old = mem[ops0]; mem[ops0] = sub(old, ops1[, ops2]) */
  OXI_BIN,     /* sub: OXI_ADD.. */
  OXI_CMP,     /* sub: OXI_EQ..; bool result */
  OXI_NEG,
  OXI_NOT,     /* logical not of bool, bitwise not of integers */
  OXI_CAST,    /* ops0 converted to `type` */
  OXI_SELECT,  /* ops0 ? ops1 : ops2 */
  OXI_VAR_GET, /* slot `index` */
  OXI_VAR_SET, /* slot `index` = ops0 */
  OXI_SREG,    /* sub: OXI_SREG_*; u32 */
  OXI_BARRIER, /* all threads of the block */
  OXI_SHFL,    /* sub: 0 idx, 1 up, 2 down, 3 xor; ops0 value, ops1 lane/delta/mask (u32) */
  OXI_VOTE,    /* sub: 0 all, 1 any, 2 ballot; ops0 bool */
  OXI_MATH,    /* sub: OXI_M_*; 1 to 3 operands of `type` (OXI_M_PHILOX*: 6) */
  OXI_ASSUME,  /* ops0 (bool) holds: a launch-contract relation checked on the host */
  OXI_ALIGNED, /* bool: memory `mem` starts at a multiple of `imm` bytes */
  OXI_DIM,     /* u64: size of dim `index` of tensor parameter `mem` */
  OXI_STRIDE,  /* u64: stride in elements of dim `index` of tensor parameter `mem` */
  /* Tile ops (Tile pipeline; the tile-lowering pass, core/tile, rewrites them
   * into the ops above before code generation). Elementwise tile arithmetic
   * reuses OXI_BIN/CMP/NEG/NOT/CAST/SELECT/MATH with operands of one shape. */
  OXI_T_LOAD,  /* tile of `tshape` from tensor `mem` at tile coordinates ops[0..rank) (u64), or
                  with sub 1 from element offsets ops[0..rank) on (x.load_at);
                  elements outside the tensor read `fimm`/`imm` (the padding) */
  OXI_T_STORE, /* ops[0] (a tile) into the tile `mem` (an output partition) of this block;
                  elements outside the tensor are not written */
  OXI_T_SPLAT, /* a tile of `tshape` with every element ops[0] (a scalar) */
  OXI_T_ID,    /* u64: this block's tile coordinate along axis `index` of output `mem` */
  OXI_T_COUNT, /* u64: the number of tiles along axis `index` of output `mem` */
  OXI_T_REDUCE,    /* ops[0] reduced along axis `index` with sub (OXI_ADD, OXI_MUL, OXI_MIN,
                      OXI_MAX); the result keeps the axis with size 1 */
  OXI_T_BROADCAST, /* ops[0] (same rank, each dim equal or 1) repeated to `tshape` */
  OXI_T_RESHAPE,   /* ops[0]'s elements, in row-major order, in `tshape` */
  OXI_T_PERMUTE,   /* ops[0] with dim d of the result = dim perm[d] of the operand, where
                      perm[d] is bits 4d..4d+3 of imm */
  OXI_T_IOTA,      /* a tile of `tshape` whose elements are their coordinate along axis `index` */
  OXI_T_GATHER,    /* a tile of `tshape` whose element e is tensor `mem` at [ops[0][e], ...,
                      ops[rank-1][e]] (u64 tiles of `tshape`); elements outside the tensor read
                      `fimm`/`imm` (the padding) */
  OXI_T_SLICE,     /* the sub-tile of `tshape` of tile ops[0] from element offsets (bits 16d..16d+15
                      of imm, dim d) on: t.slice([..], [..]) */
  OXI_T_SCAN,      /* the inclusive scan of ops[0] along axis `index` with sub (OXI_ADD, OXI_MUL,
                      OXI_MIN, OXI_MAX): element i of a row combines its elements 0..i (cumsum) */
  OXI_T_SORT,      /* ops[0] sorted along axis `index`: sub bit 0 descending, bit 1 the result is
                      each element's index along the axis in ops[0] (i32: argsort) instead of its
                      value. NaNs are larger than every number; equal keys keep their order */
  OXI_T_EXTRACT,   /* the scalar element at row-major position ops[1] (u64) of tile ops[0]; 0 of
                      its dtype where the position is past the tile's end (t[i], t.item()) */
  OXI_T_DOT,       /* f32 [M, N] = ops[0] [M, K] x ops[1] [K, N] (+ ops[2], f32 [M, N], if given):
                      a matrix product accumulated in f32 */
  OXI_T_PREFETCH, /* a hint (p.prefetch([..])): the tile of `tshape` of tensor `mem` at tile
                     coordinates ops[0..rank) (u64) brought into the GPU's L2 cache; no value, no
                     effect on any result, nothing on the CPU */
  OXI_T_ATOMIC_ADD, /* atomic tensor `mem` += a tile. sub 0: the tile ops[rank] at tile coordinates
                      ops[0..rank) (u64); sub 1 (rank 1): element e of tile ops[1] at index
                      element e of tile ops[0] (u64). Elements outside the tensor are skipped */
  /* Warp-wide matrix ops that the tile lowering emits for tensor cores (CUDA
   * target only; the lowering never gives them to the CPU target). Every lane
   * of the warp must execute them together. */
  OXI_LDMATRIX, /* v4 = ldmatrix.x4 (sub 1: .trans) of 16-bit shared memory `mem`; ops0 (u64) is
                   the element index of the 16-byte row this lane supplies */
  OXI_MMA,      /* v4 (4 x f32) = mma.sync.m16n8k16 (sub: OX_BF16 or OX_F16 inputs) of A = ops0
                   (v4), B = registers 2*index, 2*index+1 of ops1 (v4), C = ops2 (v4, 4 x f32) */
  OXI_CP_ASYNC, /* start copying 16 bytes from tensor parameter `mem` at element index ops0 (u64)
                   to shared array `index` at element index ops1 (u64), of which the first ops2
                   (u32, 0 to 16) bytes are read and the rest are zero (cp.async.cg, 16-byte
                   aligned on both sides) */
  OXI_CP_COMMIT, /* close this thread's group of copies started since the last commit */
  OXI_CP_WAIT,  /* wait until all but the last `imm` groups of this thread's copies have landed
                   (before a barrier) */
  OXI_PREFETCH, /* a hint: the cache line of element ops0 (u64) of tensor parameter `mem` into
                   the L2 cache (prefetch.global.L2; CUDA target only) */
  OXI_PACK,     /* v4 from ops0..3 (32-bit scalars) */
  OXI_UNPACK,   /* register `index` of ops0 (v4 or vf32) as `type` (a 32-bit scalar); or half
                   `index` (0 low, 1 high) of ops0 (u32) as `type` (bf16 or f16), PACK2's inverse */
  OXI_PACK2,    /* u32 holding two 16-bit floats of one type: ops0 in the low half, ops1 in the
                   high (an A fragment register of wgmma or mma.sync) */
  /* Hopper's warpgroup matrix ops (sm_90a; the four warps of a warpgroup
   * execute them together), for dots the tile lowering gives to wgmma */
  OXI_VSET,     /* ops0 (vf32) with register `index` replaced by ops1 (f32) */
  OXI_SHARED_ADDR, /* u64: the shared-window byte address of element ops0 (u64) of shared array
                      `mem`, for a wgmma matrix descriptor */
  OXI_WGMMA,    /* vf32 x N/2 = wgmma.mma_async.m64nNk16 (N = imm; sub: OX_BF16 or OX_F16 inputs;
                   or f8e4m3 or f8e5m2 inputs: m64nNk32, A from shared memory, K-major B)
                   of A (K-major) described by ops0 (u64), or held in registers ops0 (v4: the
                   A fragment of each warp's 16 rows, as mma.sync's), and B (N-major; K-major
                   when `index` is 1) by ops1 (u64), added to
                   ops2 (vf32 x N/2), if given (without it, the product alone: scale-d 0, so
                   no instruction writes the registers before); asynchronous: its registers
                   are ready after a wait */
  OXI_WGMMA_SYNC, /* ops0 (vf32; or none, and no value) after sub 0: wgmma.fence (before the
                     first wgmma that reads registers written since); 1: commit the wgmmas issued
                     since the last commit as a group, then wait until at most `imm` groups are
                     pending; 2: only wait; 3: only commit. Passing the registers through keeps every use of them
                     on the right side */
  OXI_FENCE_ASYNC, /* sub 0: fence.proxy.async.shared::cta: this thread's writes to shared memory
                      become visible to the async proxy (which wgmma reads through); sub 1:
                      fence.mbarrier_init: mbarrier inits become visible to it (TMA) */
  /* Hopper's tensor memory accelerator and the mbarriers its copies complete on */
  OXI_MBAR_INIT,   /* the mbarrier at shared address ops0 (u64, 8-byte aligned) expects `imm`
                      arrivals a phase */
  OXI_MBAR_EXPECT, /* this thread arrives on mbarrier ops0 and adds `imm` bytes to what its phase
                      waits for (mbarrier.arrive.expect_tx); imm 0: a plain arrival if ops1 (bool),
                      predicated rather than branched around, since a divergent branch after a
                      wgmma makes ptxas serialize the wgmmas */
  OXI_MBAR_WAIT,   /* waits until the phase of parity ops1 (u64, 0 or 1) of mbarrier ops0 has
                      completed */
  OXI_TMA_LOAD,    /* cp.async.bulk.tensor.Nd: the box of tensor map parameter `index` (rank N) at
                      element coordinates ops2.. (N of them, innermost first; u64, taken as 32-bit)
                      to shared address ops0, completing `imm` bytes on mbarrier ops1;
                      out-of-bounds elements are 0 */
  OXI_NAMED_BAR,   /* sub 0: bar.sync, 1: bar.arrive, on named barrier ops0 (u64: 0 to 15) for
                      `imm` threads (a multiple of 32); with ops1 (bool), only where it holds,
                      predicated rather than branched around (see OXI_MBAR_EXPECT) */
  OXI_SETMAXNREG,  /* setmaxnreg (sm_90a): sub 0 .dec, 1 .inc; the executing warpgroup's registers
                      a thread become `imm` (24 to 256, a multiple of 8); every thread of the
                      warpgroup executes it (.sync.aligned) */
  OXI_RENDEZVOUS, /* (CPU, loops over threads: threads.c) u64: the rendezvous of the block's
                      ops0 (u32) threads through the per-thread state at byte `imm` of shared
                      memory (threads.c's layout): completes the barriers and warp operations
                      they wait at; the regions threads are then ready at (a bit each, 63: any
                      from 63 on), 0 when every thread has returned */
  OXI_BR,      /* to target[0] */
  OXI_CONDBR,  /* ops0 ? target[0] : target[1] */
  OXI_RET,
  OXI_OP_COUNT
} oxi_op;

enum { /* OXI_BIN and OXI_ATOMIC sub-operations */
  OXI_ADD, OXI_SUB, OXI_MUL, OXI_DIV, OXI_REM, OXI_AND, OXI_OR, OXI_XOR, OXI_SHL, OXI_SHR,
  OXI_MIN, OXI_MAX, OXI_XCHG, OXI_CAS
};
enum { OXI_EQ, OXI_NE, OXI_LT, OXI_LE, OXI_GT, OXI_GE }; /* OXI_CMP */
enum {                                                  /* OXI_SREG */
  OXI_SREG_TID_X, OXI_SREG_TID_Y, OXI_SREG_TID_Z,
  OXI_SREG_CTAID_X, OXI_SREG_CTAID_Y, OXI_SREG_CTAID_Z,
  OXI_SREG_NTID_X, OXI_SREG_NTID_Y, OXI_SREG_NTID_Z,
  OXI_SREG_NCTAID_X, OXI_SREG_NCTAID_Y, OXI_SREG_NCTAID_Z,
  OXI_SREG_LANEID,
  OXI_SREG_ON_CPU /* 1 on the CPU target, 0 on a GPU: code that differs by target (grid_stride's
                     order on the CPU, front/stride.c), the other side folded away */
};
enum { /* OXI_MATH */
  OXI_M_SQRT, OXI_M_RSQRT, OXI_M_EXP, OXI_M_EXP2, OXI_M_LOG, OXI_M_LOG2, OXI_M_SIN, OXI_M_COS,
  OXI_M_TANH, OXI_M_POW, OXI_M_FMA, OXI_M_ABS, OXI_M_MIN, OXI_M_MAX, OXI_M_FLOOR, OXI_M_CEIL,
  OXI_M_RECIP, OXI_M_ERF, OXI_M_SIGMOID, OXI_M_ROUND, OXI_M_TRUNC, OXI_M_TAN, OXI_M_ATAN,
  OXI_M_ATAN2, OXI_M_SIGNUM, OXI_M_CLAMP,
  OXI_M_PHILOX0, OXI_M_PHILOX1, OXI_M_PHILOX2, OXI_M_PHILOX3, /* u32 word 0..3 of Philox4x32-10 of key
                                                                 ops0..1 and counter ops2..5 (u32) */
  OXI_M_COUNT
};

/* Memory a kernel can reach. */
typedef enum oxi_memkind {
  OXI_MEM_PARAM,
  OXI_MEM_SHARED,
  OXI_MEM_LOCAL /* a thread's own array (`let mut a = [0.0f32; 16];`): loads and stores only */
} oxi_memkind;
typedef struct oxi_mem {
  oxi_memkind kind;
  int index; /* parameter index, shared-array index, or local-array index */
} oxi_mem;

typedef struct oxi_block oxi_block;
typedef struct oxi_instr oxi_instr;

struct oxi_instr {
  oxi_op op;
  int sub;
  oxi_type type; /* result type; OXI_VOID if none */
  int id;        /* value number, for printing; -1 if no value */
  oxi_instr *ops[6]; /* six: a TMA copy of a 4-D box (a destination, an mbarrier, four coordinates) */
  int nops;
  oxi_mem mem;
  int index;            /* parameter or slot index */
  uint64_t imm;         /* integer constants (two's complement bits) */
  double fimm;          /* floating constants */
  int check;            /* memory ops: bounds-check site + 1; 0 = unchecked (proven or unsafe) */
  bool nuw;             /* OXI_BIN add/mul: known not to wrap (unsigned), for loop analysis */
  const struct oxi_tshape *tshape; /* tile values: their shape; NULL for scalars */
  oxi_block *target[2]; /* branches */
  int line, col;        /* the source construct it was made for (front end), 0 if none: the
                           tile lowering names it when the code it expands to crosses a limit */
};

struct oxi_block {
  int id;
  oxb_vec instrs; /* oxi_instr* */
};

/* Kernel parameter kinds, as the host sees them. */
typedef enum oxi_pkind {
  OXI_P_SCALAR,   /* passed by value */
  OXI_P_SLICE,    /* &[T]: read-only, never aliased by a mutable argument */
  OXI_P_MUTSLICE, /* &mut [T] (unsafe kernels) */
  OXI_P_ATOMIC,   /* &[Atomic<T>] */
  OXI_P_DISJOINT, /* DisjointSlice<T> */
  OXI_P_TENSOR,   /* &Tensor<T, [dims]>: read-only, any strides */
  OXI_P_TILE,     /* &mut Tensor<T, [tile]>: this block's tile of a partitioned output */
  OXI_P_ATENSOR,  /* &Tensor<Atomic<T>, [dims]>: a whole tensor, atomic adds only */
  OXI_P_TMAP      /* a CUtensorMap of tensor parameter `src` (lowered kernels only, after the
                     user's parameters): 128 bytes, passed by value (__grid_constant__) */
} oxi_pkind;

/* Tensor parameters, passed with their dims and strides. */
static inline bool oxi_is_tensor_kind(oxi_pkind k) {
  return k == OXI_P_TENSOR || k == OXI_P_TILE || k == OXI_P_ATENSOR;
}

#define OXI_MAX_RANK 4

/* A tile's shape: static, each dim a power of two. */
typedef struct oxi_tshape {
  int rank;
  int64_t dims[OXI_MAX_RANK];
} oxi_tshape;

typedef struct oxi_param {
  const char *name;
  oxi_pkind kind;
  ox_dtype dtype;
  /* OXI_P_TENSOR and OXI_P_TILE: rank and static dims (-1: bound at launch;
   * for OXI_P_TILE, the tile shape). Passed as (pointer, element count,
   * dims[rank], strides[rank]). */
  int rank;
  int64_t dims[OXI_MAX_RANK];
  /* A launch fact a tile kernel is specialized on: the tensor starts at a
   * multiple of 16 bytes, its last dim has stride 1 and every other stride is
   * a multiple of 16 bytes, so rows can be moved in 16-byte pieces. */
  bool contiguous16;
  /* OXI_P_TMAP: the tensor parameter it describes (of the same rank, 2 to
   * 5), its box (dims[0] innermost, then outward) and its swizzle in bytes
   * (32, 64, 128). */
  int src, swizzle;
} oxi_param;

/* How many values a parameter is passed as (the kernel ABI, see
 * docs/architecture.md): a scalar one; a slice (pointer, length); a tensor
 * also its dims and strides. */
static inline int oxi_param_width(const oxi_param *p) {
  if (p->kind == OXI_P_SCALAR || p->kind == OXI_P_TMAP)
    return 1;
  return oxi_is_tensor_kind(p->kind) ? 2 + 2 * p->rank : 2;
}
#define OXI_MAX_PARAMS 64
#define OXI_MAX_PARAM_VALUES (OXI_MAX_PARAMS * (2 + 2 * OXI_MAX_RANK) + 2)

typedef struct oxi_shared {
  ox_dtype dtype;
  int64_t count;
  int64_t offset; /* bytes from the start of the block's shared memory */
  int64_t align;  /* bytes the offset is a multiple of, if more than 16 (wgmma's swizzled
                     operands: 1024); 0 otherwise */
} oxi_shared;

/* A bounds-check site: where an access is in the source, for the message. */
typedef struct oxi_site {
  int line, col;
  const char *what; /* "a[i]", printed in the error */
} oxi_site;

/* Host-side launch-contract expressions (`requires`), evaluated at launch with
 * overflow-checked 64-bit arithmetic. */
typedef enum oxi_hkind { OXI_H_CONST, OXI_H_LEN, OXI_H_PARAM, OXI_H_BIN, OXI_H_CMP, OXI_H_AND,
                         OXI_H_OR, OXI_H_NOT } oxi_hkind;
typedef struct oxi_hexpr oxi_hexpr;
struct oxi_hexpr {
  oxi_hkind kind;
  int sub;   /* OXI_ADD.. for BIN, OXI_EQ.. for CMP */
  int param; /* LEN, PARAM */
  int64_t value;
  bool is_unsigned; /* comparisons and division treat operands as unsigned */
  oxi_hexpr *a, *b;
};

typedef struct oxi_requires {
  oxi_hexpr *expr;
  const char *text; /* the relation as written, for the message */
  int line, col;
} oxi_requires;

/* Shared memory per block: CUDA allows 48 KiB of static shared memory; a
 * kernel that needs more gets one dynamic array of its size, sized at launch
 * (up to the device's opt-in maximum, OXI_SHARED_MAX at most: 227 KiB on
 * sm_90). */
#define OXI_STATIC_SHARED_MAX (48 * 1024)
#define OXI_SHARED_MAX (227 * 1024)

typedef struct oxi_kernel {
  const char *name;
  int line, col;
  bool is_unsafe;
  bool unchecked;  /* runs an unsafe { } block (itself or through a device function) */
  oxb_vec params;  /* oxi_param* */
  oxb_vec shared;  /* oxi_shared* */
  oxb_vec locals;  /* oxi_shared*: each thread's own arrays (dtype and count; no offset) */
  int64_t shared_bytes; /* above OXI_STATIC_SHARED_MAX: dynamic shared memory on CUDA */
  oxb_vec slots;   /* oxi_type per variable slot, stored as (intptr_t) */
  oxb_vec blocks;  /* oxi_block*; blocks[0] is the entry */
  oxb_vec sites;   /* oxi_site* */
  int next_id;
  /* launch contract */
  int block[3];      /* exact block shape; 0 = free */
  oxb_vec requires;  /* oxi_requires* */
  bool uses_sync;    /* barriers or warp operations: threads must run together */
  bool looped;       /* (CPU) the body runs once per block, its threads in loops around the code
                        between rendezvous points (threads.c): made from a uses_sync kernel */
  int64_t thread_bytes; /* (looped) shared memory per thread of the block, after shared_bytes: its
                        variables live across rendezvous points */
  bool is_tile;      /* a #[tile] kernel: holds tile ops until the tile lowering */
  bool persistent;   /* (lowered tile kernels) each block loops over the output's tiles, from
                        blockIdx.x in steps of gridDim.x: launch at most the blocks that are
                        resident at once, in one grid row */
  int min_blocks;    /* (CUDA) blocks an SM should hold at once: registers are allocated so that
                        they fit (.minnctapersm); 0: no such bound */
  /* for the size limits (front/limits.h): instructions made (oxi_emit counts
   * them, placed or not) and loops made (their makers count them) */
  int ninstrs, nloops;
} oxi_kernel;

typedef struct oxi_module {
  oxb_arena *arena;
  const char *filename;
  oxb_vec kernels; /* oxi_kernel* */
} oxi_module;

/* ---- threads.c: a SIMT kernel with barriers and warp operations as loops over threads (CPU) */
/* Whether oxi_loop_threads takes kernel `k` (uses_sync; no local arrays). */
bool oxi_can_loop_threads(const oxi_kernel *k);
/* `k` (oxi_can_loop_threads) as a looped kernel, built in `m`'s arena (not
 * added to m's kernels). */
oxi_kernel *oxi_loop_threads(oxi_module *m, const oxi_kernel *k);

/* ---- building */
oxi_kernel *oxi_kernel_new(oxi_module *m, const char *name);
oxi_block *oxi_block_new(oxi_module *m, oxi_kernel *k);
/* Appends an instruction of `op` with result `type` to `b` (NULL: not placed). */
oxi_instr *oxi_emit(oxi_module *m, oxi_kernel *k, oxi_block *b, oxi_op op, oxi_type type);
int oxi_slot_new(oxi_module *m, oxi_kernel *k, oxi_type t);
oxi_type oxi_slot_type(const oxi_kernel *k, int slot);
/* The last instruction of `b`, if it is a terminator. */
oxi_instr *oxi_terminator(const oxi_block *b);
/* Memory's element type. */
ox_dtype oxi_mem_dtype(const oxi_kernel *k, oxi_mem mem);

/* ---- checking and printing */
/* Checks the IR's invariants (types of operands, one terminator per block at
 * its end, values defined before use on every path). On failure appends the
 * problems to `err` and returns false. */
bool oxi_verify(const oxi_module *m, oxb_str *err);
void oxi_print(const oxi_module *m, oxb_str *out);

bool oxi_is_float(oxi_type t); /* f16, bf16, tf32, f32, f64: arithmetic types (not fp8) */
/* f8e4m3 and f8e5m2: storage and dot operands only (loaded, stored, cast with
 * saturation, multiplied by `dot`), no arithmetic. */
bool oxi_is_fp8(oxi_type t);
bool oxi_is_int(oxi_type t); /* integers, not bool */
bool oxi_is_signed(oxi_type t);
const char *oxi_type_name(oxi_type t);
const char *oxi_op_name(oxi_op op);
const char *oxi_math_name(int m);

#endif
