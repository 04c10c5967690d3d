// Eigen's Tensor module included before weft without EIGEN_USE_THREADS leaves no
// ThreadPoolDevice for weft's kernels: weft says so instead of failing deep in Eigen.
#ifdef WEFT_COMPILE_FAIL_TWIN
#define EIGEN_USE_THREADS
#endif
#include <unsupported/Eigen/CXX11/Tensor>

// The first weft header that brings Eigen in (the umbrella header does too: the twin took
// 23 s of CPU with it, 3 s with these).
#include <weft/core/eigen.hpp>
#include <weft/core/tensor.hpp>

int compile_fail_case() { return weft::tensor::scalar(1.0f).num_elements() == 1 ? 0 : 1; }
