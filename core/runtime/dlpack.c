/*
 * dlpack.c - DLPack exchange: ox_tensor_from_dlpack and ox_tensor_to_dlpack.
 *
 * The stream rule (as in the Python array API's __dlpack__(stream=...)): the
 * consumer names the stream on which it will use the tensor, and the producer
 * makes that stream wait, on the device, for the producer's pending work on
 * the memory before handing the tensor over. Nothing blocks the host.
 *  - Oxide exporting: ox_tensor_to_dlpack(t, consumer, ...) with a consumer
 *    stream (any stream of t's device; ox_stream_wrap turns a foreign CUstream
 *    into one) makes it wait for Oxide's pending writes to t's memory and
 *    records it as a reader, so that later Oxide writes wait for the work the
 *    consumer has queued on it by then. A NULL consumer means no ordering: the
 *    consumer synchronizes by itself (Python's stream=-1).
 *  - Oxide importing: the caller asked the producer to order its work before
 *    the stream on which Oxide will use the tensor (the binding passes the
 *    Oxide stream's handle); ox_tensor_from_dlpack takes no stream. The
 *    producer's deleter runs after Oxide's pending work on the memory is done
 *    (oxr_storage_release synchronizes before handing foreign memory back).
 * CPU work runs when it is queued, so on the CPU there is nothing to order.
 *
 * Ownership: ox_tensor_from_dlpack owns the managed tensor from the call on.
 * On any refusal it calls the producer's deleter once before returning; on
 * success the storage calls it once with its last reference.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../dlpack/dlpack.h"
#include "runtime/runtime.h"

#define IMPORT "ox_tensor_from_dlpack"
#define EXPORT "ox_tensor_to_dlpack"

/* ---------------------------------------------------------------- dtypes */

static const DLDataType dl_types[OX_DTYPE_COUNT] = {
    [OX_BOOL] = {kDLBool, 8, 1},          [OX_I8] = {kDLInt, 8, 1},
    [OX_I16] = {kDLInt, 16, 1},           [OX_I32] = {kDLInt, 32, 1},
    [OX_I64] = {kDLInt, 64, 1},           [OX_U8] = {kDLUInt, 8, 1},
    [OX_U16] = {kDLUInt, 16, 1},          [OX_U32] = {kDLUInt, 32, 1},
    [OX_U64] = {kDLUInt, 64, 1},          [OX_F16] = {kDLFloat, 16, 1},
    [OX_BF16] = {kDLBfloat, 16, 1},       [OX_F32] = {kDLFloat, 32, 1},
    [OX_F64] = {kDLFloat, 64, 1},         [OX_F8E4M3] = {kDLFloat8_e4m3fn, 8, 1},
    [OX_F8E5M2] = {kDLFloat8_e5m2, 8, 1},
    /* OX_TF32: no DLPack code, and no tensor is ever tf32 (bits 0: never matched) */
};

static const char *dl_code_name(unsigned code) {
  static const char *names[] = {
      "int", "uint", "float", "opaque handle", "bfloat", "complex", "bool", "float8_e3m4",
      "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
      "float8_e5m2fnuz", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"};
  return code < OXB_COUNT(names) ? names[code] : "unknown";
}

static ox_status dtype_from_dl(DLDataType dt, ox_dtype *out) {
  if (dt.lanes != 1)
    return oxb_set_error(OX_ERR_UNSUPPORTED,
                         IMPORT ": vector dtypes are not supported (%s%u with %u lanes); "
                                "lanes must be 1",
                         dl_code_name(dt.code), dt.bits, dt.lanes);
  for (int i = 0; i < OX_DTYPE_COUNT; i++)
    if (dl_types[i].bits && dl_types[i].code == dt.code && dl_types[i].bits == dt.bits) {
      *out = (ox_dtype)i;
      return OX_OK;
    }
  return oxb_set_error(OX_ERR_UNSUPPORTED,
                       IMPORT ": DLPack dtype code %u (%s) with %u bits has no Oxide dtype",
                       dt.code, dl_code_name(dt.code), dt.bits);
}

/* --------------------------------------------------------------- devices */

static ox_status device_from_dl(DLDevice d, ox_device *out) {
  ox_status e;
  switch ((int)d.device_type) {
  case kDLCPU:
    return ox_device_get(OX_DEVICE_CPU, 0, out);
  case kDLCUDA:
    if ((e = ox_device_get(OX_DEVICE_CUDA, d.device_id, out)) != OX_OK)
      return oxb_set_error(e, IMPORT ": the tensor is on CUDA device %d: %s", (int)d.device_id,
                           ox_last_error());
    return OX_OK;
  case kDLCUDAHost:
  case kDLCUDAManaged:
    /* usable in principle (host- and device-addressable), but Oxide's tensors
     * live either on the host or on one GPU; copy on the producer's side */
    return oxb_set_error(OX_ERR_UNSUPPORTED,
                         IMPORT ": CUDA %s memory (DLPack device type %d) is not supported yet; "
                                "export a kDLCPU or kDLCUDA tensor",
                         d.device_type == kDLCUDAHost ? "pinned host" : "managed",
                         (int)d.device_type);
  default:
    return oxb_set_error(OX_ERR_UNSUPPORTED,
                         IMPORT ": DLPack device type %d is not supported (Oxide takes kDLCPU = 1 "
                                "and kDLCUDA = 2)",
                         (int)d.device_type);
  }
}

/* --------------------------------------------------------------- import */

/* Runs fn(arg), which may call into Oxide and reset the last error (a
 * deleter in a round trip), keeping error `e` and its message across it. */
static ox_status keep_error(ox_status e, void (*fn)(void *), void *arg) {
  if (e == OX_OK) {
    fn(arg);
    return e;
  }
  char *msg = strdup(ox_last_error());
  fn(arg);
  e = oxb_set_error_text(e, msg ? msg : "out of memory");
  free(msg);
  return e;
}

static void release_storage(void *st) { oxr_storage_release(st); }

/* True unless every element is provably reached by one index only: sorted by
 * stride, each dimension (of size > 1) must step past everything the smaller
 * ones reach. Stride-0 (broadcast) dimensions fail this, as they should. */
static bool may_overlap(int ndim, const int64_t *shape, const int64_t *strides) {
  int order[OX_MAX_DIMS], n = 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] <= 1)
      continue;
    int j = n++;
    for (; j > 0 && strides[order[j - 1]] > strides[i]; j--)
      order[j] = order[j - 1];
    order[j] = i;
  }
  int64_t reach = 0; /* no overflow: the caller bounded the whole span */
  for (int k = 0; k < n; k++) {
    if (strides[order[k]] <= reach)
      return true;
    reach += (shape[order[k]] - 1) * strides[order[k]];
  }
  return false;
}

/* No 64-bit platform Oxide runs on gives a process addresses at or past
 * 2^57 (x86-64 and RISC-V with 5-level paging: 2^56 or 2^57; aarch64: 2^52;
 * CUDA's unified addresses lie within them). A layout reaching further lies
 * about its memory: refusing it keeps every later extent, offset and
 * size-times-stride product far from int64's range. */
#define ADDRESS_BITS (UINTPTR_MAX > 0xffffffffu ? 57 : 32)
#define ADDRESS_LIMIT ((int64_t)1 << ADDRESS_BITS)

/* Validates the DLTensor and makes the Oxide tensor. On failure nothing owns
 * the managed tensor yet, unless *owned says the storage took it. */
static ox_status import(const DLTensor *dl, uint64_t dl_flags, void (*release)(void *),
                        void *managed, bool *owned, ox_tensor *out) {
  if (dl->ndim < 0)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, IMPORT ": ndim is %d", (int)dl->ndim);
  if (dl->ndim > OX_MAX_DIMS)
    return oxb_set_error(OX_ERR_UNSUPPORTED,
                         IMPORT ": the tensor has %d dimensions; Oxide supports at most %d",
                         (int)dl->ndim, OX_MAX_DIMS);
  int ndim = dl->ndim;
  if (ndim > 0 && !dl->shape)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, IMPORT ": shape is NULL with ndim %d", ndim);
  ox_dtype dtype = OX_DTYPE_COUNT;
  ox_device dev = NULL;
  ox_status e = dtype_from_dl(dl->dtype, &dtype);
  if (e == OX_OK)
    e = device_from_dl(dl->device, &dev);
  if (e != OX_OK)
    return e;
  int64_t es = (int64_t)ox_dtype_size(dtype), shape[OX_MAX_DIMS], strides[OX_MAX_DIMS];
  /* the element count, with empty dimensions taken as 1 so that an empty
   * tensor's shape is bounded too (strides are products of it) */
  int64_t product = 1, bytes;
  bool empty = false, overflow = false;
  for (int i = 0; i < ndim; i++) {
    shape[i] = dl->shape[i];
    if (shape[i] < 0)
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           IMPORT ": shape[%d] is %lld; dimensions must be >= 0", i,
                           (long long)shape[i]);
    empty |= shape[i] == 0;
    overflow |= __builtin_mul_overflow(product, shape[i] ? shape[i] : 1, &product);
  }
  overflow |= __builtin_mul_overflow(product, es, &bytes);
  if (overflow)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         IMPORT ": the tensor's byte size overflows (%d dimensions of %s)", ndim,
                         ox_dtype_name(dtype));
  /* NULL strides: compact row-major (the legacy rule, accepted from 1.x producers too) */
  int64_t next = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    strides[i] = dl->strides ? dl->strides[i] : next;
    next *= shape[i] ? shape[i] : 1; /* bounded by the product above */
  }
  /* the byte span from the first element to the end of the last one,
   * checked dimension by dimension so that the message names the liar */
  int64_t span = empty ? 0 : es, ext;
  for (int i = 0; i < ndim; i++) {
    if (strides[i] < 0) /* before any product with it */
      return oxb_set_error(OX_ERR_UNSUPPORTED,
                           IMPORT ": strides[%d] is %lld; negative strides are not supported (copy "
                                  "the tensor to a non-negative layout first)",
                           i, (long long)strides[i]);
    if (empty)
      continue;
    if (__builtin_mul_overflow(shape[i] - 1, strides[i], &ext) ||
        __builtin_mul_overflow(ext, es, &ext) || ext >= ADDRESS_LIMIT)
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           IMPORT ": the strides overflow the address range: dimension %d (size "
                                  "%lld, stride %lld, of %lld-byte %s elements) spans 2^%d bytes "
                                  "or more",
                           i, (long long)shape[i], (long long)strides[i], (long long)es,
                           ox_dtype_name(dtype), ADDRESS_BITS);
    if (__builtin_add_overflow(span, ext, &span) || span > ADDRESS_LIMIT)
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           IMPORT ": the strides overflow the address range: with dimension %d "
                                  "(size %lld, stride %lld) the tensor spans more than 2^%d bytes",
                           i, (long long)shape[i], (long long)strides[i], ADDRESS_BITS);
  }
  if (!dl->data && !empty)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         IMPORT ": data is NULL but the tensor has %lld elements",
                         (long long)product);
  uint64_t off = dl->byte_offset, end;
  if (off % (uint64_t)es)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         IMPORT ": byte_offset %llu is not a multiple of the %s element size %lld",
                         (unsigned long long)off, ox_dtype_name(dtype), (long long)es);
  if (!dl->data)
    off = 0; /* an empty tensor without memory: keep NULL + 0 */
  /* the end of the last element must be an address, with no wrap-around */
  uint64_t first, last;
  if (__builtin_add_overflow(off, (uint64_t)span, &end) || end > ADDRESS_LIMIT || end > SIZE_MAX ||
      __builtin_add_overflow((uint64_t)(uintptr_t)dl->data, off, &first) ||
      __builtin_add_overflow(first, (uint64_t)span, &last) || last > ADDRESS_LIMIT)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         IMPORT ": byte_offset %llu plus the tensor's span overflows the address "
                                "range (data %p, a span of %lld bytes; addresses end at 2^%d)",
                         (unsigned long long)dl->byte_offset, dl->data, (long long)span,
                         ADDRESS_BITS);
  if (!empty && first % (uint64_t)es) /* an empty tensor's address is never used */
    return oxb_set_error(
        OX_ERR_INVALID_ARGUMENT,
        IMPORT ": the first element's address %p is not aligned to the %s element size %lld",
        (void *)(uintptr_t)first, ox_dtype_name(dtype), (long long)es);
  int flags = 0;
  if ((dl_flags & DLPACK_FLAG_BITMASK_READ_ONLY) || (!empty && may_overlap(ndim, shape, strides)))
    flags |= OXR_T_READ_ONLY; /* overlapping views are read-only, like broadcast views */
  if (dl_flags & DLPACK_FLAG_BITMASK_IS_COPIED)
    flags |= OXR_T_COPIED;
  oxr_storage *st = oxr_storage_foreign(dev, dl->data, (size_t)end, release, managed);
  if (!st)
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, IMPORT ": out of memory");
  *owned = true; /* from here on the storage calls the deleter, once */
  oxr_tensor *t;
  e = oxr_tensor_make(st, dtype, ndim, shape, strides, (int64_t)off, flags, &t);
  if (e != OX_OK)
    e = oxb_set_error(e, IMPORT ": %s", ox_last_error());
  else
    *out = t->handle;
  /* the tensor holds the storage now, or nothing does and it goes */
  return keep_error(e, release_storage, st);
}

/* The storage's release: hands the memory back to the producer. */
static void release_versioned(void *ctx) {
  DLManagedTensorVersioned *m = ctx;
  if (m->deleter)
    m->deleter(m);
}

static void release_legacy(void *ctx) {
  DLManagedTensor *m = ctx;
  if (m->deleter)
    m->deleter(m);
}

ox_status ox_tensor_from_dlpack(void *managed, int versioned, ox_tensor *out) {
  if (out)
    *out = NULL;
  if (!managed)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, IMPORT ": managed is NULL");
  void (*release)(void *) = versioned ? release_versioned : release_legacy;
  bool owned = false;
  ox_status e;
  if (!out) {
    e = oxb_set_error(OX_ERR_INVALID_ARGUMENT, IMPORT ": out is NULL");
  } else if (versioned) {
    DLManagedTensorVersioned *m = managed;
    /* another major version has another layout: touch nothing but the deleter */
    if (m->version.major != DLPACK_MAJOR_VERSION)
      e = oxb_set_error(
          OX_ERR_UNSUPPORTED, IMPORT ": the tensor has DLPack version %u.%u; Oxide speaks %d.%d",
          m->version.major, m->version.minor, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
    else
      e = import(&m->dl_tensor, m->flags, release, managed, &owned, out);
  } else {
    e = import(&((DLManagedTensor *)managed)->dl_tensor, 0, release, managed, &owned, out);
  }
  return e != OX_OK && !owned ? keep_error(e, release, managed) : e;
}

/* --------------------------------------------------------------- export */

typedef struct export_s {
  union { /* first, so that the deleter's argument is the whole struct */
    DLManagedTensorVersioned v;
    DLManagedTensor l;
  } m;
  oxr_tensor *t; /* the reference the exchange holds */
  int64_t shape[OX_MAX_DIMS], strides[OX_MAX_DIMS];
} export_s;

static void export_free(export_s *x) {
  oxr_tensor_release(x->t);
  free(x);
}
static void delete_versioned(DLManagedTensorVersioned *self) { export_free((export_s *)self); }
static void delete_legacy(DLManagedTensor *self) { export_free((export_s *)self); }

ox_status ox_tensor_to_dlpack(ox_tensor h, ox_stream consumer_h, int versioned, void **out) {
  if (!out)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, EXPORT ": out is NULL");
  *out = NULL;
  oxr_tensor *t = oxr_tensor_get(EXPORT, h);
  if (!t)
    return ox_last_status();
  if (!versioned && (t->flags & OXR_T_READ_ONLY))
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         EXPORT ": the tensor is read-only, and a legacy DLManagedTensor cannot "
                                "say so; export it versioned");
  if (consumer_h) {
    oxr_stream *consumer = oxr_stream_get(EXPORT, consumer_h);
    if (!consumer)
      return ox_last_status();
    if (consumer->dev != t->dev)
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           EXPORT ": the consumer stream belongs to another device than the tensor");
    ox_status e = oxr_tensor_use(t, consumer, false);
    if (e != OX_OK)
      return oxb_set_error(e, EXPORT ": ordering the consumer's stream: %s", ox_last_error());
  }
  export_s *x = calloc(1, sizeof *x);
  if (!x)
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, EXPORT ": out of memory");
  oxr_tensor_retain(t);
  x->t = t;
  memcpy(x->shape, t->shape, sizeof x->shape);
  memcpy(x->strides, t->strides, sizeof x->strides);
  DLTensor dl = {
      .data = t->data,
      .device = {t->dev->type == OX_DEVICE_CUDA ? kDLCUDA : kDLCPU,
                 t->dev->type == OX_DEVICE_CUDA ? t->dev->ordinal : 0},
      .ndim = t->ndim,
      .dtype = dl_types[t->dtype],
      .shape = x->shape,
      .strides = x->strides,
      .byte_offset = 0,
  };
  if (versioned) {
    x->m.v = (DLManagedTensorVersioned){
        .version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
        .manager_ctx = t,
        .deleter = delete_versioned,
        /* a tensor imported as a copy is still a copy for the next consumer */
        .flags = ((t->flags & OXR_T_READ_ONLY) ? DLPACK_FLAG_BITMASK_READ_ONLY : 0) |
                 ((t->flags & OXR_T_COPIED) ? DLPACK_FLAG_BITMASK_IS_COPIED : 0),
        .dl_tensor = dl,
    };
  } else {
    x->m.l = (DLManagedTensor){.dl_tensor = dl, .manager_ctx = t, .deleter = delete_legacy};
  }
  *out = x;
  return OX_OK;
}
