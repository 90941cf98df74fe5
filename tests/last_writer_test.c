/* last_writer_test - ox_tensor_last_writer (argv[1]: "cpu" or "cuda"): the
 * stream of a tensor's last write, through views, after launches, copies and
 * fills on several streams; NULL for memory nobody in Oxide wrote and after
 * the writer's destruction; and that synchronizing the writer reports an
 * out-of-bounds access of the kernel that wrote the tensor (what the Python
 * binding does before a host read). */
#include <stdlib.h>

#include "../dlpack/dlpack.h"
#include "check.h"

static const char *SRC = "#[kernel]\n"
                         "fn copy(a: &[f32], c: DisjointSlice<f32>) {\n"
                         "    let i = thread::index_1d();\n"
                         "    if let Some(o) = c.get_mut(i) { *o = a[i]; }\n"
                         "}\n"
                         "#[kernel]\n"
                         "fn oob(a: &[f32], c: DisjointSlice<f32>) {\n"
                         "    let i = thread::index_1d();\n"
                         "    if let Some(o) = c.get_mut(i) { *o = a[i.get() + 1]; }\n"
                         "}\n";

/* The writer of `t`, or NULL (a failed call is a failed check). */
static ox_stream writer(ox_tensor t) {
  ox_stream s = (ox_stream)(uintptr_t)1; /* the call must overwrite it */
  CHECK_OK(ox_tensor_last_writer(t, &s));
  return s;
}

/* A foreign CPU tensor of 4 floats (a DLPack producer's), freed by its deleter. */
static float foreign_data[4];
static int64_t foreign_shape[1] = {4};
static int foreign_deleted;
static void foreign_deleter(DLManagedTensorVersioned *self) {
  (void)self;
  foreign_deleted++;
}

int main(int argc, char **argv) {
  const char *d = argc > 1 ? argv[1] : "cpu";
  const int cuda = strcmp(d, "cpu") != 0;
  ox_device dev = NULL;
  CHECK_OK(ox_device_get(cuda ? OX_DEVICE_CUDA : OX_DEVICE_CPU, 0, &dev));
  if (!dev)
    return test_done("last_writer_test");

  /* bad arguments */
  ox_stream out = (ox_stream)(uintptr_t)1;
  CHECK_ERR(ox_tensor_last_writer(NULL, &out), OX_ERR_INVALID_ARGUMENT, "tensor is NULL");
  CHECK(out == NULL, "*out is cleared on failure");
  ox_tensor t0 = NULL;
  const int64_t n = 4;
  CHECK_OK(ox_tensor_zeros(dev, NULL, OX_F32, 1, &n, &t0));
  CHECK_ERR(ox_tensor_last_writer(t0, NULL), OX_ERR_INVALID_ARGUMENT, "out is NULL");

  ox_stream def = NULL, s1 = NULL, s2 = NULL;
  CHECK_OK(ox_device_stream(dev, &def));
  CHECK_OK(ox_stream_create(dev, &s1));
  CHECK_OK(ox_stream_create(dev, &s2));
  CHECK(writer(t0) == def, "zeros writes on the default stream");

  ox_compile_options o = {.filename = "writer.oxk"};
  ox_module m = NULL;
  ox_kernel kcopy = NULL, koob = NULL;
  CHECK_OK(ox_module_compile(dev, SRC, &o, &m));
  if (m) {
    CHECK_OK(ox_module_get_kernel(m, "copy", &kcopy));
    CHECK_OK(ox_module_get_kernel(m, "oob", &koob));
  }
  if (!kcopy || !koob)
    return test_done("last_writer_test");

  /* an empty tensor: on the CPU nothing wrote it; on CUDA its stream-ordered
   * allocation counts as a write */
  ox_tensor a = NULL, c = NULL, view = NULL;
  CHECK_OK(ox_tensor_empty(dev, s1, OX_F32, 1, &n, &c));
  CHECK(writer(c) == (cuda ? s1 : NULL), "after empty on s1");
  const float host[4] = {1, 2, 3, 4};
  CHECK_OK(ox_tensor_from_host(dev, s1, OX_F32, 1, &n, host, sizeof host, &a));
  CHECK(writer(a) == s1, "from_host writes on s1");
  CHECK_OK(ox_tensor_slice(c, 0, 1, 3, 1, &view));

  /* a launch on s2 writes c and reads a: c's writer is s2 (seen through the
   * view too), a's stays s1 */
  ox_launch_config cfg = {{1, 1, 1}, {4, 1, 1}};
  ox_arg args[2] = {ox_arg_tensor(a), ox_arg_tensor(c)};
  CHECK_OK(ox_launch(kcopy, s2, &cfg, args, 2));
  CHECK(writer(c) == s2, "the launch wrote c on s2");
  CHECK(writer(view) == s2, "a view shares the storage's writer");
  CHECK(writer(a) == s1, "a read does not change the writer");
  /* a copy on the default stream into the view writes c's storage */
  CHECK_ERR(ox_tensor_copy(view, a, def), OX_ERR_INVALID_ARGUMENT, "shape");
  CHECK(writer(c) == s2, "a refused copy writes nothing");
  ox_tensor a2 = NULL;
  CHECK_OK(ox_tensor_slice(a, 0, 0, 2, 1, &a2));
  CHECK_OK(ox_tensor_copy(view, a2, def));
  CHECK(writer(c) == def, "the copy wrote c on the default stream");

  /* the out-of-bounds kernel writes c on s1: synchronizing c's writer
   * reports it; the default stream has nothing to report */
  CHECK_OK(ox_launch(koob, s1, &cfg, args, 2));
  ox_stream w = writer(c);
  CHECK(w == s1, "the bad launch wrote c on s1");
  CHECK_OK(ox_stream_synchronize(def));
  if (w)
    CHECK_ERR(ox_stream_synchronize(w), OX_ERR_BOUNDS, "index 4");

  /* the writer destroyed: nothing left to wait for */
  ox_stream_destroy(s1);
  CHECK(writer(c) == NULL && writer(a) == NULL, "a destroyed writer is no writer");
  CHECK(writer(t0) == def, "other tensors keep theirs");

  /* foreign memory that Oxide never wrote: no writer (CPU memory only, so
   * this part runs on the CPU) */
  if (!cuda) {
    DLManagedTensorVersioned mt = {
        .version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
        .deleter = foreign_deleter,
        .dl_tensor = {.data = foreign_data,
                      .device = {kDLCPU, 0},
                      .ndim = 1,
                      .dtype = {kDLFloat, 32, 1},
                      .shape = foreign_shape},
    };
    ox_tensor f = NULL;
    CHECK_OK(ox_tensor_from_dlpack(&mt, 1, &f));
    CHECK(writer(f) == NULL, "an import has no writer");
    ox_arg fargs[2] = {ox_arg_tensor(a), ox_arg_tensor(f)};
    CHECK_OK(ox_launch(kcopy, s2, &cfg, fargs, 2));
    CHECK(writer(f) == s2, "until Oxide writes it");
    ox_tensor_release(f);
    CHECK(foreign_deleted == 1, "the producer's deleter ran once");
  }

  /* a released tensor is refused */
  ox_tensor_release(t0);
  CHECK_ERR(ox_tensor_last_writer(t0, &out), OX_ERR_INVALID_ARGUMENT, "tensor");

  ox_tensor_release(view);
  ox_tensor_release(a2);
  ox_tensor_release(a);
  ox_tensor_release(c);
  ox_stream_destroy(s2);
  ox_module_destroy(m);
  return test_done("last_writer_test");
}
