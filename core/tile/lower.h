/*
 * lower.h - what the files of the tile lowering share (internal to core/tile;
 * tile.h is the layer's interface). lower.c drives the lowering; emit.c,
 * layout.c, ops.c, epilogue.c, order.c, tma.c, dot.c, ws.c and serial.c are its parts, each
 * calling only the ones before it in that list. Prefix: oxt_.
 */
#ifndef OXIDE_TILE_LOWER_H
#define OXIDE_TILE_LOWER_H

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>

#include "tile/tile.h"

typedef struct oxt_lowerer {
  oxi_module *m;
  const oxi_kernel *k; /* the tile kernel, read */
  oxi_kernel *nk;      /* the lowered kernel, built */
  oxi_block *cur;
  int T;               /* threads per block */
  oxi_instr **sval;    /* old value id -> new scalar value */
  oxi_instr ***tval;   /* old value id -> new element values of this thread */
  oxi_block **nb;      /* old block -> its first new block */
  oxi_instr *t;        /* this thread's index in the block (u64) */
  int scratch[OX_DTYPE_COUNT]; /* shared array per dtype for layout changes, + 1; 0 = none */
  bool *everywhere;    /* old value id -> a tile whose elements are one value, which every
                          thread holds (a splat, a full reduction, elementwise ops of them) */
  bool cuda;           /* the CUDA target: tensor cores for dot */
  bool wg;             /* tensor-core dots run on wgmma (sm_90): their results' mma layout has
                          one warp per 16 rows (dot_wg) */
  char *mma;           /* old value id -> 1: held in the mma layout (below), not the blocked one */
  char *splat;         /* old value id -> 1: every element is one scalar (any layout) */
  char *slot_mma;      /* old slot -> 1: a `let mut` tile slot held in the mma layout */
  char *direct;        /* old value id -> 1: not lowered, as a tensor-core dot stages it itself:
                          a load only the dot uses (copied to shared memory by cp.async), a
                          reshape of one that drops leading dims of 1, or (with kmajor) the
                          transpose that is its B operand */
  const oxi_instr **dot_of; /* old value id of a direct load -> the wgmma dot it feeds, when the
                          load issues its copy itself, where it is written (oxt_copy_early) */
  int *area;           /* old value id of such a dot -> its own staging array + 1 */
  int *cp_at;          /* old value id of such a load -> its copy group's number in its block */
  int *cp_block;       /* ... and that block's index (old), + 1 */
  int commits, block;  /* copy groups committed so far in the old block being lowered, its index */
  bool early;          /* some load copies early: copies may be in flight at a return */
  char *kmajor;        /* old value id of a wgmma dot -> 1: its B is transpose(x), staged as x
                          [N, K] with K contiguous, as A is (wgmma's B without imm-trans-b) */
  struct {
    int slot, stages;  /* its first slot (OXT_PIPE_SLOTS of them), and its staging areas (2 to
                          4); 0: not pipelined */
    int bars;          /* with TMA (wgmma): the shared array of its mbarriers + 1, two a stage:
                          [s] completes when stage s's copies land ("full"), [S + s] when every
                          warp is done reading it ("empty") */
    int map[2];        /* ... and the tensor map parameters of A and of B's staged tile */
    int ring;          /* its staging areas' shared array + 1 (oxt_pipe_ring); 0: not made yet */
    bool ws;           /* a producer warpgroup copies its operands (ws.c); the block's threads wait */
  } *pipe;             /* old value id of a dot -> its pipeline (dot_pipeline) */
  bool pipelined;      /* some dot is: copies may be in flight at a return */
  struct oxt_tload *tload; /* old value id of a load -> how it copies with TMA (tma.c) */
  bool tloads;         /* some load does */
  int ntloads;         /* how many (each may need a tensor map parameter) */
  int64_t shared_limit; /* bytes of shared memory a block may have */
  bool serial;         /* the CPU: one thread a block, tile values in buffers (s_ functions) */
  int *buf;            /* serial: old value id -> its buffer's shared array + 1 */
  oxi_instr *grouped[2]; /* rank-2 tile ids made by the lowering (grouped order, or a persistent
                          block's current tile), or NULL: from the block's index */
  int persist;         /* persistent blocks (oxi_kernel.persistent, lower.c): the output tile
                          parameter + 1; 0: one block a tile */
  int tile_slot;       /* ... the slot of the block's current tile (linear index), and after it
                          two slots: the next tile's ids minus this one's (u64, wrapping) */
  oxi_block *tiles_head, *tiles_exit; /* ... the loop over tiles: its head, and the kernel's exit */
  int **tslots;        /* old slot -> its new slots, one per element a thread holds */
  oxi_instr **vacc;    /* old value id -> its accumulator registers (vf32) as wgmma left them,
                          maybe still being written (dot_wg); oxt_held() gives their elements */
  int *vslot;          /* old slot -> a vf32 slot + 1: a `let mut` tile held as a wgmma accumulator */
  oxi_instr ***pairs;  /* old value id of a read of a `let mut` tile held in pairs (oxt_in_pairs)
                          -> its registers, two elements each (u32, PACK2's order) */
  const oxi_instr **pair_reader; /* old slot held in pairs -> the last deferred dot lowered that
                          takes it as A: a write to it waits for that dot (ptxas would serialize
                          every wgmma if an instruction wrote registers a wgmma still reads, C7513) */
  /* deferred dots (dot_wg), whose wgmma groups stay in flight until a use waits for them */
  int wg_commits;      /* wgmma groups committed so far in the old block being lowered */
  int *wg_at;          /* old value id of a deferred dot's result -> its group's number there */
  int *wg_block;       /* ... that block's index (old) + 1; 0: not a deferred result */
  int *wg_after;       /* ... once that block is lowered: the groups it committed after this one */
  char *ready;         /* old value id of a read of a wgmma accumulator slot -> 1: no wgmma writes
                          its registers any more (the slot is not busy) */
  char *slot_busy;     /* old slot -> 1: may hold registers a wgmma still writes (a pipelined dot's) */
  struct {
    int slot;
    const oxi_instr *val;
  } wg_sets[8];        /* writes made at the end of the old block being lowered (oxt_wg_block_end):
                          of deferred results to accumulator slots, and to slots held in pairs
                          that a deferred dot reads */
  int nwg_sets;
  int *rel_block;      /* old value id of a deferred dot (oxt_dot_deferred) -> the old block (+ 1)
                          at whose end it releases its TMA stages (oxt_release_block); 0: the
                          dot is not deferred */
  struct {
    const oxi_instr *dot, *lo, *hi; /* warp specialization (ws.c): the dot that a producer
                          warpgroup feeds, its K loop's first and end values (tile kernel's) */
  } ws;
  bool split;          /* in the consumer warpgroups' code (ws.c): a block barrier is for L->T
                          threads, not the producer's */
  char *defer;         /* old value id -> 1: lowered piecewise at the store that takes it, not where
                          it stands (epilogue.c) */
  int turn_first, turn_last; /* the deferred dots (old ids + 1) that begin and end a warpgroup's
                          turn (lower.c, choose_turns); 0: none */
} oxt_lowerer;

/* The mma layout: the accumulator layout of mma.sync.m16n8k16. The block's
 * W warps tile an [M, N] tile as WM x WN warp tiles of wm x wn; a warp tile is
 * (wm/16) x (wn/8) mma tiles of 16 x 8, in which lane l holds rows l/4 and
 * l/4 + 8, columns 2(l%4) and 2(l%4)+1. A thread's elements, in order: for
 * each mma tile (row-major), its 4 registers. Results of `dot` on tensor
 * cores live here, and so do elementwise results of them and `let mut` tiles
 * they are assigned to, so a K loop never moves its accumulator. */
typedef struct oxt_mma_layout {
  int WM, WN;
  int64_t wm, wn;
  int n; /* elements per thread */
} oxt_mma_layout;

typedef struct oxt_layout {
  int64_t E;   /* elements */
  int VEC;     /* contiguous elements per chunk */
  int J;       /* chunks per thread */
  bool guard;  /* some threads have fewer chunks than J */
} oxt_layout;

#define OXT_LT (100 + OXI_LT)

typedef struct oxt_element_site {
  oxi_instr *inb;   /* the element exists and lies inside the tensor */
  oxi_instr *index; /* its offset in elements from the tensor's start */
} oxt_element_site;

/* A counted IR loop: `for k = first; k < count; k += step`. begin_loop
 * leaves the builder in the body and returns k; end_loop closes it and
 * continues after it. */
typedef struct oxt_counted_loop {
  int slot;
  int64_t step;
  oxi_block *head, *done;
} oxt_counted_loop;

/* How a tensor-core dot's operands A [M, K] and B [K, N] are staged in
 * shared memory: rows `pa` and `pb` elements apart (padded by 16 bytes
 * against bank conflicts; 0: swizzled for wgmma, no padding), B `bat`
 * elements after A, `area` elements in all. */
typedef struct oxt_staging {
  int64_t pa, pb, bat, area;
} oxt_staging;

/* ----------------------------------------- emit.c: building IR */

int64_t oxt_elems(const oxi_tshape *s);
int oxt_log2i(int64_t v);
oxi_instr *oxt_emit(oxt_lowerer *L, oxi_op op, oxi_type t);
oxi_instr *oxt_u64(oxt_lowerer *L, uint64_t v);
oxi_instr *oxt_bin(oxt_lowerer *L, int sub, oxi_type t, oxi_instr *a, oxi_instr *b);
oxi_instr *oxt_sreg64(oxt_lowerer *L, int which);
oxi_instr *oxt_param_info(oxt_lowerer *L, oxi_op op, int param, int axis);
oxi_instr *oxt_tile_count(oxt_lowerer *L, int param, int axis);
oxi_instr *oxt_tile_id(oxt_lowerer *L, int param, int axis);
/* The ids (row, column) of tile l (u64) of a gy x gx grid of tiles in
 * grouped order (emit.c says why), to out[0], out[1]. */
void oxt_tile_ids(oxt_lowerer *L, oxi_instr *l, oxi_instr *gx, oxi_instr *gy, oxi_instr **out);
oxi_instr *oxt_mapped(oxt_lowerer *L, const oxi_instr *old);
oxi_instr *oxt_clone(oxt_lowerer *L, const oxi_instr *in);
/* Ends the current block with a branch on `cond`, and continues in `yes`. */
void oxt_branch(oxt_lowerer *L, oxi_instr *cond, oxi_block *yes, oxi_block *no);
oxi_block *oxt_begin_if(oxt_lowerer *L, oxi_instr *cond, oxi_block **join);
/* This thread's warpgroup (u64): thread / 128. */
oxi_instr *oxt_warpgroup(oxt_lowerer *L);
/* Named barrier `id` for two warpgroups (256 threads): sync (sub 0) or
 * arrive (1), where `when` holds (NULL: everywhere). */
void oxt_named_bar(oxt_lowerer *L, int sub, oxi_instr *id, oxi_instr *when);
void oxt_end_if(oxt_lowerer *L, oxi_block *join);
oxi_instr *oxt_load_at(oxt_lowerer *L, const oxi_instr *in, oxi_instr *index);
/* Element `index` of T_LOAD/T_GATHER `in`'s tensor where `inb` holds, else its padding. */
/* acc + x * y in dot result type t: a fused multiply-add in f32, or an exact
 * (wrapping) multiply and add of integers widened to t. */
oxi_instr *oxt_mul_add(oxt_lowerer *L, oxi_type t, oxi_instr *x, oxi_instr *y, oxi_instr *acc);
oxi_instr *oxt_load_or_pad(oxt_lowerer *L, const oxi_instr *in, oxi_instr *inb, oxi_instr *index);
oxi_instr *oxt_get_slot(oxt_lowerer *L, int slot);
void oxt_set_slot(oxt_lowerer *L, int slot, oxi_instr *v);
void oxt_store_at(oxt_lowerer *L, const oxi_instr *in, oxi_instr *index, oxi_instr *v);
oxi_mem oxt_shared_array(oxt_lowerer *L, oxi_type t, int64_t count);
oxi_mem oxt_scratch(oxt_lowerer *L, oxi_type t, int64_t count);
void oxt_barrier(oxt_lowerer *L);
void oxt_shared_store(oxt_lowerer *L, oxi_mem m, oxi_instr *index, oxi_instr *v, oxi_instr *ok);
oxi_instr *oxt_shared_load(oxt_lowerer *L, oxi_mem m, oxi_type t, oxi_instr *index);
oxi_instr *oxt_identity(oxt_lowerer *L, int sub, oxi_type t);
oxi_instr *oxt_combine(oxt_lowerer *L, int sub, oxi_type t, oxi_instr *a, oxi_instr *b);
oxi_instr *oxt_begin_loop(oxt_lowerer *L, oxt_counted_loop *lp, oxi_instr *first, int64_t step, int64_t count);
void oxt_end_loop(oxt_lowerer *L, oxt_counted_loop *lp, oxi_instr *k);
oxi_instr *oxt_zero_bool(oxt_lowerer *L);
oxi_instr *oxt_pick(oxt_lowerer *L, oxi_instr *c, oxi_instr *a, oxi_instr *b);
oxi_instr *oxt_cast(oxt_lowerer *L, oxi_instr *v, oxi_type t);
void oxt_atomic_at(oxt_lowerer *L, const oxi_instr *in, oxi_instr *cond, oxi_instr *index, oxi_instr *v);

/* -------------------- layout.c: layouts and element addressing */

oxt_layout oxt_layout_of(const oxt_lowerer *L, const oxi_tshape *s);
bool oxt_mma_layout_of(const oxt_lowerer *L, const oxi_tshape *s, oxt_mma_layout *o);
int oxt_count_in(const oxt_lowerer *L, const oxi_tshape *shape, bool mma);
oxi_instr *oxt_wg_sync(oxt_lowerer *L, oxi_instr *acc, int sub, int pending);
oxi_instr *oxt_wg_pack(oxt_lowerer *L, oxi_instr **v, int n);
oxi_instr **oxt_held(oxt_lowerer *L, const oxi_instr *old);
/* Whether a 16-bit tile of shape s in the mma layout is held two elements a
 * register (oxt_pairs): the layout of wgmma's A in registers (warp tiles of
 * 16 whole rows), as attention's probabilities are. */
bool oxt_in_pairs(const oxt_lowerer *L, const oxi_tshape *s, oxi_type t);
/* The elements of 16-bit mma-layout tile `old` two a register (u32: element
 * 2i low, 2i + 1 high), which are wgmma's A fragments in order. */
oxi_instr **oxt_pairs(oxt_lowerer *L, const oxi_instr *old);
/* How many wgmma groups may still be pending when old value `old` (a
 * deferred dot's result) is complete, here. */
int oxt_wg_pending(const oxt_lowerer *L, const oxi_instr *old);
/* Before the terminator of an old block: the deferred results written to
 * accumulator slots in it are waited for (as little as they allow) and
 * stored; the block's deferred results learn how many groups followed them. */
void oxt_wg_block_end(oxt_lowerer *L);
oxi_instr **oxt_unpack_acc(oxt_lowerer *L, oxi_instr *acc);
bool oxt_is_mma(const oxt_lowerer *L, const oxi_instr *old);
/* Whether `in` is an elementwise tile op (one result element from the same
 * element of each tile operand). */
bool oxt_elementwise(const oxi_instr *in);
oxi_instr **oxt_elements(oxt_lowerer *L, const oxi_instr *old);
oxi_instr *oxt_position_parts(oxt_lowerer *L, const oxi_tshape *shape, bool mma, int64_t *off);
oxi_instr *oxt_exists(oxt_lowerer *L, const oxi_tshape *shape, bool mma, oxi_instr *f);
int64_t oxt_coord_of(const oxi_tshape *shape, int d, int64_t f);
oxi_instr *oxt_coord_at(oxt_lowerer *L, const oxi_tshape *shape, int d, oxi_instr *f);
void oxt_positions_in(oxt_lowerer *L, const oxi_tshape *shape, bool mma, oxi_instr **f, oxi_instr **ok);
void oxt_positions(oxt_lowerer *L, const oxi_tshape *shape, oxi_instr **f, oxi_instr **ok);
void oxt_sites(oxt_lowerer *L, const oxi_tshape *shape, bool mma, oxi_instr *const *origin, int param, oxt_element_site *out);
void oxt_clamp_coords(oxt_lowerer *L, const oxi_tshape *shape, oxi_instr **coord, int param);
void oxt_origins(oxt_lowerer *L, const oxi_tshape *shape, oxi_instr **coord, int param, bool at);
oxi_instr *oxt_whole_tile_inside(oxt_lowerer *L, const oxi_tshape *shape, bool mma, oxi_instr *const *origin, int param);
oxi_instr **oxt_new_elements(oxt_lowerer *L, const oxi_tshape *s);
oxi_instr *oxt_existing(oxt_lowerer *L, oxi_instr *f, oxi_instr *ok);
void oxt_spill(oxt_lowerer *L, const oxi_instr *old);
oxi_instr **oxt_in_layout(oxt_lowerer *L, const oxi_instr *old, bool mma);

/* ------------------------------------- ops.c: tile ops on CUDA */

/* Whether 16-bit tile load `in`, in the mma layout, reads its elements a pair
 * (two adjacent columns) a 4-byte load where the whole tile is inside. */
bool oxt_loads_pairs(const oxt_lowerer *L, const oxi_instr *in);
void oxt_lower_load(oxt_lowerer *L, const oxi_instr *in);
/* p.prefetch([..]): prefetch.global.L2 of the lines of this thread's chunks of the tile. */
void oxt_lower_prefetch(oxt_lowerer *L, const oxi_instr *in);
/* Whether store `in` of an mma-layout tile into a 16-bit contiguous16 output
 * stores four adjacent elements at once where the tile is wholly inside (a
 * lane trades a pair with its neighbour: oxt_store_quad). */
bool oxt_stores_quads(const oxt_lowerer *L, const oxi_instr *in);
/* The quad stores of the elements ea, ea + 1 (one 8-column piece) and
 * ea + 4, ea + 5 (the next) of v, at sites es, both lanes of a pair. */
void oxt_store_quad(oxt_lowerer *L, const oxi_instr *in, const oxt_element_site *es, oxi_instr *const *v, int ea);
void oxt_lower_store(oxt_lowerer *L, const oxi_instr *in);
void oxt_lower_elementwise(oxt_lowerer *L, const oxi_instr *in);
void oxt_lower_broadcast(oxt_lowerer *L, const oxi_instr *in);
/* Row-major position in broadcast `in`'s operand of the element at position f. */
oxi_instr *oxt_broadcast_source(oxt_lowerer *L, const oxi_instr *in, oxi_instr *f, oxi_instr *ok);
void oxt_lower_move(oxt_lowerer *L, const oxi_instr *in);
void oxt_lower_iota(oxt_lowerer *L, const oxi_instr *in);
void oxt_lower_gather(oxt_lowerer *L, const oxi_instr *in);
void oxt_lower_extract(oxt_lowerer *L, const oxi_instr *in);
void oxt_lower_slice(oxt_lowerer *L, const oxi_instr *in);
/* Row-major position in t.slice `in`'s operand of element f of the slice. */
oxi_instr *oxt_slice_source(oxt_lowerer *L, const oxi_instr *in, oxi_instr *f);
/* The element index of one element of gather `in` and whether it is inside the
 * tensor, from the elements `held[d]` of its index tiles. */
oxi_instr *oxt_gather_site(oxt_lowerer *L, const oxi_instr *in, oxi_instr *const *held, oxi_instr **inb);
void oxt_lower_reduce(oxt_lowerer *L, const oxi_instr *in);
void oxt_tile_var(oxt_lowerer *L, const oxi_instr *in);
void oxt_lower_atomic(oxt_lowerer *L, const oxi_instr *in);

/* ---------------------- epilogue.c: a store's elementwise tail, piecewise */

/* Marks (L->defer) the tail of each store of an mma-layout tile that the
 * store lowers piece by piece: once the layouts are chosen. */
void oxt_plan_epilogues(oxt_lowerer *L);
/* Store `in` whose value is deferred: its tail and the store, eight elements
 * at a time. */
void oxt_lower_epilogue(oxt_lowerer *L, const oxi_instr *in);

/* ------------------------ order.c: scans and sorts (and the CPU's network) */

/* Sorts tile `in`'s rows (OXI_T_SORT) held in row-major order in shared array
 * km, in place, and with `indices` their indices in i32 array im beside it. */
void oxt_sort_network(oxt_lowerer *L, const oxi_instr *in, oxi_mem km, oxi_mem im, bool indices);
void oxt_lower_sort(oxt_lowerer *L, const oxi_instr *in);
void oxt_lower_scan(oxt_lowerer *L, const oxi_instr *in);

/* --------------------------- tma.c: TMA copies and mbarriers (sm_90) */

/* A load that only a wgmma dot uses, copied with TMA by thread 0 into
 * staging areas of its own (oxt_tload_choose): once, for a load outside
 * loops (a query tile), or through a ring of `stages` areas, the next calls'
 * tiles copied ahead while the dot reads this call's (keys and values in an
 * attention's loop). Each stage has a full mbarrier (its copy landed: every
 * thread waits for it before the dot) and an empty one (every warp released
 * it: thread 0 waits for it before copying into it again). */
typedef struct oxt_tload {
  int stages;          /* 0: not a TMA load; 1: copied once; 2 or 3: a ring */
  int rank, slot;      /* the tile's rank; its first slot (rank + 4 of them, tma.c) */
  int area, bars;      /* its shared arrays + 1: the stages' areas; 2 x stages mbarriers (full, empty) */
  int map;             /* its tensor map parameter */
  const oxi_instr *ld, *dot; /* the load, and the dot it was chosen for */
  bool several;        /* more dots than that one read it (a shared A) */
  int share;           /* old value id + 1 of the ring whose stages, mbarriers, slots and map this
                          load uses (oxt_tloads_alloc); 0: its own */
  oxi_instr *r;        /* while lowering: the stage of the load's latest call */
} oxt_tload;

/* The swizzle width (bytes) of a wgmma operand tile whose rows (along the
 * contiguous dim) have `row` bytes: 128, or a row's bytes if less. */
int64_t oxt_swizzle_bytes(int64_t row);
/* A tensor map parameter (OXI_P_TMAP) for the boxes of load `ld`'s tiles. */
int oxt_tensor_map(oxt_lowerer *L, const oxi_instr *ld);
/* The shared address of mbarrier i of shared array `bars` - 1. */
oxi_instr *oxt_mbar(oxt_lowerer *L, int bars, oxi_instr *i);
/* Ring stage r + j of S. */
oxi_instr *oxt_ring_at(oxt_lowerer *L, oxi_instr *r, int j, int S);
/* Waits for the phase of parity bit `stage` of slot `slot` of mbarrier
 * `bar`, then flips the bit. */
void oxt_phase_wait(oxt_lowerer *L, int slot, oxi_instr *bar, oxi_instr *stage);
/* Lane 0 of every warp (and `when`, if given) arrives on mbarrier `bar`: a
 * predicated arrival, not a branch, as it may follow wgmmas. */
void oxt_mbar_release(oxt_lowerer *L, oxi_instr *bar, oxi_instr *when);
/* Arms mbarrier `bar` for `bytes` bytes of copies (the calling thread arrives). */
void oxt_mbar_expect(oxt_lowerer *L, oxi_instr *bar, int64_t bytes);
/* The boxes that copy the tile of load `ld` at tile coordinates c (its
 * rank's) through tensor map `map` into shared array m at element `at`,
 * swizzled for wgmma, completing on mbarrier `bar`. */
void oxt_tma_boxes(oxt_lowerer *L, int map, const oxi_instr *ld, oxi_mem m, oxi_instr *at, oxi_instr *const *c,
                   oxi_instr *bar);
/* Begins `if (thread == 0)`; returns the join for oxt_end_if. */
oxi_block *oxt_begin_thread0(oxt_lowerer *L);
/* Initializes the S full (count 1) and S empty (a warp each) mbarriers of
 * shared array `bars` - 1 (thread 0, at the kernel's entry). */
void oxt_mbar_inits(oxt_lowerer *L, int bars, int S);
/* The block of the tile kernel that holds instruction `in`. */
const oxi_block *oxt_block_of(const oxi_kernel *k, const oxi_instr *in);
/* Whether block `b` of the tile kernel is in a loop: it reaches itself. */
bool oxt_in_loop(const oxi_kernel *k, const oxi_block *b);
/* Whether direct load `ld` of wgmma dot `dot` copies with TMA, and with how
 * many stages (L->tload). */
bool oxt_tload_choose(oxt_lowerer *L, const oxi_instr *ld, const oxi_instr *dot);
/* Once the deferred dots are known (L->rel_block): each TMA load's tensor
 * map, staging areas, mbarriers and slots, or a ring's that it shares. */
void oxt_tloads_alloc(oxt_lowerer *L);
/* At the kernel's entry: the TMA loads' slots; then (thread 0) their mbarriers. */
void oxt_tloads_begin(oxt_lowerer *L);
void oxt_tloads_init(oxt_lowerer *L);
/* At the load's place: issues its copies (thread 0). */
void oxt_tload_issue(oxt_lowerer *L, const oxi_instr *ld);
/* In its dot: waits for this call's tile; returns its shared byte address. */
oxi_instr *oxt_tload_wait(oxt_lowerer *L, const oxi_instr *ld);
/* After the dot's wgmmas completed: every warp releases the call's stage. */
void oxt_tload_release(oxt_lowerer *L, const oxi_instr *ld);
/* The index of the old block at whose end deferred dot `dot` releases its
 * TMA stages (after waiting for its group). */
int oxt_release_block(const oxt_lowerer *L, const oxi_instr *dot);
/* Before a return: waits for the copies still in flight. */
void oxt_tloads_end(oxt_lowerer *L);

/* ------------------------------------------ dot.c: dot on CUDA */

/* A pipeline's slots: copies in flight, the next call's 4 tile coordinates as
 * guessed, this call's ring area, and (TMA) the parity of the next phase of
 * each stage's full mbarrier, then of its empty one, a bit a stage. */
#define OXT_PIPE_SLOTS 8
void oxt_pipelines_begin(oxt_lowerer *L);
/* The shared array of pipelined dot `in`'s staging areas (made on first use). */
oxi_mem oxt_pipe_ring(oxt_lowerer *L, const oxi_instr *in);
/* Copies the operands of TMA-pipelined dot `in` at tile coordinates c (A's
 * two, then those of B's staged tile) into ring stage `stage`, by the
 * calling thread: waits for the stage's empty mbarrier, arms its full one
 * with the bytes, issues the boxes. */
void oxt_pipe_issue(oxt_lowerer *L, const oxi_instr *in, oxi_instr *const *c, oxi_instr *stage);
/* The tile dot `in` stages as operand i: the operand, or for a K-major B
 * (L->kmajor) the tile under its transpose. */
const oxi_instr *oxt_staged_tile(const oxt_lowerer *L, const oxi_instr *in, int i);
void oxt_pipelines_end(oxt_lowerer *L);

bool oxt_tc_operands(const oxi_instr *in);
/* The registers a thread holds for wgmma dot `in`: its accumulator's (N / 2
 * f32) and, with A in registers, A's fragments. */
int oxt_wg_registers(const oxt_lowerer *L, const oxi_instr *in);
bool oxt_dot_on_tensor_cores(const oxt_lowerer *L, const oxi_instr *in);
void oxt_lower_dot(oxt_lowerer *L, const oxi_instr *in);
void oxt_choose_direct_loads(oxt_lowerer *L);
void oxt_copy_early(oxt_lowerer *L, const oxi_instr *ld);
/* The TMA load that stages operand i (0: A, 1: B) of dot `in`, or NULL. */
const oxi_instr *oxt_staged_load(const oxt_lowerer *L, const oxi_instr *in, int i);
/* Whether wgmma dot `in` is deferred: not pipelined, and every operand it
 * stages is a TMA load (dot_wg leaves its group in flight). */
bool oxt_dot_deferred(const oxt_lowerer *L, const oxi_instr *in);
bool oxt_wg_operands(const oxi_instr *in);
bool oxt_fp8_on_wgmma(const oxi_instr *in);

/* ------------------------- ws.c: warp specialization (sm_90) */

/* Whether a producer warpgroup can feed the persistent kernel's one pipelined
 * dot (sets L->ws and the pipeline's ws): the kernel is the K loop ws.c
 * describes, so the producer can make the very copies the dot's calls take. */
bool oxt_ws_choose(oxt_lowerer *L);
/* At the kernel's entry, after the mbarriers' inits: the producer warpgroup's
 * code (threads L->T to L->T + 127), then the consumers' start. */
void oxt_ws_split(oxt_lowerer *L);

/* ------------------------------------------- serial.c: the CPU */

void oxt_serial_instr(oxt_lowerer *L, const oxi_instr *in);

#endif
