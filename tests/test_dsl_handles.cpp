// The DSL's type-erased handles, raw (op-by-name) nodes, lowering memoization, and the
// array and matrix ops of dsl/array_ops.hpp, against values computed by hand or by naive loops.
#include <weft/dsl.hpp>

#include "support/dsl_helpers.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

using namespace weft;

namespace {

using weft::test::count_op;

std::vector<float> iota(std::size_t n, float start = 0) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

}  // namespace

TEST_CASE("dsl: handles erase the expression type and keep dtype and shape", "[dsl][handle]") {
  auto x = placeholder<float>("x", dims<dyn, 4>);
  handle<float, dyn, 4> h = x;
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(h)>, static_shape<dyn, 4>>);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(h)>, float>);
  // A static dim converts to a dyn one; the handle's type does not grow with the model.
  handle<float, dyn, dyn> loose = h;
  STATIC_REQUIRE(std::is_same_v<decltype(relu(h) * 2.0f + h), op_expr<elementwise_op<tags::add, float>, float,
                                                                       static_shape<dyn, 4>,
                                                                       decltype(relu(h) * 2.0f), handle<float, dyn, 4>>>);

  // Four layers built in a runtime loop, against the same layers written out.
  constexpr int layers = 4;
  std::vector<variable_expr<float, static_shape<4, 4>>> w;
  for (int i = 0; i < layers; ++i) {
    std::vector<float> wv(16);
    for (int j = 0; j < 16; ++j) wv[static_cast<std::size_t>(j)] = 0.1f * static_cast<float>((i + j) % 5) - 0.15f;
    w.push_back(variable<float>("w" + std::to_string(i), dims<4, 4>, tensor_of<float, 2>(wv, {4, 4})));
  }
  for (int i = 0; i < layers; ++i) h = tanh(matmul(h, w[static_cast<std::size_t>(i)]));
  auto unrolled = tanh(matmul(tanh(matmul(tanh(matmul(tanh(matmul(x, w[0])), w[1])), w[2])), w[3]));

  client_session s;
  s.initialize(h);
  std::vector<float> xv = iota(8, -3.0f);
  auto [a, b, l] = s.run(fetch(h, unrolled, loose), feed(x, tensor_of<float, 2>(xv, {2, 4})));
  REQUIRE(a.shape() == shape{2, 4});
  // The same nodes: CSE merges the handle chain with the unrolled expression.
  CHECK(count_op(s.current_graph(), "MatMul") == layers);
  for (int r = 0; r < 2; ++r) {
    std::vector<double> row(xv.begin() + r * 4, xv.begin() + r * 4 + 4);
    for (int i = 0; i < layers; ++i) {
      std::vector<double> next(4, 0.0);
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 4; ++k)
          next[static_cast<std::size_t>(j)] +=
              row[static_cast<std::size_t>(k)] * (0.1 * ((i + k * 4 + j) % 5) - 0.15);
      for (auto& e : next) e = std::tanh(e);
      row = next;
    }
    for (int j = 0; j < 4; ++j) {
      CHECK(a(r, j) == Approx(row[static_cast<std::size_t>(j)]).margin(1e-5));
      CHECK(b(r, j) == a(r, j));
    }
    CHECK(l(r, 2) == xv[static_cast<std::size_t>(r * 4 + 2)]);
  }

  // An empty handle is an error when lowered, not a crash.
  handle<float, dyn, 4> empty;
  CHECK(empty.empty());
  CHECK_THROWS_WITH(s.run(empty + 1.0f), Catch::Contains("empty handle") && Catch::Contains("float32[?,4]"));
}

TEST_CASE("dsl: each expression is lowered once per session", "[dsl][memo]") {
  auto v = variable<float>("v", dims<3>, 0.0f);
  auto r = random_uniform<float>(dims<3>, 5);
  auto step = assign_add(v, r);
  client_session s;
  s.initialize(v);
  s.run(targets(step));
  int size = s.current_graph().size();
  // The same expression objects (and their copies) add no node on later runs, not even the
  // stateful ones that CSE never merges.
  auto copy = step;
  s.run(targets(copy));
  auto sample = s.run(r);
  CHECK(s.current_graph().size() == size);
  CHECK(count_op(s.current_graph(), "RandomUniform") == 1);
  CHECK(count_op(s.current_graph(), "AssignAdd") == 1);
  for (float e : sample.flat()) CHECK((e >= 0.0f && e < 1.0f));
  // A new session lowers the expression into its own graph.
  client_session other;
  other.initialize(v);
  other.run(targets(step));
  CHECK(count_op(other.current_graph(), "AssignAdd") == 1);
}

TEST_CASE("dsl: raw ops built by name are consumed by typed code", "[dsl][raw]") {
  cpu::register_array_kernels();  // raw ops need their kernels; the typed ones register themselves
  auto x = placeholder<float>("x", dims<dyn, 3>);
  // Tile by name inside a typed expression, then typed ops on the result.
  std::vector<operand> in{x, constant<std::int64_t>({2, 1}, dims<2>)};
  auto tiled = raw_op<float, dyn, 3>("Tile", in);
  auto y = tiled * 2.0f;
  client_session s;
  auto out = s.run(y, feed(x, tensor_of<float, 2>(iota(3, 1.0f), {1, 3})));
  REQUIRE(out.shape() == shape{2, 3});
  CHECK(out.to_vector() == std::vector<float>{2, 4, 6, 2, 4, 6});

  // A raw op whose dtype or shape does not fit the handle: an error naming the node.
  auto wrong = raw_op<double, dyn, 3>("Identity", {x});
  CHECK_THROWS_WITH(s.run(wrong), Catch::Contains("weft::raw_op") && Catch::Contains("Identity") &&
                                      Catch::Contains("float32[?,3]") && Catch::Contains("float64[?,3]"));
  auto wrong_rank = raw_op<float, dyn>("Identity", {x});
  CHECK_THROWS_WITH(s.run(wrong_rank), Catch::Contains("float32[?]"));
  auto unknown = raw_op<float, dyn>("NoSuchOp", {x});
  CHECK_THROWS_WITH(s.run(unknown), Catch::Contains("NoSuchOp"));
  // Split's second output, by port.
  auto half = raw_op<float, dyn, 3>("Split", {constant(std::int32_t{0}), tiled}, {{"num_split", std::int64_t{2}}}, 1);
  CHECK(s.run(half, feed(x, tensor_of<float, 2>(iota(3), {1, 3}))).to_vector() == std::vector<float>{0, 1, 2});

  // The reverse: a graph built op by op around typed expressions, and its nodes wrapped
  // back as typed handles.
  graph g;
  lowering cx(g);
  output typed = weft::lower(cx, matmul(x, constant<float>({1, 0, 0, 1, 1, 1}, dims<3, 2>)));
  tags::negate::register_kernel<float>();  // the op family and the one kernel g needs
  const node& neg = g.op("Neg", {typed});
  auto back = wrap<float, dyn, 2>(g, neg.out(0));
  output sum = weft::lower(cx, reduce_sum(back, axes<1>));
  CHECK(g.at(sum).op() == "Sum");
  CHECK_THROWS_WITH((wrap<float, dyn, 3>(g, neg.out(0))), Catch::Contains("weft::wrap") && Catch::Contains("Neg"));
  // Lowering the wrapped node into another graph is an error.
  CHECK_THROWS_WITH(s.run(back), Catch::Contains("another graph"));
  session run(g);
  auto result = run.run({{"x", tensor::from_vector(iota(6), shape{2, 3})}}, {sum});
  // x = [[0,1,2],[3,4,5]]; x·W = [[0+2, 1+2], [3+5, 4+5]]; -sum per row = [-5, -17]
  CHECK(result[0].flat<float>()[0] == -5.0f);
  CHECK(result[0].flat<float>()[1] == -17.0f);
}

TEST_CASE("dsl: slice, pad and tile", "[dsl][array]") {
  auto m = constant<float>(iota(12), dims<3, 4>);  // [[0..3],[4..7],[8..11]]
  auto p = placeholder<float>("p", dims<dyn, 4>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(slice(m, offsets<1, 1>, dims<2, dyn>))>, static_shape<2, 3>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(slice(p, offsets<1, 1>, dims<dyn, 2>))>, static_shape<dyn, 2>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(pad(m, paddings<1, 0, 2, 2>))>, static_shape<4, 8>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(pad(p, paddings<1, 0, 2, 2>))>, static_shape<dyn, 8>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(tile(p, multiples<2, 3>))>, static_shape<dyn, 12>>);
  client_session s;
  CHECK(s.run(slice(m, offsets<1, 1>, dims<2, dyn>)).to_vector() == std::vector<float>{5, 6, 7, 9, 10, 11});
  CHECK(s.run(slice(m, offsets<0, 3>, dims<3, 1>)).to_vector() == std::vector<float>{3, 7, 11});
  CHECK(s.run(slice(m, offsets<3, 0>, dims<0, 4>)).shape() == shape{0, 4});  // empty
  auto padded = s.run(pad(m, paddings<1, 0, 2, 2>));
  REQUIRE(padded.shape() == shape{4, 8});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) {
      bool inside = i >= 1 && j >= 2 && j < 6;
      CHECK(padded(i, j) == (inside ? static_cast<float>((i - 1) * 4 + (j - 2)) : 0.0f));
    }
  auto tiled = s.run(tile(m, multiples<2, 2>));
  REQUIRE(tiled.shape() == shape{6, 8});
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 8; ++j) CHECK(tiled(i, j) == static_cast<float>((i % 3) * 4 + j % 4));
  // A dyn dim too short for the slice: a run-time error naming the node and the range.
  auto past = slice(p, offsets<2, 0>, dims<2, 4>);
  CHECK_THROWS_WITH(s.run(past, feed(p, tensor_of<float, 2>(iota(12), {3, 4}))),
                    Catch::Contains("Slice") && Catch::Contains("out of range"));
  // Rank 0: a scalar tiles and pads to itself.
  CHECK(s.run(tile(constant(2.5f), multiples<>)).scalar() == 2.5f);
}

TEST_CASE("dsl: gather, one_hot and split", "[dsl][array]") {
  auto m = constant<float>(iota(12), dims<3, 4>);
  auto idx = placeholder<std::int32_t>("idx", dims<dyn>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(gather(m, idx))>, static_shape<dyn, 4>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(gather(m, idx, axes<1>))>, static_shape<3, dyn>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(one_hot<10>(idx))>, static_shape<dyn, 10>>);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(one_hot<10, double>(idx))>, double>);
  client_session s;
  std::vector<std::int32_t> rows{2, 0, 2};
  auto g = s.run(gather(m, idx), feed(idx, tensor_of<std::int32_t, 1>(rows, {3})));
  REQUIRE(g.shape() == shape{3, 4});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) CHECK(g(i, j) == static_cast<float>(rows[static_cast<std::size_t>(i)] * 4 + j));
  auto cols = s.run(gather(m, idx, axes<1>), feed(idx, tensor_of<std::int32_t, 1>(std::vector<std::int32_t>{3, 1}, {2})));
  CHECK(cols.to_vector() == std::vector<float>{3, 1, 7, 5, 11, 9});
  CHECK_THROWS_WITH(s.run(gather(m, idx), feed(idx, tensor_of<std::int32_t, 1>(std::vector<std::int32_t>{3}, {1}))),
                    Catch::Contains("GatherV2"));
  auto oh = s.run(one_hot<4>(idx, 5.0f, -1.0f), feed(idx, tensor_of<std::int32_t, 1>(std::vector<std::int32_t>{1, 3, 7}, {3})));
  REQUIRE(oh.shape() == shape{3, 4});
  CHECK(oh.to_vector() == std::vector<float>{-1, 5, -1, -1, -1, -1, -1, 5, -1, -1, -1, -1});  // 7: all off
  auto parts = split<2, 1>(m);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(parts[1])>, static_shape<3, 2>>);
  auto [left, right] = s.run(fetch(parts[0], parts[1]));
  CHECK(left.to_vector() == std::vector<float>{0, 1, 4, 5, 8, 9});
  CHECK(right.to_vector() == std::vector<float>{2, 3, 6, 7, 10, 11});
  CHECK(count_op(s.current_graph(), "Split") == 1);  // one node, two outputs
}

TEST_CASE("dsl: shape, rank and size tensors", "[dsl][array]") {
  auto p = placeholder<double>("p", dims<dyn, 2, dyn>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(shape_tensor(p))>, static_shape<3>>);
  STATIC_REQUIRE(std::is_same_v<value_type_of<decltype(shape_tensor<std::int64_t>(p))>, std::int64_t>);
  client_session s;
  auto f = feed(p, tensor_of<double, 3>(std::vector<double>(30), {5, 2, 3}));
  auto [sh, rk, sz] = s.run(fetch(shape_tensor<std::int64_t>(p), rank_tensor(p), size_tensor(p)), f);
  CHECK(sh.to_vector() == std::vector<std::int64_t>{5, 2, 3});
  CHECK(rk.scalar() == 3);
  CHECK(sz.scalar() == 30);
  CHECK(s.run(size_tensor(constant(1.0f))).scalar() == 1);  // rank 0
  CHECK(s.run(shape_tensor(constant(1.0f))).shape() == shape{0});
}

TEST_CASE("dsl: batch_matmul, matrix_inverse and matrix_determinant", "[dsl][matrix]") {
  // Two 2x3 matrices times one 3x2 matrix (the batch dim broadcasts).
  auto x = constant<double>({1, 2, 3, 4, 5, 6, -1, 0, 1, 2, 0, -2}, dims<2, 2, 3>);
  auto y = constant<double>({1, 0, 0, 1, 1, 1}, dims<1, 3, 2>);
  auto xy = batch_matmul(x, y);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(xy)>, static_shape<2, 2, 2>>);
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(batch_matmul<true, false>(x, x))>, static_shape<2, 3, 3>>);
  client_session s;
  // By hand: row·[[1,0],[0,1],[1,1]] = (r0 + r2, r1 + r2).
  CHECK(s.run(xy).to_vector() == std::vector<double>{4, 5, 10, 11, 0, 1, 0, -2});
  auto a = constant<double>({4, 7, 2, 6}, dims<2, 2>);
  auto inv = s.run(matrix_inverse(a));
  // inverse of [[4,7],[2,6]] = [[0.6,-0.7],[-0.2,0.4]]
  CHECK(inv(0, 0) == Approx(0.6));
  CHECK(inv(0, 1) == Approx(-0.7));
  CHECK(inv(1, 0) == Approx(-0.2));
  CHECK(inv(1, 1) == Approx(0.4));
  STATIC_REQUIRE(std::is_same_v<shape_of<decltype(matrix_determinant(placeholder<double>("b", dims<5, 3, 3>)))>,
                                static_shape<5>>);
  CHECK(s.run(matrix_determinant(a)).scalar() == Approx(10.0));
  auto singular = constant<double>({1, 2, 2, 4}, dims<2, 2>);
  CHECK_THROWS_WITH(s.run(matrix_inverse(singular)), Catch::Contains("MatrixInverse") && Catch::Contains("not invertible"));
  auto sq = placeholder<float>("sq", dims<dyn, dyn>);
  CHECK_THROWS_WITH(s.run(matrix_determinant(sq), feed(sq, tensor_of<float, 2>(std::vector<float>(6), {2, 3}))),
                    Catch::Contains("square"));
}

TEST_CASE("dsl: colocate_with puts nodes in the group of an expression's node", "[dsl][scopes]") {
  auto w = variable<float>("w", dims<3>, 1.0f);
  auto x = placeholder<float>("x", dims<3>);
  auto update = [&] {
    colocate_with c(w);
    return assign_sub(w, x * 0.5f);
  }();
  client_options o;
  o.fusion = false;
  client_session s(o);
  s.initialize(w);
  s.run(targets(update), feed(x, tensor_of<float, 1>(std::vector<float>{2, 4, -2}, {3})));
  CHECK(s.run(w).to_vector() == std::vector<float>{0, -1, 2});
  const graph& g = s.current_graph();
  CHECK(g["AssignSub"].colocation() == "w");
  CHECK(g["Mul"].colocation() == "w");
  CHECK(g["w"].colocation().empty());
  // The same expression outside the scope is another node (CSE keeps colocations apart).
  output outside = s.lower(x * 0.5f);
  CHECK(g.at(outside).name() != "Mul");
  CHECK(g.at(outside).colocation().empty());
  // A device that conflicts with the group's is an error naming both.
  auto v = [] {
    device_scope d("/cpu:0");
    return variable<float>("v", dims<3>, 0.0f);
  }();
  auto bad = [&] {
    colocate_with c(v);
    device_scope d("/cpu:1");
    return v + 1.0f;
  }();
  CHECK_THROWS_WITH(s.lower(bad), Catch::Contains("requests device '/cpu:1'") && Catch::Contains("node 'v'"));
  // v was lowered before the failure; the session still runs it.
  s.initialize(v);
  CHECK(s.run(v).to_vector() == std::vector<float>{0, 0, 0});
}

TEST_CASE("dsl: group runs several updates as one target", "[dsl][state]") {
  auto a = variable<std::int64_t>("a", dims<>, std::int64_t{0});
  auto b = variable<std::int64_t>("b", dims<2>, std::int64_t{1});
  auto step = group(assign_add(a, constant(std::int64_t{3})), assign_sub(b, constant<std::int64_t>({1, 2}, dims<2>)));
  client_session s;
  s.initialize(a, b);
  s.run(targets(step));
  s.run(targets(step));
  CHECK(s.run(a).scalar() == 6);
  CHECK(s.run(b).to_vector() == std::vector<std::int64_t>{-1, -3});
  const graph& g = s.current_graph();
  const node& noop = g["group"];
  CHECK(noop.op() == "NoOp");
  CHECK(noop.control_inputs().size() == 2);
  CHECK(g.find("group_1") == nullptr);  // the second run lowered nothing new
}

TEST_CASE("dsl: one client_session used from two threads", "[dsl][threads]") {
  auto x = placeholder<float>("x", dims<dyn>);
  auto shared = tanh(x) * 2.0f + 1.0f;  // lowered by both threads, memoized once
  client_session s;
  std::vector<std::string> errors(2);
  auto work = [&](int t) {
    try {
      for (int i = 0; i < 25; ++i) {
        float v = static_cast<float>(t * 100 + i) * 0.01f;
        auto own = x * static_cast<float>(t + 1) - 0.5f;  // built anew each time: found again by CSE
        auto [a, b] = s.run(fetch(shared, own), feed(x, tensor_of<float, 1>(std::vector<float>{v, -v}, {2})));
        if (std::abs(a(0) - (std::tanh(v) * 2 + 1)) > 1e-5f || b(1) != -v * static_cast<float>(t + 1) - 0.5f)
          errors[static_cast<std::size_t>(t)] = "wrong value at step " + std::to_string(i);
      }
    } catch (const std::exception& e) {
      errors[static_cast<std::size_t>(t)] = e.what();
    }
  };
  std::thread t0(work, 0), t1(work, 1);
  t0.join();
  t1.join();
  CHECK(errors[0].empty());
  CHECK(errors[1].empty());
  CHECK(count_op(s.current_graph(), "Fused") == 3);  // shared, and one `own` per thread
}
