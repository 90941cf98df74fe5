/* emit.c - LLVM setup, the optimization pipeline, PTX / host code emission,
 * and the ORC JIT that loads host objects for the CPU device. */
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/codegen.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static char host_id[1024];

static void init_llvm(void) {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
  LLVMInitializeX86TargetInfo();
  LLVMInitializeX86Target();
  LLVMInitializeX86TargetMC();
  LLVMInitializeX86AsmPrinter();
  LLVMInitializeX86AsmParser();
  char *cpu = LLVMGetHostCPUName(), *feat = LLVMGetHostCPUFeatures();
  snprintf(host_id, sizeof host_id, "llvm %s cpu %s %s", OXIDE_LLVM_VERSION, cpu, feat);
  LLVMDisposeMessage(cpu);
  LLVMDisposeMessage(feat);
}

const char *oxl_target_id(oxl_target t) {
  pthread_once(&init_once, init_llvm);
  return t == OXL_CUDA ? "llvm " OXIDE_LLVM_VERSION " nvptx64 +ptx80" : host_id;
}

static LLVMTargetMachineRef make_tm(const oxl_options *opt, char *triple_out, size_t n) {
  LLVMCodeGenOptLevel lvl = opt->opt_level >= 3   ? LLVMCodeGenLevelAggressive
                            : opt->opt_level == 2 ? LLVMCodeGenLevelDefault
                            : opt->opt_level == 1 ? LLVMCodeGenLevelLess
                                                  : LLVMCodeGenLevelNone;
  char *err = NULL;
  LLVMTargetRef target;
  LLVMTargetMachineRef tm;
  if (opt->target == OXL_CUDA) {
    const char *triple = "nvptx64-nvidia-cuda";
    if (LLVMGetTargetFromTriple(triple, &target, &err)) {
      oxb_set_error(OX_ERR_INTERNAL, "LLVM has no NVPTX target: %s", err);
      LLVMDisposeMessage(err);
      return NULL;
    }
    char cpu[16]; /* sm_90 gets sm_90a, the arch-specific features (wgmma) of exactly that chip */
    snprintf(cpu, sizeof cpu, "sm_%d%s", opt->sm ? opt->sm : 80, opt->sm == 90 ? "a" : "");
    tm = LLVMCreateTargetMachine(target, triple, cpu, "+ptx80", lvl, LLVMRelocDefault,
                                 LLVMCodeModelDefault);
    snprintf(triple_out, n, "%s", triple);
  } else {
    char *triple = LLVMGetDefaultTargetTriple();
    if (LLVMGetTargetFromTriple(triple, &target, &err)) {
      oxb_set_error(OX_ERR_INTERNAL, "LLVM has no host target for %s: %s", triple, err);
      LLVMDisposeMessage(err);
      LLVMDisposeMessage(triple);
      return NULL;
    }
    char *cpu = LLVMGetHostCPUName(), *feat = LLVMGetHostCPUFeatures();
    tm = LLVMCreateTargetMachine(target, triple, cpu, feat, lvl, LLVMRelocPIC, LLVMCodeModelSmall);
    snprintf(triple_out, n, "%s", triple);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(feat);
    LLVMDisposeMessage(triple);
  }
  if (!tm)
    oxb_set_error(OX_ERR_INTERNAL, "LLVM could not create a target machine");
  return tm;
}

ox_status oxl_generate(const oxi_module *m, const oxl_options *opt, oxl_output kind, char **out,
                       size_t *len) {
  pthread_once(&init_once, init_llvm);
  *out = NULL;
  *len = 0;
  char triple[256];
  LLVMTargetMachineRef tm = make_tm(opt, triple, sizeof triple);
  if (!tm)
    return OX_ERR_INTERNAL;
  cg_t C = {0};
  C.ctx = LLVMContextCreate();
  C.mod = LLVMModuleCreateWithNameInContext(m->filename ? m->filename : "oxide", C.ctx);
  C.b = LLVMCreateBuilderInContext(C.ctx);
  C.m = m;
  C.opt = opt;
  LLVMSetTarget(C.mod, triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(C.mod, td);
  LLVMDisposeTargetData(td);
  bool cpu = opt->target == OXL_CPU;
  if (cpu) /* collects frame sizes; also keeps LLVM from printing or exiting on its own */
    LLVMContextSetDiagnosticHandler(C.ctx, oxl_cpu_diagnostic, &C);
  C.kernel = cpu ? oxl_cg_kernel_cpu : oxl_cg_kernel_cuda;
  ox_status st = oxl_cg_module(&C);
  if (st == OX_OK) {
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    char passes[32];
    snprintf(passes, sizeof passes, "default<O%d>", opt->opt_level < 0 ? 0 : opt->opt_level > 3 ? 3 : opt->opt_level);
    LLVMErrorRef e = LLVMRunPasses(C.mod, passes, tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (e) {
      char *msg = LLVMGetErrorMessage(e);
      st = oxb_set_error(OX_ERR_INTERNAL, "LLVM optimization failed: %s", msg);
      LLVMDisposeErrorMessage(msg);
    }
  }
  if (st == OX_OK && cpu)
    oxl_cpu_finish(&C);
  else if (st == OX_OK)
    oxl_cuda_finish(&C);
  if (st == OX_OK) {
    if (kind == OXL_OUT_LLVM) {
      char *s = LLVMPrintModuleToString(C.mod);
      *len = strlen(s);
      *out = malloc(*len + 1);
      memcpy(*out, s, *len + 1);
      LLVMDisposeMessage(s);
    } else {
      char *err = NULL;
      LLVMMemoryBufferRef buf = NULL;
      LLVMCodeGenFileType ft = kind == OXL_OUT_OBJ ? LLVMObjectFile : LLVMAssemblyFile;
      if (LLVMTargetMachineEmitToMemoryBuffer(tm, C.mod, ft, &err, &buf)) {
        st = oxb_set_error(OX_ERR_INTERNAL, "LLVM code generation failed: %s", err);
        LLVMDisposeMessage(err);
      } else {
        size_t n = LLVMGetBufferSize(buf);
        *out = malloc(n + 1);
        memcpy(*out, LLVMGetBufferStart(buf), n);
        (*out)[n] = 0;
        *len = n;
        LLVMDisposeMemoryBuffer(buf);
      }
    }
  }
  if (st == OX_OK && C.diag_error)
    st = oxb_set_error(OX_ERR_INTERNAL, "LLVM code generation failed: %s", C.diag_error);
  if (st == OX_OK && cpu && kind == OXL_OUT_OBJ)
    st = oxl_cpu_stack_table(&C, out, len);
  if (st != OX_OK) {
    free(*out);
    *out = NULL;
    *len = 0;
  }
  for (int i = 0; i < C.nframes; i++)
    free(C.frames[i].fn);
  free(C.frames);
  free(C.diag_error);
  LLVMDisposeBuilder(C.b);
  LLVMDisposeModule(C.mod);
  LLVMContextDispose(C.ctx);
  LLVMDisposeTargetMachine(tm);
  return st;
}

/* ------------------------------------------------------------------ JIT */

struct oxl_jit {
  LLVMOrcLLJITRef jit;
  int nstacks;
  struct {
    char *name;
    uint32_t bytes;
  } *stacks; /* the stack-size table of the artifact */
};

/* Splits the stack-size table off the end of a CPU artifact (backend.h): on
 * success *len is the object's length and j->stacks holds the table. */
static ox_status read_stack_table(const char *art, size_t *len, oxl_jit *j) {
  uint32_t count, tbytes;
  size_t n = *len;
  if (n < 16 || memcmp(art + n - 8, "OXSTACK1", 8) != 0)
    return oxb_set_error(OX_ERR_INTERNAL, "host code without its stack-size table (not made by this "
                                          "version of Oxide?)");
  memcpy(&count, art + n - 16, 4);
  memcpy(&tbytes, art + n - 12, 4);
  if (tbytes > n - 16 || count > tbytes / 6 + 1)
    return oxb_set_error(OX_ERR_INTERNAL, "host code with a damaged stack-size table");
  const char *p = art + n - 16 - tbytes, *end = art + n - 16;
  j->stacks = calloc(count ? count : 1, sizeof *j->stacks);
  if (!j->stacks)
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  for (uint32_t i = 0; i < count; i++) {
    uint16_t nl;
    if (end - p < 6)
      return oxb_set_error(OX_ERR_INTERNAL, "host code with a damaged stack-size table");
    memcpy(&j->stacks[i].bytes, p, 4);
    memcpy(&nl, p + 4, 2);
    p += 6;
    if (end - p < nl || !(j->stacks[i].name = strndup(p, nl)))
      return oxb_set_error(OX_ERR_INTERNAL, "host code with a damaged stack-size table");
    j->nstacks++;
    p += nl;
  }
  *len = n - 16 - tbytes;
  return OX_OK;
}

static void free_stack_table(oxl_jit *j) {
  for (int i = 0; i < j->nstacks; i++)
    free(j->stacks[i].name);
  free(j->stacks);
}

uint32_t oxl_jit_stack_bytes(const oxl_jit *j, const char *name) {
  for (int i = 0; j && i < j->nstacks; i++)
    if (strcmp(j->stacks[i].name, name) == 0)
      return j->stacks[i].bytes;
  return 0;
}

static ox_status jit_error(LLVMErrorRef e, const char *what) {
  char *msg = LLVMGetErrorMessage(e);
  ox_status s = oxb_set_error(OX_ERR_INTERNAL, "%s: %s", what, msg);
  LLVMDisposeErrorMessage(msg);
  return s;
}

/* f32 -> bf16, rounding to nearest even and keeping NaNs quiet: the helper
 * LLVM's x86 code calls where it holds bf16 values as f32 (phis, selects)
 * on CPUs without AVX512-BF16. libgcc has it only from GCC 13, so the JIT
 * gets this one. x86-64 returns a 16-bit float in the low bits of xmm0, as
 * it returns a float: so the bf16 bits travel as the low half of a float's
 * bits (a C type for the 16-bit float itself, _Float16 or __bf16, is not
 * available on every compiler Oxide builds with). */
static float truncsfbf2(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  uint32_t h = (u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40 : (u + 0x7fffu + ((u >> 16) & 1)) >> 16;
  float r;
  memcpy(&r, &h, sizeof r);
  return r;
}

ox_status oxl_jit_load(const void *obj, size_t len, oxl_jit **out) {
  pthread_once(&init_once, init_llvm);
  *out = NULL;
  oxl_jit *j = calloc(1, sizeof *j);
  if (!j)
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  ox_status st = read_stack_table(obj, &len, j);
  LLVMErrorRef e = NULL;
  const char *what = NULL;
  if (!st) {
    e = LLVMOrcCreateLLJIT(&j->jit, NULL);
    what = "cannot create the host JIT";
  }
  /* resolve libm and libc symbols (expf, memcpy...) from this process */
  LLVMOrcDefinitionGeneratorRef gen;
  if (!st && !e) {
    e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(j->jit), NULL, NULL);
    what = "cannot search this process's symbols";
  }
  if (!st && !e) {
    LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(j->jit), gen);
    LLVMJITSymbolFlags callable = {LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable, 0};
    LLVMOrcCSymbolMapPair helper = {LLVMOrcLLJITMangleAndIntern(j->jit, "__truncsfbf2"),
                                    {(LLVMOrcExecutorAddress)(uintptr_t)truncsfbf2, callable}};
    e = LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(j->jit), LLVMOrcAbsoluteSymbols(&helper, 1));
    what = "cannot define the JIT's helpers";
  }
  if (!st && !e) {
    LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(obj, len, "oxide-kernels");
    e = LLVMOrcLLJITAddObjectFile(j->jit, LLVMOrcLLJITGetMainJITDylib(j->jit), buf);
    what = "cannot load host code";
  }
  if (e)
    st = jit_error(e, what);
  if (st) {
    oxl_jit_destroy(j);
    return st;
  }
  *out = j;
  return OX_OK;
}

void *oxl_jit_lookup(oxl_jit *j, const char *name) {
  LLVMOrcExecutorAddress addr = 0;
  LLVMErrorRef e = LLVMOrcLLJITLookup(j->jit, &addr, name);
  if (e) {
    jit_error(e, "kernel entry not found");
    return NULL;
  }
  return (void *)(uintptr_t)addr;
}

void oxl_jit_destroy(oxl_jit *j) {
  if (!j)
    return;
  LLVMErrorRef e = j->jit ? LLVMOrcDisposeLLJIT(j->jit) : NULL;
  if (e)
    LLVMConsumeError(e);
  free_stack_table(j);
  free(j);
}
