/*
 * dlpack.h - the DLPack tensor-exchange ABI (version 1.1), as Oxide declares
 * it. The layouts and numeric values below are fixed by the DLPack
 * specification; any library that speaks DLPack 1.x exchanges the same bytes.
 *
 * The exchange in a nutshell: a producer hands a consumer a managed tensor (a
 * DLTensor plus a deleter). The consumer reads the DLTensor and calls the
 * deleter exactly once when it no longer needs the memory. Oxide's side is
 * ox_tensor_from_dlpack / ox_tensor_to_dlpack in oxide.h; the stream rule of
 * the exchange is in docs/c-api.md ("DLPack").
 */
#ifndef OXIDE_DLPACK_H
#define OXIDE_DLPACK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes. A managed tensor whose major version
 * differs has another layout: only its deleter may be touched. A newer minor
 * version only adds enumeration values. */
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

/* Where the memory lives. Values are part of the ABI; the gaps are unused. */
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,          /* ordinary host memory */
  kDLCUDA = 2,         /* CUDA device memory */
  kDLCUDAHost = 3,     /* page-locked host memory (cudaMallocHost) */
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,          /* Verilog simulator */
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,      /* reserved for experiments */
  kDLCUDAManaged = 13, /* CUDA unified memory (cudaMallocManaged) */
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
  kDLTrn = 18,
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id; /* the GPU's ordinal; 0 for host, pinned and managed memory */
} DLDevice;

/* Element kinds (DLDataType.code). */
typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,        /* IEEE binary floating point */
  kDLOpaqueHandle = 3U, /* only meaningful between agreeing parties */
  kDLBfloat = 4U,
  kDLComplex = 5U,      /* real and imaginary parts side by side; bits covers both */
  kDLBool = 6U,         /* stored in 8 bits */
  /* 8-bit floats, named exponent/mantissa bits and their special-value variant */
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  /* sub-byte floats (bits must be 6 or 4), packed unless flagged otherwise */
  kDLFloat6_e2m3fn = 15U,
  kDLFloat6_e3m2fn = 16U,
  kDLFloat4_e2m1fn = 17U,
} DLDataTypeCode;

/* One element's type: `bits` per lane, `lanes` > 1 for short vectors (a
 * float4 is {kDLFloat, 32, 4}). Native byte order. */
typedef struct {
  uint8_t code; /* a DLDataTypeCode, kept to one byte */
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

/* A strided view of memory, owning nothing. Element (i0, i1, ...) is at byte
 * address data + byte_offset + sum(ik * strides[k]) * element size. */
typedef struct {
  void *data;           /* base address (a device address for GPU memory); may be NULL when empty */
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;       /* ndim sizes */
  int64_t *strides;     /* ndim strides in elements; NULL means compact row-major (legacy rule) */
  uint64_t byte_offset; /* from data to the first element */
} DLTensor;

/* The pre-1.0 ("legacy") managed tensor: no version, no flags. `deleter`,
 * which may be NULL, frees manager_ctx's resources and the struct itself. */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/* DLManagedTensorVersioned.flags */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL) /* the consumer must not write */
/* The producer made a copy for this exchange: the consumer alone owns it
 * until it calls the deleter. */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
/* Sub-byte elements are each padded to a byte rather than packed. */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

/* The 1.x managed tensor. Every future major version keeps the fields up to
 * and including `flags` where they are, so that a consumer can always read the
 * version and call the deleter of a tensor it refuses. */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self); /* may be NULL */
  uint64_t flags;                                         /* DLPACK_FLAG_BITMASK_* */
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
}
#endif
#endif /* OXIDE_DLPACK_H */
