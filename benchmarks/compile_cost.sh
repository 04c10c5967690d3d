#!/usr/bin/env bash
# Compile time and peak compiler memory (g++ -O2, one TU at a time) of:
#   - the minimal user program: one MatMul through a session (tests/consumer/main.cpp);
#   - DSL programs: the tutorial's 3-layer MLP (docs/tutorial.md, sample 2) and a 20-layer
#     model built in a runtime loop through weft::handle, beside the same model written out
#     as 20 typed expressions (benchmarks/compile/);
#   - the full CPU kernel registry in one TU (<weft/kernels/cpu/all.hpp>), and per family;
#   - baselines: an Eigen Tensor contraction on a ThreadPoolDevice, Eigen's dense product,
#     Boost.Hana's header.
# Usage: benchmarks/compile_cost.sh [compiler]   (default g++). Prints one line per TU.
set -euo pipefail
cd "$(dirname "$0")/.."
CXX=${1:-g++}
EIGEN=${EIGEN_INCLUDE:-/usr/include/eigen3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

measure() {  # name file
  /usr/bin/time -f "%e %M" -o "$work/t" "$CXX" -std=c++20 -O2 -Iinclude -isystem "$EIGEN" -c "$2" -o "$work/o.o"
  awk -v name="$1" '{ printf "%-38s %7.1f s %6.2f GB\n", name, $1, $2 / 1048576 }' "$work/t"
}

cat > "$work/contraction.cpp" <<'CPP'
#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/Tensor>
void f(Eigen::ThreadPoolDevice& d, Eigen::TensorMap<Eigen::Tensor<float, 2, Eigen::RowMajor>> c,
       Eigen::TensorMap<Eigen::Tensor<const float, 2, Eigen::RowMajor>> a,
       Eigen::TensorMap<Eigen::Tensor<const float, 2, Eigen::RowMajor>> b) {
  Eigen::array<Eigen::IndexPair<Eigen::Index>, 1> dims{Eigen::IndexPair<Eigen::Index>(1, 0)};
  c.device(d) = a.contract(b, dims);
}
CPP
cat > "$work/dense.cpp" <<'CPP'
#include <Eigen/Core>
using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
void f(Eigen::Map<M> c, Eigen::Map<const M> a, Eigen::Map<const M> b) { c.noalias() = a * b; }
CPP
echo '#include <boost/hana.hpp>' > "$work/hana.cpp"
echo '#include <weft/kernels/cpu/all.hpp>' > "$work/all.cpp"

"$CXX" --version | head -1
measure "minimal program (consumer)" tests/consumer/main.cpp
python3 tools/doc_samples.py docs "$work/samples" > /dev/null
measure "DSL: 3-layer MLP (tutorial sample 2)" "$work/samples/tutorial_2.cpp"
measure "DSL: 20 layers, runtime loop (handle)" benchmarks/compile/dsl_layers_loop.cpp
measure "DSL: 20 layers written out (typed)" benchmarks/compile/dsl_layers_unrolled.cpp
measure "full registry, one TU (all.hpp)" "$work/all.cpp"
for f in tests/support/cpu_kernels_*.cpp; do
  n=$(basename "$f" .cpp)
  measure "  registry family ${n#cpu_kernels_}" "$f"
done
measure "baseline: Eigen Tensor contraction" "$work/contraction.cpp"
measure "baseline: Eigen dense product" "$work/dense.cpp"
measure "baseline: boost/hana.hpp" "$work/hana.cpp"
