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
  mnist_model m;
  m.images = g.placeholder(dtype::float32, {unknown_dim, 784}, "images").out(0);
  m.labels = g.placeholder(dtype::int32, {unknown_dim}, "labels").out(0);
  std::vector<output> vars;
  std::vector<int> inits;
  int layer = 0;
  auto dense = [&](output in, std::int64_t n_in, std::int64_t n_out, bool relu) {
    auto scope = g.name_scope("dense" + std::to_string(++layer));
    const output w = glorot_variable(g, "w", {n_in, n_out}, n_in, n_out, opt.seed, layer, inits);
    const output b = zero_variable(g, "b", n_out, inits);
    vars.push_back(w), vars.push_back(b);
    const output z = g.op("BiasAdd", {g.op("MatMul", {in, w}).out(0), b}).out(0);
    return relu ? g.op("Relu", {z}).out(0) : z;
  };
  const output h1 = dense(m.images, 784, hidden, true);
  const output h2 = dense(h1, hidden, hidden, true);
  add_loss_and_accuracy(g, m, dense(h2, hidden, 10, false));
  // The learning rate is fed: it decays by opt.decay after each epoch.
  m.learning_rate = g.placeholder(dtype::float32, shape{}, "learning_rate").out(0);
  const auto train = train::minimize(g, m.loss, vars, train::adam{m.learning_rate});
  const node& init = g.op("NoOp", {}, {}, node_options("init").after(inits));
  const std::string h = std::to_string(hidden);
  return train_mnist("mnist_mlp", opt, *mnist, g, m, train, init, "784-" + h + "-" + h + "-10");
}
