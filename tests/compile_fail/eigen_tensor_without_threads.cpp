// Eigen's Tensor module included before weft without EIGEN_USE_THREADS leaves no
// ThreadPoolDevice for weft's kernels: weft says so instead of failing deep in Eigen.
#ifdef WEFT_COMPILE_FAIL_TWIN
#define EIGEN_USE_THREADS
#endif
#include <unsupported/Eigen/CXX11/Tensor>

#include <weft/weft.hpp>

int compile_fail_case() { return weft::tensor::scalar(1.0f).num_elements() == 1 ? 0 : 1; }
