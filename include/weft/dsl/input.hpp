/// @file
/// Typed input pipelines: weft::input_pipeline (runtime/pipeline.hpp) with its element's
/// dtypes and static shapes in the type, so that a map function is typed DSL code and a model
/// reads batches whose shapes the compiler checks.
///
///   using images = weft::component<std::uint8_t, 784>;
///   using labels = weft::component<std::uint8_t>;
///   auto data = weft::dataset<images, labels>::from_tensors(x_u8, y_u8)   // tensor_of<.., 2>, <.., 1>
///                   .shuffle_source(42)
///                   .batch(128)                                           // components get a dyn first dim
///                   .map([](auto x, auto y) {                             // handle<std::uint8_t, dyn, 784>, ...
///                     return std::tuple{weft::cast<float>(x) * (1.0f / 255), weft::cast<std::int32_t>(y)};
///                   })
///                   .prefetch(4);
///   data.start();
///   auto [x, y] = data.input();   // handle<float, dyn, 784>, handle<std::int32_t, dyn>: a model's inputs
///   ...client_session s({.session = {.resources = data.resources()}}); s.run(train_step) per batch
///
/// or next(): the batch as typed tensors (std::nullopt at the end of the input).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <weft/dsl/expr.hpp>
#include <weft/dsl/handle.hpp>
#include <weft/dsl/tensor_of.hpp>
#include <weft/framework/kernel_for.hpp>
#include <weft/ops/data_flow_ops.hpp>
#include <weft/runtime/pipeline.hpp>

namespace weft {

/// One component of a dataset's element: its dtype and static dims (dyn: known at run time).
template <element T, std::int64_t... D>
struct component {
  using value_type = T;  ///< the element type
  using shape_type = static_shape<D...>;  ///< the static shape (static_shape)
};

template <class... C>
class dataset;

namespace detail {
template <class T, class S>
struct component_from;
template <class T, std::int64_t... D>
struct component_from<T, static_shape<D...>> {
  using type = component<T, D...>;
};
template <class C>
struct batched_component;
template <class T, std::int64_t... D>
struct batched_component<component<T, D...>> {
  using type = component<T, dyn, D...>;
};
template <class C>
struct handle_for;
template <class T, std::int64_t... D>
struct handle_for<component<T, D...>> {
  using type = handle<T, D...>;
  /// A node of the pipeline's graph, as a typed handle into that graph.
  static type wrap_output(const graph& g, output o) { return wrap<T, D...>(g, o); }
};
template <class C>
using tensor_for = tensor_of<typename C::value_type, C::shape_type::rank>;

/// What a map function returns: one expression, or a std::tuple of them.
template <class R>
struct map_result {
  static_assert(expression<R>, "weft::dataset::map: the function must return a typed expression or a std::tuple of them");
  using tuple = std::tuple<R>;
  static tuple as_tuple(R r) { return tuple{std::move(r)}; }
};
template <class... R>
struct map_result<std::tuple<R...>> {
  static_assert((expression<R> && ...), "weft::dataset::map: every element of the returned tuple must be a typed expression");
  using tuple = std::tuple<R...>;
  static tuple as_tuple(tuple r) { return r; }
};
template <class Tuple>
struct dataset_of_tuple;
template <class... R>
struct dataset_of_tuple<std::tuple<R...>> {
  using type = dataset<typename component_from<value_type_of<R>, shape_of<R>>::type...>;
};
}  // namespace detail

/// A typed input pipeline (tf.data's shape over runtime/pipeline.hpp's queues): an element
/// of components C..., each a component<T, D...>. Built by chaining (each stage consumes
/// the dataset: `dataset<...>::from_tensors(x, y).shuffle_source(1).batch(128).prefetch(2)`),
/// then start(), and next() or input() inside a model.
template <class... C>
class dataset {
  static_assert(sizeof...(C) > 0, "weft::dataset: an element has at least one component");

 public:
  static constexpr std::size_t size = sizeof...(C);  ///< how many components an element has

  /// Rows of columns: column i is component i with a first dim more (the rows); its dims
  /// after the first must fit the component's static dims.
  static dataset from_tensors(const tensor_of<typename C::value_type, C::shape_type::rank + 1>&... columns) {
    std::vector<tensor> cols{columns.untyped()...};
    const std::vector<partial_shape> want{C::shape_type::partial()...};
    for (std::size_t i = 0; i < cols.size(); ++i) {
      const auto& d = cols[i].shape().dims();
      const shape row(std::vector<std::int64_t>(d.begin() + 1, d.end()));
      if (!want[i].accepts(row))
        fail(error_code::invalid_argument, "weft::dataset::from_tensors: column ", i, " has rows of shape ", row,
             ", not the component's ", want[i]);
    }
    return dataset(input_pipeline::from_tensors(std::move(cols)));
  }
  /// The records of files: one string component.
  static dataset from_files(std::vector<std::string> files, reader_spec reader)
    requires(std::is_same_v<dataset, dataset<component<std::string>>>)
  {
    use_kernels<ops::families::io>();
    return dataset(input_pipeline::from_files(std::move(files), std::move(reader)));
  }

  /// Each element through f, which takes a typed handle per component and returns a typed
  /// expression or a std::tuple of them: the new element's components, with the dtypes and
  /// static shapes of those expressions. The expressions are lowered (and fused) into the
  /// pipeline's graph.
  template <class F>
  auto map(F f, int workers = 1) && {
    using call = decltype(f(std::declval<typename detail::handle_for<C>::type>()...));
    using result = detail::map_result<call>;
    using next = typename detail::dataset_of_tuple<typename result::tuple>::type;
    p_.map(
        [f = std::move(f)](graph& g, const std::vector<output>& in) {
          lowering cx(g);
          auto out = result::as_tuple(call_with(f, g, in, std::index_sequence_for<C...>{}));
          return std::apply([&](const auto&... e) { return std::vector<output>{weft::lower(cx, e)...}; }, out);
        },
        workers);
    return next(std::move(p_));
  }
  /// Elements drawn at random from a buffer of `buffer` (a RandomShuffleQueue, seeded).
  dataset shuffle(std::int64_t buffer, std::uint64_t seed = 0) && {
    p_.shuffle(buffer, seed);
    return dataset(std::move(p_));
  }
  /// from_tensors' rows in a fresh random order each epoch (input_pipeline::shuffle_source).
  dataset shuffle_source(std::uint64_t seed) && {
    p_.shuffle_source(seed);
    return dataset(std::move(p_));
  }
  /// n elements stacked: each component gets a first dim (dyn: the last batch may be short).
  auto batch(std::int64_t n, bool drop_remainder = false) && {
    p_.batch(n, drop_remainder);
    return dataset<typename detail::batched_component<C>::type...>(std::move(p_));
  }
  /// The source's elements `epochs` times (-1: forever).
  dataset repeat(std::int64_t epochs = -1) && {
    p_.repeat(epochs);
    return dataset(std::move(p_));
  }
  /// The last queue holds up to k elements ready.
  dataset prefetch(std::int64_t k) && {
    p_.prefetch(k);
    return dataset(std::move(p_));
  }

  /// Starts the pipeline's threads; its element must be what the type says.
  void start() {
    use_kernels<ops::families::data_flow>();
    p_.start();
    const std::vector<dtype> types{dtype_of<typename C::value_type>...};
    if (p_.element_types() != types)
      fail(error_code::internal, "weft::dataset: the pipeline's element has other dtypes than its type says");
  }
  /// The next element as typed tensors, or std::nullopt at the end of the input.
  std::optional<std::tuple<detail::tensor_for<C>...>> next() {
    auto e = p_.next();
    if (!e) return std::nullopt;
    return typed(*e, std::index_sequence_for<C...>{});
  }
  /// The next element inside a typed model: one handle per component, all from one dequeue
  /// of the last stage, lowered into the model's graph (its session must share resources()).
  std::tuple<typename detail::handle_for<C>::type...> input() const {
    struct shared {
      detail::lowered_memo memo;
    };
    auto node = std::make_shared<shared>();
    const scope_info* scope = detail::current_scope();
    const std::string queue = p_.last_queue_name();
    const std::vector<dtype> types{dtype_of<typename C::value_type>...};
    const std::vector<partial_shape> shapes{C::shape_type::partial()...};
    auto port = [=](int i) {
      return [=](lowering& cx) {
        output o = node->memo.get(cx, [&] {
          const output h = cx.add("Const", {}, {{"value", tensor::from_vector(std::vector<std::string>{"", queue})}, {"dtype", dtype::string}},
                                  scope);
          return cx.add("QueueDequeue", {h}, {{"component_types", types}, {"shapes", shapes}}, scope);
        });
        o.port = i;
        return o;
      };
    };
    return make_handles(port, std::index_sequence_for<C...>{});
  }

  /// The resource manager of the pipeline's queues (give it to the training session).
  const std::shared_ptr<resource_manager>& resources() const noexcept { return p_.resources(); }
  /// Stops the pipeline's threads and joins them (input_pipeline::stop).
  void stop() { p_.stop(); }
  /// The untyped pipeline underneath.
  input_pipeline& untyped() noexcept { return p_; }

 private:
  template <class...>
  friend class dataset;
  explicit dataset(input_pipeline p) : p_(std::move(p)) {}

  template <class F, std::size_t... I>
  static auto call_with(F& f, graph& g, const std::vector<output>& in, std::index_sequence<I...>) {
    return f(detail::handle_for<C>::wrap_output(g, in[I])...);
  }
  template <std::size_t... I>
  static std::tuple<detail::tensor_for<C>...> typed(const std::vector<tensor>& e, std::index_sequence<I...>) {
    return {detail::tensor_for<C>::from(e[I])...};
  }
  template <class P, std::size_t... I>
  static std::tuple<typename detail::handle_for<C>::type...> make_handles(P& port, std::index_sequence<I...>) {
    return {typename detail::handle_for<C>::type(lower_fn(port(static_cast<int>(I))))...};
  }

  input_pipeline p_;
};

}  // namespace weft
