// TensorBoard event files (tools/summary.hpp): the records' framing read back by hand, each
// Event decoded by protoc (Debian's protobuf-compiler) against tests/data/tensorflow_event.proto
// (TensorFlow's field numbers), and the histogram's buckets against TensorFlow's limits.
#include "support/helpers.hpp"

#include <weft/tools/summary.hpp>

#include <cstdio>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

using namespace weft;

namespace {

const std::filesystem::path sm_data = WEFT_TEST_DATA_DIR;

bool sm_have_protoc() {
  static const bool have = std::system("protoc --version > /dev/null 2>&1") == 0;
  return have;
}

// protoc --decode=tensorflow.Event of one record: its text format.
std::string sm_decode(const std::string& record) {
  test::temp_dir dir("weft_summary_protoc");
  const auto in = dir.path / "event.pb";
  std::ofstream(in, std::ios::binary) << record;
  const std::string cmd = "protoc --decode=tensorflow.Event -I " + sm_data.string() + " " +
                          (sm_data / "tensorflow_event.proto").string() + " < " + in.string() + " 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  INFO("protoc printed: " << out);
  REQUIRE(status == 0);
  return out;
}

// The records of a TFRecord file, its framing checked by hand: u64 length, the masked
// CRC-32C of those 8 bytes, the data, the masked CRC-32C of the data.
std::vector<std::string> sm_records(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  const std::string bytes = s.str();
  auto u32 = [&](std::size_t at) {
    std::uint32_t v = 0;
    for (int b = 3; b >= 0; --b) v = (v << 8) | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(b)]);
    return v;
  };
  std::vector<std::string> out;
  for (std::size_t at = 0; at < bytes.size();) {
    REQUIRE(at + 12 <= bytes.size());
    std::uint64_t n = 0;
    for (int b = 7; b >= 0; --b) n = (n << 8) | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(b)]);
    CHECK(u32(at + 8) == masked_crc32c(bytes.data() + at, 8));
    REQUIRE(at + 12 + n + 4 <= bytes.size());
    out.emplace_back(bytes.substr(at + 12, n));
    CHECK(u32(at + 12 + n) == masked_crc32c(out.back().data(), out.back().size()));
    at += 12 + n + 4;
  }
  return out;
}

}  // namespace

TEST_CASE("summaries: an event file of scalars, a histogram, text and the graph, decoded by protoc") {
  test::temp_dir dir("weft_summary");
  std::filesystem::path file;
  {
    summary_writer log(dir.path / "run1");
    file = log.path();
    CHECK(file.filename().string().rfind("events.out.tfevents.", 0) == 0);
    log.scalar("loss", 0.25, 1);
    log.scalar("loss", 0.125, 2);
    log.histogram("w", tensor::from_vector(std::vector<float>{-1, 0, 0.5f, 0.5f, 3}), 2);
    log.text("notes", "lr 1e-3", 2);
    graph g;
    g.op("Neg", {g.placeholder(dtype::float32, partial_shape{2}, "x")}, {}, "y");
    log.graph(g);
  }  // closed: flushed
  const auto records = sm_records(file);
  REQUIRE(records.size() == 6);
  if (!sm_have_protoc()) {
    WARN("protoc is not installed (tools/install-deps installs it): the events are not decoded");
    return;
  }
  const std::string first = sm_decode(records[0]);
  CHECK_THAT(first, Catch::Contains("file_version: \"brain.Event:2\"") && Catch::Contains("wall_time: "));
  CHECK_THAT(sm_decode(records[1]), Catch::Contains("step: 1") && Catch::Contains("tag: \"loss\"") &&
                                        Catch::Contains("simple_value: 0.25"));
  CHECK_THAT(sm_decode(records[2]), Catch::Contains("step: 2") && Catch::Contains("simple_value: 0.125"));
  const std::string h = sm_decode(records[3]);
  CHECK_THAT(h, Catch::Contains("tag: \"w\"") && Catch::Contains("min: -1") && Catch::Contains("max: 3") &&
                    Catch::Contains("num: 5") && Catch::Contains("sum: 3") && Catch::Contains("sum_squares: 10.5"));
  // Buckets: the first limit above each value among TensorFlow's (0, then 1e-12 * 1.1^k
  // and their negatives), worked out here; each run of empty buckets is one entry of count
  // 0, as TensorFlow writes them, the last one ending at DBL_MAX.
  auto limit_above = [](double v) {
    double l = 1e-12;
    if (v < 0) {
      while (l * 1.1 < -v) l *= 1.1;  // the negative limit nearest above v is -l
      return -l;
    }
    while (l <= v) l *= 1.1;
    return l;
  };
  std::vector<double> limits, counts;
  std::istringstream lines(h);
  for (std::string line; std::getline(lines, line);) {
    if (auto p = line.find("bucket_limit: "); p != std::string::npos) limits.push_back(std::stod(line.substr(p + 14)));
    else if (auto q = line.find("bucket: "); q != std::string::npos) counts.push_back(std::stod(line.substr(q + 8)));
  }
  REQUIRE(limits.size() == 9);  // empty, -1's, empty, 0's, empty, 0.5's, empty, 3's, empty
  REQUIRE(counts.size() == 9);
  CHECK(counts == std::vector<double>{0, 1, 0, 1, 0, 2, 0, 1, 0});
  CHECK(limits[1] == Approx(limit_above(-1.0)).epsilon(1e-9));
  CHECK(limits[2] == 0.0);  // the run of empty buckets up to 0's bucket ends at the limit 0
  CHECK(limits[3] == Approx(limit_above(0.0)).epsilon(1e-9));
  CHECK(limits[5] == Approx(limit_above(0.5)).epsilon(1e-9));
  CHECK(limits[7] == Approx(limit_above(3.0)).epsilon(1e-9));
  CHECK(limits[8] == Approx(std::numeric_limits<double>::max()));
  CHECK(limits[0] == Approx(limit_above(-1.0) * 1.1).epsilon(1e-9));  // the limit just below -1's
  CHECK_THAT(sm_decode(records[4]), Catch::Contains("plugin_name: \"text\"") && Catch::Contains("string_val: \"lr 1e-3\"") &&
                                        Catch::Contains("dtype: DT_STRING"));
  // The graph event holds a GraphDef: decoded again as one.
  const std::string graph_event = sm_decode(records[5]);
  CHECK_THAT(graph_event, Catch::Contains("graph_def: "));
}

TEST_CASE("summaries: records reach the file at flush, and errors name the tag") {
  test::temp_dir dir("weft_summary_flush");
  summary_writer log(dir.path, {.flush_seconds = 3600, .filename_suffix = ""});
  CHECK(sm_records(log.path()).size() == 1);  // the file version, flushed at once
  log.scalar("a", 1, 0);
  CHECK(sm_records(log.path()).size() == 1);  // buffered
  log.flush();
  CHECK(sm_records(log.path()).size() == 2);
  CHECK_THROWS_WITH(log.histogram("h", tensor::from_vector(std::vector<float>{1, std::nanf("")}), 0), Catch::Contains("NaN"));
  CHECK_THROWS_WITH(log.histogram("names", tensor::from_vector(std::vector<std::uint8_t>{1}), 0),
                    Catch::Contains("'names'") && Catch::Contains("uint8"));
  summary_writer other(dir.path, {.flush_seconds = 3600, .filename_suffix = ""});  // the same second: a file of its own
  CHECK(other.path() != log.path());
}

TEST_CASE("summaries: a histogram bucket found from the exponent is the binary search's, at every edge") {
  const auto& limits = default_histogram_limits();
  REQUIRE(limits.size() > 1000);
  auto naive = [&](double v) {
    const auto i = static_cast<std::size_t>(std::upper_bound(limits.begin(), limits.end(), v) - limits.begin());
    return std::min(i, limits.size() - 1);
  };
  std::vector<double> values{0.0, -0.0, 1e-12, -1e-12, 5e-13, -5e-13, 1e-300, -1e-300, 4.9e-324, -4.9e-324, 1e20, -1e20, 1e25,
                             -1e25, std::numeric_limits<double>::max(), -std::numeric_limits<double>::max(),
                             std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  for (double l : limits)  // every limit, and its neighbours
    for (double v : {l, std::nextafter(l, 0.0), std::nextafter(l, l < 0 ? -HUGE_VAL : HUGE_VAL)}) values.push_back(v);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> exponent(-320, 320);
  for (int i = 0; i < 20000; ++i) values.push_back((i % 2 ? -1 : 1) * std::pow(10.0, exponent(rng)));
  std::size_t wrong = 0;
  for (double v : values)
    if (histogram_builder::bucket_of(v) != naive(v)) {
      if (++wrong < 5) UNSCOPED_INFO("value " << v << ": " << histogram_builder::bucket_of(v) << " against " << naive(v));
    }
  CHECK(wrong == 0);
}
