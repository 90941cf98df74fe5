/* scalars.c - Python numbers as scalar arguments, typed by the parameter.
 *
 * The rules are _args.number's (the pure path), decision for decision: a
 * bool only for bool; ints in range for integer dtypes; for float dtypes,
 * floats that stay finite (as the launch converts them: through f32 for f16
 * and bf16, each rounded to nearest even) and ints the dtype holds exactly. */
#include "fast.h"

#include <math.h>
#include <string.h>

static int is_float_dtype(ox_dtype t) {
  return t == OX_F16 || t == OX_BF16 || t == OX_F32 || t == OX_F64;
}

/* Significant bits of each float dtype (the implicit one included). */
static int mantissa_bits(ox_dtype t) {
  switch (t) {
  case OX_F16: return 11;
  case OX_BF16: return 8;
  case OX_F32: return 24;
  default: return 53;
  }
}

/* 1 if finite `d` becomes infinite as dtype `t`. */
static int overflows(double d, ox_dtype t) {
  if (t == OX_F64 || !isfinite(d))
    return 0;
  /* at and above FLT_MAX + half its ulp, f32 rounds to infinity (a tie goes
   * to the even infinity); test before converting, which would overflow */
  if (fabs(d) >= 0x1.ffffffp127)
    return 1;
  float f = (float)d;
  if (t == OX_F16)
    return fabsf(f) >= 65520.0f; /* rounds past 65504, f16's largest */
  if (t == OX_BF16) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x7fffffffu) >= 0x7f7f8000u; /* rounds to bf16's infinity */
  }
  return 0;
}

/* 1 if the integer |v| has at most `bits` significant bits (once its
 * trailing zeros are dropped): a float of that precision holds it exactly. */
static int exact_int(uint64_t a, int bits) {
  if (!a)
    return 1;
  a >>= __builtin_ctzll(a);
  return 64 - __builtin_clzll(a) <= bits;
}

/* Bits of an integer dtype. */
static int int_bits(ox_dtype t) {
  switch (t) {
  case OX_I8: case OX_U8: return 8;
  case OX_I16: case OX_U16: return 16;
  case OX_I32: case OX_U32: return 32;
  default: return 64;
  }
}

static void set_int(ox_arg *a, ox_dtype t, long long v) {
  a->kind = OX_ARG_SCALAR;
  a->dtype = t;
  a->v.i = v;
}

int fx_number(const fx_launcher *L, int i, PyObject *x, ox_arg *a) {
  ox_dtype t = L->params[i].dtype;
  if (t > OX_F64)
    return fx_error(L, "no_number", i, x, NULL); /* the f8 and tf32 types */
  int is_bool = PyBool_Check(x);
  if (t == OX_BOOL) {
    if (!is_bool)
      return fx_error(L, "not_bool", i, x, NULL);
    set_int(a, t, x == Py_True);
    return 1;
  }
  if (is_bool)
    return fx_error(L, "bool_for", i, x, NULL);
  int is_float = PyFloat_Check(x);
  if (is_float_dtype(t)) {
    double d;
    if (is_float) {
      d = PyFloat_AsDouble(x);
      if (overflows(d, t))
        return fx_error(L, "float_range", i, x, NULL);
    } else {
      int ovf;
      long long v = PyLong_AsLongLongAndOverflow(x, &ovf);
      if (ovf)
        return 0; /* beyond 64 bits: the package decides */
      if (v == -1 && PyErr_Occurred())
        return -1;
      uint64_t mag = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
      if (t == OX_F16 && mag > 65504)
        return fx_error(L, "float_range", i, x, NULL);
      if (!exact_int(mag, mantissa_bits(t)))
        return fx_error(L, "inexact", i, x, NULL);
      d = (double)v; /* exact: at most 53 significant bits */
    }
    a->kind = OX_ARG_SCALAR;
    a->dtype = t;
    a->v.f = d;
    return 1;
  }
  if (is_float)
    return fx_error(L, "float_for_int", i, x, NULL);
  int ovf;
  long long v = PyLong_AsLongLongAndOverflow(x, &ovf);
  if (v == -1 && !ovf && PyErr_Occurred())
    return -1;
  int bits = int_bits(t);
  if (t >= OX_U8 && t <= OX_U64) {
    unsigned long long u;
    if (ovf < 0 || (!ovf && v < 0))
      return fx_error(L, "int_range", i, x, NULL);
    if (ovf) { /* above 2**63 - 1: only u64 may hold it */
      u = PyLong_AsUnsignedLongLong(x);
      if (u == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
          return -1;
        PyErr_Clear();
        return fx_error(L, "int_range", i, x, NULL);
      }
    } else {
      u = (unsigned long long)v;
    }
    if (bits < 64 && u >> bits)
      return fx_error(L, "int_range", i, x, NULL);
    a->kind = OX_ARG_SCALAR;
    a->dtype = t;
    a->v.u = u;
    return 1;
  }
  if (ovf || (bits < 64 && (v < -(1LL << (bits - 1)) || v > (1LL << (bits - 1)) - 1)))
    return fx_error(L, "int_range", i, x, NULL);
  set_int(a, t, v);
  return 1;
}

int fx_scalar_object(PyObject *x, ox_dtype t, ox_arg *a) {
  PyObject *v = PyObject_GetAttr(x, fxo.s_value);
  if (!v)
    return -1;
  a->kind = OX_ARG_SCALAR;
  a->dtype = t;
  /* the value was checked when the Scalar was made: as _fill stores it */
  if (is_float_dtype(t))
    a->v.f = PyFloat_AsDouble(v);
  else if (t >= OX_U8 && t <= OX_U64)
    a->v.u = PyLong_AsUnsignedLongLong(v);
  else
    a->v.i = PyLong_AsLongLong(v);
  Py_DECREF(v);
  return PyErr_Occurred() ? -1 : 0;
}
