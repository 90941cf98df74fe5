/* args.c - a launch's arguments, as SIMT launches (launch.c) and tile
 * launches (tile_launch.c) both take them: their tensors' handles, the check
 * that no mutable argument overlaps another, the bits of scalars, and the
 * device the tensors put the launch on. */
#include <string.h>

#include "api/api.h"

const char *oxa_pkind_name(oxi_pkind k) {
  switch (k) {
  case OXI_P_SLICE: return "&[T]";
  case OXI_P_MUTSLICE: return "&mut [T]";
  case OXI_P_ATOMIC: return "&[Atomic<T>]";
  case OXI_P_DISJOINT: return "DisjointSlice<T>";
  case OXI_P_TENSOR: return "&Tensor";
  case OXI_P_TILE: return "&mut Tensor";
  case OXI_P_ATENSOR: return "&Tensor<Atomic<T>>";
  default: return "scalar";
  }
}

bool oxa_mutable_kind(oxi_pkind k) {
  return k == OXI_P_MUTSLICE || k == OXI_P_DISJOINT || k == OXI_P_ATOMIC || k == OXI_P_TILE ||
         k == OXI_P_ATENSOR;
}

/* A mutable argument must not overlap any other argument: the kernel was
 * compiled assuming it does not (noalias), and the promise that each element
 * has one writer (DisjointSlice, an output partition) would not hold. */
ox_status oxa_check_overlap(const oxi_kernel *ki, oxr_tensor *const *tens, int nargs) {
  for (int i = 0; i < nargs; i++) {
    const oxi_param *p = ki->params.items[i];
    if (!oxa_mutable_kind(p->kind))
      continue;
    uintptr_t lo, hi;
    oxr_tensor_extent(tens[i], &lo, &hi);
    for (int j = 0; j < nargs; j++) {
      const oxi_param *q = ki->params.items[j];
      if (j == i || q->kind == OXI_P_SCALAR)
        continue;
      uintptr_t lo2, hi2;
      oxr_tensor_extent(tens[j], &lo2, &hi2);
      if (lo < hi2 && lo2 < hi)
        return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                             "kernel '%s': argument %d ('%s', %s) overlaps argument %d ('%s'); a "
                             "mutable argument must not share memory with any other",
                             ki->name, i + 1, p->name, oxa_pkind_name(p->kind), j + 1, q->name);
    }
  }
  return OX_OK;
}

ox_status oxa_arg_tensors(const oxa_kernel *k, const ox_arg *args, int nargs, oxr_tensor **tens) {
  const char *kn = k->ir->name;
  if (nargs < 0 || nargs > OXA_MAX_PARAMS)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s': %d arguments (at most %d)", kn, nargs,
                         OXA_MAX_PARAMS);
  if (nargs && !args)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s': args is NULL", kn);
  for (int i = 0; i < nargs; i++) {
    tens[i] = NULL;
    if (args[i].kind != OX_ARG_TENSOR || !args[i].v.tensor)
      continue;
    tens[i] = oxb_handle_get(OXB_H_TENSOR, (uint64_t)(uintptr_t)args[i].v.tensor);
    if (!tens[i])
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s', argument %d: the tensor handle is not live (the tensor was "
                           "released, or it is not a tensor handle)",
                           kn, i + 1);
  }
  return OX_OK;
}

/* f32 -> IEEE binary16 bits, rounded to nearest even (portable C: not every
 * compiler has _Float16). */
static uint16_t f16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u)
    return sign | 0x7e00; /* NaN */
  if (a >= 0x477ff000u)
    return sign | 0x7c00; /* overflow (>= 65520 rounds up) and infinity */
  if (a < 0x38800000u) { /* subnormal or zero in f16: scale by 2^24 and round */
    float mag;
    memcpy(&mag, &a, 4);
    float scaled = (float)((double)mag * 16777216.0); /* exact: a power-of-two scale */
    uint32_t m = (uint32_t)scaled, rem;
    float frac = scaled - (float)m;
    rem = frac > 0.5f || (frac == 0.5f && (m & 1));
    return sign | (uint16_t)(m + rem);
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1); /* round the 13 dropped bits to even */
  return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

/* Converts a scalar argument to the bits the kernel expects. */
void oxa_scalar_bits(const ox_arg *a, uint64_t *slot) {
  *slot = 0;
  switch (a->dtype) {
  case OX_BOOL: *(uint8_t *)slot = a->v.i != 0; break;
  case OX_I8: *(int8_t *)slot = (int8_t)a->v.i; break;
  case OX_I16: *(int16_t *)slot = (int16_t)a->v.i; break;
  case OX_I32: *(int32_t *)slot = (int32_t)a->v.i; break;
  case OX_I64: *(int64_t *)slot = a->v.i; break;
  case OX_U8: *(uint8_t *)slot = (uint8_t)a->v.u; break;
  case OX_U16: *(uint16_t *)slot = (uint16_t)a->v.u; break;
  case OX_U32: *(uint32_t *)slot = (uint32_t)a->v.u; break;
  case OX_U64: *slot = a->v.u; break;
  case OX_F32: *(float *)slot = (float)a->v.f; break;
  case OX_F64: *(double *)slot = a->v.f; break;
  case OX_F16: {
    uint16_t h = f16_bits((float)a->v.f);
    memcpy(slot, &h, 2);
    break;
  }
  case OX_BF16: {
    /* round to nearest even from f32 */
    float f = (float)a->v.f;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t b = (u & 0x7fffffffu) > 0x7f800000u ? 0x7fc0 : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
    memcpy(slot, &b, 2);
    break;
  }
  default: break;
  }
}

/* (here, not in launch.c: tile_launch.c and launch.c both use it, and call no
   function of each other's but oxa_tile_launch) */
ox_status oxa_launch_device(const oxa_kernel *k, oxr_tensor *const *tens, int nargs, ox_device *dev) {
  ox_device md = k->mod->dev;
  int first = -1;
  for (int i = 0; i < nargs; i++) {
    if (!tens[i] || tens[i]->dev->type != md->type) /* (a tensor of another type: check_args says) */
      continue;
    if (first < 0) {
      first = i;
    } else if (tens[i]->dev != tens[first]->dev) {
      const oxi_param *p = k->ir->params.items[first], *q = k->ir->params.items[i];
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s': argument %d ('%s') is on %s and argument %d ('%s') on %s; a "
                           "launch runs on one device (copy one over with ox_tensor_to)",
                           k->ir->name, first + 1, p->name, tens[first]->dev->label, i + 1, q->name,
                           tens[i]->dev->label);
    }
  }
  *dev = first >= 0 ? tens[first]->dev : md;
  return OX_OK;
}
