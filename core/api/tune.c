/* tune.c - tile configurations chosen by measurement (ox_kernel_set_candidates):
 * the key a choice depends on, the choices kept per kernel and in the
 * compiled-kernel cache (so that a second process starts with the first
 * one's), and the measurement itself. tile_launch.c decides when to measure
 * and how one candidate runs (the callback). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"

typedef struct oxa_choice {
  char key[65];
  int index;
  struct oxa_choice *next;
} oxa_choice;

/* The cache entries' kind, and the first word of their text: a later format
 * gets a new word, and an entry of another is a miss. */
#define TUNE_EXT "tune"
#define TUNE_MAGIC "oxide-tune-1"

void oxa_tune_key(const oxa_kernel *k, ox_device dev, const ox_arg *args, int nargs, oxr_tensor *const *tens,
                  uint64_t facts, char key[65]) {
  const oxa_module *m = k->mod;
  oxb_hasher h;
  oxb_hash_init(&h);
  oxb_hash_str(&h, TUNE_MAGIC);
  oxb_hash_str(&h, OXA_VERSION);
  oxb_hash_str(&h, m->text);
  oxb_hash_str(&h, k->ir->name);
  oxb_hash_str(&h, dev->name);
  int arch[3] = {dev->type, dev->cc, m->opts.sm};
  oxb_hash_update(&h, arch, sizeof arch);
  oxb_hash_update(&h, &facts, sizeof facts);
  for (int i = 0; i < nargs; i++) {
    const oxr_tensor *t = tens[i];
    int kind[2] = {args[i].kind, t ? (int)t->dtype : (int)args[i].dtype};
    oxb_hash_update(&h, kind, sizeof kind);
    if (!t)
      continue;
    oxb_hash_update(&h, &t->ndim, sizeof t->ndim);
    oxb_hash_update(&h, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    /* an output's tile dims that no candidate sets stay as passed (whole or
       partitioned in any tiles, the candidates' dims are theirs) */
    const oxf_param *p = k->fn->params.items[i];
    for (int d = 0; p->type->kind == OXF_TY_MUTTENSOR && d < t->ndim && d < p->type->rank; d++) {
      int64_t want = p->type->dims[d];
      int64_t tile = want <= -2 && k->cand[0][-2 - want] ? 0 : t->flags & OXR_T_PARTITION ? t->tile[d] : want;
      oxb_hash_update(&h, &tile, sizeof tile);
    }
  }
  oxb_hash_update(&h, &k->ncand, sizeof k->ncand);
  oxb_hash_update(&h, k->cand, sizeof *k->cand * (size_t)k->ncand);
  oxb_hash_final_hex(&h, key);
}

static void remember(oxa_kernel *k, const char *key, int index) {
  oxa_choice *c = calloc(1, sizeof *c);
  if (!c)
    return; /* measured again next time */
  memcpy(c->key, key, 65);
  c->index = index;
  c->next = k->choices;
  k->choices = c;
}

int oxa_tune_lookup(oxa_kernel *k, const char *key) {
  for (const oxa_choice *c = k->choices; c; c = c->next)
    if (!strcmp(c->key, key))
      return c->index;
  if (k->mod->opts.no_cache || !oxa_cache_enabled())
    return -1;
  size_t len = 0;
  char *text = oxa_cache_get(key, TUNE_EXT, &len);
  int index = -1, n = -1;
  char magic[16] = "";
  if (text && len < 64) {
    char buf[64];
    memcpy(buf, text, len);
    buf[len] = 0;
    if (sscanf(buf, "%15s %d %d", magic, &index, &n) != 3 || strcmp(magic, TUNE_MAGIC) || n != k->ncand ||
        index < 0 || index >= n)
      index = -1;
  }
  free(text);
  if (index >= 0)
    remember(k, key, index);
  return index;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Waits for stream s's work; its errors (a bounds error of a candidate) too. */
static ox_status wait_stream(oxr_stream *s) {
  if (s->dev->type == OX_DEVICE_CUDA) {
    ox_status st = oxr_cuda_make_current(s->dev);
    if (st)
      return st;
    CUresult r = oxr_cu.cuStreamSynchronize(s->cu);
    if (r != CUDA_SUCCESS)
      return oxr_cuda_error(r, "cuStreamSynchronize");
  }
  return oxr_stream_check_error(s);
}

/* The batch of candidate c's runs timed: `reps` launches, then a wait for
 * the stream, on the host clock (launches queue asynchronously, so a batch
 * is the GPU's time plus one wait). */
static ox_status batch(oxr_stream *s, oxa_tune_run run, void *ctx, int c, int reps, double *secs) {
  double t0 = now();
  ox_status st = OX_OK;
  for (int r = 0; r < reps && !st; r++)
    st = run(ctx, c);
  if (!st)
    st = wait_stream(s);
  *secs = (now() - t0) / reps;
  return st;
}

static void debug_candidate(const oxa_kernel *k, int c) {
  fprintf(stderr, "oxide tune: kernel '%s', candidate %d (", k->ir->name, c);
  for (int g = 0, n = 0; g < k->ngenerics; g++)
    if (k->cand[c][g])
      fprintf(stderr, "%s%s=%lld", n++ ? " " : "", (const char *)k->fn->generics.items[g], (long long)k->cand[c][g]);
  fprintf(stderr, ")");
}

/* The measurement: every candidate runs once first (compiling it: the GPU
 * idles meanwhile, and its clocks drop), then once alone to size its batches
 * (about 20 ms, 1 to 50 runs); then 4 rounds of one batch of each candidate
 * in turn, each keeping its best, so that no candidate is measured only
 * while the clocks ramp up again (at 8192^3 on the H200, timing each
 * candidate right after its compile measured the fastest tile 30% slow). */
ox_status oxa_tune_measure(oxa_kernel *k, oxr_stream *s, const char *key, oxa_tune_run run, void *ctx,
                           int *chosen) {
  bool debug = getenv("OXIDE_DEBUG_TUNE") && strcmp(getenv("OXIDE_DEBUG_TUNE"), "0");
  int n = k->ncand, *reps = calloc((size_t)n, sizeof *reps);
  double *best = malloc(sizeof *best * (size_t)n);
  if (!reps || !best) {
    free(reps);
    free(best);
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  }
  char *first_error = NULL;
  ox_status first_status = OX_OK, fault = OX_OK;
  for (int c = 0; c < n && !fault; c++) {
    double one = 0;
    ox_status st = run(ctx, c);
    if (!st)
      st = wait_stream(s);
    if (!st)
      st = batch(s, run, ctx, c, 1, &one);
    best[c] = INFINITY;
    if (st == OX_ERR_BOUNDS || st == OX_ERR_DRIVER) /* a fault, not an unusable configuration */
      fault = st;
    else if (st && !first_status) {
      first_status = st;
      first_error = strdup(ox_last_error());
    }
    if (debug && st) {
      debug_candidate(k, c);
      fprintf(stderr, ": skipped: %s\n", ox_last_error());
    }
    reps[c] = st ? 0 : one <= 0 ? 50 : (int)fmin(50, fmax(1, 0.02 / one));
  }
  for (int round = 0; round < 4 && !fault; round++)
    for (int c = 0; c < n && !fault; c++) {
      double t;
      if (!reps[c])
        continue;
      if ((fault = batch(s, run, ctx, c, reps[c], &t)))
        break;
      best[c] = fmin(best[c], t);
    }
  int pick = -1;
  for (int c = 0; c < n && !fault; c++) {
    if (debug && reps[c]) {
      debug_candidate(k, c);
      fprintf(stderr, ": %.3f ms\n", best[c] * 1e3);
    }
    if (reps[c] && (pick < 0 || best[c] < best[pick]))
      pick = c;
  }
  free(reps);
  free(best);
  if (fault) {
    free(first_error);
    return fault;
  }
  if (pick < 0) {
    ox_status st = oxb_set_error(first_status, "kernel '%s': no candidate configuration runs; the first "
                                 "one failed with: %s", k->ir->name, first_error ? first_error : "?");
    free(first_error);
    return st;
  }
  free(first_error);
  ox_clear_error(); /* the skipped candidates' errors are not this launch's */
  remember(k, key, pick);
  if (!k->mod->opts.no_cache && oxa_cache_enabled()) {
    char text[64];
    int len = snprintf(text, sizeof text, "%s %d %d\n", TUNE_MAGIC, pick, k->ncand);
    oxa_cache_put(key, TUNE_EXT, text, (size_t)len);
  }
  if (debug)
    fprintf(stderr, "oxide tune: kernel '%s' runs candidate %d\n", k->ir->name, pick);
  *chosen = pick;
  return OX_OK;
}

void oxa_tune_free(oxa_kernel *k) {
  for (oxa_choice *c = k->choices, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  k->choices = NULL;
  free(k->cand);
  k->cand = NULL;
  k->ncand = 0;
}
