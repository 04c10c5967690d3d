/// @file
/// tensor: a dtype, a shape and a reference-counted, 64-byte-aligned buffer from a
/// device's allocator. Copies share the buffer; reshape() and slice() are zero-copy views.
/// The buffer's header (count, allocator, size) is apart from its data, which the allocator
/// places in its memory space: host memory for the CPU devices. The element accessors
/// (data, flat, to_vector, copy, debug_string) read host memory.
/// Kernels never write into a buffer another tensor can see: outputs are fresh buffers,
/// which is what makes sharing by reference count safe across concurrent steps.
/// A string tensor's buffer holds std::string objects (host memory only): made empty with the
/// buffer, destroyed with it, copied element by element; its bytes are never memcpy'd.
#pragma once

#include <atomic>
#include <cstring>
#include <initializer_list>
#include <new>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <weft/core/allocator.hpp>
#include <weft/core/checked.hpp>
#include <weft/core/dtype.hpp>
#include <weft/core/error.hpp>
#include <weft/core/shape.hpp>

namespace weft {

namespace detail {

struct buffer;

/// Freed buffer headers kept by each thread for its next tensors: a header is an allocation
/// apart from its data (device memory can back the data, and the data's allocator decides
/// where it lives), and a fresh `new` per tensor would cost the executor a malloc and a free
/// per output. The list is plain data, so it may be used at any time of the thread's life;
/// a guard with a destructor frees it when the thread ends and turns it off.
struct buffer_header_cache {
  static constexpr int keep = 256;
  buffer* head = nullptr;
  int count = 0;
  bool closed = false;
};
inline thread_local buffer_header_cache header_cache;  // NOLINT: per-thread by design

/// A cache line of its own: steps on several threads count references to headers made one
/// after the other, which would share lines if packed.
struct alignas(buffer_alignment) buffer {
  std::atomic<int> refs{1};
  allocator* alloc = nullptr;
  std::size_t bytes = 0;
  void* data = nullptr;
  std::size_t strings = 0;      ///< std::string objects constructed in data (a string tensor's)
  buffer* next_free = nullptr;  ///< in a thread's cache of free headers

  static buffer* create(allocator& alloc, std::size_t bytes) {
    buffer* b = take_header();
    try {
      b->data = alloc.allocate(bytes);
    } catch (...) {
      give_header(b);
      throw;
    }
    b->refs.store(1, std::memory_order_relaxed);
    b->alloc = &alloc;
    b->bytes = bytes;
    b->strings = 0;
    return b;
  }
  /// Constructs n empty strings in data (which holds room for them); noexcept: an empty
  /// std::string allocates nothing.
  void construct_strings(std::size_t n) noexcept {
    auto* p = static_cast<std::string*>(data);
    for (std::size_t i = 0; i < n; ++i) new (p + i) std::string();
    strings = n;
  }
  void ref() noexcept { refs.fetch_add(1, std::memory_order_relaxed); }
  void unref() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      if (strings) {
        auto* p = static_cast<std::string*>(data);
        for (std::size_t i = 0; i < strings; ++i) p[i].~basic_string();
      }
      alloc->deallocate(data, bytes);
      give_header(this);
    }
  }

 private:
  struct cache_guard {
    cache_guard() = default;
    cache_guard(const cache_guard&) = delete;
    cache_guard& operator=(const cache_guard&) = delete;
    ~cache_guard() {
      buffer_header_cache& c = header_cache;
      c.closed = true;
      while (c.head) delete std::exchange(c.head, c.head->next_free);
      c.count = 0;
    }
  };
  static buffer* take_header() {
    if constexpr (!cpu_allocator::caches_buffers) return new buffer;  // ASan sees every header's use after free
    buffer_header_cache& c = header_cache;
    if (c.head) {
      --c.count;
      return std::exchange(c.head, c.head->next_free);
    }
    if (!c.closed) {
      thread_local cache_guard guard;  // frees the cache when this thread ends
      (void)guard;
    }
    return new buffer;
  }
  static void give_header(buffer* b) noexcept {
    buffer_header_cache& c = header_cache;
    if (!cpu_allocator::caches_buffers || c.closed || c.count >= buffer_header_cache::keep) {
      delete b;
      return;
    }
    b->next_free = c.head;
    c.head = b;
    ++c.count;
  }
};

}  // namespace detail

/// Copies `bytes` bytes of elements of dtype t from src to dst (apart): memcpy for the plain
/// dtypes, element by element for strings (std::string objects are never copied as bytes).
/// The data-movement kernels that admit strings (ConcatV2, Split, Slice, Tile, GatherV2) and
/// the queues' batches copy through it.
inline void copy_element_bytes(void* dst, const void* src, std::size_t bytes, dtype t) {
  if (t == dtype::string) {
    auto* to = static_cast<std::string*>(dst);
    const auto* from = static_cast<const std::string*>(src);
    for (std::size_t i = 0, n = bytes / sizeof(std::string); i < n; ++i) to[i] = from[i];
  } else if (bytes) {
    std::memcpy(dst, src, bytes);
  }
}

/// An n-dimensional array of one dtype (whitepaper §2): a dtype, a shape and a reference-
/// counted buffer from an allocator. Copies and views (reshape, slice) share the buffer;
/// copy() makes a buffer of its own. Element access is checked against the dtype
/// (`data<float>()` of an int32 tensor is an error). The default tensor is invalid (no
/// buffer).
class tensor {
 public:
  /// An invalid tensor: no dtype, shape or buffer (valid() is false).
  tensor() = default;

  /// An uninitialized tensor of `type` and `s` from `alloc`; for bool and numbers,
  /// callers fill it before anyone else sees it. A string tensor's elements are empty
  /// strings, and its allocator must be of host memory.
  tensor(weft::dtype type, weft::shape s, allocator& alloc = cpu_allocator::global())
      : dtype_(type), shape_(std::move(s)) {
    if (type == weft::dtype::invalid) fail(error_code::invalid_argument, "tensor: invalid dtype");
    if (type == weft::dtype::string && alloc.space() != weft::memory_space::host)
      fail(error_code::invalid_argument, "tensor: a string tensor lives in host memory, not ", to_string(alloc.space()), " memory");
    buf_ = detail::buffer::create(alloc, checked_byte_size(shape_.num_elements(), size_of(type), "tensor"));
    data_ = buf_->data;
    if (type == weft::dtype::string) buf_->construct_strings(static_cast<std::size_t>(shape_.num_elements()));
  }

  /// Shares o's buffer (no element is copied).
  tensor(const tensor& o) noexcept : dtype_(o.dtype_), shape_(o.shape_), buf_(o.buf_), data_(o.data_) {
    if (buf_) buf_->ref();
  }
  /// Takes o's buffer; o becomes invalid.
  tensor(tensor&& o) noexcept
      : dtype_(o.dtype_), shape_(std::move(o.shape_)), buf_(std::exchange(o.buf_, nullptr)),
        data_(std::exchange(o.data_, nullptr)) {}
  /// Assigned member by member, not by copy and swap: the shape's vector keeps its storage,
  /// so the executor's assignments of same-rank tensors allocate nothing.
  tensor& operator=(const tensor& o) noexcept {
    if (o.buf_) o.buf_->ref();  // first: o may be *this, or held only through it
    detail::buffer* old = std::exchange(buf_, o.buf_);
    dtype_ = o.dtype_;
    if (&o != this) shape_ = o.shape_;
    data_ = o.data_;
    if (old) old->unref();
    return *this;
  }
  /// Takes o's buffer, releasing this one's; o becomes invalid. The shapes' storage is
  /// exchanged, not freed: both keep theirs for the next assignment (the executor's slots
  /// and output entries).
  tensor& operator=(tensor&& o) noexcept {
    if (&o == this) return *this;
    detail::buffer* old = std::exchange(buf_, std::exchange(o.buf_, nullptr));
    dtype_ = o.dtype_;
    std::swap(shape_, o.shape_);
    o.shape_.clear();
    data_ = std::exchange(o.data_, nullptr);
    if (old) old->unref();
    return *this;
  }
  ~tensor() {
    if (buf_) buf_->unref();
  }
  /// Makes it invalid, as a default tensor, releasing its buffer; its shape keeps its
  /// storage, so a tensor assigned to it next allocates nothing for its dims.
  void reset() noexcept {
    if (detail::buffer* old = std::exchange(buf_, nullptr)) old->unref();
    dtype_ = dtype::invalid;
    shape_.clear();
    data_ = nullptr;
  }
  /// Exchanges dtype, shape and buffer with o.
  void swap(tensor& o) noexcept {
    std::swap(dtype_, o.dtype_);
    std::swap(shape_, o.shape_);
    std::swap(buf_, o.buf_);
    std::swap(data_, o.data_);
  }

  /// A tensor of shape s holding `values` (row-major); their count must be s's element count.
  template <element T>
  static tensor from_vector(const std::vector<T>& values, weft::shape s) {
    if (static_cast<std::int64_t>(values.size()) != s.num_elements())
      fail(error_code::invalid_argument, "tensor::from_vector: ", values.size(), " values for shape ", s,
           " (", s.num_elements(), " elements)");
    tensor t(dtype_of<T>, std::move(s));
    T* out = t.data<T>();
    for (std::size_t i = 0; i < values.size(); ++i) out[i] = values[i];
    return t;
  }
  /// A vector (rank 1) holding `values`.
  template <element T>
  static tensor from_vector(const std::vector<T>& values) {
    return from_vector(values, weft::shape{static_cast<std::int64_t>(values.size())});
  }
  /// A tensor of shape s from a braced list: `tensor::of<float>({2, 2}, {1, 2, 3, 4})`.
  template <element T>
  static tensor of(weft::shape s, std::initializer_list<T> values) {
    return from_vector(std::vector<T>(values), std::move(s));
  }
  /// A scalar (rank 0) holding value, of T's dtype.
  template <element T>
  static tensor scalar(T value) {
    tensor t(dtype_of<T>, weft::shape{});
    *t.data<T>() = value;
    return t;
  }
  /// A string scalar (tensor::scalar("path") or from a std::string).
  static tensor scalar(std::string_view value) {
    tensor t(weft::dtype::string, weft::shape{});
    t.data<std::string>()->assign(value);
    return t;
  }
  /// A tensor of shape s with every element `value`.
  template <element T>
  static tensor filled(weft::shape s, T value) {
    tensor t(dtype_of<T>, std::move(s));
    T* out = t.data<T>();
    for (std::int64_t i = 0, n = t.num_elements(); i < n; ++i) out[i] = value;
    return t;
  }
  /// Zeros (empty strings for a string tensor).
  static tensor zeros(weft::dtype type, shape s) {
    tensor t(type, std::move(s));
    if (type != weft::dtype::string && t.bytes()) std::memset(t.raw_data(), 0, t.bytes());
    return t;
  }

  /// Whether the tensor has a buffer (a default-constructed or moved-from one has none).
  bool valid() const noexcept { return buf_ != nullptr; }
  /// The element type.
  weft::dtype dtype() const noexcept { return dtype_; }
  /// The dimensions.
  const weft::shape& shape() const noexcept { return shape_; }
  /// How many dimensions (0 for a scalar).
  int rank() const noexcept { return shape_.rank(); }
  /// Dimension i's size (0 <= i < rank(); another i is an out_of_range error).
  std::int64_t dim(int i) const { return shape_.dim(i); }
  /// The product of the dimensions (1 for a scalar, 0 when a dimension is 0).
  std::int64_t num_elements() const noexcept { return shape_.num_elements(); }
  /// The elements' size in bytes (a string tensor: its std::string objects).
  std::size_t bytes() const noexcept {
    return static_cast<std::size_t>(num_elements()) * size_of(dtype_);  // within: checked when the buffer was made
  }
  /// The allocator the buffer came from, or null for an invalid tensor.
  allocator* buffer_allocator() const noexcept { return buf_ ? buf_->alloc : nullptr; }
  /// Where the buffer lives (its allocator's memory space); host for an invalid tensor.
  weft::memory_space memory_space() const noexcept { return buf_ ? buf_->alloc->space() : weft::memory_space::host; }
  /// Whether this and o are handles on one buffer (a copy or a view of the other).
  bool shares_buffer_with(const tensor& o) const noexcept { return buf_ && buf_ == o.buf_; }
  /// How many handles share the buffer (0 for an invalid tensor).
  int use_count() const noexcept { return buf_ ? buf_->refs.load(std::memory_order_relaxed) : 0; }
  /// Whether this is the only handle on its buffer (no copy or view shares it), so that
  /// writing through it changes no one else's value. Acquire: the reads of handles released
  /// on other threads happen before the caller writes.
  bool sole_owner() const noexcept { return buf_ && buf_->refs.load(std::memory_order_acquire) == 1; }

  /// The first element's address, untyped (device memory for a device's tensor).
  void* raw_data() const noexcept { return data_; }

  /// The elements as T*; T must be the tensor's dtype (checked).
  template <element T>
  T* data() const {
    check_type<T>();
    return static_cast<T*>(data_);
  }
  /// The elements as a span of T, in row-major order; T must be the dtype.
  template <element T>
  std::span<T> flat() const {
    return {data<T>(), static_cast<std::size_t>(num_elements())};
  }
  /// The one element of a one-element tensor (any rank); more or fewer is an error.
  template <element T>
  T scalar_value() const {
    if (num_elements() != 1)
      fail(error_code::invalid_argument, "tensor::scalar_value: tensor of shape ", shape_,
           " has ", num_elements(), " elements, not 1");
    return *data<T>();
  }
  /// The elements copied into a vector, in row-major order.
  template <element T>
  std::vector<T> to_vector() const {
    auto f = flat<T>();
    return std::vector<T>(f.begin(), f.end());
  }

  /// A view with shape s over the same buffer (no copy); the element counts must agree.
  tensor reshape(weft::shape s) const {
    if (s.num_elements() != num_elements())
      fail(error_code::invalid_argument, "tensor::reshape: cannot reshape ", shape_, " (", num_elements(),
           " elements) to ", s, " (", s.num_elements(), " elements)");
    tensor t(*this);
    t.shape_ = std::move(s);
    return t;
  }
  /// A view of rows [begin, end) along the first dim, over the same buffer (no copy).
  tensor slice(std::int64_t begin, std::int64_t end) const {
    if (rank() == 0) fail(error_code::invalid_argument, "tensor::slice: cannot slice a scalar");
    if (begin < 0 || end < begin || end > shape_[0])
      fail(error_code::out_of_range, "tensor::slice: rows [", begin, ", ", end, ") out of range for shape ",
           shape_);
    auto dims = shape_.dims();
    std::int64_t row = dims[0] ? num_elements() / dims[0] : 0;
    dims[0] = end - begin;
    tensor t(*this);
    t.shape_ = weft::shape(std::move(dims));
    t.data_ = static_cast<char*>(data_) + static_cast<std::size_t>(begin * row) * size_of(dtype_);  // within: rows of this tensor
    return t;
  }

  /// A deep copy with its own buffer, host memory to host memory (a device of its own memory
  /// copies through device::copy_to_host and copy_from_host).
  tensor copy(allocator& alloc = cpu_allocator::global()) const {
    if (memory_space() != weft::memory_space::host || alloc.space() != weft::memory_space::host)
      fail(error_code::invalid_argument, "tensor::copy: a ", dtype_, shape_, " tensor in ", to_string(memory_space()),
           " memory cannot be copied by the host into ", to_string(alloc.space()), " memory (",
           alloc.name(), "): its device copies it");
    tensor t(dtype_, shape_, alloc);
    copy_element_bytes(t.data_, data_, bytes(), dtype_);
    return t;
  }

  /// The dtype, the shape and the first max_values elements, as `tensor<float32[2,2]>{1, 2, 3, ...}`;
  /// `tensor<invalid>` for an invalid tensor.
  std::string debug_string(std::int64_t max_values = 8) const;

 private:
  template <class T>
  void check_type() const {
    if (dtype_of<T> != dtype_)
      fail(error_code::invalid_argument, "tensor: accessed a ", dtype_, " tensor as ", dtype_of<T>);
  }

  weft::dtype dtype_ = dtype::invalid;
  weft::shape shape_;
  detail::buffer* buf_ = nullptr;
  void* data_ = nullptr;
};

namespace detail {
/// A string as a C++ literal would write it: quoted, with quotes, backslashes and bytes
/// outside printable ASCII escaped (\n, \t, \xHH), the first 64 bytes of a longer one.
inline void print_string(std::ostream& out, const std::string& s) {
  static constexpr char hex[] = "0123456789abcdef";
  out << '"';
  for (std::size_t i = 0; i < s.size() && i < 64; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') out << '\\' << s[i];
    else if (c == '\n') out << "\\n";
    else if (c == '\t') out << "\\t";
    else if (c < 0x20 || c >= 0x7f) out << "\\x" << hex[c >> 4] << hex[c & 15];
    else out << s[i];
  }
  out << (s.size() > 64 ? "\"..." : "\"");
}

template <class T>
void print_value(std::ostream& out, const T& v) {
  if constexpr (std::is_same_v<T, bool>)
    out << (v ? "true" : "false");
  else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
    out << static_cast<float>(v);
  else if constexpr (sizeof(T) == 1)
    out << static_cast<int>(v);
  else if constexpr (std::is_same_v<T, std::string>)
    print_string(out, v);
  else
    out << v;
}
}  // namespace detail

inline std::string tensor::debug_string(std::int64_t max_values) const {
  std::ostringstream out;
  if (!valid()) return "tensor<invalid>";
  out << "tensor<" << dtype_ << shape_ << ">{";
  dispatcher<type_list<bool, std::int8_t, std::int16_t, std::int32_t, std::int64_t, std::uint8_t, std::uint16_t,
                       std::uint32_t, std::uint64_t, half, bfloat16, float, double, complex64, complex128, std::string>>::run(
      dtype_,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* p = static_cast<const T*>(data_);
        std::int64_t n = num_elements();
        for (std::int64_t i = 0; i < n && i < max_values; ++i) {
          if (i) out << ", ";
          detail::print_value(out, p[i]);
        }
        if (n > max_values) out << ", ...";
      },
      [] {});
  out << '}';
  return out.str();
}

/// Writes t.debug_string().
inline std::ostream& operator<<(std::ostream& out, const tensor& t) { return out << t.debug_string(); }

}  // namespace weft
