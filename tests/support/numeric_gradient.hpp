// Central differences in float64, for checking gradients against.
#pragma once

#include <functional>
#include <vector>

namespace weft::test {

// The partials of f at v by central differences, one element at a time (f smooth).
inline std::vector<double> numeric_gradient(const std::function<double(const std::vector<double>&)>& f, std::vector<double> v) {
  const double eps = 1e-6;
  std::vector<double> g(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    v[i] = keep + eps;
    const double up = f(v);
    v[i] = keep - eps;
    const double down = f(v);
    v[i] = keep;
    g[i] = (up - down) / (2 * eps);
  }
  return g;
}

}  // namespace weft::test
