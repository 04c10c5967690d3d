// What the MNIST examples share: their options, batches of images, and the training loop
// (shuffling per epoch, the progress display, test accuracy, a checkpoint per epoch and
// --resume). Each example builds its model into a graph and hands this its tensors.
#pragma once

#include <weft/data/idx.hpp>
#include <weft/dsl.hpp>
#include <weft/weft.hpp>

#include "device_option.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>


namespace weft_examples {

struct mnist_options {
  int epochs = 5, batch = 128;
  unsigned seed = 1;
  double lr = 0.001, decay = 0.6, min_accuracy = 0;
  std::string optimizer = "adam";  // adam (weft::train::adam) or sgd (plain gradient descent: ApplyGradientDescent)
  long train_subset = 0;
  std::string data, checkpoint_dir;
  std::string save_model;  // a model bundle of the trained model, frozen, for examples/classify (docs/models.md)
  bool resume = false;
  bool pipeline = true;  // batches from a weft::input_pipeline, made ahead on threads of its own (else by the loop)
  bool fashion = false;   // Fashion-MNIST from Debian's dataset-fashion-mnist instead of MNIST
  std::string device = "cpu";  // cpu or gpu (device_option.hpp)
  std::string logdir;          // TensorBoard event files (weft::summary_writer) under this directory
  long log_every = 100;        // steps between summaries
};

// An option of one example only: --name N, stored as a number.
struct extra_option {
  const char* name;
  double* value;
};

// Parses the common options and the example's own; exits with status 2 on a bad one
// (0 for --help).
inline mnist_options parse_mnist_options(int argc, char** argv, const char* program, mnist_options o,
                                         const std::vector<extra_option>& extras = {}) {
  o.checkpoint_dir = std::string(program) + "_checkpoints";
  auto usage = [&](int status) {
    std::fprintf(status ? stderr : stdout,
                 "usage: %s [--epochs N] [--batch N] [--lr X] [--decay X] [--seed N] [--train-subset N] [--data DIR] "
                 "[--min-accuracy X] [--checkpoint-dir DIR] [--resume] [--save-model FILE] [--host-batches] [--fashion] [--device cpu|gpu] "
                 "[--logdir DIR] [--log-every N] [--optimizer adam|sgd]",
                 program);
    for (const auto& e : extras) std::fprintf(status ? stderr : stdout, " [--%s %g]", e.name, *e.value);
    std::fprintf(status ? stderr : stdout, "\n");
    std::exit(status);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: %s needs a value\n", program, a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (a == "--epochs") o.epochs = std::stoi(value());
      else if (a == "--batch") o.batch = std::stoi(value());
      else if (a == "--seed") o.seed = static_cast<unsigned>(std::stoul(value()));
      else if (a == "--lr") o.lr = std::stod(value());
      else if (a == "--decay") o.decay = std::stod(value());
      else if (a == "--train-subset") o.train_subset = std::stol(value());
      else if (a == "--data") o.data = value();
      else if (a == "--min-accuracy") o.min_accuracy = std::stod(value());
      else if (a == "--checkpoint-dir") o.checkpoint_dir = value();
      else if (a == "--resume") o.resume = true;
      else if (a == "--save-model") o.save_model = value();
      else if (a == "--pipeline") o.pipeline = true;
      else if (a == "--host-batches") o.pipeline = false;
      else if (a == "--fashion") o.fashion = true;
      else if (a == "--device") o.device = value();
      else if (a == "--logdir") o.logdir = value();
      else if (a == "--log-every") o.log_every = std::stol(value());
      else if (a == "--optimizer") o.optimizer = value();
      else if (a == "--help") usage(0);
      else {
        auto e = std::find_if(extras.begin(), extras.end(), [&](const extra_option& x) { return a == std::string("--") + x.name; });
        if (e == extras.end()) usage(2);
        *e->value = std::stod(value());
      }
    } catch (const std::logic_error&) {  // std::stoi and friends on a non-number
      std::fprintf(stderr, "%s: %s needs a number\n", program, a.c_str());
      std::exit(2);
    }
  }
  if (o.epochs < 1 || o.batch < 1 || o.log_every < 1) {
    std::fprintf(stderr, "%s: --epochs, --batch and --log-every must be positive\n", program);
    std::exit(2);
  }
  if (o.optimizer != "adam" && o.optimizer != "sgd") {
    std::fprintf(stderr, "%s: --optimizer is adam or sgd, not '%s'\n", program, o.optimizer.c_str());
    std::exit(2);
  }
  return o;
}

// Rows `rows` of the images as floats in [0, 1], [n, 784], and their labels as int32.
inline std::pair<weft::tensor, weft::tensor> batch_of(const weft::data::image_set& s, const std::int64_t* rows,
                                                      std::int64_t n) {
  constexpr std::int64_t pixels = 28 * 28;
  weft::tensor x(weft::dtype::float32, weft::shape{n, pixels}), y(weft::dtype::int32, weft::shape{n});
  const auto* images = s.images.data<std::uint8_t>();
  const auto* labels = s.labels.data<std::uint8_t>();
  float* xp = x.data<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint8_t* src = images + rows[i] * pixels;
    for (std::int64_t p = 0; p < pixels; ++p) xp[i * pixels + p] = static_cast<float>(src[p]) * (1.0f / 255.0f);
    y.data<std::int32_t>()[i] = labels[rows[i]];
  }
  return {x, y};
}

// An epoch of MNIST batches from an input pipeline: the first `rows` images (uint8) and labels
// in the order std::shuffle gives with std::mt19937_64(seed), batched, converted to floats in
// [0, 1] and int32 labels by a map stage, 4 batches ahead (not started).
inline weft::input_pipeline mnist_pipeline(const weft::data::image_set& s, std::int64_t rows, int batch, std::uint64_t seed) {
  using namespace weft;
  const tensor images = s.images.reshape(shape{s.size(), 784}).slice(0, rows);
  const tensor labels = s.labels.slice(0, rows);
  auto p = input_pipeline::from_tensors({images, labels});
  p.shuffle_source(seed).batch(batch).prefetch(4).map([](graph& g, const std::vector<output>& in) {
    const output x = g.op("Cast", {in[0]}, {{"DstT", dtype::float32}}).out(0);
    return std::vector<output>{g.op("Mul", {x, g.constant(tensor::scalar(1.0f / 255.0f)).out(0)}).out(0),
                               g.op("Cast", {in[1]}, {{"DstT", dtype::int32}}).out(0)};
  });
  return p;
}

// One line per device: how many of the step's nodes the placer put there and their
// estimated compute, and the simulated step.
inline void print_placement(weft::session& s, const weft::feed_list& feeds, const std::vector<weft::endpoint>& fetches,
                            const weft::endpoint& target) {
  const auto p = s.placement(feeds, fetches, {target});
  std::vector<int> nodes(p->device_names.size());
  for (const auto& r : p->nodes) ++nodes[static_cast<std::size_t>(r.device)];
  std::printf("%s placement, predicted step %.2f ms:", weft::passes::name(p->algorithm), p->predicted_seconds * 1e3);
  for (std::size_t d = 0; d < nodes.size(); ++d)
    std::printf(" %s %d nodes (%.2f ms)", p->device_names[d].c_str(), nodes[d], p->busy_seconds[d] * 1e3);
  std::printf("\n");
}

// The tensors of a model that the loop feeds and fetches.
struct mnist_model {
  weft::output images, labels;   // placeholders: [n, 784] float32, [n] int32
  weft::output loss, correct;    // the batch's mean loss and its number of right answers
  weft::output learning_rate;    // a scalar placeholder
  weft::output probs, classes;   // the model's answer: softmax [n, 10] and the class [n] (int32)
  std::vector<std::pair<weft::output, weft::tensor>> train_feeds, test_feeds;  // more feeds (dropout's rate)
  std::vector<weft::output> weights;  // the trained variables (histograms with --logdir)
};

// Trains `model` with `train` for opt.epochs over MNIST and returns the exit status: 0, 1
// below --min-accuracy, 77 when the data is missing. `description` is printed first. With
// several devices (`options`), where the placer put the training step's nodes is printed
// after the first step.
inline int train_mnist(const char* program, const mnist_options& opt, const weft::data::mnist_data& mnist,
                       weft::graph& g, const mnist_model& m, const weft::train::training_op& train, const weft::node& init,
                       const std::string& description, const weft::session_options& options = {}) {
  using namespace weft;
  const std::int64_t train_size =
      opt.train_subset > 0 ? std::min<std::int64_t>(opt.train_subset, mnist.train.size()) : mnist.train.size();
  const saver checkpoints(g, variables_of(g), {.keep = 3});
  const std::filesystem::path prefix = std::filesystem::path(opt.checkpoint_dir) / program;

  session s(g, options);
  s.run({init, train.init});
  int first_epoch = 1;
  if (opt.resume) {
    if (auto last = saver::latest(prefix)) {
      checkpoints.restore(s, last->second);
      first_epoch = static_cast<int>(last->first) + 1;
      std::printf("%s: resumed from %s\n", program, last->second.c_str());
    } else {
      std::printf("%s: no checkpoint under %s; starting afresh\n", program, prefix.c_str());
    }
  }
  // With --logdir: the graph, then every --log-every steps the loss, the batch's accuracy
  // and the learning rate, and after each epoch the test accuracy and a histogram of each
  // weight.
  std::optional<summary_writer> log;
  if (!opt.logdir.empty()) {
    log.emplace(opt.logdir);
    log->graph(g);
    std::printf("%s: TensorBoard events in %s\n", program, log->path().c_str());
  }
  std::int64_t global_step = 0;
  std::vector<std::int64_t> order(static_cast<std::size_t>(train_size));
  const long steps = static_cast<long>((train_size + opt.batch - 1) / opt.batch);
  // The epoch's progress (redrawn in place on a terminal, a line every 100 steps elsewhere)
  // with the metrics' means, which go to the event file every --log-every steps too.
  progress_bar bar(steps);
  metrics_logger metrics(log ? &*log : nullptr, opt.log_every);
  std::printf("%s: %s, %lld training and %lld test images, batch %d, %s lr %g decaying by %g per epoch, seed %u\n", program,
              description.c_str(), static_cast<long long>(train_size), static_cast<long long>(mnist.test.size()), opt.batch,
              opt.optimizer == "sgd" ? "SGD" : "Adam", opt.lr, opt.decay, opt.seed);
  // The accuracy on the whole test set, in batches of 1000.
  auto evaluate = [&] {
    std::vector<std::int64_t> all(static_cast<std::size_t>(mnist.test.size()));
    std::iota(all.begin(), all.end(), 0);
    double correct = 0;
    for (std::int64_t first = 0; first < mnist.test.size(); first += 1000) {
      auto [tx, ty] = batch_of(mnist.test, all.data() + first, std::min<std::int64_t>(1000, mnist.test.size() - first));
      feed_list feeds{{m.images, tx}, {m.labels, ty}};
      for (const auto& [o, t] : m.test_feeds) feeds.push_back({o, t});
      correct += s.run(feeds, {m.correct}).at(0).scalar_value<float>();
    }
    return correct / static_cast<double>(all.size());
  };
  double test_accuracy = 0, seconds = 0;
  for (int epoch = first_epoch; epoch <= opt.epochs; ++epoch) {
    // Each epoch's order depends only on the seed and the epoch, so a resumed run sees the same.
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 shuffle(opt.seed * 1000003ull + static_cast<unsigned>(epoch));
    std::shuffle(order.begin(), order.end(), shuffle);
    const tensor rate = tensor::scalar(static_cast<float>(opt.lr * std::pow(opt.decay, epoch - 1)));
    bar.start("epoch " + std::to_string(epoch) + "/" + std::to_string(opt.epochs));
    metrics.start_epoch();
    auto step = [&](const tensor& bx, const tensor& by, bool first) {
      feed_list feeds{{m.images, bx}, {m.labels, by}, {m.learning_rate, rate}};
      for (const auto& [o, t] : m.train_feeds) feeds.push_back({o, t});
      auto out = s.run(feeds, {m.loss, m.correct}, {train.step});
      if (epoch == first_epoch && first && s.devices().size() > 1) print_placement(s, feeds, {m.loss, m.correct}, train.step);
      const auto n = static_cast<double>(by.num_elements());
      metrics.add("loss", out[0].scalar_value<float>(), n);
      metrics.add("accuracy", out[1].scalar_value<float>() / n, n);
      metrics.add("learning_rate", rate.scalar_value<float>());
      metrics.end_step(++global_step);
      bar.step(by.num_elements(), metrics.text());
    };
    if (opt.pipeline) {
      // The same batches as below (the same permutation of the rows), made by a pipeline:
      // the rows' order per epoch, batches of uint8 rows, then floats in [0, 1] and int32
      // labels, up to 4 batches ahead, on the pipeline's threads.
      auto p = mnist_pipeline(mnist.train, train_size, opt.batch, opt.seed * 1000003ull + static_cast<unsigned>(epoch));
      p.start();
      for (bool first = true; auto b = p.next(); first = false) step((*b)[0], (*b)[1], first);
    } else {
      for (std::int64_t first = 0; first < train_size; first += opt.batch) {
        const std::int64_t n = std::min<std::int64_t>(opt.batch, train_size - first);
        auto [bx, by] = batch_of(mnist.train, order.data() + first, n);
        step(bx, by, first == 0);
      }
    }
    seconds += bar.end(metrics.text());
    test_accuracy = evaluate();
    if (log) {  // after each epoch, as Keras's TensorBoard callback: the weights' histograms are 670k values
      metrics.scalar("test_accuracy", test_accuracy, global_step);
      const auto values = s.run({}, std::vector<endpoint>(m.weights.begin(), m.weights.end()));
      for (std::size_t i = 0; i < values.size(); ++i) log->histogram(g.at(m.weights[i].node).name(), values[i], global_step);
      log->flush();
    }
    const auto file = checkpoints.save(s, prefix, epoch);
    std::printf("epoch %d: test accuracy %.2f%%, saved %s\n", epoch, 100 * test_accuracy, file.c_str());
  }
  if (first_epoch > opt.epochs) test_accuracy = evaluate();  // nothing left to train: the restored model's
  if (!opt.save_model.empty()) {
    // Frozen (the variables as constants, training's nodes left out) and with no device
    // requests, so that examples/classify loads it on any machine.
    const auto sig = make_signature(g, "classify", {{"images", m.images}}, {{"probs", m.probs}, {"classes", m.classes}});
    save_model(opt.save_model, s, g, {sig}, {.freeze = true, .clear_devices = true});
    std::printf("%s: saved the model to %s (%ju bytes; examples/classify runs it)\n", program, opt.save_model.c_str(),
                static_cast<std::uintmax_t>(std::filesystem::file_size(opt.save_model)));
  }
  std::printf("test accuracy %.2f%% after %d epoch%s (%.1f s of training in this run)\n", 100 * test_accuracy, opt.epochs, opt.epochs == 1 ? "" : "s",
              seconds);
  if (test_accuracy < opt.min_accuracy) {
    std::fprintf(stderr, "%s: test accuracy %.4f is below --min-accuracy %.4f\n", program, test_accuracy, opt.min_accuracy);
    return 1;
  }
  return 0;
}

// MNIST from --data or the default data directory; nullopt after printing the error
// (`status` is then 77 when the data is missing, 1 otherwise).
inline std::optional<weft::data::mnist_data> load_mnist_or_report(const char* program, const mnist_options& opt, int& status) {
  try {
    if (opt.fashion)
      return weft::data::load_mnist(opt.data.empty() ? weft::data::fashion_mnist_dir() : std::filesystem::path(opt.data),
                                    "run tools/fetch-fashion-mnist (Debian's dataset-fashion-mnist)");
    return opt.data.empty() ? weft::data::load_mnist() : weft::data::load_mnist(opt.data);
  } catch (const weft::error& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    status = e.code() == weft::error_code::not_found ? 77 : 1;
    return std::nullopt;
  }
}

// Builds a model into a graph: the image and label placeholders, layers numbered from 1
// whose weights start from the seeded RandomUniform op (Glorot: U(-r, r), r = sqrt(6 /
// (fan_in + fan_out)), seed2 the layer's number) and whose biases start at zero, and the
// tail every MNIST example shares (loss, accuracy, Adam or SGD with a fed learning rate).
class mnist_builder {
 public:
  mnist_builder(weft::graph& g, unsigned seed) : g_(g), seed_(seed) {
    m_.images = g.placeholder(weft::dtype::float32, {weft::unknown_dim, 784}, "images").out(0);
    m_.labels = g.placeholder(weft::dtype::int32, {weft::unknown_dim}, "labels").out(0);
  }
  weft::graph& graph() { return g_; }
  mnist_model& model() { return m_; }
  unsigned seed() const noexcept { return seed_; }

  // The images [n, 784] as a typed expression, for models written with weft::layers.
  weft::handle<float, weft::dyn, 784> typed_images() const { return weft::wrap<float, weft::dyn, 784>(g_, m_.images); }
  // A typed model lowered into the graph: its node, its variables (with their initializers)
  // the model's. Without fusion: the training step differentiates the graph
  // (weft::add_gradients), which has no rule for the DSL's Fused nodes.
  template <class E>
  weft::output lower(const E& e) {
    weft::lowering cx(g_, false);
    const weft::output o = weft::lower(cx, e);
    inits_.insert(inits_.end(), cx.initializers().begin(), cx.initializers().end());
    for (const weft::output& v : weft::variables_of(g_))
      if (std::find(vars_.begin(), vars_.end(), v) == vars_.end()) vars_.push_back(v);
    return o;
  }

  // Starts the next layer: its number, and the name scope "<kind><number>" its nodes get.
  [[nodiscard]] auto layer(const std::string& kind) { return g_.name_scope(kind + std::to_string(++layer_)); }
  weft::output weight(const char* name, const std::vector<std::int64_t>& dims, std::int64_t fan_in, std::int64_t fan_out) {
    using namespace weft;
    const output d = g_.constant(tensor::from_vector(dims)).out(0);
    const float r = std::sqrt(6.0f / static_cast<float>(fan_in + fan_out));
    const output u = g_.op("RandomUniform", {d}, {{"dtype", dtype::float32}, {"seed", static_cast<std::int64_t>(seed_)}, {"seed2", layer_}}).out(0);
    const output w0 = g_.op("Mul", {g_.op("Sub", {u, g_.constant(tensor::scalar(0.5f))}).out(0), g_.constant(tensor::scalar(2 * r))}).out(0);
    return variable(name, dims, w0);
  }
  weft::output bias(std::int64_t n) {
    using namespace weft;
    const output dims = g_.constant(tensor::from_vector(std::vector<std::int64_t>{n})).out(0);
    return variable("b", {n}, g_.op("Fill", {dims, g_.constant(tensor::scalar(0.0f))}).out(0));
  }
  // The dtype dense layers compute in: float32, or bfloat16 for mixed precision (the
  // variables and the optimizer stay float32; each layer casts its weights, bias and a
  // float32 input, and its gradients come back through the casts).
  void compute_in(weft::dtype d) { compute_ = d; }
  // A dense layer without activation: in [n, n_in] -> [n, n_out], in the compute dtype.
  weft::output dense(weft::output in, std::int64_t n_in, std::int64_t n_out) {
    auto scope = layer("dense");
    const weft::output w = weight("w", {n_in, n_out}, n_in, n_out), b = bias(n_out);
    if (compute_ == weft::dtype::float32) return g_.op("BiasAdd", {g_.op("MatMul", {in, w}).out(0), b}).out(0);
    auto cast = [&](weft::output v) { return g_.op("Cast", {v}, {{"DstT", compute_}}).out(0); };
    const weft::output x = g_.at(in.node).output_dtype(in.port) == compute_ ? in : cast(in);
    return g_.op("BiasAdd", {g_.op("MatMul", {x, cast(w)}).out(0), cast(b)}).out(0);
  }

  // Adds the tail on `logits` [n, 10] (sparse softmax cross-entropy averaged as the loss,
  // the number of rows whose largest logit is the label, --optimizer's updates, an init target)
  // and trains.
  int train(const char* program, const mnist_options& opt, const weft::data::mnist_data& mnist, weft::output logits,
            const std::string& description, const weft::session_options& options = {}) {
    using namespace weft;
    const output axis0 = g_.constant(tensor::from_vector(std::vector<std::int32_t>{0})).out(0);
    const output xent = g_.op("SparseSoftmaxCrossEntropyWithLogits", {logits, m_.labels}).out(0);
    m_.loss = g_.op("Mean", {xent, axis0}, {}, "loss").out(0);
    const output predicted = g_.op("ArgMax", {logits, g_.constant(tensor::scalar(1))}, {{"output_type", dtype::int32}}, "classes").out(0);
    m_.classes = predicted;
    m_.probs = g_.op("Softmax", {logits}, {}, "probs").out(0);  // not run in training: for the saved model
    const output hit = g_.op("Cast", {g_.op("Equal", {predicted, m_.labels}).out(0)}, {{"DstT", dtype::float32}}).out(0);
    m_.correct = g_.op("Sum", {hit, axis0}, {}, "correct").out(0);
    // The learning rate is fed: it decays by opt.decay after each epoch.
    m_.learning_rate = g_.placeholder(dtype::float32, shape{}, "learning_rate").out(0);
    const auto step = opt.optimizer == "sgd" ? train::minimize(g_, m_.loss, vars_, train::sgd{m_.learning_rate})
                                             : train::minimize(g_, m_.loss, vars_, train::adam{m_.learning_rate});
    const node& init = g_.op("NoOp", {}, {}, node_options("init").after(inits_));
    m_.weights = vars_;
    try {
      return train_mnist(program, opt, mnist, g_, m_, step, init, description, options);
    } catch (const weft::error& e) {  // a failed step, checkpoint or event file: said, exit status 1
      std::fprintf(stderr, "%s: %s\n", program, e.what());
      return 1;
    }
  }

 private:
  weft::output variable(const char* name, const std::vector<std::int64_t>& dims, weft::output initial) {
    const weft::output v = g_.variable(weft::dtype::float32, weft::shape(dims), name).out(0);
    inits_.push_back(g_.op("Assign", {v, initial}).id());
    vars_.push_back(v);
    return v;
  }
  weft::graph& g_;
  unsigned seed_;
  mnist_model m_;
  std::vector<weft::output> vars_;
  std::vector<int> inits_;
  int layer_ = 0;
  weft::dtype compute_ = weft::dtype::float32;
};

}  // namespace weft_examples
