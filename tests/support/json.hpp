// A small JSON reader for tests that check what weft writes (the Chrome trace): objects,
// arrays, strings with escapes, numbers, true, false and null. A malformed text throws
// std::runtime_error with its offset.
#pragma once

#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace weft::test::json {

struct value;
using object = std::map<std::string, value>;
using array = std::vector<value>;

struct value {
  std::variant<std::nullptr_t, bool, double, std::string, std::shared_ptr<array>, std::shared_ptr<object>> v;

  bool is_object() const { return std::holds_alternative<std::shared_ptr<object>>(v); }
  bool is_array() const { return std::holds_alternative<std::shared_ptr<array>>(v); }
  const object& as_object() const { return *std::get<std::shared_ptr<object>>(v); }
  const array& as_array() const { return *std::get<std::shared_ptr<array>>(v); }
  const std::string& as_string() const { return std::get<std::string>(v); }
  double as_number() const { return std::get<double>(v); }
  const value& operator[](const std::string& key) const {
    auto it = as_object().find(key);
    if (it == as_object().end()) throw std::runtime_error("json: no key '" + key + "'");
    return it->second;
  }
  bool has(const std::string& key) const { return is_object() && as_object().count(key) != 0; }
};

class parser {
 public:
  explicit parser(std::string_view text) : s_(text) {}
  value parse() {
    value v = parse_value();
    skip_space();
    if (pos_ != s_.size()) fail("text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("json: " + what + " at offset " + std::to_string(pos_));
  }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  char peek() {
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end");
    return s_[pos_];
  }
  void expect(char ch) {
    if (peek() != ch) fail(std::string("expected '") + ch + "'");
    ++pos_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  value parse_value() {
    const char ch = peek();
    if (ch == '{') return parse_object();
    if (ch == '[') return parse_array();
    if (ch == '"') return value{parse_string()};
    if (literal("true")) return value{true};
    if (literal("false")) return value{false};
    if (literal("null")) return value{nullptr};
    return value{parse_number()};
  }
  value parse_object() {
    auto out = std::make_shared<object>();
    expect('{');
    if (peek() == '}') return ++pos_, value{out};
    for (;;) {
      if (peek() != '"') fail("expected a key");
      std::string key = parse_string();
      expect(':');
      (*out)[key] = parse_value();
      if (peek() == ',') { ++pos_; continue; }
      expect('}');
      return value{out};
    }
  }
  value parse_array() {
    auto out = std::make_shared<array>();
    expect('[');
    if (peek() == ']') return ++pos_, value{out};
    for (;;) {
      out->push_back(parse_value());
      if (peek() == ',') { ++pos_; continue; }
      expect(']');
      return value{out};
    }
  }
  std::string parse_string() {
    expect('"');
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char ch = s_[pos_++];
      if (static_cast<unsigned char>(ch) < 0x20) fail("a control character in a string");
      if (ch != '\\') { out += ch; continue; }
      if (pos_ >= s_.size()) fail("an unfinished escape");
      switch (char e = s_[pos_++]) {
        case '"': case '\\': case '/': out += e; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (pos_ + 4 > s_.size()) fail("a short \\u escape");
          const unsigned code = static_cast<unsigned>(std::stoul(std::string(s_.substr(pos_, 4)), nullptr, 16));
          pos_ += 4;
          if (code >= 0x80) fail("a \\u escape above 0x7f (not needed here)");
          out += static_cast<char>(code);
          break;
        }
        default: fail("an unknown escape");
      }
    }
    expect('"');
    return out;
  }
  double parse_number() {
    const std::size_t start = pos_;
    while (pos_ < s_.size() && (std::string_view("+-0123456789.eE").find(s_[pos_]) != std::string_view::npos)) ++pos_;
    if (pos_ == start) fail("expected a value");
    const std::string text(s_.substr(start, pos_ - start));
    char* end = nullptr;
    const double d = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) fail("a malformed number '" + text + "'");
    return d;
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

inline value parse(std::string_view text) { return parser(text).parse(); }

}  // namespace weft::test::json
