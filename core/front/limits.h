/*
 * limits.h - every bound the compiler puts on its input, in one place.
 *
 * Kernel text is untrusted input, and a few hundred bytes of it can ask for an
 * exponential amount of work: device functions are inlined at each call,
 * grid_stride lowers its loop body twice, and the tile lowering unrolls each
 * thread's share of every tile. LLVM's optimizer then has passes that are
 * quadratic or worse in some measures of a function (a chain of bounds
 * checks, the number of loops times the function's size, many values live at
 * once). Each limit below ends the compilation with OX_ERR_COMPILE at the
 * construct that crossed it; docs/language.md, "Limits", quotes the messages
 * and the compile times measured at the limits.
 *
 * The values are several times what any kernel of examples/, tests/ and
 * bench/ needs, and small enough that the slowest kernels found just under
 * them compile in about 4 s at -O3 for the CPU and 2 s for PTX (one core of
 * the 2-core development machine). tests/front_test.c (test_limits) and
 * tests/limits_test.c check each limit's error and its largest accepted input.
 */
#ifndef OXIDE_FRONT_LIMITS_H
#define OXIDE_FRONT_LIMITS_H

/* Bytes of kernel text. The largest source in the repository has 7 KB; the
 * lexer and parser use about 100 bytes of memory per token, so this also
 * bounds their memory (to about 100 MB) and the syntax tree. */
#define OXF_MAX_SOURCE_BYTES (1 << 20)

/* Nesting of expressions, blocks, types and 'else if' chains: the parser and
 * the passes that walk the tree recurse once per level (a parenthesized
 * expression takes two). Left-deep chains (a + b + c, x.f().g()), which the
 * parser builds in a loop but later passes walk recursively, may make the tree
 * OXF_MAX_TREE_DEPTH deep. The deepest accepted input needs about 512 KB of
 * stack (a chain of 997 additions, some 500 bytes a level in sema; 128 KB for
 * the other kinds), and front_test compiles each in a thread with 1 MB, in the
 * ASan build too. Real kernels nest fewer than 20 levels. */
#define OXF_MAX_NESTING 200
#define OXF_MAX_TREE_DEPTH 1000

/* Functions in one source (kernels and device functions). Real sources have
 * fewer than 30; each function is checked, also when nothing calls it. */
#define OXF_MAX_FUNCTIONS 1000

/* Generics of one function (const and type generics together): each binding
 * is a specialization, so a handful is what kernels use. The API's limit on a
 * kernel's generics (api.h) is the same number. */
#define OXF_MAX_GENERICS 8

/* Values in a tuple (`(a, b, c)`, a device function's results). */
#define OXF_MAX_TUPLE 8

/* A thread's own arrays (`[0.0f32; 16]`): elements in one, and bytes in all of
 * a kernel's (its inlined calls' too). On the GPU they are registers when
 * their indices are constants after unrolling, local memory otherwise; on the
 * CPU they live on the thread's stack, which these bounds keep small. */
#define OXF_MAX_LOCAL_ELEMS 4096
#define OXF_MAX_LOCAL_BYTES 16384

/* Device-function calls in progress at once (they are inlined, so this is the
 * depth of the inlining), and loops nested in one function. */
#define OXF_MAX_INLINE_DEPTH 16
#define OXF_MAX_LOOP_NESTING 64

/* Device-function calls inlined into one kernel: f1 calling f0 twice, f2
 * calling f1 twice, ... doubles the code at each level. Real kernels inline
 * fewer than 20 calls. */
#define OXF_MAX_INLINED_CALLS 1000

/* IR instructions of one kernel as the front end makes them: a SIMT kernel
 * with its device functions inlined, a tile kernel's tile IR. What costs LLVM
 * most per instruction is register pressure on the CPU: 1,815 f64 values live
 * at once (16,379 instructions) take 3.5 s; 9,000 took 628 s. Real SIMT
 * kernels have fewer than 1,000 instructions, tile IR fewer than 4,000. */
#define OXF_MAX_KERNEL_INSTRS 16384

/* IR instructions of one tile kernel after the tile lowering, which unrolls
 * each thread's share of every tile for CUDA: straight-line code that LLVM
 * compiles to PTX without register allocation (PTX registers are virtual), so
 * cheaper per instruction than the above (32,743: 0.6 s). The largest real
 * ones have 8,500 (a wgmma matmul) and 15,000 (an attention kernel with 128 x
 * 128 tiles, sm_80). */
#define OXF_MAX_LOWERED_INSTRS 32768

/* Loops in one kernel (those of inlined functions and the three of a
 * grid_stride loop included; after the tile lowering for the CPU, which makes
 * one or two loops per tile operation, those too), and loops times IR
 * instructions: on the CPU a kernel's body runs inside the loops over a
 * block's threads, and LLVM's loop passes then take time in proportion to the
 * number of loops times the kernel's size (199 loops in 5,020 instructions:
 * 2.5 s; 800 loops in 20,000: 37 s). Real kernels have at most 61 loops (an
 * attention kernel lowered for the CPU, 1,400 instructions), and 150,000 for
 * the product. */
#define OXF_MAX_KERNEL_LOOPS 256
#define OXF_MAX_LOOP_WORK 1000000

/* Bounds-checked accesses in one kernel. Each check guards the code after it,
 * and LLVM's proofs that one check implies another (ScalarEvolution,
 * ConstraintElimination) are quadratic or worse in a chain of them: 1,000
 * checks took 28 s, 256 take 0.6 s (3.9 s in 32 loops with many values
 * live). Real kernels have at most 21. */
#define OXF_MAX_KERNEL_CHECKS 256

/* IR instructions of one source together, as the front end makes them: every
 * kernel, with the checks of tile kernels (at their placeholder tile sizes)
 * and of device functions no kernel calls. Bounds the work for a source of
 * many kernels each under the per-kernel limit (two kernels of 10,000: 4.2 s).
 * And where ox_emit lowers every tile kernel of a source into one module, the
 * lowered kernels with the rest (three lowered kernels of 21,800: 2.0 s for
 * PTX). The largest real sources have 3,000 instructions and, lowered by
 * ox_emit, 17,000 (two wgmma matmuls). */
#define OXF_MAX_SOURCE_INSTRS 20480
#define OXF_MAX_LOWERED_SOURCE_INSTRS 65536

#endif
