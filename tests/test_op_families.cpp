// Op families: a program without kernels starts with the core ops only, and registers the
// standard families it uses. Built without the kernel registry, and run one test case per
// process (catch_discover_tests), so every case starts from a fresh registry.
#include "support/helpers.hpp"

#include <set>

using namespace weft;

TEST_CASE("a program starts with the core ops, and names the family of a standard op it has not registered") {
  graph g;
  auto& x = g.placeholder(dtype::float32, {2}, "x");
  auto& c = g.constant(tensor::scalar(1.0f));
  CHECK(g.op("Identity", {x}).op() == "Identity");
  CHECK(g.op("NoOp", {}).op() == "NoOp");
  test::require_error([&] { g.op("Relu", {x}); },
                      {"node 'Relu' (Relu)", "op 'Relu' is one of weft's math ops", "not registered",
                       "weft::ops::register_math_ops()", "weft::cpu::register_elementwise_kernels()",
                       "<weft/kernels/cpu/all.hpp>"});
  test::require_error([&] { g.op("MatMul", {x, c}); }, {"matrix ops", "weft::cpu::register_matmul_kernels()"});
  test::require_error([&] { g.op("Frobnicate", {x}); }, {"unknown op 'Frobnicate'", "no op of that name"});
  CHECK(op_registry::global().find("Relu") == nullptr);
}

TEST_CASE("registering a family adds its ops once") {
  ops::register_math_ops();
  ops::register_math_ops();
  graph g;
  auto& x = g.placeholder(dtype::float32, {2, 3}, "x");
  CHECK(g.op("Relu", {x}).op() == "Relu");
  CHECK(op_registry::global().find("Add") != nullptr);
  CHECK(op_registry::global().find("Sum") == nullptr);  // another family
}

TEST_CASE("graph::variable registers the state ops itself") {
  graph g;
  auto& v = g.variable(dtype::float32, {3}, node_options("v"));
  CHECK(v.op() == "Variable");
  CHECK(op_registry::global().find("Assign") != nullptr);
}

TEST_CASE("a family whose op name is taken by a user op adds none of its ops") {
  register_op(op_def_builder("Tile").input("x: T").output("y: T").attr("T: type").shape_fn(ops::same_shape));
  test::require_error([] { ops::register_array_ops(); }, {"cannot add the array ops", "op 'Tile' is already registered"});
  CHECK(op_registry::global().find("Reshape") == nullptr);
}

TEST_CASE("standard_ops lists exactly the ops of every standard family") {
  std::set<std::pair<std::string, std::string>> listed, defined;
  for (const auto& op : ops::standard_ops()) listed.emplace(op.name, op.family);
  using defs_fn = std::vector<op_def> (*)();
  const std::pair<const char*, defs_fn> families[] = {
      {"array", ops::array_op_defs},   {"math", ops::math_op_defs},     {"reduction", ops::reduction_op_defs},
      {"matrix", ops::matrix_op_defs}, {"random", ops::random_op_defs}, {"state", ops::state_op_defs},
      {"nn", ops::nn_op_defs},         {"training", ops::training_op_defs}, {"io", ops::io_op_defs},
      {"data_flow", ops::data_flow_op_defs}, {"parsing", ops::parsing_op_defs}, {"summary", ops::summary_op_defs},
      {"control", ops::control_flow_op_defs}};
  for (auto [family, defs] : families)
    for (const auto& d : defs()) defined.emplace(d.name, family);
  CHECK(listed == defined);
  CHECK(listed.size() == ops::standard_ops().size());  // no name twice
  for (const auto& d : ops::core_op_defs()) CHECK(ops::standard_op_family(d.name).empty());
  ops::register_standard_ops();
  for (const auto& op : ops::standard_ops()) CHECK(op_registry::global().find(op.name) != nullptr);
  CHECK(ops::standard_op_family("Conv2D") == "nn");
  CHECK(ops::standard_op_family("Merge") == "control");
  CHECK(ops::standard_op_family("NoSuchOp").empty());
}

// Each family's op types (framework/kernel_for.hpp) name exactly its ops, define them, and say
// whether a gradient rule is registered for them as the gradient registry does.
template <class Family, class... Ops>
void check_op_types(type_list<Ops...>, std::vector<op_def> (*defs)()) {
  std::set<std::string> typed, defined;
  for (const auto& d : defs()) defined.insert(d.name);
  auto check = [&]<class Op>() {
    INFO(Family::name << ": " << Op::name);
    CHECK(typed.insert(Op::name).second);
    Op::define();
    CHECK(op_registry::global().find(Op::name) != nullptr);
    CHECK(has_gradient_rule_v<Op> == (gradient_registry::global().find(Op::name) != nullptr));
  };
  (check.template operator()<Ops>(), ...);
  CHECK(typed == defined);
}

TEST_CASE("the op types of each family name its ops and their gradient rules") {
  gradients::register_standard_gradients();
  check_op_types<ops::families::array>(ops::families::array::types{}, ops::array_op_defs);
  check_op_types<ops::families::core>(ops::families::core::types{}, ops::core_op_defs);
  check_op_types<ops::families::math>(ops::families::math::types{}, ops::math_op_defs);
  check_op_types<ops::families::matrix>(ops::families::matrix::types{}, ops::matrix_op_defs);
  check_op_types<ops::families::nn>(ops::families::nn::types{}, ops::nn_op_defs);
  check_op_types<ops::families::random>(ops::families::random::types{}, ops::random_op_defs);
  check_op_types<ops::families::reduction>(ops::families::reduction::types{}, ops::reduction_op_defs);
  check_op_types<ops::families::state>(ops::families::state::types{}, ops::state_op_defs);
  check_op_types<ops::families::training>(ops::families::training::types{}, ops::training_op_defs);
  check_op_types<ops::families::io>(ops::families::io::types{}, ops::io_op_defs);
  check_op_types<ops::families::data_flow>(ops::families::data_flow::types{}, ops::data_flow_op_defs);
  check_op_types<ops::families::parsing>(ops::families::parsing::types{}, ops::parsing_op_defs);
  check_op_types<ops::families::summary>(ops::families::summary::types{}, ops::summary_op_defs);
}
