/*
 * api.h - the api layer: what oxide.h promises on top of the layers below.
 * module.c compiles kernel text (front end -> IR -> backend) and loads the
 * result on a device; cache.c keeps compiled artifacts; launch.c checks and
 * queues launches; doctor.c reports the environment. Prefix: oxa_.
 */
#ifndef OXIDE_API_H
#define OXIDE_API_H

#include "backend/backend.h"
#include "front/front.h"
#include "front/limits.h"
#include "ir/ir.h"
#include "runtime/runtime.h"

#include <pthread.h>

#define OXA_MAX_PARAMS OXI_MAX_PARAMS
#define OXA_MAX_GENERICS OXF_MAX_GENERICS
/* What ox_version() returns (module.c); tune.c keys its choices with it too. */
#define OXA_VERSION "0.1.0 (LLVM " OXIDE_LLVM_VERSION ")"

/* Compiled code loaded on a device: a CUDA module or host code in a JIT. */
typedef struct oxa_code {
  CUmodule cu_mod;
  oxl_jit *jit;
} oxa_code;

/* Code is compiled once (a cache entry per architecture) and loaded on each
 * device a launch runs on, the first time: per device slot, a CUDA device's
 * ordinal (the CPU's is 0). */
#define OXA_MAX_DEVICES 16
static inline int oxa_slot(ox_device d) { return d->type == OX_DEVICE_CUDA ? d->ordinal : 0; }

/* One specialization of a tile kernel: its const generics' values, the
 * lowered IR, and the loaded code. */
typedef struct oxa_spec {
  int64_t generics[OXA_MAX_GENERICS];
  uint64_t facts; /* bit i: tensor argument i is contiguous16 (oxi_param) */
  oxb_arena arena; /* its IR */
  oxi_module irm;
  const oxi_kernel *ir;
  int sm;                /* the architecture and shared memory a block may have that it was */
  int64_t shared_limit;  /* lowered for (the launch device's) */
  char extra[512];       /* what its cache key adds to the module's source (oxa_build) */
  /* by device slot: loaded there yet (set last, under the kernel's lock), the code, its entry,
     and for persistent kernels (oxi_kernel.persistent) the blocks an SM holds at once */
  _Atomic int loaded[OXA_MAX_DEVICES];
  oxa_code code[OXA_MAX_DEVICES];
  CUfunction cu_fn[OXA_MAX_DEVICES];
  int resident[OXA_MAX_DEVICES];
  oxr_cpu_kernel cpu;
  struct oxa_spec *next;
} oxa_spec;

typedef struct oxa_module oxa_module;
typedef struct oxa_kernel oxa_kernel;

/* A kernel; its public handle (ox_kernel) lives as long as its module. */
struct oxa_kernel {
  ox_kernel handle;
  oxa_module *mod;
  const oxi_kernel *ir; /* lives in the module's arena (tile kernels: a signature only) */
  uint32_t tag;         /* identifies the kernel in device-side error records */
  int nflat;            /* flattened parameter count (slices count twice) */
  CUfunction cu_fn[OXA_MAX_DEVICES]; /* its entry in the module's code, by device slot */
  oxr_cpu_kernel cpu;
  const oxf_fn *fn;     /* generic kernels (#[tile], or with type generics): the function,
                           specialized at launch (spec.c); NULL for the others */
  int ngenerics;
  int64_t explicit_generics[OXA_MAX_GENERICS]; /* ox_kernel_set_generic; 0: none */
  oxa_spec *specs;      /* generic kernels: the specializations made so far */
  pthread_mutex_t lock; /* guards specs */
  /* ox_kernel_set_candidates: the candidates (ncand is read without the lock to
     see whether there are any), each one's value per generic (0: not set by
     them), and the chosen one per tuning key (tune.c). tune_lock guards them,
     and is held through a launch that uses them (so a key is measured once, and
     candidates set meanwhile wait) */
  _Atomic int ncand;
  int64_t (*cand)[OXA_MAX_GENERICS];
  struct oxa_choice *choices;
  pthread_mutex_t tune_lock;
};

/* A module; its public handle is ox_module. */
struct oxa_module {
  ox_module handle;
  ox_device dev;
  oxb_arena arena;
  oxi_module ir;
  oxi_module sigs; /* tile kernels checked with placeholder generics: their signatures */
  const oxf_program *prog;
  char *text;      /* a copy of the source: tile kernels are specialized from it later */
  ox_compile_options opts;
  int nkernels;
  oxa_kernel *kernels;
  /* the #[kernel]s' code by device slot: on `dev` from the compile, on others from their first
     launch there (load_lock; loaded[] set last) */
  _Atomic int loaded[OXA_MAX_DEVICES];
  oxa_code code[OXA_MAX_DEVICES];
  pthread_mutex_t load_lock;
  int from_cache;
};

/* The entry of #[kernel] k on device `dev` (of the module's device type),
 * loading the module's code there on first use (module.c). */
ox_status oxa_kernel_fn(oxa_kernel *k, ox_device dev, CUfunction *fn);
/* The device a launch of `k` with no stream runs on: its tensors' (every
 * one's, else an error naming two that differ), or with none, the module's. */
ox_status oxa_launch_device(const oxa_kernel *k, oxr_tensor *const *tens, int nargs, ox_device *dev);

/* Generates code for the kernels of `irm` (from the compiled-kernel cache when
 * possible; `source` and `extra` make the cache key) and loads it on `dev`. */
ox_status oxa_build(ox_device dev, const oxi_module *irm, const char *source, const char *extra,
                    const ox_compile_options *o, oxa_code *code, int *from_cache);
/* Finds kernel `ki`'s entry point in loaded code. */
ox_status oxa_entry(ox_device dev, const oxa_code *code, const oxi_kernel *ki, CUfunction *cu,
                    oxr_cpu_kernel *cpu);
void oxa_code_free(ox_device dev, oxa_code *code);
/* The dynamic shared memory a CUDA launch of `ki` passes: all of it when it
 * is above the static limit (the code then declares an extern array). */
static inline unsigned oxa_dynamic_shared(const oxi_kernel *ki) {
  return ki->shared_bytes > OXI_STATIC_SHARED_MAX ? (unsigned)ki->shared_bytes : 0;
}

/* The kernel behind handle `h`, or NULL with the last error set (naming API
 * function `fn`) for NULL or a handle that is not live (its module was
 * destroyed, or it is not a kernel handle). */
oxa_kernel *oxa_kernel_get(const char *fn, ox_kernel h);

/* The compiled-kernel cache (cache.c): artifacts by key (64 hex digits) and
 * kind (`ext`: "cubin" or "o"), in memory and in the user's cache directory.
 * Nothing here fails: an unusable directory or a damaged, foreign or unsafe
 * entry is a miss (noted in the $OXIDE_DEBUG_CACHE log), and the next put
 * replaces the entry. */
/* False when $OXIDE_CACHE turns the cache off (both levels). */
bool oxa_cache_enabled(void);
/* The artifact (malloc'ed), from memory, else from a disk entry that passed
 * every check; NULL on a miss. */
char *oxa_cache_get(const char *key, const char *ext, size_t *len);
/* Stores an artifact in memory and on disk (evicting the least recently used
 * entries beyond the limits). */
void oxa_cache_put(const char *key, const char *ext, const void *data, size_t len);
/* Forgets an entry that passed the checks but does not load (`why`). */
void oxa_cache_drop(const char *key, const char *ext, const char *why);
/* Appends a one-line description (directory, whether it is used, limits) for
 * `oxide doctor`. */
void oxa_cache_report(oxb_str *out);

/* ---- args.c: a launch's arguments */
/* The tensors of a launch of `k`: tens[i] is argument i's tensor (NULL for a
 * scalar or a NULL tensor). An argument count out of range, NULL args, or a
 * tensor handle that is not live is an error. */
ox_status oxa_arg_tensors(const oxa_kernel *k, const ox_arg *args, int nargs, oxr_tensor **tens);
/* The bits of a scalar launch argument as the kernel expects them. */
void oxa_scalar_bits(const ox_arg *a, uint64_t *slot);
/* Refuses a launch whose mutable argument shares memory with another. */
ox_status oxa_check_overlap(const oxi_kernel *ki, oxr_tensor *const *tens, int nargs);
/* A parameter kind as the source writes it ("&mut [T]"), for errors. */
const char *oxa_pkind_name(oxi_pkind k);
/* Whether a parameter of kind k is written by the kernel. */
bool oxa_mutable_kind(oxi_pkind k);

/* Checks (and with `run`, queues) a launch of `k` on `s` with the
 * arguments' tensors `tens` (oxa_arg_tensors): the body of ox_launch_check
 * and ox_launch. */
ox_status oxa_launch(oxa_kernel *k, oxr_stream *s, const ox_launch_config *cfg, const ox_arg *args,
                     int nargs, oxr_tensor *const *tens, bool run);

/* Checks (and with `run`, queues) a launch of tile kernel `k`: binds its
 * generics from the output partitions, specializes it on first use. */
ox_status oxa_tile_launch(oxa_kernel *k, oxr_stream *s, const ox_launch_config *cfg,
                          const ox_arg *args, int nargs, oxr_tensor *const *tens, bool run);

/* Specializations of generic kernels (spec.c). The specialization of k for
 * generics `gen` (front.h: oxf_check_spec's values) and launch facts `facts`
 * (tile kernels: bit i says tensor argument i is contiguous16) on device
 * `dev`: made on first use (lowered for dev's architecture and shared
 * memory, which devices of one kind share) and loaded on dev on its first
 * use there. */
ox_status oxa_specialize(oxa_kernel *k, const int64_t *gen, uint64_t facts, ox_device dev, oxa_spec **out);
/* Binds k's type generics (gen[g] = dtype + 1) from the dtypes of the
 * launch's tensors (tens); the const generics in gen are left as they are.
 * Tensors whose dtypes disagree on a generic, or fall outside its bound, are
 * an error. */
ox_status oxa_bind_types(const oxa_kernel *k, const ox_arg *args, int nargs, oxr_tensor *const *tens,
                         int64_t *gen);
/* The launch's arguments with each scalar of a generic type converted to its
 * binding in gen: `args` itself when k has no type generics, else `conv`
 * (nargs long) filled in; NULL, with the last error set, for a scalar that
 * does not convert (out of range, a float for an integer type, not a number). */
const ox_arg *oxa_generic_args(const oxa_kernel *k, const int64_t *gen, const ox_arg *args, int nargs,
                               ox_arg *conv);

/* Tile configurations chosen by measurement (tune.c, for tile_launch.c). A
 * key names what the choice depends on: the kernel's source and name, the
 * launch device's kind (name and architecture: devices of one kind share a
 * choice), every argument's dtype, shape and alignment (contiguous16), the
 * output tiles the candidates leave, and the candidates. */
void oxa_tune_key(const oxa_kernel *k, ox_device dev, const ox_arg *args, int nargs, oxr_tensor *const *tens,
                  uint64_t facts, char key[65]);
/* The candidate chosen for `key` (in memory, else from the disk cache), or -1.
 * The caller holds k->tune_lock, as for everything of tune.c. */
int oxa_tune_lookup(oxa_kernel *k, const char *key);
/* Queues one launch of candidate `c` on the stream being tuned. */
typedef ox_status (*oxa_tune_run)(void *ctx, int c);
/* Measures each of k's candidates (run, then waits for stream `s`), keeps the
 * fastest for `key` in memory and on disk, and returns it in *chosen. A
 * candidate whose run fails is skipped; if all fail, the first one's error. */
ox_status oxa_tune_measure(oxa_kernel *k, oxr_stream *s, const char *key, oxa_tune_run run, void *ctx,
                           int *chosen);
/* Frees k's choices (module destruction). */
void oxa_tune_free(oxa_kernel *k);

/* Runs the front end on `source`: on success the IR is in `m` (allocated in
 * `a`); on failure returns OX_ERR_COMPILE with every diagnostic as the last
 * error. `ast` (optional) receives the syntax-tree dump. */
ox_status oxa_front(oxb_arena *a, const char *source, const char *filename, oxi_module *m,
                    oxb_str *ast, const oxf_program **prog);

/* Finds where ptxas is (PATH, then /usr/local/cuda/bin), or NULL. */
const char *oxa_find_ptxas(char *buf, size_t n);

#endif
