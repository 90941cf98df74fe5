/*
 * tile.h - the tile lowering: rewrites a #[tile] kernel's tile values and tile
 * ops into thread-level IR (what SIMT kernels are from the start), choosing a
 * layout for every tile and the block size. Prefix: oxt_.
 *
 * docs/tile-design.md is the plan; lower.c and its parts (lower.h) say which
 * parts of it exist.
 */
#ifndef OXIDE_TILE_H
#define OXIDE_TILE_H

#include "ir/ir.h"

/* Lowers tile kernel `k` of `m` in place, for CUDA GPUs of compute
 * capability `sm` (80, 90...: dot on tensor cores, with wgmma on sm_90, for
 * which code generation targets sm_90a) or, with `sm` 0, the CPU; with `sm`
 * OXT_CPU_THREADS, the CPU with the blocks of threads, shared memory and
 * barriers of the GPU lowering (no tensor cores), which lets the CPU tests
 * check that lowering's logic. On CUDA,
 * blocks have at most `shared_limit`
 * bytes of shared memory (the device's; oxt_shared_limit for code emitted
 * without one); the CPU ignores it (a block is one thread with its tile
 * values in the worker's memory). Afterwards k->is_tile is false, k->block holds
 * the block shape the launch must use, and no tile value or tile op is left.
 * Errors (a tile too large for this lowering) set the last error, naming the
 * source file of `m`. */
ox_status oxt_lower(oxi_module *m, oxi_kernel *k, int sm, int64_t shared_limit);
#define OXT_CPU_THREADS (-1)

/* The shared memory a block may opt in to on CUDA GPUs of compute capability
 * `sm` (sm_80: 163 KiB, sm_86 and sm_89: 99 KiB, sm_90: 227 KiB). */
int64_t oxt_shared_limit(int sm);

#endif
