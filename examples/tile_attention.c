/* tile_attention - the forward pass of attention on [batch, heads, seq,
 * head_dim] bf16 tensors, head dims 64 and 128, causal and not, sequence
 * lengths that no tile divides, checked against a double-precision reference
 * computed from the same bf16 inputs. The output starts poisoned (NaN). */
#include <math.h>

#include "common.h"

typedef struct shape {
  int64_t B, H, N, D, BM, BN;
} shape;

/* One launch; returns the mismatches against the reference. */
static int run(ox_device dev, ox_kernel k, shape s, int causal, unsigned seed) {
  const int64_t dims[4] = {s.B, s.H, s.N, s.D}, tile[4] = {1, 1, s.BM, s.D};
  size_t n = (size_t)(s.B * s.H * s.N * s.D);
  uint16_t *q = malloc(2 * n), *kk = malloc(2 * n), *v = malloc(2 * n), *o = malloc(2 * n);
  for (size_t i = 0; i < n; i++) {
    q[i] = example_to_bf16(2.0f * example_rand(&seed));
    kk[i] = example_to_bf16(2.0f * example_rand(&seed));
    v[i] = example_to_bf16(example_rand(&seed));
  }
  ox_tensor tq, tk, tv, to, part;
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_BF16, 4, dims, q, 2 * n, &tq));
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_BF16, 4, dims, kk, 2 * n, &tk));
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_BF16, 4, dims, v, 2 * n, &tv));
  OX_CHECK(ox_tensor_full(dev, NULL, OX_BF16, 4, dims, NAN, &to)); /* poisoned */
  OX_CHECK(ox_tensor_partition(to, 4, tile, &part));
  OX_CHECK(ox_kernel_set_generic(k, "BN", s.BN)); /* BM and D come from o's partition */
  double scale = 1.0 / sqrt((double)s.D);
  ox_arg args[6] = {ox_arg_tensor(part), ox_arg_tensor(tq),          ox_arg_tensor(tk),
                    ox_arg_tensor(tv),   ox_arg_f32((float)scale),    ox_arg_bool(causal)};
  OX_CHECK(ox_launch(k, NULL, NULL, args, 6));
  OX_CHECK(ox_tensor_to_host(to, NULL, o, 2 * n));
  int bad = 0;
  double *p = malloc(sizeof(double) * (size_t)s.N);
  for (int64_t bh = 0; bh < s.B * s.H; bh++) {
    const uint16_t *Q = q + bh * s.N * s.D, *K = kk + bh * s.N * s.D, *V = v + bh * s.N * s.D;
    const uint16_t *O = o + bh * s.N * s.D;
    for (int64_t i = 0; i < s.N; i++) {
      int64_t last = causal ? i + 1 : s.N;
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < last; j++) {
        double dotp = 0;
        for (int64_t d = 0; d < s.D; d++)
          dotp += example_from_bf16(Q[i * s.D + d]) * example_from_bf16(K[j * s.D + d]);
        p[j] = dotp * scale;
        mx = fmax(mx, p[j]);
      }
      for (int64_t j = 0; j < last; j++)
        sum += p[j] = exp(p[j] - mx);
      for (int64_t d = 0; d < s.D; d++) {
        double want = 0;
        for (int64_t j = 0; j < last; j++)
          want += p[j] / sum * example_from_bf16(V[j * s.D + d]);
        double got = example_from_bf16(O[i * s.D + d]);
        /* bf16 probabilities in the second product and a bf16 output: a few
           units in the last place of bf16 (2^-8) */
        if (!(fabs(got - want) <= 1.5e-2) && bad++ < 5)
          fprintf(stderr, "[%lld,%lld,%lld,%lld] causal %d: o = %.6g, expected %.6g\n",
                  (long long)(bh / s.H), (long long)(bh % s.H), (long long)i, (long long)d, causal, got, want);
      }
    }
  }
  free(p);
  ox_tensor_release(part);
  ox_tensor_release(tq);
  ox_tensor_release(tk);
  ox_tensor_release(tv);
  ox_tensor_release(to);
  free(q);
  free(kk);
  free(v);
  free(o);
  return bad;
}

int main(int argc, char **argv) {
  ox_device dev = example_device(argc, argv);
  ox_module m = example_module(dev, "tile_attention");
  ox_kernel k;
  OX_CHECK(ox_module_get_kernel(m, "attention", &k));
  /* batch, heads, seq, head dim; query and key tiles */
  static const shape shapes[] = {{2, 3, 300, 64, 64, 64}, {1, 2, 200, 128, 64, 32}, {1, 1, 97, 64, 128, 64},
                                 {1, 2, 129, 128, 128, 64}};
  int bad = 0;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int causal = 0; causal < 2; causal++)
      bad += run(dev, k, shapes[i], causal, 17u + (unsigned)i);
  ox_module_destroy(m);
  return example_finish("tile_attention", dev, bad);
}
