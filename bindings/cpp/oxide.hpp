// oxide.hpp - header-only C++17 RAII wrappers over Oxide's C API (oxide.h).
//
//   auto dev = oxide::Device::cpu();
//   auto mod = oxide::Module::compile(dev, source, "saxpy.oxk");
//   auto x = oxide::Tensor::from_host(dev, {1.0f, 2.0f, 3.0f});
//   auto out = oxide::Tensor::empty(dev, OX_F32, {3});
//   mod.kernel("saxpy").launch({{1}, {256}}, x, x, out, 2.0f);  // float -> f32 scalar
//   dev.default_stream().synchronize();  // out-of-bounds accesses are reported here
//   std::vector<float> r = out.to_host<float>();
//
// Errors. With exceptions (the default), every failing call throws
// oxide::Error, which carries the ox_status and the message of
// ox_last_error(). Built with -fno-exceptions, a failing call runs the
// handler set by oxide::set_error_handler (default: print and abort); code
// that wants to go on after an error calls the C API, which returns statuses.
//
// Types. Scalars map by their C++ type (float -> f32, double -> f64, int32_t
// -> i32, uint64_t -> u64, bool -> bool...), as the kernel language refuses
// implicit conversions; oxide::f16(x) and oxide::bf16(x) make half-precision
// scalars. Tensor elements map the same way, and oxide::half and
// oxide::bfloat16 hold f16 and bf16 elements (with conversions to and from
// float).
//
// Ownership. Tensor is reference-counted (copies share the tensor), Stream,
// Event, Chain and Module own their object (move-only, except Module, whose
// copies share it), and a Kernel keeps its module alive. A default-constructed
// or moved-from object holds nothing: using it is an error, not a crash.
#ifndef OXIDE_OXIDE_HPP
#define OXIDE_OXIDE_HPP

#include <dlpack/dlpack.h>
#include <oxide/oxide.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define OXIDE_HPP_EXCEPTIONS 1
#else
#define OXIDE_HPP_EXCEPTIONS 0
#endif

namespace oxide {

class Error : public std::runtime_error {
public:
  Error(ox_status status, const std::string &message)
      : std::runtime_error(message), status_(status) {}
  ox_status status() const noexcept { return status_; }
  const char *status_name() const noexcept { return ox_status_name(status_); }

private:
  ox_status status_;
};

// What a failing call does when exceptions are off (-fno-exceptions).
using ErrorHandler = void (*)(ox_status status, const char *message);

namespace detail {
[[noreturn]] inline void default_handler(ox_status s, const char *message) {
  std::fprintf(stderr, "oxide: %s: %s\n", ox_status_name(s), message);
  std::abort();
}
inline ErrorHandler &handler() {
  static ErrorHandler h = default_handler;
  return h;
}

[[noreturn]] inline void fail(ox_status s, const std::string &message) {
#if OXIDE_HPP_EXCEPTIONS
  throw Error(s, message);
#else
  handler()(s, message.c_str());
  std::abort(); // a handler that returns would let the failed call go on
#endif
}

// ox_last_error() is per thread and valid until the next failing call: copy it now.
inline void check(ox_status s) {
  if (s != OX_OK)
    fail(s, ox_last_error());
}

// Frees strings that Oxide hands over.
inline std::string take(char *p) {
  std::string s(p ? p : "");
  ox_free(p);
  return s;
}
} // namespace detail

// The handler failing calls run when exceptions are off; returns the old one.
// It must not return (it may longjmp, exit or abort).
inline ErrorHandler set_error_handler(ErrorHandler h) {
  ErrorHandler old = detail::handler();
  detail::handler() = h ? h : detail::default_handler;
  return old;
}

inline std::string version() { return ox_version(); }

// Directory of the on-disk compiled-kernel cache ("" when it is off).
inline std::string cache_dir() { return ox_cache_dir(); }

inline std::string doctor() {
  char *out = nullptr;
  detail::check(ox_doctor(&out));
  return detail::take(out);
}

// ---------------------------------------------------------------- dtypes

// IEEE binary16 and bfloat16 elements (storage: 16 bits), rounded to nearest
// even from float.
struct half {
  uint16_t bits = 0;
  half() = default;
  explicit half(float f) : bits(from_float(f)) {}
  explicit operator float() const { return to_float(bits); }
  static uint16_t from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
      return sign | 0x7e00; // NaN
    if (a >= 0x477ff000u)
      return sign | 0x7c00; // overflow rounds to infinity
    if (a < 0x38800000u) {  // subnormal in f16: in units of 2^-24, rounded to even
      uint32_t m = (a & 0x7fffffu) | 0x800000u;
      int shift = 126 - static_cast<int>(a >> 23); // 14.. for the largest subnormals
      if (shift > 24)
        return sign;
      uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
      q += rem > halfway || (rem == halfway && (q & 1));
      return sign | static_cast<uint16_t>(q);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1);
    return sign | static_cast<uint16_t>((r - 0x38000000u) >> 13);
  }
  static float to_float(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
    if (e == 0x1f) {
      u = sign | 0x7f800000u | (m << 13);
    } else if (e == 0) { // zero or subnormal: m * 2^-24, exact in float
      float f = static_cast<float>(m) * 5.9604644775390625e-8f;
      std::memcpy(&u, &f, 4);
      u |= sign;
    } else {
      u = sign | ((e + 112) << 23) | (m << 13);
    }
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  explicit bfloat16(float f) : bits(from_float(f)) {}
  explicit operator float() const { return to_float(bits); }
  static uint16_t from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
      return static_cast<uint16_t>((u >> 16) | 0x40); // NaN stays NaN
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
  }
  static float to_float(uint16_t b) {
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// the ox_dtype of a C++ element type (none is OX_TF32: tf32 lives in kernels
// only, as casts and dot operands; tensors hold f32 and refuse tf32)
template <class T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr ox_dtype value = OX_BOOL; };
template <> struct dtype_of<int8_t> { static constexpr ox_dtype value = OX_I8; };
template <> struct dtype_of<int16_t> { static constexpr ox_dtype value = OX_I16; };
template <> struct dtype_of<int32_t> { static constexpr ox_dtype value = OX_I32; };
template <> struct dtype_of<int64_t> { static constexpr ox_dtype value = OX_I64; };
template <> struct dtype_of<uint8_t> { static constexpr ox_dtype value = OX_U8; };
template <> struct dtype_of<uint16_t> { static constexpr ox_dtype value = OX_U16; };
template <> struct dtype_of<uint32_t> { static constexpr ox_dtype value = OX_U32; };
template <> struct dtype_of<uint64_t> { static constexpr ox_dtype value = OX_U64; };
template <> struct dtype_of<float> { static constexpr ox_dtype value = OX_F32; };
template <> struct dtype_of<double> { static constexpr ox_dtype value = OX_F64; };
template <> struct dtype_of<half> { static constexpr ox_dtype value = OX_F16; };
template <> struct dtype_of<bfloat16> { static constexpr ox_dtype value = OX_BF16; };

// ---------------------------------------------------------------- devices

class Stream;

namespace detail {
// Refuses a liboxide built from another oxide.h (its structs and enums would
// differ from this header's); checked when a device is taken.
inline void check_abi() {
  static const int abi = ox_abi_version();
  if (abi != OX_ABI_VERSION)
    fail(OX_ERR_UNSUPPORTED, "the loaded liboxide has ABI " + std::to_string(abi) +
                                 ", this header needs ABI " + std::to_string(OX_ABI_VERSION));
}
} // namespace detail

// Devices live as long as the process: a Device is a plain, copyable handle.
class Device {
public:
  static Device cpu() { return get(OX_DEVICE_CPU, 0); }
  static Device cuda(int ordinal = 0) { return get(OX_DEVICE_CUDA, ordinal); }
  // $OXIDE_DEVICE if set, else CUDA device 0 when a GPU is usable, else the CPU.
  static Device default_device() {
    detail::check_abi();
    ox_device d;
    detail::check(ox_device_default(&d));
    return Device(d);
  }
  static int count(ox_device_type type) {
    int n = 0;
    detail::check(ox_device_count(type, &n));
    return n;
  }
  explicit Device(ox_device h) : h_(h) {}

  ox_device_type type() const { return ox_device_get_type(h_); }
  int ordinal() const { return ox_device_ordinal(h_); }
  std::string name() const { return ox_device_name(h_); }
  int compute_capability() const { return ox_device_compute_capability(h_); } // 90 = sm_90; 0: CPU
  int multiprocessors() const { return ox_device_multiprocessors(h_); }
  Stream stream() const;            // a new stream
  Stream default_stream() const;    // borrowed
  Stream per_thread_stream() const; // borrowed: the calling thread's (CUDA's per-thread stream)
  // A CUDA stream someone else owns (a CUstream from PyTorch, CuPy...): borrowed.
  Stream wrap_stream(void *cu_stream) const;
  void synchronize() const; // the default stream
  ox_device get() const { return h_; }
  bool operator==(const Device &o) const { return h_ == o.h_; }
  bool operator!=(const Device &o) const { return h_ != o.h_; }

private:
  static Device get(ox_device_type t, int ordinal) {
    detail::check_abi();
    ox_device d;
    detail::check(ox_device_get(t, ordinal, &d));
    return Device(d);
  }
  ox_device h_;
};

// ---------------------------------------------------------------- streams and events

class Event;

// Owns a stream made by Device::stream() (destroyed with it, after its work);
// default, per-thread and wrapped streams are borrowed. Move-only.
class Stream {
public:
  Stream() = default;
  Stream(ox_stream h, bool owned) : h_(h), owned_(owned) {}
  Stream(Stream &&o) noexcept : h_(std::exchange(o.h_, nullptr)), owned_(o.owned_) {}
  Stream &operator=(Stream &&o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, nullptr);
      owned_ = o.owned_;
    }
    return *this;
  }
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  ~Stream() { reset(); }

  // Waits for the queued work; fails with OX_ERR_BOUNDS if a kernel on this
  // stream made an out-of-bounds access since the last synchronization.
  void synchronize() const { detail::check(ox_stream_synchronize(h_)); }
  // Stops this stream's running and queued CPU launches (ox_stream_cancel):
  // they fail with OX_ERR_CANCELLED. A CUDA stream cannot be cancelled.
  void cancel() const { detail::check(ox_stream_cancel(h_)); }
  // Later work here waits, on the device, for the work before `e`.
  void wait(const Event &e) const;
  // Later work here waits, on the device, for the work queued on `other` so far.
  void wait(const Stream &other) const { detail::check(ox_stream_wait_stream(h_, other.h_)); }
  Device device() const {
    ox_device d = ox_stream_device(h_);
    if (!d)
      detail::check(ox_last_status());
    return Device(d);
  }
  // The CUstream behind it (nullptr: the legacy default stream, or the CPU).
  void *native_handle() const { return ox_stream_handle(h_); }
  ox_stream get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }

private:
  void reset() {
    if (owned_ && h_)
      ox_stream_destroy(h_);
    h_ = nullptr;
  }
  ox_stream h_ = nullptr;
  bool owned_ = false;
};

inline Stream Device::stream() const {
  ox_stream s;
  detail::check(ox_stream_create(h_, &s));
  return Stream(s, true);
}

inline Stream Device::default_stream() const {
  ox_stream s;
  detail::check(ox_device_stream(h_, &s));
  return Stream(s, false);
}

inline Stream Device::per_thread_stream() const {
  ox_stream s;
  detail::check(ox_device_per_thread_stream(h_, &s));
  return Stream(s, false);
}

inline Stream Device::wrap_stream(void *cu_stream) const {
  ox_stream s;
  detail::check(ox_stream_wrap(h_, cu_stream, &s));
  return Stream(s, true); // the wrapper is ours; the CUstream never is
}

inline void Device::synchronize() const { default_stream().synchronize(); }

// A point in a stream's work, to wait for or to time. Move-only.
class Event {
public:
  explicit Event(Device dev) { detail::check(ox_event_create(dev.get(), &h_)); }
  Event(Event &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Event &operator=(Event &&o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  Event(const Event &) = delete;
  Event &operator=(const Event &) = delete;
  ~Event() { ox_event_destroy(h_); }

  void record(const Stream &s) { detail::check(ox_event_record(h_, s.get())); }
  void synchronize() const { detail::check(ox_event_synchronize(h_)); }
  // Milliseconds from this event to `end` (both recorded and complete).
  float elapsed_ms(const Event &end) const {
    float ms = 0;
    detail::check(ox_event_elapsed_ms(h_, end.h_, &ms));
    return ms;
  }
  ox_event get() const { return h_; }

private:
  ox_event h_ = nullptr;
};

inline void Stream::wait(const Event &e) const { detail::check(ox_stream_wait_event(h_, e.get())); }

// ---------------------------------------------------------------- tensors

namespace detail {
inline ox_stream stream_of(const Stream *s) { return s ? s->get() : nullptr; }

// Contiguous containers: std::vector (not of bool: packed), std::array,
// std::initializer_list, std::string_view-like types with data() and size().
template <class C, class = void> struct is_contiguous : std::false_type {};
template <class C>
struct is_contiguous<C, std::void_t<decltype(std::data(std::declval<const C &>())),
                                    decltype(std::size(std::declval<const C &>()))>>
    : std::true_type {};
template <class C>
using element_t = std::remove_cv_t<std::remove_pointer_t<decltype(std::data(std::declval<const C &>()))>>;
} // namespace detail

// A reference to a reference-counted tensor: copies share it (retain), the
// last one frees it (release, stream-ordered after the work that uses it).
class Tensor {
public:
  Tensor() = default; // holds nothing
  explicit Tensor(ox_tensor adopt) : h_(adopt) {} // takes over one reference
  Tensor(const Tensor &o) : h_(o.h_) {
    if (h_)
      ox_tensor_retain(h_);
  }
  Tensor(Tensor &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Tensor &operator=(Tensor o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  ~Tensor() { ox_tensor_release(h_); }

  // ---- making tensors (s: the stream the allocation is ordered on; null: the default)
  static Tensor empty(Device dev, ox_dtype dtype, const std::vector<int64_t> &shape,
                      const Stream *s = nullptr) {
    ox_tensor t;
    detail::check(ox_tensor_empty(dev.get(), detail::stream_of(s), dtype, static_cast<int>(shape.size()),
                                  shape.data(), &t));
    return Tensor(t);
  }
  static Tensor zeros(Device dev, ox_dtype dtype, const std::vector<int64_t> &shape,
                      const Stream *s = nullptr) {
    ox_tensor t;
    detail::check(ox_tensor_zeros(dev.get(), detail::stream_of(s), dtype, static_cast<int>(shape.size()),
                                  shape.data(), &t));
    return Tensor(t);
  }
  static Tensor full(Device dev, ox_dtype dtype, const std::vector<int64_t> &shape, double value,
                     const Stream *s = nullptr) {
    ox_tensor t;
    detail::check(ox_tensor_full(dev.get(), detail::stream_of(s), dtype, static_cast<int>(shape.size()),
                                 shape.data(), value, &t));
    return Tensor(t);
  }
  static Tensor arange(Device dev, ox_dtype dtype, double start, double step, int64_t n,
                       const Stream *s = nullptr) {
    ox_tensor t;
    detail::check(ox_tensor_arange(dev.get(), detail::stream_of(s), dtype, start, step, n, &t));
    return Tensor(t);
  }
  // A copy of n elements at `data`, 1-D unless `shape` says otherwise (its
  // element count must be n).
  template <class T>
  static Tensor from_host(Device dev, const T *data, size_t n, std::vector<int64_t> shape = {},
                          const Stream *s = nullptr) {
    if (shape.empty())
      shape.push_back(static_cast<int64_t>(n));
    ox_tensor t;
    detail::check(ox_tensor_from_host(dev.get(), detail::stream_of(s), dtype_of<T>::value,
                                      static_cast<int>(shape.size()), shape.data(), data, n * sizeof(T), &t));
    return Tensor(t);
  }
  // ... of a contiguous container: std::vector, std::array, a span...
  template <class C, std::enable_if_t<detail::is_contiguous<C>::value, int> = 0>
  static Tensor from_host(Device dev, const C &data, std::vector<int64_t> shape = {},
                          const Stream *s = nullptr) {
    static_assert(!std::is_same_v<C, std::vector<bool>>, "std::vector<bool> is packed: use uint8_t data");
    return from_host(dev, std::data(data), std::size(data), std::move(shape), s);
  }
  template <class T>
  static Tensor from_host(Device dev, std::initializer_list<T> data, std::vector<int64_t> shape = {},
                          const Stream *s = nullptr) {
    return from_host(dev, data.begin(), data.size(), std::move(shape), s);
  }
  // Imports a DLPack tensor without a copy; Oxide owns it from the call on
  // (its deleter runs once, when the last reference goes, or at once if it is refused).
  static Tensor from_dlpack(DLManagedTensorVersioned *m) {
    ox_tensor t;
    detail::check(ox_tensor_from_dlpack(m, 1, &t));
    return Tensor(t);
  }
  static Tensor from_dlpack(DLManagedTensor *m) {
    ox_tensor t;
    detail::check(ox_tensor_from_dlpack(m, 0, &t));
    return Tensor(t);
  }

  // For an imported tensor: its memory goes back to the producer on `s` (the
  // producer's stream, ordered after Oxide's work) instead of after a host
  // wait; nullptr restores the default (ox_tensor_set_release_stream).
  void set_release_stream(const Stream *s) const {
    detail::check(ox_tensor_set_release_stream(live(), detail::stream_of(s)));
  }
  // The stream of Oxide's last write to the memory (borrowed; empty when none).
  Stream last_writer() const {
    ox_stream s = nullptr;
    detail::check(ox_tensor_last_writer(live(), &s));
    return Stream(s, false);
  }

  // ---- DLPack export: a new managed tensor holding a reference, released
  // by its deleter. The consumer's stream, when given, waits (on the device)
  // for Oxide's pending writes.
  DLManagedTensorVersioned *to_dlpack(const Stream *consumer = nullptr) const {
    void *m = nullptr;
    detail::check(ox_tensor_to_dlpack(live(), detail::stream_of(consumer), 1, &m));
    return static_cast<DLManagedTensorVersioned *>(m);
  }
  DLManagedTensor *to_dlpack_legacy(const Stream *consumer = nullptr) const {
    void *m = nullptr;
    detail::check(ox_tensor_to_dlpack(live(), detail::stream_of(consumer), 0, &m));
    return static_cast<DLManagedTensor *>(m);
  }

  // ---- host copies (the tensor must be contiguous; the dtype must match T)
  // The elements, copied after the work queued on `s` (default stream if null).
  // A pending kernel error of `s` throws here (OX_ERR_BOUNDS with its
  // location): the values would be partial.
  template <class T> std::vector<T> to_host(const Stream *s = nullptr) const {
    expect<T>("to_host");
    std::vector<T> out(static_cast<size_t>(numel()));
    detail::check(ox_tensor_to_host(h_, detail::stream_of(s), out.data(), nbytes()));
    return out;
  }
  template <class T> void to_host(T *dst, size_t n, const Stream *s = nullptr) const {
    expect<T>("to_host");
    detail::check(ox_tensor_to_host(h_, detail::stream_of(s), dst, n * sizeof(T)));
  }
  template <class T> void copy_from_host(const T *src, size_t n, const Stream *s = nullptr) {
    expect<T>("copy_from_host");
    detail::check(ox_tensor_copy_from_host(h_, detail::stream_of(s), src, n * sizeof(T)));
  }
  template <class C, std::enable_if_t<detail::is_contiguous<C>::value, int> = 0>
  void copy_from_host(const C &src, const Stream *s = nullptr) {
    static_assert(!std::is_same_v<C, std::vector<bool>>, "std::vector<bool> is packed: use uint8_t data");
    copy_from_host(std::data(src), std::size(src), s);
  }
  template <class T> void copy_from_host(std::initializer_list<T> src, const Stream *s = nullptr) {
    copy_from_host(src.begin(), src.size(), s);
  }

  // ---- device copies
  // Copies `src` (same dtype and shape, any device, any strides) into this tensor.
  void copy_from(const Tensor &src, const Stream *s = nullptr) {
    detail::check(ox_tensor_copy(live(), src.live(), detail::stream_of(s)));
  }
  // A contiguous copy on `dev`.
  Tensor to(Device dev, const Stream *s = nullptr) const {
    ox_tensor t;
    detail::check(ox_tensor_to(live(), dev.get(), detail::stream_of(s), &t));
    return Tensor(t);
  }

  // ---- views: new tensors on the same memory
  Tensor slice(int dim, int64_t start, int64_t stop, int64_t step = 1) const {
    return view([&](ox_tensor *t) { return ox_tensor_slice(live(), dim, start, stop, step, t); });
  }
  Tensor reshape(const std::vector<int64_t> &shape) const {
    return view([&](ox_tensor *t) { return ox_tensor_reshape(live(), static_cast<int>(shape.size()), shape.data(), t); });
  }
  Tensor permute(const std::vector<int> &perm) const {
    if (static_cast<int>(perm.size()) != ndim())
      detail::fail(OX_ERR_INVALID_ARGUMENT, "permute: " + std::to_string(perm.size()) +
                                                " dims for a tensor of " + std::to_string(ndim()));
    return view([&](ox_tensor *t) { return ox_tensor_permute(live(), perm.data(), t); });
  }
  Tensor transpose(int dim0, int dim1) const {
    return view([&](ox_tensor *t) { return ox_tensor_transpose(live(), dim0, dim1, t); });
  }
  Tensor broadcast_to(const std::vector<int64_t> &shape) const {
    return view([&](ox_tensor *t) { return ox_tensor_broadcast_to(live(), static_cast<int>(shape.size()), shape.data(), t); });
  }
  // A tile kernel's output: this tensor cut into tiles of `tile`.
  Tensor partition(const std::vector<int64_t> &tile) const {
    return view([&](ox_tensor *t) { return ox_tensor_partition(live(), static_cast<int>(tile.size()), tile.data(), t); });
  }
  // The tile grid of a partition (empty for a tensor that is not one).
  std::vector<int64_t> partition_grid() const {
    int64_t g[OX_MAX_DIMS];
    int n = ox_tensor_partition_grid(live(), g);
    return std::vector<int64_t>(g, g + n);
  }

  // ---- properties
  ox_dtype dtype() const { return ox_tensor_dtype(live()); }
  int ndim() const { return ox_tensor_ndim(live()); }
  std::vector<int64_t> shape() const {
    const int64_t *p = ox_tensor_shape(live());
    return std::vector<int64_t>(p, p + ndim());
  }
  std::vector<int64_t> strides() const { // in elements
    const int64_t *p = ox_tensor_strides(live());
    return std::vector<int64_t>(p, p + ndim());
  }
  int64_t numel() const { return ox_tensor_numel(live()); }
  size_t nbytes() const { return ox_tensor_nbytes(live()); }
  bool is_contiguous() const { return ox_tensor_is_contiguous(live()) != 0; }
  bool is_read_only() const { return ox_tensor_is_read_only(live()) != 0; }
  Device device() const { return Device(ox_tensor_device(live())); }
  void *data() const { return ox_tensor_data(live()); }
  ox_tensor get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }

private:
  // The handle, which must be set (a default-constructed or moved-from Tensor holds none).
  ox_tensor live() const {
    if (!h_)
      detail::fail(OX_ERR_INVALID_ARGUMENT, "oxide::Tensor: empty (default-constructed or moved-from)");
    return h_;
  }
  template <class T> void expect(const char *what) const {
    ox_dtype want = dtype_of<T>::value, have = dtype();
    if (want != have)
      detail::fail(OX_ERR_INVALID_ARGUMENT, std::string(what) + ": the tensor holds " +
                                                ox_dtype_name(have) + ", not " + ox_dtype_name(want));
  }
  // A view made by `make(&handle)`.
  template <class F> static Tensor view(F &&make) {
    ox_tensor t = nullptr;
    detail::check(make(&t));
    return Tensor(t);
  }
  ox_tensor h_ = nullptr;
};

// ---------------------------------------------------------------- launch arguments

namespace detail {
inline ox_arg arg(const Tensor &t) {
  if (!t)
    fail(OX_ERR_INVALID_ARGUMENT, "a launch argument is an empty oxide::Tensor (moved-from?)");
  return ox_arg_tensor(t.get());
}
inline ox_arg arg(ox_arg a) { return a; }
inline ox_arg arg(bool x) { return ox_arg_bool(x); }
inline ox_arg arg(float x) { return ox_arg_f32(x); }
inline ox_arg arg(double x) { return ox_arg_f64(x); }
inline ox_arg arg(half x) {
  ox_arg a = ox_arg_f64(static_cast<double>(static_cast<float>(x)));
  a.dtype = OX_F16;
  return a;
}
inline ox_arg arg(bfloat16 x) {
  ox_arg a = ox_arg_f64(static_cast<double>(static_cast<float>(x)));
  a.dtype = OX_BF16;
  return a;
}
// Integers by width and signedness, so that long and long long both work.
template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
ox_arg arg(T x) {
  ox_arg a{};
  a.kind = OX_ARG_SCALAR;
  if constexpr (std::is_signed_v<T>) {
    a.dtype = sizeof(T) == 1 ? OX_I8 : sizeof(T) == 2 ? OX_I16 : sizeof(T) == 4 ? OX_I32 : OX_I64;
    a.v.i = x;
  } else {
    a.dtype = sizeof(T) == 1 ? OX_U8 : sizeof(T) == 2 ? OX_U16 : sizeof(T) == 4 ? OX_U32 : OX_U64;
    a.v.u = x;
  }
  return a;
}
// True for an argument passed as a const Tensor (it must not be written).
template <class A> constexpr bool const_tensor() {
  return std::is_same_v<std::remove_reference_t<A>, const Tensor>;
}
} // namespace detail

// Half-precision scalars (converted by Oxide at launch).
inline ox_arg f16(double x) {
  ox_arg a = ox_arg_f64(x);
  a.dtype = OX_F16;
  return a;
}
inline ox_arg bf16(double x) {
  ox_arg a = ox_arg_f64(x);
  a.dtype = OX_BF16;
  return a;
}

struct Dim3 {
  Dim3(uint32_t x_ = 1, uint32_t y_ = 1, uint32_t z_ = 1) : x(x_), y(y_), z(z_) {}
  uint32_t x, y, z;
};

struct LaunchConfig {
  Dim3 grid, block;
  const Stream *stream = nullptr; // null: the device's default stream
  ox_launch_config c() const { return {{grid.x, grid.y, grid.z}, {block.x, block.y, block.z}}; }
  // For tile kernels: the partition gives the grid and the tile lowering the
  // block; a kernel whose only outputs are atomic tensors takes `grid`.
  static LaunchConfig tile(Dim3 grid = Dim3(0, 0, 0), const Stream *s = nullptr) {
    return {grid, Dim3(0, 0, 0), s};
  }
};

// ---------------------------------------------------------------- modules

class Module;
class Chain;

// A kernel shares ownership of its module, so it stays valid after the
// Module object is gone.
class Kernel {
public:
  // An empty kernel (to assign one to later); launching it fails.
  Kernel() = default;
  explicit operator bool() const { return h_ != nullptr; }
  // Queues a launch; argument, contract and limit errors fail at once. An
  // out-of-bounds access is reported once: on the CPU by the launch itself
  // (its kernel has run), on CUDA by a later launch of the same thread
  // (ox_launch_errors, which does not wait), Stream::synchronize() or a host
  // read, whichever comes first. A tensor the kernel writes may not be passed
  // as a const Tensor.
  template <class... Args> void launch(const LaunchConfig &cfg, Args &&...args) const {
    ox_kernel k = live();
    ox_arg a[sizeof...(Args) + 1] = {detail::arg(args)...};
    check_const({detail::const_tensor<Args>()...});
    ox_launch_config c = cfg.c();
    detail::check(ox_launch(k, detail::stream_of(cfg.stream), &c, a, static_cast<int>(sizeof...(Args))));
    detail::check(ox_launch_errors());
  }
  // Checks a launch without running it.
  template <class... Args> void check(const LaunchConfig &cfg, Args &&...args) const {
    ox_kernel k = live();
    ox_arg a[sizeof...(Args) + 1] = {detail::arg(args)...};
    check_const({detail::const_tensor<Args>()...});
    ox_launch_config c = cfg.c();
    detail::check(ox_launch_check(k, detail::stream_of(cfg.stream), &c, a, static_cast<int>(sizeof...(Args))));
  }
  std::string name() const { return ox_kernel_name(live()); }
  int num_params() const { return ox_kernel_num_params(live()); }
  // The parameters as written (name, kind, dtype, rank, writable).
  const std::vector<ox_param_info> &params() const {
    live();
    return shared_->params;
  }
  // True for a kernel that may make unchecked accesses or race (ox_kernel_is_unsafe).
  bool is_unsafe() const { return ox_kernel_is_unsafe(live()) != 0; }
  // A tile kernel's const generic that sizes no output (ox_kernel_set_generic).
  void set_generic(const std::string &name, int64_t value) const {
    detail::check(ox_kernel_set_generic(live(), name.c_str(), value));
  }
  // One tile configuration: values of const generics by name ({{"BM", 128}, {"BN", 256}}).
  using Candidate = std::vector<std::pair<std::string, int64_t>>;
  // Lets the runtime choose among tile configurations, measuring them at the
  // first launch of each new key (ox_kernel_set_candidates); {} clears them.
  void set_candidates(const std::vector<Candidate> &cands) const {
    std::vector<std::vector<ox_generic_value>> values;
    std::vector<ox_tile_candidate> c;
    for (const Candidate &cand : cands) {
      values.emplace_back();
      for (const auto &[name, v] : cand)
        values.back().push_back({name.c_str(), v});
    }
    for (const auto &v : values)
      c.push_back({v.data(), static_cast<int>(v.size())});
    detail::check(ox_kernel_set_candidates(live(), c.data(), static_cast<int>(c.size())));
  }
  // The candidate that launches with these arguments run (index into
  // set_candidates' list), or -1 when none is chosen yet (ox_kernel_tuned).
  template <class... Args> int tuned(Args &&...args) const {
    ox_arg a[sizeof...(Args) + 1] = {detail::arg(args)...};
    int index = -1;
    detail::check(ox_kernel_tuned(live(), a, static_cast<int>(sizeof...(Args)), &index));
    return index;
  }
  ox_kernel get() const { return h_; }

private:
  friend class Module;
  friend class Chain;
  struct Shared {
    std::shared_ptr<const void> module; // keeps the module (and so the kernel) alive
    std::vector<ox_param_info> params;  // read once
  };
  Kernel(ox_kernel h, std::shared_ptr<const void> mod) : h_(h), shared_(std::make_shared<Shared>()) {
    shared_->module = std::move(mod);
    int n = ox_kernel_num_params(h);
    for (int i = 0; i < n; i++) {
      ox_param_info p;
      detail::check(ox_kernel_param(h, i, &p));
      shared_->params.push_back(p);
    }
  }
  void check_const(std::initializer_list<bool> consts) const {
    size_t i = 0;
    for (bool c : consts) {
      if (c && i < shared_->params.size() && shared_->params[i].writable)
        detail::fail(OX_ERR_INVALID_ARGUMENT,
                     "kernel '" + name() + "', argument " + std::to_string(i + 1) + " ('" +
                         shared_->params[i].name + "'): the kernel writes it, but the oxide::Tensor is const");
      i++;
    }
  }
  ox_kernel live() const {
    if (!h_)
      detail::fail(OX_ERR_INVALID_ARGUMENT, "an empty oxide::Kernel (default-constructed or moved-from)");
    return h_;
  }
  ox_kernel h_ = nullptr;
  std::shared_ptr<Shared> shared_;
};

struct CompileOptions {
  std::string filename; // for diagnostics; "" = "<input>" (compile) or the path (compile_file)
  int sm = 0;           // CUDA architecture (80, 90...); 0 = the device's
  int opt_level = 0;    // 1..3; 0 = the default (3)
  bool no_cache = false;
};

class Module {
public:
  static Module compile(Device dev, std::string_view source, const CompileOptions &o = {}) {
    std::string text(source); // NUL-terminated for the C API
    return load(dev, o, [&](const ox_compile_options *opts, ox_module *m) {
      return ox_module_compile(dev.get(), text.c_str(), opts, m);
    });
  }
  static Module compile(Device dev, std::string_view source, std::string_view filename) {
    CompileOptions o;
    o.filename = filename;
    return compile(dev, source, o);
  }
  static Module compile_file(Device dev, std::string_view path, CompileOptions o = {}) {
    std::string p(path);
    if (o.filename.empty())
      o.filename = p;
    return load(dev, o, [&](const ox_compile_options *opts, ox_module *m) {
      return ox_module_compile_file(dev.get(), p.c_str(), opts, m);
    });
  }

  Kernel kernel(const std::string &name) const {
    ox_kernel k;
    detail::check(ox_module_get_kernel(h_->m, name.c_str(), &k));
    return Kernel(k, h_);
  }
  bool from_cache() const { return ox_module_from_cache(h_->m) != 0; }
  ox_module get() const { return h_->m; }

private:
  // liboxide keeps the options' filename pointer for later messages (bounds
  // errors, launch contracts) without copying it: it lives here with the module.
  struct Owner {
    ox_module m = nullptr;
    std::string filename;
    ~Owner() { ox_module_destroy(m); }
  };
  template <class F> static Module load(Device, const CompileOptions &o, F &&fn) {
    auto own = std::make_shared<Owner>();
    own->filename = o.filename;
    ox_compile_options opts{};
    opts.size = sizeof opts;
    opts.filename = own->filename.empty() ? nullptr : own->filename.c_str();
    opts.sm = o.sm;
    opts.opt_level = o.opt_level;
    opts.no_cache = o.no_cache;
    detail::check(fn(&opts, &own->m));
    return Module(std::move(own));
  }
  explicit Module(std::shared_ptr<Owner> h) : h_(std::move(h)) {}
  std::shared_ptr<Owner> h_;
};

// ---------------------------------------------------------------- chains

// Launches and copies recorded now and run later on a stream, in order; on
// CUDA captured once as a graph and replayed. It keeps the modules of its
// kernels alive (and, through Oxide, its tensors). Move-only.
class Chain {
public:
  explicit Chain(Device dev) { detail::check(ox_chain_create(dev.get(), &h_)); }
  Chain(Chain &&o) noexcept : h_(std::exchange(o.h_, nullptr)), kernels_(std::move(o.kernels_)) {}
  Chain &operator=(Chain &&o) noexcept {
    std::swap(h_, o.h_);
    std::swap(kernels_, o.kernels_);
    return *this;
  }
  Chain(const Chain &) = delete;
  Chain &operator=(const Chain &) = delete;
  ~Chain() { ox_chain_destroy(h_); } // before the modules go (kernels_ is destroyed after)

  template <class... Args> void launch(const Kernel &k, const LaunchConfig &cfg, Args &&...args) {
    k.live();
    k.check_const({detail::const_tensor<Args>()...});
    ox_arg a[sizeof...(Args) + 1] = {detail::arg(args)...};
    ox_launch_config c = cfg.c();
    detail::check(ox_chain_launch(h_, k.get(), &c, a, static_cast<int>(sizeof...(Args))));
    kernels_.push_back(k);
  }
  void copy(Tensor &dst, const Tensor &src) { detail::check(ox_chain_copy(h_, dst.get(), src.get())); }
  void run(const Stream *s = nullptr) { detail::check(ox_chain_run(h_, detail::stream_of(s))); }
  // CUDA: captures the chain as a graph on `s` (a stream from Device::stream()).
  void capture(const Stream &s) { detail::check(ox_chain_capture(h_, s.get())); }
  ox_chain get() const { return h_; }

private:
  ox_chain h_ = nullptr;
  std::vector<Kernel> kernels_;
};

// The text of one compilation stage (OX_EMIT_PTX, OX_EMIT_IR, ...); needs no device.
inline std::string emit(const std::string &source, ox_emit_kind kind,
                        ox_target target = OX_TARGET_DEFAULT, int sm = 0) {
  ox_compile_options o{};
  o.size = sizeof o;
  o.sm = sm;
  char *out = nullptr;
  detail::check(ox_emit(source.c_str(), &o, target, kind, &out));
  return detail::take(out);
}

} // namespace oxide

#endif // OXIDE_OXIDE_HPP
