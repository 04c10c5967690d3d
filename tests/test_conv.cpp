// Convolution, pooling and dropout (ops/nn_ops.hpp; kernels/cpu/conv.hpp, pooling.hpp and
// dropout.hpp) against direct sums written here from TensorFlow's definitions, with shape
// inference and errors. Their gradient rules are checked against central differences in
// test_gradients.cpp.
#include "support/helpers.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace weft;
using namespace weft::test;

namespace {

// One convolution or pooling: input [n, h, w, c], a kh x kw window (filter [kh, kw, c, k]).
struct conv_case {
  std::int64_t n, h, w, c, kh, kw, k, sh, sw, dh, dw;
  bool same;
  std::string name() const {
    return std::to_string(n) + "x" + std::to_string(h) + "x" + std::to_string(w) + "x" + std::to_string(c) + " by " +
           std::to_string(kh) + "x" + std::to_string(kw) + "x" + std::to_string(k) + " strides " + std::to_string(sh) + "," +
           std::to_string(sw) + " dilations " + std::to_string(dh) + "," + std::to_string(dw) + (same ? " SAME" : " VALID");
  }
};

// TensorFlow's output size and leading padding along one dim.
std::pair<std::int64_t, std::int64_t> out_and_pad(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d, bool same) {
  const std::int64_t extent = (k - 1) * d + 1;
  if (!same) return {(in - extent + s) / s, 0};
  const std::int64_t out = (in + s - 1) / s;
  return {out, std::max<std::int64_t>(0, (out - 1) * s + extent - in) / 2};
}

// Calls f(b, y, x, iy, ix) for every output position and every window element inside the input.
template <class F>
void each_tap(const conv_case& c, std::int64_t ki, std::int64_t kj, F&& f) {
  auto [oh, pt] = out_and_pad(c.h, c.kh, c.sh, c.dh, c.same);
  auto [ow, pl] = out_and_pad(c.w, c.kw, c.sw, c.dw, c.same);
  for (std::int64_t b = 0; b < c.n; ++b)
    for (std::int64_t y = 0; y < oh; ++y)
      for (std::int64_t x = 0; x < ow; ++x) {
        const std::int64_t iy = y * c.sh - pt + ki * c.dh, ix = x * c.sw - pl + kj * c.dw;
        if (iy >= 0 && iy < c.h && ix >= 0 && ix < c.w) f(b, y, x, iy, ix);
      }
}

struct conv_results {
  std::vector<double> out, d_in, d_filter;
};

// out = conv(in, f); d_in and d_filter: the gradients of sum(out * d).
conv_results naive_conv(const conv_case& c, const std::vector<double>& in, const std::vector<double>& f,
                        const std::vector<double>& d) {
  // Plain locals: clang 14's lambdas cannot capture structured bindings.
  const std::int64_t oh = out_and_pad(c.h, c.kh, c.sh, c.dh, c.same).first,
                     ow = out_and_pad(c.w, c.kw, c.sw, c.dw, c.same).first;
  conv_results r{std::vector<double>(static_cast<std::size_t>(c.n * oh * ow * c.k)),
                 std::vector<double>(in.size()), std::vector<double>(f.size())};
  auto I = [&](std::int64_t b, std::int64_t y, std::int64_t x, std::int64_t ch) { return static_cast<std::size_t>(((b * c.h + y) * c.w + x) * c.c + ch); };
  auto O = [&](std::int64_t b, std::int64_t y, std::int64_t x, std::int64_t k) { return static_cast<std::size_t>(((b * oh + y) * ow + x) * c.k + k); };
  auto F = [&](std::int64_t i, std::int64_t j, std::int64_t ch, std::int64_t k) { return static_cast<std::size_t>(((i * c.kw + j) * c.c + ch) * c.k + k); };
  for (std::int64_t i = 0; i < c.kh; ++i)
    for (std::int64_t j = 0; j < c.kw; ++j)
      each_tap(c, i, j, [&](std::int64_t b, std::int64_t y, std::int64_t x, std::int64_t iy, std::int64_t ix) {
        for (std::int64_t ch = 0; ch < c.c; ++ch)
          for (std::int64_t k = 0; k < c.k; ++k) {
            r.out[O(b, y, x, k)] += in[I(b, iy, ix, ch)] * f[F(i, j, ch, k)];
            r.d_in[I(b, iy, ix, ch)] += d[O(b, y, x, k)] * f[F(i, j, ch, k)];
            r.d_filter[F(i, j, ch, k)] += d[O(b, y, x, k)] * in[I(b, iy, ix, ch)];
          }
      });
  return r;
}

std::vector<double> scattered(std::int64_t n, double salt) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(1.7 * static_cast<double>(i) + salt) * 1.5;
  return v;
}

attr_map conv_attrs(const conv_case& c) {
  return {{"strides", std::vector<std::int64_t>{1, c.sh, c.sw, 1}},
          {"dilations", std::vector<std::int64_t>{1, c.dh, c.dw, 1}},
          {"padding", std::string(c.same ? "SAME" : "VALID")}};
}
attr_map pool_attrs(const conv_case& c) {
  return {{"ksize", std::vector<std::int64_t>{1, c.kh, c.kw, 1}},
          {"strides", std::vector<std::int64_t>{1, c.sh, c.sw, 1}},
          {"padding", std::string(c.same ? "SAME" : "VALID")}};
}
output ph(graph& g, const char* name, dtype t = dtype::float64) {
  return g.placeholder(t, partial_shape::unknown_rank(), node_options(name));
}
output sizes(graph& g, std::vector<std::int64_t> v) { return g.constant(tensor::from_vector(v, shape{4})); }
session_options intra_threads(int n) {
  session_options o;
  o.intra_op_threads = n;
  return o;
}

// Output channels that fill whole packets (2 doubles here without AVX, 8 with AVX-512)
// take the register blocks: Conv2D always (an image per thread with at least two images
// per thread, else rows of all images spread over the threads), the input's gradient with
// stride 1 likewise (its output channels are the input's), the filter's gradient with at
// least two images per thread and patches of more than 64 values (kh * kw * c). Otherwise
// patches of at most 64 values take the direct loops and larger ones the patch GEMM, so
// the tricky geometries come in all three. The direct loops' full blocks of 8 doubles slide
// where the window moves one column at a time and is 3, 5 or 7 wide (the "sliding" cases).
const std::vector<conv_case> conv_cases{
    {2, 5, 5, 3, 3, 3, 4, 1, 1, 1, 1, false},
    {2, 5, 5, 3, 3, 3, 4, 1, 1, 1, 1, true},
    {1, 7, 6, 2, 3, 2, 3, 2, 3, 1, 1, true},    // uneven strides and padding
    {1, 6, 7, 2, 4, 4, 2, 3, 2, 1, 1, true},    // an even window: more padding after than before
    {2, 7, 7, 1, 2, 2, 2, 1, 1, 2, 2, false},   // dilated
    {1, 8, 8, 2, 3, 3, 2, 2, 2, 2, 1, true},    // dilated and strided
    {3, 4, 4, 5, 1, 1, 6, 1, 1, 1, 1, false},   // 1x1, stride 1: one GEMM
    {2, 3, 3, 2, 1, 1, 2, 2, 2, 1, 1, true},    // 1x1, strided
    {1, 2, 2, 1, 3, 3, 1, 1, 1, 1, 1, true},    // a window larger than the input
    {4, 12, 12, 3, 5, 5, 4, 1, 1, 1, 1, true},  // several chunks of rows per thread
    {2, 9, 9, 2, 3, 3, 1, 2, 2, 1, 1, false},   // one output channel
    {0, 5, 5, 3, 3, 3, 4, 1, 1, 1, 1, true},    // no images
    {1, 7, 6, 11, 3, 2, 3, 2, 3, 1, 1, true},   // im2col: uneven strides and padding
    {1, 6, 7, 5, 4, 4, 2, 3, 2, 1, 1, true},    // im2col: an even window
    {2, 7, 7, 17, 2, 2, 2, 1, 1, 2, 2, false},  // im2col: dilated
    {1, 8, 8, 8, 3, 3, 2, 2, 2, 2, 1, true},    // im2col: dilated and strided
    {2, 3, 3, 65, 1, 1, 2, 2, 2, 1, 1, true},   // im2col: 1x1, strided
    {2, 6, 6, 2, 3, 3, 11, 1, 1, 1, 1, true},   // direct: a block of 8 channels and 3 more
    {1, 5, 5, 1, 3, 3, 20, 2, 2, 1, 1, false},  // direct: two blocks of 8 and 4 more
    {8, 16, 16, 1, 5, 5, 16, 1, 1, 1, 1, true}, // direct: a partial filter gradient per thread
    {3, 6, 13, 1, 5, 5, 8, 1, 1, 1, 1, true},   // sliding (filter gradient): a tile of 8 positions and one of 5
    {2, 9, 19, 2, 3, 7, 9, 2, 1, 2, 1, false},  // sliding: 7 wide, strided and dilated down the rows, a block and 1 more
    {2, 5, 4, 1, 3, 3, 17, 1, 1, 1, 1, true},   // sliding: a row narrower than a tile, two blocks and 1 more
    {1, 7, 23, 3, 3, 5, 8, 1, 1, 1, 1, false},  // sliding: 3 input channels, VALID
    {4, 9, 31, 6, 3, 3, 8, 1, 1, 1, 1, true},   // register blocks: several runs per row, pairs of packets
    {10, 7, 9, 8, 3, 3, 6, 1, 1, 1, 1, true},   // register blocks: a pair of packets and one more, images summed per block
    {4, 11, 11, 4, 3, 3, 16, 2, 2, 2, 1, true}, // register blocks: strided and dilated
    {4, 10, 10, 8, 3, 3, 8, 2, 3, 1, 1, false}, // register blocks: input rows and columns no window reads
    {4, 6, 6, 16, 5, 5, 16, 1, 1, 1, 1, true},  // register blocks both ways (16 channels each)
    {1, 6, 6, 64, 5, 5, 3, 1, 1, 1, 1, true},   // patch GEMM: a depth of 1600 in several blocks
    {2, 8, 8, 3, 5, 5, 5, 1, 1, 1, 1, true},    // patch GEMM: packets across taps of 3 channels
    {24, 12, 12, 9, 3, 3, 5, 1, 1, 1, 1, true}, // patch GEMM: a filter gradient over many blocks of positions
    {1, 4, 4, 128, 6, 6, 1, 1, 1, 1, 1, true},  // patch GEMM: a filter gradient in blocks of its 4608 patch columns
};

}  // namespace

TEST_CASE("conv: Conv2D and its two gradient ops equal the direct sums", "[nn][conv]") {
  for (int n_threads : {1, 2})
    for (const auto& c : conv_cases) {
      INFO(c.name() << ", " << n_threads << " threads");
      graph g;
      auto x = ph(g, "x"), f = ph(g, "f"), d = ph(g, "d");
      auto y = g.op("Conv2D", {x, f}, conv_attrs(c)).out(0);
      auto dx = g.op("Conv2DBackpropInput", {sizes(g, {c.n, c.h, c.w, c.c}), f, d}, conv_attrs(c)).out(0);
      auto df = g.op("Conv2DBackpropFilter", {x, sizes(g, {c.kh, c.kw, c.c, c.k}), d}, conv_attrs(c)).out(0);
      // The fused forward op (a session's fold of BiasAdd and Relu, written here directly).
      auto b = ph(g, "b");
      attr_map fused_attrs = conv_attrs(c);
      fused_attrs.set("relu", true);
      auto yb = g.op("_FusedConv2DBiasAdd", {x, f, b}, conv_attrs(c)).out(0);
      auto ybr = g.op("_FusedConv2DBiasAdd", {x, f, b}, fused_attrs).out(0);
      auto [oh, pt] = out_and_pad(c.h, c.kh, c.sh, c.dh, c.same);
      auto [ow, pl] = out_and_pad(c.w, c.kw, c.sw, c.dw, c.same);
      (void)pt, (void)pl;
      const shape xs{c.n, c.h, c.w, c.c}, fs{c.kh, c.kw, c.c, c.k}, ys{c.n, oh, ow, c.k};
      const auto xv = scattered(xs.num_elements(), 0.3), fv = scattered(fs.num_elements(), 1.1),
                 dv = scattered(ys.num_elements(), 2.9);
      const auto bv = scattered(c.k, 4.1);
      session s(g, intra_threads(n_threads));
      auto got = s.run({{x, tensor::from_vector(xv, xs)}, {f, tensor::from_vector(fv, fs)}, {d, tensor::from_vector(dv, ys)},
                        {b, tensor::from_vector(bv, shape{c.k})}},
                       {y, dx, df, yb, ybr});
      const conv_results want = naive_conv(c, xv, fv, dv);
      std::vector<double> want_b = want.out, want_br = want.out;
      for (std::size_t i = 0; i < want_b.size(); ++i) {
        want_b[i] += bv[i % static_cast<std::size_t>(c.k)];
        want_br[i] = std::max(want_b[i], 0.0);
      }
      CHECK(got[3].shape() == ys);
      check_close(got[3].to_vector<double>(), want_b);
      check_close(got[4].to_vector<double>(), want_br);
      CHECK(got[0].shape() == ys);
      check_close(got[0].to_vector<double>(), want.out);
      CHECK(got[1].shape() == xs);
      check_close(got[1].to_vector<double>(), want.d_in);
      CHECK(got[2].shape() == fs);
      check_close(got[2].to_vector<double>(), want.d_filter);
    }
}

TEST_CASE("conv: shapes are inferred when the graph is built, and bad windows are clear errors", "[nn][conv]") {
  graph g;
  auto x = g.placeholder(dtype::float32, {unknown_dim, 28, 28, 1}, node_options("images")).out(0);
  auto f = g.variable(dtype::float32, shape{5, 5, 1, 8}, node_options("filter")).out(0);
  auto conv = [&](const char* padding, std::vector<std::int64_t> strides) {
    return g.op("Conv2D", {x, f}, {{"strides", strides}, {"padding", std::string(padding)}});
  };
  CHECK(conv("SAME", {1, 1, 1, 1}).output_shape(0) == partial_shape{unknown_dim, 28, 28, 8});
  CHECK(conv("VALID", {1, 1, 1, 1}).output_shape(0) == partial_shape{unknown_dim, 24, 24, 8});
  CHECK(conv("SAME", {1, 3, 2, 1}).output_shape(0) == partial_shape{unknown_dim, 10, 14, 8});
  const auto& pooled = g.op("MaxPool", {conv("SAME", {1, 1, 1, 1}).out(0)},
                            {{"ksize", std::vector<std::int64_t>{1, 2, 2, 1}}, {"strides", std::vector<std::int64_t>{1, 2, 2, 1}},
                             {"padding", std::string("VALID")}});
  CHECK(pooled.output_shape(0) == partial_shape{unknown_dim, 14, 14, 8});
  // The gradient ops' shapes come from their size inputs: known for the filter.
  auto grads = add_gradients(g, {g.op("Sum", {pooled.out(0), g.constant(tensor::from_vector(std::vector<int>{0, 1, 2, 3}))}).out(0)},
                             {f});
  CHECK(g.at(grads[0]).output_shape(grads[0].port) == partial_shape{5, 5, 1, 8});

  require_error([&] { conv("SAME", {1, 0, 1, 1}); }, {"(Conv2D)", "strides must be [1, h, w, 1]", "[1,0,1,1]"});
  require_error([&] { conv("SAME", {2, 1, 1, 1}); }, {"strides must be [1, h, w, 1]"});
  require_error([&] { conv("EXPLICIT", {1, 1, 1, 1}); }, {"padding must be 'SAME' or 'VALID', got 'EXPLICIT'"});
  require_error([&] { g.op("Conv2D", {x, f}, {{"strides", std::vector<std::int64_t>{1, 1, 1, 1}}, {"padding", std::string("SAME")},
                                              {"data_format", std::string("NCHW")}}); },
                {"data_format 'NCHW' is not supported"});
  auto big = g.variable(dtype::float32, shape{30, 3, 1, 2}, node_options("big")).out(0);
  require_error([&] { g.op("Conv2D", {x, big}, {{"strides", std::vector<std::int64_t>{1, 1, 1, 1}}, {"padding", std::string("VALID")}}); },
                {"(Conv2D)", "larger than the input's dimension 1 (28) with VALID padding"});
  auto rgb = g.variable(dtype::float32, shape{3, 3, 3, 2}, node_options("rgb")).out(0);
  require_error([&] { g.op("Conv2D", {x, rgb}, {{"strides", std::vector<std::int64_t>{1, 1, 1, 1}}, {"padding", std::string("SAME")}}); },
                {"the input's channels and the filter's input channels differ (1 vs 3)"});
  auto flat = g.placeholder(dtype::float32, {unknown_dim, 784}, node_options("flat")).out(0);
  require_error([&] { g.op("Conv2D", {flat, f}, {{"strides", std::vector<std::int64_t>{1, 1, 1, 1}}, {"padding", std::string("SAME")}}); },
                {"input must have rank 4"});
}

TEST_CASE("conv: run-time shape errors name the node and the shapes", "[nn][conv]") {
  graph g;
  auto x = ph(g, "x"), f = ph(g, "f"), d = ph(g, "d");
  const conv_case c{1, 4, 4, 2, 3, 3, 1, 1, 1, 1, 1, false};
  auto y = g.op("Conv2D", {x, f}, conv_attrs(c), node_options("conv")).out(0);
  auto dx = g.op("Conv2DBackpropInput", {sizes(g, {1, 4, 4, 2}), f, d}, conv_attrs(c), node_options("conv_dx")).out(0);
  session s(g, one_thread());
  auto t = [](shape sh) { return tensor::from_vector(std::vector<double>(static_cast<std::size_t>(sh.num_elements()), 1.0), sh); };
  require_error([&] { s.run({{x, t({1, 4, 4, 3})}, {f, t({3, 3, 2, 1})}}, {y}); },
                {"node 'conv' (Conv2D)", "input's channels (3) differ from the filter's input channels (2)"});
  require_error([&] { s.run({{x, t({1, 2, 4, 2})}, {f, t({3, 3, 2, 1})}}, {y}); },
                {"node 'conv'", "3x3 window", "does not fit in the input [1,2,4,2] with VALID padding"});
  require_error([&] { s.run({{x, t({4, 4, 2})}, {f, t({3, 3, 2, 1})}}, {y}); }, {"input must have rank 4"});
  require_error([&] { s.run({{x, t({1, 4, 4, 2})}, {f, t({3, 3, 2})}}, {y}); }, {"filter must have rank 4"});
  require_error([&] { s.run({{f, t({3, 3, 2, 1})}, {d, t({1, 3, 3, 1})}}, {dx}); },
                {"node 'conv_dx' (Conv2DBackpropInput)", "out_backprop has shape [1,3,3,1]", "give [1,2,2,1]"});
}

namespace {

// Max or average pooling, and the gradients of sum(out * d) (max: to each window's first
// maximum, whose input index goes to argmax[output index] when given).
conv_results naive_pool(const conv_case& c, bool max, const std::vector<double>& in, const std::vector<double>& d,
                        std::vector<std::size_t>* argmax = nullptr) {
  auto [oh, pt] = out_and_pad(c.h, c.kh, c.sh, 1, c.same);
  auto [ow, pl] = out_and_pad(c.w, c.kw, c.sw, 1, c.same);
  conv_results r{std::vector<double>(static_cast<std::size_t>(c.n * oh * ow * c.c)), std::vector<double>(in.size()), {}};
  for (std::int64_t b = 0; b < c.n; ++b)
    for (std::int64_t y = 0; y < oh; ++y)
      for (std::int64_t x = 0; x < ow; ++x)
        for (std::int64_t ch = 0; ch < c.c; ++ch) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          std::size_t at = 0;
          int count = 0;
          for (std::int64_t iy = y * c.sh - pt; iy < y * c.sh - pt + c.kh; ++iy)
            for (std::int64_t ix = x * c.sw - pl; ix < x * c.sw - pl + c.kw; ++ix) {
              if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
              const auto i = static_cast<std::size_t>(((b * c.h + iy) * c.w + ix) * c.c + ch);
              if (count == 0 || in[i] > best) best = in[i], at = i;
              sum += in[i], ++count;
            }
          const auto o = static_cast<std::size_t>(((b * oh + y) * ow + x) * c.c + ch);
          r.out[o] = max ? best : sum / count;
          if (max) {
            r.d_in[at] += d[o];
            if (argmax) argmax->push_back(at);
          } else {
            for (std::int64_t iy = std::max<std::int64_t>(0, y * c.sh - pt); iy < std::min(c.h, y * c.sh - pt + c.kh); ++iy)
              for (std::int64_t ix = std::max<std::int64_t>(0, x * c.sw - pl); ix < std::min(c.w, x * c.sw - pl + c.kw); ++ix)
                r.d_in[static_cast<std::size_t>(((b * c.h + iy) * c.w + ix) * c.c + ch)] += d[o] / count;
          }
        }
  return r;
}

}  // namespace

TEST_CASE("conv: MaxPool, AvgPool and their gradient ops equal the direct loops", "[nn][conv]") {
  const std::vector<conv_case> cases{
      {2, 5, 5, 3, 2, 2, 0, 2, 2, 1, 1, false}, {1, 5, 6, 2, 3, 3, 0, 2, 2, 1, 1, true},
      {2, 4, 4, 1, 3, 2, 0, 1, 1, 1, 1, true},  {1, 3, 3, 2, 1, 1, 0, 1, 1, 1, 1, false},
      {1, 2, 2, 1, 3, 3, 0, 1, 1, 1, 1, true},  {0, 4, 4, 2, 2, 2, 0, 2, 2, 1, 1, true},
      // Windows that do not overlap (MaxPoolGrad writes each element once): an exact
      // tiling, a SAME tiling whose last windows reach into the padding, and strides larger
      // than the window (elements in no window).
      {2, 6, 6, 4, 2, 2, 0, 2, 2, 1, 1, false}, {1, 5, 5, 2, 2, 2, 0, 2, 2, 1, 1, true},
      {1, 5, 7, 3, 2, 2, 0, 3, 3, 1, 1, true},
      // Channels that fill SIMD packets and leave a tail (16 + 3 floats, 8 + 8 + 3 doubles
      // with AVX-512), over disjoint windows (the packet path of MaxPoolGrad) and
      // overlapping ones, in float32 as well as float64 (below).
      {2, 6, 6, 19, 2, 2, 0, 2, 2, 1, 1, false}, {1, 5, 5, 19, 2, 2, 0, 2, 2, 1, 1, true},
      {1, 5, 7, 17, 2, 2, 0, 3, 3, 1, 1, true},  {1, 5, 5, 19, 3, 3, 0, 2, 2, 1, 1, true},
      {2, 4, 4, 32, 2, 2, 0, 2, 2, 1, 1, false},
  };
  for (int n_threads : {1, 2})
    for (const auto& c : cases)
      for (dtype t : {dtype::float64, dtype::float32}) {
        if (t == dtype::float32 && c.c < 16) continue;
        INFO(c.name() << ", " << n_threads << " threads, " << t);
        graph g;
        auto x = ph(g, "x", t), d = ph(g, "d", t);
        auto mp = g.op("MaxPool", {x}, pool_attrs(c)).out(0);
        auto ap = g.op("AvgPool", {x}, pool_attrs(c)).out(0);
        auto mg = g.op("MaxPoolGrad", {x, mp, d}, pool_attrs(c)).out(0);
        auto ag = g.op("AvgPoolGrad", {sizes(g, {c.n, c.h, c.w, c.c}), d}, pool_attrs(c)).out(0);
        auto e = ph(g, "e", t);
        auto mgg = g.op("MaxPoolGradGrad", {x, mp, e}, pool_attrs(c)).out(0);
        auto masked = g.op("_FusedMaxPoolGradReluGrad", {x, mp, d}, pool_attrs(c)).out(0);
        auto [oh, pt] = out_and_pad(c.h, c.kh, c.sh, 1, c.same);
        auto [ow, pl] = out_and_pad(c.w, c.kw, c.sw, 1, c.same);
        (void)pt, (void)pl;
        const shape xs{c.n, c.h, c.w, c.c}, ys{c.n, oh, ow, c.c};
        // float32's values are the doubles rounded, so that the loops below see what it sees.
        auto values = [&](std::int64_t n, double salt) {
          auto v = scattered(n, salt);
          if (t == dtype::float32)
            for (double& a : v) a = static_cast<float>(a);
          return v;
        };
        auto feed = [&](const std::vector<double>& v, const shape& sh) {
          return t == dtype::float32 ? tensor::from_vector(std::vector<float>(v.begin(), v.end()), sh)
                                     : tensor::from_vector(v, sh);
        };
        const auto xv = values(xs.num_elements(), 0.7), dv = values(ys.num_elements(), 1.9);
        session s(g, intra_threads(n_threads));
        const auto ev = values(xs.num_elements(), 1.3);
        auto got = s.run({{x, feed(xv, xs)}, {d, feed(dv, ys)}, {e, feed(ev, xs)}}, {mp, ap, mg, ag, mgg, masked});
        const double tol = t == dtype::float32 ? 1e-6 : 1e-12;
        auto back = [&](std::size_t i) {
          if (t == dtype::float64) return got[i].to_vector<double>();
          const auto f = got[i].to_vector<float>();
          return std::vector<double>(f.begin(), f.end());
        };
        std::vector<std::size_t> argmax;
        const conv_results mx = naive_pool(c, true, xv, dv, &argmax), av = naive_pool(c, false, xv, dv);
        std::vector<double> want_mgg;
        for (std::size_t at : argmax) want_mgg.push_back(ev[at]);
        CHECK(got[0].shape() == ys);
        CHECK(back(0) == mx.out);  // a maximum is one of the values, exactly
        check_close(back(1), av.out, tol);
        CHECK(got[2].shape() == xs);
        check_close(back(2), mx.d_in, tol);
        check_close(back(3), av.d_in, tol);
        CHECK(got[4].shape() == ys);
        check_close(back(4), want_mgg, tol);
        // MaxPoolGrad's gradient where the input is above 0 (ReluGrad's mask by the input).
        std::vector<double> want_masked = mx.d_in;
        for (std::size_t i = 0; i < want_masked.size(); ++i)
          if (!(xv[i] > 0)) want_masked[i] = 0;
        CHECK(got[5].shape() == xs);
        check_close(back(5), want_masked, tol);
      }
  // A tie sends the window's gradient to its first maximum, in row-major order.
  graph g;
  auto x = ph(g, "x");
  const conv_case c{1, 2, 2, 1, 2, 2, 0, 2, 2, 1, 1, false};
  auto mp = g.op("MaxPool", {x}, pool_attrs(c)).out(0);
  auto mg = g.op("MaxPoolGrad", {x, mp, g.constant(tensor::from_vector(std::vector<double>{5}, shape{1, 1, 1, 1}))}, pool_attrs(c),
                 node_options("max_grad")).out(0);
  auto tied = eval(g, mg, {{x, tensor::from_vector(std::vector<double>{1, 3, 3, 0}, shape{1, 2, 2, 1})}}).to_vector<double>();
  CHECK(tied == std::vector<double>{0, 5, 0, 0});
  {
    // The same across whole packets of float channels: channel ch's window holds
    // {1, 3, 3, 0} turned by ch, its 3s tied; channel 18's first element a NaN (greater than
    // nothing, and nothing greater than it: it stays the maximum); 20 channels: a packet and
    // a tail.
    graph h;
    const std::int64_t nc = 20;
    auto hx = h.placeholder(dtype::float32, shape{1, 2, 2, nc}, node_options("x")).out(0);
    auto hp = h.op("MaxPool", {hx}, pool_attrs(c)).out(0);
    std::vector<float> grads(static_cast<std::size_t>(nc)), xs(static_cast<std::size_t>(4 * nc));
    const float pattern[4] = {1, 3, 3, 0};
    for (std::int64_t ch = 0; ch < nc; ++ch) {
      grads[static_cast<std::size_t>(ch)] = 10.0f + static_cast<float>(ch);
      for (std::int64_t k = 0; k < 4; ++k) xs[static_cast<std::size_t>(k * nc + ch)] = pattern[(k + ch) % 4];
    }
    xs[18] = std::numeric_limits<float>::quiet_NaN();
    auto hg = h.op("MaxPoolGrad", {hx, hp, h.constant(tensor::from_vector(grads, shape{1, 1, 1, nc}))}, pool_attrs(c)).out(0);
    const auto got = eval(h, hg, {{hx, tensor::from_vector(xs, shape{1, 2, 2, nc})}}).to_vector<float>();
    for (std::int64_t ch = 0; ch < nc; ++ch) {
      std::int64_t first = 0;  // the first k whose value is 3 after the turn
      while (pattern[(first + ch) % 4] != 3) ++first;
      if (ch == 18) first = 0;
      for (std::int64_t k = 0; k < 4; ++k) {
        INFO("channel " << ch << ", element " << k);
        CHECK(got[static_cast<std::size_t>(k * nc + ch)] == (k == first ? 10.0f + static_cast<float>(ch) : 0.0f));
      }
    }
  }
  session s(g, one_thread());
  require_error([&] { s.run({{x, tensor::from_vector(std::vector<double>(8), shape{1, 2, 4, 1})}}, {mg}); },
                {"node 'max_grad' (MaxPoolGrad)", "grad has shape [1,1,1,1]", "give [1,1,2,1]"});
}

TEST_CASE("conv: half types compute in float", "[nn][conv]") {
  const conv_case c{1, 5, 5, 2, 3, 3, 2, 1, 1, 1, 1, true};
  const auto xv = scattered(50, 0.3), fv = scattered(36, 1.1);
  const conv_results want = naive_conv(c, xv, fv, std::vector<double>(50, 0.0));
  for (dtype t : {dtype::float16, dtype::bfloat16, dtype::float32}) {
    INFO(t);
    graph g;
    auto cast = [&](const std::vector<double>& v, shape s) {
      return g.op("Cast", {g.constant(tensor::from_vector(v, std::move(s)))}, {{"DstT", t}}).out(0);
    };
    auto y = g.op("Conv2D", {cast(xv, {1, 5, 5, 2}), cast(fv, {3, 3, 2, 2})}, conv_attrs(c)).out(0);
    auto back = g.op("Cast", {y}, {{"DstT", dtype::float64}}).out(0);
    CHECK(g.at(y).output_dtype(0) == t);
    check_close(eval(g, back).to_vector<double>(), want.out, t == dtype::float32 ? 1e-5 : t == dtype::float16 ? 1e-2 : 5e-2);
  }
}

TEST_CASE("conv: Dropout keeps 1 - rate of the elements, scaled, and its gradient is the mask", "[nn][conv]") {
  graph g;
  auto x = ph(g, "x", dtype::float32);
  auto rate = g.placeholder(dtype::float32, shape{}, node_options("rate")).out(0);
  const auto& drop = g.op("Dropout", {x, rate}, {{"seed", std::int64_t{7}}}, node_options("dropout"));
  auto y = drop.out(0), mask = drop.out(1);
  auto dx = add_gradients(g, {y}, {x})[0];
  const std::int64_t n = 20000;
  std::vector<float> xv(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = 0.5f + static_cast<float>(i % 7);
  const tensor xt = tensor::from_vector(xv, shape{n});
  auto run = [&](session& s, float r) { return s.run({{x, xt}, {rate, tensor::scalar(r)}}, {y, mask, dx}); };
  session s(g, intra_threads(2));
  auto first = run(s, 0.3f);
  const auto yv = first[0].to_vector<float>(), mv = first[1].to_vector<float>(), dv = first[2].to_vector<float>();
  std::int64_t kept = 0;
  bool all_ok = true;
  for (std::size_t i = 0; i < yv.size(); ++i) {
    const bool k = mv[i] != 0;
    kept += k;
    all_ok = all_ok && (k ? std::abs(mv[i] - 1 / 0.7f) < 1e-6f : mv[i] == 0) && yv[i] == xv[i] * mv[i] && dv[i] == mv[i];
  }
  CHECK(all_ok);
  CHECK(std::abs(static_cast<double>(kept) / n - 0.7) < 0.02);  // 0.7 +- 6 standard deviations
  // Each run draws a new mask; a new session of the same graph draws the same masks again.
  CHECK(run(s, 0.3f)[1].to_vector<float>() != mv);
  session again(g, one_thread());
  CHECK(run(again, 0.3f)[1].to_vector<float>() == mv);
  // Rate 0 keeps everything; a rate outside [0, 1) is an error.
  CHECK(run(s, 0.0f)[0].to_vector<float>() == xv);
  require_error([&] { run(s, 1.0f); }, {"node 'dropout' (Dropout)", "rate must be in [0, 1), got 1"});
  require_error([&] { run(s, -0.5f); }, {"rate must be in [0, 1), got -0.5"});
  require_error([&] { g.op("Dropout", {x, g.constant(tensor::from_vector(std::vector<float>{0.1f, 0.2f})).out(0)}); }, {"(Dropout)", "rate must have rank 0"});
}
