/*
 * tensor.c - tensors and their storage: creation, host copies, release, and
 * ownership tracking across streams.
 *
 * Ownership tracking. Each storage remembers the stream of the last write and
 * the streams that read it since. Before work on stream s uses the memory,
 * oxr_tensor_use makes s wait on the device for the other streams' pending
 * work (a write waits for the last write and every read since; a read waits
 * for the last write), then records the use. The wait records a fresh event
 * on the other stream at that moment: it may wait for more than the one
 * write it needs (whatever else was queued there since), never for less, and
 * work that stays on one stream costs nothing.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

#define NULL_ARG(what) oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: %s is NULL", __func__, what)

/* ---------------------------------------------------------------- storage */

static void lock(oxr_storage *st) {
  while (__atomic_test_and_set(&st->lock, __ATOMIC_ACQUIRE))
    ;
}
static void unlock(oxr_storage *st) { __atomic_clear(&st->lock, __ATOMIC_RELEASE); }

ox_status oxr_storage_alloc(ox_device dev, oxr_stream *s, size_t bytes, oxr_storage **out) {
  *out = NULL;
  oxr_storage *st = calloc(1, sizeof *st);
  if (!st)
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  st->refcount = 1;
  st->dev = dev;
  st->bytes = bytes;
  pthread_rwlock_init(&st->access, NULL);
  if (dev->type == OX_DEVICE_CPU) {
    /* 64-byte aligned for vector loads; aligned_alloc needs a multiple of it */
    st->alloc = aligned_alloc(64, bytes ? (bytes + 63) & ~(size_t)63 : 64);
    if (!st->alloc) {
      free(st);
      return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", bytes);
    }
  } else if (bytes > 0) { /* an empty CUDA tensor has no memory: data stays NULL */
    CUdeviceptr p = 0;
    ox_status e = oxr_cuda_make_current(dev);
    if (e == OX_OK) {
      CUresult r = dev->mem_pools ? oxr_cu.cuMemAllocAsync(&p, bytes, s->cu) : oxr_cu.cuMemAlloc(&p, bytes);
      if (r != CUDA_SUCCESS) {
        e = oxr_cuda_error(r, dev->mem_pools ? "cuMemAllocAsync" : "cuMemAlloc");
        e = oxb_set_error(e, "allocating %zu bytes on %s: %s", bytes, dev->name, ox_last_error());
      }
    }
    if (e != OX_OK) {
      free(st);
      return e;
    }
    st->alloc = (void *)(uintptr_t)p;
    st->writer = s; /* stream-ordered: other streams must wait for the allocation */
  }
  *out = st;
  return OX_OK;
}

oxr_storage *oxr_storage_foreign(ox_device dev, void *ptr, size_t bytes, void (*release)(void *),
                                 void *ctx) {
  oxr_storage *st = calloc(1, sizeof *st);
  if (!st)
    return NULL;
  st->refcount = 1;
  st->dev = dev;
  pthread_rwlock_init(&st->access, NULL);
  st->alloc = ptr;
  st->bytes = bytes;
  st->owner_release = release;
  st->owner_ctx = ctx;
  return st;
}

void oxr_storage_retain(oxr_storage *st) { __atomic_fetch_add(&st->refcount, 1, __ATOMIC_RELAXED); }

void oxr_storage_release(oxr_storage *st) {
  if (!st || __atomic_sub_fetch(&st->refcount, 1, __ATOMIC_ACQ_REL) != 0)
    return;
  ox_device dev = st->dev;
  if (dev->type == OX_DEVICE_CUDA && oxr_cuda_make_current(dev) == OX_OK) {
    /* The memory may be reused only after every stream's pending work on it. */
    oxr_stream *last = st->writer ? st->writer : dev->default_stream;
    oxr_stream *back = st->release && st->release->live ? st->release : NULL;
    if (back) {
      /* foreign memory handed back on the producer's stream: that stream
       * waits, on the device, for Oxide's work on it, as the producer's own
       * later use of the memory (a caching allocator's reuse) is ordered
       * there; no host wait, so this is safe inside a graph capture too */
      if (!oxr_ordering_disabled()) {
        (void)oxr_stream_wait_stream(back, st->writer);
        for (int i = 0; i < st->nreaders; i++)
          (void)oxr_stream_wait_stream(back, st->readers[i]);
      }
    } else {
      for (int i = 0; i < st->nreaders; i++)
        (void)oxr_stream_wait_stream(last, st->readers[i]);
    }
    if (st->owner_release) {
      /* without a release stream, foreign memory has no stream-ordered
       * free: wait, then hand it back */
      if (!back)
        (void)oxr_cu.cuStreamSynchronize(__atomic_load_n(&last->cu, __ATOMIC_RELAXED));
    } else if (st->alloc) {
      /* errors are dropped: release cannot fail, and the likely one (a driver
       * shut down at exit) frees everything anyway */
      CUdeviceptr p = (CUdeviceptr)(uintptr_t)st->alloc;
      if (dev->mem_pools)
        (void)oxr_cu.cuMemFreeAsync(p, __atomic_load_n(&last->cu, __ATOMIC_RELAXED));
      else
        (void)oxr_cu.cuMemFree(p);
    }
  } else if (!st->owner_release) {
    free(st->alloc);
  }
  if (st->owner_release)
    st->owner_release(st->owner_ctx);
  pthread_rwlock_destroy(&st->access);
  free(st);
}

/* ------------------------------------------------------------ CPU access */

void oxr_cpu_hold_add(oxr_cpu_hold *h, const oxr_tensor *t, bool write) {
  if (!t || t->dev->type != OX_DEVICE_CPU)
    return;
  for (int i = 0; i < h->n; i++)
    if (h->st[i] == t->storage) {
      h->excl[i] |= write;
      return;
    }
  assert(h->n < OXR_HOLD_MAX);
  h->st[h->n] = t->storage;
  h->excl[h->n++] = write;
}

void oxr_cpu_hold_take(oxr_cpu_hold *h) {
  /* address order (insertion sort: a launch holds a few storages) */
  for (int i = 1; i < h->n; i++)
    for (int j = i; j > 0 && (uintptr_t)h->st[j - 1] > (uintptr_t)h->st[j]; j--) {
      oxr_storage *t = h->st[j];
      bool e = h->excl[j];
      h->st[j] = h->st[j - 1];
      h->excl[j] = h->excl[j - 1];
      h->st[j - 1] = t;
      h->excl[j - 1] = e;
    }
  for (int i = 0; i < h->n; i++)
    (void)(h->excl[i] ? pthread_rwlock_wrlock(&h->st[i]->access)
                      : pthread_rwlock_rdlock(&h->st[i]->access));
}

void oxr_cpu_hold_drop(oxr_cpu_hold *h) {
  for (int i = h->n - 1; i >= 0; i--)
    pthread_rwlock_unlock(&h->st[i]->access);
  h->n = 0;
}

/* --------------------------------------------------------------- tracking */

bool oxr_ordering_disabled(void) {
  static int disabled = -1; /* read once; a benign race sets it to the same value */
  if (__atomic_load_n(&disabled, __ATOMIC_RELAXED) < 0)
    __atomic_store_n(&disabled, getenv("OXIDE_DEBUG_NO_STREAM_ORDERING") != NULL, __ATOMIC_RELAXED);
  return __atomic_load_n(&disabled, __ATOMIC_RELAXED) == 1;
}

bool oxr_stream_capturing(oxr_stream *s) {
  int status = 0;
  if (s->dev->type != OX_DEVICE_CUDA || !oxr_cu.cuStreamIsCapturing)
    return false;
  CUstream cu = __atomic_load_n(&s->cu, __ATOMIC_RELAXED);
  return oxr_cu.cuStreamIsCapturing(cu, &status) == CUDA_SUCCESS && status != 0;
}

ox_status oxr_stream_wait_stream(oxr_stream *s, oxr_stream *other) {
  if (!s || !other || s == other || s->dev->type != OX_DEVICE_CUDA || other->dev->type != OX_DEVICE_CUDA)
    return OX_OK; /* CPU streams run their work when it is queued */
  CUstream scu = __atomic_load_n(&s->cu, __ATOMIC_RELAXED);
  CUstream ocu = __atomic_load_n(&other->cu, __ATOMIC_RELAXED);
  if (scu == ocu && s->dev == other->dev)
    return OX_OK;
  /* the mark belongs to `other`'s context, where it is recorded; a stream of
     any device may wait for it */
  ox_status st = oxr_cuda_make_current(other->dev);
  if (st != OX_OK)
    return st;
  CUevent mark = __atomic_load_n(&other->mark, __ATOMIC_ACQUIRE);
  if (!mark) {
    CUresult r = oxr_cu.cuEventCreate(&mark, 0x2 /* CU_EVENT_DISABLE_TIMING */);
    if (r != CUDA_SUCCESS)
      return oxr_cuda_error(r, "cuEventCreate");
    CUevent expected = NULL;
    if (!__atomic_compare_exchange_n(&other->mark, &expected, mark, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
      oxr_cu.cuEventDestroy(mark); /* another thread made it first */
      mark = expected;
    }
  }
  /* a re-record later does not change what this wait captured */
  CUresult r = oxr_cu.cuEventRecord(mark, ocu);
  if (r == CUDA_SUCCESS && (st = oxr_cuda_make_current(s->dev)) != OX_OK)
    return st;
  if (r == CUDA_SUCCESS)
    r = oxr_cu.cuStreamWaitEvent(scu, mark, 0);
  return r == CUDA_SUCCESS ? OX_OK : oxr_cuda_error(r, "ordering streams (cuEventRecord/cuStreamWaitEvent)");
}

ox_status oxr_tensor_use(oxr_tensor *t, oxr_stream *s, bool write) {
  oxr_storage *st = t->storage;
  if (s->capturing)
    return OX_OK; /* a capture is ordered after the other streams before it starts */
  if (s->dev->type != OX_DEVICE_CUDA) {
    /* The CPU runs work when it is queued: nothing to wait for. The writer
     * is still recorded, so that a host read finds the stream whose pending
     * bounds error concerns this memory (ox_tensor_last_writer). The
     * unlocked load keeps a stream's repeated writes at one load. */
    if (write && __atomic_load_n(&st->writer, __ATOMIC_RELAXED) != s) {
      lock(st);
      __atomic_store_n(&st->writer, s, __ATOMIC_RELAXED);
      unlock(st);
    }
    return OX_OK;
  }
  if (oxr_ordering_disabled())
    return OX_OK;
  /* A foreign stream may be inside someone's graph capture (PyTorch's
   * torch.cuda.graph): waiting there on work recorded outside the capture is
   * not allowed, and the captured work runs only when the graph is launched,
   * ordered by whoever launches it. So no wait, and no record of a use that
   * has not happened (nor of a stream the capture may destroy). One cheap
   * driver query per use, on foreign streams only. */
  if (s->borrowed && oxr_stream_capturing(s))
    return OX_OK;
  oxr_stream *wait[9];
  int n = 0;
  lock(st);
  if (st->writer && st->writer != s)
    wait[n++] = st->writer;
  if (write)
    for (int i = 0; i < st->nreaders; i++)
      if (st->readers[i] != s)
        wait[n++] = st->readers[i];
  unlock(st);
  for (int i = 0; i < n; i++) {
    ox_status e = oxr_stream_wait_stream(s, wait[i]);
    if (e != OX_OK)
      return e;
  }
  lock(st);
  if (write) {
    __atomic_store_n(&st->writer, s, __ATOMIC_RELAXED); /* atomic: the CPU path reads it unlocked */
    st->nreaders = 0;
  } else if (st->writer != s) {
    bool known = false;
    for (int i = 0; i < st->nreaders; i++)
      known |= st->readers[i] == s;
    if (!known && st->nreaders == (int)OXB_COUNT(st->readers)) {
      /* full: s takes over the oldest reader's place, after waiting for it,
       * so that waiting for s later also covers that reader's work so far */
      oxr_stream *old = st->readers[0];
      memmove(st->readers, st->readers + 1, sizeof st->readers[0] * (OXB_COUNT(st->readers) - 1));
      st->nreaders--;
      unlock(st);
      ox_status e = oxr_stream_wait_stream(s, old);
      lock(st);
      if (e != OX_OK) {
        unlock(st);
        return e;
      }
    }
    if (!known && st->nreaders < (int)OXB_COUNT(st->readers))
      st->readers[st->nreaders++] = s;
  }
  unlock(st);
  return OX_OK;
}

/* ---------------------------------------------------------------- tensors */

oxr_tensor *oxr_tensor_get(const char *fn, ox_tensor h) {
  if (!h) {
    oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: tensor is NULL", fn);
    return NULL;
  }
  oxr_tensor *t = oxb_handle_get(OXB_H_TENSOR, (uint64_t)(uintptr_t)h);
  if (!t)
    oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                  "%s: the tensor handle is not live (the tensor was released, or it is not a "
                  "tensor handle)",
                  fn);
  return t;
}

/* "f32 tensor of shape [2, 3]", for messages. */
static const char *describe(ox_dtype dtype, int ndim, const int64_t *shape, char buf[256]) {
  int n = snprintf(buf, 256, "%s tensor of shape [", ox_dtype_name(dtype));
  for (int i = 0; i < ndim && n < 200; i++)
    n += snprintf(buf + n, 256 - (size_t)n, "%s%lld", i ? ", " : "", (long long)shape[i]);
  snprintf(buf + n, 256 - (size_t)n, "]");
  return buf;
}

/* Validates dtype and shape; computes the element count and the contiguous
 * byte size, reporting overflow as an error naming API function `fn`. */
static ox_status layout(const char *fn, ox_dtype dtype, int ndim, const int64_t *shape,
                        int64_t *numel, size_t *bytes) {
  if ((unsigned)dtype >= OX_DTYPE_COUNT)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: invalid dtype %d", fn, (int)dtype);
  if (dtype == OX_TF32) /* every tensor, view and import is made here: none is ever tf32 */
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         "%s: tf32 is a compute type of kernels (casts, dot operands), not a "
                         "tensor dtype; tensors hold f32: make an f32 tensor and cast the "
                         "loaded values with `as tf32`",
                         fn);
  if (ndim < 0 || ndim > OX_MAX_DIMS)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: ndim is %d; it must be 0..%d", fn, ndim,
                         OX_MAX_DIMS);
  if (ndim > 0 && !shape)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: shape is NULL with ndim %d", fn, ndim);
  /* strides multiply the dimensions with 0 taken as 1, so even an empty
   * tensor's shape must keep that product in range */
  int64_t product = 1, size = 0;
  int empty = 0, overflow = 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: shape[%d] is %lld; dimensions must be >= 0",
                           fn, i, (long long)shape[i]);
    empty |= shape[i] == 0;
    overflow |= __builtin_mul_overflow(product, shape[i] ? shape[i] : 1, &product);
  }
  overflow |= __builtin_mul_overflow(product, (int64_t)ox_dtype_size(dtype), &size);
  if (overflow || (uint64_t)size > SIZE_MAX - 64) {
    char desc[256];
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: a %s is too large: its byte size overflows",
                         fn, describe(dtype, ndim, shape, desc));
  }
  *numel = empty ? 0 : product;
  *bytes = empty ? 0 : (size_t)size;
  return OX_OK;
}

ox_status oxr_tensor_make(oxr_storage *st, ox_dtype dtype, int ndim, const int64_t *shape,
                          const int64_t *strides, int64_t offset, int flags, oxr_tensor **out) {
  *out = NULL;
  int64_t numel;
  size_t bytes;
  ox_status e = layout("tensor", dtype, ndim, shape, &numel, &bytes);
  if (e != OX_OK)
    return e;
  int64_t es = (int64_t)ox_dtype_size(dtype);
  if (offset < 0 || offset % es)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         "the byte offset %lld is not a multiple of the %s element size %lld",
                         (long long)offset, ox_dtype_name(dtype), (long long)es);
  /* the last element's byte end must lie in the storage */
  int64_t span = es, ext;
  for (int i = 0; i < ndim && numel; i++) {
    if (strides[i] < 0)
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "negative strides are not supported (dimension %d)", i);
    if (__builtin_mul_overflow(shape[i] - 1, strides[i], &ext) || __builtin_mul_overflow(ext, es, &ext) ||
        __builtin_add_overflow(span, ext, &span))
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "the strides overflow the address range");
  }
  int64_t end;
  if (numel && (__builtin_add_overflow(offset, span, &end) || (uint64_t)end > st->bytes))
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         "the tensor's elements reach byte %lld of a %zu-byte allocation",
                         (long long)(offset + span), st->bytes);
  oxr_tensor *t = calloc(1, sizeof *t);
  uint64_t h = t ? oxb_handle_new(OXB_H_TENSOR, t) : 0;
  if (!h) {
    free(t);
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  }
  t->handle = (ox_tensor)(uintptr_t)h;
  t->refcount = 1;
  t->storage = st;
  oxr_storage_retain(st);
  t->dev = st->dev;
  t->dtype = dtype;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) {
    t->shape[i] = shape[i];
    t->strides[i] = strides[i];
  }
  t->numel = numel;
  t->offset = offset;
  t->data = (char *)st->alloc + offset;
  t->flags = flags;
  *out = t;
  return OX_OK;
}

void oxr_tensor_extent(const oxr_tensor *t, uintptr_t *lo, uintptr_t *hi) {
  uintptr_t base = (uintptr_t)t->data, span = 0;
  if (t->numel) {
    span = ox_dtype_size(t->dtype);
    for (int i = 0; i < t->ndim; i++)
      span += (uintptr_t)((t->shape[i] - 1) * t->strides[i]) * ox_dtype_size(t->dtype);
  }
  *lo = base;
  *hi = base + span;
}

ox_status oxr_tensor_new(const char *fn, ox_device dev, oxr_stream *s, ox_dtype dtype, int ndim,
                         const int64_t *shape, oxr_tensor **out) {
  *out = NULL;
  int64_t numel = 0;
  size_t bytes = 0;
  ox_status e = layout(fn, dtype, ndim, shape, &numel, &bytes);
  if (e != OX_OK)
    return e;
  oxr_storage *st;
  e = oxr_storage_alloc(dev, s, bytes, &st);
  if (e != OX_OK) {
    char desc[256];
    return oxb_set_error(e, "%s: %s (for a %s)", fn, ox_last_error(), describe(dtype, ndim, shape, desc));
  }
  int64_t strides[OX_MAX_DIMS], stride = 1; /* cannot overflow: layout checked the product */
  for (int i = ndim - 1; i >= 0; i--) {
    strides[i] = stride;
    stride *= shape[i] ? shape[i] : 1;
  }
  e = oxr_tensor_make(st, dtype, ndim, shape, strides, 0, 0, out);
  oxr_storage_release(st); /* the tensor holds it now (or nothing does) */
  return e;
}

static size_t tensor_bytes(const oxr_tensor *t) { return (size_t)t->numel * ox_dtype_size(t->dtype); }

bool oxr_tensor_dense(const oxr_tensor *t) {
  if (t->numel == 0)
    return true;
  int64_t expect = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->strides[i] != expect)
      return false;
    expect *= t->shape[i];
  }
  return true;
}

/* Checks a host copy's tensor, byte count and pointer. */
static ox_status check_host_copy(const char *fn, const oxr_tensor *t, const void *host, size_t bytes) {
  size_t want = tensor_bytes(t);
  char desc[256];
  if (bytes != want)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         "%s: the host buffer has %zu bytes but the %s has %zu bytes", fn, bytes,
                         describe(t->dtype, t->ndim, t->shape, desc), want);
  if (!host && bytes)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: the host pointer is NULL", fn);
  if (!oxr_tensor_dense(t))
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         "%s: the tensor is not contiguous; copy it with ox_tensor_to first", fn);
  return OX_OK;
}

/* Copies between host memory and `t` on `s` (resolved) and waits for it. */
static ox_status host_copy(oxr_tensor *t, oxr_stream *s, void *host, size_t bytes, bool to_device) {
  ox_status e = oxr_tensor_use(t, s, to_device);
  if (e != OX_OK || bytes == 0)
    return e;
  if (t->dev->type == OX_DEVICE_CPU) {
    oxr_cpu_hold hold = {0};
    oxr_cpu_hold_add(&hold, t, to_device);
    oxr_cpu_hold_take(&hold);
    if (to_device)
      memcpy(t->data, host, bytes);
    else
      memcpy(host, t->data, bytes);
    oxr_cpu_hold_drop(&hold);
    return OX_OK;
  }
  e = oxr_cuda_make_current(t->dev);
  if (e != OX_OK)
    return e;
  CUdeviceptr d = (CUdeviceptr)(uintptr_t)t->data;
  CUresult r = to_device ? oxr_cu.cuMemcpyHtoDAsync(d, host, bytes, s->cu)
                         : oxr_cu.cuMemcpyDtoHAsync(host, d, bytes, s->cu);
  if (r != CUDA_SUCCESS)
    return oxr_cuda_error(r, to_device ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync");
  r = oxr_cu.cuStreamSynchronize(s->cu);
  return r == CUDA_SUCCESS ? OX_OK : oxr_cuda_error(r, "cuStreamSynchronize");
}

/* A new contiguous tensor for API function `fn`: checks the arguments and
 * gives the tensor to the caller as a handle. */
static ox_status tensor_new(const char *fn, ox_device dev, ox_stream sh, ox_dtype dtype, int ndim,
                            const int64_t *shape, oxr_tensor **t, ox_tensor *out) {
  if (!out)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
  *out = NULL;
  *t = NULL;
  oxr_stream *s;
  if (!oxr_device_check(fn, dev))
    return ox_last_status();
  ox_status e = oxr_resolve_stream(fn, dev, sh, &s);
  if (e == OX_OK)
    e = oxr_tensor_new(fn, dev, s, dtype, ndim, shape, t);
  if (e == OX_OK)
    *out = (*t)->handle;
  return e;
}

ox_status ox_tensor_empty(ox_device dev, ox_stream s, ox_dtype dtype, int ndim,
                          const int64_t *shape, ox_tensor *out) {
  oxr_tensor *t;
  return tensor_new(__func__, dev, s, dtype, ndim, shape, &t, out);
}

ox_status ox_tensor_from_host(ox_device dev, ox_stream sh, ox_dtype dtype, int ndim,
                              const int64_t *shape, const void *host, size_t bytes,
                              ox_tensor *out) {
  oxr_tensor *t;
  ox_status e = tensor_new(__func__, dev, sh, dtype, ndim, shape, &t, out);
  if (e != OX_OK)
    return e;
  oxr_stream *s;
  e = oxr_resolve_stream(__func__, dev, sh, &s);
  if (e == OX_OK)
    e = check_host_copy(__func__, t, host, bytes);
  if (e == OX_OK)
    e = host_copy(t, s, (void *)host, bytes, true);
  if (e != OX_OK) {
    oxr_tensor_release(t);
    *out = NULL;
  }
  return e;
}

ox_status ox_tensor_copy_from_host(ox_tensor h, ox_stream sh, const void *src, size_t bytes) {
  oxr_tensor *t = oxr_tensor_get(__func__, h);
  oxr_stream *s;
  if (!t)
    return ox_last_status();
  ox_status e = check_host_copy(__func__, t, src, bytes);
  if (e == OX_OK)
    e = oxr_resolve_stream(__func__, t->dev, sh, &s);
  if (e == OX_OK && (t->flags & OXR_T_READ_ONLY))
    e = oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: the tensor is read-only", __func__);
  return e == OX_OK ? host_copy(t, s, (void *)src, bytes, true) : e;
}

ox_status ox_tensor_to_host(ox_tensor h, ox_stream sh, void *dst, size_t bytes) {
  oxr_tensor *t = oxr_tensor_get(__func__, h);
  oxr_stream *s;
  if (!t)
    return ox_last_status();
  ox_status e = check_host_copy(__func__, t, dst, bytes);
  if (e == OX_OK)
    e = oxr_resolve_stream(__func__, t->dev, sh, &s);
  if (e == OX_OK)
    e = host_copy(t, s, dst, bytes, false);
  /* The read's stream's pending kernel error is reported (and consumed) here, as Python's
     reads do: a kernel's out-of-bounds access that left the data partial raises at the read
     that would see it, not at some later synchronize. The tensor's last writer, when another
     stream, is not synchronized here: its owner may destroy it concurrently (its error comes
     at its own synchronize). */
  return e == OX_OK ? oxr_stream_check_error(s) : e;
}

void oxr_tensor_retain(oxr_tensor *t) {
  int before = __atomic_fetch_add(&t->refcount, 1, __ATOMIC_RELAXED);
  assert(before > 0 && "retain of a released tensor");
  OXB_UNUSED(before);
}

void oxr_tensor_release(oxr_tensor *t) {
  if (!t)
    return;
  int left = __atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL);
  assert(left >= 0 && "tensor released more often than retained");
  if (left != 0)
    return;
  oxb_handle_free((uint64_t)(uintptr_t)t->handle); /* later use of the handle is refused */
  oxr_storage_release(t->storage);
  free(t);
}

ox_status ox_tensor_set_release_stream(ox_tensor h, ox_stream s) {
  oxr_tensor *t = oxr_tensor_get(__func__, h);
  if (!t)
    return ox_last_status();
  oxr_storage *st = t->storage;
  if (!st->owner_release)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         "%s: the tensor's memory is Oxide's own; a release stream is for memory "
                         "imported from another library (DLPack)",
                         __func__);
  oxr_stream *rs = NULL;
  if (s && !(rs = oxr_stream_get(__func__, s)))
    return ox_last_status();
  if (rs && rs->dev != st->dev)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: the stream is on %s, the tensor on %s",
                         __func__, rs->dev->name, st->dev->name);
  lock(st);
  st->release = rs;
  unlock(st);
  return OX_OK;
}

ox_status ox_tensor_last_writer(ox_tensor h, ox_stream *out) {
  if (!out)
    return NULL_ARG("out");
  *out = NULL;
  oxr_tensor *t = oxr_tensor_get(__func__, h);
  if (!t)
    return ox_last_status();
  oxr_storage *st = t->storage;
  lock(st);
  oxr_stream *w = st->writer;
  unlock(st);
  /* a destroyed stream waited for its work when it went; its struct may
   * serve another stream since, which then is live again (and waiting for
   * it is harmless, if more than needed). A foreign stream's wrapper did not
   * wait: it gets a handle again. */
  *out = oxr_stream_public(w);
  return OX_OK;
}

void ox_tensor_retain(ox_tensor h) {
  oxr_tensor *t = oxr_tensor_get(__func__, h);
  if (t)
    oxr_tensor_retain(t);
}

void ox_tensor_release(ox_tensor h) {
  if (!h)
    return;
  oxr_tensor_release(oxr_tensor_get(__func__, h));
}

#define GETTER(type, name, field, bad)                                                        \
  type name(ox_tensor h) {                                                                    \
    const oxr_tensor *t = oxr_tensor_get(__func__, h);                                        \
    return t ? field : bad;                                                                   \
  }

GETTER(ox_dtype, ox_tensor_dtype, t->dtype, OX_DTYPE_COUNT)
GETTER(int, ox_tensor_ndim, t->ndim, -1)
GETTER(const int64_t *, ox_tensor_shape, t->shape, NULL)
GETTER(int64_t, ox_tensor_numel, t->numel, 0)
GETTER(size_t, ox_tensor_nbytes, tensor_bytes(t), 0)
GETTER(ox_device, ox_tensor_device, t->dev, NULL)
GETTER(void *, ox_tensor_data, t->data, NULL)
