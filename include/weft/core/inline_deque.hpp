/// @file
/// A double-ended queue of trivially copyable values that keeps its first N in the object
/// itself: a ring buffer that moves to the heap (doubling) only when it outgrows them. The
/// executor's queues of ready nodes, made and dropped several times a step, allocate nothing
/// for a step's usual handful of nodes, where a std::deque allocates its map and a block of
/// 512 bytes when it is made.
#pragma once

#include <bit>
#include <cstddef>
#include <iterator>
#include <memory>
#include <type_traits>

namespace weft {

namespace detail {
/// A random-access position in a ring (Q: the ring, const or not), counted from its front.
template <class Q, class T>
class ring_iterator {
 public:
  using iterator_category = std::random_access_iterator_tag;
  using value_type = std::remove_const_t<T>;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using pointer = T*;

  ring_iterator() = default;
  ring_iterator(Q* q, std::size_t i) : q_(q), i_(i) {}
  reference operator*() const { return (*q_)[i_]; }
  pointer operator->() const { return &(*q_)[i_]; }
  reference operator[](difference_type d) const { return (*q_)[i_ + static_cast<std::size_t>(d)]; }
  ring_iterator& operator++() { return ++i_, *this; }
  ring_iterator operator++(int) { return {q_, i_++}; }
  ring_iterator& operator--() { return --i_, *this; }
  ring_iterator operator--(int) { return {q_, i_--}; }
  ring_iterator& operator+=(difference_type d) { return i_ += static_cast<std::size_t>(d), *this; }
  ring_iterator& operator-=(difference_type d) { return i_ -= static_cast<std::size_t>(d), *this; }
  friend ring_iterator operator+(ring_iterator a, difference_type d) { return a += d; }
  friend ring_iterator operator+(difference_type d, ring_iterator a) { return a += d; }
  friend ring_iterator operator-(ring_iterator a, difference_type d) { return a -= d; }
  friend difference_type operator-(const ring_iterator& a, const ring_iterator& b) {
    return static_cast<difference_type>(a.i_) - static_cast<difference_type>(b.i_);
  }
  friend bool operator==(const ring_iterator& a, const ring_iterator& b) { return a.i_ == b.i_; }
  friend auto operator<=>(const ring_iterator& a, const ring_iterator& b) { return a.i_ <=> b.i_; }

 private:
  Q* q_ = nullptr;
  std::size_t i_ = 0;
};
}  // namespace detail

/// A ring buffer of T (trivially copyable) with room for N (a power of two) inside the object.
/// Neither copyable nor movable: it lives where it was made (a stack frame, a member).
template <class T, std::size_t N>
class inline_deque {
  static_assert(std::is_trivially_copyable_v<T>, "inline_deque holds trivially copyable values");
  static_assert(std::has_single_bit(N), "inline_deque's inline room is a power of two");

 public:
  using iterator = detail::ring_iterator<inline_deque, T>;                    ///< from the front
  using const_iterator = detail::ring_iterator<const inline_deque, const T>;  ///< from the front

  inline_deque() noexcept = default;
  inline_deque(const inline_deque&) = delete;
  inline_deque& operator=(const inline_deque&) = delete;
  ~inline_deque() { release(); }

  /// Whether it holds no value.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// How many values it holds.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// The i-th value from the front (i < size()).
  T& operator[](std::size_t i) noexcept { return data_[(head_ + i) & (capacity_ - 1)]; }
  /// The i-th value from the front (i < size()).
  const T& operator[](std::size_t i) const noexcept { return data_[(head_ + i) & (capacity_ - 1)]; }
  /// The first value (not empty()).
  T& front() noexcept { return (*this)[0]; }
  /// The last value (not empty()).
  T& back() noexcept { return (*this)[size_ - 1]; }

  /// Appends v (to the heap, twice the room, when the room is full).
  void push_back(const T& v) {
    if (size_ == capacity_) grow();
    std::construct_at(data_ + ((head_ + size_) & (capacity_ - 1)), v);
    ++size_;
  }
  /// Puts v before the first value.
  void push_front(const T& v) {
    if (size_ == capacity_) grow();
    head_ = (head_ + capacity_ - 1) & (capacity_ - 1);
    std::construct_at(data_ + head_, v);
    ++size_;
  }
  /// Inserts v before the i-th value (i <= size()), moving the values after it back.
  void insert(std::size_t i, const T& v) {
    push_back(v);
    for (std::size_t j = size_ - 1; j > i; --j) (*this)[j] = (*this)[j - 1];
    (*this)[i] = v;
  }
  /// Drops the first value (not empty()).
  void pop_front() noexcept {
    head_ = (head_ + 1) & (capacity_ - 1);
    --size_;
  }
  /// Drops the last value (not empty()).
  void pop_back() noexcept { --size_; }
  /// Empties the queue; memory taken from the heap stays for reuse.
  void clear() noexcept { head_ = size_ = 0; }

  /// The first position.
  iterator begin() noexcept { return {this, 0}; }
  /// Past the last position.
  iterator end() noexcept { return {this, size_}; }
  /// The first position.
  const_iterator begin() const noexcept { return {this, 0}; }
  /// Past the last position.
  const_iterator end() const noexcept { return {this, size_}; }

 private:
  /// Twice the room on the heap, the values in order from its start.
  void grow() {
    const std::size_t capacity = capacity_ * 2;
    T* data = std::allocator<T>{}.allocate(capacity);
    for (std::size_t i = 0; i < size_; ++i) std::construct_at(data + i, (*this)[i]);
    release();
    data_ = data, capacity_ = capacity, head_ = 0;
  }
  void release() noexcept {
    if (data_ != inline_data()) std::allocator<T>{}.deallocate(data_, capacity_);
  }
  T* inline_data() noexcept { return reinterpret_cast<T*>(storage_); }

  alignas(T) std::byte storage_[N * sizeof(T)];
  T* data_ = inline_data();
  std::size_t capacity_ = N;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace weft
