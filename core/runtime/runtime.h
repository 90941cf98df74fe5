/*
 * runtime.h - devices, streams, tensors and kernel execution, on the CPU and on
 * CUDA GPUs through the driver API loaded at run time. Prefix: oxr_.
 *
 * The public handles of oxide.h (ox_device, ox_stream, ox_tensor) are defined
 * here; the api layer builds modules and launches on top of them.
 */
#ifndef OXIDE_RUNTIME_H
#define OXIDE_RUNTIME_H

#include "base/base.h"
#include "runtime/cuda.h"

/* ---- the device-side error record. Its layout is shared with generated code
 * (backend/codegen.c): a kernel whose bounds check fails claims `flag` with an
 * atomic compare-and-swap from 0 to 1, then fills the rest. The host reads it
 * at the next synchronization of the stream and resets it. */
typedef struct oxr_errrec {
  uint32_t flag;  /* 0: no error; 1: claimed; fields valid */
  uint32_t tag;   /* the launch tag: which kernel (see oxr_tag_*) */
  uint32_t site;  /* index into the kernel's table of check sites */
  uint32_t kind;  /* 0: read, 1: write, 2: atomic */
  uint64_t index; /* the offending index */
  uint64_t len;   /* the length it was checked against */
} oxr_errrec;

/* ---- devices. */
struct ox_device_s {
  ox_device_type type;
  int ordinal;
  char name[256];
  int cc;                    /* compute capability major*10+minor; 0 on the CPU */
  int max_threads_per_block; /* CPU: 1024, as on every CUDA GPU Oxide targets */
  int max_block_dim[3];
  int max_grid_dim[3];
  int max_shared_per_block; /* bytes a block may use (opt-in maximum on CUDA) */
  int multiprocessors;      /* CUDA SMs; CPU: worker threads */
  CUdevice cu_dev;
  CUcontext cu_ctx; /* the retained primary context */
  struct ox_stream_s *default_stream;
  int mem_pools;                   /* CUDA: stream-ordered allocation (cuMemAllocAsync) works */
  struct ox_stream_s *free_streams; /* destroyed streams kept for reuse (see device.c) */
};

/* ---- streams. On the CPU, work runs when it is queued (synchronously), and
 * errors are still reported at the next synchronization, as on a GPU. */
struct ox_stream_s {
  ox_device dev;
  CUstream cu;       /* CUDA: the driver stream (NULL = legacy default stream) */
  int is_default;    /* the device's default stream: never destroyed */
  oxr_errrec *err;   /* host address of this stream's error record */
  CUdeviceptr err_d; /* its device address (CUDA: mapped pinned memory) */
  int live;          /* 0 once destroyed: the struct is then on dev->free_streams */
  struct ox_stream_s *next_free;
};

/* ---- tensors. */
struct ox_tensor_s {
  int refcount;
  ox_device dev;
  ox_dtype dtype;
  int ndim;
  int64_t shape[OX_MAX_DIMS];
  int64_t strides[OX_MAX_DIMS]; /* in elements */
  int64_t numel;
  void *data;          /* first element (device address for CUDA) */
  void *alloc;         /* what to free */
  ox_stream last_stream; /* the stream that last used it: frees are ordered there */
};

/* Makes `dev`'s primary context current on the calling thread (cheap when it
 * already is). */
ox_status oxr_cuda_make_current(ox_device dev);

/* Reads and clears `s`'s error record; returns OX_OK if there was none, else
 * passes the record to `report` (set by the api layer, which knows the
 * kernels) to build the message. */
typedef ox_status (*oxr_error_reporter)(const oxr_errrec *rec);
void oxr_set_error_reporter(oxr_error_reporter fn);
ox_status oxr_stream_check_error(ox_stream s);

/* ---- the CPU executor. Generated CPU code receives an oxr_cpu_ctx. Its layout
 * is shared with generated code (backend/codegen.c): keep the two in step. */
typedef struct oxr_cpu_ctx oxr_cpu_ctx;
struct oxr_cpu_ctx {
  uint32_t block_idx[3];
  uint32_t block_dim[3];
  uint32_t grid_dim[3];
  uint32_t tag;     /* launch tag, copied into error records */
  oxr_errrec *err;  /* the stream's error record */
  char *shared;     /* this block's shared memory */
  void *sched;      /* the fiber scheduler of this block (executor-private) */
  /* Block-wide barrier (sync_threads). */
  void (*barrier)(oxr_cpu_ctx *ctx);
  /* Warp shuffle of a 64-bit payload: mode 0 idx, 1 up, 2 down, 3 xor; `arg` is
   * the lane, delta or mask. A lane outside the warp gets its own value back,
   * as on the GPU. */
  uint64_t (*shfl)(oxr_cpu_ctx *ctx, uint64_t value, uint32_t arg, uint32_t mode);
  /* Warp vote: mode 0 all, 1 any, 2 ballot (bit i = lane i's predicate). */
  uint32_t (*vote)(oxr_cpu_ctx *ctx, uint32_t pred, uint32_t mode);
  /* The calling thread's lane (0..31) in its warp. */
  uint32_t (*lane)(oxr_cpu_ctx *ctx);
};

/* Runs every thread of one block, one after the other (kernels that use no
 * barrier or warp operation). */
typedef void (*oxr_cpu_block_fn)(oxr_cpu_ctx *ctx, void **args);
/* Runs one thread (kernels that use barriers or warp operations: each thread
 * runs on its own fiber). */
typedef void (*oxr_cpu_thread_fn)(oxr_cpu_ctx *ctx, void **args, uint32_t tx, uint32_t ty,
                                  uint32_t tz);

typedef struct oxr_cpu_kernel {
  oxr_cpu_block_fn block_fn;   /* set when the kernel needs no fibers */
  oxr_cpu_thread_fn thread_fn; /* set when it does */
  uint32_t shared_bytes;       /* static shared memory per block */
} oxr_cpu_kernel;

/* Runs a whole grid on the CPU, blocks spread over the worker threads, and
 * returns when all blocks are done. `args` are pointers to the argument values
 * in the kernel's flattened parameter order. */
ox_status oxr_cpu_launch(const oxr_cpu_kernel *k, const uint32_t grid[3], const uint32_t block[3],
                         void **args, oxr_errrec *err, uint32_t tag);

/* Number of CPU worker threads ($OXIDE_CPU_THREADS, else the cores). */
int oxr_cpu_threads(void);

/* ---- CUDA modules. */
/* Compiles PTX through the driver's linker and returns the cubin (malloc'ed)
 * so that it can be cached; `log` receives the JIT error log on failure. */
ox_status oxr_cuda_ptx_to_cubin(ox_device dev, const char *ptx, void **cubin, size_t *size);
ox_status oxr_cuda_module_load(ox_device dev, const void *image, CUmodule *out);
void oxr_cuda_module_unload(ox_device dev, CUmodule m);
ox_status oxr_cuda_get_function(CUmodule m, const char *name, CUfunction *out);
/* The driver version as major*1000+minor*10 (13000 for 13.0), 0 without a driver. */
int oxr_cuda_driver_version(void);

/* Turns a CUresult into an Oxide error naming `what` ("cuLaunchKernel"). */
ox_status oxr_cuda_error(CUresult r, const char *what);

#endif
