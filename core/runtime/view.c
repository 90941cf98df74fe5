/*
 * view.c - views: new tensor handles on an existing tensor's storage with
 * another shape, strides or byte offset (slice, reshape, permute, transpose,
 * broadcast_to, partition), and the layout queries.
 *
 * A view never copies and never touches the device: it is pure arithmetic on
 * (shape, strides, offset), and oxr_tensor_make checks that the result stays
 * inside the storage. Strides are in elements and never negative. Every view
 * inherits OXR_T_READ_ONLY and OXR_T_COPIED; only ox_tensor_partition sets
 * OXR_T_PARTITION (a view of a partition is a plain tensor again: its tiles
 * would no longer line up with its dimensions).
 */
#include "runtime/runtime.h"

#include <stdio.h>
#include <string.h>

#define INVALID(...) oxb_set_error(OX_ERR_INVALID_ARGUMENT, __VA_ARGS__)

const char *oxr_dims_str(int n, const int64_t *d, char buf[200]) {
  int k = snprintf(buf, 200, "[");
  for (int i = 0; i < n && k < 170; i++)
    k += snprintf(buf + k, 200 - (size_t)k, "%s%lld", i ? ", " : "", (long long)d[i]);
  snprintf(buf + k, 200 - (size_t)k, "]");
  return buf;
}

/* Checks the tensor and out arguments every view takes; *t is the tensor. */
static ox_status check_args(const char *fn, ox_tensor h, ox_tensor *out, oxr_tensor **t) {
  if (!out)
    return INVALID("%s: out is NULL", fn);
  *out = NULL;
  *t = oxr_tensor_get(fn, h);
  return *t ? OX_OK : ox_last_status();
}

/* A view of t's storage; keeps READ_ONLY and COPIED (the memory's
 * properties, not the layout's) and adds `flags`. The view is *v, its
 * handle *out. */
static ox_status view_tile(const oxr_tensor *t, int ndim, const int64_t *shape,
                           const int64_t *strides, int64_t offset, int flags, const int64_t *tile,
                           ox_tensor *out) {
  oxr_tensor *v;
  ox_status st = oxr_tensor_make(t->storage, t->dtype, ndim, shape, strides, offset,
                                 (t->flags & (OXR_T_READ_ONLY | OXR_T_COPIED)) | flags, &v);
  if (st != OX_OK)
    return st;
  if (tile)
    memcpy(v->tile, tile, sizeof(int64_t) * (size_t)ndim);
  *out = v->handle;
  return OX_OK;
}

static ox_status make_view(const oxr_tensor *t, int ndim, const int64_t *shape,
                           const int64_t *strides, int64_t offset, int flags, ox_tensor *out) {
  return view_tile(t, ndim, shape, strides, offset, flags, NULL, out);
}

ox_status ox_tensor_slice(ox_tensor h, int dim, int64_t start, int64_t stop, int64_t step,
                          ox_tensor *out) {
  oxr_tensor *t;
  ox_status st = check_args(__func__, h, out, &t);
  if (st != OX_OK)
    return st;
  char b[200];
  if (dim < 0 || dim >= t->ndim)
    return INVALID("%s: dim %d is out of range for a tensor of %d dimension%s (shape %s)", __func__,
                   dim, t->ndim, t->ndim == 1 ? "" : "s", oxr_dims_str(t->ndim, t->shape, b));
  if (step <= 0)
    return INVALID("%s: step is %lld; it must be > 0 (negative strides are not supported)",
                   __func__, (long long)step);
  int64_t n = t->shape[dim];
  if (start < 0 || stop < start || stop > n)
    return INVALID("%s: start %lld, stop %lld along dim %d of size %lld; they must satisfy "
                   "0 <= start <= stop <= %lld",
                   __func__, (long long)start, (long long)stop, dim, (long long)n, (long long)n);
  int64_t shape[OX_MAX_DIMS], strides[OX_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  memcpy(strides, t->strides, sizeof strides);
  int64_t len = stop - start;
  shape[dim] = len / step + (len % step != 0);
  /* An empty result keeps the old offset and strides (its start may be the
   * end of the storage). A non-empty one's first element, and its second
   * along `dim`, lie in the storage, so the products below fit; they are
   * checked all the same, as nothing here trusts a layout. */
  bool empty = false;
  for (int i = 0; i < t->ndim; i++)
    empty |= shape[i] == 0;
  int64_t offset = t->offset, skip;
  if (!empty) {
    if (__builtin_mul_overflow(start, t->strides[dim], &skip) ||
        __builtin_mul_overflow(skip, (int64_t)ox_dtype_size(t->dtype), &skip) ||
        __builtin_add_overflow(offset, skip, &offset) ||
        (shape[dim] > 1 && __builtin_mul_overflow(t->strides[dim], step, &strides[dim])))
      return INVALID("%s: start %lld or step %lld times stride %lld of dim %d overflows", __func__,
                     (long long)start, (long long)step, (long long)t->strides[dim], dim);
  }
  return make_view(t, t->ndim, shape, strides, offset, 0, out);
}

/* Strides that view t as nshape without moving an element, or *copy set.
 * The usual rule (as PyTorch's computeStride): the old dimensions fall into
 * chunks that are contiguous with each other (stride[i] == stride[i+1] *
 * shape[i+1], size-1 dimensions ignored); a new dimension may merge or split
 * dimensions only within one chunk. A product that overflows is refused, not
 * wrapped: a size-1 dimension may carry any stride, even a huge one. */
static ox_status view_strides(const char *fn, const oxr_tensor *t, int nnd, const int64_t *nshape,
                              int64_t *nstrides, bool *copy) {
  int ond = t->ndim;
  const int64_t *oshape = t->shape, *ostrides = t->strides;
  char b[200];
  *copy = false;
  if (t->numel == 0 || ond == 0) { /* nothing to keep in place: contiguous strides */
    int64_t st = 1;
    for (int i = nnd - 1; i >= 0; i--) {
      nstrides[i] = st;
      if (__builtin_mul_overflow(st, nshape[i] ? nshape[i] : 1, &st))
        return INVALID("%s: shape %s has too many elements", fn, oxr_dims_str(nnd, nshape, b));
    }
    return OX_OK;
  }
  int vd = nnd - 1, chunk_dim = ond - 1; /* the old dimension whose stride steps the chunk */
  int64_t tnumel = 1, vnumel = 1, step;
  for (int td = ond - 1; td >= 0; td--) {
    if (__builtin_mul_overflow(tnumel, oshape[td], &tnumel))
      return INVALID("%s: shape %s has too many elements", fn, oxr_dims_str(ond, oshape, b));
    /* a stride cannot equal a product that does not fit: the chunk ends */
    if (td == 0 || (oshape[td - 1] != 1 &&
                    (__builtin_mul_overflow(tnumel, ostrides[chunk_dim], &step) ||
                     ostrides[td - 1] != step))) {
      /* the end of a chunk: the new dimensions up to its element count */
      while (vd >= 0 && (vnumel < tnumel || nshape[vd] == 1)) {
        if (__builtin_mul_overflow(vnumel, ostrides[chunk_dim], &nstrides[vd]))
          return INVALID("%s: the stride of new dimension %d (%lld times stride %lld of dimension "
                         "%d) overflows",
                         fn, vd, (long long)vnumel, (long long)ostrides[chunk_dim], chunk_dim);
        if (__builtin_mul_overflow(vnumel, nshape[vd], &vnumel))
          return INVALID("%s: shape %s has too many elements", fn, oxr_dims_str(nnd, nshape, b));
        vd--;
      }
      if (vnumel != tnumel) {
        *copy = true;
        return OX_OK;
      }
      if (td > 0) {
        chunk_dim = td - 1;
        tnumel = vnumel = 1;
      }
    }
  }
  *copy = vd != -1;
  return OX_OK;
}

ox_status ox_tensor_reshape(ox_tensor h, int ndim, const int64_t *shape, ox_tensor *out) {
  oxr_tensor *t;
  ox_status st = check_args(__func__, h, out, &t);
  if (st != OX_OK)
    return st;
  if (ndim < 0 || ndim > OX_MAX_DIMS)
    return INVALID("%s: ndim is %d; it must be 0..%d", __func__, ndim, OX_MAX_DIMS);
  if (ndim > 0 && !shape)
    return INVALID("%s: shape is NULL with ndim %d", __func__, ndim);
  char b[200], b2[200];
  int64_t nshape[OX_MAX_DIMS], nstrides[OX_MAX_DIMS], known = 1;
  int infer = -1;
  for (int i = 0; i < ndim; i++) {
    nshape[i] = shape[i];
    if (shape[i] == -1 && infer < 0) {
      infer = i;
      continue;
    }
    if (shape[i] == -1)
      return INVALID("%s: shape %s: only one dimension may be -1", __func__,
                     oxr_dims_str(ndim, shape, b));
    if (shape[i] < 0)
      return INVALID("%s: shape %s: dimension %d is %lld; dimensions must be >= 0 (or one -1)",
                     __func__, oxr_dims_str(ndim, shape, b), i, (long long)shape[i]);
    /* 0 counts as 1 for the overflow bound, as in the strides of an empty tensor */
    if (__builtin_mul_overflow(known, shape[i] ? shape[i] : 1, &known))
      return INVALID("%s: shape %s has too many elements", __func__, oxr_dims_str(ndim, shape, b));
  }
  bool zero = false;
  for (int i = 0; i < ndim; i++)
    zero |= nshape[i] == 0;
  if (infer >= 0) {
    if (zero)
      return INVALID("%s: cannot infer the -1 dimension of %s for %lld elements: with a 0 "
                     "dimension it could be any size",
                     __func__, oxr_dims_str(ndim, shape, b), (long long)t->numel);
    if (t->numel % known != 0)
      return INVALID("%s: cannot reshape a tensor of shape %s (%lld elements) into %s",
                     __func__, oxr_dims_str(t->ndim, t->shape, b), (long long)t->numel,
                     oxr_dims_str(ndim, shape, b2));
    nshape[infer] = t->numel / known;
  }
  int64_t numel = zero ? 0 : infer >= 0 ? t->numel : known;
  if (numel != t->numel)
    return INVALID("%s: cannot reshape a tensor of shape %s (%lld elements) into %s "
                   "(%lld elements)",
                   __func__, oxr_dims_str(t->ndim, t->shape, b), (long long)t->numel,
                   oxr_dims_str(ndim, nshape, b2), (long long)numel);
  bool copy;
  if ((st = view_strides(__func__, t, ndim, nshape, nstrides, &copy)) != OX_OK)
    return st;
  if (copy) {
    char b3[200];
    return INVALID("%s: reshape of a non-contiguous tensor needs a copy (ox_tensor_to): shape %s "
                   "with strides %s cannot be viewed as %s",
                   __func__, oxr_dims_str(t->ndim, t->shape, b), oxr_dims_str(t->ndim, t->strides, b3),
                   oxr_dims_str(ndim, nshape, b2));
  }
  return make_view(t, ndim, nshape, nstrides, t->offset, 0, out);
}

ox_status ox_tensor_permute(ox_tensor h, const int *perm, ox_tensor *out) {
  oxr_tensor *t;
  ox_status st = check_args(__func__, h, out, &t);
  if (st != OX_OK)
    return st;
  if (t->ndim > 0 && !perm)
    return INVALID("%s: perm is NULL for a tensor of %d dimensions", __func__, t->ndim);
  int64_t shape[OX_MAX_DIMS], strides[OX_MAX_DIMS];
  unsigned seen = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (perm[i] < 0 || perm[i] >= t->ndim || (seen >> perm[i] & 1)) {
      char b[200];
      int n = snprintf(b, sizeof b, "[");
      for (int j = 0; j < t->ndim; j++)
        n += snprintf(b + n, sizeof b - (size_t)n, "%s%d", j ? ", " : "", perm[j]);
      snprintf(b + n, sizeof b - (size_t)n, "]");
      return INVALID("%s: perm %s is not a permutation of 0..%d: %d is %s", __func__, b,
                     t->ndim - 1, perm[i],
                     perm[i] < 0 || perm[i] >= t->ndim ? "out of range" : "repeated");
    }
    seen |= 1u << perm[i];
    shape[i] = t->shape[perm[i]];
    strides[i] = t->strides[perm[i]];
  }
  return make_view(t, t->ndim, shape, strides, t->offset, 0, out);
}

ox_status ox_tensor_transpose(ox_tensor h, int dim0, int dim1, ox_tensor *out) {
  oxr_tensor *t;
  ox_status st = check_args(__func__, h, out, &t);
  if (st != OX_OK)
    return st;
  if (dim0 < 0 || dim0 >= t->ndim || dim1 < 0 || dim1 >= t->ndim)
    return INVALID("%s: dims %d and %d: a tensor of %d dimension%s has dims 0..%d", __func__, dim0,
                   dim1, t->ndim, t->ndim == 1 ? "" : "s", t->ndim - 1);
  int perm[OX_MAX_DIMS];
  for (int i = 0; i < t->ndim; i++)
    perm[i] = i;
  perm[dim0] = dim1;
  perm[dim1] = dim0;
  int64_t shape[OX_MAX_DIMS], strides[OX_MAX_DIMS];
  for (int i = 0; i < t->ndim; i++) {
    shape[i] = t->shape[perm[i]];
    strides[i] = t->strides[perm[i]];
  }
  return make_view(t, t->ndim, shape, strides, t->offset, 0, out);
}

ox_status ox_tensor_broadcast_to(ox_tensor h, int ndim, const int64_t *shape, ox_tensor *out) {
  oxr_tensor *t;
  ox_status st = check_args(__func__, h, out, &t);
  if (st != OX_OK)
    return st;
  char b[200], b2[200];
  if (ndim < t->ndim || ndim > OX_MAX_DIMS)
    return INVALID("%s: ndim is %d; it must be %d..%d (at least the tensor's)", __func__, ndim,
                   t->ndim, OX_MAX_DIMS);
  if (ndim > 0 && !shape)
    return INVALID("%s: shape is NULL with ndim %d", __func__, ndim);
  int64_t strides[OX_MAX_DIMS];
  int lead = ndim - t->ndim; /* missing leading dimensions */
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return INVALID("%s: shape %s: dimension %d is %lld; dimensions must be >= 0", __func__,
                     oxr_dims_str(ndim, shape, b), i, (long long)shape[i]);
    int j = i - lead;
    if (j < 0 || (t->shape[j] == 1 && shape[i] != 1))
      strides[i] = 0;
    else if (t->shape[j] == shape[i])
      strides[i] = t->strides[j];
    else
      return INVALID("%s: cannot broadcast shape %s to %s: dimension %d has size %lld, which "
                     "is neither %lld nor 1",
                     __func__, oxr_dims_str(t->ndim, t->shape, b), oxr_dims_str(ndim, shape, b2), j,
                     (long long)t->shape[j], (long long)shape[i]);
  }
  /* Read-only: stride 0 makes many elements one memory location. */
  return make_view(t, ndim, shape, strides, t->offset, OXR_T_READ_ONLY, out);
}

ox_status ox_tensor_partition(ox_tensor h, int ndim, const int64_t *tile, ox_tensor *out) {
  oxr_tensor *t;
  ox_status st = check_args(__func__, h, out, &t);
  if (st != OX_OK)
    return st;
  if (t->ndim == 0)
    return INVALID("%s: a tensor of 0 dimensions cannot be partitioned", __func__);
  if (ndim != t->ndim)
    return INVALID("%s: %d tile sizes for a tensor of %d dimensions; give one per dimension",
                   __func__, ndim, t->ndim);
  if (!tile)
    return INVALID("%s: tile is NULL", __func__);
  char b[200];
  for (int i = 0; i < ndim; i++)
    if (tile[i] <= 0)
      return INVALID("%s: tile %s: size %lld along dimension %d; tile sizes must be > 0",
                     __func__, oxr_dims_str(ndim, tile, b), (long long)tile[i], i);
  return view_tile(t, t->ndim, t->shape, t->strides, t->offset, OXR_T_PARTITION, tile, out);
}

int ox_tensor_partition_grid(ox_tensor h, int64_t *grid) {
  const oxr_tensor *t = oxr_tensor_get(__func__, h);
  if (!t)
    return 0;
  if (!(t->flags & OXR_T_PARTITION))
    return 0;
  for (int i = 0; grid && i < t->ndim; i++) /* ceil without overflow */
    grid[i] = t->shape[i] / t->tile[i] + (t->shape[i] % t->tile[i] != 0);
  return t->ndim;
}

const int64_t *ox_tensor_strides(ox_tensor h) {
  const oxr_tensor *t = oxr_tensor_get(__func__, h);
  if (!t)
    return NULL;
  return t->strides;
}

int ox_tensor_is_contiguous(ox_tensor h) {
  const oxr_tensor *t = oxr_tensor_get(__func__, h);
  if (!t)
    return 0;
  return oxr_tensor_dense(t);
}

int ox_tensor_is_read_only(ox_tensor h) {
  const oxr_tensor *t = oxr_tensor_get(__func__, h);
  if (!t)
    return 0;
  return (t->flags & OXR_T_READ_ONLY) != 0;
}
