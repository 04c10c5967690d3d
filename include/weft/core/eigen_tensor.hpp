/// @file
/// Eigen's Tensor module, always with its ThreadPoolDevice: weft's kernels run on one.
/// Whichever weft header comes first pulls the module in, so every path defines
/// EIGEN_USE_THREADS before it.
#pragma once

// The module has no include guard of its own, and its parts are guarded one by one: if it
// was included before without EIGEN_USE_THREADS, including it again adds the thread pool
// but not the executor's ThreadPoolDevice specialisation, and the first kernel fails deep
// in Eigen. Say so here instead. (With threads, the thread-pool device header comes before
// the executor's.)
#if defined(EIGEN_CXX11_TENSOR_TENSOR_EXECUTOR_H) && !defined(EIGEN_CXX11_TENSOR_TENSOR_DEVICE_THREAD_POOL_H)
#error "weft: Eigen's Tensor module was included without EIGEN_USE_THREADS; include weft's headers first, or define EIGEN_USE_THREADS before <unsupported/Eigen/CXX11/Tensor>"
#endif

#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif
#include <unsupported/Eigen/CXX11/Tensor>
