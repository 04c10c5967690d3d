// libFuzzer target: the record readers (runtime/records.hpp) and zlib decompression on
// arbitrary bytes. The first byte chooses how the rest is read: bits 0-1 the format
// (TFRecord, fixed-length, text lines, whole file), bits 4-5 the compression (none, gzip,
// zlib); for fixed-length records bits 2-3 give header_bytes - 1, bit 6 a footer of one
// byte and bit 7 a hop of 3 over records of 4 bytes; for text lines bits 2-3 the header
// lines to skip. Every record is read; the reader returns them or throws weft::error, and
// anything else (a crash, a sanitizer report, another exception) is a finding.
#include <weft/runtime/records.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t b = data[0];
  weft::record_format f;
  f.type = static_cast<weft::record_format::kind>(b & 3);
  const int packed = (b >> 4) & 3;
  f.compressed = packed == 1 ? weft::compression::gzip : packed == 2 ? weft::compression::zlib : weft::compression::none;
  if (f.type == weft::record_format::kind::fixed_length) {
    f.header_bytes = ((b >> 2) & 3) + 1;
    f.record_bytes = 4;
    f.footer_bytes = (b & 0x40) ? 1 : 0;
    f.hop_bytes = (b & 0x80) ? 3 : 0;
  }
  if (f.type == weft::record_format::kind::text_line) f.skip_header_lines = (b >> 2) & 3;
  try {
    const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
    weft::record_cursor c("fuzz input", weft::decompress(bytes, f.compressed, "fuzz input"), f);
    std::size_t total = 0;
    while (auto r = c.next()) total += r->size();
    (void)total;
  } catch (const weft::error&) {
  }
  return 0;
}
