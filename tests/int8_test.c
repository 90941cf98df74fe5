/* int8_test - i8 and u8 matmuls summed exactly in i32 on one device
 * (argv[1]: "cpu" or "cuda"), against a 64-bit integer product: on the GPU
 * they run on tensor cores, wgmma .s32 with K-major B on sm_90 and mma.sync
 * m16n8k32 otherwise (ptx_test checks the instructions). Dimensions no tile
 * divides, B's rows unaligned in one case (no cp.async), outputs poisoned,
 * and a K long enough (8192 products of up to 2^14) that an f32 sum of the
 * same products would round: only integer sums get every bit. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

static ox_device dev;

static const char *SRC =
    "#[tile]\n"
    "fn qmm_t<T: Int, const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<i32, [BM, BN]>,\n"
    "        a: &Tensor<T, [-1, -1]>, w: &Tensor<T, [-1, -1]>, bias: &Tensor<i32, [-1]>) {\n"
    "    let pa = a.partition([BM, BK]);\n"
    "    let pw = w.partition([BN, BK]);\n"
    "    let mut acc = full([BM, BN], 0i32);\n"
    "    for k in 0..pa.num_tiles(1) {\n"
    "        acc = mma(pa.load([tile_id(0), k]), transpose(pw.load([tile_id(1), k])), acc);\n"
    "    }\n"
    "    c.store(acc + reshape(bias.partition([BN]).load([tile_id(1)]), [1, BN]));\n"
    "}\n"
    "#[tile]\n"
    "fn qmm_n<T: Int, const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<i32, [BM, BN]>,\n"
    "        a: &Tensor<T, [-1, -1]>, b: &Tensor<T, [-1, -1]>, bias: &Tensor<i32, [-1]>) {\n"
    "    let pa = a.partition([BM, BK]);\n"
    "    let pb = b.partition([BK, BN]);\n"
    "    let mut acc = full([BM, BN], 0i32);\n"
    "    for k in 0..pa.num_tiles(1) {\n"
    "        acc = mma(pa.load([tile_id(0), k]), pb.load([k, tile_id(1)]), acc);\n"
    "    }\n"
    "    c.store(acc + reshape(bias.partition([BN]).load([tile_id(1)]), [1, BN]));\n"
    "}\n";

static unsigned rng = 2024;
static int rand_elem(ox_dtype t) {
  rng = rng * 1664525u + 1013904223u;
  int r = (int)(rng >> 16 & 0xff);
  return t == OX_I8 ? r - 128 : r;
}

/* An R x C matrix of random elements of t (vals: their values), as a view
 * into a wider tensor when `pad` (rows not 16-byte aligned for pad 1). The
 * padding holds 0x55, which no product may pick up. */
static ox_tensor matrix(ox_dtype t, int64_t R, int64_t C, int pad, int *vals, ox_tensor *base) {
  int64_t pitch = C + pad, shape[2] = {R, pitch};
  uint8_t *h = malloc((size_t)(R * pitch));
  for (int64_t i = 0; i < R * pitch; i++)
    h[i] = 0x55;
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < C; j++) {
      vals[i * C + j] = rand_elem(t);
      h[i * pitch + j] = (uint8_t)vals[i * C + j];
    }
  CHECK_OK(ox_tensor_from_host(dev, NULL, t, 2, shape, h, (size_t)(R * pitch), base));
  free(h);
  ox_tensor v = NULL;
  CHECK_OK(ox_tensor_slice(*base, 1, 0, C, 1, &v));
  return v;
}

typedef struct mm_case {
  int64_t M, N, K;
  int pad;
} mm_case;

/* kernel k (kmajor: B given as [N, K]) at BM x BN x BK over the cases */
static void test_matmul(ox_kernel k, const char *what, ox_dtype t, bool kmajor, int64_t BM, int64_t BN, int64_t BK,
                        const mm_case *cases, int ncases) {
  CHECK_OK(ox_kernel_set_generic(k, "BK", BK));
  for (int ci = 0; ci < ncases; ci++) {
    mm_case cs = cases[ci];
    int64_t M = cs.M, N = cs.N, K = cs.K;
    int *a = malloc(sizeof(int) * (size_t)(M * K)), *b = malloc(sizeof(int) * (size_t)(N * K));
    int32_t *bias = malloc(sizeof(int32_t) * (size_t)N);
    for (int64_t j = 0; j < N; j++)
      bias[j] = (int32_t)(j * 1000003 % 2000000) - 1000000;
    ox_tensor abase, bbase, tbias;
    ox_tensor tA = matrix(t, M, K, 0, a, &abase);
    ox_tensor tB = kmajor ? matrix(t, N, K, cs.pad, b, &bbase) : matrix(t, K, N, cs.pad, b, &bbase);
    CHECK_OK(ox_tensor_from_host(dev, NULL, OX_I32, 1, &N, bias, sizeof(int32_t) * (size_t)N, &tbias));
    const int64_t sc[2] = {M, N}, tile[2] = {BM, BN};
    ox_tensor tc, part;
    CHECK_OK(ox_tensor_full(dev, NULL, OX_I32, 2, sc, -7, &tc));
    CHECK_OK(ox_tensor_partition(tc, 2, tile, &part));
    ox_arg args[4] = {ox_arg_tensor(part), ox_arg_tensor(tA), ox_arg_tensor(tB), ox_arg_tensor(tbias)};
    CHECK_OK(ox_launch(k, NULL, NULL, args, 4));
    int32_t *got = malloc(sizeof(int32_t) * (size_t)(M * N));
    CHECK_OK(ox_tensor_to_host(tc, NULL, got, sizeof(int32_t) * (size_t)(M * N)));
    int bad = 0;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        int64_t want = bias[j];
        for (int64_t p = 0; p < K; p++)
          want += (int64_t)a[i * K + p] * (kmajor ? b[j * K + p] : b[p * N + j]);
        if (got[i * N + j] != want && bad++ < 5)
          fprintf(stderr, "  %s: c[%lld][%lld] = %d, expected %lld\n", what, (long long)i, (long long)j,
                  got[i * N + j], (long long)want);
      }
    CHECK(bad == 0, "%s %s %lldx%lldx%lld tiles, M=%lld N=%lld K=%lld, B rows padded by %d: %d wrong", what,
          ox_dtype_name(t), (long long)BM, (long long)BN, (long long)BK, (long long)M, (long long)N, (long long)K,
          cs.pad, bad);
    ox_tensor all[] = {tA, tB, abase, bbase, tc, part, tbias};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
      ox_tensor_release(all[i]);
    free(a);
    free(b);
    free(bias);
    free(got);
  }
}

int main(int argc, char **argv) {
  const char *d = argc > 1 ? argv[1] : "cpu";
  CHECK_OK(ox_device_get(strcmp(d, "cpu") ? OX_DEVICE_CUDA : OX_DEVICE_CPU, 0, &dev));
  if (!dev)
    return test_done("int8_test");
  ox_compile_options o = {.size = sizeof o, .filename = "int8.oxk"};
  ox_module m = NULL;
  CHECK_OK(ox_module_compile(dev, SRC, &o, &m));
  if (!m)
    return test_done("int8_test");
  ox_kernel kt, kn;
  CHECK_OK(ox_module_get_kernel(m, "qmm_t", &kt));
  CHECK_OK(ox_module_get_kernel(m, "qmm_n", &kn));
  bool gpu = strcmp(d, "cpu") != 0;
  static const mm_case cases[] = {{200, 136, 96, 0}, {67, 300, 100, 0}, {1, 1, 1, 0}, {130, 70, 333, 1}};
  /* 8192 products of up to 2^14 (i8: -128 * -128): sums past 2^24, where f32 would round */
  static const mm_case deep[] = {{70, 260, 8192, 0}};
  static const ox_dtype types[2] = {OX_I8, OX_U8};
  for (int i = 0; i < 2; i++) {
    ox_dtype t = types[i];
    test_matmul(kt, "qmm_t", t, true, 128, 128, 64, cases, 4);
    test_matmul(kn, "qmm_n", t, false, 64, 64, 32, cases, 4);
    if (gpu) { /* the fast tiles; on the CPU they take long and add nothing */
      test_matmul(kt, "qmm_t", t, true, 128, 256, 128, cases, 4);
      test_matmul(kn, "qmm_n", t, false, 128, 128, 64, cases, 4);
    }
    test_matmul(kt, "qmm_t", t, true, 64, 128, 128, deep, 1);
    test_matmul(kn, "qmm_n", t, false, 64, 64, 64, deep, 1);
  }
  ox_module_destroy(m);
  return test_done("int8_test");
}
