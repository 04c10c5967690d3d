// String tensors (TensorFlow's string dtype): std::string elements made empty, copied deeply,
// shared by views; the ops that admit strings against values written by hand; the ops that
// do not, refused when the graph is built; checkpoints that hold strings, and every
// truncation of one caught.
#include "support/helpers.hpp"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace weft;
using namespace weft::test;
namespace fs = std::filesystem;

namespace {

using strings = std::vector<std::string>;

tensor strs(const strings& v, shape s) { return tensor::from_vector(v, std::move(s)); }
tensor strs(const strings& v) { return tensor::from_vector(v); }

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("strings: a string tensor's elements start empty, copy deeply and share through views", "[strings]") {
  CHECK(name(dtype::string) == "string");
  CHECK(parse_dtype("string") == dtype::string);
  CHECK(!is_plain(dtype::string));
  CHECK(is_plain(dtype::complex128));
  CHECK(dtype_of<std::string> == dtype::string);

  tensor e(dtype::string, shape{2, 3});
  for (const auto& s : e.flat<std::string>()) CHECK(s.empty());
  CHECK(tensor::zeros(dtype::string, shape{4}).to_vector<std::string>() == strings(4));
  CHECK(tensor(dtype::string, shape{0}).num_elements() == 0);

  // Long strings (heap storage), a NUL byte inside, an empty one.
  const std::string long_one(1000, 'x');
  tensor t = strs({"a", std::string("b\0c", 3), "", long_one}, shape{2, 2});
  tensor c = t.copy();
  CHECK(!c.shares_buffer_with(t));
  c.data<std::string>()[0] = "changed";
  CHECK(t.data<std::string>()[0] == "a");  // the copy is deep
  CHECK(c.to_vector<std::string>() == strings{"changed", std::string("b\0c", 3), "", long_one});

  // Views share the elements: a slice's rows and a reshape's order.
  tensor row = t.slice(1, 2);
  CHECK(row.shares_buffer_with(t));
  CHECK(row.to_vector<std::string>() == strings{"", long_one});
  CHECK(t.reshape(shape{4}).to_vector<std::string>()[1] == std::string("b\0c", 3));
  {
    tensor keep = t.slice(0, 1);
    t = tensor{};  // the view keeps the buffer (and its strings) alive
    CHECK(keep.to_vector<std::string>() == strings{"a", std::string("b\0c", 3)});
  }

  CHECK(tensor::scalar("path/to/file").scalar_value<std::string>() == "path/to/file");
  CHECK(tensor::scalar(std::string("s")).dtype() == dtype::string);
  CHECK(tensor::filled(shape{2}, std::string("ab")).to_vector<std::string>() == strings{"ab", "ab"});

  // Printed as a C++ literal would be: quotes, escapes, bytes in hex.
  CHECK(strs({"q\"\\", "a\nb\t", std::string("\0\xff", 2)}).debug_string() ==
        R"(tensor<string[3]>{"q\"\\", "a\nb\t", "\x00\xff"})");
  CHECK(tensor::scalar(std::string(70, 'z')).debug_string() == "tensor<string[]>{\"" + std::string(64, 'z') + "\"...}");
  require_error([] { (void)strs({"a"}).data<float>(); }, {"accessed a string tensor as float32"});
}

TEST_CASE("strings: Const, Placeholder, Identity, Reshape, Shape, Size and Rank carry strings", "[strings]") {
  graph g;
  auto c = g.constant(strs({"x", "yy", "zzz", ""}, shape{2, 2})).out(0);
  CHECK(g.at(c).output_dtype(0) == dtype::string);
  auto p = g.placeholder(dtype::string, partial_shape({unknown_dim}), node_options("p")).out(0);
  auto id = op(g, "Identity", {p});
  auto shp = g.constant(tensor::of<std::int32_t>({1}, {-1})).out(0);
  auto flat = op(g, "Reshape", {c, shp});
  auto sh = op(g, "Shape", {c});
  auto sz = op(g, "Size", {c});
  auto rk = op(g, "Rank", {c});
  session s(g, one_thread());
  auto got = s.run({{p, strs({"fed", "values"})}}, {id, flat, sh, sz, rk});
  CHECK(got[0].to_vector<std::string>() == strings{"fed", "values"});
  CHECK(got[1].to_vector<std::string>() == strings{"x", "yy", "zzz", ""});
  CHECK(got[2].to_vector<std::int32_t>() == std::vector<std::int32_t>{2, 2});
  CHECK(got[3].scalar_value<std::int32_t>() == 4);
  CHECK(got[4].scalar_value<std::int32_t>() == 2);
  require_error([&] { s.run({{p, tensor::of<float>({1}, {1.0f})}}, {id}); }, {"p", "float32", "string"});
}

TEST_CASE("strings: ConcatV2, Split, Slice, Tile and GatherV2 move whole strings", "[strings]") {
  graph g;
  auto a = g.constant(strs({"a0", "a1", "a2", "a3"}, shape{2, 2})).out(0);
  auto b = g.constant(strs({"b0", "b1"}, shape{2, 1})).out(0);
  auto axis1 = g.constant(tensor::scalar(std::int32_t{1})).out(0);
  auto axis0 = g.constant(tensor::scalar(std::int32_t{0})).out(0);
  auto cat = op(g, "ConcatV2", {a, b, axis1});
  auto cat0 = op(g, "ConcatV2", {a, a, axis0});
  const node& split = g.op("Split", {axis1, a}, {{"num_split", std::int64_t{2}}});
  auto sl = op(g, "Slice", {cat, g.constant(tensor::of<std::int32_t>({2}, {0, 1})).out(0),
                            g.constant(tensor::of<std::int32_t>({2}, {2, 2})).out(0)});
  auto tile = op(g, "Tile", {b, g.constant(tensor::of<std::int32_t>({2}, {1, 2})).out(0)});
  auto idx = g.constant(tensor::of<std::int64_t>({3}, {1, 0, 1})).out(0);
  auto gat0 = op(g, "GatherV2", {a, idx, axis0});
  auto gat1 = op(g, "GatherV2", {a, idx, axis1});
  session s(g, one_thread());
  auto got = s.run({}, {cat, cat0, split.out(0), split.out(1), sl, tile, gat0, gat1});
  CHECK(got[0].shape() == shape{2, 3});
  CHECK(got[0].to_vector<std::string>() == strings{"a0", "a1", "b0", "a2", "a3", "b1"});
  CHECK(got[1].to_vector<std::string>() == strings{"a0", "a1", "a2", "a3", "a0", "a1", "a2", "a3"});
  CHECK(got[2].to_vector<std::string>() == strings{"a0", "a2"});
  CHECK(got[3].to_vector<std::string>() == strings{"a1", "a3"});
  CHECK(got[4].to_vector<std::string>() == strings{"a1", "b0", "a3", "b1"});
  CHECK(got[5].to_vector<std::string>() == strings{"b0", "b0", "b1", "b1"});
  CHECK(got[6].shape() == shape{3, 2});
  CHECK(got[6].to_vector<std::string>() == strings{"a2", "a3", "a0", "a1", "a2", "a3"});
  CHECK(got[7].to_vector<std::string>() == strings{"a1", "a0", "a1", "a3", "a2", "a3"});
  // The outputs own their strings: the constants' values are unchanged and apart.
  got[0].data<std::string>()[0] = "changed";
  CHECK(s.run({}, {cat})[0].to_vector<std::string>()[0] == "a0");
}

TEST_CASE("strings: Equal and NotEqual compare bytes and broadcast", "[strings]") {
  graph g;
  auto x = g.constant(strs({"a", "b", std::string("a\0", 2), ""}, shape{2, 2})).out(0);
  auto y = g.constant(strs({"a", ""})).out(0);
  auto eq = op(g, "Equal", {x, y});
  auto ne = op(g, "NotEqual", {x, y});
  auto scalar = op(g, "Equal", {x, g.constant(tensor::scalar("b")).out(0)});
  session s(g, one_thread());
  auto got = s.run({}, {eq, ne, scalar});
  CHECK(got[0].to_vector<bool>() == std::vector<bool>{true, false, false, true});
  CHECK(got[1].to_vector<bool>() == std::vector<bool>{false, true, true, false});
  CHECK(got[2].to_vector<bool>() == std::vector<bool>{false, true, false, false});
  auto bad = g.constant(strs({"a", "b", "c"})).out(0);
  require_error([&] { (void)op(g, "Equal", {x, bad}); }, {"Equal", "[2,2]", "[3]"});
}

TEST_CASE("strings: an op that takes no strings refuses them when the graph is built", "[strings]") {
  graph g;
  auto x = g.constant(strs({"a"})).out(0);
  require_error([&] { (void)op(g, "Add", {x, x}); }, {"Add", "T = string is not supported"});
  require_error([&] { (void)op(g, "Neg", {x}); }, {"Neg", "string"});
  require_error([&] { (void)op(g, "Transpose", {x, g.constant(tensor::of<std::int32_t>({1}, {0})).out(0)}); },
                {"Transpose", "takes no strings"});
  require_error([&] { (void)g.op("Cast", {x}, {{"DstT", dtype::float32}}); }, {"Cast", "string"});
  require_error([&] { (void)op(g, "Less", {x, x}); }, {"Less", "string"});
}

TEST_CASE("strings: Switch and Merge pass strings through a conditional", "[strings]") {
  graph g;
  auto pred = g.placeholder(dtype::boolean, partial_shape({}), node_options("pred")).out(0);
  auto v = g.constant(strs({"yes", "no"})).out(0);
  const node& sw = g.op("Switch", {v, pred});
  auto merged = g.op("Merge", {sw.out(0), sw.out(1)}).out(0);
  session s(g, one_thread());
  CHECK(s.run({{pred, tensor::scalar(true)}}, {merged})[0].to_vector<std::string>() == strings{"yes", "no"});
  CHECK(s.run({{pred, tensor::scalar(false)}}, {merged})[0].to_vector<std::string>() == strings{"yes", "no"});
}

TEST_CASE("strings: checkpoints hold string tensors, and every truncation of one is caught", "[strings]") {
  temp_dir d("weft_strings_test");
  const std::string binary("\0\x01\xff", 3);
  const std::vector<std::pair<std::string, tensor>> tensors{
      {"words", strs({"alpha", "", binary, std::string(300, 'q')}, shape{2, 2})},
      {"empty", tensor(dtype::string, shape{0, 2})},
      {"scalar", tensor::scalar("one")},
      {"after", tensor::of<float>({2}, {1.5f, -2.0f})},
  };
  const fs::path file = d.path / "s.ckpt";
  write_checkpoint(file, tensors);
  auto back = read_checkpoint(file);
  REQUIRE(back.size() == 4);
  CHECK(back[0].second.shape() == shape{2, 2});
  CHECK(back[0].second.to_vector<std::string>() == strings{"alpha", "", binary, std::string(300, 'q')});
  CHECK(back[1].second.shape() == shape{0, 2});
  CHECK(back[2].second.scalar_value<std::string>() == "one");
  CHECK(back[3].second.to_vector<float>() == std::vector<float>{1.5f, -2.0f});
  // The data is each element's u64 length and bytes: the file's length from the format.
  std::size_t length = 8 + 4 + 4 + 4;
  for (const auto& [name, t] : tensors) length += 4 + name.size() + 1 + 1 + 8 * static_cast<std::size_t>(t.rank()) + 8 + 8 + 4;
  length += (8 + 5) + 8 + (8 + 3) + (8 + 300) + 0 + (8 + 3) + 8;
  const std::string good = read_bytes(file);
  CHECK(good.size() == length);
  const fs::path bad = d.path / "bad.ckpt";
  for (std::size_t n = 0; n < good.size(); ++n) {
    INFO("truncated to " << n);
    std::ofstream(bad, std::ios::binary | std::ios::trunc) << good.substr(0, n);
    require_error([&] { read_checkpoint(bad); }, {"bad.ckpt is corrupt"});
  }
}

TEST_CASE("strings: a string tensor's element lengths are checked inside its checksummed bytes", "[strings]") {
  // Bytes made by hand with a valid checksum but an element length that runs past the
  // tensor's bytes: the reader names the tensor and the offset, and does not read past.
  std::string data;
  auto put64 = [&](std::uint64_t v) { data.append(reinterpret_cast<const char*>(&v), 8); };
  put64(100);  // one element claiming 100 bytes
  data += "abc";
  std::string file("WEFTCKPT", 8);
  auto put32 = [&](std::string& s, std::uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); };
  put32(file, 1);
  put32(file, 1);
  put32(file, 1);
  file += "s";
  file += static_cast<char>(dtype::string);
  file += static_cast<char>(0);  // a scalar
  const std::uint64_t offset = file.size() + 8 + 8 + 4 + 4;
  file.append(reinterpret_cast<const char*>(&offset), 8);
  const std::uint64_t size = data.size();
  file.append(reinterpret_cast<const char*>(&size), 8);
  put32(file, crc32c(data.data(), data.size()));
  put32(file, crc32c(file.data(), file.size()));
  file += data;
  require_error([&] { parse_checkpoint(file, "hand.ckpt"); },
                {"hand.ckpt is corrupt", "string tensor 's' at offset 47", "an element of 100 bytes runs past its 11 bytes"});
}
