/* emit.c - LLVM setup, the optimization pipeline, PTX / host code emission,
 * and the ORC JIT that loads host objects for the CPU device. */
#include <llvm-c/Error.h>
#include <llvm-c/ErrorHandling.h>
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
#include <sys/mman.h>
#include <sys/resource.h>

#include "backend/codegen.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static char host_id[1024];

/* ---- memory for LLVM
 * LLVM cannot fail an allocation: report_bad_alloc_error prints "LLVM ERROR:
 * out of memory" and aborts, and a failed operator new terminates; neither
 * can be caught through the C API. Under a memory limit a compile therefore
 * checks first that what LLVM may use is there: with a finite RLIMIT_AS or
 * RLIMIT_DATA it maps that much (untouched) and unmaps it, and a failure is
 * OX_ERR_OUT_OF_MEMORY before LLVM starts. Best effort: another thread may
 * take the room meanwhile. The estimates are twice the most a compile needed
 * above what the process mapped before it (LLVM 19, the smallest RLIMIT_AS
 * that let it finish, found by bisection): 2 MiB, 1.4 KiB per IR instruction
 * (straight-line code: 24 MiB for 15,000 CPU instructions, 27 MiB for a
 * 29,500-instruction attention kernel's PTX) and 300 KiB per loop (the CPU's
 * loops are vectorized: 77 MiB for 253 loops in 3,861 instructions, 15 MiB
 * for tile_layernorm's 37 in 1,072); the JIT 1 MiB and 40 bytes per byte of
 * object (9.5 MiB for 230 KB), also linking it at the first lookup. */
#define LLVM_INIT_ROOM ((size_t)4 << 20)
#define LLVM_GEN_BASE ((size_t)4 << 20)
#define LLVM_GEN_PER_INSTR ((size_t)3 << 10)
#define LLVM_GEN_PER_LOOP ((size_t)768 << 10)
#define LLVM_JIT_BASE ((size_t)2 << 20)
#define LLVM_JIT_PER_BYTE 80

/* OX_OK when `need` more bytes fit in the process's limits; else
 * OX_ERR_OUT_OF_MEMORY saying that `what` needs them. */
static ox_status llvm_room(size_t need, const char *what) {
  struct rlimit as, data;
  bool as_set = getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY;
  bool data_set = getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY;
  if (!as_set && !data_set)
    return OX_OK;
  /* writable private memory counts towards RLIMIT_DATA, any towards RLIMIT_AS */
  void *p = mmap(NULL, need, data_set ? PROT_READ | PROT_WRITE : PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p != MAP_FAILED) {
    munmap(p, need);
    return OX_OK;
  }
  struct rlimit *l = as_set ? &as : &data;
  return oxb_set_error(OX_ERR_OUT_OF_MEMORY,
                       "out of memory: %s needs about %zu MiB more memory for LLVM than the process has "
                       "left under its %s of %llu MiB; raise the limit, or use less memory",
                       what, (need + (1u << 20) - 1) >> 20, as_set ? "RLIMIT_AS" : "RLIMIT_DATA",
                       (unsigned long long)(l->rlim_cur >> 20));
}

/* LLVM's other fatal errors: it calls this, then exits the process (or
 * aborts); the handler cannot return to the compile, since unwinding LLVM's
 * C++ frames with longjmp would leave its locks and objects broken. It only
 * says who is dying. */
static void fatal_llvm_error(const char *reason) {
  fprintf(stderr, "oxide: fatal error in LLVM, which ends the process: %s\n", reason);
}

static void init_llvm(void) {
  LLVMInstallFatalErrorHandler(fatal_llvm_error);
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
  LLVMInitializeX86TargetInfo();
  LLVMInitializeX86Target();
  LLVMInitializeX86TargetMC();
  LLVMInitializeX86AsmPrinter();
  LLVMInitializeX86AsmParser();
}

/* host_id, made once it can be (LLVM's strings are NULL when out of memory). */
static pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool host_ok;

static bool host_id_ready(void) {
  if (host_ok)
    return true;
  pthread_mutex_lock(&host_lock);
  if (!host_ok) {
    char *cpu = LLVMGetHostCPUName(), *feat = LLVMGetHostCPUFeatures();
    if (cpu && feat) {
      snprintf(host_id, sizeof host_id, "llvm %s cpu %s %s", OXIDE_LLVM_VERSION, cpu, feat);
      host_ok = true;
    }
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(feat);
  }
  pthread_mutex_unlock(&host_lock);
  return host_ok;
}

ox_status oxl_init(void) {
  static _Atomic bool done;
  if (!done) {
    if (llvm_room(LLVM_INIT_ROOM, "starting LLVM") != OX_OK)
      return OX_ERR_OUT_OF_MEMORY;
    pthread_once(&init_once, init_llvm);
    if (!host_id_ready())
      return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory: LLVM could not name the host CPU");
    done = true;
  }
  return OX_OK;
}

const char *oxl_target_id(oxl_target t) {
  pthread_once(&init_once, init_llvm);
  if (t == OXL_CUDA)
    return "llvm " OXIDE_LLVM_VERSION " nvptx64 +ptx80";
  return host_id_ready() ? host_id : "llvm " OXIDE_LLVM_VERSION " cpu unknown";
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
    if (!triple) {
      oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory: LLVM could not name the host");
      return NULL;
    }
    if (LLVMGetTargetFromTriple(triple, &target, &err)) {
      oxb_set_error(OX_ERR_INTERNAL, "LLVM has no host target for %s: %s", triple, err);
      LLVMDisposeMessage(err);
      LLVMDisposeMessage(triple);
      return NULL;
    }
    char *cpu = LLVMGetHostCPUName(), *feat = LLVMGetHostCPUFeatures();
    tm = cpu && feat ? LLVMCreateTargetMachine(target, triple, cpu, feat, lvl, LLVMRelocPIC, LLVMCodeModelSmall)
                     : NULL;
    snprintf(triple_out, n, "%s", triple);
    LLVMDisposeMessage(triple);
    if (!cpu || !feat) {
      LLVMDisposeMessage(cpu);
      LLVMDisposeMessage(feat);
      oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory: LLVM could not name the host CPU");
      return NULL;
    }
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(feat);
  }
  if (!tm)
    oxb_set_error(OX_ERR_INTERNAL, "LLVM could not create a target machine");
  return tm;
}

/* One code generation (oxl_generate): what its region works on. */
typedef struct gen_job {
  cg_t C;
  LLVMTargetMachineRef tm;
  oxl_output kind;
  char **out;
  size_t *len;
} gen_job;

/* Copies n bytes to a new NUL-terminated *out (plain malloc: called with
 * LLVM's buffers in hand, which the caller then disposes). */
static ox_status copy_out(const char *p, size_t n, char **out, size_t *len) {
  if (!(*out = malloc(n + 1)))
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory: %zu bytes for the generated code", n + 1);
  memcpy(*out, p, n);
  (*out)[n] = 0;
  *len = n;
  return OX_OK;
}

/* Code generation, optimization and emission: protected (base.h), so that an
 * allocation of ours that fails unwinds to oxl_generate, which disposes the
 * LLVM objects. The unwinds start in our code between LLVM calls, never
 * inside LLVM (its diagnostic handler only notes C->oom). */
static ox_status gen_run(void *arg) {
  gen_job *j = arg;
  cg_t *C = &j->C;
  bool cpu = C->opt->target == OXL_CPU;
  ox_status st = oxl_cg_module(C);
  if (st != OX_OK)
    return st;
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  char passes[256];
  int level = C->opt->opt_level < 0 ? 0 : C->opt->opt_level > 3 ? 3 : C->opt->opt_level;
  /* On the CPU, a SIMT kernel's loop over a block's threads holds its bounds checks, whose
     failure path (a call that records the error) keeps the loop from vectorizing. After the
     usual pipeline, IRCE (inductive range check elimination) splits the loop's range into
     one where every check holds (the checks are gone) and the rest (where they stay), and
     the cleanup that follows lets the vectorizer take the first: a bounds-checked vecadd
     went from 0.76x to 1.07x np.add's bandwidth (bench/cpu_stream.py). */
  snprintf(passes, sizeof passes,
           cpu && level >= 2 ? "default<O%d>,function(irce,instcombine<no-verify-fixpoint>,simplifycfg,loop-mssa(licm),loop(indvars),"
                               "loop-vectorize,instcombine<no-verify-fixpoint>,simplifycfg)"
                             : "default<O%d>",
           level);
  LLVMErrorRef e = LLVMRunPasses(C->mod, passes, j->tm, po);
  LLVMDisposePassBuilderOptions(po);
  if (e) {
    char *msg = LLVMGetErrorMessage(e);
    st = oxb_set_error(OX_ERR_INTERNAL, "LLVM optimization failed: %s", msg);
    LLVMDisposeErrorMessage(msg);
    return st;
  }
  if (cpu)
    oxl_cpu_finish(C);
  else
    oxl_cuda_finish(C);
  if (j->kind == OXL_OUT_LLVM) {
    char *s = LLVMPrintModuleToString(C->mod);
    st = copy_out(s, strlen(s), j->out, j->len);
    LLVMDisposeMessage(s);
  } else {
    char *err = NULL;
    LLVMMemoryBufferRef buf = NULL;
    LLVMCodeGenFileType ft = j->kind == OXL_OUT_OBJ ? LLVMObjectFile : LLVMAssemblyFile;
    if (LLVMTargetMachineEmitToMemoryBuffer(j->tm, C->mod, ft, &err, &buf)) {
      st = oxb_set_error(OX_ERR_INTERNAL, "LLVM code generation failed: %s", err);
      LLVMDisposeMessage(err);
      return st;
    }
    st = copy_out(LLVMGetBufferStart(buf), LLVMGetBufferSize(buf), j->out, j->len);
    LLVMDisposeMemoryBuffer(buf);
  }
  if (st == OX_OK && C->oom)
    st = oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory while LLVM generated code");
  if (st == OX_OK && C->diag_error)
    st = oxb_set_error(OX_ERR_INTERNAL, "LLVM code generation failed: %s", C->diag_error);
  if (st == OX_OK && cpu && j->kind == OXL_OUT_OBJ)
    st = oxl_cpu_stack_table(C, j->out, j->len);
  return st;
}

/* What generating code for m may take of LLVM's memory (above). */
static size_t gen_need(const oxi_module *m) {
  size_t n = LLVM_GEN_BASE;
  for (int i = 0; i < m->kernels.len; i++) {
    const oxi_kernel *k = m->kernels.items[i];
    n += LLVM_GEN_PER_LOOP * (size_t)(k->nloops > 0 ? k->nloops : 0);
    for (int b = 0; b < k->blocks.len; b++)
      n += LLVM_GEN_PER_INSTR * (size_t)((const oxi_block *)k->blocks.items[b])->instrs.len;
  }
  return n;
}

ox_status oxl_generate(const oxi_module *m, const oxl_options *opt, oxl_output kind, char **out,
                       size_t *len) {
  *out = NULL;
  *len = 0;
  char what[300];
  snprintf(what, sizeof what, "generating code for %s", m->filename ? m->filename : "the kernels");
  if (llvm_room(gen_need(m), what) != OX_OK || oxl_init() != OX_OK)
    return OX_ERR_OUT_OF_MEMORY;
  char triple[256];
  LLVMTargetMachineRef tm = make_tm(opt, triple, sizeof triple);
  if (!tm)
    return ox_last_status(); /* (make_tm set it) */
  gen_job j = {{0}, tm, kind, out, len};
  cg_t *C = &j.C;
  C->ctx = LLVMContextCreate();
  C->mod = LLVMModuleCreateWithNameInContext(m->filename ? m->filename : "oxide", C->ctx);
  C->b = LLVMCreateBuilderInContext(C->ctx);
  C->m = m;
  C->opt = opt;
  LLVMSetTarget(C->mod, triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(C->mod, td);
  LLVMDisposeTargetData(td);
  bool cpu = opt->target == OXL_CPU;
  if (cpu) /* collects frame sizes; also keeps LLVM from printing or exiting on its own */
    LLVMContextSetDiagnosticHandler(C->ctx, oxl_cpu_diagnostic, C);
  C->kernel = cpu ? oxl_cg_kernel_cpu : oxl_cg_kernel_cuda;
  ox_status st = oxb_protected(gen_run, &j);
  if (st != OX_OK) {
    free(*out);
    *out = NULL;
    *len = 0;
  }
  /* what an unwind left (each is NULL once freed) */
  free(C->vals);
  free(C->slots);
  free(C->bbs);
  free(C->ptrs);
  free(C->lens);
  free(C->scalars);
  free(C->dims);
  free(C->strides);
  for (int i = 0; i < C->nframes; i++)
    free(C->frames[i].fn);
  free(C->frames);
  free(C->diag_error);
  oxb_arena_free(&C->scratch);
  LLVMDisposeBuilder(C->b);
  LLVMDisposeModule(C->mod);
  LLVMContextDispose(C->ctx);
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
    if (end - p < nl)
      return oxb_set_error(OX_ERR_INTERNAL, "host code with a damaged stack-size table");
    if (!(j->stacks[i].name = strndup(p, nl)))
      return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
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
  *out = NULL;
  if (llvm_room(LLVM_JIT_BASE + LLVM_JIT_PER_BYTE * len, "loading host code") != OX_OK ||
      oxl_init() != OX_OK)
    return OX_ERR_OUT_OF_MEMORY;
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
