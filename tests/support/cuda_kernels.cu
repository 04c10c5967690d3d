// The CUDA kernels of weft's GPU kernels, compiled once by nvcc for the tests, examples and
// benchmarks (a program does the same in one .cu file of its own).
#include <weft/cuda/launch.cuh>
