// Trains a 784-512-512-10 ReLU network on MNIST with Adam and prints its test accuracy.
// The model, its gradients (weft::add_gradients) and the optimizer's updates
// (weft::train::minimize) are one graph; each step feeds a batch and runs the update.
//
//   tools/fetch-mnist            # once: MNIST into ~/.cache/weft/mnist
//   mnist_mlp --epochs 5 --seed 1
//
// Exit status: 0, 1 below --min-accuracy or on an error, 2 for bad options, 77 when the
// data is missing (CTest reads it as skipped).
//
// It saves a checkpoint of every variable (the model's and Adam's) after each epoch to
// --checkpoint-dir (mnist_mlp_checkpoints, keeping the last 3); --resume continues from the
// newest one.
//
// Options: --epochs N (5), --batch N (128), --lr X (0.001), --decay X (0.6: the learning
// rate's factor after each epoch), --seed N (1), --hidden N (512),
// --train-subset N (all 60000), --data DIR (the data directory's mnist/), --min-accuracy X
// (exit with status 1 below it, for tests), --checkpoint-dir DIR, --resume.
#include <cstdio>
#include <string>
#include <vector>

#include "mnist_training.hpp"

int main(int argc, char** argv) {
  using namespace weft;
  using namespace weft_examples;
  double hidden_option = 512;
  const mnist_options opt = parse_mnist_options(argc, argv, "mnist_mlp", {}, {{"hidden", &hidden_option}});
  const auto hidden = static_cast<std::int64_t>(hidden_option);
  if (hidden < 1) {
    std::fprintf(stderr, "mnist_mlp: --hidden must be positive\n");
    return 2;
  }
  int status = 0;
  const auto mnist = load_mnist_or_report("mnist_mlp", opt, status);
  if (!mnist) return status;

  // The model.
  graph g;
  mnist_builder model(g, opt.seed);
  const output h1 = g.op("Relu", {model.dense(model.model().images, 784, hidden)}).out(0);
  const output h2 = g.op("Relu", {model.dense(h1, hidden, hidden)}).out(0);
  const std::string h = std::to_string(hidden);
  return model.train("mnist_mlp", opt, *mnist, model.dense(h2, hidden, 10), "784-" + h + "-" + h + "-10");
}
