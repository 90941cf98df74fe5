/*
 * runtime.h - devices, streams, tensors and kernel execution, on the CPU and on
 * CUDA GPUs through the driver API loaded at run time. Prefix: oxr_.
 *
 * Devices (ox_device) are structs that live as long as the process. Streams
 * and tensors are oxr_stream and oxr_tensor objects; their public handles
 * (ox_stream, ox_tensor) are entries of base's handle table, turned into
 * objects at the API boundary by oxr_stream_get, oxr_resolve_stream and
 * oxr_tensor_get. The api layer builds modules and launches on top of them.
 */
#ifndef OXIDE_RUNTIME_H
#define OXIDE_RUNTIME_H

#include <pthread.h>

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

typedef struct oxr_stream oxr_stream;
typedef struct oxr_tensor oxr_tensor;

/* ---- devices. */
#define OXR_MAX_PEERS 64 /* CUDA devices whose peer access a device keeps track of */
struct ox_device_s {
  ox_device_type type;
  int ordinal;
  char label[16]; /* "cpu" or "cuda:N", to tell devices apart in messages (two GPUs may share a name) */
  char name[256];
  int cc;                    /* compute capability major*10+minor; 0 on the CPU */
  int max_threads_per_block; /* CPU: 1024, as on every CUDA GPU Oxide targets */
  int max_block_dim[3];
  int max_grid_dim[3];
  int max_shared_per_block; /* bytes a block may use (opt-in maximum on CUDA) */
  int multiprocessors;      /* CUDA SMs; CPU: worker threads */
  CUdevice cu_dev;
  CUcontext cu_ctx; /* the retained primary context */
  oxr_stream *default_stream;
  int mem_pools;            /* CUDA: stream-ordered allocation (cuMemAllocAsync) works */
  oxr_stream *free_streams; /* destroyed streams kept for reuse (see device.c) */
  oxr_stream *wrapped;      /* one struct per foreign CUstream ever wrapped (see device.c) */
  /* CUDA: the unused part of the last slab of stream error records (device.c) */
  oxr_errrec *errrec_next;
  CUdeviceptr errrec_next_d;
  int errrec_left;
  /* CUDA: whether this device reads and writes device i's memory directly, by ordinal (0: not
     asked yet, 1: yes, peer access enabled in this context; -1: no), oxr_cuda_peer */
  signed char peer[OXR_MAX_PEERS];
};

/* True if `d` is one of the process's devices (set up), with the last error
 * naming API function `fn` set when not (NULL, or not a device). */
bool oxr_device_check(const char *fn, ox_device d);

/* ---- streams. On the CPU, work runs when it is queued (synchronously), and
 * errors are still reported at the next synchronization, as on a GPU. */
struct oxr_stream {
  ox_stream handle;  /* its public handle while live */
  ox_device dev;
  CUstream cu;       /* CUDA: the driver stream (NULL = legacy default stream) */
  int is_default;    /* the device's default stream: never destroyed */
  oxr_errrec *err;   /* host address of this stream's error record */
  CUdeviceptr err_d; /* its device address (CUDA: mapped pinned memory) */
  int live;          /* 0 once destroyed: the struct is then on dev->free_streams */
  int borrowed;      /* wraps someone else's CUstream: never destroyed here */
  int interned;      /* on dev->wrapped: bound to its CUstream for good (device.c) */
  int wraps;         /* interned: open ox_stream_wrap calls (the handle lives while > 0) */
  oxr_stream *next_wrapped;
  CUevent mark;      /* recorded when another stream must wait for this one (lazy) */
  int capturing;     /* a chain is being captured on it: no cross-stream waits */
  oxr_stream *next_free;
  /* CPU: the launch running on it (0: none; cpu.c encodes which), so that
   * launches on one stream run one at a time and ox_stream_cancel finds it */
  _Atomic uint64_t cpu_running;
};

/* The live stream behind handle `h`, or NULL with the last error set
 * (naming API function `fn`) for NULL or a destroyed or invalid handle. */
oxr_stream *oxr_stream_get(const char *fn, ox_stream h);
/* A handle for `s` to give to the user: its own while live; an interned
 * wrapper whose handles were all destroyed gets a new one (it still names
 * its CUstream); NULL for a destroyed Oxide stream or NULL. */
ox_stream oxr_stream_public(oxr_stream *s);

/* ---- tensors. A tensor is a view (dtype, shape, strides, offset) of a
 * storage: one allocation, shared by every view of it and released with the
 * last. The storage also tracks which streams use the memory, so that work on
 * one stream waits for another's pending writes (ownership tracking). */
typedef struct oxr_storage oxr_storage;
struct oxr_storage {
  int refcount;        /* atomic */
  ox_device dev;
  void *alloc;         /* the memory (device address for CUDA) */
  size_t bytes;
  /* foreign owner (DLPack): called once with `owner_ctx` instead of freeing */
  void (*owner_release)(void *owner_ctx);
  void *owner_ctx;
  /* the producer's stream, on which foreign memory is handed back (NULL:
   * after a host wait); see ox_tensor_set_release_stream */
  oxr_stream *release;
  /* CPU memory: held by CPU kernels and host copies while they touch it
   * (oxr_cpu_hold); not used on CUDA */
  pthread_rwlock_t access;
  /* ownership tracking, under `lock` */
  int lock;                        /* a spin lock (atomic flag) */
  oxr_stream *writer;              /* the stream of the last write, or NULL */
  oxr_stream *readers[8];          /* streams that read since that write */
  int nreaders;
};

enum { OXR_T_READ_ONLY = 1, OXR_T_PARTITION = 2, OXR_T_COPIED = 4 };

struct oxr_tensor {
  ox_tensor handle;    /* its public handle */
  int refcount;        /* atomic; the handle lives while it is above 0 */
  oxr_storage *storage;
  ox_device dev;
  ox_dtype dtype;
  int ndim;
  int64_t shape[OX_MAX_DIMS];
  int64_t strides[OX_MAX_DIMS]; /* in elements, >= 0 */
  int64_t numel;
  int64_t offset;      /* bytes from storage->alloc to the first element */
  void *data;          /* storage->alloc + offset */
  int flags;           /* OXR_T_* */
  int64_t tile[OX_MAX_DIMS]; /* partition tile shape (OXR_T_PARTITION) */
};

/* The live tensor behind handle `h`, or NULL with the last error set (naming
 * API function `fn`) for NULL or a released or invalid handle. */
oxr_tensor *oxr_tensor_get(const char *fn, ox_tensor h);
void oxr_tensor_retain(oxr_tensor *t);
/* Drops one reference; the last frees the tensor and its handle. NULL is ignored. */
void oxr_tensor_release(oxr_tensor *t);
/* Writes "[2, 3]" (n dims of d) into buf, for messages; returns buf. */
const char *oxr_dims_str(int n, const int64_t *d, char buf[200]);
/* A new storage of `bytes` on `dev`, allocated by Oxide (stream-ordered on s). */
ox_status oxr_storage_alloc(ox_device dev, oxr_stream *s, size_t bytes, oxr_storage **out);
/* A storage around foreign memory; `release(ctx)` runs once with the last reference. */
oxr_storage *oxr_storage_foreign(ox_device dev, void *ptr, size_t bytes, void (*release)(void *),
                                 void *ctx);
void oxr_storage_retain(oxr_storage *st);
void oxr_storage_release(oxr_storage *st);
/* A new tensor handle on `st` (retains it). Checks that every element lies in
 * the storage and that the byte offset is aligned to the element size. */
ox_status oxr_tensor_make(oxr_storage *st, ox_dtype dtype, int ndim, const int64_t *shape,
                          const int64_t *strides, int64_t offset, int flags, oxr_tensor **out);
/* A new contiguous tensor on `dev` ordered on `s` (resolved); `fn` names the
 * API function in messages. */
ox_status oxr_tensor_new(const char *fn, ox_device dev, oxr_stream *s, ox_dtype dtype, int ndim,
                         const int64_t *shape, oxr_tensor **out);
/* True if the elements are dense and row-major (empty tensors are). */
bool oxr_tensor_dense(const oxr_tensor *t);
/* Byte range [lo, hi) the tensor's elements span (lo == hi when empty). */
void oxr_tensor_extent(const oxr_tensor *t, uintptr_t *lo, uintptr_t *hi);
/* Ownership tracking: called before work on `s` reads (write = false) or
 * writes `t`. Makes `s` wait on the device for the other streams' pending
 * work on the memory, then records this use. */
ox_status oxr_tensor_use(oxr_tensor *t, oxr_stream *s, bool write);
/* CPU memory access. A CPU kernel, and a host copy, fill or DMA of CPU
 * memory, hold the storages they touch for as long as they touch them:
 * shared to read, exclusive to write. Work on the CPU runs when it is
 * queued, on the caller's thread, so without this two threads could touch
 * one storage at once: a data race, undefined behaviour in C and in the safe
 * Rust binding built on it (whose tensors are Send). Storages are locked in
 * address order, each once (exclusive if any use writes), so two holds
 * never deadlock; nothing takes a hold while holding one. */
enum { OXR_HOLD_MAX = 2 * 64 };
typedef struct oxr_cpu_hold {
  int n;
  oxr_storage *st[OXR_HOLD_MAX];
  bool excl[OXR_HOLD_MAX];
} oxr_cpu_hold;
/* Adds `t`'s storage to the hold (tensors of a CUDA device are ignored). */
void oxr_cpu_hold_add(oxr_cpu_hold *h, const oxr_tensor *t, bool write);
/* Locks what was added; oxr_cpu_hold_drop unlocks it. */
void oxr_cpu_hold_take(oxr_cpu_hold *h);
void oxr_cpu_hold_drop(oxr_cpu_hold *h);

/* Makes `s` wait, on the device, for everything queued on `other` so far. */
ox_status oxr_stream_wait_stream(oxr_stream *s, oxr_stream *other);
/* True when OXIDE_DEBUG_NO_STREAM_ORDERING is set: every cross-stream wait
 * of ownership tracking is skipped (tests show that they catch the races). */
bool oxr_ordering_disabled(void);
/* True if CUDA stream `s` is being captured into a graph (by anyone: a
 * wrapped stream may be PyTorch's, inside torch.cuda.graph). */
bool oxr_stream_capturing(oxr_stream *s);

/* Turns stream argument `h` of API function `fn` into its stream: NULL means
 * `dev`'s default stream; a stream of another device or a destroyed or
 * invalid handle is an error. */
ox_status oxr_resolve_stream(const char *fn, ox_device dev, ox_stream h, oxr_stream **out);

/* Makes `dev`'s primary context current on the calling thread (cheap when it
 * already is). */
ox_status oxr_cuda_make_current(ox_device dev);

/* Whether CUDA device `to` can copy from and to `from`'s memory directly
 * (peer access, enabled in `to`'s context on the first ask and kept); false
 * for the same device, without the driver's peer functions, with
 * $OXIDE_PEER=0, or when the driver says no or fails (the copy then goes
 * through the host). */
bool oxr_cuda_peer(ox_device to, ox_device from);

/* Reads and clears `s`'s error record; returns OX_OK if there was none, else
 * passes the record to `report` (set by the api layer, which knows the
 * kernels) to build the message. */
typedef ox_status (*oxr_error_reporter)(const oxr_errrec *rec);
void oxr_set_error_reporter(oxr_error_reporter fn);
ox_status oxr_stream_check_error(oxr_stream *s);
/* The same without waiting for `s` unless its record's flag is set (then the
 * stream is waited for, on CUDA, so that the rest of the record is written). */
ox_status oxr_stream_peek_error(oxr_stream *s);

/* ---- the CPU executor. Generated CPU code receives an oxr_cpu_ctx. Its layout
 * is shared with generated code (backend/codegen.c): keep the two in step. */
/* ---- fiber contexts (fctx.c): the CPU executor's GPU threads, each on a
 * stack of its own, switched on one OS thread. */
#if defined(__x86_64__)
typedef struct oxr_fctx {
  void *sp; /* where oxr_fctx_switch left its frame */
} oxr_fctx;
#else
#include <signal.h>
#include <ucontext.h>
typedef struct oxr_fctx {
  ucontext_t uc;
} oxr_fctx;
#endif
/* Makes `c` a context that, when first switched to, runs fn() (which must
 * never return) on the stack [bottom, bottom + size). */
void oxr_fctx_make(oxr_fctx *c, void *bottom, size_t size, void (*fn)(void));
/* Saves the running context in *from and resumes `to`; returns when something
 * switches back to `from`. */
void oxr_fctx_switch(oxr_fctx *from, oxr_fctx *to);

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
  /* The launch's state word: bit 0 is set when the launch is cancelled.
   * Generated code reads it (relaxed) at every loop back-edge and returns when
   * the bit is set. */
  const _Atomic uint64_t *cancel;
  /* A looped kernel's rendezvous (backend: the IR's threads.c): the n threads'
   * state at `area` in shared memory, laid out as OXR_LOOP_* says; completes
   * the barriers and warp operations that can complete (the fibers' rules,
   * cpu.c) and returns the regions threads are ready at (bit min(r, 63)), 0
   * when every thread has returned. */
  uint64_t (*rendezvous)(void *area, uint32_t n);
};

/* The per-thread state of a looped kernel (threads.c), at a 16-byte aligned
 * offset of its shared memory: u32 arrays state and arg of OXR_LOOP_THREADS
 * each, then 8-byte arrays val and res. state[t]: the region t is ready at
 * (below 2^24); OXR_LOOP_DONE (returned); or, waiting at a rendezvous,
 * OXR_LOOP_WAITING(kind, cont): kind 0 a barrier, 1 + m shuffle mode m
 * (arg[t] its lane, delta or mask, val[t] its value), 5 + m vote mode m
 * (val[t]'s first byte its predicate); then ready at region cont. A completed
 * warp op leaves its result in res[t]. */
#define OXR_LOOP_THREADS 1024
#define OXR_LOOP_DONE 0xFFFFFFFEu
#define OXR_LOOP_WAITING(kind, cont) (0x80000000u | (uint32_t)(kind) << 24 | (uint32_t)(cont))
#define OXR_LOOP_BYTES (OXR_LOOP_THREADS * (2 * 4 + 2 * 8))

/* Runs every thread of one block, one after the other (kernels that use no
 * barrier or warp operation). */
typedef void (*oxr_cpu_block_fn)(oxr_cpu_ctx *ctx, void **args);
/* Runs one thread (kernels that use barriers or warp operations: each thread
 * runs on its own fiber). */
typedef void (*oxr_cpu_thread_fn)(oxr_cpu_ctx *ctx, void **args, uint32_t tx, uint32_t ty,
                                  uint32_t tz);

/* The most stack a kernel may need per thread (the backend refuses to compile
 * more: OXL_CPU_STACK_MAX, backend.h, which must be equal). */
#define OXR_CPU_STACK_MAX (4u << 20)

typedef struct oxr_cpu_kernel {
  oxr_cpu_block_fn block_fn;   /* set when the kernel needs no fibers */
  oxr_cpu_thread_fn thread_fn; /* set when it does */
  uint32_t shared_bytes;       /* static shared memory per block */
  uint32_t thread_shared_bytes; /* and this much more per thread of the block */
  /* Stack the entry point needs (its frame and its callees', measured when it
   * was compiled; the executor adds a margin for itself). 0: unknown, taken
   * to be small (hand-written kernels). */
  uint32_t stack_bytes;
  const char *name; /* for messages; may be NULL */
} oxr_cpu_kernel;

/* Runs a whole grid on the CPU, blocks spread over the worker threads, and
 * returns when all blocks are done. `args` are pointers to the argument values
 * in the kernel's flattened parameter order. `s` (may be NULL) is the stream:
 * launches on one stream run one after another, launches on different
 * streams at the same time; ox_stream_cancel(s) stops the launch, which then
 * returns OX_ERR_CANCELLED. */
ox_status oxr_cpu_launch(const oxr_cpu_kernel *k, const uint32_t grid[3], const uint32_t block[3],
                         void **args, oxr_errrec *err, uint32_t tag, oxr_stream *s);

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

/* Launches f on stream s. With `overlap` (code built for sm_90 and newer, whose kernels
 * wait with griddepcontrol.wait before they touch global memory), the launch allows
 * programmatic stream serialization: it may start while the kernel before it on s
 * finishes (and prefetch into L2 meanwhile), and waits for it on the device. On unless
 * OXIDE_PDL=0. */
CUresult oxr_cuda_launch(CUfunction f, const uint32_t grid[3], const uint32_t block[3], unsigned shared,
                         CUstream s, void **params, bool overlap);
/* Turns a CUresult into an Oxide error naming `what` ("cuLaunchKernel"). */
ox_status oxr_cuda_error(CUresult r, const char *what);
/* The error of a failed cuLaunchKernel of `f` (kernel `name`), with what
 * launches are about: the block, the shared memory, the kernel's registers
 * and its limits. */
ox_status oxr_cuda_launch_error(CUresult r, CUfunction f, const char *name, const uint32_t block[3],
                                unsigned shared);

#endif
