/*
 * oxide.h - the public C API of Oxide.
 *
 * Oxide compiles kernels written in the Oxide kernel language (docs/language.md)
 * and runs them on NVIDIA GPUs through the CUDA driver, or on the CPU.
 *
 * Conventions (see docs/c-api.md):
 *  - Handles are opaque pointers. A handle made by a Create-like call is owned by
 *    the caller and given back with the matching Destroy/Release call. Handles
 *    returned by Get-like calls are borrowed and must not be destroyed.
 *  - Every call that can fail returns an ox_status. On failure, the message of
 *    the last error of the calling thread (with file:line:col where the error has
 *    a source location) is returned by ox_last_error().
 *  - Nothing here needs a GPU: without a driver or a GPU, CUDA requests fail
 *    with OX_ERR_NO_DEVICE and the CPU device keeps working.
 */
#ifndef OXIDE_OXIDE_H
#define OXIDE_OXIDE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define OX_API __declspec(dllexport)
#else
#define OX_API __attribute__((visibility("default")))
#endif

#define OX_VERSION_MAJOR 0
#define OX_VERSION_MINOR 1
#define OX_VERSION_PATCH 0
/** The binary interface of this header: raised whenever a struct, an enum
 *  value or a function's meaning changes incompatibly. A program or binding
 *  built against this header should compare it with ox_abi_version() of the
 *  library it loaded (the bindings do, and refuse another). */
#define OX_ABI_VERSION 3

/* ---------------------------------------------------------------- status */

/** Result of every fallible call. OX_OK is zero. */
typedef enum ox_status {
  OX_OK = 0,
  OX_ERR_INVALID_ARGUMENT, /**< a bad argument to an API call or a launch */
  OX_ERR_COMPILE,          /**< the kernel text has errors */
  OX_ERR_NOT_FOUND,        /**< no kernel, device or file of that name */
  OX_ERR_NO_DEVICE,        /**< no CUDA driver, or no such GPU */
  OX_ERR_DRIVER,           /**< the CUDA driver returned an error */
  OX_ERR_OUT_OF_MEMORY,    /**< an allocation failed */
  OX_ERR_LAUNCH,           /**< a launch violates its contract or device limits */
  OX_ERR_BOUNDS,           /**< a kernel made an out-of-bounds access (reported at sync) */
  OX_ERR_IO,               /**< a file could not be read or written */
  OX_ERR_UNSUPPORTED,      /**< valid, but not supported (yet) on this target */
  OX_ERR_INTERNAL,         /**< a bug in Oxide */
  OX_ERR_CANCELLED         /**< a CPU launch was stopped by ox_stream_cancel or SIGINT */
} ox_status;

/** Message of the calling thread's last error ("" if none). Valid until the
 *  next failing Oxide call on this thread. */
OX_API const char *ox_last_error(void);

/** Status code of the calling thread's last error (OX_OK if none). */
OX_API ox_status ox_last_status(void);

/** Clears the calling thread's last error. */
OX_API void ox_clear_error(void);

/** A short constant name for a status ("OX_ERR_COMPILE", ...). */
OX_API const char *ox_status_name(ox_status s);

/** Version string of this build, e.g. "0.1.0 (LLVM 19.1.7)". */
OX_API const char *ox_version(void);

/** OX_ABI_VERSION of the header this library was built from. */
OX_API int ox_abi_version(void);

/** Frees a string or buffer that an Oxide call returned to the caller. */
OX_API void ox_free(void *p);

/* ---------------------------------------------------------------- dtypes */

/** Scalar element types. */
typedef enum ox_dtype {
  OX_BOOL = 0,
  OX_I8, OX_I16, OX_I32, OX_I64,
  OX_U8, OX_U16, OX_U32, OX_U64,
  OX_F16, OX_BF16, OX_F32, OX_F64,
  OX_F8E4M3, OX_F8E5M2, /**< OCP fp8 (E4M3FN, E5M2): kernels load, store, convert (`as`) and `dot` them, without arithmetic */
  OX_TF32,              /**< TensorFloat-32 (f32's exponent, 10 mantissa bits): a compute type in
                             kernels (casts, dot operands); tensors hold f32, so tensors of tf32
                             are refused */
  OX_DTYPE_COUNT
} ox_dtype;

/** Size in bytes of one element of dtype `t` (0 for an invalid dtype). */
OX_API size_t ox_dtype_size(ox_dtype t);

/** Name of dtype `t` as the kernel language spells it ("f32", "u8", ...). */
OX_API const char *ox_dtype_name(ox_dtype t);

/* --------------------------------------------------------------- devices */

typedef enum ox_device_type { OX_DEVICE_CPU = 1, OX_DEVICE_CUDA = 2 } ox_device_type;

/** A device. Devices are borrowed handles that live as long as the process. */
typedef struct ox_device_s *ox_device;

/** Number of devices of `type` (CPU: always 1; CUDA: 0 without a driver). */
OX_API ox_status ox_device_count(ox_device_type type, int *count);

/** Device `ordinal` of `type`. Fails with OX_ERR_NO_DEVICE when there is none. */
OX_API ox_status ox_device_get(ox_device_type type, int ordinal, ox_device *out);

/** The default device: the one named by $OXIDE_DEVICE ("cpu", "cuda", "cuda:N")
 *  if set, else CUDA device 0 when a GPU is usable, else the CPU. */
OX_API ox_status ox_device_default(ox_device *out);

OX_API ox_device_type ox_device_get_type(ox_device d);
OX_API int ox_device_ordinal(ox_device d);
/** Human-readable name ("NVIDIA H200", "CPU (x86_64, 16 threads)"). */
OX_API const char *ox_device_name(ox_device d);
/** Compute capability of a CUDA device as major*10+minor (90 for sm_90); 0 for the CPU. */
OX_API int ox_device_compute_capability(ox_device d);
/** Streaming multiprocessors of a CUDA device, or worker threads of the CPU
 *  device: the unit to size a grid-stride launch by. */
OX_API int ox_device_multiprocessors(ox_device d);

/* --------------------------------------------------------------- streams */

/** An ordered queue of work on one device. */
typedef struct ox_stream_s *ox_stream;

/** Creates a stream on `dev`. Release it with ox_stream_destroy. */
OX_API ox_status ox_stream_create(ox_device dev, ox_stream *out);

/** The device's default stream (borrowed; for CUDA, the legacy default stream
 *  of the primary context, which PyTorch and CuPy also use by default). */
OX_API ox_status ox_device_stream(ox_device dev, ox_stream *out);

/** Waits for all work queued on `s`. If a kernel on `s` made an out-of-bounds
 *  access since the last synchronization, returns OX_ERR_BOUNDS with the
 *  kernel, file:line:col, index and length in the message. */
OX_API ox_status ox_stream_synchronize(ox_stream s);

/** Destroys a stream made by ox_stream_create (waits for its work first).
 *  Default streams are ignored. NULL is ignored. */
OX_API void ox_stream_destroy(ox_stream s);

OX_API ox_device ox_stream_device(ox_stream s);

/** Wraps a CUDA stream that someone else owns (a `CUstream` from PyTorch,
 *  CuPy, ...). Oxide borrows it: ox_stream_destroy frees only the wrapper and
 *  never destroys or synchronizes the CUDA stream. Wrapping the same CUstream
 *  again gives the same handle (each ox_stream_wrap needs its own
 *  ox_stream_destroy; the last one ends the handle), so ownership tracking
 *  sees one stream. Tensors remember their uses on it after the wrapper is
 *  gone, and later work on other streams waits for it: the CUstream must
 *  outlive the tensors used on it (PyTorch's streams live as long as the
 *  process). Wraps of CU_STREAM_PER_THREAD (0x2) are per call, and destroying
 *  one waits for its work, as ox_device_per_thread_stream explains. */
OX_API ox_status ox_stream_wrap(ox_device dev, void *cu_stream, ox_stream *out);

/** The calling thread's per-thread default stream of `dev` (CUDA's
 *  CU_STREAM_PER_THREAD; on the CPU, the default stream). Borrowed. */
OX_API ox_status ox_device_per_thread_stream(ox_device dev, ox_stream *out);

/** The `CUstream` behind `s` (NULL for the legacy default stream and on the CPU). */
OX_API void *ox_stream_handle(ox_stream s);

/** Stops the CPU launch that is running on `s` now (on the CPU, ox_launch runs
 *  the kernel before it returns, so that is a launch another thread, or the
 *  code this interrupts, is in). Its kernel code returns at its next loop
 *  back-edge, no further blocks start, and that ox_launch returns
 *  OX_ERR_CANCELLED; what it wrote is then incomplete. Later launches are not
 *  affected; with no launch running this does nothing and returns OX_OK.
 *  Async-signal-safe (atomic operations only): it may be called from a signal
 *  handler or from any thread. For the same reason it sets no error message:
 *  the status alone reports OX_ERR_INVALID_ARGUMENT for a NULL or destroyed
 *  stream, and OX_ERR_UNSUPPORTED for a CUDA stream (a running GPU kernel
 *  cannot be stopped; see docs/c-api.md). */
OX_API ox_status ox_stream_cancel(ox_stream s);

/** Ctrl-C for CPU launches. `enable` != 0 installs a SIGINT handler that
 *  cancels every running CPU launch, as ox_stream_cancel would, and then
 *  passes the signal on to the handler that was installed before (a handler
 *  function is called; the default action is taken by restoring and
 *  re-raising it). Calls count; each enabling call checks (one sigaction
 *  query) that Oxide's handler is still the one installed, and puts it back
 *  in front of one installed since. If SIGINT is ignored, nothing is
 *  installed. `enable` == 0 undoes one enabling call; the last one puts the
 *  previous handler back, unless someone replaced Oxide's handler meanwhile
 *  (theirs then stays). Language bindings call this around CPU launches
 *  (Python does, so that Ctrl-C stops a long CPU kernel and raises
 *  KeyboardInterrupt; from its first CPU launch on it keeps one enabling call
 *  for the process's life, so that a launch costs one query, not four system
 *  calls). Fails with OX_ERR_INVALID_ARGUMENT for a 0 without a matching 1,
 *  with OX_ERR_INTERNAL if sigaction fails. */
OX_API ox_status ox_cancel_on_sigint(int enable);

/* ---------------------------------------------------------------- events */

/** A point in a stream's work, to wait for or to time. */
typedef struct ox_event_s *ox_event;

/** Creates an event on `dev`. Release it with ox_event_destroy. */
OX_API ox_status ox_event_create(ox_device dev, ox_event *out);
/** Destroys an event. NULL is ignored. */
OX_API void ox_event_destroy(ox_event e);
/** Marks the current end of `s`'s queued work (the CPU's work is already done). */
OX_API ox_status ox_event_record(ox_event e, ox_stream s);
/** Waits until the work before the event's last record is done. */
OX_API ox_status ox_event_synchronize(ox_event e);
/** Makes later work on `s` wait, on the device, for the work before `e`
 *  (an event of another GPU too: the wait is on `s`'s device). */
OX_API ox_status ox_stream_wait_event(ox_stream s, ox_event e);
/** Makes later work on `s` wait, on the device, for the work queued on
 *  `other` so far (as an event recorded on `other` and waited for on `s`,
 *  without one to manage). The streams are of one device or of two GPUs;
 *  on the CPU, where work is done when queued, it does nothing. */
OX_API ox_status ox_stream_wait_stream(ox_stream s, ox_stream other);
/** Milliseconds between two recorded, completed events of one device. */
OX_API ox_status ox_event_elapsed_ms(ox_event start, ox_event end, float *ms);

/* --------------------------------------------------------------- tensors */

#define OX_MAX_DIMS 8

/** A reference-counted, typed, strided array in one device's memory. */
typedef struct ox_tensor_s *ox_tensor;

/** Allocates an uninitialized contiguous tensor on `dev`, stream-ordered on
 *  `s` (NULL: the device's default stream). Release with ox_tensor_release.
 *  No tensor is OX_TF32 (a compute type of kernels): this and every call that
 *  makes a tensor refuse it with OX_ERR_INVALID_ARGUMENT. */
OX_API ox_status ox_tensor_empty(ox_device dev, ox_stream s, ox_dtype dtype, int ndim,
                                 const int64_t *shape, ox_tensor *out);

/** Like ox_tensor_empty, then copies `bytes` bytes of `host` in (which must be
 *  exactly the tensor's size). Returns once the copy is done. */
OX_API ox_status ox_tensor_from_host(ox_device dev, ox_stream s, ox_dtype dtype, int ndim,
                                     const int64_t *shape, const void *host, size_t bytes,
                                     ox_tensor *out);

/** Copies the whole tensor to host memory `dst` of `bytes` bytes (which must be
 *  exactly the tensor's size) after the work queued on `s` (NULL: default stream);
 *  returns once the data is there. */
OX_API ox_status ox_tensor_to_host(ox_tensor t, ox_stream s, void *dst, size_t bytes);

/** Copies `bytes` bytes from host memory into the tensor, ordered on `s`;
 *  returns once the copy is done. */
OX_API ox_status ox_tensor_copy_from_host(ox_tensor t, ox_stream s, const void *src,
                                          size_t bytes);

OX_API void ox_tensor_retain(ox_tensor t);
/** Drops one reference; the memory is freed (stream-ordered) with the last one. NULL is ignored. */
OX_API void ox_tensor_release(ox_tensor t);

OX_API ox_dtype ox_tensor_dtype(ox_tensor t);
OX_API int ox_tensor_ndim(ox_tensor t);
OX_API const int64_t *ox_tensor_shape(ox_tensor t);
OX_API int64_t ox_tensor_numel(ox_tensor t);
OX_API size_t ox_tensor_nbytes(ox_tensor t);
OX_API ox_device ox_tensor_device(ox_tensor t);
/** Address of the first element (a device address for CUDA tensors). */
OX_API void *ox_tensor_data(ox_tensor t);

/** Strides in elements (never negative; 0 along broadcast dimensions). */
OX_API const int64_t *ox_tensor_strides(ox_tensor t);
/** 1 if the elements are dense and row-major. */
OX_API int ox_tensor_is_contiguous(ox_tensor t);
/** 1 if the tensor may not be written (a DLPack producer marked it read-only,
 *  or it is a broadcast view): it can never be a kernel's mutable argument. */
OX_API int ox_tensor_is_read_only(ox_tensor t);

/** A contiguous tensor of zeros (stream-ordered on `s`, NULL: default stream). */
OX_API ox_status ox_tensor_zeros(ox_device dev, ox_stream s, ox_dtype dtype, int ndim,
                                 const int64_t *shape, ox_tensor *out);
/** A contiguous tensor with every element `value` (converted to the dtype). */
OX_API ox_status ox_tensor_full(ox_device dev, ox_stream s, ox_dtype dtype, int ndim,
                                const int64_t *shape, double value, ox_tensor *out);
/** The 1-D tensor start, start + step, ... of `n` elements. */
OX_API ox_status ox_tensor_arange(ox_device dev, ox_stream s, ox_dtype dtype, double start,
                                  double step, int64_t n, ox_tensor *out);
/** Copies `src` into `dst` (same dtype and shape; any devices, any strides),
 *  ordered on `s` (a stream of dst's device, or of src's when dst is on the
 *  CPU). Returns once queued; host memory involved is copied synchronously.
 *  Between two GPUs with peer access (enabled on first use; $OXIDE_PEER=0
 *  turns it off) one DMA on `s` (cuMemcpyPeerAsync), after the work queued on
 *  either GPU's streams that writes `src` or uses `dst`; without it, through
 *  host memory, synchronously. */
OX_API ox_status ox_tensor_copy(ox_tensor dst, ox_tensor src, ox_stream s);
/** A new contiguous copy of `src` on `dev`. */
OX_API ox_status ox_tensor_to(ox_tensor src, ox_device dev, ox_stream s, ox_tensor *out);
/** For a tensor imported through DLPack: hands its memory back to the
 *  producer, when the last tensor on it is released, by ordering stream `s`
 *  (the producer's stream: PyTorch's current stream) after Oxide's pending
 *  work on the memory, on the device, instead of waiting for that work on
 *  the host first (the default). This is right when the producer orders its
 *  own later use of the memory, its allocator's reuse included, on `s`, as
 *  PyTorch and CuPy do; it also keeps a release inside a CUDA graph capture
 *  legal. NULL goes back to the default. OX_ERR_INVALID_ARGUMENT for memory
 *  Oxide allocated, or a stream of another device. `s` must stay live until
 *  the release (a destroyed one makes the release wait on the host). */
OX_API ox_status ox_tensor_set_release_stream(ox_tensor t, ox_stream s);

/** The stream of the last write Oxide queued to `t`'s memory (through any
 *  view: a launch, a copy, a fill, the allocation), borrowed, in `*out`; NULL
 *  when there is none to wait for: memory imported through DLPack and not
 *  written by Oxide since, or a writer stream since destroyed (destroying
 *  waits for its work). Writes wait for the earlier ones (ownership
 *  tracking), so work queued after this stream's queued work sees all of
 *  Oxide's writes; pending reads on other streams are not covered. Language
 *  bindings use it for `__cuda_array_interface__`'s stream, and to
 *  synchronize the writer (ox_stream_synchronize, which reports its
 *  out-of-bounds errors) before reading a tensor on the host. On the CPU,
 *  where work is done when queued, it names the stream whose pending error
 *  concerns the memory. */
OX_API ox_status ox_tensor_last_writer(ox_tensor t, ox_stream *out);

/* ---- views: new handles on the same memory (the memory lives while any view does) */

/** Elements start, start+step, ... below stop along `dim` (step > 0; negative
 *  strides are not supported). */
OX_API ox_status ox_tensor_slice(ox_tensor t, int dim, int64_t start, int64_t stop, int64_t step,
                                 ox_tensor *out);
/** The same elements in another shape; fails (OX_ERR_INVALID_ARGUMENT) when the
 *  strides do not allow it without a copy. One dimension may be -1. */
OX_API ox_status ox_tensor_reshape(ox_tensor t, int ndim, const int64_t *shape, ox_tensor *out);
/** Dimensions reordered: out.shape[i] = t.shape[perm[i]]. */
OX_API ox_status ox_tensor_permute(ox_tensor t, const int *perm, ox_tensor *out);
OX_API ox_status ox_tensor_transpose(ox_tensor t, int dim0, int dim1, ox_tensor *out);
/** Size-1 dimensions (and missing leading ones) repeated by stride 0; the
 *  result is read-only. */
OX_API ox_status ox_tensor_broadcast_to(ox_tensor t, int ndim, const int64_t *shape, ox_tensor *out);
/** Partitions `t` into exclusive tiles of `tile` (one size per dimension) for
 *  the Tile pipeline: the grid is ceil(shape / tile) per dimension. */
OX_API ox_status ox_tensor_partition(ox_tensor t, int ndim, const int64_t *tile, ox_tensor *out);
/** The tile grid of a partition, written to grid[0 .. rank) (room for
 *  OX_MAX_DIMS entries); returns the rank, 0 if `t` is not a partition. */
OX_API int ox_tensor_partition_grid(ox_tensor t, int64_t *grid);

/* ---- DLPack (dlpack/dlpack.h; docs/c-api.md has the stream rule) */

/** Imports a DLPack tensor without copying. `managed` is a
 *  DLManagedTensorVersioned* when `versioned` is 1, a legacy DLManagedTensor*
 *  when 0. Oxide takes ownership in every case: the producer's deleter runs
 *  exactly once, when the last Oxide reference goes, or at once if the tensor
 *  is refused (bad shape, dtype, device or a newer major version). */
OX_API ox_status ox_tensor_from_dlpack(void *managed, int versioned, ox_tensor *out);
/** Exports `t` as a new DLManagedTensorVersioned* (`versioned` 1, strides
 *  always set) or DLManagedTensor* (0) holding one Oxide reference, released
 *  by its deleter. When `consumer` is given, the consumer's stream is made to
 *  wait (on the device) for Oxide's pending writes to `t` first. */
OX_API ox_status ox_tensor_to_dlpack(ox_tensor t, ox_stream consumer, int versioned, void **out);

/* --------------------------------------------------------------- modules */

typedef enum ox_target {
  OX_TARGET_DEFAULT = 0, /**< the device's own target */
  OX_TARGET_CPU = 1,
  OX_TARGET_CUDA = 2
} ox_target;

/** A value for a tile kernel's const generic, by name (ox_compile_options.generics). */
typedef struct ox_generic_value {
  const char *name; /**< the generic's name, as in `<const BM: i32>` */
  int64_t value;
} ox_generic_value;

/** The most bytes ox_compile_options will ever have (its `size`). */
#define OX_OPTIONS_SIZE_MAX 1024

/** Options for compiling kernel text. Zero-initialize, then set what you need. */
typedef struct ox_compile_options {
  /** sizeof(ox_compile_options) as the caller's header has it, so that the
   *  struct can grow: fields past `size` are taken as 0, and a caller's
   *  fields this library does not know must be 0 (else OX_ERR_UNSUPPORTED).
   *  0 (what a designated or zero initializer leaves) means the fields of ABI
   *  version 3, up to emit_contiguous. Read before any other field: a size
   *  above OX_OPTIONS_SIZE_MAX, or not a multiple of a pointer's, is refused
   *  (OX_ERR_INVALID_ARGUMENT) without reading further, which is what a
   *  caller built against an older header (or that left `size` unset) gets. */
  size_t size;
  const char *filename; /**< name used in diagnostics (default "<input>") */
  int sm;               /**< CUDA architecture as 80, 86, 90...; 0 = the device's */
  int opt_level;        /**< LLVM optimization level 0..3; 0 here means the default 3 */
  int no_cache;         /**< 1: neither read nor write the compiled-kernel cache */
  int emit_contiguous;  /**< ox_emit of tile kernels: specialize as if every tensor argument
                             were contiguous16 (16-byte aligned start, unit last stride, other
                             strides multiples of 16 bytes), as most launches are; 0: as if none
                             were */
  /** ox_emit of tile kernels: values for their const generics, by name
   *  (`num_generics` of them), so that the code shown is what a launch with
   *  those sizes runs; a generic not given is 16. Every name must be a generic
   *  of some tile kernel of the source, and a value that makes a tile shape
   *  invalid is a located compile error. ox_module_compile refuses them:
   *  launches bind generics from their partitions (or ox_kernel_set_generic).
   *  Since ABI version 3 with `size` set. */
  const ox_generic_value *generics;
  int num_generics;
} ox_compile_options;

/** Compiled kernels of one source text: compiled for one device, and run on
 *  any device of its type (each CUDA device loads the code on its first
 *  launch there; one compile, and one cache entry, per architecture). */
typedef struct ox_module_s *ox_module;
/** One kernel of a module (borrowed: lives as long as its module). */
typedef struct ox_kernel_s *ox_kernel;

/** Compiles `source` for `dev` and loads it. On a compile error returns
 *  OX_ERR_COMPILE; ox_last_error() holds every diagnostic with
 *  file:line:col, the source line and a caret. */
OX_API ox_status ox_module_compile(ox_device dev, const char *source,
                                   const ox_compile_options *opts, ox_module *out);

/** Reads the file at `path` and compiles it (the filename defaults to `path`). */
OX_API ox_status ox_module_compile_file(ox_device dev, const char *path,
                                        const ox_compile_options *opts, ox_module *out);

/** Unloads a module. Its kernels become invalid. NULL is ignored. */
OX_API void ox_module_destroy(ox_module m);

/** Finds the kernel `name` (a `#[kernel]` function) in `m`. */
OX_API ox_status ox_module_get_kernel(ox_module m, const char *name, ox_kernel *out);

/** True (1) if the module was loaded from the compiled-kernel cache without
 *  running code generation. */
OX_API int ox_module_from_cache(ox_module m);

/** Number of parameters of `k` as written in the kernel. */
OX_API int ox_kernel_num_params(ox_kernel k);
/** The kernel's name. */
OX_API const char *ox_kernel_name(ox_kernel k);

/** How a kernel parameter is passed (the kernel language's parameter types). */
typedef enum ox_param_kind {
  OX_PARAM_SCALAR = 1,      /**< a scalar of `dtype`, passed as an ox_arg scalar */
  OX_PARAM_SLICE,           /**< `&[T]`: a contiguous tensor, read only */
  OX_PARAM_MUT_SLICE,       /**< `&mut [T]` (unsafe kernels): a contiguous tensor, written */
  OX_PARAM_ATOMIC_SLICE,    /**< `&[Atomic<T>]`: a contiguous tensor, atomic updates */
  OX_PARAM_DISJOINT,        /**< `DisjointSlice<T>`: a contiguous tensor, each element written by one thread */
  OX_PARAM_TENSOR,          /**< `&Tensor<T, [dims]>` (tile kernels): any strides, read only */
  OX_PARAM_TILE,            /**< `&mut Tensor<T, [tile]>` (tile kernels): a partition, written */
  OX_PARAM_ATOMIC_TENSOR    /**< `&Tensor<Atomic<T>, [dims]>` (tile kernels): atomic adds */
} ox_param_kind;

/** One parameter of a kernel, as written. */
typedef struct ox_param_info {
  const char *name;   /**< the parameter's name (lives as long as the module) */
  ox_param_kind kind;
  ox_dtype dtype;     /**< the scalar's type, or the tensor's element type */
  int rank;           /**< tensor parameters of tile kernels: the rank; slices 1; scalars 0 */
  int writable;       /**< 1 if the kernel may write the tensor */
} ox_param_info;

/** Parameter `index` (0-based) of `k` in *out. Bindings read a kernel's
 *  signature once with it, to convert and check arguments by type and name.
 *  A parameter whose type is a type generic (`x: &[T]`, `a: T` in a kernel
 *  declared `<T: Float>`; see ox_kernel_param_generic) reports, for a
 *  scalar, the dtype a binding should pass its numbers as: f64 for `Float`
 *  and `Num`, i64 for `Int` (the launch converts a scalar of any numeric
 *  dtype to the generic's binding, refusing values out of its range and
 *  non-integers for an integer binding); for a tensor, the bound's first
 *  dtype (f32, or i32 for `Int`), though any dtype the bound admits is
 *  taken. */
OX_API ox_status ox_kernel_param(ox_kernel k, int index, ox_param_info *out);

/** The type generic that parameter `index` of `k` is written with (`T` of
 *  `x: &[T]`), or NULL for a parameter of a fixed type, and on error (a bad
 *  handle or index: then with the last error set; otherwise the last error is
 *  left as it was). A launch binds each type generic to the dtype of the
 *  tensors given for it, which must agree, and specializes the kernel for
 *  that dtype on its first launch with it. The string lives as long as the
 *  module. */
OX_API const char *ox_kernel_param_generic(ox_kernel k, int index);

/** 1 if launching `k` can break memory safety whatever its arguments: an
 *  `unsafe fn` kernel (its threads may race on its `&mut [T]` arguments) or
 *  one that runs an `unsafe { }` block, itself or in a device function it
 *  calls (the accesses there are not bounds-checked). 0 for a safe kernel
 *  (every access checked or proven, each output element written by one
 *  thread); -1, with the last error set, for an invalid handle. Bindings of
 *  memory-safe languages launch such kernels only from code marked unsafe. */
OX_API int ox_kernel_is_unsafe(ox_kernel k);

/** Gives const generic `name` of tile kernel `k` an explicit value for its
 *  launches from now on (a generic that sizes no output dim gets its value
 *  only this way; one that does must agree with the partitions). Call it
 *  before launching, not concurrently with launches of `k`. */
OX_API ox_status ox_kernel_set_generic(ox_kernel k, const char *name, int64_t value);

/** One candidate configuration of a tile kernel: values for some of its const
 *  generics, by name (ox_kernel_set_candidates). */
typedef struct ox_tile_candidate {
  const ox_generic_value *values;
  int num_values;
} ox_tile_candidate;

/** Lets the runtime choose tile kernel `k`'s configuration among `n`
 *  candidates (0 clears them), as Triton's autotune does. Every candidate sets
 *  the same generics (in any order) to powers of two; they take precedence
 *  over ox_kernel_set_generic, and an output partition's tile dims sized by
 *  them are re-partitioned to each candidate's values (so pass the outputs
 *  partitioned in any of them). The first launch with a new key (the
 *  kernel's source, the device, the arguments' dtypes, shapes and alignment,
 *  the candidates) measures every candidate on scratch outputs, waiting for
 *  the stream; the fastest is kept in memory and in the compiled-kernel
 *  cache, so another process starts with it. A candidate that does not
 *  compile (a tile too large for the device) is skipped. A launch that would
 *  measure while its stream is capturing a CUDA graph fails (launch once
 *  before capturing). $OXIDE_DEBUG_TUNE=1 prints the measurements to stderr.
 *  Copies the candidates. Safe while other threads launch `k`: a launch
 *  with candidates holds the kernel's tuning lock, which this call takes. */
OX_API ox_status ox_kernel_set_candidates(ox_kernel k, const ox_tile_candidate *candidates, int n);

/* ---------------------------------------------------------------- launch */

typedef enum ox_arg_kind { OX_ARG_TENSOR = 1, OX_ARG_SCALAR = 2 } ox_arg_kind;

/** One launch argument: a tensor (for a slice parameter) or a scalar of an
 *  exact dtype (no implicit conversions, as in the kernel language). */
typedef struct ox_arg {
  ox_arg_kind kind;
  ox_dtype dtype; /**< the scalar's dtype (ignored for tensors) */
  union {
    ox_tensor tensor;
    int64_t i;  /**< bool and signed integers */
    uint64_t u; /**< unsigned integers */
    double f;   /**< f16, bf16, f32, f64 (converted to the dtype at launch) */
  } v;
} ox_arg;

static inline ox_arg ox_arg_tensor(ox_tensor t) {
  ox_arg a; a.kind = OX_ARG_TENSOR; a.dtype = OX_F32; a.v.tensor = t; return a;
}
static inline ox_arg ox_arg_i32(int32_t x) { ox_arg a; a.kind = OX_ARG_SCALAR; a.dtype = OX_I32; a.v.i = x; return a; }
static inline ox_arg ox_arg_i64(int64_t x) { ox_arg a; a.kind = OX_ARG_SCALAR; a.dtype = OX_I64; a.v.i = x; return a; }
static inline ox_arg ox_arg_u32(uint32_t x) { ox_arg a; a.kind = OX_ARG_SCALAR; a.dtype = OX_U32; a.v.u = x; return a; }
static inline ox_arg ox_arg_u64(uint64_t x) { ox_arg a; a.kind = OX_ARG_SCALAR; a.dtype = OX_U64; a.v.u = x; return a; }
static inline ox_arg ox_arg_f32(float x) { ox_arg a; a.kind = OX_ARG_SCALAR; a.dtype = OX_F32; a.v.f = x; return a; }
static inline ox_arg ox_arg_f64(double x) { ox_arg a; a.kind = OX_ARG_SCALAR; a.dtype = OX_F64; a.v.f = x; return a; }
static inline ox_arg ox_arg_bool(int x) { ox_arg a; a.kind = OX_ARG_SCALAR; a.dtype = OX_BOOL; a.v.i = x != 0; return a; }

/** Grid and block shape of a launch. Zero dimensions are taken as 1. */
typedef struct ox_launch_config {
  uint32_t grid[3];
  uint32_t block[3];
} ox_launch_config;


/** The candidate (index into ox_kernel_set_candidates' array) that launches of
 *  `k` with these arguments run, as measured in this process or read from the
 *  cache, in *index; -1 when none is chosen yet (the next launch measures).
 *  Measures nothing. */
OX_API ox_status ox_kernel_tuned(ox_kernel k, const ox_arg *args, int nargs, int *index);

/** Checks a launch of `k` without running it: the argument count, each
 *  argument's kind, dtype, mutability and device, the kernel's launch contract
 *  (exact block shape, `requires` relations) and the device's limits. */
OX_API ox_status ox_launch_check(ox_kernel k, ox_stream s, const ox_launch_config *cfg,
                                 const ox_arg *args, int nargs);

/** Checks the launch like ox_launch_check, then queues it on `s`. The launch
 *  runs on `s`'s device, whose tensors it takes; with `s` NULL, on the device
 *  of its tensor arguments (all on one: tensors of two devices are an error
 *  naming both), on that device's default stream, or on the module's device
 *  if it has none. Out-of-bounds accesses inside the kernel are
 *  reported by the next ox_stream_synchronize of `s`. On the CPU the grid runs
 *  before this returns (after the previous launch on `s` has returned; launches
 *  on other streams run at the same time); a launch stopped by
 *  ox_stream_cancel returns OX_ERR_CANCELLED. */
OX_API ox_status ox_launch(ox_kernel k, ox_stream s, const ox_launch_config *cfg,
                           const ox_arg *args, int nargs);

/** Reports, without waiting for running work, an out-of-bounds access that a
 *  kernel has recorded on the streams of the calling thread's two latest
 *  launches (each stream's, once: as ox_stream_synchronize would, which then
 *  returns OX_OK). OX_ERR_BOUNDS with the kernel, file:line:col, index and
 *  length; OX_OK when none is recorded yet. On the CPU a launch's kernel has
 *  run when ox_launch returns, so this reports that launch's error; on CUDA,
 *  an error once the faulting kernel has recorded it (the stream is then
 *  waited for, so that the record is complete). Language bindings call it
 *  after each launch, so that an error surfaces at the launch (CPU) or at a
 *  later one (CUDA) rather than only at a synchronize.
 *
 *  With the environment variable OXIDE_LAUNCH_BLOCKING=1 (read once), every
 *  ox_launch waits for its stream and returns its kernel's out-of-bounds
 *  error itself, as CUDA_LAUNCH_BLOCKING=1 makes CUDA's launches synchronous:
 *  for debugging, at the cost of all overlap. */
OX_API ox_status ox_launch_errors(void);

/* ---------------------------------------------------------------- chains */

/** A recorded sequence of launches and copies that runs only when asked: on a
 *  stream, in order (cuTile Rust's lazy model). On CUDA it can be captured once
 *  as a CUDA graph and replayed. Arguments are checked and tensors retained
 *  when recorded. */
typedef struct ox_chain_s *ox_chain;

OX_API ox_status ox_chain_create(ox_device dev, ox_chain *out);
/** Destroys a chain (releases its tensors and graph). NULL is ignored. */
OX_API void ox_chain_destroy(ox_chain c);
/** Records a launch (checked now, as ox_launch_check does). */
OX_API ox_status ox_chain_launch(ox_chain c, ox_kernel k, const ox_launch_config *cfg,
                                 const ox_arg *args, int nargs);
/** Records a copy (as ox_tensor_copy). */
OX_API ox_status ox_chain_copy(ox_chain c, ox_tensor dst, ox_tensor src);
/** Queues the chain on `s`: its graph if captured, else each step in order. */
OX_API ox_status ox_chain_run(ox_chain c, ox_stream s);
/** CUDA: captures the chain as a CUDA graph on `s` (nothing runs); later
 *  ox_chain_run calls replay it. CPU: nothing to capture (returns OX_OK). */
OX_API ox_status ox_chain_capture(ox_chain c, ox_stream s);

/* ------------------------------------------------------------ inspection */

typedef enum ox_emit_kind {
  OX_EMIT_AST = 1,  /**< the parsed syntax tree */
  OX_EMIT_IR,       /**< Oxide IR, verified */
  OX_EMIT_LLVM,     /**< optimized LLVM IR */
  OX_EMIT_PTX,      /**< PTX assembly (CUDA target) */
  OX_EMIT_ASM       /**< host assembly (CPU target) */
} ox_emit_kind;

/** Compiles `source` for `target` (OX_TARGET_DEFAULT means CUDA for PTX, CPU
 *  otherwise) and returns the text of stage `kind` in *out (free it with
 *  ox_free). Needs no device. */
OX_API ox_status ox_emit(const char *source, const ox_compile_options *opts, ox_target target,
                         ox_emit_kind kind, char **out);

/** Directory of the on-disk compiled-kernel cache ($OXIDE_CACHE_DIR, else
 *  $XDG_CACHE_HOME/oxide, else $HOME/.cache/oxide, else the passwd entry's
 *  home/.cache/oxide, else /tmp/oxide-cache-<uid>), or "" when the cache is
 *  off ($OXIDE_CACHE=0). Only a path: the directory is used only if it is the
 *  user's own and nobody else may write to it (docs/c-api.md, Cache). */
OX_API const char *ox_cache_dir(void);

/** Writes a report of the environment (driver, GPUs, LLVM, cache, ptxas) to a
 *  new string in *out (free with ox_free). */
OX_API ox_status ox_doctor(char **out);

#ifdef __cplusplus
}
#endif
#endif /* OXIDE_OXIDE_H */
