/* fuzz_front.c - libFuzzer target for the compiler: lexer, parser, semantic
 * analysis and the IR verifier through ox_emit(..., OX_EMIT_IR, ...); then,
 * for a source the front end accepts, the tile lowering and LLVM code
 * generation.
 *
 * Stage 1, every input: ox_emit to IR. A compile error is an ordinary outcome;
 * OX_ERR_INTERNAL (the IR verifier rejected what sema produced) is a bug, and
 * so is a diagnostic whose file:line:col is not a place in the input.
 *
 * Stage 2, inputs that pass stage 1: the front end again (internal API), each
 * #[tile] kernel specialized with generics chosen from the input's hash
 * (powers of two from 1 to 256, or 3), lowered for sm_90 (wgmma), sm_80
 * (mma.sync) and the CPU, each with contiguous16 launch facts or without; the
 * lowered module must verify. Then, for sm_90 and sm_80, at the tile shapes that
 * launches choose (the matmul and attention candidates: the first three generics
 * 128 x 256 x 64, 128 x 128 x 64, 64 x 128 x 64, 64 x 64 x 64 and 128 x 128 x 32, the
 * rest 64), with every tensor contiguous and with none: an internal error there is
 * reached by an ordinary launch. Refusals (a compile error of the binding, a
 * limit, a tile or shared memory too large for the lowering) are ordinary.
 * Then code generation of the module for one of the three targets (by hash):
 * LLVM IR without optimization for every such input (codegen.c and LLVM's
 * verifier), and for one input in 16 of at most 1 KB, -O1 through instruction
 * selection to PTX or x86 assembly.
 *
 * Any crash, sanitizer report, leak or hang is a bug; the target aborts on the
 * others so that libFuzzer keeps the input. Build and run: tools/fuzz.sh
 * [SECONDS]. */
#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "api/api.h"
#include "oxide/oxide.h"
#include "tile/tile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void bug(const char *what, const char *msg, const char *src) {
  fprintf(stderr, "fuzz_front: %s\n%s\n---- input:\n%s\n", what, msg, src);
  abort();
}

/* Every diagnostic line of `msg` ("fuzz.oxk:LINE:COL: error: ..." or "note:",
 * at the start of a line; quoted source lines start with a line number and
 * '|') must name a place in `src` (the column may be one past the end of the
 * line, for "end of input"). Text that only looks like a location, quoted
 * from the input, is not a diagnostic. */
static void check_locations(const char *src, const char *msg) {
  long nlines = 1;
  for (const char *p = src; *p; p++)
    nlines += *p == '\n';
  static const char file[] = "fuzz.oxk:";
  for (const char *p = msg; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
    if (strncmp(p, file, sizeof file - 1) || p[sizeof file - 1] == ' ')
      continue; /* a quoted source line, or a diagnostic without a location */
    char *e;
    long line = strtol(p + sizeof file - 1, &e, 10);
    long col = *e == ':' ? strtol(e + 1, &e, 10) : -1;
    bool diag = !strncmp(e, ": error: ", 9) || !strncmp(e, ": note: ", 8);
    bool ok = diag && line >= 1 && line <= nlines && col >= 1;
    if (ok) {
      const char *l = src;
      for (long i = 1; i < line; i++)
        l = strchr(l, '\n') + 1;
      const char *end = strchr(l, '\n');
      ok = col <= (end ? (long)(end - l) : (long)strlen(l)) + 1;
    }
    if (!ok)
      bug("a diagnostic line without a valid location in the input", msg, src);
  }
}

static uint64_t hash(const uint8_t *data, size_t size) {
  uint64_t h = 1469598103934665603u; /* FNV-1a */
  for (size_t i = 0; i < size; i++)
    h = (h ^ data[i]) * 1099511628211u;
  return h;
}

/* Stage 2 for one target (sm 90 or 80, or 0 for the CPU) and one specialization:
 * generics `gen`; tensor parameter p contiguous when bit p % 20 of `contig` is set. */
static void lower_and_generate(const char *src, const int64_t *gen, uint64_t contig, int sm, bool codegen, bool full) {
  oxb_arena a = {0};
  oxi_module m;
  const oxf_program *prog = NULL;
  if (oxa_front(&a, src, "fuzz.oxk", &m, NULL, &prog) != OX_OK)
    bug("the front end refused, the second time, a source it accepted", ox_last_error(), src);
  bool lowered = true;
  for (int i = 0; i < prog->fns.len && lowered; i++) {
    const oxf_fn *fn = prog->fns.items[i];
    if (!fn->is_tile)
      continue;
    oxb_diags d = {0};
    oxb_source s = {m.filename, src, strlen(src)};
    d.src = &s;
    if (!oxf_check_spec(&a, &d, prog, fn, gen, &m)) { /* the binding's errors: ordinary */
      check_locations(src, d.text.buf ? d.text.buf : "");
      lowered = false;
    }
    oxb_str_free(&d.text);
  }
  for (int i = 0; i < m.kernels.len && lowered; i++) {
    oxi_kernel *k = m.kernels.items[i];
    if (!k->is_tile)
      continue;
    for (int p = 0; p < k->params.len; p++) {
      oxi_param *ip = k->params.items[p];
      ip->contiguous16 = oxi_is_tensor_kind(ip->kind) && ((contig >> (p % 20)) & 1);
    }
    ox_status st = oxt_lower(&m, k, sm, oxt_shared_limit(sm ? sm : 90));
    if (st == OX_ERR_COMPILE)
      check_locations(src, ox_last_error());
    else if (st != OX_OK && st != OX_ERR_UNSUPPORTED)
      bug("the tile lowering failed", ox_last_error(), src);
    lowered = st == OX_OK;
  }
  if (lowered) {
    oxb_str err = {0};
    if (!oxi_verify(&m, &err))
      bug("the IR verifier rejected lowered IR", err.buf, src);
    oxb_str_free(&err);
  }
  if (lowered && codegen) {
    oxl_options lo = {sm ? OXL_CUDA : OXL_CPU, sm, full ? 1 : 0};
    char *out = NULL;
    size_t len = 0;
    ox_status st = oxl_generate(&m, &lo, full ? (sm ? OXL_OUT_PTX : OXL_OUT_ASM) : OXL_OUT_LLVM, &out, &len);
    if (st != OX_OK && st != OX_ERR_UNSUPPORTED)
      bug("code generation failed", ox_last_error(), src);
    free(out);
  }
  oxb_arena_free(&a);
  ox_clear_error();
}

/* A hang is an input that computes too long: counted in CPU time (ITIMER_PROF,
 * user + system), so that a loaded machine does not report one. The handler
 * aborts, and libFuzzer keeps the input as a crash. */
static void cpu_limit_hit(int sig) {
  (void)sig;
  static const char msg[] = "fuzz_front: an input took more than OXIDE_FUZZ_CPU_LIMIT seconds of CPU\n";
  (void)!write(2, msg, sizeof msg - 1);
  abort();
}

static void cpu_limit(bool on) {
  static long limit = -1;
  if (limit < 0) {
    const char *e = getenv("OXIDE_FUZZ_CPU_LIMIT");
    limit = e ? atol(e) : 30;
    signal(SIGPROF, cpu_limit_hit);
  }
  struct itimerval t = {{0, 0}, {on ? limit : 0, 0}};
  if (limit > 0)
    setitimer(ITIMER_PROF, &t, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cpu_limit(true);
  char *src = malloc(size + 1);
  if (!src) {
    cpu_limit(false);
    return 0;
  }
  memcpy(src, data, size);
  src[size] = 0; /* the text ends at the first NUL, as for any C caller */
  ox_compile_options opts = {0};
  opts.filename = "fuzz.oxk";
  opts.no_cache = 1;
  char *out = NULL;
  ox_status s = ox_emit(src, &opts, OX_TARGET_CPU, OX_EMIT_IR, &out);
  if (s == OX_OK) {
    if (!out || !strstr(out, "kernel "))
      bug("ox_emit succeeded without kernel IR", out ? out : "", src);
  } else {
    const char *msg = ox_last_error();
    if (s != OX_ERR_COMPILE || !msg[0])
      bug(ox_status_name(s), msg, src);
    check_locations(src, msg);
  }
  ox_free(out);
  ox_clear_error();
  if (s == OX_OK) {
    uint64_t h = hash(data, size);
    int64_t gen[OXA_MAX_GENERICS];
    static const int64_t choice[8] = {16, 32, 64, 128, 1, 8, 256, 3};
    for (int g = 0; g < OXA_MAX_GENERICS; g++)
      gen[g] = choice[(h >> (3 * g + 8)) & 7];
    static const int sms[3] = {90, 80, 0};
    int pick = (int)(h % 3);
    for (int t = 0; t < 3; t++)
      lower_and_generate(src, gen, h >> 40, sms[t], t == pick, t == pick && size <= 1024 && (h >> 4) % 16 == 0);
    if (strstr(src, "#[tile]")) { /* the shapes launches choose */
      static const int64_t shapes[5][3] = {{128, 256, 64}, {128, 128, 64}, {64, 128, 64}, {64, 64, 64}, {128, 128, 32}};
      for (int c = 0; c < 5; c++) {
        int64_t fixed[OXA_MAX_GENERICS];
        for (int j = 0; j < OXA_MAX_GENERICS; j++)
          fixed[j] = j < 3 ? shapes[c][j] : 64;
        for (int t = 0; t < 2; t++)
          for (int contig = 0; contig < 2; contig++)
            lower_and_generate(src, fixed, contig ? ~(uint64_t)0 : 0, sms[t], false, false);
      }
    }
  }
  free(src);
  cpu_limit(false);
  return 0;
}
