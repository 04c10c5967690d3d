// Trains a LeNet-style convolutional network on MNIST with Adam and prints its test
// accuracy: two 5x5 convolutions (SAME, ReLU), each followed by 2x2 max pooling, a dense
// ReLU layer with dropout, and a dense layer to the 10 classes, written with the typed
// DSL's layers (weft::layers). As in mnist_mlp, the model, its gradients and Adam's
// updates are one graph.
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
// --host-batches, --fashion, --device cpu|gpu, --logdir DIR, --log-every N), and
// --conv1 N (16) and --conv2 N (32) filters, --hidden N (128) units, --dropout X (0.25:
// the dense layer's dropout rate while training; none when testing), --threads N (0: every
// core; else N threads for kernels, N - 1 beside them for nodes).
#include <cstdio>
#include <string>
#include <vector>

#include "mnist_training.hpp"

int main(int argc, char** argv) {
  using namespace weft;
  using namespace weft_examples;
  double conv1 = 16, conv2 = 32, hidden = 128, dropout = 0.25, threads_option = 0;
  mnist_options defaults;
  defaults.epochs = 3;
  const mnist_options opt =
      parse_mnist_options(argc, argv, "mnist_cnn", defaults,
                          {{"conv1", &conv1}, {"conv2", &conv2}, {"hidden", &hidden}, {"dropout", &dropout}, {"threads", &threads_option}});
  if (conv1 < 1 || conv2 < 1 || hidden < 1 || dropout < 0 || dropout >= 1 || threads_option < 0) {
    std::fprintf(stderr, "mnist_cnn: --conv1, --conv2 and --hidden must be positive, --dropout in [0, 1), --threads not negative\n");
    return 2;
  }
  const auto c1 = static_cast<std::int64_t>(conv1), c2 = static_cast<std::int64_t>(conv2),
             units = static_cast<std::int64_t>(hidden);
  const int threads = static_cast<int>(threads_option);
  int status = 0;
  const auto mnist = load_mnist_or_report("mnist_cnn", opt, status);
  if (!mnist) return status;

  session_options options;
  if (threads > 0) options.intra_op_threads = threads, options.inter_op_threads = threads - 1;
  graph g;
  const auto on_device = g.device_scope(use_device("mnist_cnn", opt.device, options));
  mnist_builder model(g, opt.seed);
  // Dropout's rate is fed while training; 0 when it is not fed (testing, the saved model).
  const output rate = g.op("PlaceholderWithDefault", {g.constant(tensor::scalar(0.0f))},
                           {{"dtype", dtype::float32}, {"shape", partial_shape(shape{})}}, "dropout_rate").out(0);
  model.model().train_feeds.push_back({rate, tensor::scalar(static_cast<float>(dropout))});

  // The model in weft::layers: layer k's weights start Glorot-uniform, seeded (--seed, k);
  // the channel and unit counts are options, so those sizes are given at run time (dyn).
  namespace L = weft::layers;
  auto glorot = [&](std::int64_t layer) { return L::glorot_uniform(opt.seed, layer); };
  // 5x5 convolution (SAME), ReLU, 2x2 max pooling: [n, h, w, in] -> [n, h/2, w/2, out].
  auto net = L::sequential(L::conv2d<float, 5, 5, 1, dyn>("conv1", 1, c1, {.filter = glorot(1)}), L::relu, L::max_pool<2, 2>{},
                           L::conv2d<float, 5, 5, dyn, dyn>("conv2", c1, c2, {.filter = glorot(2)}), L::relu,
                           L::max_pool<2, 2>{}, L::flatten{},  // [n, 7 * 7 * c2]
                           L::dense<float, dyn, dyn>("dense3", 7 * 7 * c2, units, {.kernel = glorot(3)}), L::relu,
                           L::dropout(wrap<float>(g, rate), opt.seed, 100),
                           L::dense<float, dyn, 10>("dense4", units, 10, {.kernel = glorot(4)}));
  const output logits = model.lower(net(reshape(model.typed_images(), dims<dyn, 28, 28, 1>)));
  char description[160];
  std::snprintf(description, sizeof description, "conv5x5x%lld-pool-conv5x5x%lld-pool-%lld-dropout %g-10",
                static_cast<long long>(c1), static_cast<long long>(c2), static_cast<long long>(units), dropout);
  return model.train("mnist_cnn", opt, *mnist, logits, description, options);
}
