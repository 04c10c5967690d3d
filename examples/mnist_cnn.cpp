// Trains a LeNet-style convolutional network on MNIST with Adam and prints its test
// accuracy: two 5x5 convolutions (SAME, ReLU), each followed by 2x2 max pooling, a dense
// ReLU layer with dropout, and a dense layer to the 10 classes. As in mnist_mlp, the
// model, its gradients and Adam's updates are one graph.
//
//   tools/fetch-mnist            # once: MNIST into ~/.cache/weft/mnist
//   mnist_cnn --epochs 3 --seed 1
//
// Exit status: 0, 1 below --min-accuracy or on an error, 2 for bad options, 77 when the
// data is missing (CTest reads it as skipped). A checkpoint of every variable is saved
// after each epoch to --checkpoint-dir (mnist_cnn_checkpoints, keeping the last 3);
// --resume continues from the newest one.
//
// Options: those of mnist_mlp (--epochs N (3), --batch N, --lr X, --decay X, --seed N,
// --train-subset N, --data DIR, --min-accuracy X, --checkpoint-dir DIR, --resume, --save-model FILE,
// --host-batches, --fashion, --device cpu|gpu), and
// --conv1 N (16) and --conv2 N (32) filters, --hidden N (128) units, --dropout X (0.25:
// the dense layer's dropout rate while training; none when testing).
#include <cstdio>
#include <string>
#include <vector>

#include "mnist_training.hpp"

int main(int argc, char** argv) {
  using namespace weft;
  using namespace weft_examples;
  double conv1 = 16, conv2 = 32, hidden = 128, dropout = 0.25;
  mnist_options defaults;
  defaults.epochs = 3;
  const mnist_options opt = parse_mnist_options(argc, argv, "mnist_cnn", defaults,
                                                {{"conv1", &conv1}, {"conv2", &conv2}, {"hidden", &hidden}, {"dropout", &dropout}});
  if (conv1 < 1 || conv2 < 1 || hidden < 1 || dropout < 0 || dropout >= 1) {
    std::fprintf(stderr, "mnist_cnn: --conv1, --conv2 and --hidden must be positive, --dropout in [0, 1)\n");
    return 2;
  }
  const auto c1 = static_cast<std::int64_t>(conv1), c2 = static_cast<std::int64_t>(conv2),
             units = static_cast<std::int64_t>(hidden);
  int status = 0;
  const auto mnist = load_mnist_or_report("mnist_cnn", opt, status);
  if (!mnist) return status;

  session_options options;
  graph g;
  const auto on_device = g.device_scope(use_device("mnist_cnn", opt.device, options));
  mnist_builder model(g, opt.seed);
  auto shape_of = [&](std::vector<std::int64_t> d) { return g.constant(tensor::from_vector(d)).out(0); };
  const attr_map unit_strides{{"strides", std::vector<std::int64_t>{1, 1, 1, 1}}, {"padding", std::string("SAME")}};
  const attr_map pool2{{"ksize", std::vector<std::int64_t>{1, 2, 2, 1}},
                       {"strides", std::vector<std::int64_t>{1, 2, 2, 1}},
                       {"padding", std::string("VALID")}};
  // 5x5 convolution, bias, ReLU, 2x2 max pooling: [n, h, w, in] -> [n, h/2, w/2, out].
  auto conv_block = [&](output in, std::int64_t n_in, std::int64_t n_out) {
    auto scope = model.layer("conv");
    const output f = model.weight("filter", {5, 5, n_in, n_out}, 25 * n_in, 25 * n_out), b = model.bias(n_out);
    const output z = g.op("BiasAdd", {g.op("Conv2D", {in, f}, unit_strides).out(0), b}).out(0);
    return g.op("MaxPool", {g.op("Relu", {z}).out(0)}, pool2).out(0);
  };
  const output image = g.op("Reshape", {model.model().images, shape_of({-1, 28, 28, 1})}).out(0);
  const output p1 = conv_block(image, 1, c1);                 // [n, 14, 14, c1]
  const output p2 = conv_block(p1, c1, c2);                   // [n, 7, 7, c2]
  const output flat = g.op("Reshape", {p2, shape_of({-1, 7 * 7 * c2})}).out(0);
  const output h = g.op("Relu", {model.dense(flat, 7 * 7 * c2, units)}).out(0);
  // Dropout's rate is fed while training; 0 when it is not fed (testing, the saved model).
  const output rate = g.op("PlaceholderWithDefault", {g.constant(tensor::scalar(0.0f))}, {{"dtype", dtype::float32}, {"shape", partial_shape(shape{})}},
                           "dropout_rate").out(0);
  const output dropped = g.op("Dropout", {h, rate}, {{"seed", static_cast<std::int64_t>(opt.seed)}, {"seed2", 100}}).out(0);
  model.model().train_feeds.push_back({rate, tensor::scalar(static_cast<float>(dropout))});
  char description[160];
  std::snprintf(description, sizeof description, "conv5x5x%lld-pool-conv5x5x%lld-pool-%lld-dropout %g-10",
                static_cast<long long>(c1), static_cast<long long>(c2), static_cast<long long>(units), dropout);
  return model.train("mnist_cnn", opt, *mnist, model.dense(dropped, units, 10), description, options);
}
