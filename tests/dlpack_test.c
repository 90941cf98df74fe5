/* dlpack_test - DLPack import and export on one device (argv[1]: "cpu" or
 * "cuda"): every hostile input refused with its status and message and the
 * producer's deleter run exactly once, round trips of both formats (strided
 * views, 0-d and empty tensors), READ_ONLY and IS_COPIED, the deleter's
 * timing with views alive, and (CUDA) the stream rule. */
#include <stdbool.h>
#include <stdlib.h>

#include "../dlpack/dlpack.h"
#include "check.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static ox_device dev, cpu;
static bool cuda;

/* ------------------------------------------------------------ a producer */

/* A managed tensor made by "another library": one heap block (so that ASan
 * sees a double delete or a leak) with its shape and strides, whose deleter
 * counts its calls and releases the Oxide tensor lending the memory. */
typedef struct producer {
  DLManagedTensorVersioned v; /* first: the deleter's argument is the block */
  DLManagedTensor l;
  int64_t shape[OX_MAX_DIMS + 2], strides[OX_MAX_DIMS + 2];
  ox_tensor backing;
} producer;

static int deleted; /* deleter calls since the last reset */

static void delete_v(DLManagedTensorVersioned *m) {
  deleted++;
  producer *p = (producer *)m;
  ox_tensor_release(p->backing);
  free(p);
}
static void delete_l(DLManagedTensor *m) {
  deleted++;
  producer *p = (producer *)((char *)m - offsetof(producer, l));
  ox_tensor_release(p->backing);
  free(p);
}

/* A versioned (`ver` 1) or legacy (0) f32 tensor over `backing`'s memory
 * (retained; may be NULL) with the given shape and strides (NULL: none). */
static producer *produce(ox_tensor backing, DLDataType dt, int ndim, const int64_t *shape,
                         const int64_t *strides) {
  producer *p = calloc(1, sizeof *p);
  for (int i = 0; i < ndim && i < OX_MAX_DIMS + 2; i++) {
    p->shape[i] = shape[i];
    p->strides[i] = strides ? strides[i] : 0;
  }
  if (backing)
    ox_tensor_retain(backing);
  p->backing = backing;
  DLTensor t = {.data = backing ? ox_tensor_data(backing) : NULL,
                .device = {cuda ? kDLCUDA : kDLCPU, 0},
                .ndim = ndim,
                .dtype = dt,
                .shape = ndim ? p->shape : NULL,
                .strides = strides ? p->strides : NULL};
  p->v = (DLManagedTensorVersioned){.version = {1, 1}, .deleter = delete_v, .dl_tensor = t};
  p->l = (DLManagedTensor){.dl_tensor = t, .deleter = delete_l};
  return p;
}

static const DLDataType F32 = {kDLFloat, 32, 1};

/* Imports p in format `ver` (the other format's half is freed with it). */
static ox_status take(producer *p, int ver, ox_tensor *out) {
  if (!ver) { /* only the legacy half travels: drop the versioned one's deleter */
    p->v.deleter = NULL;
    return ox_tensor_from_dlpack(&p->l, 0, out);
  }
  return ox_tensor_from_dlpack(&p->v, 1, out);
}

/* A contiguous f32 tensor holding 0, 1, 2, ... */
static ox_tensor seq(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= shape[i];
  float *h = malloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; i++)
    h[i] = (float)i;
  ox_tensor x = NULL;
  CHECK_OK(ox_tensor_from_host(dev, NULL, OX_F32, ndim, shape, h, (size_t)n * sizeof(float), &x));
  free(h);
  return x;
}

/* The elements of `t` (any device and strides) as floats in row-major order. */
static int values(ox_tensor t, float *out, int max) {
  ox_tensor h = NULL;
  CHECK_OK(ox_tensor_to(t, cpu, NULL, &h));
  if (!h)
    return -1;
  int n = (int)ox_tensor_numel(h);
  if (n <= max)
    memcpy(out, ox_tensor_data(h), (size_t)n * sizeof(float));
  ox_tensor_release(h);
  return n;
}

/* ------------------------------------------------------- hostile inputs */

/* Imports p (format ver) expecting `status` with `needle`, the deleter run once. */
#define REFUSED(p, ver, status, needle)                                                            \
  do {                                                                                             \
    deleted = 0;                                                                                   \
    ox_tensor out_ = (ox_tensor)(uintptr_t)1;                                                      \
    CHECK_ERR(take(p, ver, &out_), status, needle);                                                \
    CHECK(out_ == NULL, "out not cleared");                                                        \
    CHECK(deleted == 1, "%s: deleter ran %d times, expected once", needle, deleted);               \
  } while (0)

static void test_hostile(void) {
  int64_t n4 = 4, sh[2] = {2, 3}, neg[2] = {3, -1};
  ox_tensor mem = seq(1, (int64_t[]){64});
  for (int ver = 0; ver <= 1; ver++) {
    producer *p = produce(NULL, F32, 1, &n4, NULL);
    REFUSED(p, ver, OX_ERR_INVALID_ARGUMENT, "data is NULL but the tensor has 4 elements");
    REFUSED(produce(mem, F32, 2, sh, neg), ver, OX_ERR_UNSUPPORTED,
            "strides[1] is -1; negative strides are not supported");
    REFUSED(produce(mem, (DLDataType){99, 32, 1}, 1, &n4, NULL), ver, OX_ERR_UNSUPPORTED,
            "DLPack dtype code 99 (unknown) with 32 bits has no Oxide dtype");
    REFUSED(produce(mem, (DLDataType){kDLFloat, 32, 4}, 1, &n4, NULL), ver, OX_ERR_UNSUPPORTED,
            "vector dtypes are not supported (float32 with 4 lanes)");
    REFUSED(produce(mem, (DLDataType){kDLComplex, 64, 1}, 1, &n4, NULL), ver, OX_ERR_UNSUPPORTED,
            "code 5 (complex) with 64 bits has no Oxide dtype");
    REFUSED(produce(mem, (DLDataType){kDLFloat, 8, 1}, 1, &n4, NULL), ver, OX_ERR_UNSUPPORTED,
            "code 2 (float) with 8 bits");
    REFUSED(produce(mem, (DLDataType){kDLFloat8_e4m3, 8, 1}, 1, &n4, NULL), ver, OX_ERR_UNSUPPORTED,
            "(float8_e4m3) with 8 bits"); /* not the fn variant Oxide has */
    /* tf32's empty entry in the dtype table matches nothing */
    REFUSED(produce(mem, (DLDataType){kDLInt, 0, 1}, 1, &n4, NULL), ver, OX_ERR_UNSUPPORTED,
            "DLPack dtype code 0 (int) with 0 bits has no Oxide dtype");
    static const struct {
      int type;
      const char *msg;
    } devs[] = {
        {kDLCUDAHost, "CUDA pinned host memory (DLPack device type 3) is not supported yet"},
        {kDLCUDAManaged, "CUDA managed memory (DLPack device type 13) is not supported yet"},
        {kDLVulkan, "DLPack device type 7 is not supported"},
        {-3, "DLPack device type -3 is not supported"}};
    for (size_t i = 0; i < COUNT(devs); i++) {
      p = produce(mem, F32, 1, &n4, NULL);
      p->v.dl_tensor.device.device_type = p->l.dl_tensor.device.device_type = devs[i].type;
      REFUSED(p, ver, OX_ERR_UNSUPPORTED, devs[i].msg);
    }
    p = produce(mem, F32, 1, &n4, NULL);
    p->v.dl_tensor.device = p->l.dl_tensor.device = (DLDevice){kDLCUDA, 99};
    REFUSED(p, ver, OX_ERR_NO_DEVICE, "the tensor is on CUDA device 99");
    /* a byte offset of half an element, and a first element off its alignment */
    p = produce(mem, F32, 1, &n4, NULL);
    p->v.dl_tensor.byte_offset = p->l.dl_tensor.byte_offset = 2;
    REFUSED(p, ver, OX_ERR_INVALID_ARGUMENT,
            "byte_offset 2 is not a multiple of the f32 element size 4");
    p = produce(mem, F32, 1, &n4, NULL);
    p->v.dl_tensor.data = p->l.dl_tensor.data = (char *)ox_tensor_data(mem) + 1;
    REFUSED(p, ver, OX_ERR_INVALID_ARGUMENT, "is not aligned to the f32 element size 4");
    p = produce(mem, F32, 1, &n4, NULL);
    p->v.dl_tensor.byte_offset = p->l.dl_tensor.byte_offset = UINT64_MAX - 3;
    REFUSED(p, ver, OX_ERR_INVALID_ARGUMENT, "plus the tensor's span overflows");
    /* sizes whose byte count overflows, with and without strides */
    int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40}, big = INT64_C(1) << 62;
    REFUSED(produce(mem, F32, 2, huge, NULL), ver, OX_ERR_INVALID_ARGUMENT, "byte size overflows");
    REFUSED(produce(mem, F32, 1, &big, NULL), ver, OX_ERR_INVALID_ARGUMENT, "byte size overflows");
    int64_t one = INT64_C(1) << 40, far = INT64_C(1) << 40;
    REFUSED(produce(mem, F32, 1, &one, &far), ver, OX_ERR_INVALID_ARGUMENT, "the strides overflow");
    /* even an empty tensor's shape is bounded */
    int64_t empty_huge[3] = {0, INT64_C(1) << 40, INT64_C(1) << 40};
    REFUSED(produce(NULL, F32, 3, empty_huge, NULL), ver, OX_ERR_INVALID_ARGUMENT,
            "byte size overflows");
    int64_t bad_shape[2] = {3, -2};
    REFUSED(produce(mem, F32, 2, bad_shape, NULL), ver, OX_ERR_INVALID_ARGUMENT,
            "shape[1] is -2; dimensions must be >= 0");
    p = produce(mem, F32, 2, sh, NULL);
    p->v.dl_tensor.shape = p->l.dl_tensor.shape = NULL;
    REFUSED(p, ver, OX_ERR_INVALID_ARGUMENT, "shape is NULL with ndim 2");
    p = produce(mem, F32, 1, &n4, NULL);
    p->v.dl_tensor.ndim = p->l.dl_tensor.ndim = -1;
    REFUSED(p, ver, OX_ERR_INVALID_ARGUMENT, "ndim is -1");
    int64_t ones[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    REFUSED(produce(mem, F32, 9, ones, NULL), ver, OX_ERR_UNSUPPORTED,
            "the tensor has 9 dimensions; Oxide supports at most 8");
    /* out NULL: Oxide still owns the tensor, so the deleter runs */
    deleted = 0;
    CHECK_ERR(take(produce(mem, F32, 1, &n4, NULL), ver, NULL), OX_ERR_INVALID_ARGUMENT,
              "out is NULL");
    CHECK(deleted == 1, "out NULL: deleter ran %d times", deleted);
  }
  /* a newer major version: the deleter runs and nothing else is read (the
   * rest is garbage that would crash if touched) */
  producer *p = produce(mem, F32, 1, &n4, NULL);
  p->v.version = (DLPackVersion){2, 0};
  p->v.dl_tensor.ndim = 5;
  p->v.dl_tensor.shape = (int64_t *)(uintptr_t)8;
  p->v.dl_tensor.dtype = (DLDataType){kDLFloat, 32, 1};
  REFUSED(p, 1, OX_ERR_UNSUPPORTED, "the tensor has DLPack version 2.0; Oxide speaks 1.1");
  p = produce(mem, F32, 1, &n4, NULL);
  p->v.version = (DLPackVersion){0, 8};
  REFUSED(p, 1, OX_ERR_UNSUPPORTED, "DLPack version 0.8");
  /* a newer minor version only adds enumerators: accepted */
  p = produce(mem, F32, 1, &n4, NULL);
  p->v.version.minor = 7;
  ox_tensor t = NULL;
  deleted = 0;
  CHECK_OK(take(p, 1, &t));
  ox_tensor_release(t);
  CHECK(deleted == 1, "deleter ran %d times", deleted);
  CHECK_ERR(ox_tensor_from_dlpack(NULL, 1, &t), OX_ERR_INVALID_ARGUMENT, "managed is NULL");
  /* no deleter at all (the producer frees nothing): fine */
  DLManagedTensor bare = {.dl_tensor = {.data = ox_tensor_data(mem),
                                        .device = {cuda ? kDLCUDA : kDLCPU, 0},
                                        .ndim = 1,
                                        .dtype = F32,
                                        .shape = &n4}};
  CHECK_OK(ox_tensor_from_dlpack(&bare, 0, &t));
  CHECK(t && ox_tensor_numel(t) == 4, "bare import");
  ox_tensor_release(t);
  ox_tensor_release(mem);
}

/* Layouts that lie: sizes and strides whose byte extent overflows int64 or
 * reaches past any address space (2^57 bytes), negative strides far below
 * the data, huge byte offsets. Each is refused at import, naming what
 * overflows, before anything computes with it; one honest huge layout (a
 * broadcast of 2^62 elements) is accepted and handled. */
static void test_hostile_layouts(void) {
  const DLDataType U8 = {kDLUInt, 8, 1};
  const int64_t P56 = INT64_C(1) << 56, P61 = INT64_C(1) << 61, P62 = INT64_C(1) << 62;
  ox_tensor mem = seq(1, (int64_t[]){64});
  for (int ver = 0; ver <= 1; ver++) {
    int64_t s22[2] = {2, 2}, lie[2] = {P61, P62};
    REFUSED(produce(mem, F32, 2, s22, lie), ver, OX_ERR_INVALID_ARGUMENT,
            "the strides overflow the address range: dimension 0 (size 2, stride "
            "2305843009213693952, of 4-byte f32 elements)");
    /* 1-byte elements: the extent fits int64 but no address space */
    REFUSED(produce(mem, U8, 2, s22, lie), ver, OX_ERR_INVALID_ARGUMENT,
            "dimension 0 (size 2, stride 2305843009213693952, of 1-byte u8 elements) spans 2^57 "
            "bytes or more");
    /* a stride times its size overflows int64 */
    int64_t s25[2] = {2, 5}, big[2] = {1, P62}, s3 = 3, max = INT64_MAX;
    REFUSED(produce(mem, U8, 2, s25, big), ver, OX_ERR_INVALID_ARGUMENT,
            "dimension 1 (size 5, stride 4611686018427387904");
    REFUSED(produce(mem, F32, 1, &s3, &max), ver, OX_ERR_INVALID_ARGUMENT,
            "dimension 0 (size 3, stride 9223372036854775807");
    /* each dimension fits; together they do not */
    int64_t both[2] = {P56, P56};
    REFUSED(produce(mem, U8, 2, s22, both), ver, OX_ERR_INVALID_ARGUMENT,
            "with dimension 1 (size 2, stride 72057594037927936) the tensor spans more than 2^57");
    /* negative strides reaching more than 2^63 bytes below the data */
    int64_t s23[2] = {2, 3}, low[2] = {INT64_MIN, 1}, n62 = -P62, s2 = 2;
    REFUSED(produce(mem, F32, 2, s23, low), ver, OX_ERR_UNSUPPORTED,
            "strides[0] is -9223372036854775808; negative strides are not supported");
    REFUSED(produce(mem, F32, 1, &s2, &n62), ver, OX_ERR_UNSUPPORTED,
            "strides[0] is -4611686018427387904; negative strides are not supported");
    /* a dimension of 2^62 among 3 */
    int64_t d62[3] = {1, P62, 1}, d62b[3] = {P62, 2, 2};
    REFUSED(produce(mem, F32, 3, d62, NULL), ver, OX_ERR_INVALID_ARGUMENT, "byte size overflows");
    REFUSED(produce(mem, U8, 3, d62b, NULL), ver, OX_ERR_INVALID_ARGUMENT, "byte size overflows");
    REFUSED(produce(mem, U8, 3, d62, NULL), ver, OX_ERR_INVALID_ARGUMENT,
            "dimension 1 (size 4611686018427387904, stride 1, of 1-byte u8 elements)");
    /* huge byte offsets, with elements and without */
    static const uint64_t offs[] = {UINT64_C(1) << 62, UINT64_C(1) << 63, INT64_MAX - 3,
                                    UINT64_MAX - 7};
    int64_t n4 = 4, n0 = 0;
    for (size_t i = 0; i < COUNT(offs); i++) {
      for (int e = 0; e <= 1; e++) {
        producer *p = produce(mem, F32, 1, e ? &n0 : &n4, NULL);
        p->v.dl_tensor.byte_offset = p->l.dl_tensor.byte_offset = offs[i];
        REFUSED(p, ver, OX_ERR_INVALID_ARGUMENT, "plus the tensor's span overflows");
      }
    }
    /* honest: 2^62 elements broadcast from one byte (0x3f, of 1.0f), read-only */
    int64_t wide[3] = {P62, 1, 1}, bst[3] = {0, 1, 1};
    producer *p = produce(mem, U8, 3, wide, bst);
    p->v.dl_tensor.byte_offset = p->l.dl_tensor.byte_offset = 7;
    ox_tensor t = NULL, r = NULL, sl = NULL, h = NULL;
    CHECK_OK(take(p, ver, &t));
    CHECK(t && ox_tensor_numel(t) == P62 && ox_tensor_is_read_only(t), "a 2^62-element broadcast");
    if (t) {
      CHECK_OK(ox_tensor_reshape(t, 2, (int64_t[]){P61, 2}, &r));
      const int64_t *rs = r ? ox_tensor_strides(r) : NULL;
      CHECK(rs && rs[0] == 0 && rs[1] == 0, "strides of the reshaped broadcast");
      CHECK_OK(ox_tensor_slice(t, 0, P62 - 3, P62, 1, &sl));
      if (sl)
        CHECK_OK(ox_tensor_to(sl, cpu, NULL, &h));
      const unsigned char *b = h ? ox_tensor_data(h) : NULL;
      CHECK(b && ox_tensor_numel(h) == 3 && b[0] == 0x3f && b[1] == 0x3f && b[2] == 0x3f,
            "the broadcast's last 3 elements");
    }
    ox_tensor_release(h);
    ox_tensor_release(sl);
    ox_tensor_release(r);
    ox_tensor_release(t);
  }
  ox_tensor_release(mem);
}

/* ------------------------------------------------------ overlapping copies */

/* Two views of one buffer that overlap: the copy goes through a temporary,
 * and gives what reading all of src first gives. */
static void test_overlapping_copies(void) {
  float v[16];
  for (int dir = 0; dir <= 1; dir++) { /* shift right by one, then left */
    ox_tensor mem = seq(1, (int64_t[]){10}), a = NULL, b = NULL;
    CHECK_OK(ox_tensor_slice(mem, 0, 1, 9, 1, &a)); /* elements 1..8 */
    CHECK_OK(ox_tensor_slice(mem, 0, 0, 8, 1, &b)); /* elements 0..7 */
    if (a && b)
      CHECK_OK(dir ? ox_tensor_copy(b, a, NULL) : ox_tensor_copy(a, b, NULL));
    static const float right[10] = {0, 0, 1, 2, 3, 4, 5, 6, 7, 9};
    static const float left[10] = {1, 2, 3, 4, 5, 6, 7, 8, 8, 9};
    CHECK(values(mem, v, 16) == 10 && !memcmp(v, dir ? left : right, sizeof right),
          "overlapping shift %d: %g %g %g ... %g %g", dir, v[0], v[1], v[2], v[8], v[9]);
    ox_tensor_release(a);
    ox_tensor_release(b);
    ox_tensor_release(mem);
  }
  /* a matrix onto its own transpose: every element but the diagonal moves */
  ox_tensor m = seq(2, (int64_t[]){4, 4}), tr = NULL;
  CHECK_OK(ox_tensor_transpose(m, 0, 1, &tr));
  if (tr)
    CHECK_OK(ox_tensor_copy(m, tr, NULL));
  bool ok = values(m, v, 16) == 16;
  for (int i = 0; i < 16 && ok; i++)
    ok = v[i] == (float)(i % 4 * 4 + i / 4);
  CHECK(ok, "in-place transpose: %g %g %g %g", v[0], v[1], v[2], v[3]);
  ox_tensor_release(tr);
  ox_tensor_release(m);
}

/* A source whose rows lie in two far-apart buffers (a global and a stack
 * array): its claimed extent takes in the heap between them, so it overlaps
 * every new tensor, the temporary too. The copy stops at that one
 * temporary with a clear error (it used to recurse until the stack
 * overflowed); so does a copy into such a layout, and dst is left alone. */
static _Alignas(64) float far_low[4] = {10, 11, 12, 13};

static void test_lying_extent(void) {
  _Alignas(64) float far_high[4] = {20, 21, 22, 23};
  /* addresses as integers: C compares pointers into one object only */
  uintptr_t a = (uintptr_t)far_low, b = (uintptr_t)far_high, lo = a < b ? a : b, hi = a ^ b ^ lo;
  int64_t shape[2] = {2, 4}, strides[2] = {(int64_t)((hi - lo) / sizeof(float)), 1};
  DLManagedTensorVersioned m = {.version = {1, 1},
                                .dl_tensor = {.data = (void *)lo,
                                              .device = {kDLCPU, 0},
                                              .ndim = 2,
                                              .dtype = F32,
                                              .shape = shape,
                                              .strides = strides}};
  ox_tensor liar = NULL, dst = NULL, good = NULL, out = NULL;
  CHECK_OK(ox_tensor_from_dlpack(&m, 1, &liar));
  CHECK_OK(ox_tensor_zeros(cpu, NULL, OX_F32, 2, shape, &dst));
  CHECK_OK(ox_tensor_full(cpu, NULL, OX_F32, 2, shape, 5.0, &good));
  if (liar && dst && good) {
    /* what makes this case: the new tensors lie inside the liar's extent */
    CHECK(lo < (uintptr_t)ox_tensor_data(dst) && (uintptr_t)ox_tensor_data(dst) < hi,
          "dst %p is not between %p and %p; the test needs it there", ox_tensor_data(dst),
          (void *)lo, (void *)hi);
    CHECK_ERR(ox_tensor_copy(dst, liar, NULL), OX_ERR_INVALID_ARGUMENT,
              "the source (shape [2, 4], strides [");
    CHECK(strstr(ox_last_error(), "across memory it does not own"), "%s", ox_last_error());
    const float *d = ox_tensor_data(dst);
    CHECK(d[0] == 0 && d[7] == 0, "dst written by a refused copy: %g %g", d[0], d[7]);
    CHECK_ERR(ox_tensor_to(liar, cpu, NULL, &out), OX_ERR_INVALID_ARGUMENT,
              "across memory it does not own");
    CHECK(out == NULL, "out set by a refused copy");
    CHECK_ERR(ox_tensor_copy(liar, good, NULL), OX_ERR_INVALID_ARGUMENT, "the destination (shape");
    CHECK(far_low[0] == 10 && far_high[3] == 23, "the liar's memory written by a refused copy");
  }
  ox_tensor_release(good);
  ox_tensor_release(dst);
  ox_tensor_release(liar);
}

/* --------------------------------------------------------------- imports */

static void test_import_layouts(void) {
  ox_tensor mem = seq(1, (int64_t[]){24});
  float v[64];
  for (int ver = 0; ver <= 1; ver++) {
    /* NULL strides: compact row-major */
    int64_t sh[3] = {2, 3, 4};
    ox_tensor t = NULL;
    deleted = 0;
    CHECK_OK(take(produce(mem, F32, 3, sh, NULL), ver, &t));
    if (t) {
      const int64_t *st = ox_tensor_strides(t);
      CHECK(st[0] == 12 && st[1] == 4 && st[2] == 1, "strides %lld %lld %lld", (long long)st[0],
            (long long)st[1], (long long)st[2]);
      CHECK(ox_tensor_is_contiguous(t) && !ox_tensor_is_read_only(t), "flags");
      CHECK(ox_tensor_data(t) == ox_tensor_data(mem), "not zero-copy");
      CHECK(values(t, v, 64) == 24 && v[23] == 23.0f, "values");
    }
    ox_tensor_release(t);
    CHECK(deleted == 1, "deleter ran %d times", deleted);

    /* a strided view from the producer: the transpose of a 4x6, starting one
     * row in (byte_offset), every other column */
    int64_t vs[2] = {3, 3}, vst[2] = {2, 6};
    producer *p = produce(mem, F32, 2, vs, vst);
    p->v.dl_tensor.byte_offset = p->l.dl_tensor.byte_offset = 6 * sizeof(float);
    CHECK_OK(take(p, ver, &t));
    if (t) {
      CHECK(!ox_tensor_is_contiguous(t) && !ox_tensor_is_read_only(t), "flags of a strided view");
      CHECK(values(t, v, 64) == 9, "count");
      static const float want[9] = {6, 12, 18, 8, 14, 20, 10, 16, 22};
      CHECK(memcmp(v, want, sizeof want) == 0, "strided values %g %g %g %g", v[0], v[1], v[2],
            v[3]);
    }
    ox_tensor_release(t);

    /* 0-d: no shape, no strides, one element */
    CHECK_OK(take(produce(mem, F32, 0, NULL, NULL), ver, &t));
    if (t) {
      CHECK(ox_tensor_ndim(t) == 0 && ox_tensor_numel(t) == 1 && ox_tensor_nbytes(t) == 4, "0-d");
      CHECK(values(t, v, 64) == 1 && v[0] == 0.0f, "0-d value");
    }
    ox_tensor_release(t);

    /* empty, without memory */
    int64_t es[2] = {0, 5};
    deleted = 0;
    CHECK_OK(take(produce(NULL, F32, 2, es, NULL), ver, &t));
    CHECK(t && ox_tensor_numel(t) == 0 && ox_tensor_nbytes(t) == 0, "empty");
    ox_tensor_release(t);
    CHECK(deleted == 1, "empty: deleter ran %d times", deleted);

    /* broadcast (stride 0) and interleaved strides reach one element twice:
     * imported read-only, as Oxide's own broadcast views are */
    int64_t bs[2] = {3, 4}, bst[2] = {0, 1}, ost[2] = {1, 1};
    CHECK_OK(take(produce(mem, F32, 2, bs, bst), ver, &t));
    CHECK(t && ox_tensor_is_read_only(t), "a broadcast import must be read-only");
    ox_tensor_release(t);
    CHECK_OK(take(produce(mem, F32, 2, bs, ost), ver, &t));
    CHECK(t && ox_tensor_is_read_only(t), "an overlapping import must be read-only");
    ox_tensor_release(t);
    /* size-1 dimensions may have any stride */
    int64_t s1[3] = {1, 4, 1}, s1st[3] = {0, 1, 12345};
    CHECK_OK(take(produce(mem, F32, 3, s1, s1st), ver, &t));
    CHECK(t && !ox_tensor_is_read_only(t) && ox_tensor_is_contiguous(t), "size-1 strides");
    ox_tensor_release(t);
  }

  /* every dtype maps both ways (but tf32, which no tensor holds) */
  static const DLDataType dts[] = {
      {kDLBool, 8, 1},   {kDLInt, 8, 1},           {kDLInt, 16, 1},       {kDLInt, 32, 1},
      {kDLInt, 64, 1},   {kDLUInt, 8, 1},          {kDLUInt, 16, 1},      {kDLUInt, 32, 1},
      {kDLUInt, 64, 1},  {kDLFloat, 16, 1},        {kDLBfloat, 16, 1},    {kDLFloat, 32, 1},
      {kDLFloat, 64, 1}, {kDLFloat8_e4m3fn, 8, 1}, {kDLFloat8_e5m2, 8, 1}};
  static const ox_dtype oxt[] = {OX_BOOL, OX_I8,  OX_I16, OX_I32,    OX_I64,
                                 OX_U8,   OX_U16, OX_U32, OX_U64,    OX_F16,
                                 OX_BF16, OX_F32, OX_F64, OX_F8E4M3, OX_F8E5M2};
  int64_t two = 2;
  for (size_t i = 0; i < COUNT(dts); i++) {
    ox_tensor t = NULL;
    void *back = NULL;
    CHECK_OK(take(produce(mem, dts[i], 1, &two, NULL), 1, &t));
    CHECK(t && ox_tensor_dtype(t) == oxt[i], "dtype %zu", i);
    if (t)
      CHECK_OK(ox_tensor_to_dlpack(t, NULL, 1, &back));
    if (back) {
      DLDataType d = ((DLManagedTensorVersioned *)back)->dl_tensor.dtype;
      CHECK(d.code == dts[i].code && d.bits == dts[i].bits && d.lanes == 1, "export dtype %zu", i);
      ((DLManagedTensorVersioned *)back)->deleter(back);
    }
    ox_tensor_release(t);
  }
  ox_tensor_release(mem);
}

/* ------------------------------------------- flags, lifetime, round trips */

/* The DLPack flags of t exported again (versioned). */
static uint64_t export_flags(ox_tensor t) {
  void *m = NULL;
  if (ox_tensor_to_dlpack(t, NULL, 1, &m) != OX_OK)
    return ~0ull;
  DLManagedTensorVersioned *v = m;
  uint64_t f = v->flags;
  v->deleter(v);
  return f;
}

static const char *KERNEL = "#[kernel]\n"
                            "fn twice(a: &[f32], c: DisjointSlice<f32>) {\n"
                            "    let i = thread::index_1d();\n"
                            "    if let Some(out) = c.get_mut(i) { *out = 2.0 * a[i]; }\n"
                            "}\n";

static void test_flags(void) {
  int64_t n = 8;
  ox_tensor mem = seq(1, &n), dst = NULL;
  CHECK_OK(ox_tensor_zeros(dev, NULL, OX_F32, 1, &n, &dst));
  ox_module m = NULL;
  ox_kernel k = NULL;
  ox_compile_options o = {.filename = "dl.oxk"};
  CHECK_OK(ox_module_compile(dev, KERNEL, &o, &m));
  if (m)
    CHECK_OK(ox_module_get_kernel(m, "twice", &k));
  ox_launch_config cfg = {{1, 1, 1}, {8, 1, 1}};

  producer *p = produce(mem, F32, 1, &n, NULL);
  p->v.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  ox_tensor ro = NULL;
  CHECK_OK(take(p, 1, &ro));
  CHECK(ro && ox_tensor_is_read_only(ro) && !(export_flags(ro) & DLPACK_FLAG_BITMASK_IS_COPIED), "READ_ONLY import");
  if (k && ro) {
    ox_arg bad[2] = {ox_arg_tensor(mem), ox_arg_tensor(ro)};
    CHECK_ERR(ox_launch(k, NULL, &cfg, bad, 2), OX_ERR_INVALID_ARGUMENT, "read-only");
    ox_arg good[2] = {ox_arg_tensor(ro), ox_arg_tensor(dst)}; /* reading it is fine */
    CHECK_OK(ox_launch(k, NULL, &cfg, good, 2));
    float v[8];
    CHECK(values(dst, v, 8) == 8 && v[7] == 14.0f, "launch on a read-only input: %g", v[7]);
    CHECK_ERR(ox_tensor_copy_from_host(ro, NULL, v, sizeof v), OX_ERR_INVALID_ARGUMENT,
              "read-only");
  }
  /* re-exported: versioned keeps the flag, legacy cannot carry it and refuses */
  void *out = (void *)(uintptr_t)1;
  CHECK_ERR(ox_tensor_to_dlpack(ro, NULL, 0, &out), OX_ERR_INVALID_ARGUMENT,
            "the tensor is read-only, and a legacy DLManagedTensor cannot say so");
  CHECK(out == NULL, "out not cleared");
  if (ro)
    CHECK_OK(ox_tensor_to_dlpack(ro, NULL, 1, &out));
  if (out) {
    DLManagedTensorVersioned *mv = out;
    CHECK(mv->flags == DLPACK_FLAG_BITMASK_READ_ONLY, "flags %llu", (unsigned long long)mv->flags);
    ox_tensor back = NULL;
    CHECK_OK(ox_tensor_from_dlpack(mv, 1, &back));
    CHECK(back && ox_tensor_is_read_only(back), "read-only lost in a round trip");
    ox_tensor_release(back);
  }
  ox_tensor_release(ro);

  ox_tensor other = seq(1, &n); /* a launch refuses a mutable argument that aliases another */
  p = produce(other, F32, 1, &n, NULL);
  p->v.flags = DLPACK_FLAG_BITMASK_IS_COPIED;
  ox_tensor cp = NULL;
  CHECK_OK(take(p, 1, &cp));
  CHECK(cp && (export_flags(cp) & DLPACK_FLAG_BITMASK_IS_COPIED) && !ox_tensor_is_read_only(cp), "IS_COPIED import");
  if (k && cp) { /* a copy is ours to write */
    ox_arg args[2] = {ox_arg_tensor(mem), ox_arg_tensor(cp)};
    CHECK_OK(ox_launch(k, NULL, &cfg, args, 2));
  }
  ox_tensor_release(cp);
  ox_tensor_release(other);
  ox_module_destroy(m);
  ox_tensor_release(dst);
  ox_tensor_release(mem);
}

static void test_lifetime(void) {
  int64_t sh[2] = {4, 6};
  ox_tensor mem = seq(2, sh);
  for (int ver = 0; ver <= 1; ver++) {
    ox_tensor t = NULL, view = NULL, view2 = NULL;
    deleted = 0;
    CHECK_OK(take(produce(mem, F32, 2, sh, NULL), ver, &t));
    if (!t)
      continue;
    CHECK_OK(ox_tensor_slice(t, 1, 1, 5, 2, &view));
    CHECK_OK(ox_tensor_transpose(t, 0, 1, &view2));
    ox_tensor_retain(t);
    ox_tensor_release(t);
    ox_tensor_release(t); /* the tensor is gone, its views are not */
    CHECK(deleted == 0, "deleter ran with views alive");
    float v[8];
    CHECK(view && values(view, v, 8) == 8 && v[0] == 1 && v[1] == 3 && v[7] == 21, "view values");
    ox_tensor_release(view);
    CHECK(deleted == 0, "deleter ran with a view alive");
    ox_tensor_release(view2);
    CHECK(deleted == 1, "deleter ran %d times after the last view", deleted);
  }
  ox_tensor_release(mem);
}

static void test_round_trips(void) {
  int64_t sh[2] = {3, 5};
  ox_tensor t = seq(2, sh);
  ox_stream s = NULL;
  CHECK_OK(ox_stream_create(dev, &s));
  float v[16];
  for (int ver = 0; ver <= 1; ver++) {
    /* a strided view: exported with its own strides, and back */
    ox_tensor view = NULL, back = NULL;
    CHECK_OK(ox_tensor_slice(t, 1, 1, 5, 2, &view)); /* columns 1 and 3 */
    void *out = NULL;
    if (view)
      CHECK_OK(ox_tensor_to_dlpack(view, s, ver, &out));
    if (!out)
      continue;
    DLTensor *dl =
        ver ? &((DLManagedTensorVersioned *)out)->dl_tensor : &((DLManagedTensor *)out)->dl_tensor;
    if (ver) {
      DLManagedTensorVersioned *mv = out;
      CHECK(mv->version.major == 1 && mv->version.minor == 1 && mv->flags == 0, "version/flags");
    }
    CHECK(dl->ndim == 2 && dl->shape[0] == 3 && dl->shape[1] == 2, "shape");
    CHECK(dl->strides && dl->strides[0] == 5 && dl->strides[1] == 2, "strides");
    CHECK(dl->byte_offset == 0 && dl->data == ox_tensor_data(view), "data");
    CHECK(dl->device.device_type == (cuda ? kDLCUDA : kDLCPU) && dl->device.device_id == 0,
          "device");
    CHECK(dl->dtype.code == kDLFloat && dl->dtype.bits == 32 && dl->dtype.lanes == 1, "dtype");
    ox_tensor_release(view); /* the exchange holds its own reference */
    CHECK_OK(ox_tensor_from_dlpack(out, ver, &back));
    static const float want[6] = {1, 3, 6, 8, 11, 13};
    CHECK(back && values(back, v, 16) == 6 && memcmp(v, want, sizeof want) == 0,
          "round trip values");
    ox_tensor_release(back);

    /* 0-d and empty tensors travel too, with non-NULL strides */
    int64_t zero_shape[2] = {2, 0};
    ox_tensor z = NULL, e = NULL, zb = NULL, eb = NULL;
    CHECK_OK(ox_tensor_full(dev, NULL, OX_F32, 0, NULL, 7.5, &z));
    CHECK_OK(ox_tensor_empty(dev, NULL, OX_F32, 2, zero_shape, &e));
    void *zo = NULL, *eo = NULL;
    if (z)
      CHECK_OK(ox_tensor_to_dlpack(z, NULL, ver, &zo));
    if (e)
      CHECK_OK(ox_tensor_to_dlpack(e, NULL, ver, &eo));
    if (zo && ver)
      CHECK(((DLManagedTensorVersioned *)zo)->dl_tensor.ndim == 0 &&
                ((DLManagedTensorVersioned *)zo)->dl_tensor.strides,
            "0-d export");
    if (zo)
      CHECK_OK(ox_tensor_from_dlpack(zo, ver, &zb));
    if (eo)
      CHECK_OK(ox_tensor_from_dlpack(eo, ver, &eb));
    CHECK(zb && ox_tensor_ndim(zb) == 0 && values(zb, v, 16) == 1 && v[0] == 7.5f,
          "0-d round trip");
    CHECK(eb && ox_tensor_numel(eb) == 0 && ox_tensor_ndim(eb) == 2, "empty round trip");
    ox_tensor_release(z);
    ox_tensor_release(e);
    ox_tensor_release(zb);
    ox_tensor_release(eb);
    /* exported and dropped unread: the deleter alone releases Oxide's reference */
    CHECK_OK(ox_tensor_to_dlpack(t, NULL, ver, &out));
    if (out)
      ver ? ((DLManagedTensorVersioned *)out)->deleter(out)
          : ((DLManagedTensor *)out)->deleter(out);
  }
  void *out = (void *)(uintptr_t)1;
  CHECK_ERR(ox_tensor_to_dlpack(NULL, NULL, 1, &out), OX_ERR_INVALID_ARGUMENT, "tensor is NULL");
  CHECK(out == NULL, "out not cleared");
  CHECK_ERR(ox_tensor_to_dlpack(t, NULL, 1, NULL), OX_ERR_INVALID_ARGUMENT, "out is NULL");
  if (cuda) { /* a consumer stream of another device */
    ox_stream cs = NULL;
    CHECK_OK(ox_device_stream(cpu, &cs));
    CHECK_ERR(ox_tensor_to_dlpack(t, cs, 1, &out), OX_ERR_INVALID_ARGUMENT,
              "belongs to another device than the tensor");
  }
  ox_stream_destroy(s);
  ox_tensor_release(t);
}

/* CUDA: the consumer's stream waits for Oxide's pending writes. A slow kernel
 * writes on one stream; the tensor is exported to a consumer naming another
 * stream and imported again (a new storage: Oxide's tracking no longer
 * connects the two), then read on the consumer's stream. Without the wait the
 * read would overtake the kernel. */
static const char *SLOW = "#[kernel]\n"
                          "fn slow_fill(c: DisjointSlice<f32>, iters: u32) {\n"
                          "    let i = thread::index_1d();\n"
                          "    if let Some(out) = c.get_mut(i) {\n"
                          "        let mut x = 0.0f32;\n"
                          "        for j in 0..iters { x = x + 1.0; }\n"
                          "        *out = x;\n"
                          "    }\n"
                          "}\n";

static void test_stream_rule(void) {
  ox_module m = NULL;
  ox_kernel k = NULL;
  ox_compile_options o = {.filename = "slow.oxk"};
  CHECK_OK(ox_module_compile(dev, SLOW, &o, &m));
  if (m)
    CHECK_OK(ox_module_get_kernel(m, "slow_fill", &k));
  int64_t n = 1 << 16;
  ox_tensor t = NULL, back = NULL;
  ox_stream writer = NULL, reader = NULL;
  CHECK_OK(ox_tensor_zeros(dev, NULL, OX_F32, 1, &n, &t));
  CHECK_OK(ox_device_stream(dev, &writer));
  CHECK_OK(ox_stream_synchronize(writer));
  CHECK_OK(ox_stream_create(dev, &writer));
  CHECK_OK(ox_stream_create(dev, &reader));
  if (!k || !t || !writer || !reader)
    return;
  ox_launch_config cfg = {{(uint32_t)(n / 256), 1, 1}, {256, 1, 1}};
  ox_arg args[2] = {ox_arg_tensor(t), ox_arg_u32(1u << 20)};
  CHECK_OK(ox_launch(k, writer, &cfg, args, 2));
  void *out = NULL;
  CHECK_OK(ox_tensor_to_dlpack(t, reader, 1, &out));
  if (out)
    CHECK_OK(ox_tensor_from_dlpack(out, 1, &back));
  float *h = malloc((size_t)n * sizeof(float));
  if (back)
    CHECK_OK(ox_tensor_to_host(back, reader, h, (size_t)n * sizeof(float)));
  int bad = 0;
  for (int64_t i = 0; i < n; i++)
    bad += h[i] != (float)(1u << 20);
  CHECK(bad == 0, "%d elements read before the producer's kernel wrote them (h[0] = %g)", bad,
        h[0]);
  free(h);
  ox_tensor_release(back);
  ox_tensor_release(t);
  CHECK_OK(ox_stream_synchronize(writer));
  ox_stream_destroy(writer);
  ox_stream_destroy(reader);
  ox_module_destroy(m);
}

int main(int argc, char **argv) {
  cuda = argc > 1 && !strcmp(argv[1], "cuda");
  CHECK_OK(ox_device_get(OX_DEVICE_CPU, 0, &cpu));
  CHECK_OK(ox_device_get(cuda ? OX_DEVICE_CUDA : OX_DEVICE_CPU, 0, &dev));
  if (!dev || !cpu)
    return test_done("dlpack_test");
  test_hostile();
  test_hostile_layouts();
  test_import_layouts();
  test_flags();
  test_lifetime();
  test_round_trips();
  test_overlapping_copies();
  test_lying_extent();
  if (cuda)
    test_stream_rule();
  return test_done(cuda ? "dlpack_test cuda" : "dlpack_test");
}
