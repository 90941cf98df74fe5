/* ptx_test - the PTX of every example kernel, of tile kernels on tensor
 * cores (mma.sync, and wgmma on sm_90) and of tf32 kernels, is accepted by
 * ptxas (from the CUDA toolkit) for sm_80 and sm_90 (as sm_90a, which Oxide
 * targets on sm_90 devices). Without ptxas the test fails, unless
 * OXIDE_NO_PTXAS=1 says the machine has no CUDA toolkit on purpose. On a
 * machine with an sm_90 GPU the sm_90a PTX also goes through the driver's
 * compiler, which the runtime uses, and whose info log must not say that it
 * serialized wgmmas (it reports causes that the toolkit's ptxas does not). */
#include <dirent.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
    free(s);
    s = NULL;
  }
  if (s)
    s[n] = 0;
  fclose(f);
  return s;
}

/* Tile kernels with static tiles big enough for tensor cores (the examples'
 * generics are compiled at a placeholder of 16, which is too small for the
 * warps' mma tiles): their PTX must hold ldmatrix and mma.sync (sm_80) or
 * wgmma (sm_90). */
static const char *TENSOR_CORES =
    "#[tile]\n"
    "fn mm_bf16(c: &mut Tensor<f32, [128, 128]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>) {\n"
    "    let mut acc = full([128, 128], 0.0f32);\n"
    "    for k in 0..(a.dim(1) + 31) / 32 {\n"
    "        acc = mma(a.partition([128, 32]).load([tile_id(0), k]), b.partition([32, 128]).load([k, tile_id(1)]), acc);\n"
    "    }\n"
    "    c.store(acc * 2.0 + 1.0);\n"
    "}\n"
    "#[tile]\n"
    "fn mm_f16(c: &mut Tensor<f32, [64, 1]>, a: &Tensor<f16, [-1, -1]>, b: &Tensor<f16, [-1, -1]>) {\n"
    "    let d = dot(a.partition([64, 32]).load([tile_id(0), 0]), b.partition([32, 64]).load([0, 0]));\n"
    "    c.store(reduce_sum(d, 1));\n"
    "}\n";

/* Dots with K steps of 64 and 128 bf16/f16 elements (A's rows swizzled by
 * 128 bytes, in one or two panels): wgmma on sm_90 (one and two warpgroups,
 * N 64 and 256), mma.sync on sm_80. */
static const char *WGMMA =
    "#[tile]\n"
    "fn mm_wide(c: &mut Tensor<f32, [128, 256]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>) {\n"
    "    let mut acc = full([128, 256], 0.0f32);\n"
    "    for k in 0..(a.dim(1) + 63) / 64 {\n"
    "        acc = mma(a.partition([128, 64]).load([tile_id(0), k]), b.partition([64, 256]).load([k, tile_id(1)]), acc);\n"
    "    }\n"
    "    c.store(acc);\n"
    "}\n"
    /* bench/matmul.py's (bf16 out): the exit of its K loop once made ptxas
       serialize the wgmmas (check_ptx_with) */
    "#[tile]\n"
    "fn mm_bf16_out(c: &mut Tensor<bf16, [128, 256]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>) {\n"
    "    let mut acc = full([128, 256], 0.0f32);\n"
    "    for k in 0..(a.dim(1) + 63) / 64 {\n"
    "        acc = mma(a.partition([128, 64]).load([tile_id(0), k]), b.partition([64, 256]).load([k, tile_id(1)]), acc);\n"
    "    }\n"
    "    c.store(acc as bf16);\n"
    "}\n"
    "#[tile]\n"
    "fn mm_small(c: &mut Tensor<f32, [64, 64]>, a: &Tensor<f16, [-1, -1]>, b: &Tensor<f16, [-1, -1]>) {\n"
    "    c.store(dot(a.partition([64, 128]).load([tile_id(0), 0]), b.partition([128, 64]).load([0, tile_id(1)])) + 1.0);\n"
    "}\n";

static int wgmma_contiguous;
static void look_wgmma(const char *name, int sm, const char *ptx) {
  if (sm == 80) {
    CHECK(strstr(ptx, "wgmma") == NULL, "%s: wgmma for sm_80", name);
    CHECK(strstr(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") != NULL, "%s: no mma.sync", name);
    return;
  }
  CHECK(strstr(ptx, ".target sm_90a") != NULL, "%s: not for sm_90a", name);
  CHECK(strstr(ptx, "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16") != NULL, "%s: no m64n256 wgmma", name);
  CHECK(strstr(ptx, "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16") != NULL, "%s: no m64n64 wgmma", name);
  /* operands written through the generic proxy (stores, cp.async) are fenced before wgmma reads them;
     TMA's copies are the async proxy's, and their mbarrier makes them visible */
  CHECK(strstr(ptx, "fence.proxy.async.shared::cta") != NULL || strstr(ptx, "cp.async.bulk.tensor") != NULL,
        "%s: neither a proxy fence nor TMA copies", name);
  CHECK(strstr(ptx, "wgmma.wait_group.sync.aligned 0") != NULL, "%s: no wgmma wait", name);
  CHECK(strstr(ptx, "mma.sync") == NULL, "%s: mma.sync on sm_90", name);
  /* mm_bf16_out's tile, wholly inside a contiguous16 output, is stored 8 bytes a lane after a
     trade between lane pairs (ops.c, store_quads); elsewhere element by element */
  CHECK((strstr(ptx, "st.global.u64") != NULL && strstr(ptx, "shfl.sync.bfly") != NULL) == wgmma_contiguous,
        "%s: %s 8-byte stores of the bf16 output", name, wgmma_contiguous ? "no" : "unexpected");
}

/* A tensor-core result stored as i16: 16-bit, but not a float pair, so not
 * stored 8 bytes a lane (store_quads takes bf16 and f16 only; it once made
 * an internal error of it). */
static const char *I16_OUT =
    "#[tile]\n"
    "fn mm_i16(c: &mut Tensor<i16, [128, 128]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>) {\n"
    "    let mut acc = full([128, 128], 0.0f32);\n"
    "    for k in 0..(a.dim(1) + 63) / 64 {\n"
    "        acc = mma(a.partition([128, 64]).load([tile_id(0), k]), b.partition([64, 128]).load([k, tile_id(1)]), acc);\n"
    "    }\n"
    "    c.store(acc as i16);\n"
    "}\n";

/* How many times `what` occurs in `s`. */
static int occurrences(const char *s, const char *what) {
  int n = 0;
  for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
    n++;
  return n;
}

/* A key tile loaded once before a loop over the other key tiles: its stage
 * is released before the loop, so it shares the loop's ring (tma.c,
 * ring_to_share; two tensor maps, q's and k's). Read by a dot inside the loop
 * instead, it is released every pass, and must keep stages of its own (three
 * maps). Neither may have its wgmmas serialized: the first, with small tiles
 * and little shared memory, once had its registers bound to 80 (lower.c,
 * blocks_an_sm), and ptxas spilled and serialized. */
static const char *RINGS[2] = {
    "#[tile]\n"
    "fn ring_share(o: &mut Tensor<f32, [64, 64]>, q: &Tensor<bf16, [-1, 64]>, k: &Tensor<bf16, [-1, 64]>) {\n"
    "    let qt = q.partition([64, 64]).load([tile_id(0), 0]);\n"
    "    let k0 = k.partition([64, 64]).load([0, 0]);\n"
    "    let mut acc = dot(qt, transpose(k0));\n"
    "    for j in 1..k.dim(0) / 64 {\n"
    "        acc = acc + dot(qt, transpose(k.partition([64, 64]).load([j, 0])));\n"
    "    }\n"
    "    o.store(acc);\n"
    "}\n",
    "#[tile]\n"
    "fn ring_keep(o: &mut Tensor<f32, [64, 64]>, q: &Tensor<bf16, [-1, 64]>, k: &Tensor<bf16, [-1, 64]>) {\n"
    "    let qt = q.partition([64, 64]).load([tile_id(0), 0]);\n"
    "    let k0 = k.partition([64, 64]).load([0, 0]);\n"
    "    let mut acc = full([64, 64], 0.0f32);\n"
    "    for j in 1..k.dim(0) / 64 {\n"
    "        acc = acc + dot(qt, transpose(k.partition([64, 64]).load([j, 0]))) + dot(qt, transpose(k0));\n"
    "    }\n"
    "    o.store(acc);\n"
    "}\n"};
static int rings_maps;
static void look_rings(const char *name, int sm, const char *ptx) {
  if (sm != 90)
    return;
  int maps = occurrences(ptx, "[128]"); /* a tensor map parameter: .b8 name[128] */
  CHECK(maps == rings_maps, "%s: %d tensor maps, not %d", name, maps, rings_maps);
}

/* tf32 casts and arithmetic round with cvt.rna.tf32.f32, in a SIMT kernel
 * and in a tile kernel's elementwise ops and dot operands. */
static const char *TF32 =
    "#[kernel]\n"
    "fn tf32_simt(x: &[f32], y: DisjointSlice<f32>) {\n"
    "    let i = thread::index_1d();\n"
    "    let t = x[i] as tf32;\n"
    "    let u = t * t + (i.get() as i32) as tf32;\n"
    "    if let Some(o) = y.get_mut(i) { *o = (u.sqrt() as f32) + (t as f64) as f32; }\n"
    "}\n"
    "#[tile]\n"
    "fn tf32_tile(c: &mut Tensor<f32, [64, 64]>, a: &Tensor<f32, [-1, -1]>, b: &Tensor<f32, [-1, -1]>) {\n"
    "    let x = a.partition([64, 32]).load([tile_id(0), 0]) as tf32;\n"
    "    let y = b.partition([32, 64]).load([0, tile_id(1)]) as tf32;\n"
    "    c.store(dot(x * x, y) + (reduce_max(x, 1) as f32));\n"
    "}\n";

static void look_tf32(const char *name, int sm, const char *ptx) {
  (void)sm;
  CHECK(strstr(ptx, "cvt.rna.tf32.f32") != NULL, "%s: no cvt.rna.tf32.f32", name);
  /* the tile kernel's dot: 64 x 64 by 4 warps of 32 x 32, on tensor cores */
  CHECK(strstr(ptx, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") != NULL, "%s: no tf32 mma.sync", name);
  CHECK(strstr(ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16") != NULL, "%s: no ldmatrix for tf32 A", name);
}

/* Scans, sorts, top-k and cat (order.c's shared-memory networks, cat's
 * broadcasts and select), at a long row and at a 2-D tile of 64 elements a
 * thread, with f16, i32 and u32 keys (argsort's indices then share the i32
 * scratch, not the u32 one). */
static const char *ORDER =
    "#[tile]\n"
    "fn order<const BM: i32, const BN: i32>(s: &mut Tensor<f32, [BM, BN]>, i: &mut Tensor<i32, [BM, BN]>,\n"
    "        h: &mut Tensor<f16, [BM, 8]>, u: &mut Tensor<u32, [BM, BN]>, x: &Tensor<f32, [-1, -1]>) {\n"
    "    let t = load_tile_like(x, s, f32::INFINITY);\n"
    "    let l = t.slice([0, 0], [BM, BN / 2]);\n"
    "    let r = t.slice([0, BN / 2], [BM, BN / 2]);\n"
    "    s.store(cumsum(t, 1) + cummax(t, 0) + sort(t, 1, true) + cat([r, l], 1));\n"
    "    i.store(argsort(t, 1) + cumprod(argsort(t as i32, 0, true), 0));\n"
    "    h.store(topk(t as f16, 8, 1));\n"
    "    u.store(sort(t as u32, 1) + argsort(t as u32, 0) as u32);\n"
    "}\n";

static void look_order(const char *name, int sm, const char *ptx) {
  (void)sm;
  CHECK(strstr(ptx, "bar.sync") != NULL, "%s: no block barrier (the networks meet in shared memory)", name);
}

/* The info log of the CUDA driver's compiler for `ptx` (into log), or 0 if
 * no sm_90 GPU and driver are here. The driver API is declared by hand: the
 * test needs no CUDA headers. */
static int driver_checked; /* kernels the driver's compiler took */
static int driver_log(const char *ptx, char *log, size_t n) {
  static void *lib;
  static int state; /* 0: not tried, 1: usable, 2: not */
  if (!state) {
    state = 2;
    lib = dlopen("libcuda.so.1", RTLD_NOW);
    int dev = 0, major = 0, count = 0;
    void *ctx = NULL;
    if (lib && !((int (*)(unsigned))dlsym(lib, "cuInit"))(0) &&
        !((int (*)(int *))dlsym(lib, "cuDeviceGetCount"))(&count) && count > 0 &&
        !((int (*)(int *, int))dlsym(lib, "cuDeviceGet"))(&dev, 0) &&
        !((int (*)(int *, int, int))dlsym(lib, "cuDeviceGetAttribute"))(&major, 75, dev) && major == 9 &&
        !((int (*)(void **, int))dlsym(lib, "cuDevicePrimaryCtxRetain"))(&ctx, dev) &&
        !((int (*)(void *))dlsym(lib, "cuCtxSetCurrent"))(ctx))
      state = 1;
  }
  if (state != 1)
    return 0;
  /* CU_JIT_INFO_LOG_BUFFER, its size, CU_JIT_LOG_VERBOSE */
  int opts[3] = {3, 4, 12};
  void *vals[3] = {log, (void *)(uintptr_t)(n - 1), (void *)(uintptr_t)1};
  void *link = NULL, *image = NULL;
  size_t size = 0;
  log[0] = 0;
  int r = ((int (*)(unsigned, int *, void **, void **))dlsym(lib, "cuLinkCreate_v2"))(3, opts, vals, &link);
  if (!r) /* CU_JIT_INPUT_PTX */
    r = ((int (*)(void *, int, void *, size_t, const char *, unsigned, int *, void **))dlsym(lib, "cuLinkAddData_v2"))(
        link, 1, (void *)ptx, strlen(ptx) + 1, "ptx_test.ptx", 0, NULL, NULL);
  if (!r)
    r = ((int (*)(void *, void **, size_t *))dlsym(lib, "cuLinkComplete"))(link, &image, &size);
  CHECK(r == 0, "the driver could not compile the PTX (CUresult %d): %s", r, log);
  if (link)
    ((int (*)(void *))dlsym(lib, "cuLinkDestroy"))(link);
  driver_checked++;
  return 1;
}

/* Emits `text` as PTX for sm_80 and sm_90 (only sm_90 while hopper_only is
 * set) and has ptxas assemble it; calls `look` on each PTX for the caller's
 * own checks. */
static int hopper_only;
static int no_spill; /* and on sm_90, ptxas keeps every value in registers */
static void check_ptx_with(const char *ptxas, const char *name, const char *text, int contiguous,
                           void (*look)(const char *name, int sm, const char *ptx), const ox_generic_value *gen,
                           int ngen) {
  static const int archs[] = {80, 90};
  for (int i = hopper_only; i < 2; i++) {
    ox_compile_options o = {.size = sizeof o, .filename = name, .sm = archs[i], .emit_contiguous = contiguous,
                            .generics = gen, .num_generics = ngen};
    char *ptx = NULL;
    CHECK_OK(ox_emit(text, &o, OX_TARGET_CUDA, OX_EMIT_PTX, &ptx));
    if (!ptx)
      continue;
    if (look)
      look(name, archs[i], ptx);
    /* a kernel that calls a function gets its wgmmas serialized (C7509), which the driver's
       compiler does and this ptxas does not report; a 64-bit division is such a call, and so is
       f32 division's slow path (div.rn.f32) */
    for (const char *at = strstr(ptx, ".entry "); at;) { /* each kernel of the module */
      const char *next = strstr(at + 1, ".entry ");
      size_t len = next ? (size_t)(next - at) : strlen(at);
      char *fn = strndup(at, len);
      CHECK(fn != NULL, "strndup");
      if (fn && strstr(fn, "wgmma.mma_async"))
        CHECK(!strstr(fn, "call") && !strstr(fn, "div.u64") && !strstr(fn, "rem.u64") && !strstr(fn, "div.s64") &&
                  !strstr(fn, "rem.s64") && !strstr(fn, "div.rn.f32"),
              "%s: a call, a 64-bit division or an f32 division beside wgmmas in %.60s", name, fn);
      free(fn);
      at = next;
    }
    char tmp[] = "/tmp/oxide-ptx-XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0, "mkstemp");
    size_t n = strlen(ptx);
    CHECK(write(fd, ptx, n) == (ssize_t)n, "write");
    close(fd);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "%s -v -arch=sm_%d%s %s -o /dev/null 2>&1", ptxas, archs[i], archs[i] == 90 ? "a" : "",
             tmp);
    FILE *f = popen(cmd, "r");
    CHECK(f != NULL, "cannot run %s", cmd);
    char out[1 << 16];
    size_t got = f ? fread(out, 1, sizeof out - 1, f) : 0;
    out[got] = 0;
    int rc = f ? pclose(f) : -1;
    CHECK(rc == 0, "ptxas rejected %s for sm_%d:\n%s", name, archs[i], out);
    /* ptxas's info C7514-C7520: it made each wgmma wait for the one before
       (dot.c and target_cuda.c say what brings that on) */
    CHECK(!strstr(out, "instructions are serialized"), "ptxas serialized the wgmmas of %s:\n%s", name, out);
    CHECK(!no_spill || archs[i] != 90 || !strstr(out, "bytes spill") || strstr(out, " 0 bytes spill stores"),
          "%s spills registers on sm_90:\n%s", name, out);
    if (archs[i] == 90 && driver_log(ptx, out, sizeof out))
      CHECK(!strstr(out, "serialized"), "the driver's compiler serialized the wgmmas of %s:\n%s", name, out);
    unlink(tmp);
    ox_free(ptx);
  }
}

static void check_ptx(const char *ptxas, const char *name, const char *text, int contiguous,
                      void (*look)(const char *name, int sm, const char *ptx)) {
  check_ptx_with(ptxas, name, text, contiguous, look, NULL, 0);
}

/* examples/tile_attention.oxk at BM x BN tiles, head dim 128, on contiguous
 * tensors: on sm_90 both products on wgmma, k's tile read K-major
 * (imm-trans-b 0), the probabilities from registers (the register form of
 * wgmma), the row maxima and sums by shuffles, and q, k and v copied by TMA
 * (4-D boxes) on mbarriers: no block barrier but the one after their
 * initialization. Both products are deferred dots (dot.c: a commit without a
 * wait), and the scores are waited for with the output's product still in
 * flight (a wait for all groups but one): the softmax overlaps it. */
static int attention_bm, attention_bn, attention_d;
static void look_attention(const char *name, int sm, const char *ptx) {
  if (sm == 80) {
    CHECK(strstr(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") != NULL, "%s: no mma.sync", name);
    return;
  }
  char scores[80];
  snprintf(scores, sizeof scores, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16", attention_bn);
  CHECK(strstr(ptx, scores) != NULL, "%s: no scores wgmma", name);
  char output[80];
  snprintf(output, sizeof output, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16", attention_d);
  CHECK(strstr(ptx, output) != NULL, "%s: no output wgmma", name);
  /* the probabilities held two a register, rounded in pairs (ops.c, oxt_tile_var) */
  CHECK(strstr(ptx, "cvt.rn.bf16x2.f32") != NULL, "%s: no paired conversion of the probabilities", name);
  /* at 64 x 128 x 64 the first key tile and the last value tile use the loops' rings (tma.c,
     ring_to_share): 74 KB of shared memory, three blocks an SM, registers bound to fit them */
  int maps = occurrences(ptx, "[128]");
  CHECK(maps == 3, "%s: %d tensor maps, not q's, k's and v's", name, maps);
  if (attention_bm == 64 && attention_bn == 128 && attention_d == 64)
    CHECK(strstr(ptx, ".minnctapersm 3") != NULL, "%s: not three blocks an SM", name);
  CHECK(strstr(ptx, "wgmma.commit_group.sync.aligned;\n") != NULL &&
            strstr(ptx, "wgmma.wait_group.sync.aligned 1;") != NULL,
        "%s: no product left in flight while the softmax runs", name);
  CHECK(strstr(ptx, ", p, 1, 1, 0, 0;") != NULL, "%s: no K-major B", name);
  CHECK(strstr(ptx, "}, {%r") != NULL, "%s: no wgmma with A in registers", name);
  CHECK(strstr(ptx, "shfl.sync.bfly") != NULL, "%s: no row reduction by shuffles", name);
  CHECK(strstr(ptx, "cp.async.bulk.tensor.4d") != NULL, "%s: no TMA copies of 4-D tiles", name);
  int bars = occurrences(ptx, "bar.sync \t0;");
  CHECK(bars == 1, "%s: %d block barriers, not the one after the mbarriers' initialization", name, bars);
  /* two warpgroups (BM 128) take turns on named barriers (lower.c, choose_turns) */
  CHECK((strstr(ptx, "bar.sync %r") && strstr(ptx, "bar.arrive %r")) == (attention_bm == 128),
        "%s: warpgroups %s turns", name, attention_bm == 128 ? "take no" : "take");
}

/* examples/tile_matmul_fp8.oxk at 128 x 256 x 128: on sm_90 fp8 wgmma (k32,
 * B K-major, so no transpose operands) in a cp.async pipeline when the
 * tensors are contiguous; on sm_80 the operands widened to f16 for mma.sync. */
static int fp8_contiguous;
static void look_fp8(const char *name, int sm, const char *ptx) {
  if (sm == 80) {
    CHECK(strstr(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") != NULL, "%s: no f16 mma.sync", name);
    return;
  }
  CHECK(strstr(ptx, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3") != NULL, "%s: no fp8 wgmma", name);
  CHECK(strstr(ptx, ", p, 1, 1; }") != NULL, "%s: fp8 wgmma with transpose operands", name);
  if (fp8_contiguous)
    CHECK(strstr(ptx, "cp.async.bulk.tensor.2d") != NULL && strstr(ptx, "mbarrier.try_wait.parity") != NULL &&
              strstr(ptx, "%nctaid.x") != NULL,
          "%s: no TMA pipeline in persistent blocks", name);
}

/* examples/tile_matmul.oxk at BM x 256 x 64 on contiguous tensors, sm_90:
 * its K loop is `for k in lo..hi` over a dot of loads at (tile_id(0), k) and
 * (k, tile_id(1)), so at BM 128 a producer warpgroup (ws.c) copies every
 * call's operands: 384 threads, registers handed over by setmaxnreg, and no
 * block barrier but the one after the mbarriers' inits (the producer never
 * reaches one; the consumers' would count their own threads). At BM
 * 64 (one warpgroup) and for a K loop of another shape (mm_back, whose K
 * tiles run backwards), the consumers run the pipeline themselves. */
static int ws_expected, ws_threads;
static void look_ws(const char *name, int sm, const char *ptx) {
  if (sm != 90)
    return;
  char req[40];
  snprintf(req, sizeof req, ".reqntid %d, 1, 1", ws_threads);
  CHECK(strstr(ptx, req) != NULL, "%s: not %s", name, req);
  CHECK(strstr(ptx, "%nctaid.x") != NULL, "%s: not a loop over tiles", name);
  int dec = occurrences(ptx, "setmaxnreg.dec.sync.aligned.u32 40;"),
      inc = occurrences(ptx, "setmaxnreg.inc.sync.aligned.u32 232;"), boxes = occurrences(ptx, "cp.async.bulk.tensor");
  if (ws_expected) {
    CHECK(dec == 1 && inc == 1, "%s: setmaxnreg dec %d inc %d times", name, dec, inc);
    CHECK(boxes > 0, "%s: no TMA boxes", name);
    CHECK(occurrences(ptx, "bar.sync \t0;") == 1, "%s: a block barrier beside the mbarriers' inits", name);
  } else {
    CHECK(dec == 0 && inc == 0, "%s: setmaxnreg without a producer", name);
  }
}

static const char *MM_BACK =
    "#[tile]\n"
    "fn mm_back<const BM: i32, const BN: i32>(c: &mut Tensor<bf16, [BM, BN]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>) {\n"
    "    let nk = (a.dim(1) + 63) / 64;\n"
    "    let mut acc = full([BM, BN], 0.0f32);\n"
    "    for i in 0..nk {\n"
    "        let k = nk - 1 - i;\n"
    "        acc = mma(a.partition([BM, 64]).load([tile_id(0), k]), b.partition([64, BN]).load([k, tile_id(1)]), acc);\n"
    "    }\n"
    "    c.store(acc as bf16);\n"
    "}\n";

/* The same loop over K tiles 1 .. nk - 1, nk a scalar parameter: a producer's too. */
static const char *MM_PARAM =
    "#[tile]\n"
    "fn mm_param<const BM: i32, const BN: i32>(c: &mut Tensor<bf16, [BM, BN]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>, nk: u64) {\n"
    "    let mut acc = full([BM, BN], 0.0f32);\n"
    "    for k in 1..nk {\n"
    "        acc = mma(a.partition([BM, 64]).load([tile_id(0), k]), b.partition([64, BN]).load([k, tile_id(1)]), acc);\n"
    "    }\n"
    "    c.store(acc as bf16);\n"
    "}\n";

static void look_vecadd(const char *name, int sm, const char *ptx) {
  (void)sm;
  if (strcmp(name, "vecadd.oxk"))
    return;
  /* the contract's exact block shape, and read-only slices on the
   * non-coherent read-only path with their bounds checks proven away */
  CHECK(strstr(ptx, ".reqntid 256, 1, 1") != NULL, "vecadd PTX lacks .reqntid");
  CHECK(strstr(ptx, "ld.global.nc.f32") != NULL, "vecadd PTX lacks ld.global.nc");
  CHECK(strstr(ptx, "__oxide_check_failed") == NULL || strstr(ptx, "call") == NULL,
        "vecadd PTX still calls the bounds-check failure path");
}

/* With contiguous tensors, the operands of the K loop's dot are copied the
 * next K tiles' ahead: with cp.async on sm_80; on sm_90 with TMA boxes on
 * mbarriers, into swizzled staging for wgmma (A's rows of 32 elements: the
 * 64-byte swizzle), the tensor maps passed as __grid_constant__ parameters. */
static void look_pipelined(const char *name, int sm, const char *ptx) {
  if (sm == 90) {
    CHECK(strstr(ptx, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") != NULL, "%s: no wgmma", name);
    CHECK(strstr(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes") != NULL,
          "%s: no TMA copy", name);
    CHECK(strstr(ptx, "mbarrier.try_wait.parity") != NULL && strstr(ptx, "mbarrier.arrive.expect_tx") != NULL,
          "%s: no mbarrier pipeline", name);
    CHECK(strstr(ptx, ".param .align 64 .b8") != NULL && strstr(ptx, "cvta.param") != NULL,
          "%s: no tensor map parameter", name);
    /* persistent blocks: each steps through the tiles by the grid's size */
    CHECK(strstr(ptx, "%nctaid.x") != NULL, "%s: not a loop over tiles", name);
    return;
  }
  CHECK(strstr(ptx, "cp.async.cg.shared.global") != NULL, "%s: no cp.async", name);
  CHECK(strstr(ptx, "cp.async.wait_group 1") != NULL, "%s: no pipelined wait", name);
  CHECK(strstr(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") != NULL, "%s: no mma.sync", name);
}

/* bf16 and f16 dots: mma.sync fed by ldmatrix on sm_80, wgmma on sm_90. */
static void look_tensor_cores(const char *name, int sm, const char *ptx) {
  if (sm == 90) {
    CHECK(strstr(ptx, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") != NULL, "%s: no bf16 wgmma", name);
    CHECK(strstr(ptx, "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16") != NULL, "%s: no f16 wgmma", name);
    return;
  }
  CHECK(strstr(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") != NULL, "%s: no bf16 mma.sync", name);
  CHECK(strstr(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") != NULL, "%s: no f16 mma.sync", name);
  CHECK(strstr(ptx, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") != NULL, "%s: no ldmatrix.trans", name);
}

/* tests/fuzz/corpus/regress_dropped_mma.oxk and regress_fused_bias.oxk */
static const char *MM_DROPPED =
    "#[tile]\n"
    "fn matmul<const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<f32, [BM, BN]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>) {\n"
    "    let pa = a.partition([BM, BK]);\n"
    "    let pb = b.partition([BK, BN]);\n"
    "    let mut acc = full([BM, BN], 0.0f32);\n"
    "    for k in 0..(a.dim(1) + (BK as usize) - 1) / (BK as usize) {\n"
    "        let x = mma(pa.load([tile_id(0), k]), pb.load([k, tile_id(1)]), acc);\n"
    "    }\n"
    "    c.store(acc);\n"
    "}\n";
static const char *MM_BIAS =
    "#[tile]\n"
    "fn mm<const BM: i32, const BN: i32, const BK: i32>(y: &mut Tensor<f32, [BM, BN]>, x: &Tensor<bf16, [-1, -1]>, w: &Tensor<bf16, [-1, -1]>, bias: &Tensor<f32, [-1]>) {\n"
    "    let px = x.partition([BM, BK]);\n"
    "    let pw = w.partition([BK, BN]);\n"
    "    let mut acc = full([BM, BN], 0.0f32);\n"
    "    for k in 0..(x.dim(1) + (BK as usize) - 1) / (BK as usize) {\n"
    "        acc = mma(px.load([tile_id(0), k]), pw.load([k, tile_id(1)]), acc);\n"
    "    }\n"
    "    y.store(acc + reshape(bias.partition([BN]).load([tile_id(1)]), [1, BN]));\n"
    "}\n";

/* bias, GELU and a residual after the K loop: at 128 x 256 x 64 the bias once
   moved into the accumulator's layout as a whole 128 x 256 tile (more shared
   memory than a block has); the broadcast and the residual's load are now
   made in that layout */
static const char *MM_EPILOGUE =
    "#[tile]\n"
    "fn mm<const BM: i32, const BN: i32, const BK: i32>(y: &mut Tensor<bf16, [BM, BN]>, x: &Tensor<bf16, [-1, -1]>, w: &Tensor<bf16, [-1, -1]>, bias: &Tensor<f32, [-1]>, res: &Tensor<bf16, [-1, -1]>) {\n"
    "    let px = x.partition([BM, BK]);\n"
    "    let pw = w.partition([BK, BN]);\n"
    "    let mut acc = full([BM, BN], 0.0f32);\n"
    "    for k in 0..px.num_tiles(1) {\n"
    "        acc = mma(px.load([tile_id(0), k]), pw.load([k, tile_id(1)]), acc);\n"
    "    }\n"
    "    let h = acc + reshape(bias.partition([BN]).load([tile_id(1)]), [1, BN]);\n"
    "    let g = 0.5 * h * (1.0 + erf(h * 0.7071067811865476));\n"
    "    y.store((g + res.partition([BM, BN]).load([tile_id(0), tile_id(1)]) as f32) as bf16);\n"
    "}\n";

/* 8-bit integer dots, exact in i32 on tensor cores: mma.sync m16n8k32 (A by
 * ldmatrix, B's bytes gathered from shared memory) on sm_80 and, with B
 * N-major, on sm_90; wgmma .s32 with K-major B (transpose of a [N, K] tile,
 * the only form wgmma takes 8-bit inputs in) on sm_90, where its i32 sums live
 * in "r" registers and the wgmma has no scale or transpose operands. */
static const char *INT8_DOTS =
    "#[tile]\n"
    "fn qmm_t<T: Int>(c: &mut Tensor<i32, [128, 256]>, a: &Tensor<T, [-1, -1]>, w: &Tensor<T, [-1, -1]>) {\n"
    "    let mut acc = full([128, 256], 0i32);\n"
    "    for k in 0..a.partition([128, 128]).num_tiles(1) {\n"
    "        acc = mma(a.partition([128, 128]).load([tile_id(0), k]), transpose(w.partition([256, 128]).load([tile_id(1), k])), acc);\n"
    "    }\n"
    "    c.store(acc + 1i32);\n"
    "}\n"
    "#[tile]\n"
    "fn qmm_n<T: Int>(c: &mut Tensor<i32, [64, 64]>, a: &Tensor<T, [-1, -1]>, b: &Tensor<T, [-1, -1]>) {\n"
    "    let mut acc = full([64, 64], 0i32);\n"
    "    for k in 0..a.partition([64, 64]).num_tiles(1) {\n"
    "        acc = mma(a.partition([64, 64]).load([tile_id(0), k]), b.partition([64, 64]).load([k, tile_id(1)]), acc);\n"
    "    }\n"
    "    c.store(acc);\n"
    "}\n";
static const char *int8_type;
static void look_int8(const char *name, int sm, const char *ptx) {
  char mma[80], wg[80];
  snprintf(mma, sizeof mma, "mma.sync.aligned.m16n8k32.row.col.s32.%s.%s.s32", int8_type, int8_type);
  snprintf(wg, sizeof wg, "wgmma.mma_async.sync.aligned.m64n256k32.s32.%s.%s", int8_type, int8_type);
  CHECK(strstr(ptx, mma) != NULL, "%s: no %s (qmm_n%s)", name, mma, sm == 80 ? ", qmm_t" : "");
  CHECK((strstr(ptx, wg) != NULL) == (sm == 90), "%s: %s for sm_%d", name, sm == 90 ? "no s32 wgmma" : "wgmma", sm);
  CHECK(strstr(ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16") != NULL, "%s: no ldmatrix of A's bytes", name);
  CHECK(strstr(ptx, "cvt.rn.f16") == NULL && strstr(ptx, "f32.f16.f16") == NULL, "%s: widened to f16", name);
}

/* The Llama kernels on sm_90: each waits for the grid before it (griddepcontrol.wait) before
 * its first global memory access, and those that prefetch their first weight or cache
 * tiles (linear_part, decode_attention) do so before the wait (target_cuda.c: the wait
 * follows the prefetches), so that with launch overlap they stream while the kernel before
 * finishes. Positions in the text: each kernel's blocks are laid out in order here. */
static int llama_prefetchers;
static void look_llama(const char *name, int sm, const char *ptx) {
  static const char *const touch[] = {"ld.global", "st.global", "atom.global", "red.global", "cp.async.bulk.tensor",
                                      "cp.async.cg"};
  for (const char *at = strstr(ptx, ".entry "); at;) {
    const char *next = strstr(at + 1, ".entry ");
    size_t len = next ? (size_t)(next - at) : strlen(at);
    char *fn = strndup(at, len);
    CHECK(fn != NULL, "strndup");
    if (!fn)
      return;
    const char *body = strchr(fn, '{'), *wait = body ? strstr(body, "griddepcontrol.wait") : NULL;
    const char *pf = body ? strstr(body, "prefetch.global.L2") : NULL;
    CHECK(wait != NULL, "%s sm_%d: no griddepcontrol.wait in %.40s", name, sm, fn);
    for (size_t i = 0; wait && i < sizeof touch / sizeof *touch; i++) {
      const char *first = strstr(body, touch[i]);
      CHECK(!first || first > wait, "%s sm_%d: %s before griddepcontrol.wait in %.40s", name, sm, touch[i], fn);
    }
    if (!strncmp(fn, ".entry linear_part(", 19) || !strncmp(fn, ".entry decode_attention(", 24)) {
      llama_prefetchers++;
      CHECK(pf && wait && pf < wait, "%s sm_%d: %.40s does not prefetch before its wait", name, sm, fn);
    }
    free(fn);
    at = next;
  }
}

int main(void) {
  const char *src_dir = getenv("OXIDE_SOURCE_DIR");
  char ptxas[4096] = "ptxas";
  if (system("command -v ptxas >/dev/null 2>&1") != 0) {
    if (access("/usr/local/cuda/bin/ptxas", X_OK) == 0) {
      snprintf(ptxas, sizeof ptxas, "/usr/local/cuda/bin/ptxas");
    } else {
      const char *skip = getenv("OXIDE_NO_PTXAS");
      printf("ptxas not found%s\n", skip ? " (OXIDE_NO_PTXAS set: skipped)" : "");
      return skip ? 0 : 1;
    }
  }
  static const char *const int8_types[2][2] = {{"i8", "s8"}, {"u8", "u8"}};
  for (int i = 0; i < 2; i++)
    for (int contiguous = 0; contiguous < 2; contiguous++) {
      int8_type = int8_types[i][1];
      ox_generic_value t = {.name = "T", .value = i ? OX_U8 : OX_I8}; /* a type generic: its dtype */
      check_ptx_with(ptxas, "int8_dots.oxk", INT8_DOTS, contiguous, look_int8, &t, 1);
    }
  check_ptx(ptxas, "tensor_cores.oxk", TENSOR_CORES, 0, look_tensor_cores);
  check_ptx(ptxas, "tensor_cores.oxk", TENSOR_CORES, 1, look_pipelined);
  wgmma_contiguous = 1;
  check_ptx(ptxas, "wgmma.oxk", WGMMA, 1, look_wgmma);
  wgmma_contiguous = 0;
  check_ptx(ptxas, "wgmma.oxk", WGMMA, 0, look_wgmma);
  check_ptx(ptxas, "i16_out.oxk", I16_OUT, 1, NULL);
  for (int i = 0; i < 2; i++) {
    rings_maps = 2 + i;
    check_ptx(ptxas, i ? "ring_keep.oxk" : "ring_share.oxk", RINGS[i], 1, look_rings);
  }
  check_ptx(ptxas, "tf32.oxk", TF32, 0, look_tf32);
  check_ptx(ptxas, "tf32.oxk", TF32, 1, look_tf32);
  for (int contiguous = 0; contiguous < 2; contiguous++) {
    ox_generic_value row[] = {{"BM", 1}, {"BN", 1024}}, block[] = {{"BM", 64}, {"BN", 64}};
    check_ptx_with(ptxas, "order.oxk", ORDER, contiguous, look_order, row, 2);
    check_ptx_with(ptxas, "order.oxk", ORDER, contiguous, look_order, block, 2);
  }
  {
    char path[4200];
    snprintf(path, sizeof path, "%s/examples/tile_attention.oxk", src_dir ? src_dir : ".");
    char *text = slurp(path);
    CHECK(text != NULL, "cannot read %s", path);
    /* the smallest tiles, and those bench/attention.py's tuner chooses at head dims 128 and 64 on
       an H200 (on sm_80, more than a kernel may have after the tile lowering: mma.sync's layout
       unrolls more); none spills (a position an element held through the loop once did, iota) */
    static const int tiles[][3] = {{64, 64, 128}, {128, 128, 128}, {64, 128, 64}};
    no_spill = 1;
    for (int t = 0; text && t < 3; t++) {
      attention_bm = tiles[t][0];
      attention_bn = tiles[t][1];
      attention_d = tiles[t][2];
      ox_generic_value gen[] = {{"BM", tiles[t][0]}, {"BN", attention_bn}, {"D", attention_d}};
      hopper_only = t > 0;
      check_ptx_with(ptxas, "tile_attention.oxk", text, 1, look_attention, gen, 3);
    }
    hopper_only = no_spill = 0;
    free(text);
    snprintf(path, sizeof path, "%s/examples/tile_matmul_fp8.oxk", src_dir ? src_dir : ".");
    text = slurp(path);
    CHECK(text != NULL, "cannot read %s", path);
    static const ox_generic_value fp8[] = {{"BM", 128}, {"BN", 256}, {"BK", 128}};
    for (fp8_contiguous = 0; text && fp8_contiguous < 2; fp8_contiguous++)
      check_ptx_with(ptxas, "tile_matmul_fp8.oxk", text, fp8_contiguous, look_fp8, fp8, 3);
    ws_expected = 1;
    ws_threads = 384;
    hopper_only = no_spill = 1;
    if (text)
      check_ptx_with(ptxas, "tile_matmul_fp8.oxk", text, 1, look_ws, fp8, 3);
    free(text);
    snprintf(path, sizeof path, "%s/examples/tile_matmul.oxk", src_dir ? src_dir : ".");
    text = slurp(path);
    CHECK(text != NULL, "cannot read %s", path);
    for (int bm = 128; text && bm >= 64; bm /= 2) {
      ox_generic_value gen[] = {{"BM", bm}, {"BN", 256}, {"BK", 64}};
      ws_expected = bm == 128;
      ws_threads = bm == 128 ? 384 : 128;
      check_ptx_with(ptxas, "tile_matmul.oxk", text, 1, look_ws, gen, 3);
    }
    free(text);
    ox_generic_value wrap[] = {{"BM", 128}, {"BN", 256}};
    ws_expected = 0;
    ws_threads = 256;
    check_ptx_with(ptxas, "mm_back.oxk", MM_BACK, 1, look_ws, wrap, 2);
    ws_expected = 1;
    ws_threads = 384;
    check_ptx_with(ptxas, "mm_param.oxk", MM_PARAM, 1, look_ws, wrap, 2);
    hopper_only = no_spill = 0;
    /* once internal errors at 128 x 128 x 64 on sm_90 (a barrier of the consumer warpgroups
       placed before its id): a K loop whose product is dropped, and a fused bias */
    ox_generic_value t128[] = {{"BM", 128}, {"BN", 128}, {"BK", 64}};
    hopper_only = 1; /* sm_80's shared memory is too small for these tiles: an ordinary error */
    for (int contiguous = 0; contiguous < 2; contiguous++) {
      check_ptx_with(ptxas, "mm_dropped.oxk", MM_DROPPED, contiguous, NULL, t128, 3);
      check_ptx_with(ptxas, "mm_bias.oxk", MM_BIAS, contiguous, NULL, t128, 3);
    }
    ox_generic_value t256[] = {{"BM", 128}, {"BN", 256}, {"BK", 64}};
    for (int contiguous = 0; contiguous < 2; contiguous++) {
      /* on contiguous tensors the epilogue is lowered a piece at a time at the store (epilogue.c):
         beside the 128 x 256 accumulator nothing spills (bias + GELU + residual once spilled 364
         bytes) */
      no_spill = contiguous;
      check_ptx_with(ptxas, "mm_bias.oxk", MM_BIAS, contiguous, NULL, t256, 3);
      check_ptx_with(ptxas, "mm_epilogue.oxk", MM_EPILOGUE, contiguous, NULL, t256, 3);
      check_ptx_with(ptxas, "mm_epilogue.oxk", MM_EPILOGUE, contiguous, NULL, t128, 3);
    }
    hopper_only = no_spill = 0;
    /* models/llama/llama.oxk at the model's GPU tiles (64-row projections, 64 query rows of
       decode attention, whose [64, 1] log-sum-exp store once overran the epilogue's pieces),
       for head dims 64 (1B) and 128 (8B) */
    snprintf(path, sizeof path, "%s/models/llama/llama.oxk", src_dir ? src_dir : ".");
    text = slurp(path);
    CHECK(text != NULL, "cannot read %s", path);
    hopper_only = 1;
    for (int dh = 64; text && dh <= 128; dh *= 2)
      for (int contiguous = 0; contiguous < 2; contiguous++) {
        ox_generic_value llama[] = {{"T", OX_BF16}, {"G", 64}, {"BN", 64}, {"D", dh}, {"BM", 64}, {"BK", 64}};
        check_ptx_with(ptxas, "llama.oxk", text, contiguous, look_llama, llama, 6);
      }
    CHECK(!text || llama_prefetchers == 8, "llama.oxk: %d prefetching kernels checked, not 8", llama_prefetchers);
    hopper_only = 0;
    free(text);
  }
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/examples", src_dir ? src_dir : ".");
  DIR *d = opendir(dir);
  CHECK(d != NULL, "cannot open %s", dir);
  if (!d)
    return test_done("ptx_test");
  struct dirent *e;
  int files = 0;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".oxk"))
      continue;
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    char *text = slurp(path);
    CHECK(text != NULL, "cannot read %s", path);
    if (!text)
      continue;
    files++;
    check_ptx(ptxas, e->d_name, text, 0, look_vecadd);
    check_ptx(ptxas, e->d_name, text, 1, NULL);
    free(text);
  }
  closedir(d);
  CHECK(files >= 5, "only %d example kernels found in %s", files, dir);
  printf("ptx_test: %d sm_90a kernels through the driver's compiler too%s\n", driver_checked,
         driver_checked ? "" : " (no sm_90 GPU here)");
  return test_done("ptx_test");
}
