// bench_training's OpenMP translation unit: the MLP step as an Eigen expert writes it
// (eigen_mlp.hpp), and the machine's limits in the same run:
// - BM_sgemm/THREADS: Eigen's float GEMM, 1024 x 1024 x 1024 (`c.noalias() = a * b`), the
//   rate every GEMM-bound step is a fraction of;
// - BM_memory_triad/THREADS: STREAM's triad a = b + s * c over three arrays of 2^25 floats
//   (384 MiB, far beyond the caches), bytes counted as STREAM counts them (two reads, one
//   write).
#include "eigen_mlp.hpp"

#include <Eigen/Core>
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace eigen_bench {

using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using row = Eigen::Matrix<float, 1, Eigen::Dynamic>;
using const_matrix_map = Eigen::Map<const matrix>;
using const_row_map = Eigen::Map<const row>;

void set_threads(int threads) {
  omp_set_num_threads(threads);
  Eigen::setNbThreads(threads);
}

struct mlp_step::state {
  matrix w[3], x, h[2], z, dz, dh[2];
  row b[3];
  std::vector<std::int32_t> labels;
  float rate;
};

mlp_step::mlp_step(const std::vector<const float*>& params, std::int64_t in, std::int64_t hidden, std::int64_t classes,
                   const float* x, const std::int32_t* labels, std::int64_t batch, float rate)
    : s_(std::make_unique<state>()) {
  if (params.size() != 6) throw std::invalid_argument("eigen_bench::mlp_step: six parameters");
  const std::int64_t dims[3][2] = {{in, hidden}, {hidden, hidden}, {hidden, classes}};
  for (int l = 0; l < 3; ++l) {
    s_->w[l] = const_matrix_map(params[static_cast<std::size_t>(2 * l)], dims[l][0], dims[l][1]);
    s_->b[l] = const_row_map(params[static_cast<std::size_t>(2 * l + 1)], dims[l][1]);
  }
  s_->x = const_matrix_map(x, batch, in);
  for (auto& h : s_->h) h.resize(batch, hidden);
  for (auto& d : s_->dh) d.resize(batch, hidden);
  s_->z.resize(batch, classes);
  s_->dz.resize(batch, classes);
  s_->labels.assign(labels, labels + batch);
  s_->rate = rate;
}

mlp_step::~mlp_step() = default;

float mlp_step::run() {
  state& s = *s_;
  const Eigen::Index batch = s.x.rows();
  // Forward: each product, then bias and ReLU in one pass over its output.
  s.h[0].noalias() = s.x * s.w[0];
  s.h[0] = (s.h[0].rowwise() + s.b[0]).cwiseMax(0.0f);
  s.h[1].noalias() = s.h[0] * s.w[1];
  s.h[1] = (s.h[1].rowwise() + s.b[1]).cwiseMax(0.0f);
  s.z.noalias() = s.h[1] * s.w[2];
  s.z.rowwise() += s.b[2];
  // Softmax cross-entropy by rows; its gradient, divided by the batch, into dz.
  float loss = 0;
  const float inv_batch = 1.0f / static_cast<float>(batch);
  for (Eigen::Index r = 0; r < batch; ++r) {
    const float m = s.z.row(r).maxCoeff();
    auto e = s.dz.row(r);
    e = (s.z.row(r).array() - m).exp().matrix();
    const float sum = e.sum();
    const std::int32_t k = s.labels[static_cast<std::size_t>(r)];
    loss += std::log(sum) + m - s.z(r, k);
    e *= inv_batch / sum;
    e(k) -= inv_batch;
  }
  // Backward, last layer first: the input's gradient before the weights change, then the
  // weights updated by the GEMM of their gradient, the bias by a column sum, and ReLU's mask
  // (h > 0 exactly where its input was) applied in place.
  const float rate = s.rate;
  s.dh[1].noalias() = s.dz * s.w[2].transpose();
  s.w[2].noalias() -= rate * (s.h[1].transpose() * s.dz);
  s.b[2] -= rate * s.dz.colwise().sum();
  s.dh[1] = (s.h[1].array() > 0.0f).select(s.dh[1], 0.0f);
  s.dh[0].noalias() = s.dh[1] * s.w[1].transpose();
  s.w[1].noalias() -= rate * (s.h[0].transpose() * s.dh[1]);
  s.b[1] -= rate * s.dh[1].colwise().sum();
  s.dh[0] = (s.h[0].array() > 0.0f).select(s.dh[0], 0.0f);
  s.w[0].noalias() -= rate * (s.x.transpose() * s.dh[0]);
  s.b[0] -= rate * s.dh[0].colwise().sum();
  return loss * inv_batch;
}

std::vector<float> mlp_step::parameter(int i) const {
  if (i < 0 || i > 5) throw std::out_of_range("eigen_bench::mlp_step::parameter: 0 to 5");
  const float* data = i % 2 == 0 ? s_->w[i / 2].data() : s_->b[i / 2].data();
  const Eigen::Index size = i % 2 == 0 ? s_->w[i / 2].size() : s_->b[i / 2].size();
  return std::vector<float>(data, data + size);
}

namespace {

void BM_sgemm(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  set_threads(threads);
  constexpr Eigen::Index n = 1024;
  const matrix a = matrix::Random(n, n), b = matrix::Random(n, n);
  matrix c(n, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void BM_memory_triad(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  constexpr std::int64_t n = std::int64_t{1} << 25;
  const std::unique_ptr<float[]> a(new float[n]), b(new float[n]), c(new float[n]);  // untouched until below
  float* pa = a.get();
  float* pb = b.get();
  float* pc = c.get();
  // First touch by the threads that stream them.
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) pa[i] = 0.0f, pb[i] = 1.0f, pc[i] = 2.0f;
  const float scale = 3.0f;
  for (auto _ : state) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) pa[i] = pb[i] + scale * pc[i];
    benchmark::DoNotOptimize(pa);
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(3.0 * sizeof(float) * static_cast<double>(n) *
                                                  static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(BM_sgemm)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_memory_triad)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace eigen_bench
