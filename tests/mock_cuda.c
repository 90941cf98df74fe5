/* mock_cuda.c - a stand-in CUDA driver for the CPU CI (libmockcuda.so,
 * loaded by Oxide through $OXIDE_CUDA_DRIVER): two GPUs whose memory is host
 * memory, so that what Oxide decides per device can be tested without any
 * GPU. It runs no kernel; it records each launch, module load and copy, and
 * refuses what the real driver refuses where this is about devices: a
 * launch of a function loaded in another context than the current one, work
 * queued on a stream of another context, an event recorded on a stream of
 * another context. $MOCK_CUDA_PEER=0 makes the GPUs unable to reach each
 * other's memory. The tests read the counts through the mock_cuda_*
 * functions (dlsym on this library). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define NDEV 2

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
enum {
  OK = 0,
  INVALID_VALUE = 1,
  OUT_OF_MEMORY = 2,
  INVALID_CONTEXT = 201,
  INVALID_HANDLE = 400,
  NOT_FOUND = 500,
  PEER_ACCESS_ALREADY_ENABLED = 704,
  PEER_ACCESS_UNSUPPORTED = 217,
};

typedef struct ctx {
  int ordinal;
  int peer_enabled[NDEV];
} ctx;
typedef struct stream {
  ctx *c;
} stream;
typedef struct event {
  ctx *c;
} event;
typedef struct function function;
typedef struct module {
  ctx *c;
  char *image;
  function *fns; /* looked up so far, freed with the module */
} module;
struct function {
  module *m;
  char name[256];
  function *next;
};
typedef struct link {
  char *image;
} link;

static ctx contexts[NDEV] = {{0, {0}}, {1, {0}}};
static _Thread_local ctx *current;

/* what the tests read */
static int launches[NDEV], loads[NDEV], peer_copies, cross_waits;
static void *last_stream;
static char last_error[256];

EXPORT int mock_cuda_launches(int d) { return launches[d]; }
EXPORT int mock_cuda_module_loads(int d) { return loads[d]; }
EXPORT int mock_cuda_peer_copies(void) { return peer_copies; }
EXPORT int mock_cuda_cross_waits(void) { return cross_waits; }
/* The stream of the last launch (NULL: a legacy default stream). */
EXPORT void *mock_cuda_last_stream(void) { return last_stream; }
/* The last refusal, for a test's message. */
EXPORT const char *mock_cuda_last_refusal(void) { return last_error; }

static CUresult refuse(CUresult r, const char *what) {
  snprintf(last_error, sizeof last_error, "%s", what);
  return r;
}

/* The context of stream s (NULL: the legacy stream of the current one). */
static ctx *stream_ctx(stream *s) { return s ? s->c : current; }

static CUresult same_ctx(stream *s, const char *what) {
  if (!current)
    return refuse(INVALID_CONTEXT, what);
  return stream_ctx(s) == current ? OK : refuse(INVALID_HANDLE, what);
}

EXPORT CUresult cuInit(unsigned flags) { return flags ? INVALID_VALUE : OK; }
EXPORT CUresult cuDriverGetVersion(int *v) {
  *v = 13000;
  return OK;
}
EXPORT CUresult cuGetErrorName(CUresult r, const char **s) {
  static char buf[32];
  snprintf(buf, sizeof buf, "MOCK_ERROR_%d", r);
  *s = buf;
  return OK;
}
EXPORT CUresult cuGetErrorString(CUresult r, const char **s) {
  (void)r;
  *s = last_error[0] ? last_error : "mock driver";
  return OK;
}
EXPORT CUresult cuDeviceGetCount(int *n) {
  *n = NDEV;
  return OK;
}
EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) {
  if (ordinal < 0 || ordinal >= NDEV)
    return INVALID_VALUE;
  *d = ordinal;
  return OK;
}
EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
  snprintf(name, (size_t)len, "Mock GPU %d", d);
  return OK;
}
EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
  (void)d;
  switch (attr) {
  case 1: *v = 1024; break;                /* max threads per block */
  case 2: case 3: *v = 1024; break;        /* block dims x, y */
  case 4: *v = 64; break;                  /* block dim z */
  case 5: *v = 2147483647; break;          /* grid dims */
  case 6: case 7: *v = 65535; break;
  case 8: *v = 48 * 1024; break;           /* shared memory per block */
  case 10: *v = 32; break;                 /* warp size */
  case 16: *v = 4; break;                  /* multiprocessors */
  case 19: case 41: *v = 1; break;         /* maps host memory; unified addressing */
  case 75: *v = 9; break;                  /* compute capability 9.0 */
  case 76: *v = 0; break;
  case 97: *v = 227 * 1024; break;         /* shared memory per block, opt-in */
  default: *v = 0; break;                  /* (memory pools: none) */
  }
  return OK;
}
EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
  (void)d;
  *bytes = (size_t)1 << 30;
  return OK;
}
EXPORT CUresult cuDevicePrimaryCtxRetain(ctx **c, CUdevice d) {
  *c = &contexts[d];
  return OK;
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  (void)d;
  return OK;
}
EXPORT CUresult cuCtxSetCurrent(ctx *c) {
  current = c;
  return OK;
}
EXPORT CUresult cuCtxGetCurrent(ctx **c) {
  *c = current;
  return OK;
}
EXPORT CUresult cuCtxSynchronize(void) { return current ? OK : INVALID_CONTEXT; }

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
  void *m = current ? calloc(1, bytes ? bytes : 1) : NULL;
  *p = (CUdeviceptr)(uintptr_t)m;
  return !current ? INVALID_CONTEXT : m ? OK : OUT_OF_MEMORY;
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  free((void *)(uintptr_t)p);
  return OK;
}
EXPORT CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
  (void)flags;
  *p = calloc(1, bytes ? bytes : 1);
  return *p ? OK : OUT_OF_MEMORY;
}
EXPORT CUresult cuMemFreeHost(void *p) {
  free(p);
  return OK;
}
EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned flags) {
  (void)flags;
  *d = (CUdeviceptr)(uintptr_t)p;
  return OK;
}
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) {
  memcpy((void *)(uintptr_t)d, s, n);
  return OK;
}
EXPORT CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) {
  memcpy(d, (void *)(uintptr_t)s, n);
  return OK;
}
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, stream *st) {
  CUresult r = same_ctx(st, "cuMemcpyHtoDAsync on a stream of another context");
  if (!r)
    memcpy((void *)(uintptr_t)d, s, n);
  return r;
}
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, stream *st) {
  CUresult r = same_ctx(st, "cuMemcpyDtoHAsync on a stream of another context");
  if (!r)
    memcpy(d, (void *)(uintptr_t)s, n);
  return r;
}
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, stream *st) {
  CUresult r = same_ctx(st, "cuMemcpyDtoDAsync on a stream of another context");
  if (!r)
    memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n);
  return r;
}
EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, stream *st) {
  CUresult r = same_ctx(st, "cuMemsetD8Async on a stream of another context");
  if (!r)
    memset((void *)(uintptr_t)d, v, n);
  return r;
}
EXPORT CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) {
  (void)data, (void)attr, (void)p;
  return INVALID_VALUE;
}

EXPORT CUresult cuStreamCreate(stream **s, unsigned flags) {
  (void)flags;
  if (!current)
    return INVALID_CONTEXT;
  *s = calloc(1, sizeof **s);
  if (!*s)
    return OUT_OF_MEMORY;
  (*s)->c = current;
  return OK;
}
EXPORT CUresult cuStreamDestroy_v2(stream *s) {
  free(s);
  return OK;
}
EXPORT CUresult cuStreamSynchronize(stream *s) {
  (void)s;
  return OK;
}
EXPORT CUresult cuEventCreate(event **e, unsigned flags) {
  (void)flags;
  if (!current)
    return INVALID_CONTEXT;
  *e = calloc(1, sizeof **e);
  if (!*e)
    return OUT_OF_MEMORY;
  (*e)->c = current;
  return OK;
}
EXPORT CUresult cuEventRecord(event *e, stream *s) {
  if (e->c != stream_ctx(s))
    return refuse(INVALID_HANDLE, "cuEventRecord: the event and the stream are of two contexts");
  return OK;
}
EXPORT CUresult cuStreamWaitEvent(stream *s, event *e, unsigned flags) {
  (void)flags;
  if (e->c != stream_ctx(s)) /* allowed: a stream may wait for another device's event */
    cross_waits++;
  return OK;
}
EXPORT CUresult cuEventSynchronize(event *e) {
  (void)e;
  return OK;
}
EXPORT CUresult cuEventElapsedTime(float *ms, event *a, event *b) {
  (void)a, (void)b;
  *ms = 0;
  return OK;
}
EXPORT CUresult cuEventDestroy_v2(event *e) {
  free(e);
  return OK;
}

/* "Compiling" PTX keeps its text: a module's functions are its .entry names. */
EXPORT CUresult cuLinkCreate_v2(unsigned n, void *opts, void **vals, link **l) {
  (void)n, (void)opts, (void)vals;
  *l = calloc(1, sizeof **l);
  return *l ? OK : OUT_OF_MEMORY;
}
EXPORT CUresult cuLinkAddData_v2(link *l, int type, void *data, size_t size, const char *name, unsigned n,
                                 void *opts, void **vals) {
  (void)type, (void)name, (void)n, (void)opts, (void)vals;
  free(l->image);
  l->image = malloc(size + 1);
  if (!l->image)
    return OUT_OF_MEMORY;
  memcpy(l->image, data, size);
  l->image[size] = 0;
  return OK;
}
EXPORT CUresult cuLinkComplete(link *l, void **image, size_t *size) {
  *image = l->image;
  *size = l->image ? strlen(l->image) + 1 : 0;
  return l->image ? OK : INVALID_VALUE;
}
EXPORT CUresult cuLinkDestroy(link *l) {
  free(l->image);
  free(l);
  return OK;
}
EXPORT CUresult cuModuleLoadData(module **m, const void *image) {
  if (!current)
    return INVALID_CONTEXT;
  *m = calloc(1, sizeof **m);
  if (!*m || !((*m)->image = strdup(image)))
    return OUT_OF_MEMORY;
  (*m)->c = current;
  loads[current->ordinal]++;
  return OK;
}
EXPORT CUresult cuModuleLoadDataEx(module **m, const void *image, unsigned n, void *opts, void **vals) {
  (void)n, (void)opts, (void)vals;
  return cuModuleLoadData(m, image);
}
EXPORT CUresult cuModuleUnload(module *m) {
  for (function *f = m->fns, *next; f; f = next) {
    next = f->next;
    free(f);
  }
  free(m->image);
  free(m);
  return OK;
}
EXPORT CUresult cuModuleGetFunction(function **f, module *m, const char *name) {
  char entry[300];
  snprintf(entry, sizeof entry, ".entry %s(", name);
  if (!strstr(m->image, entry))
    return NOT_FOUND;
  for (function *g = m->fns; g; g = g->next)
    if (!strcmp(g->name, name)) {
      *f = g;
      return OK;
    }
  *f = calloc(1, sizeof **f);
  if (!*f)
    return OUT_OF_MEMORY;
  (*f)->m = m;
  snprintf((*f)->name, sizeof (*f)->name, "%s", name);
  (*f)->next = m->fns;
  m->fns = *f;
  return OK;
}
EXPORT CUresult cuFuncGetAttribute(int *v, int attr, function *f) {
  (void)attr, (void)f;
  *v = 0;
  return OK;
}
EXPORT CUresult cuFuncSetAttribute(function *f, int attr, int v) {
  (void)f, (void)attr, (void)v;
  return OK;
}
EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, function *f, int block, size_t shared) {
  (void)f, (void)block, (void)shared;
  *n = 1;
  return OK;
}
EXPORT CUresult cuLaunchKernel(function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned shared, stream *s, void **params, void **extra) {
  (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)params, (void)extra;
  if (!current || f->m->c != current)
    return refuse(INVALID_HANDLE, "cuLaunchKernel: the function is loaded in another context");
  CUresult r = same_ctx(s, "cuLaunchKernel on a stream of another context");
  if (!r) {
    launches[current->ordinal]++;
    last_stream = s;
  }
  return r;
}
EXPORT CUresult cuStreamIsCapturing(stream *s, int *status) {
  (void)s;
  *status = 0;
  return OK;
}

/* peer access */
EXPORT CUresult cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice peer) {
  const char *env = getenv("MOCK_CUDA_PEER");
  *can = d != peer && !(env && !strcmp(env, "0"));
  return OK;
}
EXPORT CUresult cuCtxEnablePeerAccess(ctx *peer, unsigned flags) {
  if (!current || flags)
    return INVALID_VALUE;
  if (current->peer_enabled[peer->ordinal])
    return PEER_ACCESS_ALREADY_ENABLED;
  current->peer_enabled[peer->ordinal] = 1;
  return OK;
}
EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr d, ctx *dc, CUdeviceptr s, ctx *sc, size_t n, stream *st) {
  CUresult r = same_ctx(st, "cuMemcpyPeerAsync on a stream of another context");
  if (r)
    return r;
  if (!dc->peer_enabled[sc->ordinal] && !sc->peer_enabled[dc->ordinal])
    return refuse(PEER_ACCESS_UNSUPPORTED, "cuMemcpyPeerAsync without peer access");
  memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n);
  peer_copies++;
  return OK;
}
