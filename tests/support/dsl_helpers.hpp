// Helpers shared by the typed DSL's tests (the weft_dsl_tests program).
#pragma once
#include <weft/dsl.hpp>

#include <string_view>

namespace weft::test {

// How many nodes of g run `op`.
inline int count_op(const graph& g, std::string_view op) {
  int n = 0;
  for (int i = 0; i < g.size(); ++i) n += g.at(i).op() == op;
  return n;
}

// Client options with fusion on or off, on two intra-op threads.
inline client_options fusion(bool on) {
  client_options o;
  o.fusion = on;
  o.session.intra_op_threads = 2;
  return o;
}

}  // namespace weft::test
