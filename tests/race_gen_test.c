/* race_gen_test - tries to break the ownership rule (docs/language.md section 6):
 * no two threads of a launch of a safe kernel write one DisjointSlice element.
 *
 * It generates kernels that write one output through one to three witnesses of
 * random kinds (index_1d, index_2d with a width from a list of uniform and
 * per-thread expressions, index_block, grid_stride with a limit from a similar
 * list, index_chunk with a length from the widths' list, each of its elements
 * written through .at(j)), some inside a branch or a loop. Each writer records its thread's linear
 * index in two atomic arrays (min and max): an element with min != max was
 * written by two threads. Then, per kernel:
 *  - the safe kernel is accepted exactly when the rule (as documented) says so,
 *    and a refusal names the line and says why;
 *  - an accepted kernel is run on the CPU at random grid and block shapes and
 *    sizes, and no element may have two writers;
 *  - the same kernel as an `unsafe fn` (where the rule is the programmer's job)
 *    is run too: among the refused kernels some must show a race, or this test
 *    could not see one.
 *
 *   race_gen_test [KERNELS [SEED]]   (defaults 120 and 1; env OXIDE_RACE_KERNELS too)
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static uint64_t rng = 1;
static unsigned rnd(unsigned n) { /* xorshift64*: reproducible from the seed */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (unsigned)((rng * 2685821657736338717ull) >> 33) % n;
}

enum { K1D, K2D, KBLOCK, KSTRIDE, KCHUNK, KINDS };
/* index_2d widths and grid_stride limits: uniform ones first */
static const char *WIDTHS[] = {"w", "w + 1", "o.len() / 4", "(thread::block_dim_x() * thread::grid_dim_x()) as usize",
                               "3", "thread::thread_idx_x() as usize + 1", "thread::block_idx_x() as usize + w"};
enum { UNIFORM_WIDTHS = 5 };
static const char *LIMITS[] = {"o.len()", "n", "n + thread::thread_idx_x() as usize",
                               "n + thread::block_idx_x() as usize * 3"};

typedef struct site {
  int kind, arg; /* arg: WIDTHS or LIMITS index */
  int wrap;      /* 0 none, 1 inside an if on the thread index, 2 inside a loop */
  int loopw;     /* index_2d inside the loop: the width adds the loop variable */
} site;

static const char *WRITE = "if let Some(r) = o.get_mut(i) { *r = me; lo.atomic_min(i.get(), me); "
                           "hi.atomic_max(i.get(), me); }";

static void gen(char *buf, size_t cap, const site *s, int n, int unsafe_fn) {
  int len = snprintf(buf, cap,
                     "#[kernel]\n%sfn k(o: DisjointSlice<u32>, lo: &[Atomic<u32>], hi: &[Atomic<u32>], "
                     "n: usize, w: usize) {\n    let t = thread::index_1d();\n    let me = t.get() as u32;\n",
                     unsafe_fn ? "unsafe " : "");
  for (int j = 0; j < n; j++) {
    const char *open = s[j].wrap == 1 ? "    if thread::thread_idx_x() % 2u32 == 0u32 {\n"
                       : s[j].wrap == 2 ? "    for q in 0..2u64 {\n"
                                        : "    {\n";
    len += snprintf(buf + len, cap - (size_t)len, "%s", open);
    switch (s[j].kind) {
    case K1D: len += snprintf(buf + len, cap - (size_t)len, "        let i = thread::index_1d();\n        %s\n", WRITE); break;
    case KBLOCK: len += snprintf(buf + len, cap - (size_t)len, "        let i = thread::index_block();\n        %s\n", WRITE); break;
    case K2D:
      len += snprintf(buf + len, cap - (size_t)len, "        let i = thread::index_2d(%s%s);\n        %s\n",
                      WIDTHS[s[j].arg], s[j].loopw ? " + q" : "", WRITE);
      break;
    case KCHUNK: /* every element of the chunk, and one past it (which at() must refuse) */
      len += snprintf(buf + len, cap - (size_t)len,
                      "        let c = thread::index_chunk(%s%s);\n        for j in 0..(%s%s) + 1 {\n"
                      "            let i = c.at(j);\n            %s\n        }\n",
                      WIDTHS[s[j].arg], s[j].loopw ? " + q" : "", WIDTHS[s[j].arg], s[j].loopw ? " + q" : "",
                      WRITE);
      break;
    default:
      len += snprintf(buf + len, cap - (size_t)len, "        for i in thread::grid_stride(%s) {\n            %s\n        }\n",
                      LIMITS[s[j].arg], WRITE);
      break;
    }
    len += snprintf(buf + len, cap - (size_t)len, "    }\n");
  }
  snprintf(buf + len, cap - (size_t)len, "}\n");
}

/* What the rule says of a safe kernel: one kind per output; index_2d and
 * index_chunk with one uniform width (the same expression); grid_stride with
 * any limit. */
static int rule_accepts(const site *s, int n) {
  for (int j = 0; j < n; j++) {
    if (s[j].kind != s[0].kind)
      return 0;
    if ((s[j].kind == K2D || s[j].kind == KCHUNK) &&
        (s[j].arg >= UNIFORM_WIDTHS || s[j].loopw || s[j].arg != s[0].arg))
      return 0;
  }
  return 1;
}

/* Runs kernel k at a random launch shape; returns the number of elements with
 * two writers (-1 if the launch itself failed). */
static int run_once(ox_device dev, ox_kernel k) {
  int64_t len = 1 + rnd(160);
  ox_launch_config cfg = {{1 + rnd(4), 1 + rnd(3), 1 + rnd(2)}, {1 + rnd(8), 1 + rnd(4), 1 + rnd(2)}};
  if (rnd(3) == 0) /* sometimes one dimension only */
    cfg.grid[1] = cfg.grid[2] = cfg.block[1] = cfg.block[2] = 1;
  uint64_t n = rnd(200), w = rnd(4) ? 1 + rnd(24) : 0;
  uint32_t *lo = malloc(sizeof(uint32_t) * (size_t)len), *hi = malloc(sizeof(uint32_t) * (size_t)len);
  for (int64_t e = 0; e < len; e++) {
    lo[e] = UINT32_MAX;
    hi[e] = 0;
  }
  ox_tensor to = NULL, tlo = NULL, thi = NULL;
  int bad = -1;
  if (ox_tensor_zeros(dev, NULL, OX_U32, 1, &len, &to) == OX_OK &&
      ox_tensor_from_host(dev, NULL, OX_U32, 1, &len, lo, sizeof(uint32_t) * (size_t)len, &tlo) == OX_OK &&
      ox_tensor_from_host(dev, NULL, OX_U32, 1, &len, hi, sizeof(uint32_t) * (size_t)len, &thi) == OX_OK) {
    ox_arg args[5] = {ox_arg_tensor(to), ox_arg_tensor(tlo), ox_arg_tensor(thi), ox_arg_u64(n), ox_arg_u64(w)};
    if (ox_launch(k, NULL, &cfg, args, 5) == OX_OK &&
        ox_tensor_to_host(tlo, NULL, lo, sizeof(uint32_t) * (size_t)len) == OX_OK &&
        ox_tensor_to_host(thi, NULL, hi, sizeof(uint32_t) * (size_t)len) == OX_OK) {
      bad = 0;
      for (int64_t e = 0; e < len; e++)
        bad += lo[e] != UINT32_MAX && lo[e] != hi[e];
    }
  }
  ox_tensor_release(to);
  ox_tensor_release(tlo);
  ox_tensor_release(thi);
  free(lo);
  free(hi);
  return bad;
}

int main(int argc, char **argv) {
  int kernels = argc > 1 ? atoi(argv[1]) : getenv("OXIDE_RACE_KERNELS") ? atoi(getenv("OXIDE_RACE_KERNELS")) : 120;
  rng = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
  if (!rng)
    rng = 1;
  ox_device dev = NULL;
  CHECK_OK(ox_device_get(OX_DEVICE_CPU, 0, &dev));
  if (!dev)
    return test_done("race_gen_test");
  int accepted = 0, refused = 0, launches = 0, caught = 0;
  static char src[4096];
  for (int g = 0; g < kernels; g++) {
    site s[3];
    int n = 1 + (int)rnd(3);
    for (int j = 0; j < n; j++) {
      s[j].kind = (int)rnd(KINDS);
      /* mostly the first site's kind, so that accepted kernels are common too */
      if (j && rnd(2))
        s[j].kind = s[0].kind;
      bool wide = s[j].kind == K2D || s[j].kind == KCHUNK;
      s[j].arg = wide ? (int)rnd((unsigned)COUNT(WIDTHS)) : (int)rnd((unsigned)COUNT(LIMITS));
      if (j && wide && s[0].kind == s[j].kind && rnd(2))
        s[j].arg = s[0].arg;
      s[j].wrap = (int)rnd(3);
      s[j].loopw = wide && s[j].wrap == 2 && rnd(3) == 0;
    }
    int expect = rule_accepts(s, n);
    gen(src, sizeof src, s, n, 0);
    ox_compile_options o = {.size = sizeof o, .filename = "race.oxk"};
    ox_module m = NULL;
    ox_status st = ox_module_compile(dev, src, &o, &m);
    CHECK(st == (expect ? OX_OK : OX_ERR_COMPILE),
          "kernel %d: %s, the rule %s it:\n%s", g, st == OX_OK ? "accepted" : "refused",
          expect ? "accepts" : "refuses", src);
    if (st != OX_OK) {
      refused++;
      const char *msg = ox_last_error();
      CHECK(strstr(msg, "race.oxk:") && (strstr(msg, "witness") || strstr(msg, "row width") || strstr(msg, "index_chunk")),
            "kernel %d: the refusal names a line and the rule:\n%s", g, msg);
    } else {
      accepted++;
      ox_kernel k = NULL;
      CHECK_OK(ox_module_get_kernel(m, "k", &k));
      for (int r = 0; k && r < 6; r++) {
        int bad = run_once(dev, k);
        launches++;
        CHECK(bad == 0, "kernel %d (seed %llu): %d elements written by two threads:\n%s", g,
              (unsigned long long)rng, bad, src);
      }
    }
    ox_module_destroy(m);
    if (st == OX_OK)
      continue;
    /* the refused kernel, as unsafe fn: does it really race somewhere? */
    gen(src, sizeof src, s, n, 1);
    m = NULL;
    CHECK_OK(ox_module_compile(dev, src, &o, &m));
    ox_kernel k = NULL;
    if (m)
      CHECK_OK(ox_module_get_kernel(m, "k", &k));
    int raced = 0;
    for (int r = 0; k && r < 6 && !raced; r++)
      raced = run_once(dev, k) > 0;
    caught += raced;
    ox_module_destroy(m);
  }
  printf("race_gen_test: %d kernels, %d accepted (%d launches, no element with two writers), %d refused "
         "(%d of them raced when compiled as unsafe fn)\n",
         kernels, accepted, launches, refused, caught);
  CHECK(accepted > kernels / 5 && refused > kernels / 5, "both outcomes are exercised");
  CHECK(caught > 0, "the detector saw the races of refused kernels");
  return test_done("race_gen_test");
}
