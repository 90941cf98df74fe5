/* runtime_test.c - devices, streams and tensors through the public API. Runs
 * everywhere: on the CPU always, and on CUDA device 0 when there is one (else
 * it checks that CUDA requests fail cleanly without a driver). */
#define _POSIX_C_SOURCE 200809L /* setenv: the tests build as strict C11 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oxide/oxide.h"
#include "runtime/runtime.h" /* the error record and refcounts (an internal test) */

static int failures;

#define CHECK(cond)                                                                          \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s: %s)\n", __FILE__, __LINE__, \
              #cond, ox_status_name(ox_last_status()), ox_last_error());                     \
      failures++;                                                                            \
    }                                                                                        \
  } while (0)

/* Checks that `call` fails with `status` and a message containing `text`. */
#define CHECK_ERR(call, status, text)                                                  \
  do {                                                                                 \
    ox_clear_error();                                                                  \
    ox_status st_ = (call);                                                            \
    CHECK(st_ == (status));                                                            \
    CHECK(ox_last_status() == (status));                                               \
    CHECK(strstr(ox_last_error(), (text)) != NULL);                                    \
  } while (0)

#define OK(call) CHECK((call) == OX_OK)

static int has_cuda;

static void test_devices(void) {
  int n = -1;
  OK(ox_device_count(OX_DEVICE_CPU, &n));
  CHECK(n == 1);
  OK(ox_device_count(OX_DEVICE_CUDA, &n));
  CHECK(n >= 0);
  has_cuda = n > 0;
  CHECK_ERR(ox_device_count(OX_DEVICE_CPU, NULL), OX_ERR_INVALID_ARGUMENT, "count is NULL");
  int junk;
  CHECK_ERR(ox_device_count((ox_device_type)7, &junk), OX_ERR_INVALID_ARGUMENT, "device type 7");

  ox_device cpu = NULL, d2 = NULL;
  OK(ox_device_get(OX_DEVICE_CPU, 0, &cpu));
  CHECK(cpu != NULL);
  OK(ox_device_get(OX_DEVICE_CPU, 0, &d2));
  CHECK(cpu == d2);
  CHECK(ox_device_get_type(cpu) == OX_DEVICE_CPU);
  CHECK(ox_device_ordinal(cpu) == 0);
  CHECK(strncmp(ox_device_name(cpu), "CPU (", 5) == 0);
  CHECK(strstr(ox_device_name(cpu), "threads)") != NULL);
  CHECK(ox_device_compute_capability(cpu) == 0);
  CHECK_ERR(ox_device_get(OX_DEVICE_CPU, 1, &d2), OX_ERR_NO_DEVICE, "no CPU device 1");
  CHECK(d2 == NULL);
  CHECK_ERR(ox_device_get(OX_DEVICE_CPU, 0, NULL), OX_ERR_INVALID_ARGUMENT, "out is NULL");
  CHECK_ERR(ox_device_get((ox_device_type)0, 0, &d2), OX_ERR_INVALID_ARGUMENT, "device type 0");

  /* NULL handles: neutral results and an error, never a crash. */
  ox_clear_error();
  CHECK(ox_device_ordinal(NULL) == -1);
  CHECK(ox_last_status() == OX_ERR_INVALID_ARGUMENT);
  CHECK(strcmp(ox_device_name(NULL), "") == 0);
  CHECK(ox_device_compute_capability(NULL) == 0);
  CHECK(ox_device_get_type(NULL) == 0);
  CHECK(strstr(ox_last_error(), "device is NULL") != NULL);

  if (has_cuda) {
    ox_device g;
    OK(ox_device_get(OX_DEVICE_CUDA, 0, &g));
    CHECK(ox_device_get_type(g) == OX_DEVICE_CUDA);
    CHECK(ox_device_compute_capability(g) >= 50);
    printf("CUDA device 0: %s (sm_%d)\n", ox_device_name(g), ox_device_compute_capability(g));
    CHECK_ERR(ox_device_get(OX_DEVICE_CUDA, n, &d2), OX_ERR_NO_DEVICE, "no CUDA device");
  } else {
    CHECK(n == 0);
    CHECK_ERR(ox_device_get(OX_DEVICE_CUDA, 0, &d2), OX_ERR_NO_DEVICE, "libcuda");
    CHECK(strstr(ox_last_error(), "CUDA driver") != NULL);
    CHECK(d2 == NULL);
  }
}

static void test_default_device(void) {
  ox_device cpu, d = NULL;
  OK(ox_device_get(OX_DEVICE_CPU, 0, &cpu));

  unsetenv("OXIDE_DEVICE");
  OK(ox_device_default(&d));
  CHECK(ox_device_get_type(d) == (has_cuda ? OX_DEVICE_CUDA : OX_DEVICE_CPU));
  setenv("OXIDE_DEVICE", "", 1); /* empty: as if unset */
  OK(ox_device_default(&d));
  CHECK(d != NULL);

  setenv("OXIDE_DEVICE", "cpu", 1);
  OK(ox_device_default(&d));
  CHECK(d == cpu);

  const char *bad[] = {"gpu", "CPU", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "cuda0", "cpu:0"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("OXIDE_DEVICE", bad[i], 1);
    d = cpu;
    CHECK_ERR(ox_device_default(&d), OX_ERR_INVALID_ARGUMENT, bad[i]);
    CHECK(strstr(ox_last_error(), "$OXIDE_DEVICE") != NULL);
    CHECK(d == NULL);
  }

  setenv("OXIDE_DEVICE", "cuda:99", 1);
  CHECK_ERR(ox_device_default(&d), OX_ERR_NO_DEVICE, has_cuda ? "no CUDA device 99" : "libcuda");
  CHECK(strstr(ox_last_error(), "cuda:99") != NULL);
  setenv("OXIDE_DEVICE", "cuda", 1);
  if (has_cuda) {
    OK(ox_device_default(&d));
    CHECK(ox_device_get_type(d) == OX_DEVICE_CUDA && ox_device_ordinal(d) == 0);
    setenv("OXIDE_DEVICE", "cuda:0", 1);
    ox_device d0 = NULL;
    OK(ox_device_default(&d0));
    CHECK(d0 == d);
  } else {
    CHECK_ERR(ox_device_default(&d), OX_ERR_NO_DEVICE, "libcuda");
  }
  unsetenv("OXIDE_DEVICE");
  CHECK_ERR(ox_device_default(NULL), OX_ERR_INVALID_ARGUMENT, "out is NULL");
}

static void test_streams(ox_device dev) {
  ox_stream def = NULL, def2 = NULL, s = NULL;
  OK(ox_device_stream(dev, &def));
  OK(ox_device_stream(dev, &def2));
  CHECK(def != NULL && def == def2);
  CHECK(ox_stream_device(def) == dev);
  OK(ox_stream_synchronize(def));
  ox_stream_destroy(def); /* ignored */
  OK(ox_stream_synchronize(def));

  OK(ox_stream_create(dev, &s));
  CHECK(s != NULL && s != def);
  CHECK(ox_stream_device(s) == dev);
  OK(ox_stream_synchronize(s));

  /* A kernel's out-of-bounds report, as generated code writes it: reported
   * once by the next synchronization, then cleared. */
  oxr_errrec *rec = oxr_stream_get("test", s)->err;
  rec->tag = 3;
  rec->site = 1;
  rec->kind = 1;
  rec->index = 12345;
  rec->len = 100;
  rec->flag = 1;
  CHECK_ERR(ox_stream_synchronize(s), OX_ERR_BOUNDS, "12345");
  CHECK(strstr(ox_last_error(), "100") != NULL);
  CHECK(rec->flag == 0 && rec->index == 0 && rec->len == 0 && rec->tag == 0);
  OK(ox_stream_synchronize(s));

  ox_stream_destroy(s);
  CHECK_ERR(ox_stream_synchronize(s), OX_ERR_INVALID_ARGUMENT, "destroyed");
  ox_stream s2 = NULL;
  OK(ox_stream_create(dev, &s2)); /* may reuse the destroyed one */
  OK(ox_stream_synchronize(s2));
  ox_stream_destroy(s2);
  ox_stream_destroy(NULL);

  CHECK_ERR(ox_stream_create(NULL, &s), OX_ERR_INVALID_ARGUMENT, "device is NULL");
  CHECK_ERR(ox_stream_create(dev, NULL), OX_ERR_INVALID_ARGUMENT, "out is NULL");
  CHECK_ERR(ox_device_stream(NULL, &s), OX_ERR_INVALID_ARGUMENT, "device is NULL");
  CHECK_ERR(ox_stream_synchronize(NULL), OX_ERR_INVALID_ARGUMENT, "stream is NULL");
  ox_clear_error();
  CHECK(ox_stream_device(NULL) == NULL);
  CHECK(ox_last_status() == OX_ERR_INVALID_ARGUMENT);
}

/* Fills n bytes with a pattern that depends on `seed`. */
static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (unsigned char)(i * 31u + seed * 7u + 1u);
}

static void test_roundtrip(ox_device dev, ox_stream s) {
  static const ox_dtype dtypes[] = {OX_BOOL, OX_U8, OX_I16, OX_F16, OX_BF16, OX_I32,
                                    OX_F32, OX_U32, OX_I64, OX_F64};
  static const int64_t shapes[4][3] = {{0, 0, 0}, {7, 0, 0}, {3, 5, 0}, {2, 3, 4}};
  for (size_t di = 0; di < sizeof dtypes / sizeof dtypes[0]; di++) {
    for (int ndim = 0; ndim <= 3; ndim++) {
      ox_dtype dt = dtypes[di];
      const int64_t *shape = shapes[ndim];
      int64_t numel = 1;
      for (int i = 0; i < ndim; i++)
        numel *= shape[i];
      size_t bytes = (size_t)numel * ox_dtype_size(dt);
      unsigned char *in = malloc(bytes), *out = malloc(bytes), *in2 = malloc(bytes);
      fill(in, bytes, (unsigned)(di * 4 + (size_t)ndim));
      fill(in2, bytes, (unsigned)(di * 4 + (size_t)ndim + 100));

      ox_tensor t = NULL;
      OK(ox_tensor_from_host(dev, s, dt, ndim, shape, in, bytes, &t));
      if (!t)
        goto next;
      CHECK(ox_tensor_dtype(t) == dt);
      CHECK(ox_tensor_ndim(t) == ndim);
      CHECK(ox_tensor_numel(t) == numel);
      CHECK(ox_tensor_nbytes(t) == bytes);
      CHECK(ox_tensor_device(t) == dev);
      for (int i = 0; i < ndim; i++)
        CHECK(ox_tensor_shape(t)[i] == shape[i]);
      CHECK(ox_tensor_strides(t)[ndim - 1 < 0 ? 0 : ndim - 1] == (ndim ? 1 : 0));
      if (ndim == 3)
        CHECK(ox_tensor_strides(t)[0] == 12 && ox_tensor_strides(t)[1] == 4);
      CHECK(((uintptr_t)ox_tensor_data(t) & 63) == 0);
      memset(out, 0, bytes);
      OK(ox_tensor_to_host(t, s, out, bytes));
      CHECK(memcmp(in, out, bytes) == 0);
      OK(ox_tensor_copy_from_host(t, NULL, in2, bytes));
      OK(ox_tensor_to_host(t, NULL, out, bytes));
      CHECK(memcmp(in2, out, bytes) == 0);

      ox_tensor_retain(t);
      CHECK(oxr_tensor_get("test", t)->refcount == 2);
      ox_tensor_release(t);
      CHECK(oxr_tensor_get("test", t)->refcount == 1);
      ox_tensor_release(t);
    next:
      free(in);
      free(out);
      free(in2);
    }
  }
}

static void test_empty_tensors(ox_device dev) {
  ox_tensor t = NULL;
  int64_t s0[] = {0}, s3[] = {3, 0, 2};
  OK(ox_tensor_empty(dev, NULL, OX_F32, 1, s0, &t));
  CHECK(ox_tensor_numel(t) == 0 && ox_tensor_nbytes(t) == 0);
  if (ox_device_get_type(dev) == OX_DEVICE_CPU)
    CHECK(ox_tensor_data(t) != NULL);
  else
    CHECK(ox_tensor_data(t) == NULL);
  OK(ox_tensor_to_host(t, NULL, NULL, 0));
  OK(ox_tensor_copy_from_host(t, NULL, NULL, 0));
  ox_tensor_release(t);
  OK(ox_tensor_from_host(dev, NULL, OX_I64, 3, s3, NULL, 0, &t));
  CHECK(ox_tensor_numel(t) == 0 && ox_tensor_ndim(t) == 3);
  CHECK(ox_tensor_strides(t)[0] == 2 && ox_tensor_strides(t)[1] == 2 && ox_tensor_strides(t)[2] == 1);
  ox_tensor_release(t);
  /* Empty, but with a shape whose other dimensions overflow the strides. */
  int64_t huge0[] = {0, (int64_t)1 << 40, (int64_t)1 << 40};
  CHECK_ERR(ox_tensor_empty(dev, NULL, OX_U8, 3, huge0, &t), OX_ERR_INVALID_ARGUMENT, "too large");
  /* 0-d: one element. */
  float x = 2.5f, y = 0;
  OK(ox_tensor_from_host(dev, NULL, OX_F32, 0, NULL, &x, sizeof x, &t));
  CHECK(ox_tensor_numel(t) == 1 && ox_tensor_nbytes(t) == 4);
  OK(ox_tensor_to_host(t, NULL, &y, sizeof y));
  CHECK(y == 2.5f);
  ox_tensor_release(t);
}

static void test_tensor_errors(ox_device dev, ox_stream s) {
  ox_tensor t = (ox_tensor)&t; /* must be reset to NULL on failure */
  int64_t shape[9] = {2, 2, 1, 1, 1, 1, 1, 1, 1};
  CHECK_ERR(ox_tensor_empty(NULL, NULL, OX_F32, 1, shape, &t), OX_ERR_INVALID_ARGUMENT,
            "ox_tensor_empty: device is NULL");
  CHECK(t == NULL);
  CHECK_ERR(ox_tensor_empty(dev, NULL, OX_F32, 1, shape, NULL), OX_ERR_INVALID_ARGUMENT,
            "out is NULL");
  CHECK_ERR(ox_tensor_empty(dev, NULL, OX_F32, 9, shape, &t), OX_ERR_INVALID_ARGUMENT,
            "ndim is 9; it must be 0..8");
  CHECK_ERR(ox_tensor_empty(dev, NULL, OX_F32, -1, shape, &t), OX_ERR_INVALID_ARGUMENT,
            "ndim is -1");
  CHECK_ERR(ox_tensor_empty(dev, NULL, OX_F32, 2, NULL, &t), OX_ERR_INVALID_ARGUMENT,
            "shape is NULL");
  CHECK_ERR(ox_tensor_empty(dev, NULL, OX_DTYPE_COUNT, 1, shape, &t), OX_ERR_INVALID_ARGUMENT,
            "invalid dtype");
  CHECK_ERR(ox_tensor_empty(dev, NULL, (ox_dtype)-1, 1, shape, &t), OX_ERR_INVALID_ARGUMENT,
            "invalid dtype");
  int64_t neg[] = {4, -3};
  CHECK_ERR(ox_tensor_empty(dev, NULL, OX_F32, 2, neg, &t), OX_ERR_INVALID_ARGUMENT,
            "shape[1] is -3");
  int64_t big[] = {(int64_t)1 << 40, (int64_t)1 << 40};
  CHECK_ERR(ox_tensor_empty(dev, NULL, OX_F32, 2, big, &t), OX_ERR_INVALID_ARGUMENT, "too large");
  CHECK(strstr(ox_last_error(), "f32 tensor of shape [1099511627776, 1099511627776]") != NULL);
  int64_t big2[] = {(int64_t)1 << 31, (int64_t)1 << 31}; /* numel fits, bytes do not */
  CHECK_ERR(ox_tensor_empty(dev, NULL, OX_I64, 2, big2, &t), OX_ERR_INVALID_ARGUMENT, "overflows");
  CHECK(t == NULL);

  float host[6] = {1, 2, 3, 4, 5, 6};
  int64_t s23[] = {2, 3};
  CHECK_ERR(ox_tensor_from_host(dev, s, OX_F32, 2, s23, host, 20, &t), OX_ERR_INVALID_ARGUMENT,
            "the host buffer has 20 bytes but the f32 tensor of shape [2, 3] has 24 bytes");
  CHECK(t == NULL);
  CHECK_ERR(ox_tensor_from_host(dev, s, OX_F32, 2, s23, NULL, 24, &t), OX_ERR_INVALID_ARGUMENT,
            "host pointer is NULL");
  OK(ox_tensor_from_host(dev, s, OX_F32, 2, s23, host, sizeof host, &t));
  float back[7];
  CHECK_ERR(ox_tensor_to_host(t, s, back, sizeof back), OX_ERR_INVALID_ARGUMENT,
            "28 bytes but the f32 tensor of shape [2, 3] has 24 bytes");
  CHECK_ERR(ox_tensor_copy_from_host(t, s, back, 4), OX_ERR_INVALID_ARGUMENT, "4 bytes");
  CHECK_ERR(ox_tensor_to_host(NULL, s, back, 24), OX_ERR_INVALID_ARGUMENT, "tensor is NULL");
  CHECK_ERR(ox_tensor_copy_from_host(NULL, s, back, 24), OX_ERR_INVALID_ARGUMENT,
            "tensor is NULL");
  CHECK_ERR(ox_tensor_to_host(t, s, NULL, 24), OX_ERR_INVALID_ARGUMENT, "host pointer is NULL");

  /* A destroyed stream is refused; the tensor stays usable and frees fine. */
  ox_stream tmp;
  OK(ox_stream_create(dev, &tmp));
  OK(ox_tensor_copy_from_host(t, tmp, host, sizeof host));
  ox_stream_destroy(tmp);
  CHECK_ERR(ox_tensor_to_host(t, tmp, back, 24), OX_ERR_INVALID_ARGUMENT, "destroyed");
  OK(ox_tensor_to_host(t, NULL, back, 24));
  CHECK(memcmp(back, host, 24) == 0);
  ox_tensor_release(t);

  ox_clear_error();
  CHECK(ox_tensor_ndim(NULL) == -1);
  CHECK(ox_last_status() == OX_ERR_INVALID_ARGUMENT);
  CHECK(ox_tensor_numel(NULL) == 0);
  CHECK(ox_tensor_nbytes(NULL) == 0);
  CHECK(ox_tensor_shape(NULL) == NULL);
  CHECK(ox_tensor_data(NULL) == NULL);
  CHECK(ox_tensor_device(NULL) == NULL);
  CHECK(ox_tensor_dtype(NULL) == OX_DTYPE_COUNT);
  CHECK(strstr(ox_last_error(), "tensor is NULL") != NULL);
  ox_tensor_retain(NULL);
  ox_tensor_release(NULL);
}

static void test_device(ox_device dev) {
  printf("device: %s\n", ox_device_name(dev));
  test_streams(dev);
  ox_stream s;
  OK(ox_stream_create(dev, &s));
  test_roundtrip(dev, NULL);
  test_roundtrip(dev, s);
  test_empty_tensors(dev);
  test_tensor_errors(dev, NULL);
  test_tensor_errors(dev, s);
  ox_stream_destroy(s);
}

int main(void) {
  test_devices();
  test_default_device();
  ox_device cpu;
  OK(ox_device_get(OX_DEVICE_CPU, 0, &cpu));
  test_device(cpu);
  if (has_cuda) {
    ox_device gpu;
    OK(ox_device_get(OX_DEVICE_CUDA, 0, &gpu));
    test_device(gpu);
    /* A tensor used on a stream that is destroyed before the tensor. */
    ox_stream s;
    ox_tensor t;
    int64_t n[] = {1000};
    OK(ox_stream_create(gpu, &s));
    OK(ox_tensor_empty(gpu, s, OX_F32, 1, n, &t));
    ox_stream_destroy(s);
    ox_tensor_release(t);
    ox_stream cpu_s;
    OK(ox_device_stream(cpu, &cpu_s));
    CHECK_ERR(ox_tensor_empty(gpu, cpu_s, OX_F32, 1, n, &t), OX_ERR_INVALID_ARGUMENT,
              "the stream belongs to device cpu, not cuda:0");
  }
  if (failures) {
    fprintf(stderr, "FAILED: %d checks\n", failures);
    return 1;
  }
  printf("PASSED\n");
  return 0;
}
