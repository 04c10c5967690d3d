/// @file
/// Layers on the typed DSL (Keras layers, torch::nn modules, dlib's typed layers):
/// objects that own their variables, with initializers, under a name scope of their own, and
/// that apply to typed expressions. A layer's sizes are template arguments where they are
/// known when the program is compiled, so a layer that does not fit its input is a compile
/// error naming the layer; weft::dyn sizes are given to the constructor instead (a size
/// chosen by a command-line option) and checked when the layer is applied.
///
///   namespace L = weft::layers;
///   auto net = L::sequential(L::dense<float, 784, 512>("fc1"), L::relu,
///                            L::dense<float, 512, 10>("fc2"));
///   auto logits = net(images);                                          // [dyn, 10]
///   auto step = weft::train::minimize(loss, weft::train::adam{1e-3}, net.variables());
///
///   L::conv2d<float, 5, 5, 1, 16>("conv1")      5x5 filter, 1 -> 16 channels, SAME, stride 1
///   L::conv2d<float, 3, 3, dyn, dyn, valid_padding, 2, 2>("c", 16, n)  sizes at run time
///   L::max_pool<2, 2>{}, L::avg_pool<3, 3, 2, 2, same_padding>{}, L::flatten{}
///   L::dropout(rate, seed, seed2)                rate: a number or a scalar expression
///   L::dense<float, 784, L::dyn, bfloat16>("fc", 784, hidden)  variables in float,
///                                                 computing in bfloat16 (mixed precision)
///   L::batch_norm<float, 16>("bn"): bn(x, L::training) (batch statistics; moving averages
///                                                 updated), bn(x, L::inference) (moving ones)
///   L::embedding<float, 65, 32>("embed")         int ids -> rows of a [65, 32] table
///   L::lstm_cell<float, 32, 256>("lstm"), L::gru_cell<...>: one step, auto [h, c] = cell(x, h, c)
///   L::rnn(cell, inputs, h0, c0)                 the cell over [time, batch, features] in a
///                                                 while loop: the outputs h, [time, batch, units]
///
/// Variables are named "<layer>/kernel" and "<layer>/bias" (embeddings: "<layer>/embeddings";
/// a GRU's "<layer>/gates/..." and "<layer>/candidate/...") (the layer's name in the name
/// scope it was made in), start from the layer's initializers (glorot_uniform and zeros by
/// default: Keras's defaults) and are lowered, with their initializers, the first time the
/// layer is; client_session::initialize runs the initializers, its save and restore cover
/// them, and `variables()` gives them to train::minimize. Copies of a layer share its
/// variables (applying one layer twice shares its weights).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/hana/append.hpp>
#include <boost/hana/at.hpp>
#include <boost/hana/prepend.hpp>
#include <boost/hana/take_front.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/unpack.hpp>

#include <weft/dsl/array_ops.hpp>
#include <weft/dsl/functional_ops.hpp>
#include <weft/dsl/leaves.hpp>
#include <weft/dsl/nn_ops.hpp>
#include <weft/dsl/ops.hpp>
#include <weft/dsl/state_ops.hpp>
#include <weft/ops/random_ops.hpp>

namespace weft {

namespace check {
WEFT_DETAIL_SUPPORT_CHECK(layer_dtype, "weft::layers: the input's dtype is neither the layer's nor its compute dtype");
WEFT_DETAIL_DIM_CHECK(dense_rank, "weft::layers::dense: the input must be a matrix [batch, features]");
WEFT_DETAIL_DIM_CHECK(dense_inputs, "weft::layers::dense: the input's features differ from the layer's input size");
WEFT_DETAIL_DIM_CHECK(conv2d_layer_rank, "weft::layers::conv2d: the input must have rank 4 (NHWC)");
WEFT_DETAIL_DIM_CHECK(conv2d_layer_channels,
                      "weft::layers::conv2d: the input's channels differ from the layer's input channels");
WEFT_DETAIL_DIM_CHECK(rnn_rank, "weft::layers: a recurrent cell's input and state must be matrices [batch, size]");
WEFT_DETAIL_DIM_CHECK(rnn_inputs, "weft::layers: the input's features differ from the recurrent cell's input size");
WEFT_DETAIL_DIM_CHECK(rnn_units, "weft::layers: a state's size differs from the recurrent cell's unit count");
WEFT_DETAIL_DIM_CHECK(rnn_sequence_rank, "weft::layers::rnn: the inputs must be [time, batch, features]");
WEFT_DETAIL_DIM_CHECK(batch_norm_layer_channels, "weft::layers::batch_norm: the input's channels differ from the layer's");
WEFT_DETAIL_DIM_CHECK(flatten_rank, "weft::layers::flatten: the input must have rank 2 or more");
}  // namespace check

namespace layers {

using weft::dyn;

/// How a variable starts. fan_in and fan_out are the layer's (a dense layer's input and
/// output sizes; a convolution's window area times its input or output channels).
///   zeros_initializer(), constant_initializer(v)
///   uniform_initializer(low, high, seed, seed2): U(low, high)
///   glorot_uniform(seed, seed2): U(-r, r), r = sqrt(6 / (fan_in + fan_out))
///   glorot_normal: a normal truncated at 2 stddev, stddev = sqrt(2 / (fan_in + fan_out))
///   he_uniform: r = sqrt(6 / fan_in); he_normal: stddev = sqrt(2 / fan_in) (truncated)
/// The random ones draw from RandomUniform or TruncatedNormal with the given seeds (TF's:
/// both 0 draws differently each run of the initializer).
struct initializer {
  /// The rule (see above).
  enum class kind { constant, uniform, glorot_uniform, glorot_normal, he_uniform, he_normal };
  kind how = kind::constant;         ///< the rule
  double value = 0;                  ///< constant; uniform: the low end
  std::int64_t seed = 0;             ///< the random ones' seed (with seed2 0: different each run)
  std::int64_t seed2 = 0;            ///< the random ones' second seed
  double high = 0;                   ///< uniform: the high end
};
/// Zeros.
inline initializer zeros_initializer() { return {}; }
/// Every element `value`.
inline initializer constant_initializer(double value) { return {initializer::kind::constant, value}; }
/// U(low, high) (Keras's RandomUniform; embeddings start from U(-0.05, 0.05)).
inline initializer uniform_initializer(double low, double high, std::int64_t seed = 0, std::int64_t seed2 = 0) {
  if (!(low <= high))
    fail(error_code::invalid_argument, "weft::layers::uniform_initializer: low ", low, " is above high ", high);
  return {initializer::kind::uniform, low, seed, seed2, high};
}
/// U(-r, r), r = sqrt(6 / (fan_in + fan_out)) (Keras's default for kernels).
inline initializer glorot_uniform(std::int64_t seed = 0, std::int64_t seed2 = 0) {
  return {initializer::kind::glorot_uniform, 0, seed, seed2};
}
/// A normal truncated at 2 stddev, stddev = sqrt(2 / (fan_in + fan_out)).
inline initializer glorot_normal(std::int64_t seed = 0, std::int64_t seed2 = 0) {
  return {initializer::kind::glorot_normal, 0, seed, seed2};
}
/// U(-r, r), r = sqrt(6 / fan_in) (for ReLU layers).
inline initializer he_uniform(std::int64_t seed = 0, std::int64_t seed2 = 0) {
  return {initializer::kind::he_uniform, 0, seed, seed2};
}
/// A normal truncated at 2 stddev, stddev = sqrt(2 / fan_in).
inline initializer he_normal(std::int64_t seed = 0, std::int64_t seed2 = 0) {
  return {initializer::kind::he_normal, 0, seed, seed2};
}

namespace detail {

using weft::detail::int_constant;

template <class T>
output scalar_constant(lowering& cx, double value, const scope_info* scope) {
  return cx.add("Const", {}, {{"value", tensor::scalar(static_cast<T>(value))}, {"dtype", dtype_of<T>}}, scope);
}

/// The initial value of a variable of dtype T and shape `dims`.
template <class T>
output initial_value(lowering& cx, const initializer& init, const shape& dims, std::int64_t fan_in,
                     std::int64_t fan_out, const scope_info* scope) {
  use_kernels<ops::families::core>();
  const output size = int_constant(cx, dims.dims(), shape{dims.rank()});
  using kind = initializer::kind;
  if (init.how == kind::constant) {
    use_kernels<ops::Fill, T>();
    return cx.add("Fill", {size, scalar_constant<T>(cx, init.value, scope)}, {}, scope);
  }
  const attr_map random{{"dtype", dtype_of<T>}, {"seed", init.seed}, {"seed2", init.seed2}};
  use_kernels<ops::Mul, T>();
  // (u - 1/2) * width + centre, u ~ U[0, 1) (no Add for a centre of 0).
  auto uniform = [&](float width, float centre) {
    use_kernels<ops::RandomUniform, T>();
    use_kernels<ops::Sub, T>();
    const output u = cx.add("RandomUniform", {size}, random, scope);
    const output centred = cx.add("Sub", {u, scalar_constant<T>(cx, 0.5f, scope)}, {}, scope);
    const output scaled = cx.add("Mul", {centred, scalar_constant<T>(cx, width, scope)}, {}, scope);
    if (centre == 0) return scaled;
    use_kernels<ops::Add, T>();
    return cx.add("Add", {scaled, scalar_constant<T>(cx, centre, scope)}, {}, scope);
  };
  if (init.how == kind::uniform)
    return uniform(static_cast<float>(init.high - init.value), static_cast<float>((init.high + init.value) / 2));
  const bool glorot = init.how == kind::glorot_uniform || init.how == kind::glorot_normal;
  const float fans = static_cast<float>(glorot ? fan_in + fan_out : fan_in);
  if (!(fans > 0))
    fail(error_code::invalid_argument, "weft::layers: a random initializer of a variable of shape ", dims,
         " needs positive fans (fan_in ", fan_in, ", fan_out ", fan_out, ")");
  if (init.how == kind::glorot_uniform || init.how == kind::he_uniform) return uniform(2 * std::sqrt(6.0f / fans), 0);
  use_kernels<ops::TruncatedNormal, T>();
  // Keras's variance scaling: the stddev of a normal truncated at 2 stddev is 0.8796 of
  // the untruncated one's.
  const float stddev = std::sqrt(2.0f / fans) / 0.87962566103423978f;
  const output z = cx.add("TruncatedNormal", {size}, random, scope);
  return cx.add("Mul", {z, scalar_constant<T>(cx, stddev, scope)}, {}, scope);
}

/// A variable of a layer: shape `dims` (fitting S), its initial value from `init`.
template <class T, class S>
variable_expr<T, S> make_variable(std::string name, shape dims, initializer init, std::int64_t fan_in,
                                  std::int64_t fan_out) {
  const scope_info* scope = weft::detail::current_scope();
  lower_fn start = [init, dims, fan_in, fan_out, scope](lowering& cx) {
    return initial_value<T>(cx, init, dims, fan_in, fan_out, scope);
  };
  return variable_expr<T, S>(std::move(name), std::move(dims), std::move(start));
}

/// make() in the name scope `name` (a layer's variables are made there).
template <class F>
auto in_scope(const std::string& name, F make) {
  name_scope scope(name);
  return make();
}

/// A size given at run time for a template size N: N where N is static (and the given
/// one, when given, must equal it).
inline std::int64_t size_of(const char* layer, const std::string& name, const char* what, std::int64_t fixed,
                            std::int64_t given) {
  if (given < 0 && fixed < 0)
    fail(error_code::invalid_argument, "weft::layers::", layer, " '", name, "': the ", what,
         " is weft::dyn in the layer's type, so the constructor must give it");
  if (given == 0 || (fixed >= 0 && given >= 0 && given != fixed))
    fail(error_code::invalid_argument, "weft::layers::", layer, " '", name, "': the ", what, " is ", given,
         given == 0 ? " (sizes must be positive)" : "", fixed >= 0 && given != fixed ? ", the layer's type says " : "",
         fixed >= 0 && given != fixed ? std::to_string(fixed) : std::string());
  return fixed >= 0 ? fixed : given;
}

/// The name scope a layer's nodes are built in: the one its variables were made in, on the
/// device and colocation in force where it is applied.
class layer_scope : weft::detail::scope_guard_base {
 public:
  explicit layer_scope(const std::string& prefix)
      : scope_guard_base({prefix, weft::detail::current_scope()->device, weft::detail::current_scope()->colocate}) {}
};

/// A layer's name scope "<current prefix><name>/", opened while its variables are made.
inline std::string layer_prefix(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos)
    fail(error_code::invalid_argument, "weft::layers: a layer's name must be non-empty and have no '/' (got '", name, "')");
  return weft::detail::current_scope()->prefix + name + "/";
}

/// Casts to C unless the expression is of dtype C already.
template <class C, expression X>
auto as_compute(const X& x) {
  if constexpr (std::is_same_v<value_type_of<X>, C>) return x;
  else return cast<C>(x);
}

constexpr std::int64_t last_dim(auto values) { return values.empty() ? dyn : values[values.size() - 1]; }

/// The static dims of x's last dimension and N compared: equal pairs where either is dyn.
constexpr std::array<std::int64_t, 2> sizes_fit(std::int64_t input, std::int64_t n) {
  return input >= 0 && n >= 0 && input != n ? std::array<std::int64_t, 2>{input, n} : std::array<std::int64_t, 2>{0, 0};
}

template <class L>
auto variables_of(const L& layer) {
  if constexpr (requires { layer.variables(); }) return layer.variables();
  else return std::tuple<>{};
}

}  // namespace detail

// ---- dense --------------------------------------------------------------------------------

/// How a dense layer's variables start.
struct dense_options {
  initializer kernel = glorot_uniform();   ///< the [In, Out] kernel's
  initializer bias = zeros_initializer();  ///< the bias's
};

/// dense<T, In, Out, C>: x [batch, In] -> x * kernel + bias, [batch, Out]. Variables of
/// dtype T; the product computes in C (T by default; bfloat16 for mixed precision, the
/// result of dtype C).
template <element T, std::int64_t In = dyn, std::int64_t Out = dyn, element C = T>
class dense {
 public:
  using kernel_type = variable_expr<T, static_shape<In, Out>>;  ///< the kernel, [In, Out]
  using bias_type = variable_expr<T, static_shape<Out>>;         ///< the bias, [Out]

  /// Static sizes: dense<float, 784, 512>("fc1").
  explicit dense(std::string name, dense_options options = {})
    requires(In >= 0 && Out >= 0)
      : dense(std::move(name), In, Out, options) {}
  /// Sizes at run time (where the type has dyn; a static one must agree).
  dense(std::string name, std::int64_t in, std::int64_t out, dense_options options = {})
      : name_(std::move(name)),
        in_(detail::size_of("dense", name_, "input size", In, in)),
        out_(detail::size_of("dense", name_, "output size", Out, out)),
        prefix_(detail::layer_prefix(name_)),
        kernel_(detail::in_scope(name_, [&] {
          return detail::make_variable<T, static_shape<In, Out>>("kernel", shape{in_, out_}, options.kernel, in_, out_);
        })),
        bias_(detail::in_scope(name_, [&] {
          return detail::make_variable<T, static_shape<Out>>("bias", shape{out_}, options.bias, in_, out_);
        })) {
    static_assert(In == dyn || In > 0, "weft::layers::dense: the input size must be positive or weft::dyn");
    static_assert(Out == dyn || Out > 0, "weft::layers::dense: the output size must be positive or weft::dyn");
  }

  /// x [batch, In] -> x * kernel + bias; a wrong rank, input size or dtype is a compile
  /// error naming the layer's rule (a size known only at run time: an error then).
  template <expression X>
  auto operator()(const X& x) const {
    using SX = shape_of<X>;
    using U = value_type_of<X>;
    (void)check::layer_dtype<U, std::is_same_v<U, T> || std::is_same_v<U, C>>::value;
    (void)check::dense_rank<SX::rank, 2>::value;
    constexpr auto fit = detail::sizes_fit(detail::last_dim(SX::values), In);
    (void)check::dense_inputs<fit[0], fit[1]>::value;
    if constexpr (SX::rank == 2 && SX::values[1] >= 0 && In == dyn)
      if (SX::values[1] != in_)
        fail(error_code::invalid_argument, "weft::layers::dense '", name_, "': the input has ", SX::values[1],
             " features, the layer takes ", in_);
    detail::layer_scope scope(prefix_);
    return bias_add(matmul(detail::as_compute<C>(x), detail::as_compute<C>(kernel())), detail::as_compute<C>(bias()));
  }

  /// The kernel variable ("<name>/kernel").
  const kernel_type& kernel() const { return kernel_; }
  /// The bias variable ("<name>/bias").
  const bias_type& bias() const { return bias_; }
  /// The trained variables, for train::minimize and savers.
  std::tuple<kernel_type, bias_type> variables() const { return {kernel(), bias()}; }
  /// The layer's name (its variables' name scope).
  const std::string& name() const noexcept { return name_; }
  /// In, as given or static.
  std::int64_t input_size() const noexcept { return in_; }
  /// Out, as given or static.
  std::int64_t output_size() const noexcept { return out_; }

 private:
  std::string name_;
  std::int64_t in_, out_;
  std::string prefix_;
  kernel_type kernel_;
  bias_type bias_;
};

// ---- conv2d -------------------------------------------------------------------------------

/// How a conv2d layer's variables start.
struct conv2d_options {
  initializer filter = glorot_uniform();   ///< the [KH, KW, In, Out] filter's
  initializer bias = zeros_initializer();  ///< the bias's
};

/// SAME padding, as a layer's template argument.
using same_padding = padding_t<true>;
/// VALID padding, as a layer's template argument.
using valid_padding = padding_t<false>;

/// conv2d<T, KH, KW, In, Out, Padding, SH, SW>: x [batch, h, w, In] (NHWC) convolved with a
/// [KH, KW, In, Out] filter, plus a bias of Out; [batch, oh, ow, Out].
template <element T, std::int64_t KH, std::int64_t KW, std::int64_t In = dyn, std::int64_t Out = dyn,
          class Padding = same_padding, std::int64_t SH = 1, std::int64_t SW = 1>
class conv2d {
  static_assert(KH > 0 && KW > 0 && SH > 0 && SW > 0, "weft::layers::conv2d: the window and strides must be positive");

 public:
  using filter_type = variable_expr<T, static_shape<KH, KW, In, Out>>;  ///< the filter
  using bias_type = variable_expr<T, static_shape<Out>>;                 ///< the bias, [Out]

  /// Static channel counts: conv2d<float, 5, 5, 1, 32>("conv1").
  explicit conv2d(std::string name, conv2d_options options = {})
    requires(In >= 0 && Out >= 0)
      : conv2d(std::move(name), In, Out, options) {}
  /// Channel counts at run time (where the type has dyn; a static one must agree).
  conv2d(std::string name, std::int64_t in, std::int64_t out, conv2d_options options = {})
      : name_(std::move(name)),
        in_(detail::size_of("conv2d", name_, "input channel count", In, in)),
        out_(detail::size_of("conv2d", name_, "output channel count", Out, out)),
        prefix_(detail::layer_prefix(name_)),
        filter_(detail::in_scope(name_, [&] {
          return detail::make_variable<T, static_shape<KH, KW, In, Out>>("kernel", shape{KH, KW, in_, out_}, options.filter,
                                                                          KH * KW * in_, KH * KW * out_);
        })),
        bias_(detail::in_scope(name_, [&] {
          return detail::make_variable<T, static_shape<Out>>("bias", shape{out_}, options.bias, KH * KW * in_,
                                                             KH * KW * out_);
        })) {
    static_assert((In == dyn || In > 0) && (Out == dyn || Out > 0),
                  "weft::layers::conv2d: channel counts must be positive or weft::dyn");
  }

  /// x [batch, h, w, In] -> conv2d(x, filter) + bias; a wrong rank, channel count or dtype
  /// is a compile error.
  template <expression X>
  auto operator()(const X& x) const {
    using SX = shape_of<X>;
    (void)check::layer_dtype<value_type_of<X>, std::is_same_v<value_type_of<X>, T>>::value;
    (void)check::conv2d_layer_rank<SX::rank, 4>::value;
    constexpr auto fit = detail::sizes_fit(detail::last_dim(SX::values), In);
    (void)check::conv2d_layer_channels<fit[0], fit[1]>::value;
    if constexpr (SX::rank == 4 && SX::values[3] >= 0 && In == dyn)
      if (SX::values[3] != in_)
        fail(error_code::invalid_argument, "weft::layers::conv2d '", name_, "': the input has ", SX::values[3],
             " channels, the layer takes ", in_);
    detail::layer_scope scope(prefix_);
    return bias_add(weft::conv2d(x, filter(), strides<SH, SW>, Padding{}), bias());
  }

  /// The filter variable ("<name>/kernel").
  const filter_type& filter() const { return filter_; }
  /// The bias variable ("<name>/bias").
  const bias_type& bias() const { return bias_; }
  /// The trained variables.
  std::tuple<filter_type, bias_type> variables() const { return {filter(), bias()}; }
  /// The layer's name.
  const std::string& name() const noexcept { return name_; }

 private:
  std::string name_;
  std::int64_t in_, out_;
  std::string prefix_;
  filter_type filter_;
  bias_type bias_;
};

// ---- batch normalization ------------------------------------------------------------------

/// A batch_norm layer's constants.
struct batch_norm_options {
  double momentum = 0.99;  ///< moving = momentum moving + (1 - momentum) batch (Keras's default)
  double epsilon = 1e-3;   ///< added to the variance (Keras's default)
};

/// Whether a batch_norm application normalizes by the batch (and updates the moving
/// averages) or by the moving averages.
enum class mode { training, inference };
inline constexpr mode training = mode::training;    ///< `bn(x, layers::training)`
inline constexpr mode inference = mode::inference;  ///< `bn(x, layers::inference)`

namespace detail {
/// y after the moving averages' updates: an Identity of y with the Assigns as control inputs,
/// so that running y (a training step) updates them. Its gradient is Identity's.
struct after_updates_op {
  static constexpr bool elementwise = false;  ///< whether fusion may merge it with its elementwise neighbours
  using op = ops::Identity;  ///< the op's type
  std::vector<lower_fn> updates;
  /// Asks for the kernels the node needs (where a program compiles its own).
  template <class = void>  // instantiated where the kernels are visible, not in this header
  void prepare() const {
    use_kernels<ops::families::core>();
  }
  output lower(lowering& cx, std::vector<output> inputs, const scope_info* scope) const {
    std::vector<int> controls;
    for (const auto& u : updates) controls.push_back(u(cx).node);
    return cx.add("Identity", std::move(inputs), {}, scope, "", true, std::move(controls));
  }
};
}  // namespace detail

/// batch_norm<T, C>: x [..., C] (channels last) normalized per channel, then scaled by gamma
/// and shifted by beta (Keras's BatchNormalization over the last axis, fused:
/// FusedBatchNormV3). T is float16, bfloat16, float or double; a 16-bit T keeps its
/// variables in float (Keras's mixed precision policy). bn(x, layers::training) uses the batch's statistics and, each time it
/// runs, moves moving_mean and moving_variance toward them; bn(x, layers::inference) uses
/// the moving ones. variables() are gamma and beta (trained); moving_variables() the two
/// averages (saved, not trained).
template <element T, std::int64_t C = dyn>
class batch_norm {
 public:
  /// The variables' dtype: T, or float for a float16 or bfloat16 x (mixed precision).
  using statistics_type = batch_norm_statistics_t<T>;
  using vector_type = variable_expr<statistics_type, static_shape<C>>;  ///< a per-channel variable, [C]

  /// A static channel count: batch_norm<float, 32>("bn1").
  explicit batch_norm(std::string name, batch_norm_options options = {})
    requires(C >= 0)
      : batch_norm(std::move(name), C, options) {}
  /// The channel count at run time; momentum outside [0, 1] or epsilon <= 0 is an error.
  batch_norm(std::string name, std::int64_t channels, batch_norm_options options = {})
      : name_(std::move(name)),
        c_(detail::size_of("batch_norm", name_, "channel count", C, channels)),
        options_(options),
        prefix_(detail::layer_prefix(name_)),
        gamma_(make("gamma", 1.0)),
        beta_(make("beta", 0.0)),
        moving_mean_(make("moving_mean", 0.0)),
        moving_variance_(make("moving_variance", 1.0)) {
    if (!(options.momentum >= 0 && options.momentum <= 1) || !(options.epsilon > 0))
      fail(error_code::invalid_argument, "weft::layers::batch_norm '", name_, "': momentum must be in [0, 1] and epsilon positive (got ",
           options.momentum, ", ", options.epsilon, ")");
  }

  /// x normalized in mode m (see the class); the result has x's shape.
  template <expression X>
  auto operator()(const X& x, mode m) const {
    using SX = shape_of<X>;
    (void)check::layer_dtype<value_type_of<X>, std::is_same_v<value_type_of<X>, T>>::value;
    constexpr auto fit = detail::sizes_fit(detail::last_dim(SX::values), C);
    (void)check::batch_norm_layer_channels<fit[0], fit[1]>::value;
    if constexpr (SX::rank >= 1 && detail::last_dim(SX::values) >= 0 && C == dyn)
      if (detail::last_dim(SX::values) != c_)
        fail(error_code::invalid_argument, "weft::layers::batch_norm '", name_, "': the input has ",
             detail::last_dim(SX::values), " channels, the layer takes ", c_);
    detail::layer_scope scope(prefix_);
    const bool train = m == mode::training;
    auto r = fused_batch_norm(x, gamma_, beta_, moving_mean_, moving_variance_,
                              {.training = train, .epsilon = options_.epsilon, .factor = train ? 1 - options_.momentum : 1.0});
    detail::after_updates_op op;
    if (train) op.updates = {lowering_of(assign(moving_mean_, r.batch_mean)), lowering_of(assign(moving_variance_, r.batch_variance))};
    return op_expr<detail::after_updates_op, T, SX, decltype(r.y)>(std::move(op), r.y);
  }

  /// The scale, from 1.
  const vector_type& gamma() const { return gamma_; }
  /// The shift, from 0.
  const vector_type& beta() const { return beta_; }
  /// The moving mean, from 0.
  const vector_type& moving_mean() const { return moving_mean_; }
  /// The moving variance, from 1.
  const vector_type& moving_variance() const { return moving_variance_; }
  /// The trained variables: gamma and beta.
  std::tuple<vector_type, vector_type> variables() const { return {gamma_, beta_}; }
  /// The averages, saved but not trained.
  std::tuple<vector_type, vector_type> moving_variables() const { return {moving_mean_, moving_variance_}; }
  /// The layer's name.
  const std::string& name() const noexcept { return name_; }

 private:
  vector_type make(const char* what, double start) const {
    return detail::in_scope(name_, [&] {
      return detail::make_variable<statistics_type, static_shape<C>>(what, shape{c_}, constant_initializer(start), c_, c_);
    });
  }
  std::string name_;
  std::int64_t c_;
  batch_norm_options options_;
  std::string prefix_;
  vector_type gamma_, beta_, moving_mean_, moving_variance_;
};

// ---- embedding ----------------------------------------------------------------------------

/// How an embedding's table starts.
struct embedding_options {
  initializer embeddings = uniform_initializer(-0.05, 0.05);  ///< Keras's default
};

/// embedding<T, Vocab, Dim>: ids (int32 or int64, any shape) -> rows of a [Vocab, Dim]
/// table, shape ids + [Dim] (a GatherV2; its gradient adds into the rows looked up). An id
/// outside [0, Vocab) is a run-time error naming the node.
template <element T, std::int64_t Vocab = dyn, std::int64_t Dim = dyn>
class embedding {
 public:
  using table_type = variable_expr<T, static_shape<Vocab, Dim>>;  ///< the table, [Vocab, Dim]

  /// Static sizes: embedding<float, 10000, 64>("embed").
  explicit embedding(std::string name, embedding_options options = {})
    requires(Vocab >= 0 && Dim >= 0)
      : embedding(std::move(name), Vocab, Dim, options) {}
  /// Sizes at run time.
  embedding(std::string name, std::int64_t vocab, std::int64_t dim, embedding_options options = {})
      : name_(std::move(name)),
        vocab_(detail::size_of("embedding", name_, "vocabulary size", Vocab, vocab)),
        dim_(detail::size_of("embedding", name_, "embedding size", Dim, dim)),
        prefix_(detail::layer_prefix(name_)),
        table_(detail::in_scope(name_, [&] {
          return detail::make_variable<T, static_shape<Vocab, Dim>>("embeddings", shape{vocab_, dim_}, options.embeddings,
                                                                   vocab_, dim_);
        })) {}

  /// The rows of `ids`: shape ids + [Dim].
  template <expression I>
  auto operator()(const I& ids) const {
    detail::layer_scope scope(prefix_);
    return gather(table(), ids);
  }
  /// The table variable ("<name>/embeddings").
  const table_type& table() const { return table_; }
  /// The trained variables: the table.
  std::tuple<table_type> variables() const { return {table_}; }
  /// The layer's name.
  const std::string& name() const noexcept { return name_; }

 private:
  std::string name_;
  std::int64_t vocab_, dim_;
  std::string prefix_;
  table_type table_;
};

// ---- recurrent cells --------------------------------------------------------------------------

namespace detail {
/// A bias of `blocks` blocks of `units`, block `one` (if any) starting at 1, the others at 0.
template <class T, class S>
variable_expr<T, S> block_bias(std::int64_t blocks, std::int64_t units, int one) {
  std::vector<T> b(static_cast<std::size_t>(blocks * units), T(0));
  if (one >= 0)
    std::fill(b.begin() + one * units, b.begin() + (one + 1) * units, T(1));
  tensor value = tensor::from_vector(b, shape{blocks * units});
  const scope_info* scope = weft::detail::current_scope();
  lower_fn start = [value, scope](lowering& cx) {
    use_kernels<ops::families::core>();
    return cx.add("Const", {}, {{"value", value}, {"dtype", dtype_of<T>}}, scope);
  };
  return variable_expr<T, S>("bias", shape{blocks * units}, std::move(start));
}

constexpr std::int64_t times(std::int64_t n, std::int64_t k) { return n < 0 ? dyn : n * k; }
constexpr std::int64_t plus(std::int64_t a, std::int64_t b) { return a < 0 || b < 0 ? dyn : a + b; }
}  // namespace detail

/// How an LSTM cell's variables start.
struct lstm_options {
  initializer kernel = glorot_uniform();  ///< over the whole [In + Units, 4 Units] kernel
  bool unit_forget_bias = true;           ///< the forget gate's bias starts at 1 (Keras's default)
};

/// What an LSTM step returns: the new output h and cell state c.
template <class H, class C>
struct lstm_state {
  H h;  ///< h', [batch, Units]
  C c;  ///< c', [batch, Units]
};

/// lstm_cell<T, In, Units>: one step of an LSTM. z = [x, h] kernel + bias, split into the
/// input, forget, cell and output gates (Keras's order); c' = sigmoid(f) c + sigmoid(i)
/// tanh(g), h' = sigmoid(o) tanh(c'). x [batch, In], h and c [batch, Units]; returns
/// {h', c'}: auto [h2, c2] = cell(x, h, c). Variables: kernel [In + Units, 4 Units], bias
/// [4 Units]. rnn(cell, inputs, h0, c0) runs it over a sequence.
template <element T, std::int64_t In = dyn, std::int64_t Units = dyn>
class lstm_cell {
 public:
  static constexpr std::int64_t rows = detail::plus(In, Units);    ///< the kernel's rows, In + Units (dyn where a size is)
  static constexpr std::int64_t gates = detail::times(Units, 4);  ///< the kernel's columns, 4 Units (dyn where Units is)
  using kernel_type = variable_expr<T, static_shape<rows, gates>>;  ///< the kernel
  using bias_type = variable_expr<T, static_shape<gates>>;          ///< the bias, [4 Units]
  static constexpr int state_size = 2;  ///< h and c

  /// Static sizes: lstm_cell<float, 64, 128>("lstm").
  explicit lstm_cell(std::string name, lstm_options options = {})
    requires(In >= 0 && Units >= 0)
      : lstm_cell(std::move(name), In, Units, options) {}
  /// Sizes at run time.
  lstm_cell(std::string name, std::int64_t in, std::int64_t units, lstm_options options = {})
      : name_(std::move(name)),
        in_(detail::size_of("lstm_cell", name_, "input size", In, in)),
        units_(detail::size_of("lstm_cell", name_, "unit count", Units, units)),
        prefix_(detail::layer_prefix(name_)),
        kernel_(detail::in_scope(name_, [&] {
          return detail::make_variable<T, static_shape<rows, gates>>("kernel", shape{in_ + units_, 4 * units_}, options.kernel,
                                                                    in_ + units_, 4 * units_);
        })),
        bias_(detail::in_scope(name_, [&] {
          return detail::block_bias<T, static_shape<gates>>(4, units_, options.unit_forget_bias ? 1 : -1);
        })) {}

  /// One step from state (h, c) on input x: {h', c'}.
  template <expression X, expression H, expression C>
  auto operator()(const X& x, const H& h, const C& c) const {
    check_operands<X, H, C>();
    detail::layer_scope scope(prefix_);
    auto z = bias_add(matmul(concat<1>(x, h), kernel()), bias());
    auto g = split<4, 1>(z);
    auto c2 = sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]);
    auto h2 = sigmoid(g[3]) * tanh(c2);
    return lstm_state<decltype(h2), decltype(c2)>{h2, c2};
  }
  /// The step as rnn's loop calls it: the state, then the row of the inputs.
  template <class H, class C, class X>
  auto step(const H& h, const C& c, const X& x) const {
    auto [h2, c2] = (*this)(x, h, c);
    return boost::hana::make_tuple(h2, c2);
  }

  /// The kernel variable ("<name>/kernel").
  const kernel_type& kernel() const { return kernel_; }
  /// The bias variable ("<name>/bias").
  const bias_type& bias() const { return bias_; }
  /// The trained variables.
  std::tuple<kernel_type, bias_type> variables() const { return {kernel_, bias_}; }
  /// The cell's name.
  const std::string& name() const noexcept { return name_; }
  /// Units, as given or static.
  std::int64_t units() const noexcept { return units_; }

 private:
  template <class X, class H, class C>
  void check_operands() const {
    (void)check::layer_dtype<value_type_of<X>, std::is_same_v<value_type_of<X>, T>>::value;
    (void)check::rnn_rank<(shape_of<X>::rank == 2 && shape_of<H>::rank == 2 && shape_of<C>::rank == 2) ? 1 : 0, 1>::value;
    constexpr auto fx = detail::sizes_fit(detail::last_dim(shape_of<X>::values), In);
    (void)check::rnn_inputs<fx[0], fx[1]>::value;
    constexpr auto fh = detail::sizes_fit(detail::last_dim(shape_of<H>::values), Units);
    (void)check::rnn_units<fh[0], fh[1]>::value;
    constexpr auto fc = detail::sizes_fit(detail::last_dim(shape_of<C>::values), Units);
    (void)check::rnn_units<fc[0], fc[1]>::value;
  }
  std::string name_;
  std::int64_t in_, units_;
  std::string prefix_;
  kernel_type kernel_;
  bias_type bias_;
};

/// How a GRU cell's variables start.
struct gru_options {
  initializer gate_kernel = glorot_uniform();       ///< the [In + Units, 2 Units] gates' kernel
  initializer candidate_kernel = glorot_uniform();  ///< the [In + Units, Units] candidate's kernel
  double gate_bias = 1.0;  ///< TensorFlow's GRUCell starts the gates' bias at 1
};

/// gru_cell<T, In, Units>: one step of a GRU (TensorFlow's GRUCell): r, u = split(sigmoid(
/// [x, h] gate_kernel + gate_bias)); c = tanh([x, r h] candidate_kernel + candidate_bias);
/// h' = u h + (1 - u) c. x [batch, In], h [batch, Units]; returns h'.
template <element T, std::int64_t In = dyn, std::int64_t Units = dyn>
class gru_cell {
 public:
  static constexpr std::int64_t rows = detail::plus(In, Units);  ///< the kernels' rows (dyn where a size is)
  using gate_kernel_type = variable_expr<T, static_shape<rows, detail::times(Units, 2)>>;  ///< the gates' kernel
  using gate_bias_type = variable_expr<T, static_shape<detail::times(Units, 2)>>;         ///< the gates' bias
  using candidate_kernel_type = variable_expr<T, static_shape<rows, Units>>;              ///< the candidate's kernel
  using candidate_bias_type = variable_expr<T, static_shape<Units>>;                      ///< the candidate's bias
  static constexpr int state_size = 1;  ///< h

  /// Static sizes: gru_cell<float, 64, 128>("gru").
  explicit gru_cell(std::string name, gru_options options = {})
    requires(In >= 0 && Units >= 0)
      : gru_cell(std::move(name), In, Units, options) {}
  /// Sizes at run time.
  gru_cell(std::string name, std::int64_t in, std::int64_t units, gru_options options = {})
      : name_(std::move(name)),
        in_(detail::size_of("gru_cell", name_, "input size", In, in)),
        units_(detail::size_of("gru_cell", name_, "unit count", Units, units)),
        prefix_(detail::layer_prefix(name_)),
        gate_kernel_(detail::in_scope(name_, [&] {
          return detail::make_variable<T, static_shape<rows, detail::times(Units, 2)>>(
              "gates/kernel", shape{in_ + units_, 2 * units_}, options.gate_kernel, in_ + units_, 2 * units_);
        })),
        gate_bias_(detail::in_scope(name_, [&] {
          return detail::make_variable<T, static_shape<detail::times(Units, 2)>>(
              "gates/bias", shape{2 * units_}, constant_initializer(options.gate_bias), in_ + units_, 2 * units_);
        })),
        candidate_kernel_(detail::in_scope(name_, [&] {
          return detail::make_variable<T, static_shape<rows, Units>>("candidate/kernel", shape{in_ + units_, units_},
                                                                    options.candidate_kernel, in_ + units_, units_);
        })),
        candidate_bias_(detail::in_scope(name_, [&] {
          return detail::make_variable<T, static_shape<Units>>("candidate/bias", shape{units_}, zeros_initializer(),
                                                               in_ + units_, units_);
        })) {}

  /// One step from state h on input x: h'.
  template <expression X, expression H>
  auto operator()(const X& x, const H& h) const {
    (void)check::layer_dtype<value_type_of<X>, std::is_same_v<value_type_of<X>, T>>::value;
    (void)check::rnn_rank<(shape_of<X>::rank == 2 && shape_of<H>::rank == 2) ? 1 : 0, 1>::value;
    constexpr auto fx = detail::sizes_fit(detail::last_dim(shape_of<X>::values), In);
    (void)check::rnn_inputs<fx[0], fx[1]>::value;
    constexpr auto fh = detail::sizes_fit(detail::last_dim(shape_of<H>::values), Units);
    (void)check::rnn_units<fh[0], fh[1]>::value;
    detail::layer_scope scope(prefix_);
    auto ru = split<2, 1>(sigmoid(bias_add(matmul(concat<1>(x, h), gate_kernel_), gate_bias_)));
    auto candidate = tanh(bias_add(matmul(concat<1>(x, ru[0] * h), candidate_kernel_), candidate_bias_));
    return ru[1] * h + (T(1) - ru[1]) * candidate;
  }
  /// The step as rnn's loop calls it: the state, then the row of the inputs.
  template <class H, class X>
  auto step(const H& h, const X& x) const {
    return boost::hana::make_tuple((*this)(x, h));
  }

  /// The trained variables.
  std::tuple<gate_kernel_type, gate_bias_type, candidate_kernel_type, candidate_bias_type> variables() const {
    return {gate_kernel_, gate_bias_, candidate_kernel_, candidate_bias_};
  }
  /// "<name>/gates/kernel".
  const gate_kernel_type& gate_kernel() const { return gate_kernel_; }
  /// "<name>/gates/bias".
  const gate_bias_type& gate_bias() const { return gate_bias_; }
  /// "<name>/candidate/kernel".
  const candidate_kernel_type& candidate_kernel() const { return candidate_kernel_; }
  /// "<name>/candidate/bias".
  const candidate_bias_type& candidate_bias() const { return candidate_bias_; }
  /// The cell's name.
  const std::string& name() const noexcept { return name_; }
  /// Units, as given or static.
  std::int64_t units() const noexcept { return units_; }

 private:
  std::string name_;
  std::int64_t in_, units_;
  std::string prefix_;
  gate_kernel_type gate_kernel_;
  gate_bias_type gate_bias_;
  candidate_kernel_type candidate_kernel_;
  candidate_bias_type candidate_bias_;
};

/// rnn(cell, inputs, state...): the cell over inputs [time, batch, features], from the
/// initial state (h0, c0 for an LSTM; h0 for a GRU), in a while loop (its gradient is the
/// backward loop): the outputs h of every step, [time, batch, units]. Only the outputs are
/// stacked (a row written in place each step); the rest of the state is carried.
template <class Cell, expression X, expression... State>
auto rnn(const Cell& cell, const X& inputs, const State&... state) {
  namespace hana = boost::hana;
  static_assert(sizeof...(State) == Cell::state_size,
                "weft::layers::rnn: the initial state must have one tensor per state of the cell (h, c for an LSTM; h for a GRU)");
  (void)check::rnn_sequence_rank<shape_of<X>::rank, 3>::value;
  constexpr std::size_t K = sizeof...(State);
  const auto s0 = hana::make_tuple(state...);
  const auto& h0 = hana::at_c<0>(s0);
  using H = std::remove_cvref_t<decltype(h0)>;
  auto length = weft::detail::first_dim(inputs);
  auto stack0 = weft::detail::stack_zeros<value_type_of<H>>(weft::detail::stacked_shape<shape_of<X>::values[0], shape_of<H>>{},
                                                              length, shape_tensor(h0));
  auto out = while_loop(
      [length](auto i, auto&&...) { return i < length; },
      [cell, inputs, length](auto i, auto... vars) {
        const auto all = hana::make_tuple(vars...);
        auto at = weft::detail::position(i, length, false);
        auto next = hana::unpack(hana::append(hana::take_front_c<K>(all), weft::detail::row_of(inputs, at)),
                                 [&](const auto&... a) { return cell.step(a...); });
        auto written = tensor_scatter_update(hana::at_c<K>(all), at, hana::at_c<0>(next));
        return hana::prepend(hana::append(next, written), i + 1);
      },
      hana::prepend(hana::append(s0, stack0), constant(std::int32_t{0})), loop_options{"rnn", 10});
  return hana::at_c<1 + K>(out);
}

// ---- layers without variables ----------------------------------------------------------------

/// max_pool<KH, KW, SH, SW, Padding>{}, avg_pool<...>{}: strides default to the window,
/// padding to VALID (Keras's MaxPooling2D defaults).
template <std::int64_t KH, std::int64_t KW, std::int64_t SH = KH, std::int64_t SW = KW, class Padding = valid_padding>
struct max_pool {
  /// weft::max_pool with the layer's window, strides and padding.
  template <expression X>
  auto operator()(const X& x) const {
    return weft::max_pool(x, window<KH, KW>, strides<SH, SW>, Padding{});
  }
};
/// See max_pool: the window's mean instead of its max.
template <std::int64_t KH, std::int64_t KW, std::int64_t SH = KH, std::int64_t SW = KW, class Padding = valid_padding>
struct avg_pool {
  /// weft::avg_pool with the layer's window, strides and padding.
  template <expression X>
  auto operator()(const X& x) const {
    return weft::avg_pool(x, window<KH, KW>, strides<SH, SW>, Padding{});
  }
};

namespace detail {
/// Reshape to [batch, product of the other dims], the product read from the input's
/// inferred shape when the graph is built (so channel counts chosen at run time work).
struct flatten_op {
  static constexpr bool elementwise = false;  ///< whether fusion may merge it with its elementwise neighbours
  /// Asks for the kernels the node needs (where a program compiles its own).
  template <class = void>  // instantiated where the kernels are visible, not in this header
  void prepare() const {
    use_kernels<ops::families::core>();
    use_kernels<ops::Reshape>();
  }
  output lower(lowering& cx, std::vector<output> inputs, const scope_info* scope) const {
    const node& n = cx.target().at(inputs[0].node);
    const partial_shape& s = n.output_shape(inputs[0].port);
    std::int64_t size = 1;
    for (int i = 1; s.rank_known() && i < s.rank(); ++i) {
      if (s[i] < 0)
        fail(error_code::invalid_argument, "weft::layers::flatten: ", n.describe(), " has shape ", s,
             ": a dim other than the first is unknown when the graph is built");
      size *= s[i];
    }
    if (!s.rank_known())
      fail(error_code::invalid_argument, "weft::layers::flatten: the rank of ", n.describe(), " is unknown");
    inputs.push_back(int_constant(cx, {-1, size}, shape{2}));
    return cx.add("Reshape", std::move(inputs), {}, scope);
  }
};

template <std::size_t N>
constexpr std::int64_t product_after_first(const std::array<std::int64_t, N>& v) {
  std::int64_t p = 1;
  for (std::size_t i = 1; i < N; ++i) {
    if (v[i] < 0) return dyn;
    p *= v[i];
  }
  return p;
}
}  // namespace detail

/// flatten{}: [batch, d1, d2, ...] -> [batch, d1 * d2 * ...].
struct flatten {
  /// x reshaped to [batch, the product of the other dims].
  template <expression X>
  auto operator()(const X& x) const {
    using SX = shape_of<X>;
    (void)check::flatten_rank<(SX::rank >= 2 ? 2 : SX::rank), 2>::value;
    using S = static_shape<SX::values[0], detail::product_after_first(SX::values)>;
    return op_expr<detail::flatten_op, value_type_of<X>, S, X>(detail::flatten_op{}, x);
  }
};

/// dropout(rate, seed, seed2): weft::dropout with the layer's rate (a number, or a scalar
/// expression such as a placeholder fed while training) and seeds.
template <class R>
class dropout {
 public:
  /// Drops elements with probability `rate` (a number or a scalar expression).
  explicit dropout(R rate, std::int64_t seed = 0, std::int64_t seed2 = 0) : rate_(std::move(rate)), seed_(seed), seed2_(seed2) {}
  /// weft::dropout(x, rate, seed, seed2).
  template <expression X>
  auto operator()(const X& x) const {
    return weft::dropout(x, rate_, seed_, seed2_);
  }

 private:
  R rate_;
  std::int64_t seed_, seed2_;
};

// Activations as layers: layers::relu, tanh, sigmoid, softmax, log_softmax, elu, selu, relu6,
// softplus.
#define WEFT_DETAIL_ACTIVATION_LAYER(NAME)                                   \
  /** The activation weft::NAME as a layer (a sequential's element). */      \
  struct NAME##_layer {                                                      \
    /** weft::NAME(x). */                                                     \
    template <expression X>                                                  \
    auto operator()(const X& x) const {                                      \
      return weft::NAME(x);                                                  \
    }                                                                        \
  };                                                                         \
  /** The activation weft::NAME as a layer: `layers::sequential(fc, layers::NAME)`. */ \
  inline constexpr NAME##_layer NAME {}
WEFT_DETAIL_ACTIVATION_LAYER(relu);
WEFT_DETAIL_ACTIVATION_LAYER(tanh);
WEFT_DETAIL_ACTIVATION_LAYER(sigmoid);
WEFT_DETAIL_ACTIVATION_LAYER(softmax);
WEFT_DETAIL_ACTIVATION_LAYER(log_softmax);
WEFT_DETAIL_ACTIVATION_LAYER(elu);
WEFT_DETAIL_ACTIVATION_LAYER(selu);
WEFT_DETAIL_ACTIVATION_LAYER(relu6);
WEFT_DETAIL_ACTIVATION_LAYER(softplus);
#undef WEFT_DETAIL_ACTIVATION_LAYER

// ---- composition -----------------------------------------------------------------------------

/// sequential(l1, l2, ...): applies l1, then l2, ... (each a layer or any callable from an
/// expression to an expression); variables() gathers theirs, in order.
template <class... Layers>
class sequential {
 public:
  /// The layers, applied in this order.
  explicit sequential(Layers... layers) : layers_(std::move(layers)...) {}

  /// The last layer's output on the first's input x.
  template <expression X>
  auto operator()(const X& x) const {
    return apply<0>(x);
  }
  /// Every layer's trained variables, in order, as one tuple.
  auto variables() const {
    return std::apply([](const auto&... l) { return std::tuple_cat(detail::variables_of(l)...); }, layers_);
  }
  /// Layer I.
  template <std::size_t I>
  const auto& layer() const {
    return std::get<I>(layers_);
  }
  static constexpr std::size_t size = sizeof...(Layers);  ///< how many layers

 private:
  template <std::size_t I, class X>
  auto apply(const X& x) const {
    if constexpr (I == sizeof...(Layers)) return x;
    else return apply<I + 1>(std::get<I>(layers_)(x));
  }
  std::tuple<Layers...> layers_;
};

/// variables(a, b, ...): the variables of several layers (or sequentials), as one tuple for
/// train::minimize.
template <class... L>
auto variables(const L&... layers) {
  return std::tuple_cat(detail::variables_of(layers)...);
}

}  // namespace layers
}  // namespace weft
