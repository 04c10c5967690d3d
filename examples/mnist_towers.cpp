// Model parallelism on CPU devices (whitepaper §3.2.1 and §4.3): a network of parallel
// towers (each 784-H-H-10 with ReLU; their logits summed) trained on MNIST with Adam in a
// session of two CPU devices, where the simulated greedy placer decides where each node runs
// from the cost model: it prints the split before training.
//
//   tools/fetch-mnist            # once: MNIST into ~/.cache/weft/mnist
//   mnist_towers --epochs 3
//
// Exit status: 0, 1 below --min-accuracy or on an error, 2 for bad options, 77 when the
// data is missing (CTest reads it as skipped).
//
// Options: those of mnist_mlp (--epochs N (5), --batch N (128), --lr X (0.001), --decay X,
// --seed N, --train-subset N, --data DIR, --min-accuracy X, --checkpoint-dir DIR,
// --resume), and --hidden N (256), --towers N (2), --devices N (2), --threads N (intra-op
// threads per device: 1).
#include <cstdio>
#include <string>
#include <vector>

#include "mnist_training.hpp"

int main(int argc, char** argv) {
  using namespace weft;
  using namespace weft_examples;
  double hidden_option = 256, towers_option = 2, devices_option = 2, threads_option = 1;
  const mnist_options opt = parse_mnist_options(
      argc, argv, "mnist_towers", {},
      {{"hidden", &hidden_option}, {"towers", &towers_option}, {"devices", &devices_option}, {"threads", &threads_option}});
  const auto hidden = static_cast<std::int64_t>(hidden_option);
  const int towers = static_cast<int>(towers_option), devices = static_cast<int>(devices_option),
            threads = static_cast<int>(threads_option);
  if (hidden < 1 || towers < 1 || devices < 1 || threads < 1) {
    std::fprintf(stderr, "mnist_towers: --hidden, --towers, --devices and --threads must be positive\n");
    return 2;
  }
  int status = 0;
  const auto mnist = load_mnist_or_report("mnist_towers", opt, status);
  if (!mnist) return status;

  graph g;
  mnist_builder model(g, opt.seed);
  std::vector<output> logits;
  for (int t = 0; t < towers; ++t) {
    const output h1 = g.op("Relu", {model.dense(model.model().images, 784, hidden)}).out(0);
    const output h2 = g.op("Relu", {model.dense(h1, hidden, hidden)}).out(0);
    logits.push_back(model.dense(h2, hidden, 10));
  }
  output sum = logits[0];
  for (int t = 1; t < towers; ++t) sum = g.op("Add", {sum, logits[static_cast<std::size_t>(t)]}).out(0);

  session_options options;
  options.cpu_devices = devices;
  options.intra_op_threads = threads;
  options.placement.algorithm = passes::placer::greedy;
  const std::string h = std::to_string(hidden);
  return model.train("mnist_towers", opt, *mnist, sum,
                     std::to_string(towers) + " towers of 784-" + h + "-" + h + "-10 on " + std::to_string(devices) +
                         " CPU devices",
                     options);
}
