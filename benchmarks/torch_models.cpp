// libtorch's side of bench_training: the models as a libtorch user writes them
// (torch::nn modules, torch::optim::SGD), started from weft's weights.
#include "torch_models.hpp"

#include <torch/torch.h>

#include <dlfcn.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace torch_bench {
namespace {

torch::Tensor from(const param& p) {
  return torch::from_blob(const_cast<float*>(p.values), p.dims, torch::kFloat32).clone();
}

std::vector<float> values(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// Linear's weight is [out, in]: weft's [in, out] transposed.
void load_linear(torch::nn::Linear& layer, const param& w, const param& b) {
  torch::NoGradGuard no_grad;
  layer->weight.copy_(from(w).t());
  layer->bias.copy_(from(b));
}

// Conv2d's filter is [out, in, height, width]: weft's [height, width, in, out] permuted.
void load_conv(torch::nn::Conv2d& layer, const param& f, const param& b) {
  torch::NoGradGuard no_grad;
  layer->weight.copy_(from(f).permute({3, 2, 0, 1}));
  layer->bias.copy_(from(b));
}

class trainer : public model {
 public:
  trainer(torch::nn::Module& net, torch::Tensor input, const std::int32_t* labels, std::int64_t batch, float rate)
      : input_(std::move(input)),
        labels_(torch::from_blob(const_cast<std::int32_t*>(labels), {batch}, torch::kInt32).to(torch::kInt64)),
        sgd_(net.parameters(), torch::optim::SGDOptions(rate)) {}

  float step() override {
    sgd_.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(forward(input_), labels_);
    loss.backward();
    sgd_.step();
    return loss.item<float>();
  }

 protected:
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;

 private:
  torch::Tensor input_, labels_;
  torch::optim::SGD sgd_;
};

struct mlp_net : torch::nn::Module {
  torch::nn::Linear l1, l2, l3;
  explicit mlp_net(const std::vector<param>& p)
      : l1(register_module("l1", torch::nn::Linear(p[0].dims[0], p[0].dims[1]))),
        l2(register_module("l2", torch::nn::Linear(p[2].dims[0], p[2].dims[1]))),
        l3(register_module("l3", torch::nn::Linear(p[4].dims[0], p[4].dims[1]))) {
    load_linear(l1, p[0], p[1]);
    load_linear(l2, p[2], p[3]);
    load_linear(l3, p[4], p[5]);
  }
  torch::Tensor forward(const torch::Tensor& x) { return l3(torch::relu(l2(torch::relu(l1(x))))); }
};

class mlp final : public trainer {
 public:
  mlp(std::shared_ptr<mlp_net> net, const float* x, const std::int32_t* labels, std::int64_t batch, float rate)
      : trainer(*net, torch::from_blob(const_cast<float*>(x), {batch, net->l1->options.in_features()}, torch::kFloat32).clone(),
                labels, batch, rate),
        net_(std::move(net)) {}
  std::vector<float> parameter(int i) const override {
    const torch::nn::Linear* layers[] = {&net_->l1, &net_->l2, &net_->l3};
    const auto& layer = *layers[i / 2];
    return values(i % 2 == 0 ? layer->weight.t() : layer->bias);
  }

 private:
  torch::Tensor forward(const torch::Tensor& x) override { return net_->forward(x); }
  std::shared_ptr<mlp_net> net_;
};

struct lenet_net : torch::nn::Module {
  torch::nn::Conv2d c1, c2;
  torch::nn::Linear l3, l4;
  explicit lenet_net(const std::vector<param>& p)
      : c1(register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(p[0].dims[2], p[0].dims[3], 5).padding(2)))),
        c2(register_module("c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(p[2].dims[2], p[2].dims[3], 5).padding(2)))),
        l3(register_module("l3", torch::nn::Linear(p[4].dims[0], p[4].dims[1]))),
        l4(register_module("l4", torch::nn::Linear(p[6].dims[0], p[6].dims[1]))) {
    load_conv(c1, p[0], p[1]);
    load_conv(c2, p[2], p[3]);
    // weft flattens [n, 7, 7, c2] (NHWC), torch [n, c2, 7, 7]: permute w3's input rows.
    const std::int64_t channels = p[2].dims[3], units = p[4].dims[1];
    torch::NoGradGuard no_grad;
    l3->weight.copy_(from(p[4]).view({7, 7, channels, units}).permute({3, 2, 0, 1}).reshape({units, 49 * channels}));
    l3->bias.copy_(from(p[5]));
    load_linear(l4, p[6], p[7]);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = torch::max_pool2d(torch::relu(c1(x)), 2);
    h = torch::max_pool2d(torch::relu(c2(h)), 2);
    return l4(torch::relu(l3(h.flatten(1))));
  }
};

class lenet final : public trainer {
 public:
  lenet(std::shared_ptr<lenet_net> net, const float* images, const std::int32_t* labels, std::int64_t batch, float rate)
      // One channel: NHWC and NCHW are the same memory.
      : trainer(*net, torch::from_blob(const_cast<float*>(images), {batch, 1, 28, 28}, torch::kFloat32).clone(), labels,
                batch, rate),
        net_(std::move(net)) {}
  std::vector<float> parameter(int i) const override {
    if (i == 0) return values(net_->c1->weight.permute({2, 3, 1, 0}));
    if (i == 1) return values(net_->c1->bias);
    throw std::invalid_argument("lenet: only the first layer's parameters are compared");
  }

 private:
  torch::Tensor forward(const torch::Tensor& x) override { return net_->forward(x); }
  std::shared_ptr<lenet_net> net_;
};

}  // namespace

int default_threads() {
  static const int threads = torch::get_num_threads();
  return threads;
}

void set_threads(int threads) {
  default_threads();  // remembered before the first change
  torch::set_num_threads(threads);
}

namespace {

// OpenBLAS's entry points, looked up in the process (absent for another BLAS).
struct openblas_api {
  void (*set_num_threads)(int) = nullptr;
  int (*get_num_threads)() = nullptr;
  char* (*get_config)() = nullptr;
  char* (*get_corename)() = nullptr;
  int initial_threads = 0;
  openblas_api() {
    set_num_threads = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    get_num_threads = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    get_config = reinterpret_cast<char* (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
    get_corename = reinterpret_cast<char* (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
    if (get_num_threads) initial_threads = get_num_threads();
  }
};

const openblas_api& openblas() {
  static const openblas_api api;
  return api;
}

}  // namespace

std::string blas_description() {
  std::string out = "sgemm_ not found";
  if (void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_")) {
    Dl_info info{};
    out = dladdr(sgemm, &info) != 0 && info.dli_fname ? info.dli_fname : "sgemm_ in an unnamed object";
  }
  const openblas_api& api = openblas();
  if (api.get_config) out += std::string("; OpenBLAS ") + api.get_config();
  if (api.get_corename) out += std::string(", core ") + api.get_corename();
  if (api.get_num_threads) out += ", " + std::to_string(api.initial_threads) + " threads by default";
  return out;
}

bool set_blas_threads(int threads) {
  const openblas_api& api = openblas();
  if (!api.set_num_threads) return false;
  api.set_num_threads(threads > 0 ? threads : api.initial_threads);
  return true;
}

std::unique_ptr<model> make_mlp(const std::vector<param>& params, const float* x, const std::int32_t* labels,
                                std::int64_t batch, float rate) {
  return std::make_unique<mlp>(std::make_shared<mlp_net>(params), x, labels, batch, rate);
}

std::unique_ptr<model> make_lenet(const std::vector<param>& params, const float* images, const std::int32_t* labels,
                                  std::int64_t batch, float rate) {
  return std::make_unique<lenet>(std::make_shared<lenet_net>(params), images, labels, batch, rate);
}

namespace {
class lenet_inference final : public inference {
 public:
  explicit lenet_inference(const std::vector<param>& params) : net_(std::make_shared<lenet_net>(params)) { net_->eval(); }
  std::vector<float> forward(const float* images, std::int64_t batch) override {
    torch::NoGradGuard no_grad;
    const torch::Tensor x = torch::from_blob(const_cast<float*>(images), {batch, 1, 28, 28}, torch::kFloat32);
    const torch::Tensor logits = net_->forward(x).contiguous();
    if (logits.size(0) != batch) throw std::logic_error("lenet_inference: wrong batch");
    const float* p = logits.data_ptr<float>();
    return std::vector<float>(p, p + logits.numel());
  }

 private:
  std::shared_ptr<lenet_net> net_;
};
}  // namespace

std::unique_ptr<inference> make_lenet_inference(const std::vector<param>& params) {
  return std::make_unique<lenet_inference>(params);
}

}  // namespace torch_bench
