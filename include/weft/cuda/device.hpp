/// @file
/// The GPU device (issue 28): an NVIDIA GPU as a weft::device, of type "GPU", named
/// `/job:localhost/replica:0/task:0/device:GPU:<ordinal>`.
///
/// - Memory: a bfc_allocator (core/bfc_allocator.hpp) over cudaMalloc'd regions, so that a
///   step's allocations neither call cudaMalloc nor synchronize the device; a memory limit of
///   the device's free memory at start (less 5 % for the libraries' own) or the session's
///   memory_limit_bytes when smaller; counts of bytes in use and their peak.
/// - Streams: kernels are enqueued in one compute stream, in the order the executor runs
///   them, so a node's inputs are ready when its kernels run and a buffer freed on the host
///   is reused only by work enqueued after it; copies run on their own host-to-device and
///   device-to-host streams, ordered against the compute stream by events.
/// - Pinned host memory (cudaHostAlloc'd, through a second bfc_allocator): copies to the host
///   land in it, and host tensors made from pinned_allocator() copy in without staging.
/// - cuBLAS and cuDNN handles on the compute stream (cuDNN's made on first use: creating it
///   loads its engines).
///
/// Host code, compiled by any C++ compiler with the toolkit's headers; including this header
/// registers the GPU's device factory, so that session_options::device_count = {{"GPU", 1}}
/// gives a session a GPU. No CUDA call is made before a session asks for a GPU (test programs
/// list their cases without a driver).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <weft/core/bfc_allocator.hpp>
#include <weft/core/tensor.hpp>
#include <weft/cuda/check.hpp>
#include <weft/framework/device_name.hpp>
#include <weft/runtime/device.hpp>

namespace weft::cuda {

/// How many GPUs the CUDA runtime sees, and why none when it sees none (no driver, no device).
inline device_factory::availability gpus_available() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return {0, std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e)};
  }
  if (n == 0) return {0, "the CUDA runtime sees no device"};
  return {n, ""};
}

/// Makes GPU `ordinal` the calling thread's current device while it lives.
class current_device {
 public:
  /// Makes GPU `ordinal` current (cudaSetDevice) when it is not already.
  explicit current_device(int ordinal) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    changed_ = previous_ != ordinal;
    if (changed_) check(cudaSetDevice(ordinal), "cudaSetDevice");
  }
  current_device(const current_device&) = delete;
  current_device& operator=(const current_device&) = delete;
  ~current_device() {
    if (changed_) (void)cudaSetDevice(previous_);  // no call a node when nothing changed
  }

 private:
  int previous_ = 0;
  bool changed_ = false;
};

/// Events that order one stream of a GPU after the work enqueued so far on another, kept
/// for reuse: cudaStreamWaitEvent takes the state an event recorded when it is called, and
/// later records of the event do not change that wait (CUDA Runtime API, cudaEventRecord),
/// so an event is free again once its wait is enqueued, and a copy costs no
/// cudaEventCreate and cudaEventDestroy (about 0.5 us each on the H200 machine's host).
/// One event is never recorded by two threads at once: each order() takes its own.
class event_pool {
 public:
  event_pool() = default;
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;
  /// Destroys the kept events (the GPU that made them current, as gpu_device's destructor
  /// leaves it).
  ~event_pool() {
    for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);
  }

  /// Makes `later` wait for the work enqueued so far on `earlier` (their GPU current).
  void order(cudaStream_t later, cudaStream_t earlier) {
    cudaEvent_t e = take();
    const cudaError_t recorded = cudaEventRecord(e, earlier);
    const cudaError_t waited = recorded == cudaSuccess ? cudaStreamWaitEvent(later, e, 0) : recorded;
    if (waited == cudaSuccess) give(e);
    else (void)cudaEventDestroy(e);  // an event whose record or wait failed is not reused
    check(waited, "ordering two streams (cudaEventRecord, cudaStreamWaitEvent)");
  }
  /// How many events are kept (made and not in use).
  std::size_t kept() const {
    std::lock_guard lock(mu_);
    return free_.size();
  }

 private:
  cudaEvent_t take() {
    {
      std::lock_guard lock(mu_);
      if (!free_.empty()) {
        cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
      }
    }
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return e;
  }
  void give(cudaEvent_t e) noexcept {
    std::lock_guard lock(mu_);
    try {
      free_.push_back(e);
    } catch (...) {
      (void)cudaEventDestroy(e);
    }
  }

  mutable std::mutex mu_;
  std::vector<cudaEvent_t> free_;
};

/// Bad input that kernels find on the device (a label or an index out of range), reported
/// when the host next waits for the device: each kind of report (a node and what it checks)
/// has a slot of two int64 in mapped pinned memory that kernels write through
/// (launch.hpp); check() throws the first report found, naming the node, and clears them.
class error_slots {
 public:
  static constexpr int capacity = 1024;  ///< report kinds the slots hold
  error_slots() {
    check(cudaHostAlloc(reinterpret_cast<void**>(&slots_), sizeof(std::int64_t) * 2 * capacity,
                        cudaHostAllocMapped | cudaHostAllocPortable),
          "allocating the error slots (cudaHostAlloc)");
    std::memset(slots_, 0, sizeof(std::int64_t) * 2 * capacity);
  }
  error_slots(const error_slots&) = delete;
  error_slots& operator=(const error_slots&) = delete;
  ~error_slots() { (void)cudaFreeHost(slots_); }

  /// How a slot's value is written: an integer, or the bits of a double.
  enum class value_kind { integer, float64_bits };
  /// The slot for reports whose message is `message` followed by the offending value; one
  /// message, one slot (the kernels of one node share it across executables).
  std::int64_t* claim(const std::string& message, value_kind kind = value_kind::integer) {
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < messages_.size(); ++i)
      if (messages_[i] == message) return slots_ + 2 * i;
    if (messages_.size() == capacity) return slots_ + 2 * (capacity - 1);  // the last is shared when all are taken
    messages_.push_back(message);
    kinds_.push_back(kind);
    return slots_ + 2 * (messages_.size() - 1);
  }
  /// Throws invalid_argument for the first slot written since the last check, after clearing
  /// every written slot. Call it only when the device has finished the kernels that write them.
  void check_reports(const std::string& device) {
    std::string report;
    {
      std::lock_guard lock(mu_);
      for (std::size_t i = 0; i < messages_.size(); ++i) {
        volatile std::int64_t* slot = slots_ + 2 * i;
        if (slot[0] == 0) continue;
        if (report.empty()) {
          const std::int64_t v = slot[1];
          if (kinds_[i] == value_kind::float64_bits) {
            double d = 0;
            std::memcpy(&d, &v, sizeof d);
            std::ostringstream text;
            text << d;
            report = messages_[i] + text.str();
          } else {
            report = messages_[i] + std::to_string(v);
          }
        }
        slot[1] = 0;
        slot[0] = 0;
      }
    }
    if (!report.empty())
      fail(error_code::invalid_argument, report, " (found on ", device, " by a kernel of this or an earlier step)");
  }

 private:
  std::int64_t* slots_ = nullptr;
  std::mutex mu_;
  std::vector<std::string> messages_;
  std::vector<value_kind> kinds_;
};

namespace detail {

class device_regions final : public region_source {
 public:
  explicit device_regions(int ordinal) : ordinal_(ordinal) {}
  void* allocate_region(std::size_t bytes) noexcept override {
    if (cudaSetDevice(ordinal_) != cudaSuccess) return (void)cudaGetLastError(), nullptr;
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) return (void)cudaGetLastError(), nullptr;
    return p;
  }
  void free_region(void* p, std::size_t) noexcept override {
    if (cudaSetDevice(ordinal_) == cudaSuccess) (void)cudaFree(p);
  }
  weft::memory_space space() const noexcept override { return weft::memory_space::device; }
  std::string name() const override { return "GPU:" + std::to_string(ordinal_) + " memory"; }

 private:
  int ordinal_;
};

class pinned_regions final : public region_source {
 public:
  void* allocate_region(std::size_t bytes) noexcept override {
    void* p = nullptr;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) return (void)cudaGetLastError(), nullptr;
    return p;
  }
  void free_region(void* p, std::size_t) noexcept override { (void)cudaFreeHost(p); }
  weft::memory_space space() const noexcept override { return weft::memory_space::host; }
  std::string name() const override { return "pinned host memory"; }
};

struct stream_deleter {
  void operator()(CUstream_st* s) const noexcept { (void)cudaStreamDestroy(s); }
};
using stream_ptr = std::unique_ptr<CUstream_st, stream_deleter>;

inline stream_ptr make_stream(const char* what) {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), what);
  return stream_ptr(s);
}

}  // namespace detail

/// Pinned host memory shared by every GPU device of the process (cudaHostAllocPortable): at
/// most a quarter of the machine's memory. Host tensors made from it copy to and from GPUs
/// without staging.
inline bfc_allocator& pinned_allocator() {
  static auto* instance = new bfc_allocator(  // never destroyed: tensors may outlive main's locals
      std::make_unique<detail::pinned_regions>(),
      bfc_options{.memory_limit = std::max<std::size_t>(cpu_allocator::physical_memory_bytes() / 4, std::size_t(64) << 20),
                  .initial_region_bytes = std::size_t(16) << 20});
  return *instance;
}

/// The caching allocator of GPU `ordinal`'s memory: one per GPU for the process, never
/// destroyed, as the CPU devices' allocators are (tensors, the variables of a shared resource
/// manager and fetched values may outlive the device and the session that made them). Its
/// limit is the GPU's free memory when it is first made, less 5 %; a session's
/// memory_limit_bytes is a limited_allocator over it.
inline bfc_allocator& gpu_memory(int ordinal) {
  static std::mutex mu;
  static auto* table = new std::map<int, bfc_allocator*>;  // never destroyed, like the allocators
  std::lock_guard lock(mu);
  bfc_allocator*& a = (*table)[ordinal];
  if (!a) {
    const current_device here(ordinal);
    std::size_t free_bytes = 0, total = 0;
    check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
    a = new bfc_allocator(std::make_unique<detail::device_regions>(ordinal),
                          bfc_options{.memory_limit = free_bytes / 20 * 19, .initial_region_bytes = std::size_t(64) << 20});
  }
  return *a;
}

/// One matrix product's geometry, as cuBLASLt's column-major call sees it (the row-major
/// product C = op(A) op(B) is C^T = op(B)^T op(A)^T): the key of a kept plan.
struct lt_geometry {
  cudaDataType_t type;                ///< the operands' and the result's type
  cublasOperation_t op_first;         ///< op(B)^T's transpose
  cublasOperation_t op_second;        ///< op(A)^T's transpose
  std::int64_t rows;                  ///< the result's rows (N)
  std::int64_t cols;                  ///< the result's columns (M)
  std::int64_t inner;                 ///< the inner dim (K)
  std::int64_t ld_first;              ///< the stored rows' length of B
  std::int64_t ld_second;             ///< the stored rows' length of A
  std::int64_t batch;                 ///< strided batches (1: one product)
  std::int64_t stride_first;          ///< B's batch stride in elements (0 for one product)
  std::int64_t stride_second;         ///< A's batch stride in elements (0 for one product)
  std::int64_t stride_result;         ///< the result's batch stride in elements (0 for one product)
  std::uint32_t alignment;            ///< the pointers' and strides' common alignment in bytes (at most 256)
  /// What the output pass adds: CUBLASLT_EPILOGUE_DEFAULT (nothing), _BIAS (a bias per row of
  /// the column-major result: per column of the row-major product) or _RELU_BIAS.
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  /// The bias pointer's alignment in bytes (at most 256; 0 without an epilogue): cuBLASLt's
  /// heuristics choose by it.
  std::uint32_t bias_alignment = 0;
  /// Geometries order member by member (a map's key).
  auto operator<=>(const lt_geometry&) const = default;
};

/// cuBLASLt's descriptors of one geometry and the algorithm its heuristics chose for it,
/// asked once (the heuristics cost microseconds of host time a call inside cublasGemmEx).
/// usable() is false where cuBLASLt offers no algorithm: the caller takes cublasGemmEx.
class lt_plan {
 public:
  /// The plan of geometry `g` with at most `workspace_bytes` of workspace; `bias`, a bias
  /// of g's bias_alignment where g has an epilogue (the heuristics read its alignment).
  lt_plan(cublasLtHandle_t lt, const lt_geometry& g, std::size_t workspace_bytes, const void* bias = nullptr) {
    try {
      describe(lt, g, workspace_bytes, bias);
    } catch (...) {
      release();  // the descriptors made before the failing call (no destructor runs)
      throw;
    }
  }
  lt_plan(const lt_plan&) = delete;
  lt_plan& operator=(const lt_plan&) = delete;
  ~lt_plan() { release(); }

  /// Whether cuBLASLt has an algorithm for the geometry.
  bool usable() const noexcept { return usable_; }
  /// Enqueues result = alpha op(first) op(second) + beta result on `stream` (column-major),
  /// then the geometry's epilogue with `bias` (its rows' values; null without an epilogue).
  /// The bias pointer is an attribute of the shared descriptor: hold the library mutex.
  void run(cublasLtHandle_t lt, const void* alpha, const void* first, const void* second, const void* beta, void* result,
           const void* bias, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) const {
    if (bias)
      check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
            "cublasLtMatmulDescSetAttribute");
    check(cublasLtMatmul(lt, op_, alpha, first, first_, second, second_, beta, result, result_, result, result_, &algo_,
                         workspace, workspace_bytes, stream),
          "cublasLtMatmul");
  }

 private:
  /// Makes the descriptors of geometry g and asks the heuristics for an algorithm.
  void describe(cublasLtHandle_t lt, const lt_geometry& g, std::size_t workspace_bytes, const void* bias) {
    const bool f64 = g.type == CUDA_R_64F;
    check(cublasLtMatmulDescCreate(&op_, f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F, f64 ? CUDA_R_64F : CUDA_R_32F),
          "cublasLtMatmulDescCreate");
    check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &g.op_first, sizeof g.op_first),
          "cublasLtMatmulDescSetAttribute");
    check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &g.op_second, sizeof g.op_second),
          "cublasLtMatmulDescSetAttribute");
    if (g.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      // The bias in the result's type. The heuristics do not read it, but choose by its
      // pointer's alignment (cublasLt.h). An attribute refused leaves the plan unusable: the
      // caller adds the bias in passes of its own.
      const std::int32_t bias_type = g.type;
      cublasStatus_t set = cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue, sizeof g.epilogue);
      if (set == CUBLAS_STATUS_SUCCESS)
        set = cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type);
      if (set == CUBLAS_STATUS_SUCCESS)
        set = cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
      if (set != CUBLAS_STATUS_SUCCESS) return;
    }
    // The stored matrices, column-major: B^T is rows x inner (transposed: inner x rows), A^T
    // inner x cols (cols x inner), the result rows x cols.
    const bool t1 = g.op_first == CUBLAS_OP_T, t2 = g.op_second == CUBLAS_OP_T;
    layout(first_, g.type, t1 ? g.inner : g.rows, t1 ? g.rows : g.inner, g.ld_first, g.batch, g.stride_first);
    layout(second_, g.type, t2 ? g.cols : g.inner, t2 ? g.inner : g.cols, g.ld_second, g.batch, g.stride_second);
    layout(result_, g.type, g.rows, g.cols, g.rows, g.batch, g.stride_result);
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const std::uint64_t bytes = workspace_bytes;
    cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof bytes);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulPreferenceSetAttribute(pref, attr, &g.alignment, sizeof g.alignment);
    cublasLtMatmulHeuristicResult_t found{};
    int count = 0;
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulAlgoGetHeuristic(lt, op_, first_, second_, result_, result_, pref, 1, &found, &count);
    (void)cublasLtMatmulPreferenceDestroy(pref);
    usable_ = s == CUBLAS_STATUS_SUCCESS && count > 0 && found.state == CUBLAS_STATUS_SUCCESS;
    if (usable_) algo_ = found.algo;
  }
  /// Destroys the descriptors made so far.
  void release() noexcept {
    for (cublasLtMatrixLayout_t l : {first_, second_, result_})
      if (l) (void)cublasLtMatrixLayoutDestroy(l);
    if (op_) (void)cublasLtMatmulDescDestroy(op_);
  }
  static void layout(cublasLtMatrixLayout_t& l, cudaDataType_t type, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                     std::int64_t batch, std::int64_t stride) {
    check(cublasLtMatrixLayoutCreate(&l, type, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols), ld),
          "cublasLtMatrixLayoutCreate");
    if (batch == 1) return;
    const auto count = static_cast<std::int32_t>(batch);
    check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
          "cublasLtMatrixLayoutSetAttribute");
    check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
          "cublasLtMatrixLayoutSetAttribute");
  }

  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t first_ = nullptr, second_ = nullptr, result_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  bool usable_ = false;
};

/// A GPU as a weft device: its memory through a BFC allocator, a compute stream and streams
/// for transfers, cuBLAS and cuDNN handles, a host device for host-side kernels, and the
/// slots kernels report bad input in.
class gpu_device final : public device {
 public:
  /// GPU `ordinal`, its host-side work on `host_threads` threads, at most `memory_limit`
  /// bytes of its memory for this device's tensors (0: all of gpu_memory(ordinal)'s).
  gpu_device(int ordinal, int host_threads, std::size_t memory_limit = 0)
      : ordinal_(ordinal),
        parsed_(device_name::local("GPU", ordinal)),
        name_(parsed_.str()),
        host_device_(host_threads),
        memory_(gpu_memory(ordinal)),
        limit_(memory_limit ? limited_allocator::create(memory_, memory_limit) : nullptr) {
    const current_device here(ordinal_);
    check(cudaGetDeviceProperties(&properties_, ordinal_), "cudaGetDeviceProperties");
    compute_ = detail::make_stream("creating the compute stream");
    to_device_ = detail::make_stream("creating the host-to-device stream");
    to_host_ = detail::make_stream("creating the device-to-host stream");
    check(cublasCreate(&blas_), "cublasCreate");
    const cublasStatus_t set = cublasSetStream(blas_, compute_.get());
    if (set != CUBLAS_STATUS_SUCCESS) {
      (void)cublasDestroy(blas_);
      check(set, "cublasSetStream");
    }
  }
  gpu_device(const gpu_device&) = delete;
  gpu_device& operator=(const gpu_device&) = delete;
  ~gpu_device() override {
    (void)cudaSetDevice(ordinal_);
    (void)cudaDeviceSynchronize();
    if (dnn_) (void)cudnnDestroy(dnn_);
    lt_plans_.clear();
    lt_workspace_ = tensor();
    if (lt_) (void)cublasLtDestroy(lt_);
    (void)cublasDestroy(blas_);
  }

  const std::string& name() const noexcept override { return name_; }
  const device_name& parsed_name() const noexcept override { return parsed_; }
  std::string type() const override { return "GPU"; }
  allocator& get_allocator() const noexcept override {
    return limit_ ? static_cast<allocator&>(*limit_) : memory_;
  }
  std::size_t bytes_in_use() const noexcept override { return memory_.get_stats().bytes_in_use; }
  std::size_t peak_bytes_in_use() const noexcept override { return memory_.get_stats().peak_bytes_in_use; }
  void reset_peak() const noexcept override { memory_.reset_peak(); }
  const cpu_context& cpu() const noexcept override { return host_device_.cpu(); }

  /// A copy of host tensor `host` in the GPU's memory, ready for work enqueued on the compute
  /// stream after this returns.
  tensor copy_from_host(const tensor& host) const override {
    if (host.memory_space() != weft::memory_space::host)
      fail(error_code::invalid_argument, name_, ": copy_from_host of a tensor in ", to_string(host.memory_space()), " memory");
    if (host.dtype() == dtype::string)
      fail(error_code::invalid_argument, name_, ": a string tensor lives in host memory; ", host.shape(),
           " strings cannot be copied to a GPU");
    tensor out(host.dtype(), host.shape(), get_allocator());
    const std::size_t bytes = host.bytes();
    if (bytes == 0) return out;
    // A pageable source goes through a pinned buffer (an asynchronous copy from pageable
    // memory is staged by the driver anyway); a pinned one is copied directly.
    tensor staging;
    const void* from = host.raw_data();
    if (!is_pinned(host)) {
      try {
        staging = tensor(host.dtype(), host.shape(), pinned_allocator());
        std::memcpy(staging.raw_data(), host.raw_data(), bytes);
        from = staging.raw_data();
      } catch (const error&) {
        // No pinned memory left: the driver stages the pageable copy itself.
      }
    }
    const current_device here(ordinal_);
    // The destination may be a buffer the compute stream's pending work still reads.
    events_.order(to_device_.get(), compute_.get());
    check(cudaMemcpyAsync(out.raw_data(), from, bytes, cudaMemcpyHostToDevice, to_device_.get()), "cudaMemcpyAsync (host to device)");
    events_.order(compute_.get(), to_device_.get());
    check(cudaStreamSynchronize(to_device_.get()), "copying to the GPU (cudaStreamSynchronize)");
    return out;
  }

  /// A copy of `t` (in this GPU's memory) in pinned host memory, once the work enqueued
  /// before it has written it.
  tensor copy_to_host(const tensor& t) const override {
    if (t.memory_space() == weft::memory_space::host) return t.copy();
    tensor out;
    try {
      out = tensor(t.dtype(), t.shape(), pinned_allocator());
    } catch (const error&) {
      out = tensor(t.dtype(), t.shape());  // pageable, when no pinned memory is left
    }
    const std::size_t bytes = t.bytes();
    if (bytes == 0) {  // nothing to copy, but the kernels that made it may have found bad input
      synchronize();
      return out;
    }
    const current_device here(ordinal_);
    events_.order(to_host_.get(), compute_.get());
    check(cudaMemcpyAsync(out.raw_data(), t.raw_data(), bytes, cudaMemcpyDeviceToHost, to_host_.get()), "cudaMemcpyAsync (device to host)");
    check(cudaStreamSynchronize(to_host_.get()), "copying from the GPU (cudaStreamSynchronize): an earlier kernel may have failed");
    errors_.check_reports(name_);
    return out;
  }

  std::optional<speed_figures> speed() const override {
    int clock_khz = 0, memory_khz = 0, bus_bits = 0;
    (void)cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, ordinal_);
    (void)cudaDeviceGetAttribute(&memory_khz, cudaDevAttrMemoryClockRate, ordinal_);
    (void)cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, ordinal_);
    (void)cudaGetLastError();
    // 128 float32 lanes a multiprocessor, two flops a fused multiply-add; double data rate.
    const double flops = 2.0 * 128 * properties_.multiProcessorCount * (clock_khz > 0 ? clock_khz * 1e3 : 1.5e9);
    const double bandwidth = memory_khz > 0 && bus_bits > 0 ? 2.0 * memory_khz * 1e3 * bus_bits / 8 : 1e12;
    return speed_figures{flops, bandwidth, 5e-6};  // about a kernel launch and its bookkeeping
  }

  /// The CUDA device ordinal.
  int ordinal() const noexcept { return ordinal_; }
  /// The GPU's properties (cudaGetDeviceProperties).
  const cudaDeviceProp& properties() const noexcept { return properties_; }
  /// The stream kernels are enqueued on.
  cudaStream_t stream() const noexcept { return compute_.get(); }
  /// The cuBLAS and cuDNN handles, on the compute stream; hold library_mutex() while using
  /// them (a handle is not to be used by two threads at once).
  cublasHandle_t blas() const noexcept { return blas_; }
  /// The cuDNN handle, made on first use (see blas()).
  cudnnHandle_t dnn() const {
    std::call_once(dnn_once_, [this] {
      const current_device here(ordinal_);
      check(cudnnCreate(&dnn_), "cudnnCreate");
      check(cudnnSetStream(dnn_, compute_.get()), "cudnnSetStream");
    });
    return dnn_;
  }
  /// The plan of a matrix product's geometry through cuBLASLt, made on first use (the handle
  /// and a workspace of lt_workspace_limit bytes of this device's memory with it, none where
  /// that memory is short); null where cuBLASLt has no algorithm for it. Hold
  /// library_mutex(); a plan lives as long as the device, or until 4,096 others are kept.
  /// `bias`: the bias of the call where g has an epilogue (its alignment is g's).
  const lt_plan* lt_plan_for(const lt_geometry& g, const void* bias = nullptr) const {
    if (!lt_) {
      const current_device here(ordinal_);
      check(cublasLtCreate(&lt_), "cublasLtCreate");
      try {
        lt_workspace_ = tensor(dtype::uint8, shape{static_cast<std::int64_t>(lt_workspace_limit)}, get_allocator());
      } catch (const error&) {
        // No room for a workspace: cuBLASLt picks among the algorithms that need none.
      }
    }
    auto found = lt_plans_.find(g);
    if (found == lt_plans_.end()) {
      if (lt_plans_.size() >= 4096) lt_plans_.clear();
      found = lt_plans_.emplace(g, std::make_unique<lt_plan>(lt_, g, lt_workspace_.bytes(), bias)).first;
    }
    return found->second->usable() ? found->second.get() : nullptr;
  }
  /// Runs `plan` (from lt_plan_for) on the compute stream with the workspace, its epilogue
  /// with `bias` (null: a plan without one). Hold library_mutex().
  void run_lt(const lt_plan& plan, const void* alpha, const void* first, const void* second, const void* beta,
              void* result, const void* bias = nullptr) const {
    plan.run(lt_, alpha, first, second, beta, result, bias, lt_workspace_.bytes() ? lt_workspace_.raw_data() : nullptr,
             lt_workspace_.bytes(), compute_.get());
  }
  /// The cuBLASLt workspace a device asks for: 32 MiB, what NVIDIA advises for Hopper.
  static constexpr std::size_t lt_workspace_limit = std::size_t(32) << 20;
  /// Held while the cuBLAS or cuDNN handle is used (library_call).
  std::mutex& library_mutex() const noexcept { return library_mutex_; }
  /// Waits for every kernel and copy enqueued so far; reports a kernel's failure.
  void synchronize() const {
    const current_device here(ordinal_);
    check(cudaStreamSynchronize(compute_.get()), "synchronizing the compute stream");
    errors_.check_reports(name_);
  }
  /// How many events for ordering the copies' streams are kept for reuse (event_pool).
  std::size_t ordering_events_kept() const { return events_.kept(); }
  /// Where kernels report bad input (error_slots).
  error_slots& errors() const noexcept { return errors_; }
  /// A copy of `t` (in this GPU's memory) in it, enqueued on the compute stream.
  tensor copy_on_device(const tensor& t) const {
    tensor out(t.dtype(), t.shape(), get_allocator());
    if (t.bytes() == 0) return out;
    const current_device here(ordinal_);
    check(cudaMemcpyAsync(out.raw_data(), t.raw_data(), t.bytes(), cudaMemcpyDeviceToDevice, compute_.get()),
          "cudaMemcpyAsync (device to device)");
    return out;
  }
  /// A CPU device for the host-side kernels a GPU runs (shape arithmetic, TensorFlow's
  /// HostMemory kernels): its allocator is host memory, its threads the GPU's host threads.
  const cpu_device& host() const noexcept { return host_device_; }
  /// The GPU memory allocator's counts (in use, peak, reserved).
  bfc_allocator::stats memory_stats() const { return memory_.get_stats(); }

 private:
  static bool is_pinned(const tensor& t) noexcept {
    const allocator* a = t.buffer_allocator();
    return a && &a->underlying() == &pinned_allocator();
  }

  int ordinal_;
  device_name parsed_;
  std::string name_;
  cpu_device host_device_;
  bfc_allocator& memory_;
  memory_limit_ptr limit_;
  mutable error_slots errors_;
  cudaDeviceProp properties_{};
  detail::stream_ptr compute_, to_device_, to_host_;
  cublasHandle_t blas_ = nullptr;
  mutable cudnnHandle_t dnn_ = nullptr;
  mutable std::once_flag dnn_once_;
  mutable std::mutex library_mutex_;
  mutable cublasLtHandle_t lt_ = nullptr;                                 ///< under library_mutex_
  mutable tensor lt_workspace_;                                           ///< under library_mutex_
  mutable std::map<lt_geometry, std::unique_ptr<lt_plan>> lt_plans_;    ///< under library_mutex_
  mutable event_pool events_;  ///< for the copies' stream orderings; destroyed first, its GPU current
};

/// The GPU of a kernel's context (a GPU kernel runs only on one), made the calling thread's
/// current device: the kernels launched next go to its streams (the executor's threads run
/// nodes of every device).
inline const gpu_device& gpu_of(const device& d) {
  const auto* g = dynamic_cast<const gpu_device*>(&d);
  if (!g) fail(error_code::internal, "a GPU kernel runs on ", d.name(), ", which is not a GPU");
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != g->ordinal()) check(cudaSetDevice(g->ordinal()), "cudaSetDevice");
  return *g;
}

namespace detail {
inline const bool gpu_factory_registered = [] {
  device_factory f;
  f.available = [] { return gpus_available(); };
  f.create = [](int index, int threads, std::size_t limit) -> std::unique_ptr<device> {
    return std::make_unique<gpu_device>(index, threads, limit);
  };
  return device_factory_registry::global().add("GPU", std::move(f));
}();
}  // namespace detail

}  // namespace weft::cuda
