// The MLP step of bench_training as an Eigen expert writes it, and the machine's own limits
// measured in the same run. Compiled apart, with OpenMP (Eigen's dense products use it for
// their threads), behind an interface that includes no Eigen header.
//
// The step: row-major `Eigen::Matrix` products (Eigen's GEBP kernel, OpenMP threads set by
// `Eigen::setNbThreads`), bias and ReLU in one pass over each product's output, the ReLU
// mask applied in place to the incoming gradient, and each weight updated by the GEMM that
// computes its gradient (`w.noalias() -= rate * (a.transpose() * dz)`: no gradient matrix is
// materialised). Buffers are allocated once.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace eigen_bench {

// Eigen's and OpenMP's thread count for the products that follow.
void set_threads(int threads);

class mlp_step {
 public:
  // 784-h-h-10 with ReLU; params w1 [in, h], b1, w2 [h, h], b2, w3 [h, classes], b3 (the
  // layouts of weft's MatMul), x [batch, in] row-major, labels [batch].
  mlp_step(const std::vector<const float*>& params, std::int64_t in, std::int64_t hidden, std::int64_t classes,
           const float* x, const std::int32_t* labels, std::int64_t batch, float rate);
  ~mlp_step();
  mlp_step(const mlp_step&) = delete;
  mlp_step& operator=(const mlp_step&) = delete;

  // One SGD step on the mean sparse softmax cross-entropy; returns the loss before it.
  float run();
  // Parameter i (0..5) in weft's layout.
  std::vector<float> parameter(int i) const;

 private:
  struct state;
  std::unique_ptr<state> s_;
};

}  // namespace eigen_bench
