// Checkpoints (runtime/checkpoint.hpp): CRC-32C against its published check value, files
// that round-trip every dtype, every corruption and truncation caught, and a saver that
// keeps the last N files and restores all variables or none.
#include "support/helpers.hpp"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace weft;
using namespace weft::test;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void spill(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

}  // namespace

TEST_CASE("checkpoint: CRC-32C gives the published check value and continues across pieces", "[checkpoint]") {
  const std::string s = "123456789";
  CHECK(crc32c(s.data(), s.size()) == 0xE3069283u);
  CHECK(crc32c(s.data(), 0) == 0u);
  CHECK(crc32c(s.data() + 4, 5, crc32c(s.data(), 4)) == 0xE3069283u);
  // 32 zero bytes: the iSCSI test vector (RFC 3720, B.4).
  const std::vector<unsigned char> zeros(32, 0);
  CHECK(crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);
}

TEST_CASE("checkpoint: files round-trip tensors of every kind and leave no temporary file", "[checkpoint]") {
  temp_dir d("weft_ckpt_test");
  const std::vector<std::pair<std::string, tensor>> tensors{
      {"w", tensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6})},
      {"scalar", tensor::scalar(std::int64_t{-7})},
      {"empty", tensor(dtype::float64, shape{0, 4})},
      {"half", tensor::of<half>({2}, {half(0.5f), half(-2.0f)})},
      {"flags", tensor::from_vector(std::vector<bool>{true, false, true}, shape{3})},
  };
  const fs::path file = d.path / "a.ckpt";
  write_checkpoint(file, tensors);
  write_checkpoint(file, tensors);  // over an existing file
  auto back = read_checkpoint(file);
  REQUIRE(back.size() == tensors.size());
  for (std::size_t i = 0; i < back.size(); ++i) {
    INFO(tensors[i].first);
    CHECK(back[i].first == tensors[i].first);
    CHECK(back[i].second.dtype() == tensors[i].second.dtype());
    CHECK(back[i].second.shape() == tensors[i].second.shape());
    CHECK(std::memcmp(back[i].second.raw_data(), tensors[i].second.raw_data(), tensors[i].second.bytes()) == 0);
  }
  // The file's length from the format: "WEFTCKPT", version and count, one index entry per
  // tensor (name length, name, dtype, rank, dims, offset, size, CRC), the index CRC, the data.
  std::size_t length = 8 + 4 + 4 + 4;
  for (const auto& [name, t] : tensors) length += 4 + name.size() + 1 + 1 + 8 * static_cast<std::size_t>(t.rank()) + 8 + 8 + 4 + t.bytes();
  CHECK(slurp(file).size() == length);
  CHECK(std::distance(fs::directory_iterator(d.path), fs::directory_iterator{}) == 1);  // no temporary left
  require_error([&] { write_checkpoint(file, {{"x", tensor::scalar(1.0f)}, {"x", tensor::scalar(2.0f)}}); },
                {"names must be distinct"});
  require_error([&] { write_checkpoint(d.path / "missing_dir" / "b.ckpt", tensors); },
                {"cannot create", "missing_dir"});
  CHECK(read_checkpoint(file).size() == tensors.size());  // the failed writes changed nothing
}

TEST_CASE("checkpoint: every truncation, flipped byte and appended byte is caught", "[checkpoint]") {
  temp_dir d("weft_ckpt_test");
  const fs::path file = d.path / "c.ckpt", bad = d.path / "bad.ckpt";
  write_checkpoint(file, {{"a", tensor::of<float>({3}, {1, 2, 3})}, {"bb", tensor::of<std::int32_t>({2}, {7, 8})}});
  const std::string good = slurp(file);
  for (std::size_t n = 0; n < good.size(); ++n) {
    INFO("truncated to " << n << " of " << good.size() << " bytes");
    spill(bad, good.substr(0, n));
    require_error([&] { read_checkpoint(bad); }, {"bad.ckpt is corrupt"});
  }
  for (std::size_t i = 0; i < good.size(); ++i) {
    INFO("byte " << i << " flipped");
    std::string flipped = good;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x20);
    spill(bad, flipped);
    require_error([&] { read_checkpoint(bad); }, {"bad.ckpt is corrupt"});
  }
  spill(bad, good + "x");
  require_error([&] { read_checkpoint(bad); }, {"1 bytes after the last tensor"});
  std::string data_flip = good;
  data_flip[good.size() - 1] = static_cast<char>(data_flip[good.size() - 1] ^ 1);
  spill(bad, data_flip);
  require_error([&] { read_checkpoint(bad); }, {"tensor 'bb' fails its checksum"});
  require_error([&] { read_checkpoint(d.path / "none.ckpt"); }, {"cannot open the checkpoint"});
}

TEST_CASE("checkpoint: a saver keeps the last N files and restores all variables or none", "[checkpoint]") {
  temp_dir d("weft_ckpt_test");
  graph g;
  auto w = g.variable(dtype::float32, {2}, node_options("w")).out(0);
  auto n = g.variable(dtype::int64, shape{}, node_options("n")).out(0);
  auto w_in = g.placeholder(dtype::float32, {2}, node_options("w_in")).out(0);
  auto n_in = g.placeholder(dtype::int64, shape{}, node_options("n_in")).out(0);
  auto set_w = g.op("Assign", {w, w_in}).out(0);
  auto set_n = g.op("Assign", {n, n_in}).out(0);
  saver sv(g, variables_of(g), {.keep = 2});
  session s(g, one_thread());
  auto set = [&](float a, float b, std::int64_t k) {
    s.run({{w_in, tensor::of<float>({2}, {a, b})}, {n_in, tensor::scalar(k)}}, {}, {set_w, set_n});
  };
  auto values = [&] {
    auto got = s.run({}, {w, n});
    return std::pair{got[0].to_vector<float>(), got[1].scalar_value<std::int64_t>()};
  };
  const fs::path prefix = d.path / "model" / "ckpt";
  for (std::int64_t k = 1; k <= 4; ++k) {
    set(static_cast<float>(k), -static_cast<float>(k), k);
    CHECK(sv.save(s, prefix, k) == fs::path(prefix.string() + "-" + std::to_string(k) + ".ckpt"));
  }
  auto kept = saver::checkpoints(prefix);
  REQUIRE(kept.size() == 2);
  CHECK(kept[0].first == 3);
  CHECK(kept[1].first == 4);
  CHECK(saver::latest(prefix)->first == 4);
  CHECK_FALSE(saver::latest(d.path / "other").has_value());

  sv.restore(s, kept[0].second);
  CHECK(values() == std::pair{std::vector<float>{3, -3}, std::int64_t{3}});

  // A corrupt file, one that lacks a variable, and one holding another shape: errors that
  // change no variable.
  std::string bytes = slurp(kept[1].second);
  bytes[bytes.size() - 1] = static_cast<char>(bytes[bytes.size() - 1] ^ 4);
  spill(d.path / "corrupt.ckpt", bytes);
  require_error([&] { sv.restore(s, d.path / "corrupt.ckpt"); }, {"corrupt.ckpt is corrupt", "fails its checksum"});
  write_checkpoint(d.path / "partial.ckpt", {{"w", tensor::of<float>({2}, {9, 9})}});
  require_error([&] { sv.restore(s, d.path / "partial.ckpt"); }, {"has no tensor for variable 'n'"});
  write_checkpoint(d.path / "shape.ckpt", {{"w", tensor::of<float>({3}, {9, 9, 9})}, {"n", tensor::scalar(std::int64_t{9})}});
  require_error([&] { sv.restore(s, d.path / "shape.ckpt"); }, {"holds 'w' as float32[3], but the variable is float32[2]"});
  write_checkpoint(d.path / "dtype.ckpt", {{"w", tensor::of<float>({2}, {9, 9})}, {"n", tensor::scalar(9.0)}});
  require_error([&] { sv.restore(s, d.path / "dtype.ckpt"); }, {"holds 'n' as float64[], but the variable is int64[]"});
  CHECK(values() == std::pair{std::vector<float>{3, -3}, std::int64_t{3}});

  // A fresh session restores uninitialized variables.
  session fresh(g, one_thread());
  sv.restore(fresh, saver::latest(prefix)->second);
  CHECK(fresh.run({}, {w}).at(0).to_vector<float>() == std::vector<float>{4, -4});
}

TEST_CASE("checkpoint: Save and Restore ops write and read a file as graph nodes", "[checkpoint]") {
  temp_dir d("weft_ckpt_ops_test");
  graph g;
  auto name = g.placeholder(dtype::string, partial_shape({}), node_options("name")).out(0);
  auto a = g.constant(tensor::of<float>({2, 2}, {1, 2, 3, 4})).out(0);
  auto b = g.constant(tensor::scalar(std::int32_t{7})).out(0);
  auto e = g.constant(tensor(dtype::float64, shape{0, 3})).out(0);
  g.op("Save", {name, a, b, e}, {{"tensor_names", std::vector<std::string>{"a", "b", "empty"}}}, node_options("save"));
  // Restore reads two of the three, in another order; shapes may be partial.
  const node& r = g.op("Restore", {name},
                       {{"tensor_names", std::vector<std::string>{"b", "a"}},
                        {"dtypes", std::vector<dtype>{dtype::int32, dtype::float32}},
                        {"shapes", std::vector<partial_shape>{partial_shape({}), partial_shape({unknown_dim, 2})}}},
                       node_options("restore"));
  CHECK(r.num_outputs() == 2);
  CHECK(r.output_dtype(1) == dtype::float32);
  CHECK(r.output_shape(1) == partial_shape({unknown_dim, 2}));
  const output rb = r.out(0), ra = r.out(1);
  session s(g, one_thread());
  const fs::path file = d.path / "ops.ckpt";
  s.run({{name, cpu::filename_tensor(file)}}, {}, {std::string("save")});
  // The file is the format's: read_checkpoint sees all three tensors.
  auto stored = read_checkpoint(file);
  REQUIRE(stored.size() == 3);
  CHECK(stored[2].first == "empty");
  CHECK(stored[2].second.shape() == shape{0, 3});
  auto got = s.run({{name, cpu::filename_tensor(file)}}, {rb, ra});
  CHECK(got[0].scalar_value<std::int32_t>() == 7);
  CHECK(got[1].to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  // Errors name the node: a missing file, a name not in it, another dtype, a bad file name.
  require_error([&] { s.run({{name, cpu::filename_tensor(d.path / "none.ckpt")}}, {ra}); },
                {"node 'restore' (Restore)", "cannot open the checkpoint"});
  write_checkpoint(d.path / "other.ckpt", {{"a", tensor::of<float>({2, 2}, {0, 0, 0, 0})}, {"b", tensor::scalar(1.0)}});
  require_error([&] { s.run({{name, cpu::filename_tensor(d.path / "other.ckpt")}}, {ra}); },
                {"node 'restore' (Restore)", "holds 'b' as float64[], but the variable is int32[]"});
  require_error([&] { s.run({{name, tensor::scalar("")}}, {}, {std::string("save")}); }, {"node 'save' (Save)", "non-empty path"});
  // Build-time checks: names against tensors, repeated names, the file name's rank.
  require_error([&] { g.op("Save", {name, a, b}, {{"tensor_names", std::vector<std::string>{"a"}}}); },
                {"Save", "1 tensor_names for 2 tensors"});
  require_error([&] { g.op("Save", {name, a, b}, {{"tensor_names", std::vector<std::string>{"a", "a"}}}); },
                {"Save", "distinct and non-empty", "'a'"});
  auto names = g.constant(tensor::from_vector(std::vector<std::string>{"a", "b"})).out(0);
  require_error([&] { g.op("Save", {names, a}, {{"tensor_names", std::vector<std::string>{"a"}}}); },
                {"Save", "filename must have rank 0"});
  auto bytes = g.constant(tensor::scalar(std::uint8_t{65})).out(0);
  require_error([&] { g.op("Save", {bytes, a}, {{"tensor_names", std::vector<std::string>{"a"}}}); },
                {"Save", "input 0 'filename' has dtype uint8 but the op requires string"});
}
