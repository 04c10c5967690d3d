// cpu_device: a device owns its allocator and runs kernels. Intra-op parallelism goes
// through Eigen's ThreadPoolDevice over the device's own pool, apart from the inter-op
// pool the executor schedules nodes on, so a kernel waiting on its shards never blocks
// the threads that run other nodes.
#pragma once

#include <weft/core/eigen_tensor.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <weft/core/allocator.hpp>

namespace weft {

class cpu_device {
 public:
  // memory_limit: the most bytes the buffers allocated through this device may hold at once
  // (0: no limit beyond the machine's).
  explicit cpu_device(int intra_op_threads, std::string name = "/job:localhost/replica:0/task:0/device:CPU:0",
                      std::size_t memory_limit = 0)
      : name_(std::move(name)),
        threads_(std::max(1, intra_op_threads)),
        pool_(threads_ > 1 ? std::make_unique<Eigen::ThreadPool>(threads_) : nullptr),
        eigen_(pool_ ? static_cast<Eigen::ThreadPoolInterface*>(pool_.get()) : &inline_pool_, threads_),
        limit_(memory_limit ? limited_allocator::create(cpu_allocator::global(), memory_limit) : nullptr) {}

  const std::string& name() const noexcept { return name_; }
  std::string type() const { return "CPU"; }
  allocator& get_allocator() const noexcept {
    return limit_ ? static_cast<allocator&>(*limit_) : cpu_allocator::global();
  }
  int num_threads() const noexcept { return threads_; }
  const Eigen::ThreadPoolDevice& eigen_device() const noexcept { return eigen_; }

  // Runs f(begin, end) over [0, n) in shards sized by Eigen's cost model; cost_per_unit
  // is roughly the cycles one unit takes. Returns when every shard is done. A shard that
  // throws does not unwind through Eigen's pool (whose barrier must outlive every shard, and
  // whose threads would terminate the process): the first exception is kept, the shards not
  // yet started are skipped, and it is rethrown here once all have finished.
  void parallel_for(std::int64_t n, double cost_per_unit,
                    const std::function<void(std::int64_t, std::int64_t)>& f) const {
    if (n <= 0) return;
    if (threads_ == 1 || n * cost_per_unit < 20000) return f(0, n);
    std::atomic<bool> failed{false};
    std::exception_ptr first;
    std::mutex mutex;
    eigen_.parallelFor(static_cast<Eigen::Index>(n), Eigen::TensorOpCost(0, 0, cost_per_unit),
                       [&](Eigen::Index b, Eigen::Index e) {
                         if (failed.load(std::memory_order_relaxed)) return;
                         try {
                           f(b, e);
                         } catch (...) {
                           std::lock_guard lock(mutex);
                           if (!first) first = std::current_exception();
                           failed.store(true, std::memory_order_relaxed);
                         }
                       });
    if (first) std::rethrow_exception(first);
  }

 private:
  // Runs scheduled work at once; stands in for a pool when there is one thread.
  struct inline_pool final : Eigen::ThreadPoolInterface {
    void Schedule(std::function<void()> fn) override { fn(); }
    int NumThreads() const override { return 1; }
    int CurrentThreadId() const override { return 0; }
  };

  std::string name_;
  int threads_;
  inline_pool inline_pool_;
  std::unique_ptr<Eigen::ThreadPool> pool_;
  Eigen::ThreadPoolDevice eigen_;
  memory_limit_ptr limit_;
};

inline int default_thread_count() {
  unsigned n = std::thread::hardware_concurrency();
  return n ? static_cast<int>(n) : 1;
}

}  // namespace weft
