// The IDX reader (data/idx.hpp) on files written here byte by byte: every element type,
// big-endian values, and each way a file can be wrong.
#include "support/helpers.hpp"

#include <weft/data/idx.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace weft;
using namespace weft::test;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& p, const std::vector<unsigned char>& bytes) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}
// A header: magic (two zeros, type, rank) and big-endian dims.
std::vector<unsigned char> header(unsigned char type, std::vector<std::uint32_t> dims) {
  std::vector<unsigned char> h{0, 0, type, static_cast<unsigned char>(dims.size())};
  for (auto d : dims) h.insert(h.end(), {static_cast<unsigned char>(d >> 24), static_cast<unsigned char>(d >> 16),
                                         static_cast<unsigned char>(d >> 8), static_cast<unsigned char>(d)});
  return h;
}
std::vector<unsigned char> cat(std::vector<unsigned char> a, const std::vector<unsigned char>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("data: IDX files of every element type read back with their dims and values", "[data]") {
  temp_dir d("weft_data_test");
  write(d.path / "u8", cat(header(0x08, {2, 3}), {0, 1, 2, 253, 254, 255}));
  auto u8 = data::read_idx(d.path / "u8");
  CHECK(u8.dtype() == dtype::uint8);
  CHECK(u8.shape() == shape{2, 3});
  CHECK(u8.to_vector<std::uint8_t>() == std::vector<std::uint8_t>{0, 1, 2, 253, 254, 255});
  // Big-endian: 0x00000102 = 258 and 0xFFFFFFFE = -2; 0x3FF0000000000000 = 1.0; 0xC0490FDB ~ -pi.
  write(d.path / "i32", cat(header(0x0C, {2}), {0, 0, 1, 2, 0xFF, 0xFF, 0xFF, 0xFE}));
  CHECK(data::read_idx(d.path / "i32").to_vector<std::int32_t>() == std::vector<std::int32_t>{258, -2});
  write(d.path / "i16", cat(header(0x0B, {1}), {0x80, 0x00}));
  CHECK(data::read_idx(d.path / "i16").to_vector<std::int16_t>() == std::vector<std::int16_t>{-32768});
  write(d.path / "i8", cat(header(0x09, {1}), {0xFF}));
  CHECK(data::read_idx(d.path / "i8").to_vector<std::int8_t>() == std::vector<std::int8_t>{-1});
  write(d.path / "f64", cat(header(0x0E, {1}), {0x3F, 0xF0, 0, 0, 0, 0, 0, 0}));
  CHECK(data::read_idx(d.path / "f64").to_vector<double>() == std::vector<double>{1.0});
  write(d.path / "f32", cat(header(0x0D, {}), {0xC0, 0x49, 0x0F, 0xDB}));
  auto f = data::read_idx(d.path / "f32");
  CHECK(f.rank() == 0);
  CHECK(f.scalar_value<float>() == Approx(-3.14159265f));
  write(d.path / "empty", header(0x08, {0, 28, 28}));
  CHECK(data::read_idx(d.path / "empty").shape() == shape{0, 28, 28});
}

TEST_CASE("data: a missing, truncated or malformed IDX file is an error naming it", "[data]") {
  temp_dir d("weft_data_test");
  require_error([&] { data::read_idx(d.path / "none", "run tools/fetch-mnist"); },
                {"cannot open the IDX file", "none", "run tools/fetch-mnist"});
  try {
    data::read_idx(d.path / "none");
  } catch (const error& e) {
    CHECK(e.code() == error_code::not_found);
  }
  write(d.path / "short", cat(header(0x08, {2, 3}), {1, 2, 3, 4, 5}));
  require_error([&] { data::read_idx(d.path / "short"); },
                {"short is not valid", "promise 6 values (6 bytes) but it holds 5 bytes"});
  write(d.path / "long", cat(header(0x0C, {1}), {0, 0, 0, 1, 9}));
  require_error([&] { data::read_idx(d.path / "long"); }, {"promise 1 values (4 bytes) but it holds 5 bytes"});
  write(d.path / "magic", cat({1, 0, 8, 1, 0, 0, 0, 1}, {7}));
  require_error([&] { data::read_idx(d.path / "magic"); }, {"magic number"});
  write(d.path / "type", cat(header(0x07, {1}), {7}));
  require_error([&] { data::read_idx(d.path / "type"); }, {"unknown type code 7"});
  write(d.path / "header", {0, 0, 8, 3, 0, 0});
  require_error([&] { data::read_idx(d.path / "header"); }, {"fewer than the 16 of a rank-3 header"});
  write(d.path / "tiny", {0, 0});
  require_error([&] { data::read_idx(d.path / "tiny"); }, {"2 bytes, fewer than a header"});
}

TEST_CASE("data: load_mnist checks that images and labels agree", "[data]") {
  temp_dir d("weft_data_test");
  auto images = [&](const char* name, std::uint32_t n) {
    write(d.path / name, cat(header(0x08, {n, 2, 2}), std::vector<unsigned char>(4 * n, 7)));
  };
  auto labels = [&](const char* name, std::vector<unsigned char> v) {
    write(d.path / name, cat(header(0x08, {static_cast<std::uint32_t>(v.size())}), v));
  };
  images("train-images-idx3-ubyte", 3);
  labels("train-labels-idx1-ubyte", {0, 9, 4});
  images("t10k-images-idx3-ubyte", 2);
  labels("t10k-labels-idx1-ubyte", {1, 2});
  auto m = data::load_mnist(d.path);
  CHECK(m.train.size() == 3);
  CHECK(m.test.images.shape() == shape{2, 2, 2});
  labels("t10k-labels-idx1-ubyte", {1, 2, 3});
  require_error([&] { data::load_mnist(d.path); }, {"t10k-labels-idx1-ubyte holds uint8[3], not 2 uint8 labels"});
  labels("t10k-labels-idx1-ubyte", {1, 10});
  require_error([&] { data::load_mnist(d.path); }, {"holds the label 10, outside [0, 10)"});
  fs::remove(d.path / "train-images-idx3-ubyte");
  require_error([&] { data::load_mnist(d.path, "fetch it"); }, {"train-images-idx3-ubyte", "fetch it"});
}

TEST_CASE("data: a gzipped IDX file (Debian's Fashion-MNIST's format) reads as the plain one", "[data]") {
  temp_dir d("weft_data_test");
  // uint8 [2, 3] holding 1..6, gzipped by Python's gzip module (mtime 0).
  const std::string hex = "1f8b08000000000002ff6360e0606260600061664626661656360048943ee512000000";
  std::vector<unsigned char> gz;
  for (std::size_t i = 0; i < hex.size(); i += 2) gz.push_back(static_cast<unsigned char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  write(d.path / "x-idx2-ubyte.gz", gz);
  if (!zlib_available()) {
    require_error([&] { data::read_idx(d.path / "x-idx2-ubyte.gz"); }, {"built without zlib"});
    return;
  }
  const tensor t = data::read_idx(d.path / "x-idx2-ubyte.gz");
  CHECK(t.shape() == shape{2, 3});
  CHECK(t.to_vector<std::uint8_t>() == std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6});
  gz.resize(gz.size() - 9);  // cut inside the stream
  write(d.path / "cut-idx2-ubyte.gz", gz);
  require_error([&] { data::read_idx(d.path / "cut-idx2-ubyte.gz"); }, {"cut-idx2-ubyte.gz is truncated"});
}
