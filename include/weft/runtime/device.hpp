/// @file
/// Devices. A device has a full name (/job:J/replica:R/task:T/device:TYPE:N), a type, its own
/// allocator with counts of the bytes in use and their peak, its own threads, and copies of
/// tensors to and from host memory (framework/device_name.hpp parses and matches names). The runtime
/// knows devices only through this interface; a kernel gets the interface and the context its
/// device type needs (kernel_context::cpu(): a device's intra-op threads, as parallel_for and
/// as an Eigen device). cpu_device is the CPU's: intra-op parallelism goes through the
/// device's own intra_op_pool, apart from the inter-op pool the executor schedules nodes on;
/// a kernel's calling thread runs its blocks beside the pool's workers.
#pragma once

#include <weft/core/eigen_tensor.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <weft/core/allocator.hpp>
#include <weft/core/error.hpp>
#include <weft/core/function_ref.hpp>
#include <weft/core/tensor.hpp>
#include <weft/framework/device_name.hpp>
#include <weft/runtime/intra_op_pool.hpp>

namespace weft {

/// A device's intra-op threads, as CPU kernels use them: parallel_for, on weft's own pool
/// (intra_op_pool.hpp: the calling thread runs blocks beside the workers, which spin between
/// kernels), and an Eigen device for Eigen's tensor expressions in user kernels (its own
/// Eigen pool, made on first use; weft's kernels do not use it). One thread runs work
/// inline, with no pool. Not copyable or movable: the Eigen device points into it.
class cpu_context {
 public:
  /// A context of `threads` threads (at least 1; the caller is one of them).
  explicit cpu_context(int threads) : threads_(std::max(1, threads)), pool_(threads_) {}
  cpu_context(const cpu_context&) = delete;
  cpu_context& operator=(const cpu_context&) = delete;

  /// How many threads run a kernel's work, the caller's included.
  int num_threads() const noexcept { return threads_; }
  /// Eigen's device for tensor expressions (`.device(ctx.eigen_device())`), made on first use.
  const Eigen::ThreadPoolDevice& eigen_device() const {
    std::call_once(eigen_once_, [this] {
      if (threads_ > 1) eigen_pool_ = std::make_unique<Eigen::ThreadPool>(threads_);
      eigen_.emplace(eigen_pool_ ? static_cast<Eigen::ThreadPoolInterface*>(eigen_pool_.get()) : &inline_pool_,
                     threads_);
    });
    return *eigen_;
  }

  /// Counts the calling thread as running a kernel on this device while the scope lives
  /// (intra_op_pool::busy_scope): the executor's threads, so that split kernels leave cores
  /// to the kernels running beside them.
  [[nodiscard]] intra_op_pool::busy_scope count_busy() const { return intra_op_pool::busy_scope(pool_); }

  /// Runs f(begin, end) over [0, n) in blocks; cost_per_unit is roughly the cycles one unit
  /// takes, and work under about 32,000 cycles runs inline, blocks of at least 16,000 cycles
  /// otherwise, up to four a thread. Returns when every block is done. The first exception a
  /// block throws is rethrown here once every started block has finished (blocks not yet
  /// started are skipped).
  void parallel_for(std::int64_t n, double cost_per_unit,
                    function_ref<void(std::int64_t, std::int64_t)> f) const {
    if (n <= 0) return;
    const double total = static_cast<double>(n) * std::max(cost_per_unit, 0.0);
    const double most = static_cast<double>(std::min<std::int64_t>(n, 4 * std::int64_t{threads_}));
    const auto blocks = static_cast<std::int64_t>(std::min(most, total / 16000.0));
    if (threads_ == 1 || blocks < 2) return f(0, n);
    pool_.run(blocks, [&](std::int64_t b) { f(b * n / blocks, (b + 1) * n / blocks); });
  }

 private:
  /// Runs scheduled work at once; stands in for a pool when there is one thread.
  struct inline_pool final : Eigen::ThreadPoolInterface {
    void Schedule(std::function<void()> fn) override { fn(); }
    int NumThreads() const override { return 1; }
    int CurrentThreadId() const override { return 0; }
  };

  int threads_;
  mutable intra_op_pool pool_;
  mutable inline_pool inline_pool_;
  mutable std::once_flag eigen_once_;
  mutable std::unique_ptr<Eigen::ThreadPool> eigen_pool_;
  mutable std::optional<Eigen::ThreadPoolDevice> eigen_;
};

/// Where nodes run (whitepaper §3): a name, a type the kernel registry knows ("CPU",
/// "GPU"), an allocator and its memory counters, intra-op threads, and copies to and from
/// host memory.
class device {
 public:
  virtual ~device() = default;
  /// The full name, and its parts.
  virtual const std::string& name() const noexcept = 0;
  virtual const device_name& parsed_name() const noexcept = 0;  ///< see name()
  virtual std::string type() const = 0;  ///< "CPU", as the kernel registry names device types
  /// Where the buffers of the tensors its kernels make come from (within its memory limit).
  virtual allocator& get_allocator() const noexcept = 0;
  /// Bytes of its memory in use now, and their peak since the last reset_peak(), by every
  /// session that uses the device.
  virtual std::size_t bytes_in_use() const noexcept = 0;
  virtual std::size_t peak_bytes_in_use() const noexcept = 0;  ///< see bytes_in_use()
  virtual void reset_peak() const noexcept = 0;                 ///< see bytes_in_use()
  /// The device's own intra-op threads: all of a CPU kernel's work runs on them, and the
  /// host-side work of other device types' kernels.
  virtual const cpu_context& cpu() const noexcept = 0;
  int num_threads() const noexcept { return cpu().num_threads(); }  ///< cpu().num_threads()
  /// A copy of host tensor `host` in this device's memory, and of `t` (in this device's
  /// memory) in host memory.
  virtual tensor copy_from_host(const tensor& host) const = 0;
  virtual tensor copy_to_host(const tensor& t) const = 0;  ///< see copy_from_host()
  /// Whether its tensors live apart from host memory (a GPU's): the executor then copies
  /// feeds in and fetches, Sends and Switch predicates out.
  bool separate_memory() const noexcept { return get_allocator().space() != memory_space::host; }
  /// The figures the placer's cost model assumes for it; none: a CPU's, from its threads.
  struct speed_figures {
    double flops_per_second = 0;         ///< arithmetic throughput
    double memory_bytes_per_second = 0;  ///< memory bandwidth
    double node_overhead_seconds = 0;    ///< the fixed cost of running one node
  };
  /// The device's figures for the cost model, or none for the CPU's default.
  virtual std::optional<speed_figures> speed() const { return std::nullopt; }
};

/// A CPU device of this process: its own intra-op threads and allocator.
class cpu_device final : public device {
 public:
  /// The local CPU device `id` (`/job:localhost/replica:0/task:0/device:CPU:<id>`) with its own
  /// pool of intra_op_threads threads and the allocator cpu_allocator::of_device(id).
  /// memory_limit: the most bytes the buffers allocated through this device may hold at once
  /// (0: no limit beyond the machine's).
  explicit cpu_device(int intra_op_threads, int id = 0, std::size_t memory_limit = 0)
      : parsed_(device_name::local("CPU", id)),
        name_(parsed_.str()),
        base_(cpu_allocator::of_device(id)),
        context_(intra_op_threads),
        limit_(memory_limit ? limited_allocator::create(base_, memory_limit) : nullptr) {}

  const std::string& name() const noexcept override { return name_; }  ///< its full name
  const device_name& parsed_name() const noexcept override { return parsed_; }  ///< see name()
  std::string type() const override { return "CPU"; }  ///< "CPU"
  /// The device's allocator, within its memory limit.
  allocator& get_allocator() const noexcept override {
    return limit_ ? static_cast<allocator&>(*limit_) : base_;
  }
  std::size_t bytes_in_use() const noexcept override { return base_.bytes_in_use(); }  ///< see device
  std::size_t peak_bytes_in_use() const noexcept override { return base_.peak_bytes_in_use(); }  ///< see device
  void reset_peak() const noexcept override { base_.reset_peak(); }  ///< see device
  const cpu_context& cpu() const noexcept override { return context_; }  ///< its intra-op threads
  /// A copy into the device's allocator.
  tensor copy_from_host(const tensor& host) const override { return host.copy(get_allocator()); }
  /// A copy into the host's allocator.
  tensor copy_to_host(const tensor& t) const override { return t.copy(cpu_allocator::global()); }

 private:
  device_name parsed_;
  std::string name_;
  cpu_allocator& base_;
  cpu_context context_;
  memory_limit_ptr limit_;
};

/// Small integer tensors (int32 or int64 of at most 64 elements: shapes, axes, a few
/// indices) stay in host memory on every device, where the kernels that read their values
/// (Reshape's shape, a reduction's axes) find them without waiting for the device, as
/// TensorFlow's HostMemory arguments do; a device kernel that computes on one copies it in.
inline bool stays_in_host_memory(const tensor& t) noexcept {
  return (t.dtype() == dtype::int32 || t.dtype() == dtype::int64) && t.num_elements() <= 64;
}

/// The machine's hardware threads (1 when unknown): the default thread counts.
inline int default_thread_count() {
  unsigned n = std::thread::hardware_concurrency();
  return n ? static_cast<int>(n) : 1;
}

/// What a session needs to make a device of a type other than the CPU: how many the machine
/// has (with the reason when none), and the device with a given index. The GPU's
/// (weft/cuda/device.hpp) registers itself when a program includes it; sessions then ask for
/// GPUs through session_options::device_count. Tests register devices of their own.
struct device_factory {
  /// How many devices of the type the machine has, and why none.
  struct availability {
    int count = 0;         ///< how many
    std::string why_none;  ///< when count is 0: why (no driver, no device)
  };
  std::function<availability()> available;  ///< asks the machine
  /// The device with index `index` (0 to count - 1), whose host-side work runs on
  /// `host_threads` threads, with at most `memory_limit` bytes of its memory (0: its own).
  std::function<std::unique_ptr<device>(int index, int host_threads, std::size_t memory_limit)> create;
};

/// The device factories by type (the process's: global()).
class device_factory_registry {
 public:
  /// Registers the factory of device type `type` ("GPU"); the first registration of a type
  /// is kept.
  bool add(const std::string& type, device_factory f) {
    std::lock_guard lock(mu_);
    return factories_.try_emplace(type, std::move(f)).second;
  }
  /// The factory of `type`, or an error naming the types registered.
  device_factory find(const std::string& type) const {
    std::lock_guard lock(mu_);
    auto it = factories_.find(type);
    if (it != factories_.end()) return it->second;
    std::string known;
    for (const auto& [t, f] : factories_) known += (known.empty() ? "" : ", ") + t;
    fail(error_code::not_found, "no device factory for device type '", type, "' (registered: ",
         known.empty() ? std::string("none") : known, ")",
         type == "GPU" ? "; GPUs come with weft::cuda: include <weft/cuda/device.hpp>" : "");
  }
  /// The process's registry.
  static device_factory_registry& global() {
    static auto* instance = new device_factory_registry;  // never destroyed, as the other registries
    return *instance;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, device_factory> factories_;
};

}  // namespace weft
