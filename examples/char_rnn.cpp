// A character-level LSTM language model over the King James Bible, one verse per
// sequence, written with the typed DSL's layers (weft::layers: embedding, lstm_cell run by
// layers::rnn, dense). The recurrence is a while loop in the graph (rnn runs the cell in
// weft::scan), as long as each batch's longest verse, and its gradient is the backward
// loop that weft::add_gradients builds (weft::train::minimize calls it). After each epoch it prints
// the perplexity on held-out verses and a sample of generated text. The verses are bucketed
// by length through queues on threads of their own (bucketed_epoch); --sorted-batches makes
// the batches on the host instead (verses sorted by length, then cut: the same every run,
// where the buckets' batches come in the order they fill).
//
//   tools/fetch-kjv               # once: the text into ~/.cache/weft/kjv (Debian's bible-kjv)
//   char_rnn --epochs 2 --seed 1
//
// Exit status: 0, 1 above --max-perplexity or on an error, 2 for bad options, 77 when the
// text is missing (CTest reads it as skipped).
//
// Every verse is a sequence "\n<verse>\n" (at most --max-len characters; longer verses are
// cut), and the model predicts each character from the ones before it. Verses are batched
// with others of similar length; a batch runs as many loop iterations as its longest
// verse, and a mask leaves out the padding. One verse in 50 is held out for validation.
//
// It saves a checkpoint of every variable after each epoch to --checkpoint-dir
// (char_rnn_checkpoints, keeping the last 3); --resume continues from the newest one.
//
// Options: --epochs N (2), --batch N (32), --hidden N (256), --embed N (32), --lr X
// (0.003), --decay X (0.7: the learning rate's factor after each epoch), --seed N (1),
// --max-len N (128), --train-verses N (all), --sample N (300 characters), --temperature X
// (0.7), --data FILE (the data directory's kjv/kjv.txt), --max-perplexity X (exit with
// status 1 above it, for tests), --checkpoint-dir DIR, --resume, --sorted-batches, --device
// cpu|gpu (the model on GPU:0, where there is one: exit 77 otherwise), --threads N (0: every
// core; else N threads for kernels, N - 1 beside them for nodes), --logdir DIR (TensorBoard
// event files: the graph, every --log-every N (100) steps the loss, accuracy and learning
// rate, after each epoch the validation perplexity and the weights' histograms).
#include <weft/dsl.hpp>
#include <weft/weft.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "device_option.hpp"

namespace {

using namespace weft;

struct options {
  int epochs = 2, batch = 32, hidden = 256, embed = 32, max_len = 128, sample = 300, threads = 0, log_every = 100;
  std::string logdir;  // TensorBoard event files (weft::summary_writer) under this directory
  long train_verses = 0;
  unsigned seed = 1;
  double lr = 0.003, decay = 0.7, temperature = 0.7, max_perplexity = 0;
  std::string data, checkpoint_dir = "char_rnn_checkpoints";
  bool resume = false;
  bool queues = true;  // bucket verses by length through queues (whitepaper 4.6); else sort them on the host
  std::string device = "cpu";  // cpu or gpu (device_option.hpp)
};

options parse(int argc, char** argv) {
  options o;
  auto usage = [](int status) {
    std::fprintf(status ? stderr : stdout,
                 "usage: char_rnn [--epochs N] [--batch N] [--hidden N] [--embed N] [--lr X] [--decay X] [--seed N] "
                 "[--max-len N] [--train-verses N] [--sample N] [--temperature X] [--data FILE] [--max-perplexity X] "
                 "[--checkpoint-dir DIR] [--resume] [--sorted-batches] [--device cpu|gpu] [--threads N] [--logdir DIR] "
                 "[--log-every N]\n");
    std::exit(status);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "char_rnn: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (a == "--epochs") o.epochs = std::stoi(value());
      else if (a == "--batch") o.batch = std::stoi(value());
      else if (a == "--hidden") o.hidden = std::stoi(value());
      else if (a == "--embed") o.embed = std::stoi(value());
      else if (a == "--lr") o.lr = std::stod(value());
      else if (a == "--decay") o.decay = std::stod(value());
      else if (a == "--seed") o.seed = static_cast<unsigned>(std::stoul(value()));
      else if (a == "--max-len") o.max_len = std::stoi(value());
      else if (a == "--train-verses") o.train_verses = std::stol(value());
      else if (a == "--sample") o.sample = std::stoi(value());
      else if (a == "--temperature") o.temperature = std::stod(value());
      else if (a == "--data") o.data = value();
      else if (a == "--max-perplexity") o.max_perplexity = std::stod(value());
      else if (a == "--checkpoint-dir") o.checkpoint_dir = value();
      else if (a == "--resume") o.resume = true;
      else if (a == "--queues") o.queues = true;
      else if (a == "--sorted-batches") o.queues = false;
      else if (a == "--device") o.device = value();
      else if (a == "--threads") o.threads = std::stoi(value());
      else if (a == "--logdir") o.logdir = value();
      else if (a == "--log-every") o.log_every = std::stoi(value());
      else if (a == "--help") usage(0);
      else usage(2);
    } catch (const std::logic_error&) {  // std::stoi and friends on a non-number
      std::fprintf(stderr, "char_rnn: %s needs a number\n", a.c_str());
      std::exit(2);
    }
  }
  if (o.epochs < 1 || o.batch < 1 || o.hidden < 1 || o.embed < 1 || o.max_len < 2 || o.sample < 0 || o.temperature <= 0 ||
      o.threads < 0 || o.log_every < 1) {
    std::fprintf(stderr, "char_rnn: --epochs, --batch, --hidden, --embed and --temperature must be positive, --max-len at least 2, "
                         "--threads not negative, --log-every positive\n");
    std::exit(2);
  }
  return o;
}

std::string default_data_file() {
  if (const char* d = std::getenv("WEFT_DATA_DIR")) return std::string(d) + "/kjv/kjv.txt";
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return std::string(x) + "/weft/kjv/kjv.txt";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/weft/kjv/kjv.txt";
}

// The corpus: verses as sequences of character ids, "\n" (id 0) around each.
struct corpus {
  std::vector<char> chars;  // id -> character
  std::array<int, 256> id{};
  std::vector<std::vector<std::int32_t>> train, validation;
};

corpus load(const std::string& file, const options& o) {
  std::ifstream in(file);
  if (!in) fail(error_code::not_found, "cannot open '", file, "'; run tools/fetch-kjv (Debian's bible-kjv) to write it");
  std::vector<std::string> verses;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) verses.push_back(line);
  if (verses.size() < 100) fail(error_code::invalid_argument, "'", file, "' has ", verses.size(), " verses; expected the whole KJV text");
  corpus c;
  std::array<bool, 256> seen{};
  seen[static_cast<unsigned char>('\n')] = true;
  for (const auto& v : verses)
    for (char ch : v) seen[static_cast<unsigned char>(ch)] = true;
  c.chars.push_back('\n');
  for (int ch = 0; ch < 256; ++ch)
    if (seen[static_cast<std::size_t>(ch)] && ch != '\n') c.chars.push_back(static_cast<char>(ch));
  for (std::size_t k = 0; k < c.chars.size(); ++k) c.id[static_cast<unsigned char>(c.chars[k])] = static_cast<int>(k);
  for (std::size_t k = 0; k < verses.size(); ++k) {
    std::vector<std::int32_t> s{0};
    for (char ch : verses[k]) s.push_back(c.id[static_cast<unsigned char>(ch)]);
    s.push_back(0);
    if (s.size() > static_cast<std::size_t>(o.max_len)) s.resize(static_cast<std::size_t>(o.max_len));
    (k % 50 == 49 ? c.validation : c.train).push_back(std::move(s));
  }
  if (o.train_verses > 0 && static_cast<std::size_t>(o.train_verses) < c.train.size()) c.train.resize(static_cast<std::size_t>(o.train_verses));
  return c;
}

// A batch, time-major: inputs and targets [T, B] (int32), the mask [T, B] (float32: 1 where
// a verse has a character to predict), T the longest verse's length less one.
struct batch {
  tensor inputs, targets, mask, zeros;
  double tokens = 0;
};

batch batch_from_padded(const tensor& padded, const tensor& lengths, std::int64_t hidden);

batch make_batch(const std::vector<std::vector<std::int32_t>>& seqs, const std::vector<std::size_t>& rows, std::int64_t hidden) {
  std::size_t longest = 0;
  for (auto r : rows) longest = std::max(longest, seqs[r].size());
  const auto b = static_cast<std::int64_t>(rows.size()), width = static_cast<std::int64_t>(longest);
  tensor padded = tensor::zeros(dtype::int32, shape{b, width}), lengths(dtype::int32, shape{b});
  for (std::int64_t j = 0; j < b; ++j) {
    const auto& s = seqs[rows[static_cast<std::size_t>(j)]];
    std::copy(s.begin(), s.end(), padded.data<std::int32_t>() + j * width);
    lengths.data<std::int32_t>()[j] = static_cast<std::int32_t>(s.size());
  }
  return batch_from_padded(padded, lengths, hidden);
}

// A batch from a padded one: `padded` [B, L] int32 (verses, zeros after their ends) and
// `lengths` [B], as make_batch gives it.
batch batch_from_padded(const tensor& padded, const tensor& lengths, std::int64_t hidden) {
  const std::int64_t b = padded.dim(0), width = padded.dim(1);
  const auto* p = padded.data<std::int32_t>();
  const auto* len = lengths.data<std::int32_t>();
  std::int64_t longest = 0;
  for (std::int64_t j = 0; j < b; ++j) longest = std::max<std::int64_t>(longest, len[j]);
  const std::int64_t t = longest - 1;
  batch out;
  out.inputs = tensor(dtype::int32, shape{t, b});
  out.targets = tensor(dtype::int32, shape{t, b});
  out.mask = tensor(dtype::float32, shape{t, b});
  for (std::int64_t i = 0; i < t; ++i)
    for (std::int64_t j = 0; j < b; ++j) {
      const bool valid = i + 1 < len[j];
      out.inputs.data<std::int32_t>()[i * b + j] = valid ? p[j * width + i] : 0;
      out.targets.data<std::int32_t>()[i * b + j] = valid ? p[j * width + i + 1] : 0;
      out.mask.data<float>()[i * b + j] = valid ? 1.0f : 0.0f;
      out.tokens += valid;
    }
  out.zeros = tensor::from_vector(std::vector<float>(static_cast<std::size_t>(b * hidden), 0.0f), shape{b, hidden});
  return out;
}

// One epoch's batches bucketed by length through queues (the default), TensorFlow's
// bucket_by_sequence_length. A producer thread puts the epoch's verses, shuffled, each into
// the PaddingFIFOQueue of its length's bucket (four, split at quarters of --max-len); a
// queue_runner thread per bucket moves up to --batch verses at a time, padded to the
// longest, from its bucket into one queue of batches, as buckets fill (the last, short
// batches once the producer has closed the buckets); the training loop takes batches from
// that queue until the epoch's end.
class bucketed_epoch {
 public:
  bucketed_epoch(const std::vector<std::vector<std::int32_t>>& seqs, int batch_size, int max_len, std::uint64_t seed)
      : batches_(g_, {.component_types = {dtype::int32, dtype::int32}, .shapes = {partial_shape({unknown_dim, unknown_dim}),
                                                                                   partial_shape({unknown_dim})},
                      .capacity = 8},
                 "batches") {
    seq_ = g_.placeholder(dtype::int32, partial_shape({unknown_dim}), "verse").out(0);
    len_ = g_.placeholder(dtype::int32, partial_shape({}), "length").out(0);
    std::vector<endpoint> movers;
    for (int k = 0; k < 4; ++k) {
      graph_queue bucket(g_, {.kind = queue_kind::padding_fifo, .component_types = {dtype::int32, dtype::int32},
                              .shapes = {partial_shape({unknown_dim}), partial_shape({})}, .capacity = 4 * batch_size},
                         "bucket" + std::to_string(k));
      puts_.push_back(bucket.enqueue({seq_, len_}).name());
      closes_.push_back(bucket.close().name());
      movers.push_back(std::string(batches_.enqueue(bucket.dequeue_up_to(batch_size)).name()));
    }
    next_ = batches_.dequeue("next_batch");
    const std::string close = batches_.close().name(), cancel = batches_.close(true).name();
    session_ = std::make_unique<session>(g_);
    runner_ = std::make_unique<queue_runner>(*session_, movers, queue_runner_options{endpoint(close), endpoint(cancel)});
    runner_->start(coord_);
    std::vector<std::size_t> order(seqs.size());
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 random(seed);
    std::shuffle(order.begin(), order.end(), random);
    coord_.add_thread(std::thread([this, &seqs, order = std::move(order), max_len] {
      run_options o;
      o.cancellation = &coord_.cancellation();
      try {
        for (std::size_t r : order) {
          if (coord_.should_stop()) return;
          const auto& v = seqs[r];
          const int k = std::min(3, static_cast<int>(4 * (v.size() - 1) / static_cast<std::size_t>(max_len + 1)));
          session_->run({{seq_, tensor::from_vector(v)}, {len_, tensor::scalar(static_cast<std::int32_t>(v.size()))}}, {},
                        {puts_[static_cast<std::size_t>(k)]}, o);
        }
        for (const auto& c : closes_) session_->run({}, {}, {c}, o);
      } catch (...) {
        coord_.request_stop(std::current_exception());
      }
    }));
  }
  ~bucketed_epoch() {
    coord_.request_stop();
    try {
      coord_.join();
    } catch (...) {
    }
  }
  // The next batch ([B, L] padded verses and their lengths), or false at the epoch's end.
  bool next(tensor& padded, tensor& lengths) {
    try {
      auto got = session_->run({}, {next_[0], next_[1]});
      padded = got[0], lengths = got[1];
      return true;
    } catch (const error& e) {
      coord_.raise_if_error();
      if (e.code() == error_code::out_of_range) return false;
      throw;
    }
  }

 private:
  graph g_;
  graph_queue batches_;
  output seq_, len_;
  std::vector<std::string> puts_, closes_;
  std::vector<output> next_;
  std::unique_ptr<session> session_;
  std::unique_ptr<queue_runner> runner_;
  coordinator coord_;  // last: stopped and joined first
};

// Rows of `seqs` in batches of verses of similar length (sorted by length, then cut).
std::vector<std::vector<std::size_t>> batches_of(const std::vector<std::vector<std::int32_t>>& seqs, int size) {
  std::vector<std::size_t> order(seqs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return seqs[a].size() < seqs[b].size(); });
  std::vector<std::vector<std::size_t>> out;
  for (std::size_t first = 0; first < order.size(); first += static_cast<std::size_t>(size))
    out.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(first),
                     order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), first + static_cast<std::size_t>(size))));
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  const options opt = parse(argc, argv);
  corpus text;
  try {
    text = load(opt.data.empty() ? default_data_file() : opt.data, opt);
  } catch (const weft::error& e) {
    std::fprintf(stderr, "char_rnn: %s\n", e.what());
    return e.code() == error_code::not_found ? 77 : 1;
  }
  const auto vocab = static_cast<std::int64_t>(text.chars.size());
  const std::int64_t hidden = opt.hidden, embed = opt.embed;

  // The model on the device --device names (the queues and the sampler's host work stay on
  // the CPU: soft placement).
  session_options session_opts;
  if (opt.threads > 0) session_opts.intra_op_threads = opt.threads, session_opts.inter_op_threads = opt.threads - 1;
  graph g;
  const auto on_device = g.device_scope(weft_examples::use_device("char_rnn", opt.device, session_opts));
  // The model in weft::layers: an embedding, an LSTM cell run over the batch's time steps
  // by layers::rnn (a while loop as long as the batch's longest verse), and a dense layer
  // to the logits of every step at once. Initial values: the embedding U(-0.1, 0.1), the
  // kernels Glorot-uniform, seeded (--seed, 1 to 3); the LSTM's forget bias 1, other biases 0.
  namespace L = weft::layers;
  const auto seed = static_cast<std::int64_t>(opt.seed);
  L::embedding<float> embedding("embedding", vocab, embed, {L::uniform_initializer(-0.1, 0.1, seed, 1)});
  L::lstm_cell<float> cell("lstm", embed, hidden, {.kernel = L::glorot_uniform(seed, 2)});
  L::dense<float> output_layer("output", hidden, vocab, {.kernel = L::glorot_uniform(seed, 3)});

  // Training and validation: a batch, time-major ([T, B]), the padding masked out.
  const output inputs = g.placeholder(dtype::int32, {unknown_dim, unknown_dim}, "inputs").out(0);
  const output targets = g.placeholder(dtype::int32, {unknown_dim, unknown_dim}, "targets").out(0);
  const output mask = g.placeholder(dtype::float32, {unknown_dim, unknown_dim}, "mask").out(0);
  const output zeros = g.placeholder(dtype::float32, {unknown_dim, hidden}, "zeros").out(0);
  auto zero_state = wrap<float, dyn, dyn>(g, zeros);
  auto hs = L::rnn(cell, embedding(wrap<std::int32_t, dyn, dyn>(g, inputs)), zero_state, zero_state);
  // Every step's h as rows [T * B, hidden], through the output layer at once.
  auto rows = raw_op<float, dyn, dyn>("Reshape", {hs, constant(std::vector<std::int64_t>{-1, hidden}, dims<2>)});
  auto logits = output_layer(rows);
  auto target = reshape(wrap<std::int32_t, dyn, dyn>(g, targets), dims<dyn>);
  auto weight = reshape(wrap<float, dyn, dyn>(g, mask), dims<dyn>);
  auto loss_sum_expr = reduce_sum(sparse_softmax_cross_entropy_with_logits(logits, target) * weight);
  auto correct_expr = reduce_sum(cast<float>(equal(argmax(logits, axes<1>), cast<std::int64_t>(target))) * weight);

  // Sampling: one step at a time, the state fed back by the host.
  const output char_in = g.placeholder(dtype::int32, shape{1}, "char").out(0);
  const output h_in = g.placeholder(dtype::float32, shape{1, hidden}, "h").out(0);
  const output c_in = g.placeholder(dtype::float32, shape{1, hidden}, "c").out(0);
  const output temperature = g.placeholder(dtype::float32, shape{}, "temperature").out(0);
  auto [h1, c1] = cell(embedding(wrap<std::int32_t, 1>(g, char_in)), wrap<float, 1, dyn>(g, h_in), wrap<float, 1, dyn>(g, c_in));
  auto probabilities_expr = softmax(output_layer(h1) / wrap<float>(g, temperature));

  // Lowered into the graph in one lowering (so each variable is one node), without fusion:
  // the training step differentiates the graph (weft::add_gradients).
  lowering cx(g, false);
  // The trained variables (--logdir's histograms read them); wherever a variable is first
  // lowered, its node has its own name ("lstm/kernel", not the loop's "rnn/lstm/kernel").
  std::vector<output> weights;
  std::apply([&](const auto&... v) { (weights.push_back(weft::lower(cx, v)), ...); },
             std::tuple_cat(embedding.variables(), cell.variables(), output_layer.variables()));
  const output loss_sum = weft::lower(cx, loss_sum_expr), correct = weft::lower(cx, correct_expr);
  const output probabilities = weft::lower(cx, probabilities_expr);
  const output next_h = weft::lower(cx, h1), next_c = weft::lower(cx, c1);
  const output tokens = g.op("Sum", {mask, g.constant(tensor::from_vector(std::vector<std::int32_t>{0, 1})).out(0)}).out(0);
  const output loss = g.op("Div", {loss_sum, tokens}, {}, "loss").out(0);
  const output learning_rate = g.placeholder(dtype::float32, shape{}, "learning_rate").out(0);
  const auto train = train::minimize(g, loss, variables_of(g), train::adam{learning_rate});
  const node& init = g.op("NoOp", {}, {}, node_options("init").after(cx.initializers()));

  const saver checkpoints(g, variables_of(g), {.keep = 3});
  const std::filesystem::path prefix = std::filesystem::path(opt.checkpoint_dir) / "char_rnn";
  session s(g, session_opts);
  s.run({init, train.init});
  int first_epoch = 1;
  if (opt.resume) {
    if (auto last = saver::latest(prefix)) {
      checkpoints.restore(s, last->second);
      first_epoch = static_cast<int>(last->first) + 1;
      std::printf("char_rnn: resumed from %s\n", last->second.c_str());
    } else {
      std::printf("char_rnn: no checkpoint under %s; starting afresh\n", prefix.c_str());
    }
  }

  auto train_batches = batches_of(text.train, opt.batch);
  const auto validation_batches = batches_of(text.validation, opt.batch);
  auto feeds_of = [&](const batch& b) {
    return feed_list{{inputs, b.inputs}, {targets, b.targets}, {mask, b.mask}, {zeros, b.zeros}};
  };
  auto validation_perplexity = [&] {
    double total = 0, count = 0;
    for (const auto& rows : validation_batches) {
      const batch b = make_batch(text.validation, rows, hidden);
      total += s.run(feeds_of(b), {loss_sum}).at(0).scalar_value<float>();
      count += b.tokens;
    }
    return std::exp(total / count);
  };
  auto generate = [&](unsigned seed) {
    std::mt19937 rng(seed);
    tensor h = tensor::from_vector(std::vector<float>(static_cast<std::size_t>(hidden), 0.0f), shape{1, hidden}), c = h;
    std::int32_t ch = 0;
    std::string out;
    for (int k = 0; k < opt.sample; ++k) {
      auto r = s.run({{char_in, tensor::from_vector(std::vector<std::int32_t>{ch})}, {h_in, h}, {c_in, c},
                      {temperature, tensor::scalar(static_cast<float>(opt.temperature))}},
                     {probabilities, next_h, next_c});
      const auto p = r[0].to_vector<float>();
      ch = static_cast<std::int32_t>(std::discrete_distribution<int>(p.begin(), p.end())(rng));
      h = r[1], c = r[2];
      out += text.chars[static_cast<std::size_t>(ch)];
    }
    return out;
  };

  std::printf("char_rnn: LSTM %lld-%lld-%lld over %zu characters, %zu training and %zu validation verses, batch %d, "
              "Adam lr %g decaying by %g per epoch, seed %u\n",
              static_cast<long long>(embed), static_cast<long long>(hidden), static_cast<long long>(vocab), text.chars.size(),
              text.train.size(), text.validation.size(), opt.batch, opt.lr, opt.decay, opt.seed);
  // With --logdir: the graph, the loss, accuracy and learning rate every --log-every steps.
  std::optional<summary_writer> log;
  if (!opt.logdir.empty()) {
    log.emplace(opt.logdir);
    log->graph(g);
    std::printf("char_rnn: TensorBoard events in %s\n", log->path().c_str());
  }
  std::int64_t global_step = 0;
  // The epoch's progress (a line every 50 steps off a terminal) and the metrics' means (to the
  // event file every --log-every steps).
  progress_bar bar(static_cast<std::int64_t>(train_batches.size()), {.line_every = 50});
  metrics_logger metrics(log ? &*log : nullptr, opt.log_every);
  double perplexity = 0, seconds = 0;
  for (int epoch = first_epoch; epoch <= opt.epochs; ++epoch) {
    std::mt19937_64 shuffle(opt.seed * 1000003ull + static_cast<unsigned>(epoch));
    std::shuffle(train_batches.begin(), train_batches.end(), shuffle);
    const tensor rate = tensor::scalar(static_cast<float>(opt.lr * std::pow(opt.decay, epoch - 1)));
    bar.start("epoch " + std::to_string(epoch) + "/" + std::to_string(opt.epochs));
    metrics.start_epoch();
    auto step = [&](const batch& b) {
      feed_list feeds = feeds_of(b);
      feeds.push_back({learning_rate, rate});
      auto out = s.run(feeds, {loss, correct}, {train.step});
      const auto tokens = static_cast<double>(b.tokens);  // the loss is a mean per token
      metrics.add("loss", out[0].scalar_value<float>(), tokens);
      metrics.add("accuracy", out[1].scalar_value<float>() / tokens, tokens);
      metrics.add("learning_rate", rate.scalar_value<float>());
      metrics.end_step(++global_step);
      bar.step(static_cast<std::int64_t>(b.tokens), metrics.text());
    };
    if (opt.queues) {
      bucketed_epoch input(text.train, opt.batch, opt.max_len, opt.seed * 1000003ull + static_cast<unsigned>(epoch));
      for (tensor padded, lengths; input.next(padded, lengths);) step(batch_from_padded(padded, lengths, hidden));
    } else {
      for (const auto& rows : train_batches) step(make_batch(text.train, rows, hidden));
    }
    const double training_loss = metrics.mean("loss");
    seconds += bar.end(metrics.text());
    perplexity = validation_perplexity();
    if (log) {  // after each epoch: the validation perplexity and the weights' histograms
      metrics.scalar("validation_perplexity", perplexity, global_step);
      const auto values = s.run({}, std::vector<endpoint>(weights.begin(), weights.end()));
      for (std::size_t i = 0; i < values.size(); ++i) log->histogram(g.at(weights[i].node).name(), values[i], global_step);
      log->flush();
    }
    const auto file = checkpoints.save(s, prefix, epoch);
    std::printf("epoch %d: training perplexity %.2f, validation perplexity %.2f, saved %s\n", epoch, std::exp(training_loss),
                perplexity, file.c_str());
    std::printf("sample: %s\n", generate(opt.seed + static_cast<unsigned>(epoch)).c_str());
  }
  if (first_epoch > opt.epochs) perplexity = validation_perplexity();
  std::printf("validation perplexity %.2f after %d epoch%s (%.1f s of training in this run)\n", perplexity, opt.epochs, opt.epochs == 1 ? "" : "s", seconds);
  if (opt.max_perplexity > 0 && perplexity > opt.max_perplexity) {
    std::fprintf(stderr, "char_rnn: validation perplexity %.3f is above --max-perplexity %.3f\n", perplexity, opt.max_perplexity);
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "char_rnn: %s\n", e.what());
  return 1;
}
