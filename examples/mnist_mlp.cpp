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
#include <weft/data/idx.hpp>
#include <weft/weft.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "progress.hpp"

namespace {

struct options {
  int epochs = 5, batch = 128, hidden = 512;
  unsigned seed = 1;
  double lr = 0.001, decay = 0.6, min_accuracy = 0;
  long train_subset = 0;
  std::string data, checkpoint_dir = "mnist_mlp_checkpoints";
  bool resume = false;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "mnist_mlp: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--epochs") o.epochs = std::stoi(value());
    else if (a == "--batch") o.batch = std::stoi(value());
    else if (a == "--hidden") o.hidden = std::stoi(value());
    else if (a == "--seed") o.seed = static_cast<unsigned>(std::stoul(value()));
    else if (a == "--lr") o.lr = std::stod(value());
    else if (a == "--decay") o.decay = std::stod(value());
    else if (a == "--train-subset") o.train_subset = std::stol(value());
    else if (a == "--data") o.data = value();
    else if (a == "--min-accuracy") o.min_accuracy = std::stod(value());
    else if (a == "--checkpoint-dir") o.checkpoint_dir = value();
    else if (a == "--resume") o.resume = true;
    else {
      std::fprintf(stderr,
                   "usage: mnist_mlp [--epochs N] [--batch N] [--lr X] [--decay X] [--seed N] [--hidden N] "
                   "[--train-subset N] "
                   "[--data DIR] [--min-accuracy X] [--checkpoint-dir DIR] [--resume]\n");
      std::exit(a == "--help" ? 0 : 2);
    }
  }
  if (o.epochs < 1 || o.batch < 1 || o.hidden < 1) {
    std::fprintf(stderr, "mnist_mlp: --epochs, --batch and --hidden must be positive\n");
    std::exit(2);
  }
  return o;
}

// Rows `rows` of the images as floats in [0, 1], [n, 784], and their labels as int32.
std::pair<weft::tensor, weft::tensor> batch_of(const weft::data::image_set& s, const std::vector<std::int64_t>& rows) {
  const std::int64_t n = static_cast<std::int64_t>(rows.size()), pixels = 28 * 28;
  weft::tensor x(weft::dtype::float32, weft::shape{n, pixels}), y(weft::dtype::int32, weft::shape{n});
  const auto* images = s.images.data<std::uint8_t>();
  const auto* labels = s.labels.data<std::uint8_t>();
  float* xp = x.data<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint8_t* src = images + rows[static_cast<std::size_t>(i)] * pixels;
    for (std::int64_t p = 0; p < pixels; ++p) xp[i * pixels + p] = static_cast<float>(src[p]) * (1.0f / 255.0f);
    y.data<std::int32_t>()[i] = labels[rows[static_cast<std::size_t>(i)]];
  }
  return {x, y};
}

}  // namespace

int main(int argc, char** argv) {
  using namespace weft;
  const options opt = parse(argc, argv);
  data::mnist_data mnist;
  try {
    mnist = opt.data.empty() ? data::load_mnist() : data::load_mnist(opt.data);
  } catch (const error& e) {
    std::fprintf(stderr, "mnist_mlp: %s\n", e.what());
    return e.code() == error_code::not_found ? 77 : 1;
  }
  const std::int64_t train_size =
      opt.train_subset > 0 ? std::min<std::int64_t>(opt.train_subset, mnist.train.size()) : mnist.train.size();

  // The model.
  graph g;
  const output x = g.placeholder(dtype::float32, {unknown_dim, 784}, "images").out(0);
  const output labels = g.placeholder(dtype::int32, {unknown_dim}, "labels").out(0);
  std::vector<output> vars;
  std::vector<int> inits;
  int layer = 0;
  auto dims = [&](std::vector<std::int64_t> d) { return g.constant(tensor::from_vector(d)).out(0); };
  auto dense = [&](output in, std::int64_t n_in, std::int64_t n_out, bool relu) {
    auto scope = g.name_scope("dense" + std::to_string(++layer));
    const output w = g.variable(dtype::float32, {n_in, n_out}, "w").out(0);
    const output b = g.variable(dtype::float32, {n_out}, "b").out(0);
    // Glorot uniform: U(-r, r) with r = sqrt(6 / (n_in + n_out)); zero biases.
    const float r = std::sqrt(6.0f / static_cast<float>(n_in + n_out));
    const output u = g.op("RandomUniform", {dims({n_in, n_out})},
                          {{"dtype", dtype::float32}, {"seed", static_cast<std::int64_t>(opt.seed)}, {"seed2", layer}})
                         .out(0);
    const output w0 = g.op("Mul", {g.op("Sub", {u, g.constant(tensor::scalar(0.5f))}).out(0), g.constant(tensor::scalar(2 * r))}).out(0);
    inits.push_back(g.op("Assign", {w, w0}).id());
    inits.push_back(g.op("Assign", {b, g.op("Fill", {dims({n_out}), g.constant(tensor::scalar(0.0f))}).out(0)}).id());
    vars.push_back(w), vars.push_back(b);
    const output z = g.op("BiasAdd", {g.op("MatMul", {in, w}).out(0), b}).out(0);
    return relu ? g.op("Relu", {z}).out(0) : z;
  };
  const output h1 = dense(x, 784, opt.hidden, true);
  const output h2 = dense(h1, opt.hidden, opt.hidden, true);
  const output logits = dense(h2, opt.hidden, 10, false);
  const output xent = g.op("SparseSoftmaxCrossEntropyWithLogits", {logits, labels}).out(0);
  const output loss = g.op("Mean", {xent, dims({0})}, {}, "loss").out(0);
  const output predicted = g.op("ArgMax", {logits, g.constant(tensor::scalar(1))}, {{"output_type", dtype::int32}}).out(0);
  const output correct = g.op("Sum", {g.op("Cast", {g.op("Equal", {predicted, labels}).out(0)}, {{"DstT", dtype::float32}}).out(0),
                                      dims({0})}, {}, "correct").out(0);
  // The learning rate is fed: it decays by opt.decay after each epoch.
  const output learning_rate = g.placeholder(dtype::float32, shape{}, "learning_rate").out(0);
  const auto train = train::minimize(g, loss, vars, train::adam{learning_rate});
  const node& init = g.op("NoOp", {}, {}, node_options("init").after(inits));

  const saver checkpoints(g, variables_of(g), {.keep = 3});
  const std::filesystem::path prefix = std::filesystem::path(opt.checkpoint_dir) / "mnist_mlp";

  session s(g);
  s.run({init, train.init});
  int first_epoch = 1;
  if (opt.resume) {
    if (auto last = saver::latest(prefix)) {
      checkpoints.restore(s, last->second);
      first_epoch = static_cast<int>(last->first) + 1;
      std::printf("mnist_mlp: resumed from %s\n", last->second.c_str());
    } else {
      std::printf("mnist_mlp: no checkpoint under %s; starting afresh\n", prefix.c_str());
    }
  }

  std::vector<std::int64_t> order(static_cast<std::size_t>(train_size));
  std::iota(order.begin(), order.end(), 0);
  const long steps = static_cast<long>((train_size + opt.batch - 1) / opt.batch);
  weft_examples::progress bar(opt.epochs, steps);
  std::printf("mnist_mlp: 784-%d-%d-10, %lld training and %lld test images, batch %d, Adam lr %g decaying by %g per epoch, seed %u\n",
              opt.hidden, opt.hidden, static_cast<long long>(train_size), static_cast<long long>(mnist.test.size()),
              opt.batch, opt.lr, opt.decay, opt.seed);
  // The accuracy on the whole test set, in one run.
  auto evaluate = [&] {
    std::vector<std::int64_t> all(static_cast<std::size_t>(mnist.test.size()));
    std::iota(all.begin(), all.end(), 0);
    auto [tx, ty] = batch_of(mnist.test, all);
    return s.run({{x, tx}, {labels, ty}}, {correct}).at(0).scalar_value<float>() / static_cast<double>(all.size());
  };
  double test_accuracy = 0, seconds = 0;
  for (int epoch = first_epoch; epoch <= opt.epochs; ++epoch) {
    // Each epoch's order depends only on the seed and the epoch, so a resumed run sees the same.
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 shuffle(opt.seed * 1000003ull + static_cast<unsigned>(epoch));
    std::shuffle(order.begin(), order.end(), shuffle);
    const tensor rate = tensor::scalar(static_cast<float>(opt.lr * std::pow(opt.decay, epoch - 1)));
    bar.start_epoch(epoch);
    for (std::int64_t first = 0; first < train_size; first += opt.batch) {
      std::vector<std::int64_t> rows(order.begin() + first, order.begin() + std::min<std::int64_t>(first + opt.batch, train_size));
      auto [bx, by] = batch_of(mnist.train, rows);
      auto out = s.run({{x, bx}, {labels, by}, {learning_rate, rate}}, {loss, correct}, {train.step});
      bar.step(static_cast<long>(rows.size()), out[0].scalar_value<float>(), out[1].scalar_value<float>());
    }
    seconds += bar.end_epoch();
    test_accuracy = evaluate();
    const auto file = checkpoints.save(s, prefix, epoch);
    std::printf("epoch %d: test accuracy %.2f%%, saved %s\n", epoch, 100 * test_accuracy, file.c_str());
  }
  if (first_epoch > opt.epochs) test_accuracy = evaluate();  // nothing left to train: the restored model's
  std::printf("test accuracy %.2f%% after %d epochs (%.1f s of training in this run)\n", 100 * test_accuracy, opt.epochs,
              seconds);
  if (test_accuracy < opt.min_accuracy) {
    std::fprintf(stderr, "mnist_mlp: test accuracy %.4f is below --min-accuracy %.4f\n", test_accuracy, opt.min_accuracy);
    return 1;
  }
  return 0;
}
