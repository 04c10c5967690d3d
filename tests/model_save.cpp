// The saving half of runtime.model_in_another_process: builds and trains a small classifier,
// saves it as a bundle (DIR/model.weft) and frozen (DIR/frozen.weft), and writes an input
// with the outputs this program computed for it (DIR/expected.ckpt). tests/model_load.cpp,
// another program with no model code, loads the bundles and must compute the same.
#include <weft/weft.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>

int main(int argc, char** argv) {
  using namespace weft;
  if (argc != 2) {
    std::fprintf(stderr, "usage: model_save DIR\n");
    return 2;
  }
  try {
    const std::filesystem::path dir = argv[1];
    std::filesystem::create_directories(dir);
    ops::register_standard_ops();
    graph g;
    auto x = g.placeholder(dtype::float32, partial_shape{unknown_dim, 4}, "features");
    auto labels = g.placeholder(dtype::float32, partial_shape{unknown_dim, 3}, "labels");
    auto& w = g.variable(dtype::float32, partial_shape{4, 3}, "w");
    auto& b = g.variable(dtype::float32, partial_shape{3}, "b");
    auto& init_w = g.op("Assign", {w, g.op("TruncatedNormal", {g.constant(tensor::of<int>({2}, {4, 3}))},
                                            {{"dtype", dtype::float32}, {"seed", 7}, {"seed2", 1}})});
    auto& init_b = g.op("Assign", {b, g.constant(tensor::zeros(dtype::float32, shape{3}))});
    g.op("NoOp", {}, {}, node_options("init").after({init_w.id(), init_b.id()}));
    auto logits = g.op("BiasAdd", {g.op("MatMul", {x, g.op("Identity", {w}, {}, "w/read")}), g.op("Identity", {b}, {}, "b/read")}, {}, "logits");
    auto probs = g.op("Softmax", {logits}, {}, "probs");
    auto loss = g.op("Mean", {g.op("SoftmaxCrossEntropyWithLogits", {logits, labels}).out(0), g.constant(tensor::of<int>({1}, {0}))}, {}, "loss");
    auto grads = add_gradients(g, {loss}, {w.out(0), b.out(0)});
    auto rate = g.constant(tensor::scalar(0.5f), "rate");
    auto& step_w = g.op("ApplyGradientDescent", {w, rate, grads[0]});
    auto& step_b = g.op("ApplyGradientDescent", {b, rate, grads[1]});
    g.op("NoOp", {}, {}, node_options("train").after({step_w.id(), step_b.id()}));

    session s(g);
    s.run({}, {}, {"init"});
    const tensor xs = tensor::of<float>({4, 4}, {1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 0, 0, 0, 0, 1, 1});
    const tensor ys = tensor::of<float>({4, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0});
    for (int i = 0; i < 20; ++i) s.run({{"features", xs}, {"labels", ys}}, {}, {"train"});
    const auto sig = make_signature(g, "classify", {{"features", x}}, {{"probs", probs}, {"logits", logits}});
    save_model(dir / "model.weft", s, g, {sig});
    save_model(dir / "frozen.weft", s, g, {sig}, {.freeze = true});
    const auto out = s.run({{"features", xs}}, {"probs", "logits"});
    write_checkpoint(dir / "expected.ckpt", {{"features", xs}, {"probs", out[0]}, {"logits", out[1]}});
    std::printf("model_save: wrote %s\n", (dir / "model.weft").c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "model_save: %s\n", e.what());
    return 1;
  }
}
