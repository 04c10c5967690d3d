/// @file
/// Queues (whitepaper §4.6): state that outlives a step, through which steps hand tuples of
/// tensors to each other, so that input preparation runs ahead of computation. A queue holds
/// elements (a tensor per component, of the queue's dtypes and shapes) up to its capacity;
/// an enqueue that finds it full and a dequeue that finds it short wait, holding no thread:
/// each is an attempt the queue serves, in the order they came, as room or elements appear,
/// and then calls its `done` (outside the queue's lock). TensorFlow's semantics:
/// - enqueue on a closed queue fails (cancelled); close(true) also fails the enqueues that
///   wait; close(false) lets them finish as room appears;
/// - a dequeue that a closed queue cannot satisfy fails with out_of_range, which ends an
///   epoch: dequeue_many puts back what it had taken, dequeue_up_to returns what is left
///   when there is any;
/// - a waiting attempt whose step is cancelled fails with cancelled (a dequeue puts back what
///   it had taken), and the queue stays as it was.
/// Orders: first in first out; random shuffle (a seeded generator picks any element, and
/// while the queue is open only when more than min_after_dequeue remain); priority (the first
/// component an int64 scalar, the smallest first, ties in the order they came).
/// A queue is a resource (runtime/resource.hpp): the queue ops (kernels/cpu/data_flow.hpp)
/// keep it in the session's resource manager under its container and name.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/core/tensor.hpp>
#include <weft/runtime/kernel.hpp>
#include <weft/runtime/resource.hpp>

namespace weft {

using queue_tuple = std::vector<tensor>;  ///< one element: a tensor per component

/// A queue's order, components and bounds.
struct queue_options {
  /// In which order elements come out.
  enum class order { fifo, random_shuffle, priority };
  order kind = order::fifo;                ///< the order
  std::vector<dtype> component_types;      ///< at least one
  std::vector<partial_shape> shapes;       ///< one per component, or none: any shape
  std::int64_t capacity = -1;              ///< -1: no bound
  std::int64_t min_after_dequeue = 0;      ///< random_shuffle: elements kept while open
  std::uint64_t seed = 0;                  ///< random_shuffle's generator
  bool padded = false;                     ///< dequeue_many pads unknown dims (PaddingFIFOQueue)

  /// Whether every option equals o's (two graphs that name one shared queue must agree).
  bool same_as(const queue_options& o) const {
    return kind == o.kind && component_types == o.component_types && shapes == o.shapes && capacity == o.capacity &&
           min_after_dequeue == o.min_after_dequeue && seed == o.seed && padded == o.padded;
  }
  /// "fifo(float32[], int32[?]) capacity 10", for errors.
  std::string describe() const {
    static constexpr const char* kinds[] = {"fifo", "random_shuffle", "priority"};
    std::ostringstream out;
    out << (padded ? "padding_fifo" : kinds[static_cast<int>(kind)]) << '(';
    for (std::size_t i = 0; i < component_types.size(); ++i) {
      out << (i ? ", " : "") << component_types[i];
      if (i < shapes.size()) out << shapes[i];
    }
    out << ") capacity " << capacity;
    if (kind == order::random_shuffle) out << " min_after_dequeue " << min_after_dequeue << " seed " << seed;
    return out.str();
  }
};

/// A queue of tensor tuples (whitepaper §4.6), a session resource that the queue ops'
/// kernels use: enqueues wait for room and dequeues for elements without holding a
/// thread (callbacks), and both are cancelled with their step.
class queue final : public resource_base {
 public:
  static constexpr std::string_view kind_name = "queue";  ///< its kind, in messages
  std::string_view kind() const noexcept override { return kind_name; }

  /// Called once when an enqueue is done, with its error or null.
  using enqueue_done = std::function<void(std::exception_ptr error)>;
  /// Called once when a dequeue is done, with its error or null and the elements.
  using dequeue_done = std::function<void(std::exception_ptr error, std::vector<queue_tuple> elements)>;

  /// A queue named `name`; options that are not coherent are an invalid_argument error.
  queue(std::string name, queue_options o) : name_(std::move(name)), o_(std::move(o)), random_(o_.seed) {
    if (o_.component_types.empty()) fail(error_code::invalid_argument, "queue '", name_, "': needs at least one component");
    if (!o_.shapes.empty() && o_.shapes.size() != o_.component_types.size())
      fail(error_code::invalid_argument, "queue '", name_, "': ", o_.shapes.size(), " shapes for ", o_.component_types.size(),
           " components");
    if (o_.capacity == 0 || o_.capacity < -1)
      fail(error_code::invalid_argument, "queue '", name_, "': capacity must be positive or -1 (no bound), got ", o_.capacity);
    if (o_.min_after_dequeue < 0 || (o_.capacity > 0 && o_.min_after_dequeue >= o_.capacity))
      fail(error_code::invalid_argument, "queue '", name_, "': min_after_dequeue ", o_.min_after_dequeue,
           " must be at least 0 and below the capacity ", o_.capacity);
    if (o_.kind == queue_options::order::priority &&
        (o_.component_types[0] != dtype::int64 || (!o_.shapes.empty() && !o_.shapes[0].accepts(shape{}))))
      fail(error_code::invalid_argument, "queue '", name_, "': a priority queue's first component is an int64 scalar");
  }
  queue(const queue&) = delete;
  queue& operator=(const queue&) = delete;

  /// Its name.
  const std::string& name() const noexcept { return name_; }
  /// Its options.
  const queue_options& options() const noexcept { return o_; }

  /// Adds `elements` in order, waiting for room; `done` runs once with nullptr when the last
  /// is in, or with the error (a closed queue, a cancelled step). Elements of the wrong
  /// dtypes or shapes are an invalid_argument error naming the queue, before any goes in.
  void enqueue(std::vector<queue_tuple> elements, cancellation_manager* cancellation, enqueue_done done);

  /// Takes `n` elements, waiting for them; with up_to, fewer once the queue is closed (but at
  /// least one). `done` runs once with the elements, or with the error (out_of_range when a
  /// closed queue cannot give them, cancelled when the step is).
  void dequeue(std::int64_t n, bool up_to, cancellation_manager* cancellation, dequeue_done done) {
    if (n < 0) fail(error_code::invalid_argument, "queue '", name_, "': cannot dequeue ", n, " elements");
    std::vector<std::function<void()>> calls;
    {
      std::lock_guard lock(mutex_);
      auto& a = dequeues_.emplace_back();
      a.id = ++next_id_;
      a.wanted = n;
      a.up_to = up_to;
      a.done = std::move(done);
      watch(a, cancellation, calls);
      serve(calls);
    }
    for (auto& c : calls) c();
  }

  /// No more enqueues; with cancel_pending_enqueues, those waiting fail too. Dequeues that
  /// the elements left cannot satisfy fail with out_of_range.
  void close(bool cancel_pending_enqueues = false) {
    std::vector<std::function<void()>> calls;
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
      if (cancel_pending_enqueues)
        while (!enqueues_.empty()) finish_enqueue(enqueues_.begin(), closed_error(), calls);
      serve(calls);
    }
    for (auto& c : calls) c();
  }

  /// How many elements it holds.
  std::int64_t size() const {
    std::lock_guard lock(mutex_);
    return static_cast<std::int64_t>(count());
  }
  /// Whether it was closed.
  bool is_closed() const {
    std::lock_guard lock(mutex_);
    return closed_;
  }
  /// How many enqueues wait for room (for monitoring, and for a test that must know a step
  /// is blocked before it goes on).
  std::size_t waiting_enqueues() const {
    std::lock_guard lock(mutex_);
    return enqueues_.size();
  }
  /// How many dequeues wait for elements.
  std::size_t waiting_dequeues() const {
    std::lock_guard lock(mutex_);
    return dequeues_.size();
  }

 private:
  struct attempt {
    std::uint64_t id = 0;
    cancellation_manager* cancellation = nullptr;
    cancellation_manager::token token = 0;
  };
  struct enqueue_attempt : attempt {
    std::deque<queue_tuple> elements;  ///< still to go in
    enqueue_done done;
  };
  struct dequeue_attempt : attempt {
    std::int64_t wanted = 0;
    bool up_to = false;
    std::vector<queue_tuple> taken;
    dequeue_done done;
  };

  void check(const queue_tuple& e) const {
    const auto& types = o_.component_types;
    if (e.size() != types.size())
      fail(error_code::invalid_argument, "queue '", name_, "': an element of ", e.size(), " components for its ", types.size());
    for (std::size_t c = 0; c < e.size(); ++c) {
      if (!e[c].valid()) fail(error_code::invalid_argument, "queue '", name_, "': component ", c, " has no tensor");
      if (e[c].dtype() != types[c])
        fail(error_code::invalid_argument, "queue '", name_, "': component ", c, " is ", e[c].dtype(), ", not ", types[c]);
      if (!o_.shapes.empty() && !o_.shapes[c].accepts(e[c].shape()))
        fail(error_code::invalid_argument, "queue '", name_, "': component ", c, " has shape ", e[c].shape(), ", not ",
             o_.shapes[c]);
    }
  }
  std::exception_ptr closed_error() const {
    return std::make_exception_ptr(error(error_code::cancelled, "queue '" + name_ + "' is closed"));
  }

  /// Registers a's cancellation (an already cancelled step fails it at once).
  template <class A>
  void watch(A& a, cancellation_manager* cancellation, std::vector<std::function<void()>>& calls) {
    if (!cancellation) return;
    a.cancellation = cancellation;
    a.token = cancellation->register_callback([this, id = a.id] { cancel(id); });
    if (a.token == 0) {
      auto e = std::make_exception_ptr(error(error_code::cancelled, "queue '" + name_ + "': the step was cancelled"));
      if constexpr (std::is_same_v<A, enqueue_attempt>) finish_enqueue(std::prev(enqueues_.end()), e, calls);
      else finish_dequeue(std::prev(dequeues_.end()), e, calls);
    }
  }
  void cancel(std::uint64_t id);

  template <class It>
  void release(It it) {
    if (it->cancellation && it->token) it->cancellation->deregister(it->token);
  }
  /// Ends an enqueue attempt (nullptr: all its elements are in).
  void finish_enqueue(std::list<enqueue_attempt>::iterator it, std::exception_ptr e, std::vector<std::function<void()>>& calls) {
    release(it);
    calls.push_back([done = std::move(it->done), e] { done(e); });
    enqueues_.erase(it);
  }
  /// Ends a dequeue attempt: with its elements, or with an error (its elements go back).
  void finish_dequeue(std::list<dequeue_attempt>::iterator it, std::exception_ptr e, std::vector<std::function<void()>>& calls);

  /// Serves the attempts in order while any makes progress (the queue's lock held).
  void serve(std::vector<std::function<void()>>& calls);

  /// The order's storage.
  std::size_t count() const { return o_.kind == queue_options::order::priority ? by_priority_.size() : elements_.size(); }
  bool available() const {
    if (count() == 0) return false;
    if (o_.kind == queue_options::order::random_shuffle && !closed_)
      return static_cast<std::int64_t>(count()) > o_.min_after_dequeue;
    return true;
  }
  void push(queue_tuple e) {
    if (o_.kind == queue_options::order::priority) {
      const std::int64_t p = e[0].data<std::int64_t>()[0];
      by_priority_.emplace(std::make_pair(p, ++next_seq_), std::move(e));
    } else {
      elements_.push_back(std::move(e));
    }
  }
  queue_tuple pop();
  /// An element a failed dequeue had taken goes back where it will come out first (for a
  /// priority queue: before the others of its priority, after those put back before it).
  void put_back(queue_tuple e) {
    if (o_.kind == queue_options::order::priority) {
      const std::int64_t p = e[0].data<std::int64_t>()[0];
      by_priority_.emplace(std::make_pair(p, std::uint64_t{0}), std::move(e));  // before its equals
    } else {
      elements_.push_front(std::move(e));
    }
  }

  std::string name_;
  queue_options o_;
  mutable std::mutex mutex_;
  bool closed_ = false;
  std::deque<queue_tuple> elements_;                                             ///< fifo, random_shuffle
  std::multimap<std::pair<std::int64_t, std::uint64_t>, queue_tuple> by_priority_;  ///< priority: (priority, arrival)
  std::uint64_t next_seq_ = 0;
  std::mt19937_64 random_;
  std::uint64_t next_id_ = 0;
  std::list<enqueue_attempt> enqueues_;
  std::list<dequeue_attempt> dequeues_;
};

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE void queue::serve(std::vector<std::function<void()>>& calls) {
  for (bool progress = true; progress;) {
    progress = false;
    while (!enqueues_.empty()) {
      auto it = enqueues_.begin();
      while (!it->elements.empty() && (o_.capacity < 0 || count() < static_cast<std::size_t>(o_.capacity))) {
        push(std::move(it->elements.front()));
        it->elements.pop_front();
        progress = true;
      }
      if (!it->elements.empty()) break;
      finish_enqueue(it, nullptr, calls);
    }
    while (!dequeues_.empty()) {
      auto it = dequeues_.begin();
      while (static_cast<std::int64_t>(it->taken.size()) < it->wanted && available()) {
        it->taken.push_back(pop());
        progress = true;
      }
      if (static_cast<std::int64_t>(it->taken.size()) == it->wanted) {
        finish_dequeue(it, nullptr, calls);
        continue;
      }
      // Short. A closed queue gets no more: what is left (up_to), or the end of the input.
      if (!closed_ || !enqueues_.empty()) break;
      if (it->up_to && !it->taken.empty()) {
        finish_dequeue(it, nullptr, calls);
      } else {
        const std::string why = "queue '" + name_ + "' is closed and has " + std::to_string(count() + it->taken.size()) +
                                " elements, fewer than the " + std::to_string(it->wanted) + " asked for";
        finish_dequeue(it, std::make_exception_ptr(error(error_code::out_of_range, why)), calls);
      }
      progress = true;
    }
  }
}

WEFT_DETAIL_RUNTIME_INLINE void queue::finish_dequeue(std::list<dequeue_attempt>::iterator it, std::exception_ptr e, std::vector<std::function<void()>>& calls) {
  release(it);
  std::vector<queue_tuple> taken = std::move(it->taken);
  if (e) {  // back in the order they came out (a priority queue orders them itself)
    if (o_.kind == queue_options::order::priority)
      for (auto& t : taken) put_back(std::move(t));
    else
      for (auto t = taken.rbegin(); t != taken.rend(); ++t) put_back(std::move(*t));
    taken.clear();
  }
  calls.push_back([done = std::move(it->done), e, taken = std::move(taken)]() mutable { done(e, std::move(taken)); });
  dequeues_.erase(it);
}

WEFT_DETAIL_RUNTIME_INLINE queue_tuple queue::pop() {
  queue_tuple e;
  switch (o_.kind) {
    case queue_options::order::fifo:
      e = std::move(elements_.front());
      elements_.pop_front();
      break;
    case queue_options::order::random_shuffle: {
      const auto i = static_cast<std::size_t>(random_() % elements_.size());
      std::swap(elements_[i], elements_.back());
      e = std::move(elements_.back());
      elements_.pop_back();
      break;
    }
    case queue_options::order::priority: {
      auto first = by_priority_.begin();
      e = std::move(first->second);
      by_priority_.erase(first);
      break;
    }
  }
  return e;
}

WEFT_DETAIL_RUNTIME_INLINE void queue::cancel(std::uint64_t id) {
  std::vector<std::function<void()>> calls;
  {
    std::lock_guard lock(mutex_);
    auto e = std::make_exception_ptr(error(error_code::cancelled, "queue '" + name_ + "': the step was cancelled"));
    for (auto it = enqueues_.begin(); it != enqueues_.end(); ++it)
      if (it->id == id) {
        it->token = 0;  // its callback is running: nothing to deregister
        finish_enqueue(it, e, calls);
        break;
      }
    for (auto it = dequeues_.begin(); it != dequeues_.end(); ++it)
      if (it->id == id) {
        it->token = 0;
        finish_dequeue(it, e, calls);
        break;
      }
    serve(calls);  // a dequeue's elements went back; an enqueue's place freed the line
  }
  for (auto& c : calls) c();
}

WEFT_DETAIL_RUNTIME_INLINE void queue::enqueue(std::vector<queue_tuple> elements, cancellation_manager* cancellation, enqueue_done done) {
  for (const auto& e : elements) check(e);
  std::vector<std::function<void()>> calls;
  {
    std::lock_guard lock(mutex_);
    if (closed_) {
      calls.push_back([done, e = closed_error()] { done(e); });
    } else {
      auto& a = enqueues_.emplace_back();
      a.id = ++next_id_;
      a.elements.assign(std::make_move_iterator(elements.begin()), std::make_move_iterator(elements.end()));
      a.done = std::move(done);
      watch(a, cancellation, calls);
      serve(calls);
    }
  }
  for (auto& c : calls) c();
}
#endif

/// EnqueueMany's split: row i of every component as element i (views of the batch, no copy).
/// Every component needs a first dimension, the same for all.
inline std::vector<queue_tuple> unstack_elements(const std::vector<tensor>& components, const std::string& queue_name) {
  if (components.empty()) fail(error_code::invalid_argument, "queue '", queue_name, "': enqueue_many of no components");
  std::int64_t n = -1;
  for (std::size_t c = 0; c < components.size(); ++c) {
    const tensor& t = components[c];
    if (!t.valid() || t.rank() == 0)
      fail(error_code::invalid_argument, "queue '", queue_name, "': enqueue_many's component ", c,
           " needs a first dimension to split, got ", t.valid() ? t.shape() : shape{});
    if (n >= 0 && t.shape()[0] != n)
      fail(error_code::invalid_argument, "queue '", queue_name, "': enqueue_many's components have ", n, " and ",
           t.shape()[0], " rows (component ", c, ", shape ", t.shape(), ")");
    n = t.shape()[0];
  }
  std::vector<queue_tuple> out(static_cast<std::size_t>(n));
  for (const tensor& t : components) {
    const std::vector<std::int64_t> rest(t.shape().dims().begin() + 1, t.shape().dims().end());
    for (std::int64_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)].push_back(t.slice(i, i + 1).reshape(shape(rest)));
  }
  return out;
}

/// DequeueMany's batch: each component's elements stacked along a new first dimension. With
/// `pad` (PaddingFIFOQueue), elements of one rank and different sizes are padded with zeros
/// to the largest size in each dimension; without it their shapes must be equal. With no
/// elements, `shapes` gives each component's shape (unknown dimensions as 0).
std::vector<tensor> stack_elements(const std::vector<queue_tuple>& elements, const std::vector<dtype>& types,
                                   const std::vector<partial_shape>& shapes, bool pad, const std::string& queue_name);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<tensor> stack_elements(const std::vector<queue_tuple>& elements, const std::vector<dtype>& types,
                                                              const std::vector<partial_shape>& shapes, bool pad, const std::string& queue_name) {
  std::vector<tensor> out;
  const auto n = static_cast<std::int64_t>(elements.size());
  for (std::size_t c = 0; c < types.size(); ++c) {
    std::vector<std::int64_t> dims;
    if (n == 0) {
      if (c < shapes.size() && shapes[c].rank_known())
        for (auto d : shapes[c].dims()) dims.push_back(std::max<std::int64_t>(d, 0));
    } else {
      dims = elements[0][c].shape().dims();
      for (const auto& e : elements) {
        const shape& s = e[c].shape();
        if (s.rank() != static_cast<int>(dims.size()) || (!pad && s.dims() != dims))
          fail(error_code::invalid_argument, "queue '", queue_name, "': cannot batch component ", c, " of shapes ",
               elements[0][c].shape(), " and ", s, pad ? " (padding needs one rank)" : " (a padding queue pads them)");
        for (std::size_t k = 0; k < dims.size(); ++k) dims[k] = std::max(dims[k], s[static_cast<int>(k)]);
      }
    }
    std::vector<std::int64_t> batch_dims{n};
    batch_dims.insert(batch_dims.end(), dims.begin(), dims.end());
    tensor batch = tensor::zeros(types[c], shape(batch_dims));
    const std::size_t width = size_of(types[c]);
    const std::int64_t row_items = dims.empty() ? 1 : dims.back();
    std::int64_t element_items = 1;
    for (auto d : dims) element_items *= d;
    auto* to = static_cast<std::byte*>(batch.raw_data());
    for (std::int64_t i = 0; i < n; ++i) {
      const tensor& t = elements[static_cast<std::size_t>(i)][c];
      const auto* from = static_cast<const std::byte*>(t.raw_data());
      std::byte* base = to + static_cast<std::size_t>(i * element_items) * width;
      if (t.shape().dims() == dims) {  // no padding: one copy
        copy_element_bytes(base, from, t.bytes(), types[c]);
        continue;
      }
      // Row by row along the last dimension, each to its place in the padded layout.
      const shape& s = t.shape();
      const std::int64_t src_row = s.rank() ? s[s.rank() - 1] : 1, rows = s.rank() ? t.num_elements() / std::max<std::int64_t>(src_row, 1) : 1;
      if (src_row == 0) continue;
      std::vector<std::int64_t> index(dims.size() > 0 ? dims.size() - 1 : 0, 0);
      for (std::int64_t r = 0; r < rows; ++r) {
        std::int64_t offset = 0;  // in items, within the padded element
        for (std::size_t k = 0; k < index.size(); ++k) offset = offset * dims[k] + index[k];
        offset *= row_items;
        copy_element_bytes(base + static_cast<std::size_t>(offset) * width, from + static_cast<std::size_t>(r * src_row) * width,
                           static_cast<std::size_t>(src_row) * width, types[c]);
        for (std::size_t k = index.size(); k-- > 0;) {  // the next row's index
          if (++index[k] < s[static_cast<int>(k)]) break;
          index[k] = 0;
        }
      }
    }
    out.push_back(std::move(batch));
  }
  return out;
}
#endif

}  // namespace weft
