/* handle_test.c - handles used after release or destroy, handles of the
 * wrong kind and values that never were handles: each is refused with
 * OX_ERR_INVALID_ARGUMENT, and never reaches the object that now occupies
 * the released one's place (checked by the other object's contents). Run
 * under ASan in CI, where any touch of freed memory fails the test. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "check.h"

static const char *SRC = "#[kernel]\n"
                         "fn fill(out: DisjointSlice<f32>, v: f32) {\n"
                         "    let i = thread::index_1d();\n"
                         "    if let Some(o) = out.get_mut(i) {\n"
                         "        *o = v;\n"
                         "    }\n"
                         "}\n";

static const int64_t N4[1] = {4};
static const ox_launch_config CFG = {{1, 1, 1}, {4, 1, 1}};

/* A tensor of 4 floats, all `v`. */
static ox_tensor filled(ox_device dev, float v) {
  float h[4] = {v, v, v, v};
  ox_tensor t = NULL;
  CHECK_OK(ox_tensor_from_host(dev, NULL, OX_F32, 1, N4, h, sizeof h, &t));
  return t;
}

static int all_are(ox_tensor t, float v) {
  float h[4] = {0};
  if (ox_tensor_to_host(t, NULL, h, sizeof h) != OX_OK)
    return 0;
  return h[0] == v && h[1] == v && h[2] == v && h[3] == v;
}

static void stale_tensors(ox_device dev, ox_kernel fill) {
  ox_tensor a = filled(dev, 1);
  ox_tensor_release(a);
  ox_tensor b = filled(dev, 2); /* very likely a's slot and memory again */
  float h[4] = {9, 9, 9, 9};
  CHECK_ERR(ox_tensor_copy_from_host(a, NULL, h, sizeof h), OX_ERR_INVALID_ARGUMENT, "not live");
  CHECK_ERR(ox_tensor_to_host(a, NULL, h, sizeof h), OX_ERR_INVALID_ARGUMENT, "not live");
  ox_arg args[2] = {ox_arg_tensor(a), ox_arg_f32(7)};
  CHECK_ERR(ox_launch(fill, NULL, &CFG, args, 2), OX_ERR_INVALID_ARGUMENT, "argument 1");
  CHECK_ERR(ox_tensor_copy(a, b, NULL), OX_ERR_INVALID_ARGUMENT, "dst is not a live tensor");
  ox_tensor v = NULL;
  CHECK_ERR(ox_tensor_slice(a, 0, 0, 1, 1, &v), OX_ERR_INVALID_ARGUMENT, "not live");
  void *m = NULL;
  CHECK_ERR(ox_tensor_to_dlpack(a, NULL, 1, &m), OX_ERR_INVALID_ARGUMENT, "not live");
  CHECK(ox_tensor_numel(a) == 0 && ox_tensor_data(a) == NULL && ox_tensor_shape(a) == NULL,
        "getters of a released tensor");
  CHECK(ox_last_status() == OX_ERR_INVALID_ARGUMENT, "%s", "getters set the error");
  ox_tensor_retain(a);   /* refused: must not raise b's count */
  ox_tensor_release(a);  /* refused: must not free b */
  ox_tensor_release(a);
  CHECK(ox_last_status() == OX_ERR_INVALID_ARGUMENT, "%s", "double release is reported");
  CHECK(all_are(b, 2), "%s", "the tensor in the released one's place is untouched");
  ox_tensor_release(b);
  CHECK(ox_tensor_numel(b) == 0, "%s", "b is gone");
}

static void stale_modules(ox_device dev) {
  ox_module m1 = NULL, m2 = NULL;
  ox_kernel k1 = NULL, k2 = NULL;
  CHECK_OK(ox_module_compile(dev, SRC, NULL, &m1));
  CHECK_OK(ox_module_get_kernel(m1, "fill", &k1));
  ox_module_destroy(m1);
  CHECK_OK(ox_module_compile(dev, SRC, NULL, &m2));
  CHECK_OK(ox_module_get_kernel(m2, "fill", &k2));
  ox_kernel k = NULL;
  CHECK_ERR(ox_module_get_kernel(m1, "fill", &k), OX_ERR_INVALID_ARGUMENT, "not live");
  CHECK(ox_module_from_cache(m1) == 0, "%s", "from_cache of a destroyed module");
  ox_tensor t = filled(dev, 3);
  ox_arg args[2] = {ox_arg_tensor(t), ox_arg_f32(5)};
  CHECK_ERR(ox_launch(k1, NULL, &CFG, args, 2), OX_ERR_INVALID_ARGUMENT, "kernel handle is not live");
  CHECK_ERR(ox_launch_check(k1, NULL, &CFG, args, 2), OX_ERR_INVALID_ARGUMENT, "not live");
  CHECK(ox_kernel_num_params(k1) == -1 && !strcmp(ox_kernel_name(k1), ""), "%s", "getters of a dead kernel");
  CHECK_ERR(ox_kernel_set_generic(k1, "B", 4), OX_ERR_INVALID_ARGUMENT, "not live");
  CHECK(all_are(t, 3), "%s", "no launch ran");
  ox_module_destroy(m1); /* refused: m2 lives on */
  CHECK_OK(ox_launch(k2, NULL, &CFG, args, 2));
  CHECK(all_are(t, 5), "%s", "the module in the destroyed one's place works");
  ox_chain c = NULL;
  CHECK_OK(ox_chain_create(dev, &c));
  CHECK_OK(ox_chain_launch(c, k2, &CFG, args, 2));
  ox_module_destroy(m2);
  CHECK_ERR(ox_chain_run(c, NULL), OX_ERR_INVALID_ARGUMENT, "not live");
  ox_chain_destroy(c);
  ox_tensor_release(t);
}

static void stale_streams(ox_device dev, ox_kernel fill) {
  ox_stream s1 = NULL, s2 = NULL;
  CHECK_OK(ox_stream_create(dev, &s1));
  ox_stream_destroy(s1);
  CHECK_OK(ox_stream_create(dev, &s2)); /* the same struct, reused */
  CHECK(s1 != s2, "%s", "a reused stream gets a new handle");
  CHECK_ERR(ox_stream_synchronize(s1), OX_ERR_INVALID_ARGUMENT, "not live");
  ox_tensor t = NULL;
  CHECK_ERR(ox_tensor_empty(dev, s1, OX_F32, 1, N4, &t), OX_ERR_INVALID_ARGUMENT, "not live");
  t = filled(dev, 1);
  ox_arg args[2] = {ox_arg_tensor(t), ox_arg_f32(4)};
  CHECK_ERR(ox_launch(fill, s1, &CFG, args, 2), OX_ERR_INVALID_ARGUMENT, "not live");
  CHECK(ox_stream_device(s1) == NULL && ox_stream_handle(s1) == NULL, "%s", "getters of a dead stream");
  ox_event e = NULL;
  CHECK_OK(ox_event_create(dev, &e));
  CHECK_ERR(ox_event_record(e, s1), OX_ERR_INVALID_ARGUMENT, "not live");
  ox_stream_destroy(s1); /* refused: s2 lives on */
  CHECK_OK(ox_launch(fill, s2, &CFG, args, 2));
  CHECK_OK(ox_stream_synchronize(s2));
  CHECK(all_are(t, 4), "%s", "the stream in the destroyed one's place works");
  ox_event_destroy(e);
  ox_stream_destroy(s2);
  ox_tensor_release(t);
}

static void stale_events(ox_device dev, ox_stream s) {
  ox_event e1 = NULL, e2 = NULL;
  CHECK_OK(ox_event_create(dev, &e1));
  ox_event_destroy(e1);
  CHECK_OK(ox_event_create(dev, &e2));
  CHECK_ERR(ox_event_record(e1, s), OX_ERR_INVALID_ARGUMENT, "not live");
  CHECK_ERR(ox_event_synchronize(e1), OX_ERR_INVALID_ARGUMENT, "not live");
  CHECK_ERR(ox_stream_wait_event(s, e1), OX_ERR_INVALID_ARGUMENT, "not live");
  /* a live event never recorded marks no work: refused, as documented */
  CHECK_ERR(ox_event_synchronize(e2), OX_ERR_INVALID_ARGUMENT, "never recorded");
  CHECK_ERR(ox_stream_wait_event(s, e2), OX_ERR_INVALID_ARGUMENT, "never recorded");
  float ms;
  CHECK_ERR(ox_event_elapsed_ms(e2, e2, &ms), OX_ERR_INVALID_ARGUMENT, "never recorded");
  ox_event_destroy(e1); /* refused: e2 lives on */
  CHECK_OK(ox_event_record(e2, s));
  CHECK_OK(ox_event_synchronize(e2));
  CHECK_ERR(ox_event_elapsed_ms(e1, e2, &ms), OX_ERR_INVALID_ARGUMENT, "not live");
  CHECK_OK(ox_event_elapsed_ms(e2, e2, &ms));
  ox_event_destroy(e2);
}

static void stale_chains(ox_device dev, ox_kernel fill) {
  ox_chain c1 = NULL, c2 = NULL;
  ox_tensor t = filled(dev, 0);
  ox_arg args[2] = {ox_arg_tensor(t), ox_arg_f32(6)};
  CHECK_OK(ox_chain_create(dev, &c1));
  ox_chain_destroy(c1);
  CHECK_OK(ox_chain_create(dev, &c2));
  CHECK_ERR(ox_chain_launch(c1, fill, &CFG, args, 2), OX_ERR_INVALID_ARGUMENT, "not live");
  CHECK_ERR(ox_chain_copy(c1, t, t), OX_ERR_INVALID_ARGUMENT, "not live");
  CHECK_ERR(ox_chain_run(c1, NULL), OX_ERR_INVALID_ARGUMENT, "not live");
  CHECK_ERR(ox_chain_capture(c1, NULL), OX_ERR_INVALID_ARGUMENT, "not live");
  ox_chain_destroy(c1); /* refused: c2 lives on */
  CHECK_OK(ox_chain_launch(c2, fill, &CFG, args, 2));
  ox_tensor_release(t); /* the chain holds its own reference */
  CHECK_OK(ox_chain_run(c2, NULL));
  ox_chain_destroy(c2);
}

/* A handle of one kind where another is expected, and made-up values. */
static void wrong_kinds(ox_device dev, ox_kernel fill) {
  ox_tensor t = filled(dev, 1);
  ox_stream s = NULL;
  CHECK_OK(ox_stream_create(dev, &s));
  CHECK_ERR(ox_stream_synchronize((ox_stream)t), OX_ERR_INVALID_ARGUMENT, "not live");
  CHECK_ERR(ox_tensor_to_host((ox_tensor)s, NULL, NULL, 0), OX_ERR_INVALID_ARGUMENT, "not live");
  CHECK_ERR(ox_launch((ox_kernel)t, NULL, &CFG, NULL, 0), OX_ERR_INVALID_ARGUMENT, "not live");
  ox_kernel k = NULL;
  CHECK_ERR(ox_module_get_kernel((ox_module)fill, "fill", &k), OX_ERR_INVALID_ARGUMENT, "not live");
  ox_event_destroy((ox_event)s); /* refused: s lives on */
  CHECK_OK(ox_stream_synchronize(s));
  ox_tensor_release((ox_tensor)s); /* refused */
  CHECK(all_are(t, 1), "%s", "a tensor survives a stream handle passed as a tensor");
  ox_tensor_release(t);
  ox_tensor out = filled(dev, 0);
  ox_tensor_release(out);
  /* pseudo-random 64-bit values, small ones, and pointers to real memory */
  uint64_t x = 0x9e3779b97f4a7c15ull;
  int64_t local = 0;
  for (int i = 0; i < 2000; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    uint64_t v = i < 100 ? (uint64_t)i : i < 200 ? (uint64_t)(uintptr_t)&local + (uint64_t)i : x;
    CHECK_ERR(ox_tensor_to_host((ox_tensor)(uintptr_t)v, NULL, NULL, 0), OX_ERR_INVALID_ARGUMENT, "");
    CHECK_ERR(ox_stream_synchronize((ox_stream)(uintptr_t)v), OX_ERR_INVALID_ARGUMENT, "");
    CHECK_ERR(ox_event_synchronize((ox_event)(uintptr_t)v), OX_ERR_INVALID_ARGUMENT, "");
    CHECK_ERR(ox_module_get_kernel((ox_module)(uintptr_t)v, "fill", &k), OX_ERR_INVALID_ARGUMENT, "");
    CHECK_ERR(ox_kernel_set_generic((ox_kernel)(uintptr_t)v, "B", 1), OX_ERR_INVALID_ARGUMENT, "");
    CHECK_ERR(ox_chain_run((ox_chain)(uintptr_t)v, NULL), OX_ERR_INVALID_ARGUMENT, "");
    if (v == 0)
      continue;
    CHECK(ox_device_name((ox_device)(uintptr_t)v)[0] == 0, "%s", "a made-up device");
    CHECK_ERR(ox_tensor_empty((ox_device)(uintptr_t)v, NULL, OX_F32, 1, N4, &t), OX_ERR_INVALID_ARGUMENT,
              "not a device");
  }
  ox_stream_destroy(s);
  CHECK(t == NULL, "%s", "out is cleared");
}

int main(void) {
  ox_device dev;
  CHECK_OK(ox_device_get(OX_DEVICE_CPU, 0, &dev));
  ox_module m = NULL;
  ox_kernel fill = NULL;
  ox_stream s = NULL;
  CHECK_OK(ox_module_compile(dev, SRC, NULL, &m));
  CHECK_OK(ox_module_get_kernel(m, "fill", &fill));
  CHECK_OK(ox_stream_create(dev, &s));
  int64_t live = oxb_handle_live();
  for (int round = 0; round < 3; round++) { /* slots are reused across rounds */
    stale_tensors(dev, fill);
    stale_modules(dev);
    stale_streams(dev, fill);
    stale_events(dev, s);
    stale_chains(dev, fill);
    wrong_kinds(dev, fill);
  }
  CHECK(oxb_handle_live() == live, "%s", "no handle leaked");
  ox_stream_destroy(s);
  ox_module_destroy(m);
  return test_done("handle_test");
}
