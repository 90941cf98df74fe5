/* limits_test.c - the tile lowering's size limits (core/front/limits.h;
 * docs/language.md, "Limits"). A tile kernel whose lowered code would cross a
 * limit fails with OX_ERR_COMPILE at the tile operation whose expansion
 * crossed it; the largest accepted kernel of each kind is lowered and
 * compiled (PTX for CUDA, assembly for the CPU). Internal: binds the generics
 * directly, as a launch does (ox_emit shows only the placeholder binding).
 * tests/front_test.c holds the front end's limits.
 *
 * OXIDE_TEST_VERBOSE=1 prints each limit's largest accepted size and how long
 * LLVM took for it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "check.h"
#include "front/front.h"
#include "front/limits.h"
#include "tile/tile.h"

static int verbose;

/* ------------------------------------------------------------ sources */

static char src[1 << 20];
static size_t nsrc;
static int src_lines;

static void put(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void put(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(src + nsrc, sizeof src - nsrc, fmt, ap);
  va_end(ap);
  size_t at = nsrc;
  nsrc += k > 0 && (size_t)k < sizeof src - nsrc ? (size_t)k : 0;
  for (size_t i = at; i < nsrc; i++)
    src_lines += src[i] == '\n';
}

static void reset(void) {
  nsrc = 0;
  src[0] = 0;
  src_lines = 1;
}

/* ------------------------------------------------------------ lowering */

typedef struct unit {
  oxb_arena arena;
  oxb_source source;
  oxb_diags d;
  oxi_module m;
  const oxf_program *prog;
} unit;

/* Checks every #[tile] function of `src` with `gen` (in source order) into
 * one module and lowers each for `sm` (0: the CPU), as ox_emit lowers a
 * source's tile kernels together. Returns the first failure's status, with
 * the front end's diagnostics or the lowering's message in ox_last_error(). */
static ox_status lower_all(unit *u, const int64_t *gen, int sm) {
  memset(u, 0, sizeof *u);
  u->source.name = "t.oxk";
  u->source.text = src;
  u->source.len = nsrc;
  u->d.src = &u->source;
  u->m.arena = &u->arena;
  u->m.filename = "t.oxk";
  u->prog = oxf_parse(&u->arena, &u->d, &u->source);
  for (int i = 0; !u->d.errors && i < u->prog->fns.len; i++) {
    const oxf_fn *fn = u->prog->fns.items[i];
    if (fn->is_tile)
      oxf_check_spec(&u->arena, &u->d, u->prog, fn, gen, &u->m);
  }
  if (u->d.errors) {
    ox_status s = oxb_set_error_text(OX_ERR_COMPILE, u->d.text.buf);
    oxb_str_free(&u->d.text);
    return s;
  }
  oxb_str_free(&u->d.text);
  for (int i = 0; i < u->m.kernels.len; i++) {
    ox_status s = oxt_lower(&u->m, u->m.kernels.items[i], sm, oxt_shared_limit(sm ? sm : 90));
    if (s)
      return s;
  }
  oxb_str err = {0};
  bool ok = oxi_verify(&u->m, &err);
  CHECK(ok, "lowered IR does not verify: %s", err.buf);
  oxb_str_free(&err);
  return ok ? OX_OK : OX_ERR_INTERNAL;
}

/* Code generation for the lowered module: the largest accepted kernels must
 * make it through LLVM too. */
static void generate(unit *u, int sm, const char *what) {
  oxl_options lo = {sm ? OXL_CUDA : OXL_CPU, sm, 3};
  char *out = NULL;
  size_t len = 0;
  uint64_t t0 = oxb_now_ns();
  ox_status s = oxl_generate(&u->m, &lo, sm ? OXL_OUT_PTX : OXL_OUT_ASM, &out, &len);
  CHECK(s == OX_OK && len > 0, "%s: code generation: %s", what, ox_last_error());
  if (verbose)
    printf("  %-44s %s in %.2f s\n", what, sm ? "PTX" : "CPU assembly", (double)(oxb_now_ns() - t0) * 1e-9);
  free(out);
}

/* ------------------------------------------------------------ the limits */

/* A lowering limit: make(n) writes a source of n units (tile operations) and
 * returns the line of unit n; the test finds the largest n whose tile kernels
 * lower for `sm` with generics `gen`, compiles it, and checks that n + 1 fails
 * with one error whose text holds `msg`, at unit n + 1's line or after it (the
 * store after the units expands too). */
typedef struct lcase {
  const char *name;
  int (*make)(int n);
  int sm;
  int64_t gen[2];
  int lo, hi;
  const char *msg;
} lcase;

static void test_lowering_limit(const lcase *c) {
  unit u;
  int lo = c->lo, hi = c->hi;
  reset();
  c->make(lo);
  ox_status s = lower_all(&u, c->gen, c->sm);
  CHECK(s == OX_OK, "%s: %d units are refused: %s", c->name, lo, ox_last_error());
  oxb_arena_free(&u.arena);
  reset();
  c->make(hi);
  s = lower_all(&u, c->gen, c->sm);
  CHECK(s != OX_OK, "%s: %d units are accepted", c->name, hi);
  oxb_arena_free(&u.arena);
  if (test_failures)
    return;
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    reset();
    c->make(mid);
    s = lower_all(&u, c->gen, c->sm);
    oxb_arena_free(&u.arena);
    if (s == OX_OK)
      lo = mid;
    else
      hi = mid;
  }
  reset();
  c->make(lo);
  s = lower_all(&u, c->gen, c->sm);
  if (s == OX_OK) {
    int64_t instrs = 0;
    for (int i = 0; i < u.m.kernels.len; i++)
      instrs += ((oxi_kernel *)u.m.kernels.items[i])->ninstrs;
    if (verbose)
      printf("limit %-34s largest accepted %d (%lld lowered instructions)\n", c->name, lo,
             (long long)instrs);
    generate(&u, c->sm, c->name);
  }
  oxb_arena_free(&u.arena);
  reset();
  int line = c->make(lo + 1);
  s = lower_all(&u, c->gen, c->sm);
  const char *msg = ox_last_error();
  int at = 0;
  CHECK(s == OX_ERR_COMPILE && strstr(msg, c->msg) && !strstr(strstr(msg, c->msg), "\nt.oxk") &&
            sscanf(msg, "t.oxk:%d:", &at) == 1 && at >= line,
        "%s: %d units: expected one error at line %d or after with '%s', got %s: %s", c->name, lo + 1,
        line, c->msg, ox_status_name(s), msg);
  oxb_arena_free(&u.arena);
}

/* n elementwise operations on a tile of B elements */
static int make_ops(int n) {
  put("#[tile]\nfn k<const B: i32>(y: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>) {\n"
      "  let mut t = x.partition([B]).load([tile_id(0)]);\n");
  int line = 0;
  for (int j = 1; j <= n; j++) {
    line = src_lines;
    put("  t = t * 1.5 + 2.5;\n");
  }
  put("  y.store(t);\n}\n");
  return line;
}

/* n reductions and broadcasts of a [B0, B1] tile: shared-memory round trips */
static int make_reductions(int n) {
  put("#[tile]\nfn k<const B0: i32, const B1: i32>(y: &mut Tensor<f32, [B0, B1]>, "
      "x: &Tensor<f32, [-1, -1]>) {\n"
      "  let mut t = x.partition([B0, B1]).load([tile_id(0), tile_id(1)]);\n");
  int line = 0;
  for (int j = 1; j <= n; j++) {
    line = src_lines;
    put("  t = t - reduce_sum(t, 1);\n");
  }
  put("  y.store(t);\n}\n");
  return line;
}

/* Three kernels of n operations each on tiles of B elements: ox_emit lowers
 * them into one module */
static int make_three(int n) {
  int line = 0;
  for (int k = 0; k < 3; k++) {
    put("#[tile]\nfn k%d<const B: i32>(y: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>) {\n"
        "  let mut t = x.partition([B]).load([tile_id(0)]);\n", k);
    for (int j = 1; j <= (k < 2 ? 110 : n); j++) {
      line = src_lines;
      put("  t = t * 1.5 + 2.5;\n");
    }
    put("  y.store(t);\n}\n");
  }
  return line;
}

int main(int argc, char **argv) {
  verbose = (argc > 1 && !strcmp(argv[1], "-v")) || getenv("OXIDE_TEST_VERBOSE");
  static const lcase cases[] = {
      {"CUDA: elementwise ops on a 65536 tile", make_ops, 90, {65536, 0}, 1, 2000,
       "error: kernel 'k' is too large after the tile lowering: more than 32768 IR instructions"},
      {"CUDA sm_80: reductions of a 128 x 128 tile", make_reductions, 80, {128, 128}, 1, 2000,
       "error: kernel 'k' has too many loops for its size after the tile lowering: "},
      {"CPU: elementwise ops (a loop each)", make_ops, 0, {1024, 0}, 1, 2000,
       "error: kernel 'k' has more than 256 loops after the tile lowering"},
      {"CUDA: three kernels lowered together", make_three, 90, {65536, 0}, 1, 2000,
       "error: the kernels of this source are too large together after the tile lowering: more "
       "than 65536 IR instructions"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    test_lowering_limit(&cases[i]);
  printf("limits_test: %zu limits\n", sizeof cases / sizeof cases[0]);
  return test_done("limits_test");
}
