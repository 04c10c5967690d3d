// Trains a 784-512-512-10 ReLU network on MNIST with Adam (or SGD) and prints its test accuracy.
// The model is written with the typed DSL's layers (weft::layers) and lowered into a graph
// with its gradients (weft::add_gradients) and the optimizer's updates
// (weft::train::minimize); each step feeds a batch and runs the update.
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
// rate's factor after each epoch), --optimizer adam|sgd (adam), --seed N (1), --hidden N (512),
// --bf16 1 (mixed precision: the layers compute in bfloat16, the weights and the optimizer
// stay float32), --bf16 2 (all bfloat16: the weights and their updates too, as
// bench_training's bfloat16 step; with --optimizer sgd only: Adam's beta2 = 0.999 is 1.0 in
// bfloat16),
// --threads N (0: every core; else N threads for kernels, N - 1 beside them for nodes),
// --train-subset N (all 60000), --data DIR (the data directory's mnist/), --min-accuracy X
// (exit with status 1 below it, for tests), --checkpoint-dir DIR, --resume, --save-model FILE
// (the trained model, frozen, as a bundle examples/classify runs), --host-batches
// (the training loop makes each batch itself, between steps; by default a weft::input_pipeline
// makes them ahead on threads of its own: the same batches, the same result), --fashion
// (Fashion-MNIST from Debian's dataset-fashion-mnist), --device gpu (the model on GPU:0;
// exit 77 where there is none), --logdir DIR (TensorBoard event files: the graph, every
// --log-every N (100) steps the loss, the batch's accuracy and the learning rate, and after
// each epoch the test accuracy and each weight's histogram).
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "mnist_training.hpp"

int main(int argc, char** argv) {
  using namespace weft;
  using namespace weft_examples;
  double hidden_option = 512, bf16_option = 0, threads_option = 0;
  const mnist_options opt = parse_mnist_options(argc, argv, "mnist_mlp", {},
                                                {{"hidden", &hidden_option}, {"bf16", &bf16_option}, {"threads", &threads_option}});
  const auto hidden = static_cast<std::int64_t>(hidden_option);
  const int threads = static_cast<int>(threads_option);
  if (hidden < 1 || threads < 0) {
    std::fprintf(stderr, "mnist_mlp: --hidden must be positive and --threads not negative\n");
    return 2;
  }
  if (bf16_option != 0 && bf16_option != 1 && bf16_option != 2) {
    std::fprintf(stderr, "mnist_mlp: --bf16 is 0 (float32), 1 (mixed precision) or 2 (all bfloat16)\n");
    return 2;
  }
  if (bf16_option == 2 && opt.optimizer != "sgd") {
    // Adam's hyperparameters take the variables' dtype: beta2 = 0.999 rounds to 1.0 in
    // bfloat16, v never grows, and the steps m / (sqrt(v) + epsilon) blow up.
    std::fprintf(stderr, "mnist_mlp: --bf16 2 (bfloat16 variables) trains with --optimizer sgd; for Adam use --bf16 1 "
                         "(mixed precision: Adam's beta2 = 0.999 is 1.0 in bfloat16)\n");
    return 2;
  }
  session_options options;
  if (threads > 0) options.intra_op_threads = threads, options.inter_op_threads = threads - 1;
  int status = 0;
  const auto mnist = load_mnist_or_report("mnist_mlp", opt, status);
  if (!mnist) return status;

  // The model, on the device --device names: three dense layers of weft::layers (Glorot
  // initial weights seeded by --seed, zero biases). With --bf16 1 they compute in bfloat16
  // (their variables and the optimizer stay float32); with --bf16 2 the variables are
  // bfloat16 too, and so the updates, and the images are cast once. The logits come back
  // to float32 for the loss.
  graph g;
  const auto on_device = g.device_scope(use_device("mnist_mlp", opt.device, options));
  mnist_builder model(g, opt.seed);
  const bool bf16 = bf16_option != 0;
  const char* const precision[] = {"", " (bfloat16 layers)", " (bfloat16)"};
  auto logits_in = [&]<class C, class V = float>() {
    namespace L = weft::layers;
    auto glorot = [&](std::int64_t layer) { return L::dense_options{.kernel = L::glorot_uniform(opt.seed, layer)}; };
    auto net = L::sequential(L::dense<V, 784, dyn, C>("dense1", 784, hidden, glorot(1)), L::relu,
                             L::dense<V, dyn, dyn, C>("dense2", hidden, hidden, glorot(2)), L::relu,
                             L::dense<V, dyn, 10, C>("dense3", hidden, 10, glorot(3)));
    const auto logits = [&] {
      if constexpr (std::is_same_v<V, float>) return net(model.typed_images());
      else return net(cast<V>(model.typed_images()));
    }();
    if constexpr (std::is_same_v<C, float>) return model.lower(logits);
    else return model.lower(cast<float>(logits));
  };
  const output logits = bf16_option == 2 ? logits_in.template operator()<bfloat16, bfloat16>()
                        : bf16 ? logits_in.template operator()<bfloat16>() : logits_in.template operator()<float>();
  const std::string h = std::to_string(hidden);
  return model.train("mnist_mlp", opt, *mnist, logits, "784-" + h + "-" + h + "-10" + precision[static_cast<int>(bf16_option)], options);
}
