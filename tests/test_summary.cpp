// TensorBoard event files (tools/summary.hpp): the records' framing read back by hand, each
// Event decoded by protoc (Debian's protobuf-compiler) against tests/data/tensorflow_event.proto
// (TensorFlow's field numbers), and the histogram's buckets against TensorFlow's limits; the
// summary ops (ops/summary_ops.hpp) run in sessions, their output decoded by protoc and
// their images by libpng (where the build found it: WEFT_TEST_PNG).
#include "support/helpers.hpp"

#include <weft/tools/progress.hpp>
#include <weft/tools/summary.hpp>

#include <cstdio>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#ifdef WEFT_TEST_PNG
#include <png.h>
#endif

using namespace weft;

namespace {

const std::filesystem::path sm_data = WEFT_TEST_DATA_DIR;

// protoc --decode=tensorflow.Event of one record: its text format.
std::string sm_decode(const std::string& record) {
  return test::protoc(record, "--decode=tensorflow.Event", sm_data, "tensorflow_event.proto");
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

// protoc --decode=tensorflow.Summary of a serialized Summary.
std::string sm_decode_summary(const std::string& summary) {
  return test::protoc(summary, "--decode=tensorflow.Summary", sm_data, "tensorflow_event.proto");
}

output sm_strings(graph& g, std::vector<std::string> v, std::vector<std::int64_t> dims) {
  return g.constant(tensor::from_vector(v, shape(dims)));
}
output sm_string(graph& g, const std::string& v) { return g.constant(tensor::scalar(std::string_view(v))); }

// The encoded_image_string of each Image value of a serialized Summary, in order (read with
// weft's wire reader, whose decoding tests/test_graph_def.cpp checks against protoc).
std::vector<std::string> sm_pngs(const std::string& summary) {
  std::vector<std::string> out;
  wire::reader r(summary, "Summary");
  for (wire::field f; r.next(f);) {
    wire::reader v(f.bytes, "Value");
    for (wire::field g; v.next(g);) {
      if (g.number != 4) continue;
      wire::reader i(g.bytes, "Image");
      for (wire::field h; i.next(h);)
        if (h.number == 4) out.emplace_back(h.bytes);
    }
  }
  return out;
}

#ifdef WEFT_TEST_PNG
// A PNG file's pixels as libpng decodes them (in its own format: channels as stored), with
// its size and channel count.
struct sm_image {
  std::uint32_t height = 0, width = 0;
  int channels = 0;
  std::vector<std::uint8_t> pixels;
};
sm_image sm_decode_png(const std::string& bytes) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  REQUIRE(png_image_begin_read_from_memory(&image, bytes.data(), bytes.size()));
  sm_image out;
  out.height = image.height, out.width = image.width;
  out.channels = static_cast<int>(PNG_IMAGE_SAMPLE_CHANNELS(image.format));
  out.pixels.resize(PNG_IMAGE_SIZE(image));
  REQUIRE(png_image_finish_read(&image, nullptr, out.pixels.data(), 0, nullptr));
  return out;
}
#endif

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
  if (!test::have_protoc()) {
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
  CHECK_THROWS_WITH(log.histogram("names", tensor::scalar("a"), 0),
                    Catch::Contains("'names'") && Catch::Contains("string") && Catch::Contains("real numbers only"));
  // Every real dtype: bfloat16 weights (examples/mnist_mlp --bf16 2 logs them), half, uint8.
  // Their values are read (a NaN among them is found) and each makes a record.
  const tensor bf16 = tensor::from_vector(std::vector<bfloat16>{bfloat16(1.5f), bfloat16(-0.25f)});
  const tensor bf16_nan = tensor::from_vector(std::vector<bfloat16>{bfloat16(1.0f), bfloat16(std::nanf(""))});
  CHECK_THROWS_WITH(log.histogram("w", bf16_nan, 0), Catch::Contains("NaN"));
  log.histogram("w", bf16, 1);
  log.histogram("h", tensor::from_vector(std::vector<half>{half(2.0f)}), 1);
  log.histogram("u", tensor::from_vector(std::vector<std::uint8_t>{1, 200}), 1);
  log.flush();
  CHECK(sm_records(log.path()).size() == 5);
  summary_writer other(dir.path, {.flush_seconds = 3600, .filename_suffix = ""});  // the same second: a file of its own
  CHECK(other.path() != log.path());
}

TEST_CASE("summaries: a histogram bucket found from the value's bits is the binary search's, at every edge") {
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
  // The lookup's own edges: each 64th of an octave (2^e (1 + s / 64)) over the limits' range
  // and beyond, its neighbours, both signs.
  for (int e = -45; e <= 70; ++e)
    for (int s = 0; s < 64; ++s) {
      const double edge = std::ldexp(1.0 + s / 64.0, e);
      for (double v : {edge, std::nextafter(edge, 0.0), std::nextafter(edge, HUGE_VAL)}) {
        values.push_back(v);
        values.push_back(-v);
      }
    }
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

TEST_CASE("summary ops: scalars, a histogram, an image, a tensor and their merge, decoded by protoc") {
  graph g;
  output scalars = g.op("ScalarSummary", {sm_strings(g, {"a", "b"}, {2}), g.constant(tensor::from_vector(std::vector<float>{1.5f, -2}))});
  output histo = g.op("HistogramSummary", {sm_string(g, "h"), g.constant(tensor::from_vector(std::vector<std::int32_t>{1, 2, 2}))},
                    {{"T", dtype::int32}});
  tensor pixels(dtype::uint8, shape({1, 2, 3, 1}));
  for (int i = 0; i < 6; ++i) pixels.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(40 * i);
  output image = g.op("ImageSummary", {sm_string(g, "img"), g.constant(pixels)}, {{"T", dtype::uint8}, {"max_images", std::int64_t{1}}});
  output tensor_summary = g.op("TensorSummaryV2", {sm_string(g, "t"), g.constant(tensor::from_vector(std::vector<double>{1, 2})),
                                                 sm_string(g, summary_proto::plugin_metadata("custom"))});
  output merged = g.op("MergeSummary", {scalars, histo, image, tensor_summary}, {{"N", std::int64_t{4}}});
  CHECK(g.at(merged.node).output_shape(0) == partial_shape(std::vector<std::int64_t>{}));
  session s(g, test::one_thread());
  auto out = s.run({}, {scalars, histo, image, tensor_summary, merged});
  std::string joined;
  for (int i = 0; i < 4; ++i) {
    REQUIRE(out[static_cast<std::size_t>(i)].dtype() == dtype::string);
    REQUIRE(out[static_cast<std::size_t>(i)].shape() == shape({}));
    joined += out[static_cast<std::size_t>(i)].flat<std::string>()[0];
  }
  // A Summary is one repeated field: the merge of distinct tags is the inputs one after another.
  CHECK(out[4].flat<std::string>()[0] == joined);
  if (!test::have_protoc()) {
    WARN("protoc is not installed (tools/install-deps installs it): the summaries are not decoded");
    return;
  }
  const std::string text = sm_decode_summary(out[4].flat<std::string>()[0]);
  CHECK_THAT(text, Catch::Contains("tag: \"a\"\n  simple_value: 1.5") && Catch::Contains("tag: \"b\"\n  simple_value: -2"));
  CHECK_THAT(text, Catch::Contains("tag: \"h\"") && Catch::Contains("min: 1") && Catch::Contains("max: 2") &&
                       Catch::Contains("num: 3") && Catch::Contains("sum: 5") && Catch::Contains("sum_squares: 9"));
  CHECK_THAT(text, Catch::Contains("tag: \"img/image\"") && Catch::Contains("height: 2") && Catch::Contains("width: 3") &&
                       Catch::Contains("colorspace: 1") && Catch::Contains("encoded_image_string: \"\\211PNG"));
  CHECK_THAT(text, Catch::Contains("tag: \"t\"") && Catch::Contains("plugin_name: \"custom\"") &&
                       Catch::Contains("dtype: DT_DOUBLE"));
}

TEST_CASE("summary ops: ImageSummary scales float pixels as TensorFlow does, and libpng reads the images") {
  // Two 2 x 2 RGB images: the first has no negative value (scaled by 255 / max), the second
  // has (scaled by 127 / max |x|, plus 128) and a NaN pixel (opaque red's RGB).
  const float nan = std::nanf("");
  std::vector<float> v{0, 0.5f, 1, 2, 2, 2, 0.25f, 1.5f, 0, 1, 1, 1,       // image 0: max 2
                       -4, 0, 4, 2, -2, 1, nan, 1, 1, 1, 3, -1};           // image 1: max |x| 4 (the NaN pixel ignored)
  graph g;
  auto images = g.constant(tensor::from_vector(v, shape({2, 2, 2, 3})));
  output op = g.op("ImageSummary", {sm_string(g, "x"), images}, {{"max_images", std::int64_t{3}}});
  const std::string summary = test::eval(g, op).flat<std::string>()[0];
  std::vector<std::uint8_t> want;
  for (std::size_t i = 0; i < 12; ++i) want.push_back(static_cast<std::uint8_t>(v[i] * (255.0f / 2)));
  for (std::size_t i = 12; i < 24; ++i)
    want.push_back(i >= 18 && i < 21 ? static_cast<std::uint8_t>(i == 18 ? 255 : 0) : static_cast<std::uint8_t>(v[i] * (127.0f / 4) + 128));
  CHECK(want[12] == 1);    // -4 -> 128 - 127
  CHECK(want[14] == 255);  // 4 -> 128 + 127
  const auto pngs = sm_pngs(summary);
  REQUIRE(pngs.size() == 2);  // max_images 3, two in the batch
  if (test::have_protoc())
    CHECK_THAT(sm_decode_summary(summary), Catch::Contains("tag: \"x/image/0\"") && Catch::Contains("tag: \"x/image/1\""));
#ifdef WEFT_TEST_PNG
  for (std::size_t k = 0; k < 2; ++k) {
    const auto img = sm_decode_png(pngs[k]);
    CHECK(img.height == 2);
    CHECK(img.width == 2);
    CHECK(img.channels == 3);
    CHECK(img.pixels == std::vector<std::uint8_t>(want.begin() + static_cast<std::ptrdiff_t>(12 * k),
                                                  want.begin() + static_cast<std::ptrdiff_t>(12 * (k + 1))));
  }
  // Every channel count, both compressions, a row longer than a stored block: what libpng reads back.
  std::mt19937 rng(5);
  for (int channels : {1, 2, 3, 4})
    for (auto mode : {png_compression::zlib, png_compression::stored}) {
      const std::int64_t h = 3, w = 17000;  // 51,000 to 204,000 bytes: several stored blocks
      std::vector<std::uint8_t> p(static_cast<std::size_t>(h * w * channels));
      for (auto& b : p) b = static_cast<std::uint8_t>(rng());
      const auto img = sm_decode_png(encode_png(p.data(), h, w, channels, mode));
      CHECK(img.height == h);
      CHECK(img.width == w);
      CHECK(img.channels == channels);
      CHECK(img.pixels == p);
    }
#else
  WARN("libpng was not found at build time (Debian's libpng-dev): the PNG images are not decoded");
#endif
}

TEST_CASE("summary ops: bad input is an error naming the node") {
  graph g;
  auto f = [&](std::vector<float> v, std::vector<std::int64_t> dims) { return g.constant(tensor::from_vector(v, shape(dims))); };
  CHECK_THROWS_WITH(g.op("ScalarSummary", {sm_strings(g, {"a", "b"}, {2}), f({1, 2, 3}, {3})}, {}, "scalars_mismatched"),
                    Catch::Contains("scalars_mismatched") && Catch::Contains("same shape") && Catch::Contains("[2]") && Catch::Contains("[3]"));
  CHECK_THROWS_WITH(g.op("ImageSummary", {sm_string(g, "i"), f({1, 2, 3, 4}, {1, 1, 2, 2})}, {}, "two_channels"),
                    Catch::Contains("two_channels") && Catch::Contains("1, 3 or 4 channels"));
  CHECK_THROWS_WITH(g.op("ImageSummary", {sm_string(g, "i"), f({1}, {1, 1, 1, 1})}, {{"max_images", std::int64_t{0}}}, "no_images"),
                    Catch::Contains("no_images") && Catch::Contains("max_images"));
  CHECK_THROWS_WITH(g.op("HistogramSummary", {sm_strings(g, {"a"}, {1}), f({1}, {1})}, {}, "vector_tag"),
                    Catch::Contains("vector_tag") && Catch::Contains("tag"));
  output nan = g.op("HistogramSummary", {sm_string(g, "h"), f({1, std::nanf("")}, {2})}, {}, "hist");
  CHECK_THROWS_WITH(test::eval(g, nan), Catch::Contains("hist") && Catch::Contains("NaN") && Catch::Contains("'h'"));
  output inf = g.op("HistogramSummary", {sm_string(g, "h"), f({HUGE_VALF}, {1})}, {}, "hist_inf");
  CHECK_THROWS_WITH(test::eval(g, inf), Catch::Contains("hist_inf") && Catch::Contains("infinity"));
  output a = g.op("ScalarSummary", {sm_string(g, "a"), f({1}, {})});
  output twice = g.op("MergeSummary", {a, a}, {{"N", std::int64_t{2}}}, "merge");
  CHECK_THROWS_WITH(test::eval(g, twice), Catch::Contains("merge") && Catch::Contains("duplicate tag 'a'"));
  output junk = g.op("MergeSummary", {sm_string(g, std::string("\x0a\x05" "ab", 4))}, {{"N", std::int64_t{1}}}, "junk");
  CHECK_THROWS_WITH(test::eval(g, junk), Catch::Contains("junk") && Catch::Contains("summary 0"));
  output empty = g.op("ImageSummary", {sm_string(g, "e"), f({}, {1, 0, 2, 1})}, {}, "empty_image");
  CHECK_THROWS_WITH(test::eval(g, empty), Catch::Contains("empty_image") && Catch::Contains("0 x 2 pixels"));
  // An empty batch is no image; NaN in a float image is bad_color, not an error.
  output none = g.op("ImageSummary", {sm_string(g, "n"), f({}, {0, 2, 2, 1})});
  CHECK(test::eval(g, none).flat<std::string>()[0].empty());
}

TEST_CASE("summaries: the writer's images and a summary op's output in an event file, decoded by protoc") {
  test::temp_dir dir("weft_summary_ops");
  graph g;
  auto loss = g.placeholder(dtype::float32, partial_shape(std::vector<std::int64_t>{}), "loss");
  output op = g.op("ScalarSummary", {sm_string(g, "loss"), loss});
  session s(g, test::one_thread());
  std::filesystem::path file;
  {
    summary_writer log(dir.path);
    file = log.path();
    log.summary(s.run({{loss, tensor::scalar(0.5f)}}, {op})[0], 7);
    tensor grey(dtype::uint8, shape({4, 5, 1}));  // one image, [h, w, c]
    for (int i = 0; i < 20; ++i) grey.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(i * 10);
    log.image("digit", grey, 8, 1);
    CHECK_THROWS_WITH(log.summary(std::string_view("\x0a\x09", 2), 9), Catch::Contains("weft::summary_writer::summary"));
    CHECK_THROWS_WITH(log.summary(tensor::scalar(1.0f), 9), Catch::Contains("string scalar") && Catch::Contains("float32"));
    CHECK_THROWS_WITH(log.image("bad", tensor(dtype::int32, shape({1, 2, 2, 1})), 9),
                      Catch::Contains("'bad'") && Catch::Contains("int32"));
  }
  const auto records = sm_records(file);
  REQUIRE(records.size() == 3);
  if (!test::have_protoc()) {
    WARN("protoc is not installed (tools/install-deps installs it): the events are not decoded");
    return;
  }
  CHECK_THAT(sm_decode(records[1]), Catch::Contains("step: 7") && Catch::Contains("tag: \"loss\"") &&
                                        Catch::Contains("simple_value: 0.5"));
  CHECK_THAT(sm_decode(records[2]), Catch::Contains("step: 8") && Catch::Contains("tag: \"digit/image\"") &&
                                        Catch::Contains("height: 4") && Catch::Contains("width: 5"));
}

namespace {
std::string sm_read_back(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  return out;
}
}  // namespace

TEST_CASE("progress: a bar of plain lines and one redrawn in place, timed by the test's clock") {
  double t = 100;
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  {
    progress_bar bar(4, {.out = f, .terminal = 0, .line_every = 2, .width = 8, .redraw_seconds = 0.1, .clock = [&] { return t; }});
    bar.start("epoch 1/2");
    t = 101, bar.step(10, "loss 1.0");  // no line: every 2 steps
    CHECK(bar.steps_per_second() == 1.0);
    CHECK(bar.eta_seconds() == 3.0);
    t = 102, bar.step(10, "loss 0.5");
    t = 104, bar.step(10), bar.step(10);
    CHECK(bar.end() == 4.0);  // the 4th step's line was the last: none again
    bar.start("epoch 2/2");
    t = 105, bar.step(0);
    CHECK(bar.end("done") == 1.0);  // one step of two: its line at the end
  }
  CHECK(sm_read_back(f) ==
        "epoch 1/2 [####....] 2/4  loss 0.5  1.0 steps/s  10 ex/s  ETA 0:02\n"
        "epoch 1/2 [########] 4/4  1.0 steps/s  10 ex/s  ETA 0:00\n"
        "epoch 2/2 [##......] 1/4  done  1.0 steps/s  ETA 0:03\n");
  std::fclose(f);

  // On a terminal: each redraw starts with '\r' and pads over a longer line before it; at most
  // one redraw per redraw_seconds, but always the last step's; a newline at the end.
  f = std::tmpfile();
  {
    progress_bar bar(3, {.out = f, .terminal = 1, .line_every = 100, .width = 3, .redraw_seconds = 1, .clock = [&] { return t; }});
    t = 0, bar.start("");
    t = 1, bar.step(0, "loss 10.000");
    t = 1.5, bar.step(0, "skipped");  // within a second of the last redraw
    t = 3, bar.step(0, "x");
    bar.end("x");
  }
  const std::string drawn = sm_read_back(f);
  std::fclose(f);
  const std::string first = "\r[#..] 1/3  loss 10.000  1.0 steps/s  ETA 0:02";
  const std::string last = "\r[###] 3/3  x  1.0 steps/s  ETA 0:00";
  const std::size_t pad = first.size() - last.size();
  CHECK(drawn == first + last + std::string(pad, ' ') + last + "\n");
  CHECK(drawn.find("skipped") == std::string::npos);

  // Unknown length: steps counted, no bar, no time left; an hour-long ETA with hours.
  progress_bar open(0, {.out = stdout, .terminal = 0, .clock = [&] { return t; }});
  t = 10, open.start("run");
  t = 12, open.step(4);
  CHECK(open.line() == "run step 1  0.5 steps/s  2 ex/s");
  progress_bar slow(10000, {.out = stdout, .terminal = 0, .clock = [&] { return t; }});
  t = 0, slow.start("");
  t = 2, slow.step();
  CHECK(slow.line() == "[........................] 1/10000  0.5 steps/s  ETA 5:33:18");
  CHECK_THROWS_WITH(progress_bar(-1), Catch::Contains("-1 steps"));
}

TEST_CASE("progress: a metrics logger's means feed the bar's text and the summaries every N steps") {
  test::temp_dir dir("weft_metrics");
  std::filesystem::path file;
  {
    summary_writer events(dir.path);
    file = events.path();
    metrics_logger m(&events, 2);
    m.add("loss", 1, 2);
    m.add("loss", 4, 1);
    m.add("accuracy", 0.5, 3);
    CHECK(m.mean("loss") == 2.0);  // (1 * 2 + 4 * 1) / 3
    CHECK(m.text() == "loss 2.0000  accuracy 0.5000");
    m.end_step(1);  // not a multiple of 2: nothing written
    m.add("loss", 0, 1);
    m.end_step(2);  // the means since the last write: loss (2 + 4 + 0) / 4, accuracy 0.5
    CHECK(m.mean("loss") == 1.5);
    m.add("loss", 3, 1);
    m.end_step(4);  // loss 3 alone; accuracy had no value since: not written
    m.scalar("test_accuracy", 0.875, 4);
    m.start_epoch();
    CHECK(std::isnan(m.mean("loss")));
    CHECK(std::isnan(m.mean("never")));
    CHECK(m.text().empty());
    CHECK(m.writer() == &events);
  }
  const auto records = sm_records(file);
  REQUIRE(records.size() == 5);  // the version, 2 scalars at step 2, 1 at step 4, the test accuracy
  if (test::have_protoc()) {
    CHECK_THAT(sm_decode(records[1]), Catch::Contains("step: 2") && Catch::Contains("tag: \"loss\"") && Catch::Contains("simple_value: 1.5"));
    CHECK_THAT(sm_decode(records[2]), Catch::Contains("step: 2") && Catch::Contains("tag: \"accuracy\"") && Catch::Contains("simple_value: 0.5"));
    CHECK_THAT(sm_decode(records[3]), Catch::Contains("step: 4") && Catch::Contains("tag: \"loss\"") && Catch::Contains("simple_value: 3"));
    CHECK_THAT(sm_decode(records[4]), Catch::Contains("tag: \"test_accuracy\"") && Catch::Contains("simple_value: 0.875"));
  }
  metrics_logger alone;  // no writer: means only
  alone.add("loss", 2);
  alone.end_step(100);
  CHECK(alone.mean("loss") == 2);
  CHECK_THROWS_WITH(metrics_logger(nullptr, 0), Catch::Contains("every is 0"));
}
