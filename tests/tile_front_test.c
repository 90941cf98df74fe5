/* tile_front_test.c - the front end of #[tile] kernels (docs/tile-design.md,
 * milestone 1): parsing, checking, and lowering to tile IR.
 *
 * Three tables:
 *  - good kernels: the module compiles (ox_emit, with placeholder generics),
 *    and oxf_check_spec with the given generics gives IR that oxi_verify
 *    accepts and whose printed lines match the patterns ("a|b": a line holding
 *    both; a leading '!': no such line);
 *  - bad kernels: the module compile fails with exactly `nerrors` errors, each
 *    expectation "LINE:COL text" a diagnostic at t.oxk:LINE:COL holding text;
 *  - bad specializations: the module compiles, oxf_check_spec with the given
 *    generics fails with the expected diagnostics.
 * Plus direct checks of the IR's fields (tshape, mem, index, padding) that
 * the tile lowering relies on. Run with -v to print the IR of every good
 * kernel. */
#include <stdio.h>
#include "match.h"
#include <stdlib.h>
#include <string.h>

#include "front/front.h"
#include "ir/ir.h"

#define MAXX 20

static int failures;
static int verbose;

/* ------------------------------------------------------------- matching */



static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, what)) != NULL; p += strlen(what))
    n++;
  return n;
}

static void fail(const char *name, const char *src, const char *why, const char *text) {
  failures++;
  fprintf(stderr, "FAIL %s: %s\n---- source:\n%s---- output:\n%s\n----\n", name, why, src,
          text ? text : "");
}

/* ------------------------------------------------------------- compiling */

typedef struct unit {
  oxb_arena arena;
  oxb_source src;
  oxb_diags d;
  oxf_program *prog;
  oxi_module m;
} unit;

static void unit_parse(unit *u, const char *text) {
  memset(u, 0, sizeof *u);
  u->src.name = "t.oxk";
  u->src.text = text;
  u->src.len = strlen(text);
  u->d.src = &u->src;
  u->m.arena = &u->arena;
  u->m.filename = "t.oxk";
  u->prog = oxf_parse(&u->arena, &u->d, &u->src);
}

static void unit_free(unit *u) {
  oxb_str_free(&u->d.text);
  oxb_arena_free(&u->arena);
}

static const oxf_fn *find_fn(const unit *u, const char *name) {
  for (int i = 0; i < u->prog->fns.len; i++) {
    const oxf_fn *fn = u->prog->fns.items[i];
    if (!strcmp(fn->name, name))
      return fn;
  }
  return NULL;
}

/* Specializes every #[tile] function of `u` with `gen` (NULL: placeholders)
 * into u->m; returns whether all of them checked. */
static bool specialize_all(unit *u, const int64_t *gen) {
  bool ok = true;
  for (int i = 0; i < u->prog->fns.len; i++) {
    const oxf_fn *fn = u->prog->fns.items[i];
    if (!fn->is_tile)
      continue;
    int64_t ph[8] = {16, 16, 16, 16, 16, 16, 16, 16};
    ok &= oxf_check_spec(&u->arena, &u->d, u->prog, fn, gen ? gen : ph, &u->m);
  }
  return ok;
}

/* ---------------------------------------------------------------- tables */

typedef struct good {
  const char *name;
  const char *src;
  int64_t gen[4]; /* the generics of every tile function; all 0: placeholders */
  const char *expect[MAXX];
} good;

typedef struct bad {
  const char *name;
  const char *src;
  int nerrors;
  const char *expect[MAXX];
} bad;

typedef struct badspec {
  const char *name;
  const char *src;
  int64_t gen[4];
  const char *expect[MAXX];
} badspec;

static const char add_src[] =
    "#[tile]\n"
    "fn add<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, y: &Tensor<f32, [-1]>) {\n"
    "    z.store(load_tile_like(x, z) + load_tile_like(y, z));\n"
    "}\n";

static const char saxpy_src[] =
    "#[tile]\n"
    "fn saxpy<const B: i32>(y: &mut Tensor<f32, [B]>, a: f32, x: &Tensor<f32, [-1]>, "
    "y0: &Tensor<f32, [-1]>) {\n"
    "    y.store(a * load_tile_like(x, y) + load_tile_like(y0, y));\n"
    "}\n";

static const char scale2d_src[] =
    "#[tile]\n"
    "fn scale2d<const BM: i32, const BN: i32>(z: &mut Tensor<f16, [BM, BN]>, "
    "x: &Tensor<f32, [-1, -1]>, s: f32) {\n"
    "    let t = x.partition([BM, BN]).load([tile_id(0), tile_id(1)]);\n"
    "    z.store((t * s).exp() as f16);\n"
    "}\n";

/* Tile kernel bodies: line 3 is the body's first line. */
#define T(body)                                                                          \
  "#[tile]\n"                                                                            \
  "fn k<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, "                 \
  "i: &Tensor<i32, [-1]>, o: &mut Tensor<i32, [B]>, n: u32, f: f32) {\n" body "\n}\n"

static const good goods[] = {
    {"add", add_src, {128}, {
        "kernel add(%z: ", "%x: ", "v0: u64 = t.id %z.0", "v1: f32[128] = t.load %x v0",
        "v2: u64 = t.id %z.0", "v3: f32[128] = t.load %y v2", "v4: f32[128] = bin.add v1, v3",
        "t.store %z v4", "ret"}},
    {"add, placeholder generics", add_src, {0}, {"f32[16] = t.load %x", "t.store %z"}},
    {"prefetch: a hint of the partition's tile shape, no value", T(
        "let p = x.partition([B]);\n"
        "p.prefetch([tile_id(0) + 1]);\n"
        "z.store(p.load([tile_id(0)]));"), {64}, {"t.prefetch %x", "t.load %x", "t.store %z"}},
    {"saxpy", saxpy_src, {256}, {
        "v0: f32 = param %a", "v1: u64 = t.id %y.0", "v2: f32[256] = t.load %x v1",
        "v3: f32[256] = t.splat v0", "v4: f32[256] = bin.mul v3, v2", "v5: u64 = t.id %y.0",
        "v6: f32[256] = t.load %y0 v5", "v7: f32[256] = bin.add v4, v6", "t.store %y v7"}},
    {"scale2d", scale2d_src, {64, 32}, {
        "v0: f32 = param %s", "v1: u64 = t.id %z.0", "v2: u64 = t.id %z.1",
        "v3: f32[64x32] = t.load %x v1, v2", "v4: f32[64x32] = t.splat v0",
        "v5: f32[64x32] = bin.mul v3, v4", "v6: f32[64x32] = math.exp v5",
        "v7: f16[64x32] = cast v6", "t.store %z v7"}},
    {"iota takes the other operand's type; type constants",
     T("let c = iota([B], 0) + tile_id(0);\nz.store(select(c < x.dim(0), f32::NEG_INFINITY, f32::MAX));"), {8}, {
        "v3: u64[8] = t.iota", "bin.add v3, v4", "f32 = const -inf", "f32 = const 3.40282347e+38"}},
    {"literals take the tile's dtype", T("z.store(2.0 * load_tile_like(x, z) - 1.0);"), {8}, {
        "f32 = const 2", "f32[8] = t.splat", "bin.mul", "f32 = const 1", "bin.sub"}},
    {"integer tiles, bitwise ops, shifts, negation", T(
        "let a = load_tile_like(i, o);\n"
        "o.store((a & 7) | (a ^ 1) << 2u32 >> 1 % a - -a + !a);"), {32}, {
        "i32[32] = t.load %i", "i32[32] = bin.and", "i32[32] = bin.or", "i32[32] = bin.xor",
        "i32[32] = bin.shl", "i32[32] = bin.shr", "i32[32] = bin.rem", "i32[32] = neg",
        "i32[32] = not", "t.store %o"}},
    {"comparisons and select", T(
        "let t = load_tile_like(x, z);\n"
        "let pos = t > 0.0;\n"
        "z.store(select(pos, t, 0.0) + select(t <= f, 1.0, t) + select(n > 3, t, t));\n"
        "o.store(select(pos & (t != 1.0) | !(t == 2.0), 1, 0));"), {16}, {
        "bool[16] = cmp.gt", "f32[16] = select", "bool[16] = cmp.le", "bool[16] = cmp.ne",
        "bool[16] = cmp.eq", "bool[16] = not", "bool[16] = bin.and", "bool[16] = bin.or",
        "i32[16] = select", "bool = cmp.gt"}},
    {"math as functions and methods", T(
        "let t = load_tile_like(x, z);\n"
        "let a = exp(t) + t.exp2() + log(t) + t.ln() + log2(t) + sqrt(t) + t.rsqrt() + sin(t)\n"
        "    + t.cos() + tanh(t) + abs(t) + t.min(1.0) + max(t, f) + pow(t, 2.0) + t.powf(f)\n"
        "    + fma(t, t, 1.0) + t.mul_add(f, t) + floor(t) + t.ceil();\n"
        "z.store(a);\n"
        "o.store(abs(load_tile_like(i, o)).max(3));"), {16}, {
        "f32[16] = math.exp", "f32[16] = math.exp2", "f32[16] = math.log", "f32[16] = math.log2",
        "f32[16] = math.sqrt", "f32[16] = math.rsqrt", "f32[16] = math.sin", "f32[16] = math.cos",
        "f32[16] = math.tanh", "f32[16] = math.abs", "f32[16] = math.min", "f32[16] = math.max",
        "f32[16] = math.pow", "f32[16] = math.fma", "f32[16] = math.floor", "f32[16] = math.ceil",
        "i32[16] = math.abs", "i32[16] = math.max"}},
    {"casts", T(
        "let t = load_tile_like(x, z);\n"
        "o.store(t as i32);\n"
        "z.store((t as f16 as bf16 as f64 as u8) as f32);\n"
        "let b = (t > 0.0) as bool;"), {16}, {
        "i32[16] = cast", "f16[16] = cast", "bf16[16] = cast", "f64[16] = cast", "u8[16] = cast",
        "t.store %o"}},
    {"stores of scalars", T("z.store(1.5);\no.store(n as i32);\nz.store(f);"), {4}, {
        "f32 = const 1.5", "f32[4] = t.splat", "i32[4] = t.splat", "t.store %o",
        "f32[4] = t.splat v1"}},
    {"tile_id, num_tiles, dim, stride", T(
        "let c = num_tiles(0) + tile_id(0) + x.dim(0) * x.stride(0) + z.dim(0) + o.stride(0);\n"
        "z.store(c as f32);"), {16}, {
        "u64 = t.count %z.0", "u64 = t.id %z.0", "u64 = dim %x.0", "u64 = stride %x.0",
        "u64 = dim %z.0", "u64 = stride %o.0", "f32[16] = t.splat"}},
    {"partition and load with computed indices", T(
        "let p = x.partition([B]);\n"
        "let j = (tile_id(0) + 1) % num_tiles(0);\n"
        "z.store(p.load([j]) + p.load([3]) + x.partition([16]).load([tile_id(0) * 2]));"), {16}, {
        "f32[16] = t.load %x v", "u64 = const 3", "u64 = bin.mul"}},
    {"load_padded", T(
        "let t = x.partition([B]).load_padded([tile_id(0)], f32::NEG_INFINITY);\n"
        "let u = x.partition([B]).load_padded([0], -2.5);\n"
        "let v = i.partition([B]).load_padded([0], -7);\n"
        "let w = i.partition([B]).load_padded([0], i32::MAX);\n"
        "z.store(t + u);\no.store(v + w);"), {16}, {"f32[16] = t.load %x", "i32[16] = t.load %i"}},
    {"scalar code: params, arithmetic, if, loops", T(
        "let mut acc = 0.0f32;\n"
        "for j in 0..n { if j % 2 == 0 { acc += f; } else { acc -= 1.0; } }\n"
        "let mut w = 0u32;\n"
        "while w < n { w += 1; }\n"
        "let s = if n > 4 { acc } else { f };\n"
        "z.store(load_tile_like(x, z) * s);"), {16}, {
        "f32 = var.get", "condbr", "f32[16] = t.splat", "f32[16] = bin.mul"}},
    {"tile ops under scalar control flow", T(
        "let t = load_tile_like(x, z);\n"
        "if n > 0 { z.store(t); } else { z.store(t * 2.0); }\n"
        "for j in 0..n { o.store(j as i32); }\n"
        "if f > 1.0 { return; }"), {16}, {"t.store %z", "i32[16] = t.splat"}},
    {"generics as constants", T(
        "let b = B * 2;\n"
        "let c = B as usize + x.dim(0);\n"
        "z.store(b as f32);"), {64}, {"i32 = const 64", "u64 = cast"}},
    {"generic types", "#[tile]\nfn g<const A: usize, const C: u32, const D: i64>(\n"
        "z: &mut Tensor<f32, [A, C, 4]>, x: &Tensor<f32, [D, -1, 4]>) {\n"
        "let t = load_tile_like(x, z);\n"
        "z.store(t + (A as f32) + (C as f32) + (D as f32));\n}\n", {2, 8, 100}, {
        "f32[2x8x4] = t.load %x", "u64 = const 2", "u32 = const 8", "i64 = const 100"}},
    {"device functions inlined", "fn sq(v: f32) -> f32 { v * v }\n"
        "#[tile]\nfn k<const B: i32>(z: &mut Tensor<f32, [B]>, a: f32) {\n"
        "    z.store(sq(a) + 1.0);\n}\n", {8}, {"bin.mul", "f32[8] = t.splat"}},
    {"two outputs, block values, no generics", "#[tile]\n"
        "fn two(a: &mut Tensor<f32, [32, 4]>, b: &mut Tensor<bool, [32, 4]>, x: &Tensor<f32, [-1, 4]>) {\n"
        "    let t = { let u = load_tile_like(x, a); u * u };\n"
        "    a.store(t);\n"
        "    b.store(t > 0.5);\n"
        "    let e = load_tile_like(a, b);\n"
        "    b.store(e < 1.0);\n}\n", {0}, {
        "v0: u64 = t.id %a.0", "v1: u64 = t.id %a.1", "v2: f32[32x4] = t.load %x v0, v1", "bool[32x4] = cmp.gt", "t.store %b",
        "u64 = t.id %b.0", "f32[32x4] = t.load %a"}},
    {"SIMT kernels beside tile kernels", "#[kernel]\nfn s(a: &[f32], c: DisjointSlice<f32>) {\n"
        "    let i = thread::index_1d();\n"
        "    if let Some(o) = c.get_mut(i) { *o = a[i]; }\n}\n"
        "#[tile]\nfn t<const B: i32>(z: &mut Tensor<f32, [B]>) { z.store(0.0); }\n", {16}, {
        "kernel t(", "!kernel s("}},
    {"scans, sorts, top-k", T(
        "let t = reshape(load_tile_like(x, z), [4, 4]);\n"
        "let a = cumsum(t, 1) + cumprod(t, 0) + cummax(t, 1) + cummin(t, 0);\n"
        "let b = sort(t, 1) + sort(t, 0, true) + topk(t, 4, 1) + topk(t, 2, 0).slice([0, 0], [1, 4]);\n"
        "let c = argsort(t, 1, false) + topk_indices(t, 2, 1).slice([0, 0], [4, 1]);\n"
        "o.store(cumsum(load_tile_like(i, o), 0));"), {16}, {
        "f32[4x4] = t.scan.add axis 1,", "f32[4x4] = t.scan.mul axis 0,", "f32[4x4] = t.scan.max axis 1,",
        "f32[4x4] = t.scan.min axis 0,", "f32[4x4] = t.sort axis 1,", "f32[4x4] = t.sort.desc axis 0,",
        "f32[4x4] = t.sort.desc axis 1,", "f32[2x4] = t.slice", "i32[4x4] = t.sort.index axis 1,",
        "i32[4x4] = t.sort.desc.index axis 1,", "i32[4x2] = t.slice", "i32[16] = t.scan.add axis 0,"}},
    {"cat, zeros, ones", T(
        "let t = load_tile_like(x, z);\n"
        "let h = t.slice([0], [8]);\n"
        "z.store(cat([h, h * 2.0], 0) + zeros([16]) + ones([B]));\n"
        "let u = zeros::<f16>([2, 2]);\n"
        "let q = reshape(t, [4, 4]);\n"
        "let w = cat([q, q, q, q], 1);\n"
        "o.store(zeros([B]) + ones::<i32>([B]));"), {16}, {
        "f32[8] = t.slice", "f32[1x8] = t.reshape", "f32[2x8] = t.broadcast", "i32[2x8] = t.iota",
        "bool[2x8] = cmp.eq", "f32[2x8] = select", "f32[16] = t.reshape", "f16 = const 0", "f16[2x2] = t.splat",
        "f32[4x1x4] = t.reshape", "f32[4x4x4] = t.broadcast", "f32[4x16] = t.reshape", "i32 = const 1",
        "i32[16] = t.splat"}},
    {"full's untyped literal: the type of its variable's later use, else f32",
     "#[tile]\nfn k(h: &mut Tensor<f16, [8]>, d: &mut Tensor<f64, [8]>, x: &Tensor<f16, [-1]>) {\n"
     "    let a = full([8], 0.5);\n    h.store(a);\n"
     "    let c = load_tile_like(x, h);\n    let b = zeros([8]);\n    h.store(b + c);\n"
     "    let e = full([8], 1.5);\n    d.store(e);\n    let mut f = ones([8]);\n    f = e;\n"
     "    let g = full([8], 2.5);\n    let n = full([8], 3);\n}\n", {0}, {
        "f16 = const 0.5", "f16 = const 0", "f64 = const 1.5", "f64 = const 1", "f32 = const 2.5", "i32 = const 3"}},
    {"load_tile_like with a padding value; a condition that broadcasts", T(
        "let t = reshape(load_tile_like(x, z, f32::NEG_INFINITY), [4, 4]);\n"
        "let s = select(reduce_sum(t, 1) > 0.0, t, 1.0) + select(iota([4], 0) > 1, t, 0.0);\n"
        "o.store(load_tile_like(o, o, -1) + reshape(select(iota([4, 1], 0) == 0, 1, 2), [4]).slice([0], [1]));\n"
        "z.store(reshape(s, [16]));"), {16}, {
        "f32[16] = t.load %x", "bool[4x1] = cmp.gt", "bool[4x4] = t.broadcast", "bool[1x4] = t.reshape",
        "i32[16] = t.load %o", "i32[4x1] = select"}},
};

static const bad bads[] = {
    /* parser */
    {"const generics on a SIMT kernel", "#[kernel]\nfn k<const B: i32>(n: u32) { }\n", 1,
     {"2:12 error: const generics are for #[tile] kernels; a SIMT function takes type generics "
      "only, written '<T: Float>'"}},
    {"type generic without a bound", "#[tile]\nfn k<T>(z: &mut Tensor<f32, [4]>) { }\n", 1,
     {"2:6 error: give type generic 'T' a bound: 'T: Float', 'T: Int' or 'T: Num'"}},
    {"type generic bound by no tensor", "#[tile]\nfn k<T: Float>(z: &mut Tensor<f32, [4]>, a: T) { }\n", 1,
     {"2:6 error: type generic 'T' must be the element type of a tensor parameter: the launch takes "
      "it from that argument's dtype"}},
    {"float generic", "#[tile]\nfn k<const B: f32>(z: &mut Tensor<f32, [4]>) { }\n", 1,
     {"2:15 error: a const generic is an integer (i32, i64, u32, usize, ...)"}},
    {"generic twice", "#[tile]\nfn k<const B: i32, const B: i32>(z: &mut Tensor<f32, [B]>) { }\n",
     1, {"2:26 error: generic 'B' appears twice"}},
    {"unknown generic", "#[tile]\nfn k<const B: i32>(z: &mut Tensor<f32, [C]>) { }\n", 1,
     {"2:41 error: unknown const generic 'C' in a tensor shape; declare it: '<const C: i32>'"}},
    {"dim zero", "#[tile]\nfn k(z: &mut Tensor<f32, [0]>) { }\n", 1,
     {"2:27 error: a tensor dim is 1..2^40, -1 (dynamic) or a const generic, found 0"}},
    {"dim -2", "#[tile]\nfn k(z: &mut Tensor<f32, [-2]>) { }\n", 1,
     {"2:27 error: a dynamic dim is written -1"}},
    {"rank 0", "#[tile]\nfn k(z: &mut Tensor<f32, []>) { }\n", 1,
     {"2:26 error: a tensor needs 1 to 4 dims"}},
    {"rank 5", "#[tile]\nfn k(z: &mut Tensor<f32, [1, 1, 1, 1, 1]>) { }\n", 1,
     {"2:39 error: a tensor has at most 4 dims"}},
    {"tensor of slices", "#[tile]\nfn k(z: &mut Tensor<&[f32], [4]>) { }\n", 1,
     {"2:9 error: elements must be scalar types"}},
    {"unknown attribute", "#[tiles]\nfn k(z: &mut Tensor<f32, [4]>) { }\n", 1,
     {"1:3 error: unknown attribute 'tiles'; expected 'kernel', 'launch_contract' or 'inline' "
      "('tile' for tile kernels)"}},
    /* signatures */
    {"no output", "#[tile]\nfn k(x: &Tensor<f32, [-1]>) { }\n", 1,
     {"2:4 error: a tile kernel writes a partitioned output (`&mut Tensor<T, [tile]>`) or adds "
      "into an atomic tensor (`&Tensor<Atomic<T>, [dims]>`): add one"}},
    {"atomic f16", "#[tile]\nfn k(h: &Tensor<Atomic<f16>, [-1]>) { }\n", 1,
     {"2:6 error: atomic tensors hold i32, u32, i64, u64, f32 or f64, not f16"}},
    {"atomic tensors", "#[tile]\nfn k(g: &Tensor<Atomic<f32>, [-1, -1]>, x: &Tensor<i32, [-1]>) {\n"
     "let p = g.partition([16, 16]);\n"
     "g.atomic_add_at(x.partition([16]).load([0]), 1.0);\n"
     "g.atomic_add([0], full([16], 1.0f32));\n"
     "g.atomic_add([0, 0], full([16, 16], 1i32));\n"
     "g.store(1.0);\n"
     "let t = tile_id(3);\n"
     "}\n", 6,
     {"3:10 error: 'g' is an atomic tensor: blocks add into it (atomic_add), none reads it",
      "4:2 error: 'atomic_add_at' scatters into a 1-D atomic tensor; 'g' has 2 dims",
      "5:14 error: 'atomic_add' takes the tile's coordinates as an array, one usize per dim of 'g' (2)",
      "6:22 error: 'atomic_add' adds a tile of f32 with 2 dims into 'g', found a tile of i32",
      "7:2 error: 'g' is an atomic tensor: add tiles into it with g.atomic_add([..], t)",
      "8:17 error"}},
    {"mutable atomic tensor", "#[tile]\nfn j(h: &mut Tensor<Atomic<f32>, [-1]>) { }\n", 1,
     {"2:9 error: atomic tensors are shared: write '&Tensor<Atomic<T>, [..]>', not '&mut'"}},
    {"SIMT parameters", "#[tile]\nfn k(z: &mut Tensor<f32, [4]>, a: &[f32], b: &mut [f32],\n"
     "     c: DisjointSlice<f32>, h: &[Atomic<u32>]) { }\n", 4,
     {"2:32 error: tile kernel parameters are scalars, &Tensor<T, [dims]> inputs, &mut "
      "Tensor<T, [tile]> outputs and &Tensor<Atomic<T>, [dims]> atomic tensors; slices, "
      "DisjointSlice and atomic slices belong to #[kernel] (SIMT) functions", "2:43", "3:6", "3:29"}},
    {"dynamic tile shape", "#[tile]\nfn k(z: &mut Tensor<f32, [-1]>) { }\n", 1,
     {"2:6 error: the tile shape of output 'z' must be static: dim 0 is -1 (dynamic); use a const "
      "generic"}},
    {"tile shape not a power of two", "#[tile]\nfn k(z: &mut Tensor<f32, [4, 12]>) { }\n", 1,
     {"2:6 error: tile shapes are static powers of two: dim 1 of output 'z' is 12"}},
    {"tile too big", "#[tile]\nfn k(z: &mut Tensor<f32, [1024, 2048]>) { }\n", 1,
     {"2:6 error: a tile holds at most 65536 elements; output 'z' has the tile shape "
      "[1024, 2048]"}},
    {"tensors in a SIMT kernel", "#[kernel]\nfn k(x: &Tensor<f32, [4]>) { }\n", 1,
     {"2:6 error: Tensor parameters belong to #[tile] kernels"}},
    {"both attributes", "#[kernel]\n#[tile]\nfn k(z: &mut Tensor<f32, [4]>) { }\n", 1,
     {"3:4 error: 'k' is marked both #[kernel] and #[tile]"}},
    {"contract", "#[tile]\n#[launch_contract(block = (128, 1, 1))]\n"
     "fn k(z: &mut Tensor<f32, [4]>) { }\n", 1,
     {"2:3 error: launch_contract applies to #[kernel] functions only"}},
    {"unsafe tile kernel", "#[tile]\nunsafe fn k(z: &mut Tensor<f32, [4]>) { }\n", 1,
     {"2:11 error: tile kernels cannot be unsafe"}},
    {"return type", "#[tile]\nfn k(z: &mut Tensor<f32, [4]>) -> f32 { 1.0 }\n", 1,
     {"2:35 error: tile kernels return nothing; results go to their &mut Tensor outputs"}},
    {"parameter named like a generic", "#[tile]\nfn k<const B: i32>(z: &mut Tensor<f32, [B]>, "
     "B: i32) { }\n", 1, {"2:46 error: 'B' is both a const generic and a parameter"}},
    {"tile kernel called", "#[tile]\nfn t(z: &mut Tensor<f32, [4]>) { }\n"
     "#[kernel]\nfn k(n: u32) { t(n); }\n", 1,
     {"4:16 error: 't' is a kernel; kernels are launched from the host, not called"}},
    /* SIMT-only things */
    {"thread builtins", T("let a = thread::index_1d();\nlet b = thread::thread_idx_x();\n"
                          "sync_threads();\nlet c = warp::lane_id();\n"
                          "let s = SharedArray::<f32, 4>::new();"), 5,
     {"3:9 error: 'thread::index_1d' is a SIMT builtin, not available in tile kernels", "4:9",
      "5:1 error: 'sync_threads' is a SIMT builtin", "6:9 error: 'warp::lane_id'",
      "7:9 error: 'SharedArray::new'"}},
    {"grid_stride", T("for w in thread::grid_stride(4) { }"), 1,
     {"3:10 error: 'thread::grid_stride' is a SIMT builtin, not available in tile kernels"}},
    {"unsafe block", T("unsafe { z.store(1.0); }"), 1,
     {"3:1 error: 'unsafe' is not available in tile kernels"}},
    {"tile builtins in a SIMT kernel", "#[kernel]\nfn k(n: u32) { let a = tile_id(0); }\n", 1,
     {"2:24 error: unknown function 'tile_id'"}},
    /* tile ops */
    {"load_tile_like arguments", T(
        "let a = load_tile_like(z, x);\n"
        "let b = load_tile_like(n, z);\n"
        "let c = load_tile_like(x);"), 3,
     {"3:27 error: the second argument of load_tile_like must be an output tile (an &mut Tensor "
      "parameter), found a tensor (&Tensor)",
      "4:24 error: the first argument of load_tile_like must be a tensor parameter, found u32",
      "5:9 error: 'load_tile_like' takes 2 arguments, or 3 with a padding value, found 1"}},
    {"load_tile_like ranks", "#[tile]\nfn k(z: &mut Tensor<f32, [4, 4]>, x: &Tensor<f32, [-1]>) {\n"
     "    z.store(load_tile_like(x, z));\n}\n", 1,
     {"3:13 error: load_tile_like(x, z) needs tensors of one rank: 'x' has rank 1, 'z' rank 2"}},
    {"broadcasting", T(
        "let a = load_tile_like(x, z);\n"
        "let b = x.partition([32]).load([0]);\n"
        "let c = a + b;\n"
        "let d = max(a, b);\n"
        "let e = select(a > 0.0, b, 1.0);"), 3,
     {"5:11 error: tiles of shapes [16] and [32] do not broadcast (dims must be equal or 1)",
      "6:9 error: tiles of shapes [16] and [32] do not broadcast", "7:9 error: tiles of shapes"}},
    {"mixed dtypes", T(
        "let a = load_tile_like(x, z);\n"
        "let b = load_tile_like(i, o);\n"
        "let c = a + b;\n"
        "let d = a * n;\n"
        "let e = a + 1 + 2.5;\n"
        "let g = a + 1u8;"), 3,
     {"5:11 error: mismatched types: f32 + i32", "6:11 error: mismatched types: f32 * u32",
      "8:11 error: mismatched types: f32 + u8"}},
    {"ops not for the dtype", T(
        "let a = load_tile_like(x, z);\n"
        "let b = a & a;\n"
        "let c = !a;\n"
        "let d = a << 1;\n"
        "let e = load_tile_like(i, o).exp();\n"
        "let g = a > 0.0;\n"
        "let h = g < g;"), 5,
     {"4:11 error: '&' is not defined for f32", "5:9 error: '!' needs a bool or an integer",
      "6:11 error: '<<' needs integer operands", "7:29 error: 'exp' needs floating-point",
      "9:11 error: bool values can only be compared with == and !="}},
    {"tiles where scalars are needed", T(
        "let a = load_tile_like(x, z);\n"
        "if a > 0.0 { }\n"
        "let b = (a > 0.0) && (a < 1.0);\n"
        "for j in 0..a { }\n"
        "let mut m = 0.0f32;\n"
        "m = a;"), 4,
     {"4:6 error: expected a number or bool for a condition, found a tile of bool, shape [16]",
      "5:12 error: expected a number or bool for a logical operand, found a tile of bool",
      "6:13 error: expected a number or bool for a range bound, found a tile of f32, shape [16]",
      "8:5 error: expected a number or bool for the assigned value, found a tile"}},
    {"mutable tiles and tile branches", T(
        "let mut a = load_tile_like(x, z);\n"
        "let b = if n > 0 { load_tile_like(x, z) } else { x.partition([32]).load([0]) };\n"
        "let c: f32 = load_tile_like(x, z);\n"
        "a = load_tile_like(i, o);\n"
        "a = x.partition([32]).load([0]);\n"
        "a <<= 1.0;\n"
        "a += 1.0;\n"
        "a = 2.0;"), 5,
     {"4:48 error: the branches of 'if' give tiles of shapes [16] and [32] (an 'if' does not broadcast: "
      "broadcast_to one shape first)",
      "5:14 error: expected f32, found a tile of f32, shape [16]",
      "6:5 error: 'a' is a tile of f32, found a tile of i32; convert with 'as f32'",
      "7:22 error: 'a' is a tile of shape [16], found shape [32]",
      "8:3 error: '<<=' on a tile: only += -= *= /= %= are defined"}},
    {"dot and mma", T(
        "let a = x.partition([16]).load([0]);\n"
        "let b = reshape(a, [4, 4]);\n"
        "let c = reshape(load_tile_like(i, o), [4, 4]);\n"
        "let d = dot(a, b);\n"
        "let e = dot(b, c);\n"
        "let g = dot(b, reshape(a, [2, 8]));\n"
        "let h = dot(b, reshape(a, [8, 2]));\n"
        "let j = mma(b, b, b);\n"
        "let l = mma(b, b, reshape(a, [2, 8]));\n"
        "let q = dot(b);"), 6,
     {"6:13 error: 'dot' takes 2-D tiles, found [16]",
      "7:9 error: 'dot' multiplies two tiles of one dtype, bf16, f16, tf32 or f32, two fp8 tiles "
      "(f8e4m3, f8e5m2), or two integer tiles of one dtype (i8, u8, i16, i32); found f32 and i32",
      "8:9 error: 'dot': the inner dims differ: [4, 4] x [2, 8]",
      "9:9 error: 'dot': the inner dims differ: [4, 4] x [8, 2]",
      "11:19 error: 'mma' accumulates into an f32 tile of shape [4, 4], found f32 of [2, 8]",
      "12:9 error: 'dot' takes 2 arguments, found 1"}},
    {"store", T(
        "x.store(1.0);\n"
        "z.store(load_tile_like(i, o));\n"
        "z.store(x.partition([32]).load([0]));\n"
        "z.store(x);\n"
        "o.store(1.0);\n"
        "z.store();"), 6,
     {"3:2 error: 'x' is a read-only tensor (&Tensor); tiles are stored into &mut Tensor outputs",
      "4:9 error: 'z' holds f32, found a tile of i32, shape [16]; convert with 'as f32'",
      "5:26 error: 'z' stores tiles of shape [16], found shape [32]",
      "6:9 error: 'z.store' takes a tile (or a scalar for every element), found a tensor",
      "7:9 error: 'o' holds i32, found f64", "8:2 error: 'store' takes 1 argument, found 0"}},
    {"tile_id and num_tiles", T(
        "let a = tile_id(1);\n"
        "let b = num_tiles(n);\n"
        "let c = tile_id(0, 1);\n"
        "let (d, e) = tile_id();"), 4,
     {"3:17 error: axis 1 is out of range for tile_id: 'z' has rank 1 (axes 0..0)",
      "4:19 error: the axis of num_tiles must be an integer literal",
      "5:9 error: 'tile_id' takes 1 argument, found 2",
      "6:5 error: the pattern names 2 values, and the tuple has 1"}},
    {"dim and stride", T("let a = x.dim(2);\nlet b = x.stride(n);\nlet c = x.len();\n"
                         "let d = x.load([0]);\nlet e = z.partition([4]);\nlet g = z.foo();"), 6,
     {"3:15 error: axis 2 is out of range for 'dim': 'x' has rank 1 (axes 0..0)",
      "4:18 error: the axis of 'stride' must be an integer literal",
      "5:10 error: a tensor (&Tensor) has methods partition([..]), at([..]), load_at([..], [..]), gather([..]), "
      "dim(k) and stride(k), not 'len'",
      "6:10 error: a tensor (&Tensor) has methods partition([..]), at([..]), load_at([..], [..]), gather([..]), "
      "dim(k) and stride(k), not 'load'; partition it first",
      "7:10 error: 'z' is an output tile (&mut Tensor), which cannot be partitioned again",
      "8:10 error: an output tile (&mut Tensor) has methods store(t), dim(k) and stride(k), not "
      "'foo'"}},
    {"partition sizes", T(
        "let a = x.partition([12]);\n"
        "let b = x.partition([n]);\n"
        "let c = x.partition([4, 4]);\n"
        "let d = x.partition(4);\n"
        "let e = x.partition([2097152]);"), 5,
     {"3:22 error: tile shapes are static powers of two: dim 0 of the partition of 'x' is 12",
      "4:22 error: a tile size is an integer literal, a const generic, or an expression of them "
      "([D / 2, BM * 2])",
      "5:21 error: 'x' has rank 1, but the partition gives 2 sizes",
      "6:21 error: partition takes the tile shape as an array: 'x.partition([B])'",
      "7:21 error: a tile holds at most 65536 elements; the partition of 'x' is [2097152]"}},
    {"partition loads", T(
        "let p = x.partition([B]);\n"
        "let a = p.load([n]);\n"
        "let b = p.load([0, 0]);\n"
        "let c = p.load(0);\n"
        "let d = p.load_padded([0], f);\n"
        "let e = p.load_padded([0], i32::MAX);\n"
        "let g = p.store(1.0);\n"
        "let q = p;"), 7,
     {"4:17 error: a tile index must be usize, found u32; convert it with 'as usize'",
      "5:16 error: the partition has rank 1, but load gives 2 indexes",
      "6:16 error: load takes the tile's index as an array, one usize per dim: '.load([i])'",
      "7:28 error: the padding value must be a constant of the tensor's dtype f32: a literal, "
      "f32::INFINITY, f32::NEG_INFINITY, f32::MAX or f32::MIN",
      "8:28 error: the padding value must be a constant of the tensor's dtype f32",
      "9:10 error: a partition has methods load([..]), load_padded([..], value), prefetch([..]) and num_tiles(axis), not 'store'",
      "10:9 error: 'p' cannot be copied into another variable"}},
    {"prefetch's index rank", T("let p = x.partition([B]);\np.prefetch([0, 0]);"), 1,
     {"4:12 error: the partition has rank 1, but prefetch gives 2 indexes"}},
    {"prefetch's index as an array", T("let p = x.partition([B]);\np.prefetch(0);"), 1,
     {"4:12 error: prefetch takes the tile's index as an array, one usize per dim: '.prefetch([i])'"}},
    {"prefetch's index type", T("x.partition([B]).prefetch([n]);"), 1,
     {"3:28 error: a tile index must be usize, found u32; convert it with 'as usize'"}},
    {"prefetch has no value", T("let p = x.partition([B]);\nz.store(p.prefetch([0]));"), 1,
     {"4:10 error: 'z.store' takes a tile (or a scalar for every element), found ()"}},
    {"tile sizes as expressions of generics", T(
        "let a = full([B / 2, B * 4], 1.0f32);\n"
        "let b = x.partition([B + 1]);\n"
        "let c = full([B / 0], 1.0f32);\n"
        "let d = full([B >> 1 << 2], 1.0f32);\n"
        "let e = x.partition([(B as usize) / 4]).load([0]);\n"
        "let g = full([B - 17], 1.0f32);"), 3,
     {"4:24 error: tile shapes are static powers of two: dim 0 of the partition of 'x' is 17",
      "5:17 error: this tile size does not evaluate: B = 16 / 0",
      "8:17 error: tile shapes are static powers of two: dim 0 of full is -1"}},
    {"tile elements", T(
        "let t = load_tile_like(x, z);\n"
        "let a = t.item();\n"
        "let b = t.at([0, 1]);\n"
        "let c = t[1u32];\n"
        "let d = reshape(t, [4, 4])[0];\n"
        "let e = t.foo();\n"
        "let g = t[n as usize] + t.at([3]) + reduce_sum(t, 0).item();"), 5,
     {"4:10 error: item() takes the element of a tile of one element, found shape [16]: read one with "
      "'t.at([..])', or reduce it first",
      "5:14 error: a tile of shape [16] is read at 1 index, as an array: 't.at([i])'",
      "6:11 error: an element index must be usize, found u32; convert it with 'as usize'",
      "7:27 error: a tile of 2 dims is not indexed with [i]: read an element with 't.at([i, j])'",
      "8:10 error: a tile has methods item(), at([..]), slice([..], [..]) and the math functions (t.exp(), "
      "t.max(v), ...), not 'foo'"}},
    {"Triton names get Oxide's", T("let a = program_id(0);\nlet b = arange(16);\nlet c = sum(1, 0);"), 3,
     {"3:9 error: unknown function 'program_id'; Oxide writes it tile_id(axis)",
      "4:9 error: unknown function 'arange'; Oxide writes it iota([n], 0)",
      "5:9 error: unknown function 'sum'; Oxide writes it reduce_sum(t, axis)"}},
    {"tile slices", T(
        "let t = reshape(load_tile_like(x, z), [4, 4]);\n"
        "let a = t.slice([0, 2], [4, 2]);\n"
        "let b = t.slice([3, 0], [2, 4]);\n"
        "let c = t.slice([0], [4, 4]);\n"
        "let d = t.slice([0, 0], [4]);"), 3,
     {"5:18 error: the slice's dim 0, 2 elements from 3, passes the tile's 4",
      "6:17 error: a tile of shape [4, 4] is sliced from 2 offsets, as an array of sizes: 't.slice([o0, o1], [..])'",
      "7:25 error: a tile of shape [4, 4] is sliced to a tile of its rank, found [4]"}},
    {"arrays elsewhere", T("let a = [1, 2];\nlet b = tile_id([0]);"), 2,
     {"3:9 error: an array '[..]' is written only as the sizes of x.partition([..]) and the "
      "indices of .load([..])", "4:17 error: the axis of tile_id must be an integer literal"}},
    {"indexing tensors", T("let a = o[0];\nz[0] = 1.0;"), 2,
     {"3:10 error: 'o' is an output tile (&mut Tensor): its other elements belong to other blocks, "
      "so it is not read element by element; read this block's tile with load_tile_like(o, o), and "
      "write it with 'o.store(t)'",
      "4:2 error: a tensor is not written element by element; store a whole tile into an output "
      "with 'z.store(t)'"}},
    {"generics cannot be assigned", T("B = 3;"), 1,
     {"3:1 error: 'B' is a const generic and cannot be assigned"}},
    {"tile to a device function", "fn sq(v: f32) -> f32 { v * v }\n"
     "#[tile]\nfn k(z: &mut Tensor<f32, [4]>, x: &Tensor<f32, [-1]>) {\n"
     "    z.store(sq(load_tile_like(x, z)));\n}\n", 1,
     {"4:16 error: expected a number or bool for an argument, found a tile of f32, shape [4]"}},
    {"SIMT builtins through a device function", "fn f() -> u32 { thread::thread_idx_x() }\n"
     "#[tile]\nfn k(z: &mut Tensor<f32, [4]>) {\n    z.store(f() as f32);\n}\n", 1,
     {"1:17 error: 'thread::thread_idx_x' is a SIMT builtin"}},
    {"trailing value and return value", T("return 1;"), 1,
     {"3:8 error: tile kernels return nothing; results go to their &mut Tensor outputs"}},
    {"trailing value", "#[tile]\nfn k(z: &mut Tensor<f32, [4]>) {\n    1.0\n}\n", 1,
     {"3:5 error: tile kernels return nothing; end the expression with ';'"}},
    {"scans and sorts", T(
        "let t = load_tile_like(x, z);\n"
        "let a = cumsum(f, 0);\n"
        "let b = cumsum(t > 0.0, 0);\n"
        "let c = cummax(t, 1);\n"
        "let d = sort(t, n);\n"
        "let e = sort(t, 0, 1);\n"
        "let g = argsort(t);\n"
        "let h = cumsum(t as f8e4m3, 0);"), 7,
     {"4:16 error: 'cumsum' takes a tile of numbers, found f32",
      "5:18 error: 'cumsum' takes a tile of numbers, found a tile of bool, shape [16]",
      "6:19 error: axis 1 is out of range for cummax: '[16]' has rank 1 (axes 0..0)",
      "7:17 error: the axis of sort must be an integer literal",
      "8:20 error: the third argument of sort says whether it is descending: true or false",
      "9:9 error: 'argsort' takes 2 or 3 arguments, found 1",
      "10:18 error: 'cumsum' takes a tile of numbers, found a tile of f8e4m3, shape [16] (a storage type: convert "
      "with 'as f32' first)"}},
    {"top-k", T(
        "let t = load_tile_like(x, z);\n"
        "let a = topk(t, 3, 0);\n"
        "let b = topk_indices(t, 32, 0);\n"
        "let c = topk(t, n, 0);\n"
        "let d = topk(t, 2);"), 4,
     {"4:17 error: 'topk' takes k, a power of two up to the size 16 of axis 0 (the result is a tile), found 3",
      "5:25 error: 'topk_indices' takes k, a power of two up to the size 16 of axis 0 (the result is a tile), found 32",
      "6:17 error: a tile size is an integer literal, a const generic, or an expression of them",
      "7:9 error: 'topk' takes 3 arguments, found 2"}},
    {"cat", T(
        "let t = load_tile_like(x, z);\n"
        "let a = cat([t], 0);\n"
        "let b = cat([t, t, t], 0);\n"
        "let c = cat([t, t.slice([0], [8])], 0);\n"
        "let d = cat([t, load_tile_like(i, o)], 0);\n"
        "let e = cat([t, f], 0);\n"
        "let g = cat(t, 0);\n"
        "let h = cat([t, t], 1);\n"
        "let q = cat([full([65536], 1.0f32), full([65536], 2.0f32)], 0);"), 8,
     {"4:13 error: cat takes the tiles as an array of 2, 4 or 8 tiles of one shape",
      "5:13 error: cat takes the tiles as an array of 2, 4 or 8 tiles of one shape",
      "6:18 error: 'cat' joins tiles of one shape: the first is [16], this one [8]",
      "7:17 error: 'cat' joins tiles of one dtype: the first is f32, this one i32",
      "8:17 error: 'cat' joins tiles, found f32",
      "9:13 error: cat takes the tiles as an array",
      "10:21 error: axis 1 is out of range for cat: '[16]' has rank 1 (axes 0..0)",
      "11:9 error: a tile holds at most 65536 elements; cat makes [131072]"}},
    {"zeros, ones, load_tile_like", T(
        "let a = zeros::<f8e4m3>([4]);\n"
        "let b = ones::<f32, 4>([4]);\n"
        "let c = zeros([3]);\n"
        "let d = ones(4);\n"
        "let e = load_tile_like(x, z, f);\n"
        "let g = load_tile_like(x, z, 1, 2);\n"
        "let h = z.load([0]);\n"
        "let q = o.load_padded([0], 1);"), 8,
     {"3:17 error: write zeros::<T>([..]) with T a number or bool type, such as zeros::<f16>([B])",
      "4:16 error: write ones::<T>([..]) with T a number or bool type",
      "5:16 error: tile shapes are static powers of two: dim 0 of zeros is 3",
      "6:14 error: ones takes a shape: an array of 1 to 4 sizes such as [BM, BN]",
      "7:30 error: the padding value must be a constant of the tensor's dtype f32",
      "8:9 error: 'load_tile_like' takes 2 arguments, or 3 with a padding value, found 4",
      "9:10 error: an output tile (&mut Tensor) has methods store(t), dim(k) and stride(k), not 'load'; read this "
      "block's tile of it with load_tile_like(z, z)",
      "10:10 error: an output tile (&mut Tensor) has methods store(t), dim(k) and stride(k), not 'load_padded'; read "
      "this block's tile of it with load_tile_like(o, o)"}},
    {"a device function of a new built-in's name takes the call", "fn cumsum(v: f32, a: i32) -> f32 { v }\n"
     "#[tile]\nfn k(z: &mut Tensor<f32, [4]>, x: &Tensor<f32, [-1]>) {\n"
     "    z.store(cumsum(load_tile_like(x, z), 0));\n}\n", 1,
     {"4:20 error: expected a number or bool for an argument, found a tile of f32, shape [4]"}},
};

static const badspec badspecs[] = {
    {"generic tile shape not a power of two", add_src, {100},
     {"2:22 error: tile shapes are static powers of two: dim 0 of output 'z' is B = 100"}},
    {"generic tile shape zero", add_src, {0},
     {"2:22 error: tile shapes are static powers of two: dim 0 of output 'z' is B = 0"}},
    {"generic output shape not a power of two", scale2d_src, {64, 48},
     {"2:42 error: tile shapes are static powers of two: dim 1 of output 'z' is BN = 48"}},
    {"generic partition not a power of two", "#[tile]\n"
     "fn k<const B: i32, const C: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>) {\n"
     "    z.store(x.partition([C]).load([tile_id(0)]));\n}\n", {16, 24},
     {"3:26 error: tile shapes are static powers of two: dim 0 of the partition of 'x' is "
      "C = 24"}},
    {"generic out of its type's range", "#[tile]\nfn k<const B: u32>(z: &mut Tensor<f32, [B]>) { }\n",
     {-4}, {"2:12 error: const generic 'B' = -4 does not fit in u32"}},
    {"generic input dim", "#[tile]\nfn k<const B: i32, const D: i32>(z: &mut Tensor<f32, [B]>, "
     "x: &Tensor<f32, [D]>) { }\n", {16, -1},
     {"2:60 error: a tensor dim is >= 1 or -1 (dynamic): dim 0 of 'x' is D = -1"}},
};

/* ------------------------------------------------------------- running */

static void run_good(const good *c) {
  /* the module compiles (placeholder generics) */
  ox_compile_options o = {0};
  o.filename = "t.oxk";
  char *out = NULL;
  if (ox_emit(c->src, &o, OX_TARGET_CPU, OX_EMIT_IR, &out) != OX_OK)
    fail(c->name, c->src, "module compile", ox_last_error());
  ox_free(out);
  /* specialized */
  unit u;
  unit_parse(&u, c->src);
  bool placeholders = c->gen[0] == 0;
  if (u.d.errors || !specialize_all(&u, placeholders ? NULL : c->gen)) {
    fail(c->name, c->src, "specialization", u.d.text.buf);
    unit_free(&u);
    return;
  }
  oxb_str ir = {0}, err = {0};
  oxi_print(&u.m, &ir);
  if (verbose)
    printf("==== %s\n%s", c->name, ir.buf);
  if (!oxi_verify(&u.m, &err))
    fail(c->name, c->src, "oxi_verify", err.buf);
  for (int i = 0; i < MAXX && c->expect[i]; i++) {
    const char *want = c->expect[i];
    int neg = want[0] == '!';
    if (has_line(ir.buf ? ir.buf : "", want + neg) == neg) {
      char why[256];
      snprintf(why, sizeof why, "%s '%s'", neg ? "unexpected" : "missing", want + neg);
      fail(c->name, c->src, why, ir.buf);
    }
  }
  oxb_str_free(&ir);
  oxb_str_free(&err);
  unit_free(&u);
}

static void check_diags(const char *name, const char *src, const char *text, int nerrors,
                        const char *const *expect) {
  char why[320];
  if (nerrors >= 0 && count(text, ": error: ") != nerrors) {
    snprintf(why, sizeof why, "%d errors, expected %d", count(text, ": error: "), nerrors);
    fail(name, src, why, text);
  }
  for (int i = 0; i < MAXX && expect[i]; i++)
    if (!has_diag(text, expect[i])) {
      snprintf(why, sizeof why, "missing '%s'", expect[i]);
      fail(name, src, why, text);
    }
}

static void run_bad(const bad *c) {
  ox_compile_options o = {0};
  o.filename = "t.oxk";
  char *out = NULL;
  ox_clear_error();
  ox_status s = ox_emit(c->src, &o, OX_TARGET_CPU, OX_EMIT_IR, &out);
  if (s != OX_ERR_COMPILE)
    fail(c->name, c->src, "status is not OX_ERR_COMPILE", s ? ox_last_error() : out);
  ox_free(out);
  if (s != OX_ERR_COMPILE)
    return;
  check_diags(c->name, c->src, ox_last_error(), c->nerrors, c->expect);
}

static void run_badspec(const badspec *c) {
  ox_compile_options o = {0};
  o.filename = "t.oxk";
  char *out = NULL;
  if (ox_emit(c->src, &o, OX_TARGET_CPU, OX_EMIT_IR, &out) != OX_OK)
    fail(c->name, c->src, "module compile", ox_last_error());
  ox_free(out);
  unit u;
  unit_parse(&u, c->src);
  if (u.d.errors || specialize_all(&u, c->gen))
    fail(c->name, c->src, "specialization should fail", u.d.text.buf);
  else
    check_diags(c->name, c->src, u.d.text.buf, -1, c->expect);
  unit_free(&u);
}

/* ------------------------------------------------------------- details */

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      failures++;                                                              \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                     \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
    }                                                                          \
  } while (0)

static const oxi_instr *find_op(const oxi_kernel *k, oxi_op op, int nth) {
  for (int b = 0; b < k->blocks.len; b++) {
    const oxi_block *bl = k->blocks.items[b];
    for (int i = 0; i < bl->instrs.len; i++) {
      const oxi_instr *in = bl->instrs.items[i];
      if (in->op == op && nth-- == 0)
        return in;
    }
  }
  return NULL;
}

static bool shape_is(const oxi_tshape *s, int rank, int64_t d0, int64_t d1) {
  return s && s->rank == rank && s->dims[0] == d0 && (rank < 2 || s->dims[1] == d1);
}

/* The fields the tile lowering reads: kernel and parameters, tshape of every
 * tile value, mem, index, padding. */
static void test_fields(void) {
  unit u;
  unit_parse(&u, scale2d_src);
  const oxf_fn *fn = find_fn(&u, "scale2d");
  CHECK(fn && fn->is_tile && !fn->is_kernel && fn->generics.len == 2 &&
            !strcmp(fn->generics.items[0], "BM") && !strcmp(fn->generics.items[1], "BN"),
        "parsed generics");
  const oxf_param *z = fn ? fn->params.items[0] : NULL;
  CHECK(z && z->type->kind == OXF_TY_MUTTENSOR && z->type->rank == 2 &&
            z->type->dims[0] == OXF_DIM_GENERIC(0) && z->type->dims[1] == -3 &&
            z->type->elem == OX_F16,
        "parsed &mut Tensor<f16, [BM, BN]>");
  const oxf_param *x = fn ? fn->params.items[1] : NULL;
  CHECK(x && x->type->kind == OXF_TY_TENSOR && x->type->rank == 2 && x->type->dims[0] == -1 &&
            x->type->dims[1] == OXF_DIM_DYNAMIC,
        "parsed &Tensor<f32, [-1, -1]>");
  int64_t gen[2] = {64, 32};
  CHECK(fn && oxf_check_spec(&u.arena, &u.d, u.prog, fn, gen, &u.m), "check: %s", u.d.text.buf);
  CHECK(u.m.kernels.len == 1, "one kernel");
  if (u.m.kernels.len == 1) {
    const oxi_kernel *k = u.m.kernels.items[0];
    CHECK(k->is_tile && !strcmp(k->name, "scale2d") && k->params.len == 3, "kernel");
    const oxi_param *pz = k->params.items[0], *px = k->params.items[1], *ps = k->params.items[2];
    CHECK(pz->kind == OXI_P_TILE && pz->dtype == OX_F16 && pz->rank == 2 && pz->dims[0] == 64 &&
              pz->dims[1] == 32,
          "param z");
    CHECK(px->kind == OXI_P_TENSOR && px->dtype == OX_F32 && px->rank == 2 && px->dims[0] == -1 &&
              px->dims[1] == -1,
          "param x");
    CHECK(ps->kind == OXI_P_SCALAR && ps->dtype == OX_F32, "param s");
    const oxi_instr *id1 = find_op(k, OXI_T_ID, 1), *ld = find_op(k, OXI_T_LOAD, 0);
    CHECK(id1 && id1->type == OX_U64 && id1->mem.kind == OXI_MEM_PARAM && id1->mem.index == 0 &&
              id1->index == 1 && !id1->tshape && id1->nops == 0,
          "t.id");
    CHECK(ld && ld->type == OX_F32 && ld->mem.index == 1 && ld->nops == 2 &&
              ld->ops[1] == id1 && shape_is(ld->tshape, 2, 64, 32) && ld->imm == 0 &&
              ld->fimm == 0,
          "t.load");
    const oxi_instr *sp = find_op(k, OXI_T_SPLAT, 0), *mul = find_op(k, OXI_BIN, 0);
    CHECK(sp && sp->type == OX_F32 && sp->nops == 1 && !sp->ops[0]->tshape &&
              sp->ops[0]->op == OXI_PARAM && shape_is(sp->tshape, 2, 64, 32),
          "t.splat");
    CHECK(mul && mul->sub == OXI_MUL && shape_is(mul->tshape, 2, 64, 32) && mul->ops[0] == ld &&
              mul->ops[1] == sp,
          "bin.mul");
    const oxi_instr *ex = find_op(k, OXI_MATH, 0), *cv = find_op(k, OXI_CAST, 0);
    CHECK(ex && ex->sub == OXI_M_EXP && shape_is(ex->tshape, 2, 64, 32), "math.exp");
    CHECK(cv && cv->type == OX_F16 && shape_is(cv->tshape, 2, 64, 32), "cast");
    const oxi_instr *st = find_op(k, OXI_T_STORE, 0);
    CHECK(st && st->type == OXI_VOID && st->mem.index == 0 && st->nops == 1 && st->ops[0] == cv &&
              !st->tshape,
          "t.store");
  }
  unit_free(&u);

  /* padding values */
  unit_parse(&u, T("let a = x.partition([B]).load_padded([0], f32::NEG_INFINITY);\n"
                   "let b = x.partition([B]).load_padded([1], -2.5);\n"
                   "let c = i.partition([B]).load_padded([2], -7);\n"
                   "let d = i.partition([B]).load_padded([3], i32::MIN);\n"
                   "z.store(a + b);\no.store(c + d);"));
  int64_t g16 = 16;
  fn = find_fn(&u, "k");
  CHECK(fn && oxf_check_spec(&u.arena, &u.d, u.prog, fn, &g16, &u.m), "check: %s", u.d.text.buf);
  if (u.m.kernels.len == 1) {
    const oxi_kernel *k = u.m.kernels.items[0];
    const oxi_instr *l[4];
    for (int j = 0; j < 4; j++)
      l[j] = find_op(k, OXI_T_LOAD, j);
    CHECK(l[0] && l[0]->fimm < -1e308 && l[0]->imm == 0 && l[0]->type == OX_F32, "-inf padding");
    CHECK(l[1] && l[1]->fimm == -2.5 && l[1]->imm == 0, "-2.5 padding");
    CHECK(l[2] && (int64_t)l[2]->imm == -7 && l[2]->fimm == 0 && l[2]->type == OX_I32,
          "-7 padding");
    CHECK(l[3] && (int64_t)l[3]->imm == INT32_MIN, "i32::MIN padding");
    for (int j = 0; j < 4; j++)
      CHECK(l[j] && l[j]->nops == 1 && l[j]->ops[0]->op == OXI_CONST &&
                l[j]->ops[0]->imm == (uint64_t)j && shape_is(l[j]->tshape, 1, 16, 0),
            "load %d: index and shape", j);
    /* the padding constants are not left in the IR */
    const oxi_instr *c;
    for (int j = 0; (c = find_op(k, OXI_CONST, j)) != NULL; j++)
      CHECK(c->type == OX_U64, "only the indices are constants, found a %s constant",
            oxi_type_name(c->type));
  }
  unit_free(&u);

  /* module compile: tile kernels are not in the module's kernel list */
  unit_parse(&u, add_src);
  CHECK(oxf_check(&u.arena, &u.d, u.prog, &u.m) && u.m.kernels.len == 0,
        "oxf_check leaves tile kernels out (%d kernels)", u.m.kernels.len);
  const oxf_fn *addfn = find_fn(&u, "add");
  int64_t g128 = 128;
  CHECK(addfn && oxf_check_spec(&u.arena, &u.d, u.prog, addfn, &g128, &u.m) &&
            oxf_check_spec(&u.arena, &u.d, u.prog, addfn, &g16, &u.m) && u.m.kernels.len == 2,
        "two specializations in one module");
  unit_free(&u);

  /* NULL generics: placeholders */
  unit_parse(&u, add_src);
  addfn = find_fn(&u, "add");
  CHECK(addfn && oxf_check_spec(&u.arena, &u.d, u.prog, addfn, NULL, &u.m) &&
            ((oxi_param *)((oxi_kernel *)u.m.kernels.items[0])->params.items[0])->dims[0] ==
                OXF_TILE_PLACEHOLDER,
        "placeholder generics");
  unit_free(&u);

  /* oxf_check_spec of a function that is not #[tile] */
  unit_parse(&u, "fn f() { }\n");
  fn = find_fn(&u, "f");
  CHECK(fn && !oxf_check_spec(&u.arena, &u.d, u.prog, fn, NULL, &u.m) &&
            strstr(u.d.text.buf, "'f' is not a generic kernel (a #[tile] kernel, or a #[kernel] with "
                                 "type generics)"),
        "not a generic kernel");
  unit_free(&u);
}

/* Rank-4 tiles: stored from scalars always; loaded only while T_LOAD has room
 * for four coordinates in oxi_instr.ops (an error until then). */
static void test_rank4(void) {
  static const char src[] =
      "#[tile]\nfn k(z: &mut Tensor<f32, [2, 2, 2, 2]>, x: &Tensor<f32, [-1, -1, -1, -1]>) {\n"
      "    z.store(1.0);\n"
      "    z.store(load_tile_like(x, z));\n}\n";
  unit u;
  unit_parse(&u, src);
  bool ok = !u.d.errors && specialize_all(&u, NULL);
  if (OXB_COUNT(((oxi_instr *)0)->ops) >= 4) {
    if (!ok)
      fail("rank 4", src, "rank-4 load", u.d.text.buf);
  } else if (ok || !has_diag(u.d.text.buf, "4:13 error: tile loads of rank 4 are not supported "
                                           "yet (at most 3 dims)")) {
    fail("rank 4", src, "rank-4 load should be refused", u.d.text.buf);
  }
  unit_free(&u);
}

/* The AST dump shows tile functions, generics and tensor types. */
static void test_dump(void) {
  char *out = NULL;
  if (ox_emit(scale2d_src, NULL, OX_TARGET_CPU, OX_EMIT_AST, &out) != OX_OK ||
      !strstr(out, "Fn #[tile] scale2d<const BM: i32, const BN: i32>(z: &mut Tensor<f16, [BM, BN]>, "
                   "x: &Tensor<f32, [-1, -1]>, s: f32)") ||
      !strstr(out, "Array"))
    fail("dump", scale2d_src, "AST dump", out ? out : ox_last_error());
  ox_free(out);
}

int main(int argc, char **argv) {
  verbose = argc > 1 && !strcmp(argv[1], "-v");
  for (size_t i = 0; i < sizeof goods / sizeof goods[0]; i++)
    run_good(&goods[i]);
  for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++)
    run_bad(&bads[i]);
  for (size_t i = 0; i < sizeof badspecs / sizeof badspecs[0]; i++)
    run_badspec(&badspecs[i]);
  test_fields();
  test_rank4();
  test_dump();
  if (failures) {
    fprintf(stderr, "tile_front_test: %d failure(s)\n", failures);
    return 1;
  }
  printf("tile_front_test: %zu cases passed\n",
         sizeof goods / sizeof goods[0] + sizeof bads / sizeof bads[0] +
             sizeof badspecs / sizeof badspecs[0]);
  return 0;
}
