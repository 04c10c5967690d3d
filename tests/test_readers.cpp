// Readers and decoders (runtime/records.hpp, runtime/reader.hpp, ops/io_ops.hpp,
// ops/parsing_ops.hpp): TFRecord against bytes made by an independent encoder (Python's
// struct and a bitwise CRC-32C; gzip from Python's gzip module), round trips, every
// truncation and a flipped byte caught with the file and offset named; fixed-length records
// with header, footer and hop; text lines with CRLF and a header; whole files; the end of
// the input through a closed file-name queue; DecodeRaw and DecodeCSV against hand values.
#include "support/helpers.hpp"

#include <chrono>
#include <fstream>
#include <future>
#include <thread>

using namespace weft;
using namespace weft::test;
namespace fs = std::filesystem;

namespace readers_test {

std::string from_hex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  return out;
}
void put_file(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes; }
std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The records "hello" and "" in TFRecord framing, and the same gzip-compressed, made by
// Python (struct.pack('<Q'), a bitwise CRC-32C, masked; gzip.GzipFile(mtime=0)).
const std::string tfrecord_hello =
    from_hex("0500000000000000eab2043e68656c6c6fbb1f1c19000000000000000029039807d8ea82a2");
const std::string tfrecord_hello_gzip = from_hex(
    "1f8b08000000000002ff63658080579b58ec32527372f277cbcb4842c518349967b0df78d5b40800b3afd7f825000000");
// "id,name\r\n1,one\n2,\"two, too\"\n3," gzip-compressed by Python.
const std::string csv_gzip = from_hex(
    "1f8b08000000000002ffcb4cd1c94bcc4de5e532d4c9cf4be532d2512a29cfd75128c9cf57e232d60100fecbb3b71e000000");

// A graph reading files through a reader: the file names fed, enqueued and closed; reads
// of one record and of up to 3.
struct read_graph {
  graph g;
  graph_queue files;
  graph_reader reader;
  output names, key, value, keys, values, produced, done;
  std::string put, close;
  explicit read_graph(reader_spec spec)
      : files(g, {.component_types = {dtype::string}, .shapes = {partial_shape({})}}, "files"), reader(g, std::move(spec)) {
    names = g.placeholder(dtype::string, partial_shape({unknown_dim}), "names").out(0);
    put = files.enqueue_many({names}, "put").name();
    close = files.close(false, "close").name();
    std::tie(key, value) = reader.read(files, "read");
    std::tie(keys, values) = reader.read_up_to(files, 3, "read_up_to");
    produced = reader.records_produced();
    done = reader.files_done();
  }
  void feed(session& s, const std::vector<std::string>& paths, bool and_close = true) {
    s.run({{names, tensor::from_vector(paths)}}, {}, {put});
    if (and_close) s.run({close});
  }
};

std::vector<std::string> read_all(session& s, read_graph& r) {
  std::vector<std::string> out;
  for (;;) {
    try {
      for (auto& v : s.run({}, {r.values})[0].to_vector<std::string>()) out.push_back(v);
    } catch (const error& e) {
      REQUIRE(e.code() == error_code::out_of_range);
      return out;
    }
  }
}

}  // namespace readers_test

using namespace readers_test;

TEST_CASE("readers: TFRecord framing matches bytes made by an independent encoder", "[readers]") {
  temp_dir d("weft_readers_test");
  CHECK(masked_crc32c("", 0) == 0xa282ead8u);  // crc32c("") = 0, masked
  std::string bytes;
  append_tfrecord(bytes, "hello");
  append_tfrecord(bytes, "");
  CHECK(bytes == tfrecord_hello);
  write_tfrecords(d.path / "w.tfrecord", {"hello", ""});
  CHECK(file_bytes(d.path / "w.tfrecord") == tfrecord_hello);
  put_file(d.path / "py.tfrecord", tfrecord_hello);
  CHECK(read_records(d.path / "py.tfrecord", {}) == std::vector<std::string>{"hello", ""});
  if (zlib_available()) {
    put_file(d.path / "py.tfrecord.gz", tfrecord_hello_gzip);
    record_format gz;
    gz.compressed = compression::gzip;
    CHECK(read_records(d.path / "py.tfrecord.gz", gz) == std::vector<std::string>{"hello", ""});
    // Written here, compressed, read back; and two gzip members one after the other.
    write_tfrecords(d.path / "w.gz", {"a", std::string(100000, 'x')}, compression::gzip);
    CHECK(read_records(d.path / "w.gz", gz) == std::vector<std::string>{"a", std::string(100000, 'x')});
    put_file(d.path / "two.gz", tfrecord_hello_gzip + tfrecord_hello_gzip);
    CHECK(read_records(d.path / "two.gz", gz).size() == 4);
    record_format z;
    z.compressed = compression::zlib;
    write_tfrecords(d.path / "w.z", {"zz"}, compression::zlib);
    CHECK(read_records(d.path / "w.z", z) == std::vector<std::string>{"zz"});
    // A truncated gzip stream and bytes that are not gzip.
    put_file(d.path / "cut.gz", tfrecord_hello_gzip.substr(0, 20));
    require_error([&] { read_records(d.path / "cut.gz", gz); }, {"cut.gz is truncated", "gzip stream"});
    put_file(d.path / "not.gz", tfrecord_hello);
    require_error([&] { read_records(d.path / "not.gz", gz); }, {"not.gz is not valid gzip data"});
  } else {
    WARN("built without zlib: the gzip cases are skipped");
    put_file(d.path / "py.tfrecord.gz", tfrecord_hello_gzip);
    record_format gz;
    gz.compressed = compression::gzip;
    require_error([&] { read_records(d.path / "py.tfrecord.gz", gz); }, {"built without zlib"});
  }
}

TEST_CASE("readers: every truncation and a flipped byte of a TFRecord file is caught, naming the file and offset", "[readers]") {
  temp_dir d("weft_readers_test");
  const fs::path bad = d.path / "bad.tfrecord";
  for (std::size_t n = 1; n < tfrecord_hello.size(); ++n) {
    if (n == 21) continue;  // the first record whole: a valid file of one record
    INFO("truncated to " << n);
    put_file(bad, tfrecord_hello.substr(0, n));
    require_error([&] { read_records(bad, {}); }, {"bad.tfrecord is truncated", "at offset"});
  }
  put_file(bad, tfrecord_hello.substr(0, 21));
  CHECK(read_records(bad, {}) == std::vector<std::string>{"hello"});
  std::string flipped = tfrecord_hello;
  flipped[14] ^= 1;  // in "hello"
  put_file(bad, flipped);
  require_error([&] { read_records(bad, {}); }, {"bad.tfrecord is corrupt: the data of the record at offset 0 fails its checksum"});
  flipped = tfrecord_hello;
  flipped[25] ^= 1;  // the second record's length (it starts at 21)
  put_file(bad, flipped);
  require_error([&] { read_records(bad, {}); }, {"the length of the record at offset 21 fails its checksum"});
  require_error([&] { read_records(d.path / "missing", {}); }, {"cannot open the input file", "missing"});
}

TEST_CASE("readers: ReaderRead takes file names from a queue and ends with out_of_range", "[readers]") {
  temp_dir d("weft_readers_test");
  write_tfrecords(d.path / "a", {"a0", "a1", "a2", "a3"});
  write_tfrecords(d.path / "b", {});
  write_tfrecords(d.path / "c", {"c0"});
  read_graph r({});
  session s(r.g, one_thread());
  r.feed(s, {(d.path / "a").string(), (d.path / "b").string(), (d.path / "c").string()});
  auto first = s.run({}, {r.key, r.value});
  CHECK(first[0].scalar_value<std::string>() == (d.path / "a").string() + ":0");
  CHECK(first[1].scalar_value<std::string>() == "a0");
  // Up to 3: what is left of a; then the empty file and c; then the end.
  CHECK(s.run({}, {r.values})[0].to_vector<std::string>() == std::vector<std::string>{"a1", "a2", "a3"});
  auto last = s.run({}, {r.keys, r.values});
  CHECK(last[0].to_vector<std::string>() == std::vector<std::string>{(d.path / "c").string() + ":0"});
  CHECK(last[1].to_vector<std::string>() == std::vector<std::string>{"c0"});
  std::string message;
  try {
    s.run({}, {r.value});
  } catch (const error& e) {
    CHECK(e.code() == error_code::out_of_range);
    message = e.what();
  }
  CHECK(message.find("reader 'reader': no more files (queue 'files' is closed and empty) after 5 records") != std::string::npos);
  CHECK(s.run({}, {r.produced})[0].scalar_value<std::int64_t>() == 5);
  CHECK(s.run({}, {r.done})[0].scalar_value<std::int64_t>() == 3);
}

TEST_CASE("readers: a bad file fails the read that meets it, the reader goes on with the next file", "[readers]") {
  temp_dir d("weft_readers_test");
  put_file(d.path / "bad", tfrecord_hello.substr(0, 30));  // "hello", then a cut record
  write_tfrecords(d.path / "good", {"g"});
  read_graph r({});
  session s(r.g, one_thread());
  r.feed(s, {(d.path / "bad").string(), (d.path / "missing").string(), (d.path / "good").string()});
  CHECK(s.run({}, {r.value})[0].scalar_value<std::string>() == "hello");
  require_error([&] { s.run({}, {r.value}); }, {"node 'read' (ReaderRead)", "bad is truncated: a record's header at offset 21 needs 12 bytes, 9 are left"});
  require_error([&] { s.run({}, {r.value}); }, {"cannot open the input file", "missing"});
  CHECK(s.run({}, {r.value})[0].scalar_value<std::string>() == "g");
}

TEST_CASE("readers: a read waits for file names, holding no thread, and a timeout stops it", "[readers]") {
  temp_dir d("weft_readers_test");
  write_tfrecords(d.path / "a", {"x"});
  read_graph r({});
  session_options o = one_thread();
  o.inter_op_threads = 2;
  session s(r.g, o);
  run_options timed;
  timed.timeout = std::chrono::milliseconds(30);
  require_error([&] { s.run({}, {r.value}, {}, timed); }, {"timed out"});
  r.feed(s, {(d.path / "a").string()}, false);
  CHECK(s.run({}, {r.value}, {}, timed)[0].scalar_value<std::string>() == "x");
}

TEST_CASE("readers: a read waiting behind another leaves the line when its step times out", "[readers]") {
  temp_dir d("weft_readers_test");
  write_tfrecords(d.path / "a", {"first"});
  read_graph r({});
  session_options o = one_thread();
  o.inter_op_threads = 2;
  session s(r.g, o);
  // The first read waits for a file name; a second, in line behind it, times out.
  auto first = std::async(std::launch::async, [&] { return s.run({}, {r.value})[0].scalar_value<std::string>(); });
  wait_until([&] { return waiting_dequeues(s, "files") == 1; }, "the first read to wait for a file name");
  run_options timed;
  timed.timeout = std::chrono::milliseconds(30);
  const auto t0 = std::chrono::steady_clock::now();
  require_error([&] { s.run({}, {r.value}, {}, timed); }, {"timed out"});
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  r.feed(s, {(d.path / "a").string()});
  CHECK(first.get() == "first");
  require_error([&] { s.run({}, {r.value}); }, {"no more files"});
}

TEST_CASE("readers: fixed-length records with a header, a footer and a hop, decoded by DecodeRaw", "[readers]") {
  temp_dir d("weft_readers_test");
  // An IDX-like file: a 4-byte header, three records of 2 bytes, a 1-byte footer.
  put_file(d.path / "f", std::string("HEAD") + std::string("\x01\x02\x03\x04\x05\x06", 6) + "F");
  reader_spec spec;
  spec.kind = reader_kind::fixed_length;
  spec.header_bytes = 4;
  spec.record_bytes = 2;
  spec.footer_bytes = 1;
  read_graph r(spec);
  auto pixels = r.g.op("DecodeRaw", {r.values}, {{"out_type", dtype::uint8}}).out(0);
  auto shorts = r.g.op("DecodeRaw", {r.values}, {{"out_type", dtype::int16}, {"little_endian", false}}).out(0);
  session s(r.g, one_thread());
  r.feed(s, {(d.path / "f").string()});
  auto got = s.run({}, {pixels, shorts});
  CHECK(got[0].shape() == shape{3, 2});
  CHECK(got[0].to_vector<std::uint8_t>() == std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6});
  CHECK(got[1].to_vector<std::int16_t>() == std::vector<std::int16_t>{0x0102, 0x0304, 0x0506});
  // A hop of 3 over records of 2 (overlapping windows are hop < record).
  record_format hop;
  hop.type = record_format::kind::fixed_length;
  hop.record_bytes = 2;
  hop.hop_bytes = 3;
  put_file(d.path / "h", "abcdefgh");
  CHECK(read_records(d.path / "h", hop) == std::vector<std::string>{"ab", "de", "gh"});
  hop.hop_bytes = 1;
  put_file(d.path / "h", "abcd");
  require_error([&] { read_records(d.path / "h", hop); }, {"a record of 2 bytes at offset 3 runs past the data's end at 4"});
  // A file shorter than header and footer, and a partial last record.
  record_format f;
  f.type = record_format::kind::fixed_length;
  f.header_bytes = 4;
  f.record_bytes = 4;
  put_file(d.path / "s", "abc");
  require_error([&] { read_records(d.path / "s", f); }, {"has 3 bytes, fewer than its header (4) and footer (0)"});
  put_file(d.path / "s", "HEADabcdef");
  require_error([&] { read_records(d.path / "s", f); }, {"s: a record of 4 bytes at offset 8 runs past the data's end at 10"});
}

TEST_CASE("readers: text lines (CRLF, a header skipped, a last line without newline) decoded by DecodeCSV", "[readers]") {
  temp_dir d("weft_readers_test");
  const std::string text = "id,name\r\n1,one\n2,\"two, too\"\n3,";
  reader_spec spec;
  spec.kind = reader_kind::text_line;
  spec.skip_header_lines = 1;
  std::string file = (d.path / "t.csv").string();
  if (zlib_available()) {
    spec.compression_type = "GZIP";
    put_file(file, csv_gzip);
  } else {
    put_file(file, text);
  }
  read_graph r(spec);
  auto ids = r.g.constant(tensor::of<std::int64_t>({1}, {0})).out(0);
  auto fallback = r.g.constant(tensor::from_vector(std::vector<std::string>{"none"})).out(0);
  const node& csv = r.g.op("DecodeCSV", {r.values, ids, fallback}, {{"OUT_TYPE", std::vector<dtype>{dtype::int64, dtype::string}}});
  session s(r.g, one_thread());
  r.feed(s, {file});
  auto got = s.run({}, {csv.out(0), csv.out(1)});
  CHECK(got[0].to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 2, 3});
  CHECK(got[1].to_vector<std::string>() == std::vector<std::string>{"one", "two, too", "none"});
  // Whole files: one record each, keyed by the file's name.
  put_file(d.path / "w", text);
  record_format whole;
  whole.type = record_format::kind::whole_file;
  CHECK(read_records(d.path / "w", whole) == std::vector<std::string>{text});
  record_format lines;
  lines.type = record_format::kind::text_line;
  CHECK(read_records(d.path / "w", lines) == std::vector<std::string>{"id,name", "1,one", "2,\"two, too\"", "3,"});
  put_file(d.path / "e", "");
  CHECK(read_records(d.path / "e", lines).empty());
  put_file(d.path / "e", "\n\n");
  CHECK(read_records(d.path / "e", lines) == std::vector<std::string>{"", ""});
}

TEST_CASE("decoders: DecodeRaw and DecodeCSV against hand values, and their errors", "[readers]") {
  graph g;
  auto raw = g.constant(tensor::from_vector(std::vector<std::string>{std::string("\x00\x00\x80\x3f", 4), std::string("\x00\x00\x00\xc0", 4)}))
                 .out(0);
  auto floats = g.op("DecodeRaw", {raw}, {{"out_type", dtype::float32}}).out(0);
  auto flags = g.op("DecodeRaw", {g.constant(tensor::scalar(std::string("\x00\x02\x01", 3))).out(0)}, {{"out_type", dtype::boolean}}).out(0);
  auto uneven = g.op("DecodeRaw", {g.constant(tensor::from_vector(std::vector<std::string>{"ab", "abcd"})).out(0)},
                     {{"out_type", dtype::int16}}).out(0);
  auto odd = g.op("DecodeRaw", {g.constant(tensor::scalar("abc")).out(0)}, {{"out_type", dtype::int16}}).out(0);
  auto lines = g.constant(tensor::from_vector(std::vector<std::string>{"1.5;x;-7", "NA;\"q;\"\"u\"\"\";8", ";;"})).out(0);
  auto d0 = g.constant(tensor::of<double>({1}, {-1.0})).out(0);
  auto d1 = g.constant(tensor::from_vector(std::vector<std::string>{"dflt"})).out(0);
  auto d2 = g.constant(tensor::of<std::int32_t>({1}, {42})).out(0);
  const node& csv = g.op("DecodeCSV", {lines, d0, d1, d2},
                         {{"OUT_TYPE", std::vector<dtype>{dtype::float64, dtype::string, dtype::int32}},
                          {"field_delim", std::string(";")},
                          {"na_value", std::string("NA")}});
  auto required = g.constant(tensor(dtype::int32, shape{0})).out(0);
  auto bad = [&](std::vector<std::string> records, output def) {
    return g.op("DecodeCSV", {g.constant(tensor::from_vector(records)).out(0), def},
                {{"OUT_TYPE", std::vector<dtype>{dtype::int32}}}).out(0);
  };
  auto not_int = bad({"12x"}, d2), too_big = bad({"3000000000"}, d2), missing = bad({""}, required), two = bad({"1,2"}, d2),
       open_quote = bad({"\"1"}, d2);
  session s(g, one_thread());
  auto got = s.run({}, {floats, flags, csv.out(0), csv.out(1), csv.out(2)});
  CHECK(got[0].shape() == shape{2, 1});
  CHECK(got[0].to_vector<float>() == std::vector<float>{1.0f, -2.0f});
  CHECK(got[1].to_vector<bool>() == std::vector<bool>{false, true, true});
  CHECK(got[2].to_vector<double>() == std::vector<double>{1.5, -1.0, -1.0});
  CHECK(got[3].to_vector<std::string>() == std::vector<std::string>{"x", "q;\"u\"", "dflt"});
  CHECK(got[4].to_vector<std::int32_t>() == std::vector<std::int32_t>{-7, 8, 42});
  require_error([&] { s.run({}, {uneven}); }, {"bytes[1] has 4 bytes and bytes[0] 2"});
  require_error([&] { s.run({}, {odd}); }, {"bytes[0] has 3 bytes, not a multiple of int16's 2"});
  require_error([&] { s.run({}, {not_int}); }, {"field 0 of record 0 ('12x' in '12x') is not a valid int32"});
  require_error([&] { s.run({}, {too_big}); }, {"'3000000000'", "is not a valid int32"});
  require_error([&] { s.run({}, {missing}); }, {"field 0 of record 0 is empty and column 0 has no default"});
  require_error([&] { s.run({}, {two}); }, {"record 0 ('1,2') has 2 fields, expected 1"});
  require_error([&] { s.run({}, {open_quote}); }, {"a quoted field is not closed"});
  // Build-time checks.
  auto flag = g.constant(tensor::of<bool>({1}, {true})).out(0);
  require_error([&] { g.op("DecodeCSV", {lines, flag}, {{"OUT_TYPE", std::vector<dtype>{dtype::boolean}}}); },
                {"DecodeCSV", "is bool: a column is int32, int64, float32, float64 or string"});
  require_error([&] { g.op("DecodeCSV", {lines, d2}, {{"OUT_TYPE", std::vector<dtype>{dtype::int32}}, {"field_delim", std::string("ab")}}); },
                {"field_delim must be one character"});
  require_error([&] { g.op("DecodeRaw", {raw}, {{"out_type", dtype::string}}); }, {"DecodeRaw", "takes no strings"});
}
