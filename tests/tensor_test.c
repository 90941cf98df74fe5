/* tensor_test - views, copies and filled tensors on one device (argv[1]:
 * "cpu" or "cuda"): every view's shape, strides and data against a reference
 * gathered on the host, copies with any strides between every pair of
 * available devices, zeros/full/arange for every dtype, and the errors
 * (bad arguments, NULL and released handles). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "check.h"

static ox_device dev, cpu;

/* ---- host references */

/* Gathers the elements of a strided layout from `base` (row-major order). */
static void gather(const void *base, size_t es, int ndim, const int64_t *shape,
                   const int64_t *strides, int64_t off, void *out) {
  int64_t n = 1, idx[OX_MAX_DIMS] = {0};
  for (int i = 0; i < ndim; i++)
    n *= shape[i];
  for (int64_t k = 0; k < n; k++) {
    int64_t o = off;
    for (int i = 0; i < ndim; i++)
      o += idx[i] * strides[i];
    memcpy((char *)out + k * (int64_t)es, (const char *)base + o * (int64_t)es, es);
    for (int i = ndim - 1; i >= 0; i--) {
      if (++idx[i] < shape[i])
        break;
      idx[i] = 0;
    }
  }
}

/* Reads any tensor's elements in row-major order: copy into a dense tensor
 * on its device, then to the host. Returns malloc'ed bytes. */
static void *read_all(ox_tensor t) {
  size_t bytes = (size_t)ox_tensor_numel(t) * ox_dtype_size(ox_tensor_dtype(t));
  void *h = calloc(1, bytes + 1);
  ox_tensor c = NULL;
  CHECK_OK(ox_tensor_empty(ox_tensor_device(t), NULL, ox_tensor_dtype(t), ox_tensor_ndim(t),
                           ox_tensor_shape(t), &c));
  if (c) {
    CHECK_OK(ox_tensor_copy(c, t, NULL));
    CHECK_OK(ox_tensor_to_host(c, NULL, h, bytes));
  }
  ox_tensor_release(c);
  return h;
}

/* Checks view v of base (whose host data is `host`) against the reference. */
#define CHECK_VIEW(v, base, host, nd, ...) check_view(__LINE__, v, base, host, nd, __VA_ARGS__)
static void check_view(int line, ox_tensor v, ox_tensor base, const void *host, int nd,
                       const int64_t *shape, const int64_t *strides) {
  if (!v) {
    CHECK(0, "line %d: no view", line);
    return;
  }
  CHECK(ox_tensor_ndim(v) == nd, "line %d: ndim %d, expected %d", line, ox_tensor_ndim(v), nd);
  for (int i = 0; i < nd && ox_tensor_ndim(v) == nd; i++) {
    CHECK(ox_tensor_shape(v)[i] == shape[i], "line %d: shape[%d] = %lld, expected %lld", line, i,
          (long long)ox_tensor_shape(v)[i], (long long)shape[i]);
    CHECK(ox_tensor_strides(v)[i] == strides[i], "line %d: strides[%d] = %lld, expected %lld",
          line, i, (long long)ox_tensor_strides(v)[i], (long long)strides[i]);
  }
  size_t es = ox_dtype_size(ox_tensor_dtype(v));
  int64_t off = ((char *)ox_tensor_data(v) - (char *)ox_tensor_data(base)) / (int64_t)es;
  int64_t n = ox_tensor_numel(v);
  void *want = calloc(1, (size_t)n * es + 1);
  gather(host, es, nd, ox_tensor_shape(v), ox_tensor_strides(v), off, want);
  void *got = read_all(v);
  CHECK(memcmp(want, got, (size_t)n * es) == 0, "line %d: the view's data differ", line);
  free(want);
  free(got);
}

static ox_tensor iota_i32(ox_device d, int ndim, const int64_t *shape, int32_t *host) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= shape[i];
  for (int64_t i = 0; i < n; i++)
    host[i] = (int32_t)i;
  ox_tensor t = NULL;
  CHECK_OK(ox_tensor_from_host(d, NULL, OX_I32, ndim, shape, host, (size_t)n * 4, &t));
  return t;
}

/* ---- views */

static void test_views(void) {
  int32_t host[120];
  const int64_t shape[3] = {4, 5, 6};
  ox_tensor x = iota_i32(dev, 3, shape, host), v = NULL, w = NULL;
  if (!x)
    return;
  CHECK(ox_tensor_is_contiguous(x) && !ox_tensor_is_read_only(x), "fresh tensor flags");
  CHECK_VIEW(x, x, host, 3, shape, ((int64_t[]){30, 6, 1}));

  /* slices */
  CHECK_OK(ox_tensor_slice(x, 0, 1, 3, 1, &v));
  CHECK_VIEW(v, x, host, 3, ((int64_t[]){2, 5, 6}), ((int64_t[]){30, 6, 1}));
  CHECK(ox_tensor_is_contiguous(v), "a slice of rows is contiguous");
  ox_tensor_release(v);
  CHECK_OK(ox_tensor_slice(x, 1, 0, 5, 2, &v));
  CHECK_VIEW(v, x, host, 3, ((int64_t[]){4, 3, 6}), ((int64_t[]){30, 12, 1}));
  CHECK(!ox_tensor_is_contiguous(v), "a stepped slice is not contiguous");
  ox_tensor_release(v);
  CHECK_OK(ox_tensor_slice(x, 2, 1, 6, 3, &v));
  CHECK_VIEW(v, x, host, 3, ((int64_t[]){4, 5, 2}), ((int64_t[]){30, 6, 3}));
  ox_tensor_release(v);
  CHECK_OK(ox_tensor_slice(x, 2, 6, 6, 1, &v)); /* empty, at the very end */
  CHECK(v && ox_tensor_numel(v) == 0 && ox_tensor_shape(v)[2] == 0, "empty slice");
  ox_tensor_release(v);
  CHECK_OK(ox_tensor_slice(x, 0, 3, 4, 1000, &v)); /* one element along dim 0 */
  CHECK_VIEW(v, x, host, 3, ((int64_t[]){1, 5, 6}), ((int64_t[]){30, 6, 1}));
  ox_tensor_release(v);
  /* chained: slice, permute, slice */
  CHECK_OK(ox_tensor_slice(x, 2, 1, 5, 2, &v));
  int perm[3] = {2, 0, 1};
  CHECK_OK(ox_tensor_permute(v, perm, &w));
  ox_tensor_release(v);
  CHECK_OK(ox_tensor_slice(w, 1, 1, 4, 2, &v));
  CHECK_VIEW(v, x, host, 3, ((int64_t[]){2, 2, 5}), ((int64_t[]){2, 60, 6}));
  ox_tensor_release(v);
  ox_tensor_release(w);

  /* permute, transpose */
  CHECK_OK(ox_tensor_permute(x, perm, &v));
  CHECK_VIEW(v, x, host, 3, ((int64_t[]){6, 4, 5}), ((int64_t[]){1, 30, 6}));
  ox_tensor_release(v);
  CHECK_OK(ox_tensor_transpose(x, 0, 2, &v));
  CHECK_VIEW(v, x, host, 3, ((int64_t[]){6, 5, 4}), ((int64_t[]){1, 6, 30}));
  CHECK(!ox_tensor_is_contiguous(v), "a transpose is not contiguous");
  /* reshape of the transpose: splitting one dimension is a view ... */
  CHECK_OK(ox_tensor_reshape(v, 4, ((int64_t[]){2, 3, 5, 4}), &w));
  CHECK_VIEW(w, x, host, 4, ((int64_t[]){2, 3, 5, 4}), ((int64_t[]){3, 1, 6, 30}));
  ox_tensor_release(w);
  /* ... merging dimensions that are not contiguous with each other is not */
  CHECK_ERR(ox_tensor_reshape(v, 1, ((int64_t[]){120}), &w), OX_ERR_INVALID_ARGUMENT,
            "reshape of a non-contiguous tensor needs a copy (ox_tensor_to)");
  CHECK(w == NULL, "out is NULL after an error");
  ox_tensor_release(v);
  CHECK_OK(ox_tensor_transpose(x, 1, 1, &v)); /* the same dims: a plain view */
  CHECK_VIEW(v, x, host, 3, shape, ((int64_t[]){30, 6, 1}));
  ox_tensor_release(v);

  /* reshape */
  CHECK_OK(ox_tensor_reshape(x, 2, ((int64_t[]){20, 6}), &v));
  CHECK_VIEW(v, x, host, 2, ((int64_t[]){20, 6}), ((int64_t[]){6, 1}));
  ox_tensor_release(v);
  CHECK_OK(ox_tensor_reshape(x, 1, ((int64_t[]){-1}), &v));
  CHECK_VIEW(v, x, host, 1, ((int64_t[]){120}), ((int64_t[]){1}));
  ox_tensor_release(v);
  CHECK_OK(ox_tensor_reshape(x, 4, ((int64_t[]){2, -1, 1, 3}), &v));
  CHECK_VIEW(v, x, host, 4, ((int64_t[]){2, 20, 1, 3}), ((int64_t[]){60, 3, 3, 1}));
  ox_tensor_release(v);
  CHECK_OK(ox_tensor_slice(x, 2, 0, 3, 1, &v)); /* [4, 5, 3], strides [30, 6, 1] */
  CHECK_OK(ox_tensor_reshape(v, 2, ((int64_t[]){20, 3}), &w)); /* dims 0, 1 still merge */
  CHECK_VIEW(w, x, host, 2, ((int64_t[]){20, 3}), ((int64_t[]){6, 1}));
  ox_tensor_release(w);
  CHECK_ERR(ox_tensor_reshape(v, 1, ((int64_t[]){60}), &w), OX_ERR_INVALID_ARGUMENT, "needs a copy");
  ox_tensor_release(v);
  ox_tensor s = NULL; /* a 0-dim tensor and back */
  CHECK_OK(ox_tensor_slice(x, 0, 2, 3, 1, &v));
  CHECK_OK(ox_tensor_slice(v, 1, 4, 5, 1, &w));
  ox_tensor_release(v);
  CHECK_OK(ox_tensor_slice(w, 2, 5, 6, 1, &v));
  ox_tensor_release(w);
  CHECK_OK(ox_tensor_reshape(v, 0, NULL, &s));
  ox_tensor_release(v);
  CHECK_VIEW(s, x, host, 0, NULL, NULL);
  CHECK(s && ox_tensor_numel(s) == 1 && ox_tensor_data(s) == (int32_t *)ox_tensor_data(x) + 89,
        "0-dim view of x[2, 4, 5]");
  CHECK_OK(ox_tensor_reshape(s, 3, ((int64_t[]){1, 1, 1}), &v));
  CHECK_VIEW(v, x, host, 3, ((int64_t[]){1, 1, 1}), ((int64_t[]){1, 1, 1}));
  ox_tensor_release(v);
  ox_tensor_release(s);

  /* reshape errors */
  CHECK_ERR(ox_tensor_reshape(x, 2, ((int64_t[]){7, -1}), &v), OX_ERR_INVALID_ARGUMENT,
            "cannot reshape a tensor of shape [4, 5, 6] (120 elements) into [7, -1]");
  CHECK_ERR(ox_tensor_reshape(x, 2, ((int64_t[]){11, 11}), &v), OX_ERR_INVALID_ARGUMENT,
            "into [11, 11] (121 elements)");
  CHECK_ERR(ox_tensor_reshape(x, 2, ((int64_t[]){-1, -1}), &v), OX_ERR_INVALID_ARGUMENT,
            "only one dimension may be -1");
  CHECK_ERR(ox_tensor_reshape(x, 2, ((int64_t[]){0, -1}), &v), OX_ERR_INVALID_ARGUMENT,
            "cannot infer the -1 dimension");
  CHECK_ERR(ox_tensor_reshape(x, 2, ((int64_t[]){-2, -60}), &v), OX_ERR_INVALID_ARGUMENT,
            "dimension 0 is -2");
  CHECK_ERR(ox_tensor_reshape(x, 9, ((int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 120}), &v),
            OX_ERR_INVALID_ARGUMENT, "ndim is 9");
  CHECK_ERR(ox_tensor_reshape(x, 2, NULL, &v), OX_ERR_INVALID_ARGUMENT, "shape is NULL");

  /* broadcast */
  int32_t h2[5];
  ox_tensor col = iota_i32(dev, 2, ((int64_t[]){5, 1}), h2);
  CHECK_OK(ox_tensor_broadcast_to(col, 3, ((int64_t[]){3, 5, 4}), &v));
  CHECK_VIEW(v, col, h2, 3, ((int64_t[]){3, 5, 4}), ((int64_t[]){0, 1, 0}));
  CHECK(ox_tensor_is_read_only(v) && !ox_tensor_is_contiguous(v), "broadcast flags");
  CHECK_OK(ox_tensor_reshape(v, 4, ((int64_t[]){3, 5, 2, 2}), &w)); /* a split: still a view */
  CHECK_VIEW(w, col, h2, 4, ((int64_t[]){3, 5, 2, 2}), ((int64_t[]){0, 1, 0, 0}));
  CHECK(ox_tensor_is_read_only(w), "read-only is inherited by reshape");
  ox_tensor_release(w);
  CHECK_ERR(ox_tensor_reshape(v, 2, ((int64_t[]){3, 20}), &w), OX_ERR_INVALID_ARGUMENT, "needs a copy");
  CHECK_OK(ox_tensor_slice(v, 2, 0, 2, 1, &w));
  CHECK(ox_tensor_is_read_only(w), "read-only is inherited by slice");
  CHECK_ERR(ox_tensor_copy(w, w, NULL), OX_ERR_INVALID_ARGUMENT, "dst is read-only");
  ox_tensor_release(w);
  ox_tensor_release(v);
  CHECK_OK(ox_tensor_broadcast_to(col, 2, ((int64_t[]){5, 0}), &v)); /* 1 -> 0 is allowed */
  CHECK(v && ox_tensor_numel(v) == 0, "broadcast to an empty shape");
  ox_tensor_release(v);
  CHECK_OK(ox_tensor_broadcast_to(x, 3, shape, &v)); /* the same shape: read-only all the same */
  CHECK_VIEW(v, x, host, 3, shape, ((int64_t[]){30, 6, 1}));
  CHECK(ox_tensor_is_read_only(v), "broadcast result is read-only");
  ox_tensor_release(v);
  CHECK_ERR(ox_tensor_broadcast_to(x, 3, ((int64_t[]){4, 5, 7}), &v), OX_ERR_INVALID_ARGUMENT,
            "cannot broadcast shape [4, 5, 6] to [4, 5, 7]: dimension 2 has size 6");
  CHECK_ERR(ox_tensor_broadcast_to(x, 2, ((int64_t[]){5, 6}), &v), OX_ERR_INVALID_ARGUMENT,
            "ndim is 2; it must be 3..8");
  CHECK_ERR(ox_tensor_broadcast_to(col, 2, ((int64_t[]){5, -3}), &v), OX_ERR_INVALID_ARGUMENT,
            "dimension 1 is -3");
  CHECK_ERR(ox_tensor_broadcast_to(col, 2, ((int64_t[]){4, 3}), &v), OX_ERR_INVALID_ARGUMENT,
            "cannot broadcast shape [5, 1] to [4, 3]");
  ox_tensor_release(col);

  /* partition */
  int64_t grid[OX_MAX_DIMS] = {0};
  CHECK(ox_tensor_partition_grid(x, grid) == 0, "a plain tensor is no partition");
  CHECK_OK(ox_tensor_partition(x, 3, ((int64_t[]){2, 2, 4}), &v));
  CHECK(ox_tensor_partition_grid(v, grid) == 3 && grid[0] == 2 && grid[1] == 3 && grid[2] == 2,
        "grid [%lld, %lld, %lld]", (long long)grid[0], (long long)grid[1], (long long)grid[2]);
  CHECK_VIEW(v, x, host, 3, shape, ((int64_t[]){30, 6, 1}));
  CHECK(ox_tensor_partition_grid(v, NULL) == 3, "rank without a grid");
  CHECK_OK(ox_tensor_slice(v, 0, 0, 2, 1, &w)); /* a view of a partition is a plain tensor */
  CHECK(ox_tensor_partition_grid(w, grid) == 0, "slice of a partition");
  ox_tensor_release(w);
  ox_tensor_release(v);
  CHECK_OK(ox_tensor_partition(x, 3, ((int64_t[]){3, 100, 7}), &v)); /* any positive size */
  CHECK(ox_tensor_partition_grid(v, grid) == 3 && grid[0] == 2 && grid[1] == 1 && grid[2] == 1,
        "grid of odd tiles");
  ox_tensor_release(v);
  CHECK_ERR(ox_tensor_partition(x, 3, ((int64_t[]){2, 0, 4}), &v), OX_ERR_INVALID_ARGUMENT,
            "size 0 along dimension 1; tile sizes must be > 0");
  CHECK_ERR(ox_tensor_partition(x, 2, ((int64_t[]){2, 2}), &v), OX_ERR_INVALID_ARGUMENT,
            "2 tile sizes for a tensor of 3 dimensions");
  CHECK_ERR(ox_tensor_partition(x, 3, NULL, &v), OX_ERR_INVALID_ARGUMENT, "tile is NULL");

  /* slice, permute, transpose errors */
  CHECK_ERR(ox_tensor_slice(x, 3, 0, 1, 1, &v), OX_ERR_INVALID_ARGUMENT,
            "dim 3 is out of range for a tensor of 3 dimensions");
  CHECK_ERR(ox_tensor_slice(x, -1, 0, 1, 1, &v), OX_ERR_INVALID_ARGUMENT, "dim -1 is out of range");
  CHECK_ERR(ox_tensor_slice(x, 0, 0, 1, 0, &v), OX_ERR_INVALID_ARGUMENT, "step is 0; it must be > 0");
  CHECK_ERR(ox_tensor_slice(x, 0, 3, 0, -1, &v), OX_ERR_INVALID_ARGUMENT, "negative strides");
  CHECK_ERR(ox_tensor_slice(x, 1, -1, 2, 1, &v), OX_ERR_INVALID_ARGUMENT,
            "start -1, stop 2 along dim 1 of size 5");
  CHECK_ERR(ox_tensor_slice(x, 1, 0, 6, 1, &v), OX_ERR_INVALID_ARGUMENT, "0 <= start <= stop <= 5");
  CHECK_ERR(ox_tensor_slice(x, 1, 3, 2, 1, &v), OX_ERR_INVALID_ARGUMENT, "start 3, stop 2");
  CHECK_ERR(ox_tensor_permute(x, ((int[]){0, 0, 1}), &v), OX_ERR_INVALID_ARGUMENT,
            "perm [0, 0, 1] is not a permutation of 0..2: 0 is repeated");
  CHECK_ERR(ox_tensor_permute(x, ((int[]){0, 1, 3}), &v), OX_ERR_INVALID_ARGUMENT, "3 is out of range");
  CHECK_ERR(ox_tensor_permute(x, NULL, &v), OX_ERR_INVALID_ARGUMENT, "perm is NULL");
  CHECK_ERR(ox_tensor_transpose(x, 0, 3, &v), OX_ERR_INVALID_ARGUMENT, "dims 0 and 3");

  /* views outlive their base */
  CHECK_OK(ox_tensor_transpose(x, 0, 1, &v));
  CHECK_OK(ox_tensor_slice(v, 2, 2, 4, 1, &w));
  ox_tensor_release(x);
  ox_tensor_release(v);
  x = iota_i32(dev, 1, ((int64_t[]){7}), (int32_t[7]){0}); /* reuse memory if it were freed */
  ox_tensor_release(x);
  if (w) {
    int32_t got[40], want[40];
    /* w is x.transpose(0, 1)[:, :, 2:4]: shape [5, 4, 2], strides [6, 30, 1], first x[2] */
    gather(host, 4, 3, ((int64_t[]){5, 4, 2}), ((int64_t[]){6, 30, 1}), 2, want);
    CHECK_OK(ox_tensor_to(w, cpu, NULL, &x));
    if (x)
      CHECK_OK(ox_tensor_to_host(x, NULL, got, sizeof got));
    CHECK(x && !memcmp(got, want, sizeof got), "a view after its base was released");
    ox_tensor_release(x);
  }
  ox_tensor_release(w);
}

/* ---- handles */

static void test_handles(void) {
  ox_tensor v = (ox_tensor)1, x = NULL;
  int64_t g[OX_MAX_DIMS];
  CHECK_ERR(ox_tensor_slice(NULL, 0, 0, 1, 1, &v), OX_ERR_INVALID_ARGUMENT,
            "ox_tensor_slice: tensor is NULL");
  CHECK(v == NULL, "out cleared");
  CHECK_ERR(ox_tensor_reshape(NULL, 0, NULL, &v), OX_ERR_INVALID_ARGUMENT,
            "ox_tensor_reshape: tensor is NULL");
  CHECK_ERR(ox_tensor_permute(NULL, NULL, &v), OX_ERR_INVALID_ARGUMENT, "ox_tensor_permute");
  CHECK_ERR(ox_tensor_transpose(NULL, 0, 1, &v), OX_ERR_INVALID_ARGUMENT, "ox_tensor_transpose");
  CHECK_ERR(ox_tensor_broadcast_to(NULL, 0, NULL, &v), OX_ERR_INVALID_ARGUMENT, "ox_tensor_broadcast_to");
  CHECK_ERR(ox_tensor_partition(NULL, 0, NULL, &v), OX_ERR_INVALID_ARGUMENT, "ox_tensor_partition");
  CHECK(ox_tensor_partition_grid(NULL, g) == 0, "grid of NULL");
  CHECK(ox_tensor_strides(NULL) == NULL && ox_tensor_is_contiguous(NULL) == 0 &&
        ox_tensor_is_read_only(NULL) == 0, "queries of NULL");
  CHECK_ERR(ox_tensor_copy(NULL, NULL, NULL), OX_ERR_INVALID_ARGUMENT, "ox_tensor_copy: dst is NULL");
  CHECK_ERR(ox_tensor_to(NULL, dev, NULL, &v), OX_ERR_INVALID_ARGUMENT, "ox_tensor_to: src is NULL");
  CHECK_OK(ox_tensor_zeros(dev, NULL, OX_F32, 1, ((int64_t[]){4}), &x));
  CHECK_ERR(ox_tensor_slice(x, 0, 0, 1, 1, NULL), OX_ERR_INVALID_ARGUMENT, "out is NULL");
  CHECK_ERR(ox_tensor_to(x, NULL, NULL, &v), OX_ERR_INVALID_ARGUMENT, "device is NULL");
  CHECK_ERR(ox_tensor_copy(x, NULL, NULL), OX_ERR_INVALID_ARGUMENT, "src is NULL");

  /* a value that never was a handle is refused */
  ox_tensor fake = (ox_tensor)(uintptr_t)0x1234567;
  CHECK_ERR(ox_tensor_slice(fake, 0, 0, 1, 1, &v), OX_ERR_INVALID_ARGUMENT, "not live");
  CHECK_ERR(ox_tensor_copy(x, fake, NULL), OX_ERR_INVALID_ARGUMENT, "src is not a live tensor");
  CHECK_ERR(ox_tensor_to(fake, dev, NULL, &v), OX_ERR_INVALID_ARGUMENT, "not a live tensor");
  CHECK(ox_tensor_strides(fake) == NULL && ox_tensor_partition_grid(fake, g) == 0, "fake queries");
  /* a released handle too (handle_test checks every kind of handle) */
  ox_tensor y = NULL;
  CHECK_OK(ox_tensor_zeros(dev, NULL, OX_F32, 1, ((int64_t[]){4}), &y));
  ox_tensor_release(y);
  CHECK_ERR(ox_tensor_transpose(y, 0, 0, &v), OX_ERR_INVALID_ARGUMENT, "not live");
  ox_tensor_release(x);
}

/* ---- zeros, full, arange */

/* The f16 (eb 5, mb 10) or bf16 (8, 7) bits of a value they hold exactly. */
static uint16_t small_bits(double v, int eb, int mb) {
  if (v == 0)
    return signbit(v) ? (uint16_t)(1u << (eb + mb)) : 0;
  int e;
  double m = frexp(fabs(v), &e); /* v = m * 2^e, m in [0.5, 1) */
  uint32_t exp = (uint32_t)(e - 1 + (1 << (eb - 1)) - 1);
  uint32_t man = (uint32_t)ldexp(m * 2 - 1, mb);
  return (uint16_t)((v < 0 ? 1u << (eb + mb) : 0) | exp << mb | man);
}

/* Element i of a host buffer of dtype t as a double (fp8: the raw byte). */
static double elem(ox_dtype t, const void *p, int64_t i) {
  const char *b = (const char *)p + i * (int64_t)ox_dtype_size(t);
  switch (t) {
  case OX_BOOL: case OX_U8: case OX_F8E4M3: case OX_F8E5M2: return *(const uint8_t *)b;
  case OX_I8: return *(const int8_t *)b;
  case OX_I16: return *(const int16_t *)b;
  case OX_I32: return *(const int32_t *)b;
  case OX_I64: return (double)*(const int64_t *)b;
  case OX_U16: return *(const uint16_t *)b;
  case OX_U32: return *(const uint32_t *)b;
  case OX_U64: return (double)*(const uint64_t *)b;
  case OX_F32: return *(const float *)b;
  case OX_F64: return *(const double *)b;
  default: return NAN;
  }
}

/* Checks that every element of t has the bits of `want` (element-sized). */
static void check_all(int line, ox_tensor t, const void *want, const char *what) {
  size_t es = ox_dtype_size(ox_tensor_dtype(t));
  int64_t n = ox_tensor_numel(t);
  char *h = read_all(t);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++)
    bad += memcmp(h + i * (int64_t)es, want, es) != 0;
  CHECK(bad == 0, "line %d: %s %s: %lld of %lld elements wrong", line, what,
        ox_dtype_name(ox_tensor_dtype(t)), (long long)bad, (long long)n);
  free(h);
}

static void test_fill(void) {
  const int64_t shape[2] = {37, 29}; /* odd sizes: grid-stride tails */
  for (int d = 0; d < OX_DTYPE_COUNT; d++) {
    ox_dtype t = (ox_dtype)d;
    ox_tensor z = NULL;
    if (t == OX_TF32) { /* a compute type of kernels: no tensor holds it */
      const char *why = "tf32 is a compute type of kernels";
      CHECK_ERR(ox_tensor_zeros(dev, NULL, t, 2, shape, &z), OX_ERR_INVALID_ARGUMENT, why);
      CHECK_ERR(ox_tensor_full(dev, NULL, t, 2, shape, 1.0, &z), OX_ERR_INVALID_ARGUMENT, why);
      CHECK_ERR(ox_tensor_arange(dev, NULL, t, 0, 1, 5, &z), OX_ERR_INVALID_ARGUMENT, why);
      CHECK_ERR(ox_tensor_empty(dev, NULL, t, 2, shape, &z), OX_ERR_INVALID_ARGUMENT,
                "ox_tensor_empty: tf32 is a compute type of kernels (casts, dot operands), not a "
                "tensor dtype; tensors hold f32");
      float host[4] = {0};
      CHECK_ERR(ox_tensor_from_host(dev, NULL, t, 1, (int64_t[]){4}, host, sizeof host, &z),
                OX_ERR_INVALID_ARGUMENT, why);
      CHECK(z == NULL, "no tf32 tensor");
      continue;
    }
    CHECK_OK(ox_tensor_zeros(dev, NULL, t, 2, shape, &z));
    uint64_t zero = 0;
    if (z) {
      CHECK(ox_tensor_is_contiguous(z) && ox_tensor_numel(z) == 37 * 29, "zeros layout");
      check_all(__LINE__, z, &zero, "zeros");
    }
    ox_tensor_release(z);
    ox_tensor f = NULL;
    if (t == OX_F8E4M3 || t == OX_F8E5M2) {
      CHECK_ERR(ox_tensor_full(dev, NULL, t, 2, shape, 1.0, &f), OX_ERR_UNSUPPORTED, "storage-only");
      CHECK_ERR(ox_tensor_arange(dev, NULL, t, 0, 1, 5, &f), OX_ERR_UNSUPPORTED, "storage-only");
      continue;
    }
    /* a value whose bytes differ (the kernel) and one whose bytes are equal (memset) */
    double vals[2] = {t == OX_BOOL ? 1 : t >= OX_U8 && t <= OX_U64 ? 3 : -3, t == OX_BOOL ? 0 : 1.5};
    for (int k = 0; k < 2; k++) {
      union { uint8_t b[8]; int8_t i8; int16_t i16; int32_t i32; int64_t i64; uint16_t u16;
              uint32_t u32; uint64_t u64; float f; double g; } w = {{0}};
      double v = vals[k];
      switch (t) {
      case OX_BOOL: w.b[0] = v != 0; break;
      case OX_I8: w.i8 = (int8_t)v; break;
      case OX_I16: w.i16 = (int16_t)v; break;
      case OX_I32: w.i32 = (int32_t)v; break;
      case OX_I64: w.i64 = (int64_t)v; break;
      case OX_U8: w.b[0] = (uint8_t)v; break;
      case OX_U16: w.u16 = (uint16_t)v; break;
      case OX_U32: w.u32 = (uint32_t)v; break;
      case OX_U64: w.u64 = (uint64_t)v; break;
      case OX_F16: w.u16 = small_bits(v, 5, 10); break;
      case OX_BF16: w.u16 = small_bits(v, 8, 7); break;
      case OX_F32: w.f = (float)v; break;
      default: w.g = v; break;
      }
      CHECK_OK(ox_tensor_full(dev, NULL, t, 2, shape, v, &f));
      if (f)
        check_all(__LINE__, f, &w, "full");
      ox_tensor_release(f);
    }
  }
  /* conversions: saturation, NaN, rounding, uniform bytes */
  struct { ox_dtype t; double v; uint64_t bits; } conv[] = {
      {OX_U8, 300.7, 255},          {OX_U8, -5, 0},             {OX_I8, -200, 0x80},
      {OX_I8, 2.9, 2},              {OX_I32, NAN, 0},           {OX_I32, -1, 0xffffffffu},
      {OX_I64, 1e30, 0x7fffffffffffffffull},                    {OX_U16, 257, 0x0101},
      {OX_U64, 1e30, ~0ull},        {OX_F16, 1e6, 0x7c00},      {OX_F16, 1.0 + 1.0 / 4096, 0x3c00},
      {OX_F16, 1.0 + 3.0 / 2048, 0x3c02}, {OX_F16, 1e-7, 0x0002}, {OX_BF16, 1.0 + 1.0 / 256, 0x3f80},
      {OX_BF16, 1.0 + 3.0 / 256, 0x3f82}, {OX_BF16, -2.0, 0xc000}, {OX_BOOL, NAN, 1},
      {OX_F16, -0.0, 0x8000},       {OX_BF16, 1.0 + 0x1p-8 + 0x1p-30, 0x3f80}, /* through f32 */
  };
  for (size_t i = 0; i < sizeof conv / sizeof conv[0]; i++) {
    ox_tensor f = NULL;
    CHECK_OK(ox_tensor_full(dev, NULL, conv[i].t, 1, ((int64_t[]){1000}), conv[i].v, &f));
    if (f)
      check_all(__LINE__ * 1000 + (int)i, f, &conv[i].bits, "full conversion");
    ox_tensor_release(f);
  }
  /* full converts as a kernel's `v as T` does (f16, bf16: through f32): the
   * same bits as arange's first element */
  const double tricky[] = {1.0 + 0x1p-8 + 0x1p-30, 1.0 + 0x1p-11 + 0x1p-40, 65519.99, -3.3, 1e-6, 1e300};
  for (size_t i = 0; i < sizeof tricky / sizeof tricky[0]; i++)
    for (ox_dtype t = OX_F16; t <= OX_BF16; t++) {
      ox_tensor a = NULL, b = NULL;
      uint16_t x = 1, y = 2;
      CHECK_OK(ox_tensor_full(dev, NULL, t, 1, ((int64_t[]){1}), tricky[i], &a));
      CHECK_OK(ox_tensor_arange(dev, NULL, t, tricky[i], 0, 1, &b));
      if (a && b) {
        CHECK_OK(ox_tensor_to_host(a, NULL, &x, 2));
        CHECK_OK(ox_tensor_to_host(b, NULL, &y, 2));
      }
      CHECK(x == y, "%s of %.17g: full gives 0x%04x, arange 0x%04x", ox_dtype_name(t), tricky[i], x, y);
      ox_tensor_release(a);
      ox_tensor_release(b);
    }
  ox_tensor f = NULL;
  CHECK_OK(ox_tensor_full(dev, NULL, OX_F32, 0, NULL, 2.5, &f)); /* a 0-dim tensor */
  float h = 0;
  if (f)
    CHECK_OK(ox_tensor_to_host(f, NULL, &h, 4));
  CHECK(h == 2.5f, "0-dim full: %g", h);
  ox_tensor_release(f);
  CHECK_OK(ox_tensor_zeros(dev, NULL, OX_F32, 2, ((int64_t[]){0, 5}), &f)); /* empty */
  CHECK(f && ox_tensor_numel(f) == 0, "empty zeros");
  ox_tensor_release(f);
  CHECK_ERR(ox_tensor_zeros(dev, NULL, OX_F32, 1, ((int64_t[]){-1}), &f), OX_ERR_INVALID_ARGUMENT,
            "ox_tensor_zeros: shape[0] is -1");
  CHECK_ERR(ox_tensor_full(dev, NULL, (ox_dtype)99, 1, ((int64_t[]){1}), 0, &f),
            OX_ERR_INVALID_ARGUMENT, "ox_tensor_full: invalid dtype 99");
  CHECK_ERR(ox_tensor_zeros(NULL, NULL, OX_F32, 1, ((int64_t[]){1}), &f), OX_ERR_INVALID_ARGUMENT,
            "device is NULL");
  CHECK_ERR(ox_tensor_zeros(dev, NULL, OX_F32, 1, ((int64_t[]){1}), NULL), OX_ERR_INVALID_ARGUMENT,
            "out is NULL");
}

static void test_arange(void) {
  enum { N = 1000 };
  for (int d = 0; d < OX_DTYPE_COUNT; d++) {
    ox_dtype t = (ox_dtype)d;
    if (t == OX_F8E4M3 || t == OX_F8E5M2 || t == OX_TF32) /* tf32: refused, test_fill */
      continue;
    bool is_signed = (t >= OX_I8 && t <= OX_I64) || t >= OX_F16;
    bool is_float = t >= OX_F16;
    /* start, step and n keep every value exact in the type */
    int64_t n = t == OX_I8 || t == OX_U8 || t == OX_BOOL ? 100 : N;
    double start = t == OX_BOOL ? -4 : is_signed ? -5 : 7, step = is_float ? 0.5 : is_signed ? 1 : 2;
    if (t == OX_BF16)
      n = 200; /* 8 bits of precision: exact up to 256 */
    ox_tensor a = NULL;
    CHECK_OK(ox_tensor_arange(dev, NULL, t, start, step, n, &a));
    if (!a)
      continue;
    CHECK(ox_tensor_ndim(a) == 1 && ox_tensor_shape(a)[0] == n, "arange shape");
    char *h = read_all(a);
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++) {
      double want = start + (double)i * step, got;
      if (t == OX_BOOL)
        want = want != 0;
      if (t == OX_F16 || t == OX_BF16) {
        uint16_t b;
        memcpy(&b, h + 2 * i, 2);
        got = b == small_bits(want, t == OX_F16 ? 5 : 8, t == OX_F16 ? 10 : 7) ? want : NAN;
      } else {
        got = elem(t, h, i);
      }
      if (got != want && !bad++)
        first = i;
    }
    CHECK(bad == 0, "arange %s: %lld wrong, first at %lld", ox_dtype_name(t), (long long)bad,
          (long long)first);
    free(h);
    ox_tensor_release(a);
  }
  /* i64 beyond 2^53: exact in the integer path */
  ox_tensor a = NULL;
  CHECK_OK(ox_tensor_arange(dev, NULL, OX_I64, 0x1p62, 3, 10, &a));
  int64_t big[10] = {0};
  if (a)
    CHECK_OK(ox_tensor_to_host(a, NULL, big, sizeof big));
  CHECK(big[0] == (int64_t)1 << 62 && big[9] == ((int64_t)1 << 62) + 27, "big arange %lld",
        (long long)big[9]);
  ox_tensor_release(a);
  /* non-integral start or step for an integer type: f64, truncated */
  int32_t h[6] = {0};
  CHECK_OK(ox_tensor_arange(dev, NULL, OX_I32, 0.5, 0.5, 6, &a));
  if (a)
    CHECK_OK(ox_tensor_to_host(a, NULL, h, sizeof h));
  CHECK(h[0] == 0 && h[1] == 1 && h[2] == 1 && h[3] == 2 && h[5] == 3, "i32 arange from 0.5 by 0.5");
  ox_tensor_release(a);
  /* an integral u8 arange wraps, as `as u8` does */
  uint8_t u[4] = {0};
  CHECK_OK(ox_tensor_arange(dev, NULL, OX_U8, 254, 1, 4, &a));
  if (a)
    CHECK_OK(ox_tensor_to_host(a, NULL, u, sizeof u));
  CHECK(u[0] == 254 && u[1] == 255 && u[2] == 0 && u[3] == 1, "u8 arange wraps");
  ox_tensor_release(a);
  CHECK_OK(ox_tensor_arange(dev, NULL, OX_F32, 0, 1, 0, &a));
  CHECK(a && ox_tensor_numel(a) == 0, "empty arange");
  ox_tensor_release(a);
  CHECK_ERR(ox_tensor_arange(dev, NULL, OX_F32, 0, 1, -1, &a), OX_ERR_INVALID_ARGUMENT,
            "ox_tensor_arange: n is -1");
  CHECK_ERR(ox_tensor_arange(dev, NULL, OX_F32, 0, INFINITY, 3, &a), OX_ERR_INVALID_ARGUMENT,
            "must be finite");
}

/* ---- copies */

/* One copy case: src a view of an iota tensor on sdev, dst a view of a zeros
 * tensor on ddev; checks dst's base afterwards against the host reference. */
typedef struct view_spec {
  int ndim;
  int64_t shape[OX_MAX_DIMS]; /* the base tensor */
  int perm[OX_MAX_DIMS];      /* then permuted (perm[0] < 0: not) */
  int sdim;                   /* then sliced along sdim (< 0: not) */
  int64_t start, stop, step;
} view_spec;

static ox_tensor make_view(ox_tensor base, const view_spec *vs) {
  ox_tensor v = base, w = NULL;
  ox_tensor_retain(base);
  if (vs->perm[0] >= 0) {
    CHECK_OK(ox_tensor_permute(v, vs->perm, &w));
    ox_tensor_release(v);
    v = w;
  }
  if (vs->sdim >= 0 && v) {
    CHECK_OK(ox_tensor_slice(v, vs->sdim, vs->start, vs->stop, vs->step, &w));
    ox_tensor_release(v);
    v = w;
  }
  return v;
}

static void copy_case(int line, ox_device sdev, ox_device ddev, ox_stream s, ox_dtype t,
                      const view_spec *ss, const view_spec *ds) {
  size_t es = ox_dtype_size(t);
  int64_t sn = 1, dn = 1;
  for (int i = 0; i < ss->ndim; i++)
    sn *= ss->shape[i];
  for (int i = 0; i < ds->ndim; i++)
    dn *= ds->shape[i];
  unsigned char *sh = malloc((size_t)sn * es), *dh = calloc((size_t)dn, es);
  for (int64_t i = 0; i < sn * (int64_t)es; i++)
    sh[i] = (unsigned char)(i * 7 + i / 251);
  ox_tensor sb = NULL, db = NULL;
  CHECK_OK(ox_tensor_from_host(sdev, NULL, t, ss->ndim, ss->shape, sh, (size_t)sn * es, &sb));
  CHECK_OK(ox_tensor_zeros(ddev, NULL, t, ds->ndim, ds->shape, &db));
  if (!sb || !db)
    goto out;
  ox_tensor sv = make_view(sb, ss), dv = make_view(db, ds);
  if (sv && dv) {
    /* the reference: scatter src's elements into dst's base on the host */
    int64_t n = ox_tensor_numel(sv);
    unsigned char *vals = malloc((size_t)n * es + 1);
    gather(sh, es, ox_tensor_ndim(sv), ox_tensor_shape(sv), ox_tensor_strides(sv),
           ((char *)ox_tensor_data(sv) - (char *)ox_tensor_data(sb)) / (int64_t)es, vals);
    int64_t idx[OX_MAX_DIMS] = {0};
    int64_t doff = ((char *)ox_tensor_data(dv) - (char *)ox_tensor_data(db)) / (int64_t)es;
    for (int64_t k = 0; k < n; k++) {
      int64_t o = doff;
      for (int i = 0; i < ox_tensor_ndim(dv); i++)
        o += idx[i] * ox_tensor_strides(dv)[i];
      memcpy(dh + o * (int64_t)es, vals + k * (int64_t)es, es);
      for (int i = ox_tensor_ndim(dv) - 1; i >= 0; i--) {
        if (++idx[i] < ox_tensor_shape(dv)[i])
          break;
        idx[i] = 0;
      }
    }
    free(vals);
    CHECK_OK(ox_tensor_copy(dv, sv, s));
    if (s)
      CHECK_OK(ox_stream_synchronize(s));
    unsigned char *got = calloc((size_t)dn, es);
    CHECK_OK(ox_tensor_to_host(db, NULL, got, (size_t)dn * es));
    CHECK(!memcmp(got, dh, (size_t)dn * es), "line %d: copy %s -> %s of %s: wrong data", line,
          ox_device_name(sdev), ox_device_name(ddev), ox_dtype_name(t));
    free(got);
    /* ox_tensor_to gives the same elements, dense */
    ox_tensor c = NULL;
    CHECK_OK(ox_tensor_to(sv, ddev, s, &c));
    if (c) {
      CHECK(ox_tensor_is_contiguous(c) && ox_tensor_device(c) == ddev, "ox_tensor_to layout");
      unsigned char *a = read_all(c), *b = read_all(sv);
      CHECK(!memcmp(a, b, (size_t)n * es), "line %d: ox_tensor_to %s -> %s: wrong data", line,
            ox_device_name(sdev), ox_device_name(ddev));
      free(a);
      free(b);
    }
    ox_tensor_release(c);
  }
  ox_tensor_release(sv);
  ox_tensor_release(dv);
out:
  ox_tensor_release(sb);
  ox_tensor_release(db);
  free(sh);
  free(dh);
}

#define NOPERM {-1}
static void copies_between(ox_device a, ox_device b, ox_stream s) {
  const ox_dtype types[] = {OX_U8, OX_BF16, OX_F32, OX_F64, OX_F8E5M2, OX_BOOL, OX_I16};
  view_spec dense = {3, {4, 6, 10}, NOPERM, -1, 0, 0, 0};
  view_spec tr = {3, {10, 6, 4}, {2, 1, 0}, -1, 0, 0, 0};
  view_spec sl = {3, {4, 6, 25}, NOPERM, 2, 3, 23, 2};        /* [4, 6, 10], last dim stepped */
  view_spec trsl = {3, {8, 6, 10}, {0, 2, 1}, 0, 1, 8, 2};  /* [4, 10, 6] of a permute */
  view_spec trsl2 = {3, {4, 10, 7}, {0, 2, 1}, 1, 0, 6, 1}; /* [4, 6, 10] */
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    ox_dtype t = types[i];
    copy_case(__LINE__, a, b, s, t, &sl, &dense);   /* strided -> dense */
    copy_case(__LINE__, a, b, s, t, &dense, &sl);   /* dense -> strided */
    copy_case(__LINE__, a, b, s, t, &dense, &dense); /* dense -> dense */
    copy_case(__LINE__, a, b, s, t, &trsl2, &sl);   /* strided -> strided */
  }
  copy_case(__LINE__, a, b, s, OX_F32, &tr, &trsl2);
  copy_case(__LINE__, a, b, s, OX_I64, &trsl2, &tr);
  view_spec trsl3 = {3, {8, 10, 6}, {0, 1, 2}, 0, 1, 8, 2};
  copy_case(__LINE__, a, b, s, OX_I32, &trsl, &trsl3);
  /* 8 dimensions that cannot be merged: every offset term of the kernel */
  view_spec d8 = {8, {2, 3, 2, 2, 3, 2, 2, 3}, {7, 6, 5, 4, 3, 2, 1, 0}, -1, 0, 0, 0};
  view_spec d8b = {8, {3, 2, 2, 3, 2, 2, 3, 2}, NOPERM, -1, 0, 0, 0};
  copy_case(__LINE__, a, b, s, OX_U16, &d8, &d8b);
  copy_case(__LINE__, a, b, s, OX_U16, &d8b, &d8);
}

static void test_copies(void) {
  ox_device devs[3] = {cpu, NULL, NULL};
  int nd = 1, ncuda = 0;
  if (ox_device_get_type(dev) == OX_DEVICE_CUDA) {
    devs[nd++] = dev;
    CHECK_OK(ox_device_count(OX_DEVICE_CUDA, &ncuda));
    if (ncuda > 1)
      CHECK_OK(ox_device_get(OX_DEVICE_CUDA, 1, &devs[nd++]));
  }
  for (int i = 0; i < nd; i++)
    for (int j = 0; j < nd; j++)
      if (devs[i] && devs[j])
        copies_between(devs[i], devs[j], NULL);
  if (nd > 1) { /* on a stream of its own */
    ox_stream s = NULL;
    CHECK_OK(ox_stream_create(dev, &s));
    view_spec dense = {2, {33, 17}, NOPERM, -1, 0, 0, 0}, tr = {2, {17, 33}, {1, 0}, -1, 0, 0, 0};
    copy_case(__LINE__, dev, dev, s, OX_F32, &tr, &dense);
    copy_case(__LINE__, cpu, dev, s, OX_F32, &tr, &tr);
    ox_stream_destroy(s);
  }

  /* overlapping source and destination: as if through a temporary */
  int32_t host[64], want[64], got[64];
  ox_tensor x = iota_i32(dev, 1, ((int64_t[]){64}), host), a = NULL, b = NULL;
  CHECK_OK(ox_tensor_slice(x, 0, 1, 64, 1, &a));
  CHECK_OK(ox_tensor_slice(x, 0, 0, 63, 1, &b));
  CHECK_OK(ox_tensor_copy(a, b, NULL)); /* x[1:] = x[:-1] */
  for (int i = 0; i < 64; i++)
    want[i] = i ? i - 1 : 0;
  CHECK_OK(ox_tensor_to_host(x, NULL, got, sizeof got));
  CHECK(!memcmp(got, want, sizeof got), "overlapping copy");
  ox_tensor_release(a);
  ox_tensor_release(b);
  CHECK_OK(ox_tensor_slice(x, 0, 0, 64, 2, &a));
  CHECK_OK(ox_tensor_slice(x, 0, 1, 64, 2, &b));
  CHECK_OK(ox_tensor_copy(a, b, NULL)); /* x[0::2] = x[1::2]: interleaved */
  for (int i = 0; i < 64; i += 2)
    want[i] = want[i + 1];
  CHECK_OK(ox_tensor_to_host(x, NULL, got, sizeof got));
  CHECK(!memcmp(got, want, sizeof got), "interleaved copy");
  CHECK_OK(ox_tensor_copy(a, a, NULL)); /* onto itself */
  CHECK_OK(ox_tensor_to_host(x, NULL, got, sizeof got));
  CHECK(!memcmp(got, want, sizeof got), "copy onto itself");
  ox_tensor_release(a);
  ox_tensor_release(b);
  /* a transpose in place of a square matrix: fully overlapping */
  ox_tensor m = NULL;
  CHECK_OK(ox_tensor_reshape(x, 2, ((int64_t[]){8, 8}), &m));
  CHECK_OK(ox_tensor_transpose(m, 0, 1, &a));
  CHECK_OK(ox_tensor_copy(m, a, NULL));
  CHECK_OK(ox_tensor_to_host(x, NULL, got, sizeof got));
  int bad = 0;
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 8; j++)
      bad += got[i * 8 + j] != want[j * 8 + i];
  CHECK(bad == 0, "in-place transpose: %d wrong", bad);
  ox_tensor_release(a);

  /* broadcast source */
  int32_t h8[8];
  ox_tensor col = iota_i32(dev, 2, ((int64_t[]){1, 8}), h8);
  CHECK_OK(ox_tensor_broadcast_to(col, 2, ((int64_t[]){8, 8}), &a));
  CHECK_OK(ox_tensor_copy(m, a, NULL));
  CHECK_OK(ox_tensor_to_host(x, NULL, got, sizeof got));
  bad = 0;
  for (int i = 0; i < 64; i++)
    bad += got[i] != i % 8;
  CHECK(bad == 0, "broadcast copy: %d wrong", bad);
  ox_tensor_release(a);
  ox_tensor_release(col);

  /* errors */
  ox_tensor f = NULL, e = NULL, e2 = NULL;
  CHECK_OK(ox_tensor_zeros(dev, NULL, OX_F32, 2, ((int64_t[]){8, 8}), &f));
  CHECK_ERR(ox_tensor_copy(m, f, NULL), OX_ERR_INVALID_ARGUMENT, "dst is i32 but src is f32");
  CHECK_ERR(ox_tensor_copy(m, x, NULL), OX_ERR_INVALID_ARGUMENT,
            "dst has shape [8, 8] but src has shape [64]");
  CHECK_OK(ox_tensor_zeros(dev, NULL, OX_I32, 2, ((int64_t[]){0, 8}), &e)); /* empty copies */
  CHECK_OK(ox_tensor_zeros(cpu, NULL, OX_I32, 2, ((int64_t[]){0, 8}), &e2));
  CHECK_OK(ox_tensor_copy(e, e2, NULL));
  CHECK_OK(ox_tensor_copy(e2, e, NULL));
  ox_tensor_release(e);
  ox_tensor_release(e2);
  e = NULL;
  CHECK_OK(ox_tensor_to(x, cpu, NULL, &e));
  if (e && ox_device_get_type(dev) == OX_DEVICE_CUDA) {
    /* a copy to the GPU is ordered on a GPU stream */
    ox_stream cs = NULL;
    CHECK_OK(ox_device_stream(cpu, &cs));
    CHECK_ERR(ox_tensor_copy(x, e, cs), OX_ERR_INVALID_ARGUMENT, "stream of the destination's device");
    CHECK_ERR(ox_tensor_to(e, dev, cs, &e2), OX_ERR_INVALID_ARGUMENT, "the stream belongs to device cpu");
    ox_stream gs = NULL; /* and one to the CPU from a GPU on a stream of that GPU */
    CHECK_OK(ox_device_stream(dev, &gs));
    CHECK_OK(ox_tensor_copy(e, x, gs));
  }
  ox_tensor_release(e);
  ox_tensor_release(f);
  ox_tensor_release(m);
  ox_tensor_release(x);
}

int main(int argc, char **argv) {
  const char *devname = argc > 1 ? argv[1] : "cpu";
  CHECK_OK(ox_device_get(OX_DEVICE_CPU, 0, &cpu));
  if (!strcmp(devname, "cpu"))
    dev = cpu;
  else
    CHECK_OK(ox_device_get(OX_DEVICE_CUDA, 0, &dev));
  if (!dev || !cpu)
    return test_done("tensor_test");
  test_views();
  test_handles();
  test_fill();
  test_arange();
  test_copies();
  return test_done("tensor_test");
}
