/*
 * device.c - devices, streams and tensors, on the CPU and on CUDA GPUs.
 *
 * Devices live as long as the process. CUDA devices are set up on first use
 * (their primary context retained, never released: like the CUDA runtime,
 * Oxide shares it with PyTorch and CuPy for the life of the process).
 *
 * Destroyed streams are not freed but kept per device for reuse. A tensor
 * whose last stream was destroyed therefore still points at a valid struct,
 * and its stream-ordered free goes either to the legacy default stream (cu is
 * NULL once destroyed) or to whichever new stream reuses the struct. Both are
 * safe because destroying a stream first waits for all its work.
 *
 * Wrapped foreign streams (ox_stream_wrap: PyTorch's, CuPy's) are interned
 * instead: one struct per CUstream value, bound to it for good, so that
 * wrapping the stream of every call costs a lookup, destroying a wrapper
 * never waits on the host (the stream's owner decides when it is idle), and
 * a tensor's record of a use on that stream stays true after the wrapper's
 * handle is gone: later work on other streams waits for the foreign stream
 * as it then is. The CUstream must therefore outlive the tensors used on it
 * (PyTorch never destroys its streams; see docs/c-api.md, "Streams").
 */
#include "runtime/runtime.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NULL_ARG(what) oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: %s is NULL", __func__, what)

#if defined(__x86_64__)
#define CPU_ARCH "x86_64"
#elif defined(__aarch64__)
#define CPU_ARCH "aarch64"
#else
#define CPU_ARCH "unknown architecture"
#endif


/* ---------------------------------------------------------------- devices */

static struct ox_device_s cpu_device;
static oxr_stream cpu_stream;
static oxr_errrec cpu_stream_err;
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

static void cpu_init(void) {
  ox_device d = &cpu_device;
  int threads = oxr_cpu_threads();
  d->type = OX_DEVICE_CPU;
  snprintf(d->label, sizeof d->label, "cpu");
  snprintf(d->name, sizeof d->name, "CPU (%s, %d threads)", CPU_ARCH, threads);
  /* Limits as on CUDA GPUs, so a launch valid on the CPU is valid on a GPU. */
  d->max_threads_per_block = 1024;
  d->max_block_dim[0] = d->max_block_dim[1] = 1024;
  d->max_block_dim[2] = 64;
  d->max_grid_dim[0] = 2147483647;
  d->max_grid_dim[1] = d->max_grid_dim[2] = 65535;
  /* 99 KiB: the least any supported GPU (sm_80 and newer) lets a block opt
   * in to (sm_86, sm_89, sm_120), which Oxide does for every kernel above
   * the 48 KiB of static shared memory. The CPU could offer more, but
   * kernels tested on the CPU should fit on any GPU. */
  d->max_shared_per_block = 99 * 1024;
  d->multiprocessors = threads;
  cpu_stream.dev = d;
  cpu_stream.is_default = 1;
  cpu_stream.live = 1;
  cpu_stream.err = &cpu_stream_err;
  cpu_stream.err_d = (CUdeviceptr)(uintptr_t)&cpu_stream_err;
  /* the table's first handle: it cannot run out of memory yet */
  cpu_stream.handle = (ox_stream)(uintptr_t)oxb_handle_new(OXB_H_STREAM, &cpu_stream);
  d->default_stream = &cpu_stream;
}

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t cuda_lock = PTHREAD_MUTEX_INITIALIZER; /* serializes device setup */
static int cuda_count;                   /* devices the driver reports (0: no driver) */
static struct ox_device_s *cuda_devices; /* cuda_count entries */
static unsigned char *cuda_ready;        /* [i] = 1 once cuda_devices[i] is set up (atomic) */

static void cuda_enumerate(void) {
  int n = 0;
  if (!oxr_cuda_available() || oxr_cu.cuDeviceGetCount(&n) != CUDA_SUCCESS || n <= 0)
    return;
  cuda_devices = calloc((size_t)n, sizeof *cuda_devices);
  cuda_ready = calloc((size_t)n, 1);
  if (!cuda_devices || !cuda_ready) {
    free(cuda_devices);
    free(cuda_ready);
    cuda_devices = NULL;
    cuda_ready = NULL;
    return;
  }
  __atomic_store_n(&cuda_count, n, __ATOMIC_RELEASE); /* after cuda_devices: oxr_device_check reads both */
}

/* Allocates a stream's error record where `dev`'s kernels can write it: on
 * CUDA in mapped pinned memory, so the host reads it after a sync without a
 * copy (the device's context must be current). CUDA records come from slabs
 * of ERRREC_SLAB, the first made when the device is set up: wrapping a new
 * foreign stream then calls no CUDA function, which matters inside a graph
 * capture (cuMemHostAlloc is not allowed while a stream is capturing).
 * Records are never freed: stream structs are kept for reuse. */
enum { ERRREC_SLAB = 64 };
static pthread_mutex_t errrec_lock = PTHREAD_MUTEX_INITIALIZER;
static ox_status errrec_alloc(ox_device dev, oxr_errrec **rec, CUdeviceptr *rec_d) {
  if (dev->type == OX_DEVICE_CPU) {
    *rec = calloc(1, sizeof **rec);
    if (!*rec)
      return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory allocating a stream");
    *rec_d = (CUdeviceptr)(uintptr_t)*rec;
    return OX_OK;
  }
  pthread_mutex_lock(&errrec_lock);
  if (!dev->errrec_left) {
    void *p = NULL;
    CUdeviceptr d = 0;
    const char *fn = "cuMemHostAlloc";
    CUresult r = oxr_cu.cuMemHostAlloc(&p, ERRREC_SLAB * sizeof(oxr_errrec),
                                       CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    if (r == CUDA_SUCCESS) {
      memset(p, 0, ERRREC_SLAB * sizeof(oxr_errrec));
      fn = "cuMemHostGetDevicePointer";
      r = oxr_cu.cuMemHostGetDevicePointer(&d, p, 0);
      if (r != CUDA_SUCCESS)
        oxr_cu.cuMemFreeHost(p);
    }
    if (r != CUDA_SUCCESS) {
      pthread_mutex_unlock(&errrec_lock);
      return oxr_cuda_error(r, fn);
    }
    dev->errrec_next = p;
    dev->errrec_next_d = d;
    dev->errrec_left = ERRREC_SLAB;
  }
  *rec = dev->errrec_next++;
  *rec_d = dev->errrec_next_d;
  dev->errrec_next_d += sizeof(oxr_errrec);
  dev->errrec_left--;
  pthread_mutex_unlock(&errrec_lock);
  return OX_OK;
}

static ox_status cuda_attr(ox_device d, CUdevice_attribute a, int *out) {
  CUresult r = oxr_cu.cuDeviceGetAttribute(out, a, d->cu_dev);
  return r == CUDA_SUCCESS ? OX_OK : oxr_cuda_error(r, "cuDeviceGetAttribute");
}

/* Sets up CUDA device `ordinal` (called once, under cuda_lock). */
static ox_status cuda_setup(ox_device d, int ordinal) {
  d->type = OX_DEVICE_CUDA;
  d->ordinal = ordinal;
  snprintf(d->label, sizeof d->label, "cuda:%d", ordinal);
  CUresult r = oxr_cu.cuDeviceGet(&d->cu_dev, ordinal);
  if (r != CUDA_SUCCESS)
    return oxr_cuda_error(r, "cuDeviceGet");
  r = oxr_cu.cuDeviceGetName(d->name, (int)sizeof d->name - 1, d->cu_dev);
  if (r != CUDA_SUCCESS)
    return oxr_cuda_error(r, "cuDeviceGetName");
  int major = 0, minor = 0;
  const struct {
    CUdevice_attribute attr;
    int *out;
  } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &d->max_threads_per_block},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, &d->max_block_dim[0]},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, &d->max_block_dim[1]},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, &d->max_block_dim[2]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, &d->max_grid_dim[0]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, &d->max_grid_dim[1]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, &d->max_grid_dim[2]},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &d->max_shared_per_block},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &d->multiprocessors},
  };
  for (size_t i = 0; i < OXB_COUNT(attrs); i++) {
    ox_status st = cuda_attr(d, attrs[i].attr, attrs[i].out);
    if (st != OX_OK)
      return st;
  }
  d->cc = major * 10 + minor;
  int pools = 0; /* an attribute unknown to old drivers: failure means no */
  if (oxr_cu.cuDeviceGetAttribute(&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                                  d->cu_dev) != CUDA_SUCCESS)
    pools = 0;
  d->mem_pools = pools && oxr_cu.cuMemAllocAsync && oxr_cu.cuMemFreeAsync;

  /* Retained once; a failed setup keeps it, and a retry reuses it. */
  if (!d->cu_ctx && (r = oxr_cu.cuDevicePrimaryCtxRetain(&d->cu_ctx, d->cu_dev)) != CUDA_SUCCESS) {
    d->cu_ctx = NULL;
    return oxr_cuda_error(r, "cuDevicePrimaryCtxRetain");
  }
  ox_status st = oxr_cuda_make_current(d);
  if (st != OX_OK)
    return st;
  if (d->mem_pools && oxr_cu.cuDeviceGetDefaultMemPool && oxr_cu.cuMemPoolSetAttribute) {
    /* By default the pool gives freed memory back to the OS at every sync,
     * which makes the next allocation slow; keep it, as PyTorch's async
     * allocator does. Best effort: allocation works either way. */
    CUmemoryPool pool;
    unsigned long long keep = ~0ull;
    if (oxr_cu.cuDeviceGetDefaultMemPool(&pool, d->cu_dev) == CUDA_SUCCESS)
      (void)oxr_cu.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
  }
  oxr_stream *s = calloc(1, sizeof *s);
  uint64_t h = s ? oxb_handle_new(OXB_H_STREAM, s) : 0;
  if (!h) {
    free(s);
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory setting up %s", d->name);
  }
  st = errrec_alloc(d, &s->err, &s->err_d);
  if (st != OX_OK) {
    oxb_handle_free(h);
    free(s);
    return st;
  }
  s->handle = (ox_stream)(uintptr_t)h;
  s->dev = d;
  s->cu = NULL; /* the legacy default stream */
  s->is_default = 1;
  s->live = 1;
  d->default_stream = s;
  return OX_OK;
}

ox_status ox_device_count(ox_device_type type, int *count) {
  if (!count)
    return NULL_ARG("count");
  *count = 0;
  if (type == OX_DEVICE_CPU) {
    *count = 1;
    return OX_OK;
  }
  if (type != OX_DEVICE_CUDA)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: invalid device type %d", __func__, (int)type);
  if (oxr_cuda_available()) { /* no driver: zero devices, not an error */
    pthread_once(&cuda_once, cuda_enumerate);
    *count = cuda_count;
  }
  return OX_OK;
}

ox_status ox_device_get(ox_device_type type, int ordinal, ox_device *out) {
  if (!out)
    return NULL_ARG("out");
  *out = NULL;
  if (type == OX_DEVICE_CPU) {
    if (ordinal != 0)
      return oxb_set_error(OX_ERR_NO_DEVICE, "no CPU device %d: the CPU is device 0", ordinal);
    pthread_once(&cpu_once, cpu_init);
    *out = &cpu_device;
    return OX_OK;
  }
  if (type != OX_DEVICE_CUDA)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: invalid device type %d", __func__, (int)type);
  ox_status st = oxr_cuda_load();
  if (st != OX_OK)
    return st;
  pthread_once(&cuda_once, cuda_enumerate);
  if (ordinal < 0 || ordinal >= cuda_count)
    return oxb_set_error(OX_ERR_NO_DEVICE, "no CUDA device %d: the driver reports %d", ordinal,
                         cuda_count);
  if (!__atomic_load_n(&cuda_ready[ordinal], __ATOMIC_ACQUIRE)) {
    pthread_mutex_lock(&cuda_lock);
    if (!cuda_ready[ordinal]) {
      st = cuda_setup(&cuda_devices[ordinal], ordinal);
      if (st == OX_OK)
        __atomic_store_n(&cuda_ready[ordinal], 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&cuda_lock);
    if (st != OX_OK)
      return st;
  }
  *out = &cuda_devices[ordinal];
  return OX_OK;
}

bool oxr_cuda_peer(ox_device to, ox_device from) {
  assert(to->type == OX_DEVICE_CUDA && from->type == OX_DEVICE_CUDA);
  if (to == from || from->ordinal >= OXR_MAX_PEERS)
    return false;
  signed char known = __atomic_load_n(&to->peer[from->ordinal], __ATOMIC_ACQUIRE);
  if (known)
    return known > 0;
  const char *env = getenv("OXIDE_PEER");
  int can = 0;
  pthread_mutex_lock(&cuda_lock);
  if (!(env && !strcmp(env, "0")) && oxr_cu.cuDeviceCanAccessPeer && oxr_cu.cuCtxEnablePeerAccess &&
      oxr_cu.cuMemcpyPeerAsync && oxr_cu.cuDeviceCanAccessPeer(&can, to->cu_dev, from->cu_dev) == CUDA_SUCCESS &&
      can && oxr_cuda_make_current(to) == OX_OK) {
    CUresult r = oxr_cu.cuCtxEnablePeerAccess(from->cu_ctx, 0);
    can = r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  } else {
    can = 0;
  }
  __atomic_store_n(&to->peer[from->ordinal], (signed char)(can ? 1 : -1), __ATOMIC_RELEASE);
  pthread_mutex_unlock(&cuda_lock);
  return can;
}

/* Parses "cuda:N" (N decimal, no sign or spaces) into *n. */
static int parse_cuda_ordinal(const char *s, int *n) {
  if (strncmp(s, "cuda:", 5) != 0 || !s[5])
    return 0;
  long v = 0;
  for (const char *p = s + 5; *p; p++) {
    if (*p < '0' || *p > '9' || v > 100000)
      return 0;
    v = v * 10 + (*p - '0');
  }
  *n = (int)v;
  return 1;
}

ox_status ox_device_default(ox_device *out) {
  if (!out)
    return NULL_ARG("out");
  *out = NULL;
  const char *env = getenv("OXIDE_DEVICE");
  if (env && *env) { /* set but empty counts as unset */
    int n = 0;
    ox_status st;
    if (strcmp(env, "cpu") == 0)
      return ox_device_get(OX_DEVICE_CPU, 0, out);
    if (strcmp(env, "cuda") == 0)
      st = ox_device_get(OX_DEVICE_CUDA, 0, out);
    else if (parse_cuda_ordinal(env, &n))
      st = ox_device_get(OX_DEVICE_CUDA, n, out);
    else
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "$OXIDE_DEVICE is '%s'; expected 'cpu', 'cuda' or 'cuda:N'", env);
    if (st != OX_OK) /* the argument is read before the old message is freed */
      return oxb_set_error(st, "$OXIDE_DEVICE is '%s': %s", env, ox_last_error());
    return OX_OK;
  }
  int count = 0;
  if (ox_device_count(OX_DEVICE_CUDA, &count) == OX_OK && count > 0 &&
      ox_device_get(OX_DEVICE_CUDA, 0, out) == OX_OK)
    return OX_OK;
  return ox_device_get(OX_DEVICE_CPU, 0, out);
}

bool oxr_device_check(const char *fn, ox_device d) {
  if (!d) {
    oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: device is NULL", fn);
    return false;
  }
  /* only addresses of the device structs are devices: nothing else is read */
  bool ok = d == &cpu_device && __atomic_load_n(&cpu_device.type, __ATOMIC_ACQUIRE);
  int n = __atomic_load_n(&cuda_count, __ATOMIC_ACQUIRE);
  if (!ok && n > 0 && d >= cuda_devices && d < cuda_devices + n)
    ok = __atomic_load_n(&cuda_ready[d - cuda_devices], __ATOMIC_ACQUIRE);
  if (!ok)
    oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: not a device handle (use ox_device_get)", fn);
  return ok;
}

ox_device_type ox_device_get_type(ox_device d) {
  if (!oxr_device_check(__func__, d))
    return (ox_device_type)0;
  return d->type;
}

int ox_device_ordinal(ox_device d) {
  if (!oxr_device_check(__func__, d))
    return -1;
  return d->ordinal;
}

const char *ox_device_name(ox_device d) {
  if (!oxr_device_check(__func__, d))
    return "";
  return d->name;
}

int ox_device_compute_capability(ox_device d) {
  if (!oxr_device_check(__func__, d))
    return 0;
  return d->cc;
}

int ox_device_multiprocessors(ox_device d) {
  if (!oxr_device_check(__func__, d))
    return 0;
  return d->multiprocessors;
}

/* ---------------------------------------------------------------- streams */

static pthread_mutex_t stream_lock = PTHREAD_MUTEX_INITIALIZER; /* guards free_streams */

oxr_stream *oxr_stream_get(const char *fn, ox_stream h) {
  if (!h) {
    oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: stream is NULL", fn);
    return NULL;
  }
  oxr_stream *s = oxb_handle_get(OXB_H_STREAM, (uint64_t)(uintptr_t)h);
  if (!s)
    oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                  "%s: the stream handle is not live (the stream was destroyed, or it is not a "
                  "stream handle)",
                  fn);
  return s;
}

ox_status oxr_resolve_stream(const char *fn, ox_device dev, ox_stream h, oxr_stream **out) {
  *out = NULL;
  if (!h) {
    assert(dev->default_stream);
    *out = dev->default_stream;
    return OX_OK;
  }
  oxr_stream *s = oxr_stream_get(fn, h);
  if (!s)
    return ox_last_status();
  if (s->dev != dev)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: the stream belongs to device %s, not %s",
                         fn, s->dev->label, dev->label);
  *out = s;
  return OX_OK;
}

/* Puts stream struct `s` (no longer live) on its device's free list. */
static void stream_put(oxr_stream *s) {
  pthread_mutex_lock(&stream_lock);
  s->next_free = s->dev->free_streams;
  s->dev->free_streams = s;
  pthread_mutex_unlock(&stream_lock);
}

/* Takes a stream struct from the free list (or makes one) for `dev` and gives
 * it a new handle; NULL, with the last error set, when out of memory. */
static oxr_stream *stream_take(ox_device dev) {
  pthread_mutex_lock(&stream_lock);
  oxr_stream *s = dev->free_streams;
  if (s)
    dev->free_streams = s->next_free;
  pthread_mutex_unlock(&stream_lock);
  if (!s) {
    s = calloc(1, sizeof *s);
    if (!s) {
      oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory allocating a stream");
      return NULL;
    }
    s->dev = dev;
    if (errrec_alloc(dev, &s->err, &s->err_d) != OX_OK) {
      free(s);
      return NULL;
    }
  }
  s->next_free = NULL;
  uint64_t h = oxb_handle_new(OXB_H_STREAM, s);
  if (!h) {
    stream_put(s);
    oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory allocating a stream handle");
    return NULL;
  }
  s->handle = (ox_stream)(uintptr_t)h;
  return s;
}

/* Ends stream `s`'s handle and keeps the struct for reuse (see the top). */
static void stream_retire(oxr_stream *s) {
  oxb_handle_free((uint64_t)(uintptr_t)s->handle);
  s->handle = NULL;
  s->live = 0;
  stream_put(s);
}

ox_status ox_stream_create(ox_device dev, ox_stream *out) {
  if (!out)
    return NULL_ARG("out");
  *out = NULL;
  if (!oxr_device_check(__func__, dev))
    return ox_last_status();
  if (dev->type == OX_DEVICE_CUDA) {
    ox_status st = oxr_cuda_make_current(dev);
    if (st != OX_OK)
      return st;
  }
  oxr_stream *s = stream_take(dev);
  if (!s)
    return ox_last_status();
  assert(s->dev == dev && !s->live && !s->is_default && !s->err->flag);
  if (dev->type == OX_DEVICE_CUDA) {
    /* Flags 0, not CU_STREAM_NON_BLOCKING: such a stream waits for work on the
     * legacy default stream, where PyTorch and CuPy (by default) and Oxide's
     * default stream queue theirs, so data they produce is complete before
     * kernels here read it, with no events to manage. */
    CUstream cu = NULL;
    CUresult r = oxr_cu.cuStreamCreate(&cu, CU_STREAM_DEFAULT);
    if (r != CUDA_SUCCESS) {
      stream_retire(s);
      return oxr_cuda_error(r, "cuStreamCreate");
    }
    __atomic_store_n(&s->cu, cu, __ATOMIC_RELAXED); /* read by tensor frees on any thread */
  }
  s->live = 1;
  *out = s->handle;
  return OX_OK;
}

ox_status ox_device_stream(ox_device dev, ox_stream *out) {
  if (!out)
    return NULL_ARG("out");
  *out = NULL;
  if (!oxr_device_check(__func__, dev))
    return ox_last_status();
  assert(dev->default_stream);
  *out = dev->default_stream->handle;
  return OX_OK;
}

/* Waits for `s`'s work (the CPU's is done when queued), then reports its error record. */
static ox_status wait_and_check(oxr_stream *s) {
  if (s->dev->type == OX_DEVICE_CUDA) {
    ox_status st = oxr_cuda_make_current(s->dev);
    if (st != OX_OK)
      return st;
    CUresult r = oxr_cu.cuStreamSynchronize(s->cu);
    if (r != CUDA_SUCCESS)
      return oxr_cuda_error(r, "cuStreamSynchronize");
  }
  return oxr_stream_check_error(s);
}

ox_status ox_stream_synchronize(ox_stream h) {
  oxr_stream *s = oxr_stream_get(__func__, h);
  return s ? wait_and_check(s) : ox_last_status();
}

/* Waits for `s`'s work (when `wait`) and retires it (its handle ends; the
 * struct is kept). */
static void stream_destroy(oxr_stream *s, bool wait) {
  ox_device dev = s->dev;
  if (dev->type == OX_DEVICE_CUDA && oxr_cuda_make_current(dev) == OX_OK) {
    /* The wait makes the stream's tensors safe to free on any stream later.
     * A borrowed stream is waited for too, but never destroyed. */
    if (wait)
      (void)oxr_cu.cuStreamSynchronize(s->cu);
    if (!s->borrowed)
      (void)oxr_cu.cuStreamDestroy(s->cu);
    if (s->mark)
      (void)oxr_cu.cuEventDestroy(s->mark);
  }
  s->mark = NULL;
  s->borrowed = 0;
  s->is_default = 0;
  __atomic_store_n(&s->cu, NULL, __ATOMIC_RELAXED);
  memset(s->err, 0, sizeof *s->err); /* an unreported error dies with the stream */
  stream_retire(s);
}

void ox_stream_destroy(ox_stream h) {
  if (!h)
    return;
  oxr_stream *s = oxr_stream_get(__func__, h);
  if (!s || s->is_default)
    return;
  if (!s->interned) {
    stream_destroy(s, true);
    return;
  }
  /* an interned wrapper: the last destroy ends the handle, the struct stays
   * bound to its CUstream (see the top) */
  pthread_mutex_lock(&stream_lock);
  if (s->live && --s->wraps == 0) {
    oxb_handle_free((uint64_t)(uintptr_t)s->handle);
    s->handle = NULL;
    s->live = 0;
  }
  pthread_mutex_unlock(&stream_lock);
}

ox_device ox_stream_device(ox_stream h) {
  oxr_stream *s = oxr_stream_get(__func__, h);
  return s ? s->dev : NULL;
}

/* Finds the interned wrapper of `cu` on `dev` (*out; NULL if there is none
 * yet) and gives it a live handle and one more wrap. OX_ERR_OUT_OF_MEMORY
 * when a handle cannot be made. Under stream_lock. */
static ox_status wrapped_find(ox_device dev, CUstream cu, oxr_stream **out) {
  *out = NULL;
  for (oxr_stream *s = dev->wrapped; s; s = s->next_wrapped) {
    if (s->cu != cu)
      continue;
    if (!s->live) {
      uint64_t h = oxb_handle_new(OXB_H_STREAM, s);
      if (!h)
        return OX_ERR_OUT_OF_MEMORY;
      s->handle = (ox_stream)(uintptr_t)h;
      s->live = 1;
    }
    s->wraps++;
    *out = s;
    return OX_OK;
  }
  return OX_OK;
}

ox_stream oxr_stream_public(oxr_stream *s) {
  if (!s)
    return NULL;
  pthread_mutex_lock(&stream_lock);
  oxr_stream *found = NULL;
  if (!s->live && s->interned)
    (void)wrapped_find(s->dev, s->cu, &found); /* its handle stays: nobody destroys it */
  ox_stream h = s->live ? s->handle : NULL;
  pthread_mutex_unlock(&stream_lock);
  return h;
}

ox_status ox_stream_wrap(ox_device dev, void *cu_stream, ox_stream *out) {
  if (!out)
    return NULL_ARG("out");
  *out = NULL;
  if (!oxr_device_check(__func__, dev))
    return ox_last_status();
  if (dev->type != OX_DEVICE_CUDA)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: only CUDA streams can be wrapped; %s is the CPU",
                         __func__, dev->name);
  CUstream cu = (CUstream)cu_stream;
  /* CU_STREAM_PER_THREAD names a different stream on each thread: its
   * wrappers are not interned (ox_device_per_thread_stream keeps one per
   * thread), and destroying one waits, as for an Oxide stream */
  bool intern = cu != (CUstream)(uintptr_t)0x2;
  oxr_stream *s = NULL;
  if (intern) {
    pthread_mutex_lock(&stream_lock);
    ox_status st = wrapped_find(dev, cu, &s);
    pthread_mutex_unlock(&stream_lock);
    if (st != OX_OK)
      return oxb_set_error(st, "%s: out of memory allocating a stream handle", __func__);
    if (s)
      return (*out = s->handle), OX_OK;
  }
  s = stream_take(dev);
  if (!s)
    return ox_last_status();
  __atomic_store_n(&s->cu, cu, __ATOMIC_RELAXED);
  s->borrowed = 1;
  s->live = 1;
  if (intern) {
    oxr_stream *other;
    pthread_mutex_lock(&stream_lock);
    /* another thread's, made meanwhile (a failed handle leaves it NULL: ours is then used) */
    (void)wrapped_find(dev, cu, &other);
    if (!other) {
      s->interned = 1;
      s->wraps = 1;
      s->next_wrapped = dev->wrapped;
      dev->wrapped = s;
    }
    pthread_mutex_unlock(&stream_lock);
    if (other) {
      stream_destroy(s, false);
      s = other;
    }
  }
  *out = s->handle;
  return OX_OK;
}

/* The calling thread's per-thread stream wrappers, one per CUDA device,
 * retired when the thread exits (a thread's per-thread stream is its own:
 * ownership tracking must tell two threads' apart). The exit does not wait
 * for the stream: a retired struct's frees go to the legacy default stream,
 * which is ordered after every per-thread stream's work anyway. */
enum { PER_THREAD_MAX = 16 };
static pthread_key_t per_thread_key;
static pthread_once_t per_thread_once = PTHREAD_ONCE_INIT;
static void per_thread_exit(void *p) {
  oxr_stream **mine = p;
  for (int i = 0; i < PER_THREAD_MAX; i++)
    if (mine[i])
      stream_destroy(mine[i], false);
  free(mine);
}
static void per_thread_init(void) { (void)pthread_key_create(&per_thread_key, per_thread_exit); }

ox_status ox_device_per_thread_stream(ox_device dev, ox_stream *out) {
  if (!out)
    return NULL_ARG("out");
  *out = NULL;
  if (!oxr_device_check(__func__, dev))
    return ox_last_status();
  if (dev->type != OX_DEVICE_CUDA)
    return ox_device_stream(dev, out);
  pthread_once(&per_thread_once, per_thread_init);
  oxr_stream **mine = pthread_getspecific(per_thread_key);
  int i = dev->ordinal;
  if (mine && i < PER_THREAD_MAX && mine[i])
    return (*out = mine[i]->handle), OX_OK;
  if (!mine && i < PER_THREAD_MAX) {
    mine = calloc(PER_THREAD_MAX, sizeof *mine);
    if (!mine || pthread_setspecific(per_thread_key, mine) != 0) {
      free(mine);
      return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "%s: out of memory", __func__);
    }
  }
  ox_stream h;
  ox_status st = ox_stream_wrap(dev, (void *)(uintptr_t)0x2 /* CU_STREAM_PER_THREAD */, &h);
  if (st != OX_OK)
    return st;
  oxr_stream *s = oxr_stream_get(__func__, h);
  s->is_default = 1; /* never destroyed through the API */
  if (i < PER_THREAD_MAX)
    mine[i] = s;
  *out = h;
  return OX_OK;
}

void *ox_stream_handle(ox_stream h) {
  oxr_stream *s = oxr_stream_get(__func__, h);
  return s ? (void *)__atomic_load_n(&s->cu, __ATOMIC_RELAXED) : NULL;
}

static oxr_error_reporter error_reporter; /* set once by the api layer; read atomically */

void oxr_set_error_reporter(oxr_error_reporter fn) {
  __atomic_store_n(&error_reporter, fn, __ATOMIC_RELEASE);
}

ox_status oxr_stream_peek_error(oxr_stream *s) {
  assert(s && s->err);
  return __atomic_load_n(&s->err->flag, __ATOMIC_ACQUIRE) == 0 ? OX_OK : wait_and_check(s);
}

ox_status oxr_stream_check_error(oxr_stream *s) {
  assert(s && s->err);
  if (__atomic_load_n(&s->err->flag, __ATOMIC_ACQUIRE) == 0)
    return OX_OK;
  oxr_errrec rec = *s->err;
  memset(s->err, 0, sizeof *s->err);
  oxr_error_reporter report = __atomic_load_n(&error_reporter, __ATOMIC_ACQUIRE);
  if (report)
    return report(&rec);
  static const char *const kinds[] = {"read", "write", "atomic"};
  return oxb_set_error(OX_ERR_BOUNDS,
                       "out-of-bounds %s in a kernel (launch tag %u, check site %u): index %llu "
                       "is not below the length %llu",
                       rec.kind < OXB_COUNT(kinds) ? kinds[rec.kind] : "access", rec.tag, rec.site,
                       (unsigned long long)rec.index, (unsigned long long)rec.len);
}

