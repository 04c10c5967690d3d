// The training steps of bench_training written with libtorch, behind an interface that
// includes no torch header (libtorch's headers and weft's compile in separate translation
// units). Parameters come and go in weft's layouts (MatMul weights [in, out], filters
// [height, width, in, out], images NHWC); the torch side converts them to its own
// (Linear's [out, in], Conv2d's [out, in, height, width], NCHW).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace torch_bench {

struct param {
  std::vector<std::int64_t> dims;
  const float* values;
};

class model {
 public:
  virtual ~model() = default;
  // One SGD step: forward, loss, backward, update. Returns the step's loss.
  virtual float step() = 0;
  // Parameter i, in weft's layout.
  virtual std::vector<float> parameter(int i) const = 0;
};

// libtorch's intra-op threads (`torch::set_num_threads`), and the count it had before the
// first call to either function (its default: one per core).
void set_threads(int threads);
int default_threads();

// The BLAS libtorch calls (Debian's libtorch calls whatever libblas.so.3 the alternatives
// system points to): the file that defines sgemm_, and for OpenBLAS its configuration, core
// kernels and threads.
std::string blas_description();
// OpenBLAS's own threads; 0 gives back the count it started with. False when the BLAS is
// not OpenBLAS.
bool set_blas_threads(int threads);

// 784-h-h-10 with ReLU; params w1, b1, w2, b2, w3, b3. x: [batch, 784], labels: [batch].
std::unique_ptr<model> make_mlp(const std::vector<param>& params, const float* x, const std::int32_t* labels,
                                std::int64_t batch, float rate);

// 5x5 conv (SAME) 1->c1, ReLU, 2x2 max pool, 5x5 conv c1->c2, ReLU, 2x2 max pool, dense
// 49*c2->units, ReLU, dense units->10; params f1, b1, f2, b2, w3, b3, w4, b4.
// images: [batch, 28, 28, 1].
std::unique_ptr<model> make_lenet(const std::vector<param>& params, const float* images, const std::int32_t* labels,
                                  std::int64_t batch, float rate);

// A network's forward pass alone (inference): eval mode, no autograd.
class inference {
 public:
  virtual ~inference() = default;
  // The logits [batch, 10] of `batch` images [batch, 28, 28, 1] (one channel: NHWC is NCHW).
  virtual std::vector<float> forward(const float* images, std::int64_t batch) = 0;
};
// make_lenet's network, for inference.
std::unique_ptr<inference> make_lenet_inference(const std::vector<param>& params);

}  // namespace torch_bench
