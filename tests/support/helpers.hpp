#pragma once
#include <weft/weft.hpp>

#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace weft::test {

// A directory of its own under the system's temporary directory, removed with everything
// in it when the object goes.
struct temp_dir {
  std::filesystem::path path;
  explicit temp_dir(const std::string& stem)
      : path(std::filesystem::temp_directory_path() / (stem + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() { std::filesystem::remove_all(path); }
};

// Whether protoc (Debian's protobuf-compiler, which tools/install-deps installs) runs here.
inline bool have_protoc() {
  static const bool have = std::system("protoc --version > /dev/null 2>&1") == 0;
  return have;
}

// protoc's run over `bytes` with `mode` (`--decode=tensorflow.Event`, `--decode_raw`, ...)
// against the schema `proto` in the directory `dir`: its standard output, which the test
// fails on (printing it) when protoc exits with an error.
inline std::string protoc(const std::string& bytes, const std::string& mode, const std::filesystem::path& dir,
                          const std::string& proto) {
  temp_dir tmp("weft_protoc");
  const auto in = tmp.path / "in.pb";
  std::ofstream(in, std::ios::binary) << bytes;
  const std::string cmd =
      "protoc " + mode + " -I " + dir.string() + " " + (dir / proto).string() + " < " + in.string() + " 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  INFO("protoc printed: " << out);
  REQUIRE(status == 0);
  return out;
}

// A scalar int64 constant.
inline output i64(graph& g, std::int64_t v) { return g.constant(tensor::scalar(v)); }

// A node of op `name` on `in` with `attrs`.
inline output op(graph& g, const char* name, std::vector<output> in, attr_map attrs = {}) {
  return g.op(name, in, std::move(attrs));
}

inline session_options one_thread() {
  session_options o;
  o.inter_op_threads = 0;
  o.intra_op_threads = 1;
  return o;
}

// Runs `g` once and returns the value of `fetch`.
inline tensor eval(const graph& g, output fetch, const feed_list& feeds = {}) {
  session s(g, one_thread());
  return s.run(feeds, {fetch}).at(0);
}

template <class T>
std::vector<T> values(const tensor& t) {
  return t.to_vector<T>();
}

// Element by element, |got - want| <= tol * max(1, |want|).
inline void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": " << got[i] << " vs " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])));
  }
}

// Expects `f` to throw weft::error whose message contains every fragment.
template <class F>
void require_error(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
  } catch (const error& e) {
    std::string msg = e.what();
    INFO("message: " << msg);
    for (const auto& frag : fragments) CHECK(msg.find(frag) != std::string::npos);
    return;
  }
  FAIL("expected a weft::error containing " << fragments.front());
}

// Waits, polling every millisecond for up to a minute, until ready() holds: a test that
// must know another thread's step has got somewhere (blocked in a queue) waits for it
// rather than sleeping a fixed time, which a loaded machine (a sanitizer build beside
// other jobs) can outlast.
template <class F>
void wait_until(F&& ready, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) FAIL("waited a minute for " << what);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// A kernel for tests of how many kernels run at once: it stays 20 ms and passes its first
// input through; `most` records the most that ran at once (reset it before a run).
struct concurrency_probe final : op_kernel {
  static inline std::atomic<int> running{0}, most{0};
  explicit concurrency_probe(const node&) {}
  void compute(kernel_context& ctx) const override {
    const int now = ++running;
    for (int seen = most.load(); seen < now && !most.compare_exchange_weak(seen, now);) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    --running;
    ctx.set_output(0, ctx.input(0));
  }
};

// How many enqueues and dequeues wait on the queue `name` in container "" of s's resources
// (none before a step has made the queue).
inline std::size_t waiting_enqueues(const session& s, const std::string& name) {
  auto q = s.resources().find<queue>("", name);
  return q ? q->waiting_enqueues() : 0;
}
inline std::size_t waiting_dequeues(const session& s, const std::string& name) {
  auto q = s.resources().find<queue>("", name);
  return q ? q->waiting_dequeues() : 0;
}

}  // namespace weft::test
