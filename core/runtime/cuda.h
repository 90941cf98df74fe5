/*
 * cuda.h - Oxide's own declarations of the subset of the CUDA driver API it
 * uses. The driver is loaded at run time with dlopen("libcuda.so.1"), so Oxide
 * builds without the CUDA toolkit and runs without a GPU. Names, values and
 * signatures follow the driver's cuda.h (CUDA 13); do not include both.
 * Calls go through the table `oxr_cu` after oxr_cuda_load() succeeded, e.g.
 * oxr_cu.cuMemAlloc(&p, n) (the table hides the _v2 symbol suffixes).
 */
#ifndef OXIDE_RUNTIME_CUDA_H
#define OXIDE_RUNTIME_CUDA_H

#include <stddef.h>

#include "oxide/oxide.h"

typedef enum CUresult_enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_STUB_LIBRARY = 34,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_UNKNOWN = 999
} CUresult;

typedef int CUdevice;
typedef struct CUtensorMap_st {
  _Alignas(64) unsigned long long opaque[16];
} CUtensorMap;
enum { /* the values of cuda.h's CUtensorMap enums that Oxide uses */
  CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6,
  CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9,
  CU_TENSOR_MAP_SWIZZLE_32B = 1,
  CU_TENSOR_MAP_SWIZZLE_64B = 2,
  CU_TENSOR_MAP_SWIZZLE_128B = 3,
  CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3
};
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
/* cuLaunchKernelEx's configuration (cuda.h's layout): an attribute is an id
 * padded to 8 bytes and a 64-byte value */
#define CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6
typedef struct CUlaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmatic_stream_serialization_allowed;
  } value;
} CUlaunchAttribute;
typedef struct CUlaunchConfig {
  unsigned int grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  CUstream stream;
  CUlaunchAttribute *attrs;
  unsigned int num_attrs;
} CUlaunchConfig;
typedef struct CUevent_st *CUevent;
typedef struct CUlinkState_st *CUlinkState;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
#define CU_STREAM_CAPTURE_MODE_RELAXED 2

typedef enum CUdevice_attribute_enum {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
  CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115
} CUdevice_attribute;

typedef enum CUfunction_attribute_enum {
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  CU_FUNC_ATTRIBUTE_PTX_VERSION = 5,
  CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
} CUfunction_attribute;

typedef enum CUpointer_attribute_enum {
  CU_POINTER_ATTRIBUTE_CONTEXT = 1,
  CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
  CU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3,
  CU_POINTER_ATTRIBUTE_HOST_POINTER = 4,
  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
} CUpointer_attribute;

typedef enum CUjit_option_enum {
  CU_JIT_MAX_REGISTERS = 0,
  CU_JIT_THREADS_PER_BLOCK = 1,
  CU_JIT_WALL_TIME = 2,
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_JIT_OPTIMIZATION_LEVEL = 7,
  CU_JIT_TARGET_FROM_CUCONTEXT = 8,
  CU_JIT_TARGET = 9,
  CU_JIT_GENERATE_DEBUG_INFO = 11,
  CU_JIT_LOG_VERBOSE = 12,
  CU_JIT_GENERATE_LINE_INFO = 13
} CUjit_option;

typedef enum CUjitInputType_enum {
  CU_JIT_INPUT_CUBIN = 0,
  CU_JIT_INPUT_PTX = 1,
  CU_JIT_INPUT_FATBINARY = 2
} CUjitInputType;

typedef enum CUmemPool_attribute_enum {
  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4 /* value type: unsigned long long */
} CUmemPool_attribute;

#define CU_STREAM_DEFAULT 0x0
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_EVENT_DEFAULT 0x0
#define CU_EVENT_BLOCKING_SYNC 0x1
#define CU_EVENT_DISABLE_TIMING 0x2
#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02

/* The driver entry points Oxide uses. A NULL member is an optional one the
 * loaded driver lacks (marked "optional"); all others are present after a
 * successful oxr_cuda_load(). */
typedef struct oxr_cu_api {
  CUresult (*cuInit)(unsigned int flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuGetErrorName)(CUresult error, const char **str);
  CUresult (*cuGetErrorString)(CUresult error, const char **str);
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
  CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
  CUresult (*cuDeviceGetAttribute)(int *value, CUdevice_attribute attr, CUdevice dev);
  CUresult (*cuDeviceTotalMem)(size_t *bytes, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuCtxGetCurrent)(CUcontext *ctx);
  CUresult (*cuCtxSynchronize)(void);
  CUresult (*cuMemAlloc)(CUdeviceptr *dptr, size_t bytes);
  CUresult (*cuMemFree)(CUdeviceptr dptr);
  CUresult (*cuMemAllocAsync)(CUdeviceptr *dptr, size_t bytes, CUstream s);       /* optional */
  CUresult (*cuMemFreeAsync)(CUdeviceptr dptr, CUstream s);                       /* optional */
  CUresult (*cuDeviceGetDefaultMemPool)(CUmemoryPool *pool, CUdevice dev);        /* optional */
  CUresult (*cuMemPoolSetAttribute)(CUmemoryPool pool, CUmemPool_attribute attr,  /* optional */
                                    void *value);
  CUresult (*cuMemHostAlloc)(void **p, size_t bytes, unsigned int flags);
  CUresult (*cuMemFreeHost)(void *p);
  CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr *dptr, void *p, unsigned int flags);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);
  CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes, CUstream s);
  CUresult (*cuMemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes, CUstream s);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s);
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t n, CUstream s);
  CUresult (*cuPointerGetAttribute)(void *data, CUpointer_attribute attr, CUdeviceptr p);
  CUresult (*cuStreamCreate)(CUstream *s, unsigned int flags);
  CUresult (*cuStreamDestroy)(CUstream s);
  CUresult (*cuStreamSynchronize)(CUstream s);
  CUresult (*cuStreamWaitEvent)(CUstream s, CUevent e, unsigned int flags);
  CUresult (*cuEventCreate)(CUevent *e, unsigned int flags);
  CUresult (*cuEventRecord)(CUevent e, CUstream s);
  CUresult (*cuEventSynchronize)(CUevent e);
  CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);
  CUresult (*cuEventDestroy)(CUevent e);
  CUresult (*cuModuleLoadData)(CUmodule *m, const void *image);
  CUresult (*cuModuleLoadDataEx)(CUmodule *m, const void *image, unsigned int nopts,
                                 CUjit_option *opts, void **values);
  CUresult (*cuModuleUnload)(CUmodule m);
  CUresult (*cuModuleGetFunction)(CUfunction *f, CUmodule m, const char *name);
  CUresult (*cuFuncGetAttribute)(int *value, CUfunction_attribute attr, CUfunction f);
  CUresult (*cuFuncSetAttribute)(CUfunction f, CUfunction_attribute attr, int value);
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *blocks, CUfunction f, int block_size, /* optional */
                                                          size_t dynamic_shared);
  CUresult (*cuLaunchKernel)(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz,
                             unsigned int shared_bytes, CUstream s, void **params, void **extra);
  /* CUDA 12.0+: a launch with attributes (programmatic stream serialization); optional */
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *config, CUfunction f, void **params, void **extra);
  CUresult (*cuLinkCreate)(unsigned int nopts, CUjit_option *opts, void **values,
                           CUlinkState *state);
  CUresult (*cuLinkAddData)(CUlinkState state, CUjitInputType type, void *data, size_t size,
                            const char *name, unsigned int nopts, CUjit_option *opts,
                            void **values);
  CUresult (*cuLinkComplete)(CUlinkState state, void **cubin, size_t *size);
  CUresult (*cuLinkDestroy)(CUlinkState state);
  /* CUDA graphs (chains): optional */
  CUresult (*cuStreamBeginCapture)(CUstream s, int mode);
  CUresult (*cuStreamEndCapture)(CUstream s, CUgraph *graph);
  /* status: 0 not capturing, 1 capturing, 2 capture invalidated */
  CUresult (*cuStreamIsCapturing)(CUstream s, int *status);
  /* sm_90's TMA: a tensor map (CUtensorMap, 128 bytes, 64-byte aligned) of a
   * tiled 2-D view; the enums are passed as their values (below) */
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap *map, int dtype, unsigned rank, void *global,
                                     const unsigned long long *dims, const unsigned long long *strides,
                                     const unsigned *box, const unsigned *element_strides, int interleave,
                                     int swizzle, int l2_promotion, int oob_fill);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *exec, CUgraph graph, unsigned long long flags);
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream s);
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
  CUresult (*cuGraphDestroy)(CUgraph graph);
  /* peer access between GPUs: optional (without it, copies between GPUs go through the host) */
  CUresult (*cuDeviceCanAccessPeer)(int *can, CUdevice dev, CUdevice peer);
  CUresult (*cuCtxEnablePeerAccess)(CUcontext peer, unsigned int flags);
  CUresult (*cuMemcpyPeerAsync)(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                                size_t bytes, CUstream s);
} oxr_cu_api;

extern oxr_cu_api oxr_cu;

/* Loads libcuda.so.1, resolves the table and calls cuInit, once per process
 * (thread-safe; the result is cached). Without a usable driver returns
 * OX_ERR_NO_DEVICE with the reason in the last error. */
ox_status oxr_cuda_load(void);

/* 1 if oxr_cuda_load() succeeds; unlike it, never touches the last error (for
 * probes such as ox_device_count that must not fail without a driver). */
int oxr_cuda_available(void);

#endif
