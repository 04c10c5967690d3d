#include "support/helpers.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

using namespace weft;

TEST_CASE("dtype names, sizes and traits") {
  CHECK(name(dtype::float32) == "float32");
  CHECK(parse_dtype("bfloat16") == dtype::bfloat16);
  CHECK(size_of(dtype::complex128) == 16);
  CHECK(size_of(dtype::boolean) == 1);
  STATIC_REQUIRE(dtype_of<half> == dtype::float16);
  STATIC_REQUIRE(dtype_of<std::uint16_t> == dtype::uint16);
  CHECK_THROWS_AS(parse_dtype("float8"), error);
}

TEST_CASE("shape rank, elements and validation") {
  shape s{2, 3, 4};
  CHECK(s.rank() == 3);
  CHECK(s.num_elements() == 24);
  CHECK(shape{}.num_elements() == 1);
  CHECK(shape{0, 5}.num_elements() == 0);
  test::require_error([] { shape{2, -1}; }, {"negative dimension -1"});
  partial_shape p{unknown_dim, 784};
  CHECK(p.accepts(shape{32, 784}));
  CHECK_FALSE(p.accepts(shape{32, 783}));
  CHECK_FALSE(p.accepts(shape{784}));
  CHECK(partial_shape::unknown_rank().accepts(shape{1, 2, 3}));
  // An unknown rank has no dims: weft's errors, not std::bad_optional_access.
  test::require_error([] { (void)partial_shape::unknown_rank().dims(); }, {"partial_shape::dims", "rank is unknown"});
  test::require_error([] { (void)partial_shape::unknown_rank().to_shape(); }, {"partial_shape::to_shape", "rank is unknown"});
  test::require_error([&] { (void)p.to_shape(); }, {"negative dimension"});
  CHECK(partial_shape{2, 3}.to_shape() == shape{2, 3});
  CHECK(partial_shape(std::vector<std::int64_t>{}).dims().empty());  // rank 0
}

TEST_CASE("tensors are 64-byte aligned and reference counted") {
  tensor t(dtype::float32, {3, 5});
  CHECK(reinterpret_cast<std::uintptr_t>(t.raw_data()) % 64 == 0);
  CHECK(t.use_count() == 1);
  {
    tensor u = t;
    CHECK(u.shares_buffer_with(t));
    CHECK(t.use_count() == 2);
  }
  CHECK(t.use_count() == 1);
  auto before = cpu_allocator::global().bytes_in_use();
  { tensor big(dtype::float64, {1000}); CHECK(cpu_allocator::global().bytes_in_use() >= before + 8000); }
  CHECK(cpu_allocator::global().bytes_in_use() == before);
}

TEST_CASE("assignment moves references and keeps values, to itself too") {
  const auto before = cpu_allocator::global().bytes_in_use();
  {
    tensor a = tensor::of<float>({2, 2}, {1, 2, 3, 4});
    tensor b = tensor::of<float>({3}, {5, 6, 7});
    tensor c;
    c = a;  // an empty tensor takes a's buffer
    CHECK(c.shares_buffer_with(a));
    CHECK(a.use_count() == 2);
    c = b;  // a's count drops, b's rises; the shape follows
    CHECK(a.use_count() == 1);
    CHECK(b.use_count() == 2);
    CHECK(c.shape() == shape{3});
    CHECK(c.to_vector<float>() == std::vector<float>{5, 6, 7});
    const tensor& self = c;
    c = self;  // self-assignment keeps the buffer and its count
    CHECK(b.use_count() == 2);
    CHECK(c.to_vector<float>() == std::vector<float>{5, 6, 7});
    tensor& alias = c;
    c = std::move(alias);  // self-move leaves the value too
    CHECK(c.to_vector<float>() == std::vector<float>{5, 6, 7});
    c = std::move(a);  // takes a's buffer without a new reference; a is empty
    CHECK(c.use_count() == 1);
    CHECK(b.use_count() == 1);
    CHECK(c.shape() == shape{2, 2});
    CHECK(c.to_vector<float>() == std::vector<float>{1, 2, 3, 4});
    CHECK(a.use_count() == 0);
    // The last holder assigned its own buffer's only other view: the buffer lives on.
    tensor v = c;
    c = tensor();
    CHECK(v.use_count() == 1);
    c = v;
    v = c;
    CHECK(v.use_count() == 2);
    CHECK(v.to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  }
  CHECK(cpu_allocator::global().bytes_in_use() == before);
}

TEST_CASE("the cpu allocator counts its peak, and a peak can start again") {
  cpu_allocator a;
  void* p = a.allocate(1000);
  void* q = a.allocate(3000);
  a.deallocate(q, 3000);
  CHECK(a.bytes_in_use() == 1000);
  CHECK(a.peak_bytes_in_use() == 4000);
  a.reset_peak();
  CHECK(a.peak_bytes_in_use() == 1000);
  a.deallocate(a.allocate(500), 500);
  CHECK(a.peak_bytes_in_use() == 1500);
  a.deallocate(p, 1000);
  CHECK(a.peak_bytes_in_use() == 1500);
}

TEST_CASE("the cpu allocator reuses large freed buffers, within its limit") {
  cpu_allocator a(std::size_t(3) << 20);  // room for three 1 MiB blocks
  const std::size_t mib = std::size_t(1) << 20;
  void* p = a.allocate(mib + 100);
  CHECK(reinterpret_cast<std::uintptr_t>(p) % buffer_alignment == 0);
  CHECK(a.bytes_in_use() == mib + 100);
  a.deallocate(p, mib + 100);
  CHECK(a.bytes_in_use() == 0);
  if (cpu_allocator::caches_buffers) {
    const std::size_t page = cpu_allocator::page_bytes;
    CHECK(reinterpret_cast<std::uintptr_t>(p) % page == 0);  // a mapping of its own, not a block of malloc's
    CHECK(a.bytes_cached() == mib + page);  // large sizes round up to whole pages
    void* q = a.allocate(mib + 4000);       // the same rounded size: the same block
    CHECK(q == p);
    CHECK(a.bytes_cached() == 0);
    a.deallocate(q, mib + 4000);
    // Small buffers and buffers over the limit are not kept.
    a.deallocate(a.allocate(1000), 1000);
    a.deallocate(a.allocate(4 * mib), 4 * mib);
    CHECK(a.bytes_cached() == mib + page);
    // A full cache drops its oldest blocks.
    void* b1 = a.allocate(2 * mib);
    void* b2 = a.allocate(2 * mib);
    a.deallocate(b1, 2 * mib);  // over the limit: the oldest block goes
    a.deallocate(b2, 2 * mib);  // and again: b2 alone is left
    CHECK(a.bytes_cached() == 2 * mib);
    a.release_cached();
    CHECK(a.bytes_cached() == 0);
    // From 64 KiB on, buffers are kept (rounded to pages); below, not.
    const std::size_t small = cpu_allocator::cache_min_bytes;
    CHECK(small == 64 * 1024);
    void* s1 = a.allocate(small + 10);
    CHECK(reinterpret_cast<std::uintptr_t>(s1) % page == 0);
    std::memset(s1, 0x5a, small + 10);  // all of it writable
    a.deallocate(s1, small + 10);
    CHECK(a.bytes_cached() == small + page);
    CHECK(a.allocate(small + 20) == s1);
    a.deallocate(s1, small + 20);
    a.deallocate(a.allocate(small - 64), small - 64);
    CHECK(a.bytes_cached() == small + page);
    a.release_cached();
  } else {
    CHECK(a.bytes_cached() == 0);  // under ASan nothing is kept
  }
  // A tensor draws from the allocator it is given and gives its buffer back.
  {
    tensor t(dtype::float32, {512, 1024}, a);
    CHECK(a.bytes_in_use() >= 2 * mib);
  }
  CHECK(a.bytes_in_use() == 0);
}

TEST_CASE("tensor conversions from and to std::vector") {
  auto t = tensor::of<int>({2, 2}, {1, 2, 3, 4});
  CHECK(t.dtype() == dtype::int32);
  CHECK(t.to_vector<int>() == std::vector<int>{1, 2, 3, 4});
  CHECK(tensor::scalar(2.5).scalar_value<double>() == 2.5);
  test::require_error([] { tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}); }, {"3 values", "[2,2]"});
  test::require_error([&] { t.data<float>(); }, {"int32", "float32"});
  auto e = tensor(dtype::float32, {0, 3});
  CHECK(e.num_elements() == 0);
  CHECK(e.to_vector<float>().empty());
}

TEST_CASE("reshape and slice are zero-copy views") {
  auto t = tensor::of<float>({3, 2}, {0, 1, 2, 3, 4, 5});
  auto r = t.reshape({2, 3});
  CHECK(r.shares_buffer_with(t));
  CHECK(r.shape() == shape{2, 3});
  auto s = t.slice(1, 3);
  CHECK(s.shares_buffer_with(t));
  CHECK(s.to_vector<float>() == std::vector<float>{2, 3, 4, 5});
  CHECK(t.slice(3, 3).num_elements() == 0);
  test::require_error([&] { t.reshape({4}); }, {"cannot reshape [3,2]", "[4]"});
  test::require_error([&] { t.slice(2, 4); }, {"out of range"});
  test::require_error([] { tensor::scalar(1.0f).slice(0, 1); }, {"scalar"});
}

TEST_CASE("conversions from and to Eigen tensors, both layouts") {
  Eigen::Tensor<float, 2, Eigen::RowMajor> rm(2, 3);
  Eigen::Tensor<float, 2> cm(2, 3);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) rm(i, j) = cm(i, j) = static_cast<float>(10 * i + j);
  auto a = from_eigen(rm), b = from_eigen(cm);
  std::vector<float> expect{0, 1, 2, 10, 11, 12};
  CHECK(a.to_vector<float>() == expect);
  CHECK(b.to_vector<float>() == expect);
  auto back = to_eigen<float, 2, Eigen::ColMajor>(b);
  CHECK(back(1, 2) == 12.0f);
  CHECK(eigen_map<float, 2>(a)(1, 0) == 10.0f);
  test::require_error([&] { eigen_map<float, 3>(a); }, {"rank 2, not 3"});
}

namespace {
// Host memory that says it is a device's: what an accelerator's allocator looks like to a
// tensor. Records each allocation.
class recording_allocator final : public allocator {
 public:
  std::string name() const override { return "recording"; }
  void* allocate(std::size_t bytes) override {
    void* p = std::aligned_alloc(buffer_alignment, bytes ? (bytes + buffer_alignment - 1) / buffer_alignment * buffer_alignment : buffer_alignment);
    std::lock_guard lock(mu);
    blocks.emplace_back(p, bytes);
    ++live;
    return p;
  }
  void deallocate(void* p, std::size_t bytes) noexcept override {
    std::lock_guard lock(mu);
    freed.emplace_back(p, bytes);
    --live;
    std::free(p);
  }
  weft::memory_space space() const noexcept override { return weft::memory_space::device; }

  std::mutex mu;
  std::vector<std::pair<void*, std::size_t>> blocks, freed;
  int live = 0;
};
}  // namespace

TEST_CASE("a reset tensor is a default one, its buffer released, and takes the next assignment") {
  cpu_allocator a;
  tensor t(dtype::float32, {3, 4}, a);
  tensor shared = t;  // a second reference: reset releases one
  CHECK(a.bytes_in_use() == 48);
  t.reset();
  CHECK_FALSE(t.valid());
  CHECK(t.dtype() == dtype::invalid);
  CHECK(t.shape() == shape{});
  CHECK(t.shape().is_scalar());
  CHECK(a.bytes_in_use() == 48);  // still held by `shared`
  shared.reset();
  CHECK(a.bytes_in_use() == 0);
  t = tensor::of<float>({2, 2}, {1, 2, 3, 4});
  CHECK(t.shape() == shape{2, 2});
  CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  t.reset();
  t.reset();  // twice: still a default tensor
  CHECK_FALSE(t.valid());
  shape s{5, 6, 7};
  s.clear();
  CHECK(s == shape{});
  CHECK(s.num_elements() == 1);
}

TEST_CASE("a tensor moved into another takes its buffer and shape, and both keep their dims' storage") {
  cpu_allocator a;
  tensor from = tensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  tensor to(dtype::int32, {4, 5, 6}, a);
  const std::int64_t* from_dims = from.shape().dims().data();
  const std::int64_t* to_dims = to.shape().dims().data();
  const void* buffer = from.raw_data();
  to = std::move(from);
  CHECK(a.bytes_in_use() == 0);  // to's old buffer released
  CHECK(to.raw_data() == buffer);
  CHECK(to.dtype() == dtype::float32);
  CHECK(to.shape() == shape{2, 3});
  CHECK(to.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK_FALSE(from.valid());
  CHECK(from.shape() == shape{});
  // The storage of the dims moved over, and the moved-from tensor kept the other's (the
  // executor's slots and output entries assign tensors of one rank step after step).
  CHECK(to.shape().dims().data() == from_dims);
  CHECK(from.shape().dims().capacity() >= 3);
  CHECK(from.shape().dims().data() == to_dims);
  from = tensor::of<std::int64_t>({3}, {7, 8, 9});
  CHECK(from.to_vector<std::int64_t>() == std::vector<std::int64_t>{7, 8, 9});
  tensor& same = to;
  to = std::move(same);  // itself: unchanged
  CHECK(to.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("the cpu allocator keeps small freed buffers for its thread's next ones of their size") {
  cpu_allocator a;
  // Sizes round to 64 bytes; the freed block of a size is the next one of that size here.
  void* p = a.allocate(100);  // 128
  CHECK(reinterpret_cast<std::uintptr_t>(p) % buffer_alignment == 0);
  std::memset(p, 0x5a, 128);
  a.deallocate(p, 100);
  CHECK(a.bytes_in_use() == 0);
  CHECK(a.bytes_cached() == 0);  // small blocks are the thread's, outside the count
  void* q = a.allocate(128);
  void* r = a.allocate(65);
  if (cpu_allocator::caches_buffers) {
    CHECK(q == p);
    CHECK(r != p);
  }
  CHECK(a.bytes_in_use() == 128 + 65);
  // Each size of 64 to 512 bytes and one past: aligned, writable, distinct while held.
  std::vector<std::pair<void*, std::size_t>> held;
  for (std::size_t bytes = 1; bytes <= 600; bytes += 37) {
    void* b = a.allocate(bytes);
    CHECK(reinterpret_cast<std::uintptr_t>(b) % buffer_alignment == 0);
    std::memset(b, static_cast<int>(bytes), bytes);
    held.emplace_back(b, bytes);
  }
  for (const auto& [b, bytes] : held)
    CHECK(std::all_of(static_cast<unsigned char*>(b), static_cast<unsigned char*>(b) + bytes,
                      [n = static_cast<unsigned char>(bytes)](unsigned char c) { return c == n; }));
  for (const auto& [b, bytes] : held) a.deallocate(b, bytes);
  // Freed on another thread: kept in that thread's cache, which its end empties.
  void* other = a.allocate(256);
  std::thread([&] { a.deallocate(other, 256); }).join();
  void* again = a.allocate(256);
  // More than 64 of a size freed: the rest go back to the system; all reusable.
  std::vector<void*> many;
  for (int i = 0; i < 100; ++i) many.push_back(a.allocate(512));
  for (void* b : many) a.deallocate(b, 512);
  many.clear();
  for (int i = 0; i < 100; ++i) many.push_back(a.allocate(512));
  std::sort(many.begin(), many.end());
  CHECK(std::adjacent_find(many.begin(), many.end()) == many.end());
  for (void* b : many) a.deallocate(b, 512);
  a.deallocate(again, 256);
  a.deallocate(q, 128);
  a.deallocate(r, 65);
  CHECK(a.bytes_in_use() == 0);
}

TEST_CASE("a tensor's buffer is its data alone, from its allocator, in the allocator's memory space") {
  recording_allocator a;
  {
    tensor t(dtype::float32, {3, 5}, a);
    REQUIRE(a.blocks.size() == 1);
    CHECK(a.blocks[0].second == 3 * 5 * sizeof(float));  // no header in the data's allocation
    CHECK(t.raw_data() == a.blocks[0].first);
    CHECK(t.buffer_allocator() == &a);
    CHECK(t.memory_space() == memory_space::device);
    tensor view = t.reshape({15});
    CHECK(view.memory_space() == memory_space::device);
    tensor empty(dtype::int64, {0, 4}, a);
    CHECK(a.blocks.size() == 2);
    CHECK(a.blocks[1].second == 0);
  }
  CHECK(a.live == 0);
  REQUIRE(a.freed.size() == 2);
  CHECK(a.freed[1] == a.blocks[0]);  // the same pointer and size back
  CHECK(tensor(dtype::float32, {2}).memory_space() == memory_space::host);
  CHECK(tensor().memory_space() == memory_space::host);
  // A failed allocation leaves no buffer behind.
  cpu_allocator small;
  limited_allocator* limit = limited_allocator::create(small, 100);
  CHECK_THROWS_WITH(tensor(dtype::float32, {100}, *limit), Catch::Contains("memory limit of 100 bytes"));
  CHECK(limit->bytes_in_use() == 0);
  CHECK(limit->space() == memory_space::host);
  limit->release();
}

TEST_CASE("tensors made on one thread and released on another return every buffer") {
  recording_allocator a;
  constexpr int n = 2000;  // more than a thread keeps of freed headers
  for (int round = 0; round < 3; ++round) {
    std::vector<tensor> made;
    std::thread maker([&] {
      for (int i = 0; i < n; ++i) made.emplace_back(dtype::int32, shape{i % 7}, a);
    });
    maker.join();
    std::thread releaser([&] {
      for (int i = 0; i < n; ++i) CHECK(made[static_cast<std::size_t>(i)].dim(0) == i % 7);
      made.clear();
    });
    releaser.join();
    CHECK(a.live == 0);
  }
  CHECK(a.blocks.size() == 3 * n);
  CHECK(a.freed.size() == 3 * n);
}
