/* module.c - compiling kernel text (through the compiled-kernel cache,
 * cache.c), loading, and turning device-side error records into messages. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "api/api.h"
#include "tile/tile.h"

/* ------------------------------------------------------------- front end */

/* What the front end's region works on; the heap strings are freed by
 * oxa_front whatever the outcome (base.h: protected regions). */
typedef struct front_job {
  oxb_arena *a;
  const char *source, *filename;
  oxi_module *m;
  oxb_str *ast;
  const oxf_program **prog;
  oxb_diags d;
  oxb_str err;
} front_job;

static ox_status front_run(void *arg) {
  front_job *j = arg;
  oxb_arena *a = j->a;
  oxb_source *src = oxb_alloc(a, sizeof *src);
  /* copied: messages read it long after the caller's string may be gone */
  const char *filename = j->filename ? j->filename : "<input>";
  src->name = oxb_strndup(a, filename, strlen(filename));
  src->len = strlen(j->source);
  src->text = oxb_strndup(a, j->source, src->len);
  oxb_diags *d = &j->d;
  d->src = src;
  oxi_module *m = j->m;
  m->arena = a;
  m->filename = src->name;
  oxf_program *p = oxf_parse(a, d, src);
  if (j->prog)
    *j->prog = p;
  if (j->ast && !d->errors)
    oxf_dump(p, j->ast);
  if (!d->errors)
    oxf_check(a, d, p, m);
  if (d->errors) {
    if (oxb_too_many_errors(d))
      oxb_str_addf(&d->text, "too many errors; stopping\n");
    return oxb_set_error_text(OX_ERR_COMPILE, d->text.buf);
  }
  if (!oxi_verify(m, &j->err))
    return oxb_set_error(OX_ERR_INTERNAL, "internal error: %s", j->err.buf);
  return OX_OK;
}

ox_status oxa_front(oxb_arena *a, const char *source, const char *filename, oxi_module *m,
                    oxb_str *ast, const oxf_program **prog) {
  memset(m, 0, sizeof *m);
  if (prog)
    *prog = NULL;
  if (!source)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel source is NULL");
  front_job j = {a, source, filename, m, ast, prog, {0}, {0}};
  ox_status s = oxb_protected(front_run, &j);
  oxb_str_free(&j.d.text);
  oxb_str_free(&j.err);
  return s;
}

/* ----------------------------------------------------------------- tags */

/* Every loaded kernel gets a tag that generated code copies into the error
 * record, so the host can name the kernel and the source location. */
static pthread_mutex_t tag_lock = PTHREAD_MUTEX_INITIALIZER;
static oxa_kernel **tags;
static uint32_t ntags, captags;

static uint32_t tag_register(oxa_kernel *k) {
  pthread_mutex_lock(&tag_lock);
  uint32_t t = 0;
  for (uint32_t i = 0; i < ntags; i++)
    if (!tags[i]) {
      t = i + 1;
      break;
    }
  if (!t) {
    if (ntags == captags) {
      uint32_t cap = captags ? captags * 2 : 64;
      oxa_kernel **nt = realloc(tags, sizeof *nt * cap);
      if (!nt) {
        pthread_mutex_unlock(&tag_lock);
        return 0;
      }
      tags = nt;
      captags = cap;
    }
    tags[ntags++] = NULL;
    t = ntags;
  }
  tags[t - 1] = k;
  pthread_mutex_unlock(&tag_lock);
  return t;
}

static void tag_release(uint32_t t) {
  pthread_mutex_lock(&tag_lock);
  if (t && t <= ntags)
    tags[t - 1] = NULL;
  pthread_mutex_unlock(&tag_lock);
}

static ox_status report_error(const oxr_errrec *rec) {
  static const char *const kinds[] = {"read", "write", "atomic"};
  const char *kind = rec->kind < 3 ? kinds[rec->kind] : "access";
  pthread_mutex_lock(&tag_lock);
  oxa_kernel *k = rec->tag && rec->tag <= ntags ? tags[rec->tag - 1] : NULL;
  ox_status s;
  if (k && (int)rec->site < k->ir->sites.len) {
    const oxi_site *site = k->ir->sites.items[rec->site];
    s = oxb_set_error(OX_ERR_BOUNDS,
                      "%s:%d:%d: out-of-bounds %s in kernel '%s': %s with index %llu, but the "
                      "length is %llu",
                      k->mod->ir.filename, site->line, site->col, kind, k->ir->name, site->what,
                      (unsigned long long)rec->index, (unsigned long long)rec->len);
  } else {
    s = oxb_set_error(OX_ERR_BOUNDS,
                      "out-of-bounds %s in a kernel whose module was unloaded: index %llu, length "
                      "%llu",
                      kind, (unsigned long long)rec->index, (unsigned long long)rec->len);
  }
  pthread_mutex_unlock(&tag_lock);
  return s;
}

static pthread_once_t reporter_once = PTHREAD_ONCE_INIT;
static void install_reporter(void) { oxr_set_error_reporter(report_error); }

/* --------------------------------------------------------------- compile */

ox_status oxa_entry(ox_device dev, const oxa_code *code, const oxi_kernel *ki, CUfunction *cu,
                    oxr_cpu_kernel *cpu) {
  if (dev->type == OX_DEVICE_CUDA) {
    ox_status s = oxr_cuda_get_function(code->cu_mod, ki->name, cu);
    unsigned dyn = oxa_dynamic_shared(ki);
    if (s || !dyn || ki->shared_bytes > dev->max_shared_per_block) /* a launch refuses the latter */
      return s;
    /* a dynamic array above 48 KiB: the kernel must opt in to its size */
    CUresult r = oxr_cu.cuFuncSetAttribute(*cu, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)dyn);
    return r ? oxr_cuda_error(r, "cuFuncSetAttribute") : OX_OK;
  }
  char name[300];
  oxl_cpu_entry_name(ki, name, sizeof name);
  void *fp = oxl_jit_lookup(code->jit, name);
  if (!fp)
    return OX_ERR_INTERNAL;
  if (oxl_cpu_threaded(ki))
    cpu->thread_fn = (oxr_cpu_thread_fn)(uintptr_t)fp;
  else
    cpu->block_fn = (oxr_cpu_block_fn)(uintptr_t)fp;
  cpu->shared_bytes = (uint32_t)ki->shared_bytes;
  if (ki->uses_sync && !cpu->thread_fn) { /* looped (threads.c): the shared memory it says */
    snprintf(name, sizeof name, "%s.shared", ki->name);
    const uint32_t *bytes = oxl_jit_lookup(code->jit, name);
    if (!bytes)
      return OX_ERR_INTERNAL;
    cpu->shared_bytes = bytes[0];
    cpu->thread_shared_bytes = bytes[1];
  }
  cpu->stack_bytes = oxl_jit_stack_bytes(code->jit, name);
  cpu->name = ki->name;
  return OX_OK;
}

void oxa_code_free(ox_device dev, oxa_code *code) {
  if (code->cu_mod)
    oxr_cuda_module_unload(dev, code->cu_mod);
  oxl_jit_destroy(code->jit);
  code->cu_mod = NULL;
  code->jit = NULL;
}

/* Generates the artifact for `irm`: a cubin (PTX compiled by the driver) for
 * CUDA, a host object for the CPU. */
static ox_status generate(ox_device dev, const oxi_module *irm, const oxl_options *lo, char **art,
                          size_t *len) {
  bool cuda = dev->type == OX_DEVICE_CUDA;
  ox_status s = oxl_generate(irm, lo, cuda ? OXL_OUT_PTX : OXL_OUT_OBJ, art, len);
  if (!s && cuda) {
    void *cubin;
    size_t clen;
    s = oxr_cuda_ptx_to_cubin(dev, *art, &cubin, &clen);
    free(*art);
    *art = s ? NULL : cubin;
    *len = s ? 0 : clen;
  }
  return s;
}

/* Loads an artifact and resolves every kernel's entry point (the JIT links
 * host code at the first lookup), so that an artifact that does not work
 * fails here, while a cached one can still be replaced. */
static ox_status load_code(ox_device dev, const oxi_module *irm, const char *art, size_t len,
                           oxa_code *code) {
  ox_status s = dev->type == OX_DEVICE_CUDA ? oxr_cuda_module_load(dev, art, &code->cu_mod)
                                            : oxl_jit_load(art, len, &code->jit);
  for (int i = 0; !s && i < irm->kernels.len; i++) {
    CUfunction f;
    oxr_cpu_kernel cpu = {0};
    s = oxa_entry(dev, code, irm->kernels.items[i], &f, &cpu);
  }
  if (s)
    oxa_code_free(dev, code);
  return s;
}

ox_status oxa_build(ox_device dev, const oxi_module *irm, const char *source, const char *extra,
                    const ox_compile_options *opts, oxa_code *code, int *from_cache) {
  ox_compile_options o = *opts;
  *from_cache = 0;
  bool cuda = dev->type == OX_DEVICE_CUDA;
  oxl_options lo = {cuda ? OXL_CUDA : OXL_CPU, o.sm ? o.sm : (cuda ? dev->cc : 0),
                    o.opt_level ? o.opt_level : 3};
  if (cuda && lo.sm < 80)
    return oxb_set_error(OX_ERR_UNSUPPORTED, "Oxide targets sm_80 and newer; %s is sm_%d",
                         dev->name, lo.sm);
  ox_status s = oxl_init();
  if (s)
    return s;
  char key[65];
  oxb_hasher h;
  oxb_hash_init(&h);
  oxb_hash_str(&h, "oxide-kernel-cache-1");
  oxb_hash_str(&h, ox_version());
  oxb_hash_str(&h, oxb_build_id()); /* a rebuilt compiler never reuses old code */
  oxb_hash_str(&h, oxl_target_id(lo.target));
  oxb_hash_update(&h, &lo, sizeof lo);
  int drv = cuda ? oxr_cuda_driver_version() : 0;
  oxb_hash_update(&h, &drv, sizeof drv);
  oxb_hash_str(&h, source);
  oxb_hash_str(&h, extra); /* tile kernels: which kernel, with which generics */
  oxb_hash_final_hex(&h, key);
  const char *ext = cuda ? "cubin" : "o";
  /* OXIDE_CACHE=0 turns off both caches: the in-memory one too, so that a
   * compile always runs code generation (what people switch it off to get) */
  bool cached = !o.no_cache && oxa_cache_enabled();
  size_t len = 0;
  char *art = cached ? oxa_cache_get(key, ext, &len) : NULL;
  if (art && (s = load_code(dev, irm, art, len, code)) == OX_ERR_OUT_OF_MEMORY) {
    free(art); /* not the entry's fault: keep it */
    return s;
  }
  if (art && s != OX_OK) {
    /* an entry that passed the cache's checks yet does not load (a stale
     * artifact): drop it and compile again, once */
    oxa_cache_drop(key, ext, ox_last_error());
    ox_clear_error();
    free(art);
    art = NULL;
    s = OX_OK;
  }
  *from_cache = art != NULL;
  if (!art) {
    s = generate(dev, irm, &lo, &art, &len);
    if (!s)
      s = load_code(dev, irm, art, len, code);
    if (!s && cached) /* only code that loads is kept */
      oxa_cache_put(key, ext, art, len);
  }
  free(art);
  return s;
}

oxa_kernel *oxa_kernel_get(const char *fn, ox_kernel h) {
  if (!h) {
    oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: kernel is NULL", fn);
    return NULL;
  }
  oxa_kernel *k = oxb_handle_get(OXB_H_KERNEL, (uint64_t)(uintptr_t)h);
  if (!k)
    oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                  "%s: the kernel handle is not live (its module was destroyed, or it is not a "
                  "kernel handle)",
                  fn);
  return k;
}

/* The module behind handle `h`, or NULL with the last error set. */
static oxa_module *module_get(const char *fn, ox_module h) {
  if (!h) {
    oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: module is NULL", fn);
    return NULL;
  }
  oxa_module *m = oxb_handle_get(OXB_H_MODULE, (uint64_t)(uintptr_t)h);
  if (!m)
    oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                  "%s: the module handle is not live (the module was destroyed, or it is not a "
                  "module handle)",
                  fn);
  return m;
}

static void module_free(oxa_module *m);

/* The caller's options (NULL: the defaults) copied into *o, by their
 * `size` (ox_compile_options grows at its end: see oxide.h). */
static ox_status read_options(const char *fn, const ox_compile_options *opts,
                              ox_compile_options *o) {
  memset(o, 0, sizeof *o);
  if (!opts)
    return OX_OK;
  size_t abi3 = offsetof(ox_compile_options, emit_contiguous) + sizeof opts->emit_contiguous;
  size_t n = opts->size ? opts->size : abi3;
  if (n < offsetof(ox_compile_options, filename))
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: options size %zu is too small", fn, n);
  /* `size` is read before any other field and trusted only within OX_OPTIONS_SIZE_MAX: a header
     before ABI version 3 had `filename` there, whose pointer value (never below 4096 in a
     process) would otherwise send the scan below through the caller's memory */
  if (n > OX_OPTIONS_SIZE_MAX || n % sizeof(void *))
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         "%s: options size %zu is not one an oxide.h makes (ox_compile_options is %zu bytes "
                         "here, and at most %d in any version): the caller was built against another ABI "
                         "(oxide.h before ABI version 3 had `filename` first), or did not set `size`; "
                         "rebuild against this library's header (ABI version %d)",
                         fn, n, sizeof *o, OX_OPTIONS_SIZE_MAX, OX_ABI_VERSION);
  if (n > sizeof *o) { /* a newer header: its extra fields must be unset */
    const unsigned char *extra = (const unsigned char *)opts + sizeof *o;
    for (size_t i = 0; i < n - sizeof *o; i++)
      if (extra[i])
        return oxb_set_error(OX_ERR_UNSUPPORTED,
                             "%s: the options set a field this liboxide does not know (byte %zu "
                             "of a %zu-byte ox_compile_options; this library's has %zu)",
                             fn, sizeof *o + i, n, sizeof *o);
    n = sizeof *o;
  }
  memcpy(o, opts, n);
  o->size = sizeof *o;
  return OX_OK;
}

/* What a module's compile region works on (base.h: protected regions):
 * module_free(m) frees whatever it made, however far it got. */
/* A kernel specialized at launch: a #[tile] kernel, or a #[kernel] with type generics. */
static bool is_generic_kernel(const oxf_fn *fn) { return fn->is_tile || (fn->is_kernel && fn->ntypes); }

typedef struct compile_job {
  oxa_module *m;
  const char *source;
  const ox_compile_options *o;
  oxb_diags d;
} compile_job;

static ox_status compile_run(void *arg) {
  compile_job *j = arg;
  oxa_module *m = j->m;
  ox_status s = oxa_front(&m->arena, j->source, j->o->filename, &m->ir, NULL, &m->prog);
  if (s)
    return s;
  m->text = strdup(j->source);
  m->sigs.arena = &m->arena;
  m->sigs.filename = m->ir.filename;
  /* kernels and their tags: #[kernel]s, then #[tile]s (signatures only) */
  int ntile = 0;
  for (int i = 0; i < m->prog->fns.len; i++)
    ntile += is_generic_kernel(m->prog->fns.items[i]);
  m->kernels = calloc((size_t)(m->ir.kernels.len + ntile), sizeof *m->kernels);
  if (!m->text || !m->kernels)
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  m->nkernels = m->ir.kernels.len + ntile; /* (after: module_free walks them) */
  int ti = m->ir.kernels.len;
  for (int i = 0; i < m->prog->fns.len; i++) {
    const oxf_fn *fn = m->prog->fns.items[i];
    if (!is_generic_kernel(fn))
      continue;
    oxa_kernel *k = &m->kernels[ti++];
    k->fn = fn;
    k->ngenerics = fn->generics.len;
    oxb_diags *d = &j->d;
    oxb_str_free(&d->text);
    memset(d, 0, sizeof *d);
    oxb_source src = {m->ir.filename, m->text, strlen(m->text)};
    d->src = &src;
    if (k->ngenerics > OXA_MAX_GENERICS)
      return oxb_set_error(OX_ERR_COMPILE, "%s: tile kernel '%s' has more than %d generics",
                           m->ir.filename, fn->name, OXA_MAX_GENERICS);
    if (!oxf_check_spec(&m->arena, d, m->prog, fn, NULL, &m->sigs))
      return oxb_set_error_text(OX_ERR_COMPILE, d->text.buf ? d->text.buf : "tile kernel error");
    k->ir = m->sigs.kernels.items[m->sigs.kernels.len - 1];
  }
  for (int i = 0; i < m->nkernels; i++) {
    oxa_kernel *k = &m->kernels[i];
    k->mod = m;
    if (i < m->ir.kernels.len)
      k->ir = m->ir.kernels.items[i];
    pthread_mutex_init(&k->lock, NULL);
    pthread_mutex_init(&k->tune_lock, NULL);
    for (int p = 0; p < k->ir->params.len; p++)
      k->nflat += oxi_param_width(k->ir->params.items[p]);
    if (k->ir->params.len > OXA_MAX_PARAMS)
      return oxb_set_error(OX_ERR_COMPILE, "%s: kernel '%s' has more than %d parameters",
                           m->ir.filename, k->ir->name, OXA_MAX_PARAMS);
    k->tag = tag_register(k);
    k->handle = (ox_kernel)(uintptr_t)oxb_handle_new(OXB_H_KERNEL, k);
    if (!k->tag || !k->handle)
      return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  }
  /* code for the #[kernel]s: from the cache, or generated */
  if (m->ir.kernels.len) {
    int slot = oxa_slot(m->dev);
    s = oxa_build(m->dev, &m->ir, j->source, "", j->o, &m->code[slot], &m->from_cache);
    for (int i = 0; !s && i < m->ir.kernels.len; i++)
      s = oxa_entry(m->dev, &m->code[slot], m->kernels[i].ir, &m->kernels[i].cu_fn[slot], &m->kernels[i].cpu);
    if (s)
      return s;
    m->loaded[slot] = 1;
  }
  return OX_OK;
}

ox_status ox_module_compile(ox_device dev, const char *source, const ox_compile_options *opts,
                            ox_module *out) {
  if (!out)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_module_compile: out is NULL");
  *out = NULL;
  if (!oxr_device_check(__func__, dev))
    return ox_last_status();
  pthread_once(&reporter_once, install_reporter);
  ox_compile_options o;
  if (read_options(__func__, opts, &o) != OX_OK)
    return ox_last_status();
  if (o.opt_level < 0 || o.opt_level > 3)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_module_compile: opt_level must be 0 to 3 "
                         "(0 means the default, 3), found %d", o.opt_level);
  if (o.generics || o.num_generics)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_module_compile: the generics option is for "
                         "ox_emit; a launch binds a tile kernel's generics from its partitions "
                         "(or ox_kernel_set_generic)");
  oxa_module *m = calloc(1, sizeof *m);
  if (!m)
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  m->dev = dev;
  m->opts = o;
  m->opts.filename = NULL;
  pthread_mutex_init(&m->load_lock, NULL);
  compile_job j = {m, source, &o, {0}};
  ox_status s = oxb_protected(compile_run, &j);
  oxb_str_free(&j.d.text);
  if (!s) {
    m->handle = (ox_module)(uintptr_t)oxb_handle_new(OXB_H_MODULE, m);
    if (!m->handle)
      s = oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  }
  if (s) {
    module_free(m);
    return s;
  }
  *out = m->handle;
  return OX_OK;
}

ox_status ox_module_compile_file(ox_device dev, const char *path, const ox_compile_options *opts,
                                 ox_module *out) {
  if (out)
    *out = NULL;
  if (!path)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_module_compile_file: path is NULL");
  char *text = oxb_read_file(path, NULL);
  if (!text)
    return oxb_set_error(errno == ENOMEM ? OX_ERR_OUT_OF_MEMORY : OX_ERR_IO, "cannot read %s: %s", path,
                         strerror(errno));
  ox_compile_options o;
  if (read_options(__func__, opts, &o) != OX_OK) {
    free(text);
    return ox_last_status();
  }
  if (!o.filename)
    o.filename = path;
  ox_status s = ox_module_compile(dev, text, &o, out);
  free(text);
  return s;
}

/* The CUDA device of slot i, where code was loaded (so it is set up). */
static ox_device slot_device(int i) {
  ox_device d = NULL;
  return ox_device_get(OX_DEVICE_CUDA, i, &d) == OX_OK ? d : NULL;
}

/* Frees code of module m loaded on device slot d, if any. */
static void free_code(oxa_module *m, int d, oxa_code *code) {
  if (!code->cu_mod && !code->jit)
    return;
  ox_device dev = m->dev->type == OX_DEVICE_CUDA ? slot_device(d) : m->dev;
  if (dev)
    oxa_code_free(dev, code);
}

/* Frees a module and ends its handles (every field may still be unset). */
static void module_free(oxa_module *m) {
  oxb_handle_free((uint64_t)(uintptr_t)m->handle);
  /* Launches of the module's kernels may still be queued or running, on any
   * stream of any device it was loaded on: unloading code under them is
   * undefined in CUDA, so wait for those contexts first (modules are
   * destroyed rarely; the CPU runs launches when they are queued). */
  for (int d = 0; m->dev && m->dev->type == OX_DEVICE_CUDA && d < OXA_MAX_DEVICES; d++) {
    bool loaded = m->loaded[d];
    for (int i = 0; i < m->nkernels; i++)
      for (oxa_spec *sp = m->kernels[i].specs; sp; sp = sp->next)
        loaded |= sp->loaded[d] != 0;
    ox_device dev = loaded ? slot_device(d) : NULL;
    if (dev && oxr_cuda_make_current(dev) == OX_OK)
      (void)oxr_cu.cuCtxSynchronize();
  }
  for (int i = 0; i < m->nkernels; i++) {
    oxa_kernel *k = &m->kernels[i];
    oxb_handle_free((uint64_t)(uintptr_t)k->handle);
    tag_release(k->tag);
    for (oxa_spec *sp = k->specs, *next; sp; sp = next) {
      next = sp->next;
      for (int d = 0; d < OXA_MAX_DEVICES; d++)
        free_code(m, d, &sp->code[d]);
      oxb_arena_free(&sp->arena);
      free(sp);
    }
    oxa_tune_free(k);
    if (k->mod) {
      pthread_mutex_destroy(&k->lock);
      pthread_mutex_destroy(&k->tune_lock);
    }
  }
  for (int d = 0; d < OXA_MAX_DEVICES; d++)
    free_code(m, d, &m->code[d]);
  if (m->dev)
    pthread_mutex_destroy(&m->load_lock);
  free(m->text);
  free(m->kernels);
  oxb_arena_free(&m->arena);
  free(m);
}

ox_status oxa_kernel_fn(oxa_kernel *k, ox_device dev, CUfunction *fn) {
  oxa_module *m = k->mod;
  int slot = oxa_slot(dev);
  if (slot >= OXA_MAX_DEVICES)
    return oxb_set_error(OX_ERR_UNSUPPORTED, "kernel '%s': Oxide runs kernels on CUDA devices 0 to %d, not %s",
                         k->ir->name, OXA_MAX_DEVICES - 1, dev->label);
  if (!m->loaded[slot]) { /* another device of the module's type: its code loaded there, once */
    pthread_mutex_lock(&m->load_lock);
    ox_status s = OX_OK;
    if (!m->loaded[slot]) {
      int from_cache;
      s = oxa_build(dev, &m->ir, m->text, "", &m->opts, &m->code[slot], &from_cache);
      for (int i = 0; !s && i < m->ir.kernels.len; i++) {
        oxr_cpu_kernel cpu = {0};
        s = oxa_entry(dev, &m->code[slot], m->kernels[i].ir, &m->kernels[i].cu_fn[slot], &cpu);
      }
      if (s)
        oxa_code_free(dev, &m->code[slot]);
      else
        m->loaded[slot] = 1;
    }
    pthread_mutex_unlock(&m->load_lock);
    if (s)
      return s;
  }
  *fn = k->cu_fn[slot];
  return OX_OK;
}

void ox_module_destroy(ox_module h) {
  if (!h)
    return;
  oxa_module *m = module_get(__func__, h);
  if (m)
    module_free(m);
}

ox_status ox_module_get_kernel(ox_module h, const char *name, ox_kernel *out) {
  if (!out)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: out is NULL", __func__);
  *out = NULL;
  oxa_module *m = module_get(__func__, h);
  if (!m)
    return ox_last_status();
  if (!name)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: name is NULL", __func__);
  for (int i = 0; i < m->nkernels; i++)
    if (!strcmp(m->kernels[i].ir->name, name)) {
      *out = m->kernels[i].handle;
      return OX_OK;
    }
  oxb_str names = {0};
  for (int i = 0; i < m->nkernels; i++)
    oxb_str_addf(&names, "%s'%s'", i ? ", " : "", m->kernels[i].ir->name);
  ox_status s = oxb_set_error(OX_ERR_NOT_FOUND, "no kernel '%s' in %s (it has %s)", name,
                              m->ir.filename, names.buf ? names.buf : "none");
  oxb_str_free(&names);
  *out = NULL;
  return s;
}

int ox_module_from_cache(ox_module h) {
  oxa_module *m = module_get(__func__, h);
  return m ? m->from_cache : 0;
}

int ox_kernel_num_params(ox_kernel h) {
  oxa_kernel *k = oxa_kernel_get(__func__, h);
  return k ? k->ir->params.len : -1;
}

const char *ox_kernel_name(ox_kernel h) {
  oxa_kernel *k = oxa_kernel_get(__func__, h);
  return k ? k->ir->name : "";
}

ox_status ox_kernel_param(ox_kernel h, int index, ox_param_info *out) {
  if (!out)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: out is NULL", __func__);
  memset(out, 0, sizeof *out);
  oxa_kernel *k = oxa_kernel_get(__func__, h);
  if (!k)
    return ox_last_status();
  if (index < 0 || index >= k->ir->params.len)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: kernel '%s' has %d parameters; index %d",
                         __func__, k->ir->name, k->ir->params.len, index);
  const oxi_param *p = k->ir->params.items[index];
  static const ox_param_kind kinds[] = {
      [OXI_P_SCALAR] = OX_PARAM_SCALAR,     [OXI_P_SLICE] = OX_PARAM_SLICE,
      [OXI_P_MUTSLICE] = OX_PARAM_MUT_SLICE, [OXI_P_ATOMIC] = OX_PARAM_ATOMIC_SLICE,
      [OXI_P_DISJOINT] = OX_PARAM_DISJOINT, [OXI_P_TENSOR] = OX_PARAM_TENSOR,
      [OXI_P_TILE] = OX_PARAM_TILE,         [OXI_P_ATENSOR] = OX_PARAM_ATOMIC_TENSOR,
  };
  assert((size_t)p->kind < OXB_COUNT(kinds) && kinds[p->kind]);
  out->name = p->name;
  out->kind = kinds[p->kind];
  out->dtype = p->dtype;
  out->rank = p->kind == OXI_P_SCALAR ? 0 : oxi_is_tensor_kind(p->kind) ? p->rank : 1;
  out->writable = p->kind != OXI_P_SCALAR && p->kind != OXI_P_SLICE && p->kind != OXI_P_TENSOR;
  int g = k->fn ? ((const oxf_param *)k->fn->params.items[index])->type->tvar - 1 : -1;
  if (g >= 0 && p->kind == OXI_P_SCALAR) /* the numbers a binding passes: the launch converts */
    out->dtype = ((const oxf_typeexpr *)k->fn->generic_types.items[g])->bound == OXF_BOUND_INT ? OX_I64
                                                                                              : OX_F64;
  return OX_OK;
}

const char *ox_kernel_param_generic(ox_kernel h, int index) {
  oxa_kernel *k = oxa_kernel_get(__func__, h);
  if (!k)
    return NULL;
  if (index < 0 || index >= k->ir->params.len) {
    oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: kernel '%s' has %d parameters; index %d", __func__,
                  k->ir->name, k->ir->params.len, index);
    return NULL;
  }
  int g = k->fn ? ((const oxf_param *)k->fn->params.items[index])->type->tvar - 1 : -1;
  return g >= 0 ? k->fn->generics.items[g] : NULL;
}

int ox_kernel_is_unsafe(ox_kernel h) {
  oxa_kernel *k = oxa_kernel_get(__func__, h);
  return k ? k->ir->is_unsafe || k->ir->unchecked : -1;
}

int ox_abi_version(void) { return OX_ABI_VERSION; }

const char *ox_version(void) { return OXA_VERSION; }

/* ----------------------------------------------------------------- emit */

/* The value the options give generic g of fn (a type generic's is an
 * ox_dtype, the front end's that + 1), else its placeholder. */
static int64_t generic_value(const ox_compile_options *o, const oxf_fn *fn, int g) {
  for (int i = 0; i < o->num_generics; i++)
    if (!strcmp(o->generics[i].name, fn->generics.items[g]))
      return o->generics[i].value + oxf_is_type_generic(fn, g);
  return oxf_generic_placeholder(fn, g);
}


/* The options' generics: well formed, and each a generic of some tile kernel. */
static ox_status check_generics(const ox_compile_options *o, const oxf_program *prog) {
  if (o->num_generics < 0 || (o->num_generics && !o->generics))
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_emit: %d generics at %p", o->num_generics,
                         (const void *)o->generics);
  for (int i = 0; i < o->num_generics; i++) {
    const char *name = o->generics[i].name;
    if (!name)
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_emit: generic %d has no name", i);
    bool found = false;
    for (int f = 0; f < prog->fns.len && !found; f++) {
      const oxf_fn *fn = prog->fns.items[f];
      for (int g = 0; is_generic_kernel(fn) && g < fn->generics.len && !found; g++)
        found = !strcmp(fn->generics.items[g], name);
    }
    if (!found)
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_emit: no kernel of this source has a "
                           "generic '%s'", name);
  }
  return OX_OK;
}

/* What ox_emit's region works on; ox_emit frees it whatever the outcome. */
typedef struct emit_job {
  const char *source;
  const ox_compile_options *o;
  ox_target target;
  ox_emit_kind kind;
  char **out;
  oxb_arena a;
  oxi_module m;
  oxb_str text, err;
  oxb_diags d;
} emit_job;

static ox_status emit_run(void *arg) {
  emit_job *j = arg;
  const ox_compile_options *o = j->o;
  ox_emit_kind kind = j->kind;
  oxi_module *m = &j->m;
  const oxf_program *prog = NULL;
  ox_status s = oxa_front(&j->a, j->source, o->filename, m, kind == OX_EMIT_AST ? &j->text : NULL, &prog);
  /* tile kernels: shown specialized with the generics the options give, the
   * others at the placeholder (OXF_TILE_PLACEHOLDER); the IR before their
   * lowering, code after it */
  int first_tile = m->kernels.len;
  if (!s && kind != OX_EMIT_AST)
    s = check_generics(o, prog);
  for (int i = 0; !s && kind != OX_EMIT_AST && i < prog->fns.len; i++) {
    const oxf_fn *fn = prog->fns.items[i];
    if (!is_generic_kernel(fn))
      continue;
    int64_t values[OXA_MAX_GENERICS];
    if (fn->generics.len > OXA_MAX_GENERICS)
      return oxb_set_error(OX_ERR_COMPILE, "%s: tile kernel '%s' has more than %d generics", m->filename,
                           fn->name, OXA_MAX_GENERICS);
    for (int g = 0; g < fn->generics.len; g++)
      values[g] = generic_value(o, fn, g);
    oxb_str_free(&j->d.text);
    memset(&j->d, 0, sizeof j->d);
    oxb_source src = {m->filename, j->source, strlen(j->source)};
    j->d.src = &src;
    if (!oxf_check_spec(&j->a, &j->d, prog, fn, values, m))
      s = oxb_set_error_text(OX_ERR_COMPILE, j->d.text.buf ? j->d.text.buf : "tile kernel error");
  }
  ox_target target = j->target;
  if (target == OX_TARGET_DEFAULT)
    target = kind == OX_EMIT_PTX ? OX_TARGET_CUDA : OX_TARGET_CPU;
  for (int i = first_tile; !s && kind != OX_EMIT_AST && kind != OX_EMIT_IR && i < m->kernels.len; i++) {
    oxi_kernel *k = m->kernels.items[i];
    if (!k->is_tile) /* a #[kernel] specialized for its type generics: code as it is */
      continue;
    for (int p = 0; p < k->params.len; p++) {
      oxi_param *ip = k->params.items[p];
      ip->contiguous16 = o->emit_contiguous && oxi_is_tensor_kind(ip->kind);
    }
    int sm = o->sm ? o->sm : 90; /* what code generation below targets */
    s = oxt_lower(m, k, target == OX_TARGET_CUDA ? sm : 0, oxt_shared_limit(sm));
  }
  if (!s && first_tile < m->kernels.len && kind != OX_EMIT_AST && !oxi_verify(m, &j->err))
    s = oxb_set_error(OX_ERR_INTERNAL, "internal error (tile IR): %s", j->err.buf);
  if (s)
    return s;
  if (kind == OX_EMIT_AST || kind == OX_EMIT_IR) {
    if (kind == OX_EMIT_IR)
      oxi_print(m, &j->text);
    if (!(*j->out = oxb_str_take(&j->text)))
      return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
    return OX_OK;
  }
  if (kind == OX_EMIT_PTX && target != OX_TARGET_CUDA)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "PTX is emitted for the CUDA target only");
  if (kind == OX_EMIT_ASM && target != OX_TARGET_CPU)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "use PTX for the CUDA target's assembly");
  if (kind < OX_EMIT_AST || kind > OX_EMIT_ASM)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_emit: unknown kind %d", (int)kind);
  oxl_options lo = {target == OX_TARGET_CUDA ? OXL_CUDA : OXL_CPU, o->sm ? o->sm : 90,
                    o->opt_level ? o->opt_level : 3};
  if (lo.target == OXL_CUDA && lo.sm < 80)
    return oxb_set_error(OX_ERR_UNSUPPORTED, "Oxide targets sm_80 and newer, not sm_%d", lo.sm);
  size_t len;
  oxl_output ok = kind == OX_EMIT_LLVM ? OXL_OUT_LLVM : kind == OX_EMIT_PTX ? OXL_OUT_PTX : OXL_OUT_ASM;
  return oxl_generate(m, &lo, ok, j->out, &len);
}

ox_status ox_emit(const char *source, const ox_compile_options *opts, ox_target target,
                  ox_emit_kind kind, char **out) {
  if (!out)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_emit: out is NULL");
  *out = NULL;
  ox_compile_options o;
  if (read_options(__func__, opts, &o) != OX_OK)
    return ox_last_status();
  if (o.opt_level < 0 || o.opt_level > 3)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_emit: opt_level must be 0 to 3 (0 means the "
                         "default, 3), found %d", o.opt_level);
  emit_job j = {.source = source, .o = &o, .target = target, .kind = kind, .out = out};
  ox_status s = oxb_protected(emit_run, &j);
  if (s) {
    free(*out);
    *out = NULL;
  }
  oxb_str_free(&j.text);
  oxb_str_free(&j.err);
  oxb_str_free(&j.d.text);
  oxb_arena_free(&j.a);
  return s;
}
