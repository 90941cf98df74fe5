/*
 * cuda.c - loading the CUDA driver at run time, turning its errors into Oxide
 * errors, the per-thread current context, and PTX/cubin modules.
 */
#include "runtime/runtime.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

oxr_cu_api oxr_cu;

/* Where each table member comes from. `name` is the symbol the driver exports
 * for the API version cuda.h maps the call to (see its #defines); `old` is a
 * fallback for drivers older than that version. */
typedef struct cu_sym {
  size_t offset;
  const char *name, *old;
  int optional;
} cu_sym;

#define SYM(member, name) {offsetof(oxr_cu_api, member), name, NULL, 0}
#define SYM_OLD(member, name, old) {offsetof(oxr_cu_api, member), name, old, 0}
#define SYM_OPT(member, name) {offsetof(oxr_cu_api, member), name, NULL, 1}

static const cu_sym cu_syms[] = {
    SYM(cuInit, "cuInit"),
    SYM(cuDriverGetVersion, "cuDriverGetVersion"),
    SYM(cuGetErrorName, "cuGetErrorName"),
    SYM(cuGetErrorString, "cuGetErrorString"),
    SYM(cuDeviceGetCount, "cuDeviceGetCount"),
    SYM(cuDeviceGet, "cuDeviceGet"),
    SYM(cuDeviceGetName, "cuDeviceGetName"),
    SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
    SYM(cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
    SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
    SYM(cuCtxSetCurrent, "cuCtxSetCurrent"),
    SYM(cuCtxGetCurrent, "cuCtxGetCurrent"),
    SYM(cuCtxSynchronize, "cuCtxSynchronize"),
    SYM(cuMemAlloc, "cuMemAlloc_v2"),
    SYM(cuMemFree, "cuMemFree_v2"),
    SYM_OPT(cuMemAllocAsync, "cuMemAllocAsync"), /* CUDA 11.2+ */
    SYM_OPT(cuMemFreeAsync, "cuMemFreeAsync"),
    SYM_OPT(cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool"),
    SYM_OPT(cuMemPoolSetAttribute, "cuMemPoolSetAttribute"),
    SYM(cuMemHostAlloc, "cuMemHostAlloc"),
    SYM(cuMemFreeHost, "cuMemFreeHost"),
    SYM(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"),
    SYM(cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
    SYM(cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
    SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
    SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
    SYM(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
    SYM(cuMemsetD8Async, "cuMemsetD8Async"),
    SYM(cuPointerGetAttribute, "cuPointerGetAttribute"),
    SYM(cuStreamCreate, "cuStreamCreate"),
    SYM(cuStreamDestroy, "cuStreamDestroy_v2"),
    SYM(cuStreamSynchronize, "cuStreamSynchronize"),
    SYM(cuStreamWaitEvent, "cuStreamWaitEvent"),
    SYM(cuEventCreate, "cuEventCreate"),
    SYM(cuEventRecord, "cuEventRecord"),
    SYM(cuEventSynchronize, "cuEventSynchronize"),
    SYM_OLD(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"), /* _v2: 12.8+ */
    SYM(cuEventDestroy, "cuEventDestroy_v2"),
    SYM(cuModuleLoadData, "cuModuleLoadData"),
    SYM(cuModuleLoadDataEx, "cuModuleLoadDataEx"),
    SYM(cuModuleUnload, "cuModuleUnload"),
    SYM(cuModuleGetFunction, "cuModuleGetFunction"),
    SYM(cuFuncGetAttribute, "cuFuncGetAttribute"),
    SYM(cuFuncSetAttribute, "cuFuncSetAttribute"),
    SYM_OPT(cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
    SYM(cuLaunchKernel, "cuLaunchKernel"),
    SYM_OPT(cuLaunchKernelEx, "cuLaunchKernelEx"),
    SYM(cuLinkCreate, "cuLinkCreate_v2"),
    SYM(cuLinkAddData, "cuLinkAddData_v2"),
    SYM(cuLinkComplete, "cuLinkComplete"),
    SYM(cuLinkDestroy, "cuLinkDestroy"),
    SYM_OPT(cuStreamBeginCapture, "cuStreamBeginCapture_v2"),
    SYM_OPT(cuStreamEndCapture, "cuStreamEndCapture"),
    SYM_OPT(cuStreamIsCapturing, "cuStreamIsCapturing"),
    SYM_OPT(cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled"),
    SYM_OPT(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"),
    SYM_OPT(cuGraphLaunch, "cuGraphLaunch"),
    SYM_OPT(cuGraphExecDestroy, "cuGraphExecDestroy"),
    SYM_OPT(cuGraphDestroy, "cuGraphDestroy"),
    SYM_OPT(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer"),
    SYM_OPT(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess"),
    SYM_OPT(cuMemcpyPeerAsync, "cuMemcpyPeerAsync"),
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static ox_status load_status;
static char load_message[512];

/* Writes the name and description of `r` ("CUDA_ERROR_X (text)") into buf. */
static void describe(CUresult r, char *buf, size_t size) {
  const char *name = NULL, *text = NULL;
  if (oxr_cu.cuGetErrorName && oxr_cu.cuGetErrorName(r, &name) != CUDA_SUCCESS)
    name = NULL;
  if (oxr_cu.cuGetErrorString && oxr_cu.cuGetErrorString(r, &text) != CUDA_SUCCESS)
    text = NULL;
  if (name)
    snprintf(buf, size, "%s (%s)", name, text ? text : "no description");
  else
    snprintf(buf, size, "CUDA error %d", (int)r);
}

static void load(void) {
  /* $OXIDE_CUDA_DRIVER: another driver library than the system's (one in an
     unusual place; the CPU tests' stand-in, tests/mock_cuda.c) */
  const char *env = getenv("OXIDE_CUDA_DRIVER"), *name = env && *env ? env : "libcuda.so.1";
  /* RTLD_LOCAL: the driver's symbols stay out of the global namespace. */
  void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(load_message, sizeof load_message, "CUDA driver not found: dlopen(%s) failed: %s", name, dlerror());
    load_status = OX_ERR_NO_DEVICE;
    return;
  }
  for (size_t i = 0; i < OXB_COUNT(cu_syms); i++) {
    const cu_sym *s = &cu_syms[i];
    void *p = dlsym(lib, s->name);
    if (!p && s->old)
      p = dlsym(lib, s->old);
    if (!p && !s->optional) {
      snprintf(load_message, sizeof load_message, "CUDA driver too old: %s lacks %s; update the NVIDIA driver",
               name, s->name);
      memset(&oxr_cu, 0, sizeof oxr_cu);
      dlclose(lib);
      load_status = OX_ERR_NO_DEVICE;
      return;
    }
    /* memcpy: ISO C has no conversion from void * to a function pointer. */
    memcpy((char *)&oxr_cu + s->offset, &p, sizeof p);
  }
  CUresult r = oxr_cu.cuInit(0);
  if (r != CUDA_SUCCESS) {
    char why[256];
    describe(r, why, sizeof why);
    snprintf(load_message, sizeof load_message,
             "CUDA driver unusable: %s loaded but cuInit failed: %s", name, why);
    load_status = OX_ERR_NO_DEVICE;
    return; /* keep the library loaded: oxr_cu.cuGetErrorName may still be used */
  }
  load_status = OX_OK; /* the library stays loaded for the life of the process */
}

ox_status oxr_cuda_load(void) {
  pthread_once(&load_once, load);
  if (load_status != OX_OK)
    return oxb_set_error_text(load_status, load_message);
  return OX_OK;
}

int oxr_cuda_available(void) {
  pthread_once(&load_once, load);
  return load_status == OX_OK;
}

ox_status oxr_cuda_error(CUresult r, const char *what) {
  assert(r != CUDA_SUCCESS);
  char why[256];
  describe(r, why, sizeof why);
  return oxb_set_error(r == CUDA_ERROR_OUT_OF_MEMORY ? OX_ERR_OUT_OF_MEMORY : OX_ERR_DRIVER,
                       "%s failed: %s", what, why);
}

ox_status oxr_cuda_launch_error(CUresult r, CUfunction f, const char *name, const uint32_t block[3],
                                unsigned shared) {
  char why[256];
  describe(r, why, sizeof why);
  int regs = -1, most = -1, dyn = -1;
  (void)oxr_cu.cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f);
  (void)oxr_cu.cuFuncGetAttribute(&most, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f);
  (void)oxr_cu.cuFuncGetAttribute(&dyn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f);
  return oxb_set_error(r == CUDA_ERROR_OUT_OF_MEMORY ? OX_ERR_OUT_OF_MEMORY : OX_ERR_DRIVER,
                       "cuLaunchKernel failed for kernel '%s': %s (block (%u, %u, %u), %u bytes of dynamic "
                       "shared memory; the kernel uses %d registers a thread, allows blocks of %d threads "
                       "and %d bytes of dynamic shared memory)",
                       name, why, block[0], block[1], block[2], shared, regs, most, dyn);
}

/* Whether launches may overlap the kernel before them (on unless OXIDE_PDL=0: with the
 * kernels' L2 prefetches before their wait, the Llama decode step takes 5-7% less time,
 * bench/RESULTS.md, session 21), and whether the driver took such a launch (cleared by
 * the first it refuses). */
static _Atomic int pdl_state = -1; /* -1: not read yet, 0: off, 1: on */

static bool pdl_on(void) {
  int st = pdl_state;
  if (st < 0) {
    const char *e = getenv("OXIDE_PDL");
    st = oxr_cu.cuLaunchKernelEx && !(e && !strcmp(e, "0"));
    pdl_state = st;
  }
  return st == 1;
}

CUresult oxr_cuda_launch(CUfunction f, const uint32_t grid[3], const uint32_t block[3], unsigned shared,
                         CUstream s, void **params, bool overlap) {
  if (overlap && pdl_on()) {
    CUlaunchAttribute a = {.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION};
    a.value.programmatic_stream_serialization_allowed = 1;
    CUlaunchConfig c = {grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, s, &a, 1};
    CUresult r = oxr_cu.cuLaunchKernelEx(&c, f, params, NULL);
    if (r == CUDA_SUCCESS)
      return r;
    /* the same launch without the attribute: if that works, the attribute was the trouble
       (a driver or a capture that does not take it), and later launches leave it out */
    r = oxr_cu.cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, s, params, NULL);
    if (r == CUDA_SUCCESS)
      pdl_state = 0;
    return r;
  }
  return oxr_cu.cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, s, params, NULL);
}

int oxr_cuda_driver_version(void) {
  int v = 0;
  if (!oxr_cuda_available() || oxr_cu.cuDriverGetVersion(&v) != CUDA_SUCCESS)
    return 0;
  return v;
}

/* The context this thread made current through Oxide. Trusting it saves a
 * driver call per operation; the price is that code which switches this
 * thread's context behind Oxide's back (another library binding another
 * device's context) is not noticed. Primary contexts are shared with the
 * runtime API, so PyTorch/CuPy on the same device never cause that. */
static _Thread_local CUcontext tl_current;

ox_status oxr_cuda_make_current(ox_device dev) {
  assert(dev && dev->type == OX_DEVICE_CUDA && dev->cu_ctx);
  if (tl_current == dev->cu_ctx)
    return OX_OK;
  CUresult r = oxr_cu.cuCtxSetCurrent(dev->cu_ctx);
  if (r != CUDA_SUCCESS)
    return oxr_cuda_error(r, "cuCtxSetCurrent");
  tl_current = dev->cu_ctx;
  return OX_OK;
}

ox_status oxr_cuda_ptx_to_cubin(ox_device dev, const char *ptx, void **cubin, size_t *size) {
  assert(ptx && cubin && size);
  *cubin = NULL;
  *size = 0;
  ox_status st = oxr_cuda_make_current(dev);
  if (st != OX_OK)
    return st;
  enum { ERROR_LOG = 16384, INFO_LOG = 4096 };
  char *error_log = calloc(1, ERROR_LOG + INFO_LOG); /* the info log follows the error log */
  if (!error_log)
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory for the PTX compiler's log");
  char *info_log = error_log + ERROR_LOG;
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                         CU_JIT_INFO_LOG_BUFFER,  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                         CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_TARGET_FROM_CUCONTEXT};
  /* Sizes and levels are passed as pointer-sized integers, as the driver expects. */
  void *values[] = {error_log, (void *)(uintptr_t)(ERROR_LOG - 1),
                    info_log,  (void *)(uintptr_t)(INFO_LOG - 1),
                    (void *)(uintptr_t)4, NULL};
  _Static_assert(OXB_COUNT(opts) == OXB_COUNT(values), "one value per JIT option");
  CUlinkState link;
  CUresult r = oxr_cu.cuLinkCreate(OXB_COUNT(opts), opts, values, &link);
  if (r != CUDA_SUCCESS) {
    free(error_log);
    return oxr_cuda_error(r, "cuLinkCreate");
  }
  const char *what = "cuLinkAddData";
  r = oxr_cu.cuLinkAddData(link, CU_JIT_INPUT_PTX, (void *)ptx, strlen(ptx) + 1, "oxide.ptx", 0,
                           NULL, NULL);
  void *image = NULL;
  size_t image_size = 0;
  if (r == CUDA_SUCCESS) {
    what = "cuLinkComplete";
    r = oxr_cu.cuLinkComplete(link, &image, &image_size);
  }
  if (r == CUDA_SUCCESS) {
    *cubin = malloc(image_size ? image_size : 1); /* the image belongs to `link` */
    if (!*cubin)
      st = oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory copying a %zu-byte cubin",
                         image_size);
    else {
      memcpy(*cubin, image, image_size);
      *size = image_size;
    }
  } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    st = oxr_cuda_error(r, what);
  } else {
    char why[256];
    describe(r, why, sizeof why);
    st = oxb_set_error(OX_ERR_COMPILE, "the CUDA driver could not compile the PTX: %s failed: %s%s%s%s",
                       what, why,
                       r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION
                           ? "; the PTX is newer than this driver supports: update the "
                             "NVIDIA driver or compile for an older PTX version"
                           : "",
                       error_log[0] ? "\n" : "", error_log);
  }
  oxr_cu.cuLinkDestroy(link);
  free(error_log);
  return st;
}

ox_status oxr_cuda_module_load(ox_device dev, const void *image, CUmodule *out) {
  assert(image && out);
  *out = NULL;
  ox_status st = oxr_cuda_make_current(dev);
  if (st != OX_OK)
    return st;
  CUresult r = oxr_cu.cuModuleLoadData(out, image);
  if (r != CUDA_SUCCESS) {
    *out = NULL;
    return oxr_cuda_error(r, "cuModuleLoadData");
  }
  return OX_OK;
}

void oxr_cuda_module_unload(ox_device dev, CUmodule m) {
  if (!m || oxr_cuda_make_current(dev) != OX_OK)
    return;
  /* A failure here (a driver already shut down at exit) leaves nothing to undo. */
  (void)oxr_cu.cuModuleUnload(m);
}

ox_status oxr_cuda_get_function(CUmodule m, const char *name, CUfunction *out) {
  assert(m && name && out);
  CUresult r = oxr_cu.cuModuleGetFunction(out, m, name);
  if (r == CUDA_ERROR_NOT_FOUND)
    return oxb_set_error(OX_ERR_NOT_FOUND, "no kernel named '%s' in the loaded CUDA module", name);
  if (r != CUDA_SUCCESS)
    return oxr_cuda_error(r, "cuModuleGetFunction");
  return OX_OK;
}
