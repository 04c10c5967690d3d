// Model bundles (runtime/model.hpp): save_model, load_model, signatures, freeze_graph.
// Loading in another process is tests/model_save.cpp and tests/model_load.cpp (ctest
// runtime.model_in_another_process).
#include "support/helpers.hpp"

#include <weft/runtime/model.hpp>

#include <fstream>
#include <sstream>

using namespace weft;

namespace {

std::string model_slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A small model: y = relu(x w + b), z = x (2 w) (the doubled weights fold once frozen),
// and a training step that changes w.
struct model_fixture {
  graph g;
  output x, y, z;
  std::vector<tensor> inputs;
  model_fixture() {
    ops::register_standard_ops();
    x = g.placeholder(dtype::float32, partial_shape{unknown_dim, 3}, "x");
    auto& w = g.variable(dtype::float32, partial_shape{3, 2}, "dense/w");
    auto& b = g.variable(dtype::float32, partial_shape{2}, "dense/b");
    auto& init_w = g.op("Assign", {w, g.constant(tensor::of<float>({3, 2}, {1, -1, 0.5f, 2, -2, 0.25f}))}, {}, "init/w");
    auto& init_b = g.op("Assign", {b, g.constant(tensor::of<float>({2}, {0.5f, -0.5f}))}, {}, "init/b");
    g.op("NoOp", {}, {}, node_options("init").after({init_w.id(), init_b.id()}));
    auto& read_w = g.op("Identity", {w}, {}, "dense/w/read");
    y = g.op("Relu", {g.op("BiasAdd", {g.op("MatMul", {x, read_w}, {}, "dense/MatMul"), g.op("Identity", {b}, {}, "dense/b/read")}, {}, "dense/BiasAdd")}, {}, "y");
    auto& twice = g.op("Mul", {read_w, g.constant(tensor::scalar(2.0f), "two")}, {}, "twice");
    z = g.op("MatMul", {x, twice}, {}, "z");
    g.op("AssignAdd", {w, g.constant(tensor::filled<float>({3, 2}, 0.125f))}, {}, "train");
  }
  // A session with the variables initialized and trained once.
  std::unique_ptr<session> trained() {
    auto s = std::make_unique<session>(g, test::one_thread());
    s->run({}, {}, {"init"});
    s->run({}, {}, {"train"});
    return s;
  }
  signature serving() const { return make_signature(g, "serving_default", {{"x", x}}, {{"y", y}, {"z", z}}); }
};

// What the model computes, by hand: w = init + 0.125, y = relu(x w + b), z = x (2 w).
std::vector<std::vector<float>> model_by_hand(const std::vector<float>& x) {
  const float w[3][2] = {{1.125f, -0.875f}, {0.625f, 2.125f}, {-1.875f, 0.375f}};
  const float b[2] = {0.5f, -0.5f};
  const std::size_t rows = x.size() / 3;
  std::vector<float> y, z;
  for (std::size_t r = 0; r < rows; ++r)
    for (int j = 0; j < 2; ++j) {
      float s = 0;
      for (int k = 0; k < 3; ++k) s += x[r * 3 + static_cast<std::size_t>(k)] * w[k][j];
      y.push_back(std::max(0.0f, s + b[j]));
      z.push_back(2 * s);
    }
  return {y, z};
}

}  // namespace

TEST_CASE("model: a saved bundle loads with its variables and signatures and runs") {
  model_fixture f;
  auto s = f.trained();
  test::temp_dir dir("weft_model");
  const auto path = dir.path / "m.weft";
  save_model(path, *s, f.g, {f.serving(), make_signature(f.g, "just_y", {{"in", f.x}}, {{"out", f.y}})});

  model_bundle m = load_model(path, test::one_thread());
  CHECK(m.graph().size() == f.g.size());  // the restore step is the session's, not the graph's
  REQUIRE(m.signatures().size() == 2);
  CHECK(m.signatures()[0] == f.serving());
  CHECK(m.signature("just_y").inputs[0].tensor == "x:0");
  const std::vector<float> x{1, 2, 3, -1, 0.5f, 0};
  const auto want = model_by_hand(x);
  const auto got = m.run("serving_default", {{"x", tensor::from_vector(x, shape{2, 3})}});
  REQUIRE(got.size() == 2);
  CHECK(got[0].to_vector<float>() == want[0]);
  CHECK(got[1].to_vector<float>() == want[1]);
  CHECK(m.run("just_y", {{"in", tensor::from_vector(x, shape{2, 3})}})[0].to_vector<float>() == want[0]);
  // The variables are the trained ones, and the loaded model trains on.
  m.session().run({}, {}, {"train"});
  CHECK(m.session().run({}, {"dense/w/read"})[0].to_vector<float>()[0] == 1.25f);

  // Saving the loaded model writes the same bundle again (its variables after one more step aside).
  const auto again = dir.path / "again.weft";
  auto fresh = load_model(path, test::one_thread());
  save_model(again, fresh.session(), fresh.graph(), fresh.signatures());
  CHECK(model_slurp(again) == model_slurp(path));

  // Errors name the signature and key.
  const tensor good = tensor::from_vector(x, shape{2, 3});
  test::require_error([&] { m.run("nope", {}); }, {"model: no signature named 'nope' (it has 'serving_default', 'just_y')"});
  test::require_error([&] { m.run("serving_default", {}); }, {"signature 'serving_default' needs input 'x' (float32[?,3])"});
  test::require_error([&] { m.run("serving_default", {{"x", good}, {"q", good}}); },
                      {"signature 'serving_default' has no input 'q' (its inputs: 'x')"});
  test::require_error([&] { m.run("serving_default", {{"x", good}, {"x", good}}); }, {"input 'x' is given twice"});
  test::require_error([&] { m.run("serving_default", {{"x", tensor::of<double>({1, 3}, {1, 2, 3})}}); },
                      {"signature 'serving_default' input 'x' takes float32[?,3], got float64[1,3]"});
  test::require_error([&] { m.run("serving_default", {{"x", tensor::of<float>({1, 2}, {1, 2})}}); }, {"got float32[1,2]"});
}

TEST_CASE("model: a frozen bundle has no variables, folds constants, and computes the same") {
  model_fixture f;
  auto s = f.trained();
  // freeze_graph itself: Consts for variables, the training and init nodes gone, 2 w folded.
  graph frozen = freeze_graph(f.g, *s, {f.y, f.z}, {f.x});
  for (int id = 0; id < frozen.size(); ++id) {
    INFO(frozen.at(id).describe());
    CHECK_FALSE(frozen.at(id).def().variable);
    CHECK(frozen.at(id).op() != "Assign");
    CHECK(frozen.at(id).op() != "AssignAdd");
  }
  CHECK(frozen.find("train") == nullptr);
  CHECK(frozen.find("init") == nullptr);
  CHECK(frozen.find("twice") == nullptr);  // folded away
  REQUIRE(frozen.find("twice/folded"));
  CHECK(frozen["twice/folded"].op() == "Const");
  CHECK(frozen["twice/folded"].attr<tensor>("value").to_vector<float>() ==
        std::vector<float>{2.25f, -1.75f, 1.25f, 4.25f, -3.75f, 0.75f});
  CHECK(frozen.find("dense/w") == nullptr);  // its Const folded into dense/w/read's
  CHECK(frozen["dense/w/read/folded"].op() == "Const");

  test::temp_dir dir("weft_model_frozen");
  save_model(dir.path / "full.weft", *s, f.g, {f.serving()});
  save_model(dir.path / "frozen.weft", *s, f.g, {f.serving()}, {.freeze = true});
  model_bundle full = load_model(dir.path / "full.weft", test::one_thread());
  model_bundle cold = load_model(dir.path / "frozen.weft", test::one_thread());
  CHECK(cold.graph().size() < full.graph().size());
  const std::vector<float> x{0.5f, -1, 2, 3, 3, 3, 0, 0, 0};
  const auto a = full.run("serving_default", {{"x", tensor::from_vector(x, shape{3, 3})}});
  const auto b = cold.run("serving_default", {{"x", tensor::from_vector(x, shape{3, 3})}});
  CHECK(a[0].to_vector<float>() == b[0].to_vector<float>());
  CHECK(a[1].to_vector<float>() == b[1].to_vector<float>());
  CHECK(b[0].to_vector<float>() == model_by_hand(x)[0]);

  // Device requests stay, or are cleared for a machine without the device.
  graph d;
  auto& da = d.placeholder(dtype::float32, partial_shape{2}, node_options("a").on("/cpu:0"));
  auto& db = d.op("Neg", {da}, {}, node_options("b").on("/cpu:0"));
  session sd(d, test::one_thread());
  const auto sig_d = make_signature(d, "s", {{"a", da}}, {{"b", db}});
  save_model(dir.path / "kept.weft", sd, d, {sig_d});
  save_model(dir.path / "cleared.weft", sd, d, {sig_d}, {.clear_devices = true});
  CHECK(load_model(dir.path / "kept.weft").graph()["b"].device() == "/cpu:0");
  CHECK(load_model(dir.path / "cleared.weft").graph()["b"].device().empty());

  // An input that is an intermediate output becomes a Placeholder in its place.
  graph cut = freeze_graph(f.g, *s, {f.y}, {f.g.resolve("dense/MatMul")});
  CHECK(cut["dense/MatMul"].op() == "Placeholder");
  CHECK(cut.find("x") == nullptr);
  // Outputs that need a write to a variable cannot be frozen.
  test::require_error([&] { freeze_graph(f.g, *s, {f.g.resolve("train")}); },
                      {"freeze_graph: node 'train' (AssignAdd) writes node 'dense/w' (Variable)", "a frozen graph has no variables"});
}

TEST_CASE("model: bad signatures, uninitialized variables and corrupt files are clear errors") {
  model_fixture f;
  test::temp_dir dir("weft_model_errors");
  const auto path = dir.path / "m.weft";
  {
    session cold(f.g, test::one_thread());
    test::require_error([&] { save_model(path, cold, f.g, {f.serving()}); },
                        {"save_model: reading the variables", "read before it was initialized"});
    CHECK_FALSE(std::filesystem::exists(path));
  }
  auto s = f.trained();
  test::require_error([&] { save_model(path, *s, f.g, {}); }, {"save_model: no signatures"});
  test::require_error([&] { save_model(path, *s, f.g, {f.serving(), f.serving()}); }, {"two signatures named 'serving_default'"});
  signature wrong = f.serving();
  wrong.outputs[0].type = dtype::int32;
  test::require_error([&] { save_model(path, *s, f.g, {wrong}); },
                      {"signature 'serving_default' output 'y' is int32, but the graph's y:0 is float32"});
  wrong = f.serving();
  wrong.inputs[0].tensor = "nothing:0";
  test::require_error([&] { save_model(path, *s, f.g, {wrong}); }, {"input 'x' names nothing:0, which the graph does not have"});
  test::require_error([&] { make_signature(f.g, "s", {{"x", f.x}, {"x", f.x}}, {{"y", f.y}}); }, {"two inputs with the key 'x'"});
  test::require_error([&] { make_signature(f.g, "s", {}, {}); }, {"signature 's': no outputs"});

  save_model(path, *s, f.g, {f.serving()});
  const std::string bytes = model_slurp(path);
  auto load_bytes = [&](const std::string& b) {
    const auto p = dir.path / "bad.weft";
    std::ofstream(p, std::ios::binary | std::ios::trunc) << b;
    return load_model(p, test::one_thread());
  };
  test::require_error([&] { load_model(dir.path / "none.weft"); }, {"cannot open the model", "none.weft"});
  test::require_error([&] { load_bytes("WEFTMODL"); }, {"bad.weft is corrupt: it has 8 bytes, fewer than the header's 24"});
  test::require_error([&] { load_bytes("WEFTCKPT" + bytes.substr(8)); }, {"is corrupt: it is not a weft model"});
  std::string b = bytes;
  b[8] = 2;
  test::require_error([&] { load_bytes(b); }, {"unknown format version 2"});
  b = bytes;
  b[40] = static_cast<char>(b[40] ^ 1);  // inside the meta
  test::require_error([&] { load_bytes(b); }, {"the meta's checksum does not match"});
  b = bytes;
  b[b.size() - 3] = static_cast<char>(b[b.size() - 3] ^ 1);  // inside the last variable's bytes
  test::require_error([&] { load_bytes(b); }, {"the checkpoint", "bad.weft", "fails its checksum"});
  // Every cut of the file is an error, never a crash.
  for (std::size_t cut = 0; cut < bytes.size(); cut += 7) {
    INFO("cut at " << cut);
    CHECK_THROWS_AS(load_bytes(bytes.substr(0, cut)), error);
  }
}

TEST_CASE("model: Fused nodes are written out as their ops, so the bundle runs without their kernels") {
  ops::register_standard_ops();
  ops::register_fused_ops();
  graph g;
  auto& x = g.placeholder(dtype::float32, partial_shape{unknown_dim, 2}, "x");
  auto& k = g.constant(tensor::scalar(3.0f), "k");
  auto& flag = g.placeholder(dtype::boolean, partial_shape{2}, "flag");
  // relu(x * k + x) as the typed DSL's fusion writes it: leaves x, k, x (x twice: one input),
  // and a second node picking between x and its int32 cast's float.
  auto& fused = g.op("Fused", {x, k},
                     {{"T", dtype::float32},
                      {"Tin", std::vector<dtype>{dtype::float32, dtype::float32}},
                      {"expr", "Relu:float32(Add:float32(Mul:float32($float32,$float32s),$float32))"},
                      {"slots", std::vector<std::int64_t>{0, 1, 0}}},
                     node_options("fused").on("/cpu:0"));
  auto& picked = g.op("Fused", {flag, x},
                      {{"T", dtype::float32},
                       {"Tin", std::vector<dtype>{dtype::boolean, dtype::float32}},
                       {"expr", "SelectV2:float32($bool,$float32,Cast:float32(Cast:int32($float32)))"},
                       {"slots", std::vector<std::int64_t>{0, 1, 1}}},
                      "picked");
  auto& after = g.op("Neg", {fused}, {}, "after");
  (void)picked;
  const graph e = passes::expand_fused(g);
  CHECK_FALSE(passes::has_fused(e));
  CHECK(e["fused"].op() == "Relu");
  CHECK(e["fused"].device() == "/cpu:0");
  CHECK(e["fused/Mul_2"].op() == "Mul");
  CHECK(e["picked"].op() == "SelectV2");
  CHECK(e["picked/Cast_2"].attr<dtype>("DstT") == dtype::int32);
  session s(e, test::one_thread());
  const tensor xs = tensor::of<float>({2, 2}, {1.5f, -2, -0.25f, 4});
  const auto out = s.run({{"x", xs}, {"flag", tensor::of<bool>({2}, {true, false})}}, {"after", "picked"});
  CHECK(out[0].to_vector<float>() == std::vector<float>{-6, -0, -0, -16});
  CHECK(out[1].to_vector<float>() == std::vector<float>{1.5f, -2, -0.25f, 4});  // Cast to int32 and back: -2 and 4 stay, as do the picked
  // ... and a bundle of the graph with Fused nodes carries the expanded ops.
  test::temp_dir dir("weft_model_fused");
  session sg(g, test::one_thread());
  save_model(dir.path / "f.weft", sg, g, {make_signature(g, "s", {{"x", x}}, {{"after", after}})});
  model_bundle m = load_model(dir.path / "f.weft", test::one_thread());
  CHECK_FALSE(passes::has_fused(m.graph()));
  CHECK(m.run("s", {{"x", xs}})[0].to_vector<float>() == std::vector<float>{-6, -0, -0, -16});
  // A bad expr is an error naming the node.
  graph bad;
  auto& bx = bad.placeholder(dtype::float32, partial_shape{2}, "x");
  bad.op("Fused", {bx}, {{"T", dtype::float32}, {"Tin", std::vector<dtype>{dtype::float32}}, {"expr", "Relu:float32($float32"},
                         {"slots", std::vector<std::int64_t>{0}}}, "f");
  test::require_error([&] { passes::expand_fused(bad); }, {"Fused expr 'Relu:float32($float32': expected ')'"});
}

TEST_CASE("PlaceholderWithDefault: its default when not fed, the fed value when fed, the gradient to the default") {
  ops::register_standard_ops();
  graph g;
  auto& w = g.constant(tensor::of<float>({2}, {1.5f, -2}), "w");
  auto& p = g.op("PlaceholderWithDefault", {w}, {{"dtype", dtype::float32}, {"shape", partial_shape{unknown_dim}}}, "p");
  CHECK(p.output_shape(0) == partial_shape{unknown_dim});
  auto& y = g.op("Mul", {p, p}, {}, "y");
  const auto grads = add_gradients(g, {g.op("Sum", {y, g.constant(tensor::of<int>({1}, {0}))}).out(0)}, {w.out(0)});
  session s(g, test::one_thread());
  CHECK(s.run({}, {"y"})[0].to_vector<float>() == std::vector<float>{2.25f, 4});
  CHECK(s.run({{"p", tensor::of<float>({3}, {1, 2, 3})}}, {"y"})[0].to_vector<float>() == std::vector<float>{1, 4, 9});
  CHECK(s.run({}, {grads[0]})[0].to_vector<float>() == std::vector<float>{3, -4});  // d/dw sum(w^2) = 2w
  test::require_error([&] { g.op("PlaceholderWithDefault", {w}, {{"dtype", dtype::float32}, {"shape", partial_shape{3}}}); },
                      {"the default value's shape [2] is not the declared shape [3]"});
}
