// TensorFlow's GraphDef both ways (graph/graph_def.hpp) and the wire codec under it
// (core/wire.hpp). Bytes made without weft come from protoc (Debian's protobuf-compiler,
// which tools/install-deps installs) against tests/data/tensorflow_graph.proto: a frozen
// TensorFlow graph encoded by protoc and committed (tests/data/frozen_tf.pb, dynamic_tf.pb), and protoc's
// decoding of weft's output. Where protoc is missing, the cases that run it say so and
// check the rest.
#include "support/helpers.hpp"

#include <weft/graph/graph_def.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

using namespace weft;

namespace {

const std::filesystem::path gd_data = WEFT_TEST_DATA_DIR;

// protoc's run over `bytes` (`--decode=tensorflow.GraphDef` or `--decode_raw`): its stdout.
std::string gd_protoc(const std::string& bytes, const std::string& mode) {
  return test::protoc(bytes, mode, gd_data, "tensorflow_graph.proto");
}

std::string gd_slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The committed bytes of tests/data/<name>.pb, checked to be what protoc makes of
// <name>.pbtxt where protoc is installed (a warning says so where it is not).
std::string gd_committed(const std::string& name) {
  const std::string bytes = gd_slurp(gd_data / (name + ".pb"));
  REQUIRE(!bytes.empty());
  if (test::have_protoc()) {
    test::temp_dir dir("weft_graph_def_encode");
    const std::string cmd = "protoc --encode=tensorflow.GraphDef -I " + gd_data.string() + " " +
                            (gd_data / "tensorflow_graph.proto").string() + " < " + (gd_data / (name + ".pbtxt")).string() +
                            " > " + (dir.path / "out.pb").string();
    REQUIRE(std::system(cmd.c_str()) == 0);
    CHECK(gd_slurp(dir.path / "out.pb") == bytes);
  } else {
    WARN("protoc is not installed (tools/install-deps installs it): " << name << ".pb is not compared with " << name << ".pbtxt");
  }
  return bytes;
}

std::string gd_hex(std::string_view s) {
  std::string out;
  char b[4];
  for (unsigned char c : s) std::snprintf(b, sizeof b, "%02x", c), out += b;
  return out;
}

}  // namespace

TEST_CASE("wire: fields are written and read as protobuf's encoding guide spells them") {
  wire::writer w;
  w.varint(1, 150);              // the guide's first example: 08 96 01
  w.bytes(2, "testing");         // 12 07 74 65 73 74 69 6e 67
  w.int64(3, -2);                // a negative int64: ten bytes of two's complement
  w.float32(4, 1.0f);            // 25 00 00 80 3f
  w.float64(5, -2.0);            // 29 then the double's bytes
  w.packed(6, 3, [](wire::writer& p, std::size_t k) { p.raw_varint(std::uint64_t{1} << (7 * k)); });  // 1, 128, 16384
  CHECK(gd_hex(w.data()) ==
        "089601"
        "120774657374696e67"
        "18feffffffffffffffff01"
        "250000803f"
        "2900000000000000c0"
        "3206" "01" "8001" "808001");

  wire::reader r(w.data(), "test message");
  wire::field f;
  REQUIRE(r.next(f));
  CHECK((f.number == 1 && f.type == wire::wire_type::varint && f.number_value == 150));
  REQUIRE(r.next(f));
  CHECK((f.number == 2 && f.bytes == "testing"));
  REQUIRE(r.next(f));
  CHECK(f.as_int64() == -2);
  REQUIRE(r.next(f));
  CHECK(f.as_float() == 1.0f);
  REQUIRE(r.next(f));
  CHECK(f.as_double() == -2.0);
  REQUIRE(r.next(f));
  std::vector<std::uint64_t> packed;
  r.repeated(f, wire::wire_type::varint, "p", [&](std::uint64_t v) { packed.push_back(v); });
  CHECK(packed == std::vector<std::uint64_t>{1, 128, 16384});
  CHECK_FALSE(r.next(f));

  // Unpacked repeated values read as well (protobuf parsers accept both).
  wire::writer u;
  u.varint(6, 7);
  wire::reader ru(u.data(), "unpacked");
  REQUIRE(ru.next(f));
  packed.clear();
  ru.repeated(f, wire::wire_type::varint, "p", [&](std::uint64_t v) { packed.push_back(v); });
  CHECK(packed == std::vector<std::uint64_t>{7});

  // Malformed input: an error naming the message and the byte, never a read past the end.
  auto bad = [&](std::string bytes, const std::string& what) {
    test::require_error(
        [&] {
          wire::reader br(bytes, "the test message");
          wire::field g;
          while (br.next(g)) {
          }
        },
        {"the test message: malformed at byte", what});
  };
  bad(std::string("\x08\x96", 2), "a varint cut off");
  bad(std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 11), "a varint beyond 64 bits");
  bad(std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12), "beyond 64 bits");
  bad(std::string("\x12\x07" "abc", 5), "field 2 claiming 7 bytes where 3 remain");
  bad(std::string("\x0b", 1), "a group, which weft does not read");
  bad(std::string("\x0e", 1), "no such wire type");
  bad(std::string("\x00\x01", 2), "a field number of 0");
  bad(std::string("\x25\x00\x00", 3), "a 32-bit value cut off");
  bad(std::string("\x29\x00", 2), "a 64-bit value cut off");
  wire::reader wrong(std::string_view("\x08\x01", 2), "M");
  REQUIRE(wrong.next(f));
  test::require_error([&] { wrong.expect(f, wire::wire_type::bytes, "name"); }, {"M: field 1 (name) has wire type 0, not 2"});
}

TEST_CASE("GraphDef: a frozen TensorFlow graph encoded by protoc imports and runs") {
  const std::string bytes = gd_committed("frozen_tf");
  ops::register_standard_ops();
  graph g;
  import_graph_def(g, bytes);
  CHECK(g.size() == 19);
  // TensorFlow's spellings became weft's: private attrs and attrs at TensorFlow's neutral
  // values are gone, the colocation is kept, the device too.
  const node& conv = g["conv/Conv2D"];
  CHECK(conv.device() == "/device:CPU:0");
  CHECK_FALSE(conv.attrs().contains("use_cudnn_on_gpu"));
  CHECK_FALSE(conv.attrs().contains("explicit_paddings"));
  CHECK_FALSE(conv.attrs().contains("_output_shapes"));
  CHECK(conv.attr<std::string>("padding") == "SAME");
  CHECK_FALSE(g["dense/MatMul"].attrs().contains("grad_a"));
  CHECK(g["probs"].colocation() == "dense/BiasAdd");
  CHECK(g["conv/bias"].attr<tensor>("value").to_vector<float>() == std::vector<float>{0.5f, 0.5f});  // one value fills
  CHECK(g["probs"].output_shape(0) == partial_shape{-1, 3});

  CHECK(g["bn/FusedBatchNormV3"].attr<bool>("is_training") == false);
  CHECK(g["bn/FusedBatchNormV3"].attr<double>("epsilon") == Approx(0.001));
  // The same model by a naive loop: conv SAME (TensorFlow pads the end: 0 rows before, 1
  // after), bias, batch normalization by the moving statistics, ReLU, 2x2 max pool,
  // flatten, dense, softmax.
  const double gamma[2] = {1.5, 0.5}, beta[2] = {0.1, -0.2}, mean[2] = {0.25, -0.5}, var[2] = {2, 0.5};
  std::vector<float> image(16);
  for (int i = 0; i < 16; ++i) image[static_cast<std::size_t>(i)] = 0.25f * static_cast<float>(i - 5);
  const float k[2][2][2] = {{{1, -1}, {0.5f, 2}}, {{-0.25f, 1}, {1, 0}}};  // [kh][kw][out channel]
  float act[4][4][2];
  for (int h = 0; h < 4; ++h)
    for (int w = 0; w < 4; ++w)
      for (int c = 0; c < 2; ++c) {
        double s = 0.5;  // the bias
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j)
            if (h + i < 4 && w + j < 4) s += image[static_cast<std::size_t>((h + i) * 4 + w + j)] * k[i][j][c];
        s = gamma[c] * (s - mean[c]) / std::sqrt(var[c] + static_cast<double>(0.001f)) + beta[c];
        act[h][w][c] = static_cast<float>(std::max(0.0, s));
      }
  std::vector<double> flat;
  for (int h = 0; h < 2; ++h)
    for (int w = 0; w < 2; ++w)
      for (int c = 0; c < 2; ++c)
        flat.push_back(std::max({act[2 * h][2 * w][c], act[2 * h][2 * w + 1][c], act[2 * h + 1][2 * w][c], act[2 * h + 1][2 * w + 1][c]}));
  const double dense[8][3] = {{1, 0, -0.5}, {0, 1, 0.5}, {0.5, 0, 1}, {-0.25, 0, 0},
                              {0, 2, -1},   {1, 0, 0},   {0, 0, 1},   {0.25, 0.25, 0.25}};
  const double bias[3] = {0.1, -0.2, 0.3};
  std::vector<double> logits(3), want(3);
  for (int j = 0; j < 3; ++j) {
    logits[static_cast<std::size_t>(j)] = bias[j];
    for (int i = 0; i < 8; ++i) logits[static_cast<std::size_t>(j)] += flat[static_cast<std::size_t>(i)] * dense[i][j];
  }
  double z = 0;
  for (double l : logits) z += std::exp(l);
  for (int j = 0; j < 3; ++j) want[static_cast<std::size_t>(j)] = std::exp(logits[static_cast<std::size_t>(j)]) / z;

  session s(g, test::one_thread());
  const tensor probs = s.run({{"image", tensor::from_vector(image, shape{1, 4, 4, 1})}}, {"probs"})[0];
  CHECK(probs.shape() == shape{1, 3});
  const auto got = probs.to_vector<float>();
  test::check_close(std::vector<double>(got.begin(), got.end()), want, 1e-5);
}

TEST_CASE("GraphDef: TensorFlow 2's dynamic-shape array ops import and run at any batch") {
  const std::string bytes = gd_committed("dynamic_tf");
  ops::register_standard_ops();
  graph g;
  import_graph_def(g, bytes);
  CHECK(g["add"].op() == "Add");  // AddV2, TensorFlow 2's spelling
  // Pack's [batch, -1] is not a constant: the rank is known when built, the dims when run
  // (TensorFlow's shape inference follows the values through Shape, StridedSlice and Pack).
  CHECK(g["flatten/Reshape"].output_shape(0) == partial_shape::unknown_of_rank(2));
  CHECK(g["out"].output_shape(0) == partial_shape{unknown_dim, 2});
  session s(g, test::one_thread());
  for (std::int64_t batch : {1, 3}) {  // (batch 0 fails in TensorFlow too: Reshape cannot size -1 of no elements)
    INFO("batch " << batch);
    std::vector<float> x(static_cast<std::size_t>(batch * 6));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.5f * static_cast<float>(i) - 2;
    // Naive: each row of 6 reversed, doubled, plus 0..5; the result's elements 5 and 0.
    std::vector<float> want;
    for (std::int64_t b = 0; b < batch; ++b) {
      float row[6];
      for (int j = 0; j < 6; ++j) row[j] = 2 * x[static_cast<std::size_t>(b * 6 + 5 - j)] + static_cast<float>(j);
      want.push_back(row[5]);
      want.push_back(row[0]);
    }
    const tensor out = s.run({{"x", tensor::from_vector(x, shape{batch, 2, 3})}}, {"out"})[0];
    CHECK(out.shape() == shape{batch, 2});
    CHECK(out.to_vector<float>() == want);
  }
}

TEST_CASE("GraphDef: protoc decodes what weft writes, attrs of every kind") {
  static const bool registered = [] {
    register_op(op_def_builder("TestGraphDefAttrs")
                    .output("y: float32")
                    .attr("rate: float")
                    .attr("rates: list(float)")
                    .attr("names: list(string)")
                    .attr("types: list(type)")
                    .attr("shapes: list(shape)")
                    .attr("sizes: list(int)")
                    .attr("empty: list(int)")
                    .attr("flag: bool")
                    .attr("count: int")
                    .attr("label: string")
                    .attr("kind: type")
                    .attr("dims: shape")
                    .shape_fn([](shape_context& c) { c.set_output(0, partial_shape{}); }));
    return true;
  }();
  CHECK(registered);
  graph g;
  auto& a = g.op("TestGraphDefAttrs", {},
                 {{"rate", 0.5},
                  {"rates", std::vector<double>{1.5, -2}},
                  {"names", std::vector<std::string>{"a", "b c"}},
                  {"types", std::vector<dtype>{dtype::int64, dtype::bfloat16, dtype::uint32}},
                  {"shapes", std::vector<partial_shape>{partial_shape{2, -1}, partial_shape::unknown_rank(), partial_shape(std::vector<std::int64_t>{})}},
                  {"sizes", std::vector<std::int64_t>{3, -1, 1ll << 40}},
                  {"empty", std::vector<std::int64_t>{}},
                  {"flag", true},
                  {"count", std::int64_t{-7}},
                  {"label", "x\ny"},
                  {"kind", dtype::complex128},
                  {"dims", partial_shape{0, 5}}},
                 "attrs");
  auto& c = g.constant(tensor::of<std::int16_t>({2}, {-3, 300}), node_options("c").on("/cpu:0"));
  auto& s = g.constant(tensor::of<std::string>({2}, {"hello", std::string("\0z", 2)}), "strings");
  auto& n = g.op("Neg", {c}, {}, node_options("neg").after({a.id()}));
  (void)s, (void)n;
  const std::string bytes = to_graph_def(g);
  if (!test::have_protoc()) {
    WARN("protoc is not installed (tools/install-deps installs it): weft's GraphDef is not decoded independently");
    return;
  }
  const std::string text = gd_protoc(bytes, "--decode=tensorflow.GraphDef");
  INFO(text);
  for (const char* want : {
           "name: \"attrs\"\n  op: \"TestGraphDefAttrs\"",
           "key: \"rate\"\n    value {\n      f: 0.5\n",
           "key: \"rates\"\n    value {\n      list {\n        f: 1.5\n        f: -2\n",
           "key: \"names\"\n    value {\n      list {\n        s: \"a\"\n        s: \"b c\"\n",
           "type: DT_INT64\n        type: DT_BFLOAT16\n        type: DT_UINT32\n",
           "key: \"shapes\"\n    value {\n      list {\n        shape {\n          dim {\n            size: 2\n          }\n"
           "          dim {\n            size: -1\n          }\n        }\n        shape {\n          unknown_rank: true\n"
           "        }\n        shape {\n        }\n",
           "i: 3\n        i: -1\n        i: 1099511627776\n",
           "key: \"empty\"\n    value {\n      list {\n      }\n",
           "key: \"flag\"\n    value {\n      b: true\n",
           "key: \"count\"\n    value {\n      i: -7\n",
           "key: \"label\"\n    value {\n      s: \"x\\ny\"\n",
           "key: \"kind\"\n    value {\n      type: DT_COMPLEX128\n",
           "key: \"dims\"\n    value {\n      shape {\n        dim {\n        }\n        dim {\n          size: 5\n",
           "name: \"c\"\n  op: \"Const\"\n  device: \"/cpu:0\"",
           "dtype: DT_INT16\n        tensor_shape {\n          dim {\n            size: 2\n          }\n        }\n"
           "        tensor_content: \"\\375\\377,\\001\"",
           "string_val: \"hello\"\n        string_val: \"\\000z\"",
           "name: \"neg\"\n  op: \"Neg\"\n  input: \"c\"\n  input: \"^attrs\"",
           "key: \"T\"\n    value {\n      type: DT_INT16\n",
       }) {
    INFO("looking for:\n" << want);
    CHECK(text.find(want) != std::string::npos);
  }
  // Back into weft: the same graph, attrs equal (0.5, 1.5 and -2 are floats exactly).
  graph h;
  import_graph_def(h, bytes);
  REQUIRE(h.size() == g.size());
  for (int id = 0; id < g.size(); ++id) {
    INFO(g.at(id).describe());
    CHECK(h[g.at(id).name()].attrs() == g.at(id).attrs());
  }
  CHECK(to_graph_def(h) == bytes);
}

TEST_CASE("GraphDef: round trips keep loops, control edges, colocations, devices and values") {
  ops::register_standard_ops();
  graph g;
  auto& n = g.placeholder(dtype::int32, partial_shape{}, "n");
  auto& start = g.constant(tensor::scalar(0), "i0");
  auto& acc0 = g.constant(tensor::scalar(1.0), "acc0");
  auto loop = while_loop(
      g, {start, acc0},
      [&](loop_scope& s, const std::vector<output>& v) { return g.op("Less", {v[0], s.invariant(n)}).out(0); },
      [&](loop_scope& s, const std::vector<output>& v) {
        auto& one = g.op("Const", {}, {{"value", tensor::scalar(1)}, {"dtype", dtype::int32}}, node_options().after({s.pivot()}));
        auto& two = g.op("Const", {}, {{"value", tensor::scalar(2.0)}, {"dtype", dtype::float64}}, node_options().after({s.pivot()}));
        return std::vector<output>{g.op("Add", {v[0], one}), g.op("Mul", {v[1], two})};
      });
  auto& v = g.variable(dtype::float32, partial_shape{2}, "v");
  auto& init = g.op("Assign", {v, g.constant(tensor::of<float>({2}, {1, 2}))}, {}, "init");
  auto& read = g.op("Identity", {v}, {}, node_options("read").after({init.id()}).colocate("v"));
  auto& bools = g.constant(tensor::of<bool>({3}, {true, false, true}), "bools");
  auto& cplx = g.constant(tensor::of<complex64>({1}, {complex64(1.5f, -2)}), "cplx");
  auto& halves = g.constant(tensor::of<half>({2}, {half(0.5f), half(-3)}), "halves");
  auto& empty = g.constant(tensor::zeros(dtype::float32, shape{0, 3}), "empty");
  (void)read, (void)bools, (void)cplx, (void)halves, (void)empty;

  const std::string bytes = to_graph_def(g);
  graph h;
  import_graph_def(h, bytes);
  REQUIRE(h.size() == g.size());
  for (int id = 0; id < g.size(); ++id) {
    const node& a = g.at(id);
    const node& b = h[a.name()];
    INFO(a.describe());
    CHECK(b.op() == a.op());
    CHECK(b.attrs() == a.attrs());
    CHECK(b.device() == a.device());
    CHECK(b.colocation() == a.colocation());
    REQUIRE(b.num_inputs() == a.num_inputs());
    for (int k = 0; k < a.num_inputs(); ++k) CHECK(h.name_of(b.inputs()[static_cast<std::size_t>(k)]) == g.name_of(a.inputs()[static_cast<std::size_t>(k)]));
    REQUIRE(b.control_inputs().size() == a.control_inputs().size());
    for (std::size_t k = 0; k < a.control_inputs().size(); ++k)
      CHECK(h.at(b.control_inputs()[k]).name() == g.at(a.control_inputs()[k]).name());
    for (int k = 0; k < a.num_outputs(); ++k) CHECK(b.output_shape(k) == a.output_shape(k));
  }
  CHECK(h["read"].colocation() == "v");
  CHECK(to_graph_def(h) == bytes);  // import then export changes nothing
  CHECK(to_graph_def(g, {.output_shapes = false}).size() < bytes.size());

  // Both graphs compute the same: 2^n after the loop, the variable after its init.
  session sg(g, test::one_thread()), sh(h, test::one_thread());
  for (int count : {0, 1, 5}) {
    const feed_list feed{{"n", tensor::scalar(count)}};
    const auto want = sg.run(feed, {g.name_of(loop[0]), g.name_of(loop[1])});
    const auto got = sh.run(feed, {g.name_of(loop[0]), g.name_of(loop[1])});
    CHECK(got[0].scalar_value<int>() == count);
    CHECK(got[1].scalar_value<double>() == std::ldexp(1.0, count));
    CHECK(want[1].scalar_value<double>() == got[1].scalar_value<double>());
  }
  sh.run({}, {}, {"init"});
  CHECK(sh.run({}, {"read"})[0].to_vector<float>() == std::vector<float>{1, 2});
  CHECK(sh.run({}, {"cplx"})[0].to_vector<complex64>() == std::vector<complex64>{complex64(1.5f, -2)});
  CHECK(sh.run({}, {"bools"})[0].to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(sh.run({}, {"empty"})[0].shape() == shape{0, 3});

  // Files: written atomically, read back; a missing file names itself.
  test::temp_dir dir("weft_graph_def_files");
  write_graph_def(g, dir.path / "g.pb");
  CHECK(gd_slurp(dir.path / "g.pb") == bytes);
  CHECK(read_graph_def(dir.path / "g.pb").size() == g.size());
  test::require_error([&] { read_graph_def(dir.path / "none.pb"); }, {"cannot open the GraphDef", "none.pb"});
  std::ofstream(dir.path / "cut.pb", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  test::require_error([&] { read_graph_def(dir.path / "cut.pb"); }, {"cut.pb: ", "GraphDef"});
}

TEST_CASE("GraphDef: what weft cannot read is an error naming the node, op and attr") {
  ops::register_standard_ops();
  auto node_bytes = [](const std::string& name, const std::string& op, const std::vector<std::string>& inputs,
                       const std::vector<std::pair<std::string, wire::writer>>& attrs) {
    wire::writer n;
    n.bytes(1, name);
    n.bytes(2, op);
    for (const auto& i : inputs) n.bytes(3, i);
    for (const auto& [k, v] : attrs) {
      wire::writer e;
      e.bytes(1, k);
      e.message(2, v);
      n.message(5, e);
    }
    wire::writer g;
    g.message(1, n);
    return g.take();
  };
  auto attr = [](auto fill) {
    wire::writer a;
    fill(a);
    return a;
  };
  auto type_attr = [&](int code) { return attr([&](wire::writer& a) { a.varint(6, static_cast<std::uint64_t>(code)); }); };
  auto tensor_attr = [&](auto fill) {
    return attr([&](wire::writer& a) {
      wire::writer t;
      fill(t);
      a.message(8, t);
    });
  };
  auto shape_of = [](std::vector<std::int64_t> dims) {
    wire::writer s;
    for (auto d : dims) {
      wire::writer dim;
      dim.int64(1, d);
      s.message(2, dim);
    }
    return s;
  };
  graph g;
  // Ops weft does not have: every one named, with its nodes, in one error.
  const std::string two_unknown = node_bytes("a", "FancyOp", {}, {}) + node_bytes("b", "FancyOp", {}, {}) +
                                  node_bytes("c", "OtherOp", {"a"}, {});
  test::require_error([&] { import_graph_def(g, two_unknown); },
                      {"GraphDef: 2 ops that this program does not have", "'FancyOp' (node 'a', node 'b')", "'OtherOp' (node 'c')"});
  CHECK(g.size() == 0);
  // An attr weft's op lacks, at a value that changes what the op computes.
  test::require_error(
      [&] {
        import_graph_def(g, node_bytes("x", "Placeholder", {},
                                       {{"dtype", type_attr(1)},
                                        {"fancy", attr([](wire::writer& a) { a.int64(3, 4); })}}));
      },
      {"node 'x' (Placeholder): attr 'fancy' = 4 is not one weft's Placeholder has (it has dtype, shape)"});
  test::require_error(
      [&] {
        import_graph_def(g, node_bytes("x", "Placeholder", {}, {{"dtype", type_attr(1)}}) +
                                node_bytes("m", "MatMul", {"x", "x"}, {{"grad_a", attr([](wire::writer& a) { a.boolean(5, true); })}}));
      },
      {"node 'm' (MatMul): attr 'grad_a' = true"});
  // dtypes weft has no counterpart for, and attr values it does not hold.
  test::require_error([&] { import_graph_def(g, node_bytes("x", "Placeholder", {}, {{"dtype", type_attr(20)}})); },
                      {"attr 'dtype'", "TensorFlow DataType 20 (DT_RESOURCE) has no weft dtype"});
  test::require_error([&] { import_graph_def(g, node_bytes("x", "Placeholder", {}, {{"dtype", type_attr(99)}})); },
                      {"TensorFlow DataType 99 has no weft dtype"});
  test::require_error(
      [&] {
        import_graph_def(g, node_bytes("x", "Placeholder", {},
                                       {{"dtype", attr([](wire::writer& a) {
                                          wire::writer f;
                                          f.bytes(1, "fn");
                                          a.message(10, f);
                                        })}}));
      },
      {"attr 'dtype'", "a function (func)"});
  // Tensors: content of the wrong size, more values than elements, a fill past the limit,
  // values in the wrong field.
  auto const_node = [&](auto fill) {
    return node_bytes("k", "Const", {}, {{"dtype", type_attr(1)}, {"value", tensor_attr(fill)}});
  };
  test::require_error([&] {
    import_graph_def(g, const_node([&](wire::writer& t) {
                       t.varint(1, 1);
                       t.message(2, shape_of({3}));
                       t.bytes(4, "12345678");
                     }));
  }, {"node 0 'k' attr 'value': tensor_content has 8 bytes; a float32[3] tensor has 12"});
  test::require_error([&] {
    import_graph_def(g, const_node([&](wire::writer& t) {
                       t.varint(1, 1);
                       t.message(2, shape_of({1}));
                       t.float32(5, 1);
                       t.float32(5, 2);
                     }));
  }, {"2 values for a float32[1] tensor of 1 elements"});
  test::require_error([&] {
    import_graph_def(g, const_node([&](wire::writer& t) {
                       t.varint(1, 1);
                       t.message(2, shape_of({1 << 20, 1 << 10}));
                       t.float32(5, 1);
                     }), {.max_filled_bytes = 1 << 20});
  }, {"filling a float32[1048576,1024] tensor from 1 value takes 4294967296 bytes", "limit of 1048576"});
  test::require_error([&] {
    import_graph_def(g, const_node([&](wire::writer& t) {
                       t.varint(1, 1);
                       t.int64(10, 3);
                     }));
  }, {"a float32 tensor with values in field 10 (int64_val), not field 5"});
  test::require_error([&] {
    import_graph_def(g, const_node([&](wire::writer& t) {
                       t.varint(1, 1);
                       t.message(2, shape_of({-1}));
                     }));
  }, {"tensor_shape [?] is not fully known"});
  // A bool tensor's bytes other than 0 and 1 read as true, never as an invalid bool.
  graph bools;
  import_graph_def(bools, node_bytes("k", "Const", {}, {{"dtype", type_attr(10)}, {"value", tensor_attr([&](wire::writer& t) {
                                                                 t.varint(1, 10);
                                                                 t.message(2, shape_of({3}));
                                                                 t.bytes(4, std::string("\x00\x02\xff", 3));
                                                               })}}));
  CHECK(bools["k"].attr<tensor>("value").to_vector<bool>() == std::vector<bool>{false, true, true});
  // A value of the wrong kind for weft's op is the graph's error.
  test::require_error(
      [&] { import_graph_def(g, node_bytes("x", "Placeholder", {}, {{"dtype", attr([](wire::writer& a) { a.int64(3, 1); })}})); },
      {"node 'x' (Placeholder): attr 'dtype' must be type, got int"});
  CHECK(g.size() == 0);
  // A missing input, and a cycle.
  test::require_error([&] { import_graph_def(g, node_bytes("n", "Neg", {"nothing"}, {})); },
                      {"node 'n' (Neg): input 'nothing' names no node"});
  test::require_error([&] { import_graph_def(g, node_bytes("p", "Neg", {"q"}, {}) + node_bytes("q", "Neg", {"p"}, {})); },
                      {"is part of a cycle"});
}

TEST_CASE("GraphDef: every cut and many corruptions of a GraphDef are errors or graphs, never crashes") {
  const std::string bytes = gd_slurp(gd_data / "frozen_tf.pb");
  REQUIRE(bytes.size() > 100);
  ops::register_standard_ops();
  int imported = 0, refused = 0;
  auto attempt = [&](std::string_view b) {
    graph g;
    try {
      import_graph_def(g, b, {.max_filled_bytes = 1 << 20});
      ++imported;
    } catch (const error&) {
      CHECK(g.size() == 0);  // all or nothing
      ++refused;
    }
  };
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) attempt(std::string_view(bytes).substr(0, cut));
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string b = bytes;
    for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips)
      b[rng() % b.size()] = static_cast<char>(rng() % 256);
    attempt(b);
  }
  CHECK(refused > 0);
  CHECK(imported > 0);  // cuts between whole nodes are graphs of their first nodes
}
