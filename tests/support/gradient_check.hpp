// Gradient checking for graphs built op by op: the Jacobian of add_gradients against
// central differences in float64.
#pragma once

#include "helpers.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

namespace weft::test {

using builder = std::function<output(graph&, const std::vector<output>&)>;

struct input_spec {
  shape dims;
  double lo, hi;  // values spread over [lo, hi], away from kinks and poles
};

inline std::vector<double> spread(const input_spec& s, int salt) {
  const auto n = static_cast<std::size_t>(s.dims.num_elements());
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    double t = std::fmod(0.37 * static_cast<double>(i + 1) + 0.11 * salt, 1.0);  // distinct, scattered
    v[i] = s.lo + (s.hi - s.lo) * t;
  }
  return v;
}

// The largest |analytic - numeric| entry of the Jacobian of build(inputs) with respect to
// every input. Analytic rows come from add_gradients with a fed one-hot output gradient;
// numeric columns from central differences.
inline double jacobian_error(const builder& build, const std::vector<input_spec>& specs, session_options options = one_thread()) {
  graph g;
  std::vector<output> xs;
  for (std::size_t i = 0; i < specs.size(); ++i)
    xs.push_back(g.placeholder(dtype::float64, partial_shape(specs[i].dims.dims()), node_options("x" + std::to_string(i))));
  output y = build(g, xs);
  output dy = g.placeholder(dtype::float64, partial_shape::unknown_rank(), node_options("dy"));
  auto dxs = add_gradients(g, {y}, xs, {dy});
  REQUIRE(dxs.size() == xs.size());
  session s(g, options);
  std::vector<std::vector<double>> values;
  for (std::size_t i = 0; i < specs.size(); ++i) values.push_back(spread(specs[i], static_cast<int>(i)));
  auto feeds = [&](const std::vector<std::vector<double>>& v) {
    feed_list f;
    for (std::size_t i = 0; i < specs.size(); ++i) f.push_back({xs[i], tensor::from_vector(v[i], specs[i].dims)});
    return f;
  };
  tensor y0 = s.run(feeds(values), {y}).at(0);
  const auto ny = static_cast<std::size_t>(y0.num_elements());
  // analytic[j] = d y_j / d (all inputs, flattened)
  std::vector<std::vector<double>> analytic(ny);
  std::vector<endpoint> fetch(dxs.begin(), dxs.end());
  for (std::size_t j = 0; j < ny; ++j) {
    std::vector<double> e(ny);
    e[j] = 1;
    auto f = feeds(values);
    f.push_back({dy, tensor::from_vector(e, y0.shape())});
    auto got = s.run(f, fetch);
    for (std::size_t i = 0; i < xs.size(); ++i) {
      REQUIRE(got[i].shape() == specs[i].dims);
      for (double v : got[i].to_vector<double>()) analytic[j].push_back(v);
    }
  }
  const double h = 1e-6;
  double worst = 0;
  std::size_t k = 0;
  for (std::size_t i = 0; i < specs.size(); ++i)
    for (std::size_t e = 0; e < values[i].size(); ++e, ++k) {
      auto up = values, down = values;
      up[i][e] += h;
      down[i][e] -= h;
      auto yu = s.run(feeds(up), {y}).at(0).to_vector<double>(), yd = s.run(feeds(down), {y}).at(0).to_vector<double>();
      for (std::size_t j = 0; j < ny; ++j) worst = std::max(worst, std::abs(analytic[j][k] - (yu[j] - yd[j]) / (2 * h)));
    }
  return worst;
}

}  // namespace weft::test
