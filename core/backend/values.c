/* values.c - what every part of the backend builds LLVM IR with: functions
 * declared once and called by name (intrinsics too), and the PTX approximate
 * instructions as inline assembly. Calls nothing of the files that use it. */
#include "backend/codegen.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

/* Declares (once) and returns function `name`; intrinsics are recognized by name. */
LLVMValueRef oxl_cg_fn(cg_t *C, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, int n,
                       LLVMTypeRef *fty) {
  LLVMTypeRef ty = LLVMFunctionType(ret, params, (unsigned)n, 0);
  LLVMValueRef f = LLVMGetNamedFunction(C->mod, name);
  if (!f)
    f = LLVMAddFunction(C->mod, name, ty);
  if (fty)
    *fty = ty;
  return f;
}

LLVMValueRef oxl_cg_call(cg_t *C, const char *name, LLVMTypeRef ret, LLVMValueRef *args, int n) {
  LLVMTypeRef params[10];
  assert(n <= 10);
  for (int i = 0; i < n; i++)
    params[i] = LLVMTypeOf(args[i]);
  LLVMTypeRef fty;
  LLVMValueRef f = oxl_cg_fn(C, name, ret, params, n, &fty);
  return LLVMBuildCall2(C->b, fty, f, args, (unsigned)n, "");
}

const char *oxl_type_suffix(LLVMTypeRef t) {
  switch (LLVMGetTypeKind(t)) {
  case LLVMFloatTypeKind: return "f32";
  case LLVMDoubleTypeKind: return "f64";
  case LLVMHalfTypeKind: return "f16";
  default: {
    static const char *const ints[] = {"i1", "i8", "i16", "i32", "i64"};
    unsigned w = LLVMGetIntTypeWidth(t);
    return w == 1 ? ints[0] : w == 8 ? ints[1] : w == 16 ? ints[2] : w == 32 ? ints[3] : ints[4];
  }
  }
}

LLVMValueRef oxl_intrinsic1(cg_t *C, const char *base, LLVMValueRef a) {
  char name[64];
  snprintf(name, sizeof name, "llvm.%s.%s", base, oxl_type_suffix(LLVMTypeOf(a)));
  return oxl_cg_call(C, name, LLVMTypeOf(a), &a, 1);
}

LLVMValueRef oxl_intrinsic2(cg_t *C, const char *base, LLVMValueRef a, LLVMValueRef b) {
  char name[64];
  snprintf(name, sizeof name, "llvm.%s.%s", base, oxl_type_suffix(LLVMTypeOf(a)));
  LLVMValueRef args[2] = {a, b};
  return oxl_cg_call(C, name, LLVMTypeOf(a), args, 2);
}

LLVMValueRef oxl_ptx_f32(cg_t *C, const char *insn, LLVMValueRef a) {
  char text[96];
  snprintf(text, sizeof text, "%s $0, $1;", insn);
  LLVMTypeRef p = LLVMFloatTypeInContext(C->ctx);
  LLVMTypeRef fty = LLVMFunctionType(p, &p, 1, 0);
  LLVMValueRef asmv = LLVMGetInlineAsm(fty, text, strlen(text), "=f,f", 4, 0, 0,
                                       LLVMInlineAsmDialectATT, 0);
  return LLVMBuildCall2(C->b, fty, asmv, &a, 1, "");
}
