/// @file
/// Model bundles: a graph, its variables and named signatures in one file, written
/// atomically, that another program loads and runs with no model code compiled in
/// (`load_model`), and freezing (`freeze_graph`: variables become constants, what the
/// outputs do not need is left out, constant folding runs).
///
///   save_model("mnist.weft", session, g, {make_signature(g, "serving_default", {{"image", x}}, {{"probs", p}})});
///   model_bundle m = load_model("mnist.weft");            // in another program
///   tensor probs = m.run("serving_default", {{"image", batch}})[0];
///
/// File format (version 1; integers little-endian):
///   "WEFTMODL", u32 version, u64 meta bytes, u32 CRC-32C of meta
///   meta: a protobuf message (core/wire.hpp):
///     1 graph_def   bytes     a tensorflow.GraphDef (graph/graph_def.hpp)
///     2 signature   repeated  { 1 name, 2 input: repeated tensor_info, 3 output: repeated tensor_info }
///                             tensor_info { 1 key, 2 tensor ("node:port"), 3 dtype (TensorFlow's
///                             DataType), 4 shape (a TensorShapeProto) }
///   the variables: a checkpoint file's bytes (runtime/checkpoint_file.hpp) to the end of the
///   file, one tensor per Variable node, by node name (none for a frozen graph)
/// load_model checks the magic, the version, the meta's checksum and every tensor's (the
/// checkpoint's own checks), that the signatures name outputs of the graph with their
/// dtypes, and that the variables are exactly the graph's; then it restores them in one step.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <weft/core/crc32c.hpp>
#include <weft/core/error.hpp>
#include <weft/core/file.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/core/tensor.hpp>
#include <weft/core/wire.hpp>
#include <weft/graph/graph.hpp>
#include <weft/graph/graph_def.hpp>
#include <weft/graph/passes/constant_folding.hpp>
#include <weft/graph/passes/expand_fused.hpp>
#include <weft/graph/passes/prune.hpp>
#include <weft/runtime/checkpoint_file.hpp>
#include <weft/runtime/session.hpp>

namespace weft {

/// One tensor of a signature: the key callers use, and the graph's output it stands for.
struct signature_tensor {
  std::string key;              ///< the name callers feed or fetch it by ("images")
  std::string tensor;           ///< "node:port"
  dtype type = dtype::invalid;  ///< its dtype
  partial_shape shape;          ///< its static shape (dims may be unknown)
  /// Equal when every field is.
  friend bool operator==(const signature_tensor&, const signature_tensor&) = default;
};

/// A named way to run a model (TensorFlow's SignatureDef): the outputs it feeds and those it
/// fetches, by key.
struct signature {
  std::string name;                       ///< "serving_default", say
  std::vector<signature_tensor> inputs;   ///< what a run feeds
  std::vector<signature_tensor> outputs;  ///< what it fetches
  /// Equal when every field is.
  friend bool operator==(const signature&, const signature&) = default;
};

/// A signature of `g` from outputs by key; dtypes and static shapes come from the graph.
inline signature make_signature(const graph& g, std::string name, const std::vector<std::pair<std::string, output>>& inputs,
                                const std::vector<std::pair<std::string, output>>& outputs) {
  if (name.empty()) fail(error_code::invalid_argument, "make_signature: a signature needs a name");
  signature s{std::move(name), {}, {}};
  auto add = [&](std::vector<signature_tensor>& to, const std::string& key, output o, const char* side) {
    if (key.empty()) fail(error_code::invalid_argument, "signature '", s.name, "': an ", side, " with an empty key");
    for (const auto& t : to)
      if (t.key == key) fail(error_code::invalid_argument, "signature '", s.name, "': two ", side, "s with the key '", key, "'");
    const node& n = g.at(o);
    (void)n.out(o.port);  // checks the port
    to.push_back({key, g.name_of(o), n.output_dtype(o.port), n.output_shape(o.port)});
  };
  for (const auto& [key, o] : inputs) add(s.inputs, key, o, "input");
  for (const auto& [key, o] : outputs) add(s.outputs, key, o, "output");
  if (s.outputs.empty()) fail(error_code::invalid_argument, "signature '", s.name, "': no outputs");
  return s;
}

/// A graph that computes `outputs` of `g` from `inputs` alone: every Variable those need
/// becomes a Const holding the value it has in `s`, nodes they do not need are left out
/// (an input that is not a Placeholder becomes one of its dtype and shape), and what
/// constant folding can compute beforehand is computed and kept as Consts (named
/// "<node>/folded"; a fetched output itself is never folded away). Node names, devices and
/// colocations stay. Fails, naming the node, when a needed node writes a variable (Assign,
/// an optimizer's update): a frozen graph has none.
graph freeze_graph(const graph& g, session& s, const std::vector<output>& outputs, const std::vector<output>& inputs = {},
                   const passes::constant_folding_options& folding = {});
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE graph freeze_graph(const graph& g, session& s, const std::vector<output>& outputs, const std::vector<output>& inputs,
                                              const passes::constant_folding_options& folding) {
  auto is_input = [&](output o) { return std::find(inputs.begin(), inputs.end(), o) != inputs.end(); };
  const std::vector<bool> needed = passes::prune(g, outputs, {}, is_input);
  // The variables' values, read in one step.
  std::vector<endpoint> vars;
  std::vector<int> var_ids;
  for (int id = 0; id < g.size(); ++id) {
    if (!needed[static_cast<std::size_t>(id)]) continue;
    const node& n = g.at(id);
    if (n.def().variable) {
      vars.emplace_back(g.name_of(n.out(0)));
      var_ids.push_back(id);
    }
    for (int k = 0; k < n.num_inputs(); ++k)
      if (n.input_is_ref(k))
        fail(error_code::invalid_argument, "freeze_graph: ", n.describe(), " writes ", g.at(n.inputs()[static_cast<std::size_t>(k)]).describe(),
             ", which the outputs need: a frozen graph has no variables (fetch outputs that do not run it)");
  }
  std::vector<tensor> values;
  if (!vars.empty()) {
    try {
      values = s.run({}, vars);
    } catch (const error& e) {
      fail(e.code(), "freeze_graph: reading the variables: ", e.what());
    }
  }
  std::vector<node_spec> specs;
  std::vector<bool> kept(needed);
  for (output o : inputs) {
    const node& n = g.at(o);
    if (kept[static_cast<std::size_t>(o.node)]) continue;
    kept[static_cast<std::size_t>(o.node)] = true;
    if (n.def().feed) {
      specs.push_back(spec_of(g, n, &needed));
      continue;
    }
    if (n.num_outputs() != 1)
      fail(error_code::invalid_argument, "freeze_graph: input ", g.name_of(o), " is output ", o.port, " of ", n.describe(),
           ", which has ", n.num_outputs(), " outputs: a frozen graph feeds it through a Placeholder in its place only when it has one");
    specs.push_back(node_spec{n.name(), "Placeholder", {}, {{"dtype", n.output_dtype(0)}, {"shape", n.output_shape(0)}}, n.device(), {}});
  }
  std::size_t v = 0;
  for (int id = 0; id < g.size(); ++id) {
    if (!needed[static_cast<std::size_t>(id)]) continue;
    const node& n = g.at(id);
    if (v < var_ids.size() && var_ids[v] == id) {
      const tensor& value = values[v++];
      node_spec c{n.name(), "Const", {}, {{"value", value}, {"dtype", value.dtype()}}, n.device(), {}};
      for (int ctl : n.control_inputs())
        if (needed[static_cast<std::size_t>(ctl)]) c.inputs.push_back("^" + g.at(ctl).name());
      specs.push_back(std::move(c));
    } else {
      specs.push_back(spec_of(g, n, &needed));
    }
  }
  graph f;
  f.import(specs);

  // Constant folding over the frozen graph: the boundary of what folds, evaluated once.
  std::vector<output> fed, fetched;
  for (output o : inputs) fed.push_back(f.resolve(g.name_of(o)));
  for (output o : outputs) fetched.push_back(f.resolve(g.name_of(o)));
  const auto plan = passes::plan_constant_folding(f, std::vector<bool>(static_cast<std::size_t>(f.size()), true), fed, fetched, folding);
  std::vector<output> fold;
  for (output o : plan.outputs)
    if (std::find(fetched.begin(), fetched.end(), o) == fetched.end()) fold.push_back(o);
  if (fold.empty()) return f;
  std::vector<tensor> folded;
  {
    session_options o;
    o.inter_op_threads = 0;
    o.intra_op_threads = 1;
    o.constant_folding.max_bytes = 0;  // run the region as it is: what is folded is what it computes
    session once(f, o);
    std::vector<endpoint> ends(fold.begin(), fold.end());
    folded = once.run({}, ends);
  }
  std::vector<node_spec> next;
  std::vector<std::pair<std::string, std::string>> renamed;  // "node:port" -> the Const standing for it
  for (std::size_t i = 0; i < fold.size(); ++i) {
    const node& n = f.at(fold[i]);
    std::string name = n.name() + "/folded" + (fold[i].port ? "_" + std::to_string(fold[i].port) : std::string());
    while (f.find(name)) name += "_";
    renamed.emplace_back(f.name_of(fold[i]), name);
    next.push_back(node_spec{name, "Const", {}, {{"value", folded[i]}, {"dtype", folded[i].dtype()}}, n.device(), {}});
  }
  for (int id = 0; id < f.size(); ++id) {
    const node& n = f.at(id);
    node_spec sp = spec_of(f, n);
    for (std::string& ref : sp.inputs)
      for (const auto& [from, to] : renamed)
        if (from == ref) ref = to;
    next.push_back(std::move(sp));
  }
  graph unpruned;
  unpruned.import(next);
  // Only what the outputs still need (and the inputs' nodes) stays.
  std::vector<output> fed2, fetched2;
  for (output o : inputs) fed2.push_back(unpruned.resolve(g.name_of(o)));
  for (output o : outputs) fetched2.push_back(unpruned.resolve(g.name_of(o)));
  std::vector<bool> keep = passes::prune(unpruned, fetched2, {}, [&](output o) {
    return std::find(fed2.begin(), fed2.end(), o) != fed2.end();
  });
  for (output o : fed2) keep[static_cast<std::size_t>(o.node)] = true;
  std::vector<node_spec> last;
  for (int id = 0; id < unpruned.size(); ++id)
    if (keep[static_cast<std::size_t>(id)]) last.push_back(spec_of(unpruned, unpruned.at(id), &keep));
  graph out;
  out.import(last);
  return out;
}
#endif

namespace model_detail {

inline constexpr char magic[8] = {'W', 'E', 'F', 'T', 'M', 'O', 'D', 'L'};

namespace meta_f { inline constexpr std::uint32_t graph_def = 1, signature = 2; }
namespace signature_f { inline constexpr std::uint32_t name = 1, input = 2, output = 3; }
namespace info_f { inline constexpr std::uint32_t key = 1, tensor = 2, dtype = 3, shape = 4; }

inline wire::writer signature_message(const signature& s) {
  wire::writer w;
  w.bytes(signature_f::name, s.name);
  auto add = [&](std::uint32_t field, const signature_tensor& t) {
    wire::writer i;
    i.bytes(info_f::key, t.key);
    i.bytes(info_f::tensor, t.tensor);
    i.varint(info_f::dtype, static_cast<std::uint64_t>(tensorflow_dtype(t.type)));
    i.message(info_f::shape, graph_def_detail::shape_message(t.shape));
    w.message(field, i);
  };
  for (const auto& t : s.inputs) add(signature_f::input, t);
  for (const auto& t : s.outputs) add(signature_f::output, t);
  return w;
}

signature read_signature(std::string_view bytes, const std::string& what);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE signature read_signature(std::string_view bytes, const std::string& what) {
  signature s;
  wire::reader r(bytes, what);
  wire::field f;
  while (r.next(f)) {
    if (f.number == signature_f::name) {
      r.expect(f, wire::wire_type::bytes, "name");
      s.name = f.bytes;
    } else if (f.number == signature_f::input || f.number == signature_f::output) {
      r.expect(f, wire::wire_type::bytes, f.number == signature_f::input ? "input" : "output");
      auto& to = f.number == signature_f::input ? s.inputs : s.outputs;
      if (to.size() >= static_cast<std::size_t>(graph::max_list_length))
        fail(error_code::invalid_argument, what, ": more than ", graph::max_list_length, " tensors");
      const std::string where = what + (f.number == signature_f::input ? " input " : " output ") + std::to_string(to.size());
      wire::reader t(f.bytes, where);
      wire::field g;
      signature_tensor info;
      while (t.next(g)) {
        switch (g.number) {
          case info_f::key: t.expect(g, wire::wire_type::bytes, "key"); info.key = g.bytes; break;
          case info_f::tensor: t.expect(g, wire::wire_type::bytes, "tensor"); info.tensor = g.bytes; break;
          case info_f::dtype: t.expect(g, wire::wire_type::varint, "dtype"); info.type = from_tensorflow_dtype(g.as_int64(), where); break;
          case info_f::shape: t.expect(g, wire::wire_type::bytes, "shape"); info.shape = graph_def_detail::read_shape(g.bytes, where); break;
          default: break;
        }
      }
      to.push_back(std::move(info));
    }
  }
  return s;
}
#endif

/// Checks `sigs` against `g`: distinct non-empty names, distinct keys, each tensor an output
/// of `g` with the signature's dtype. `who` prefixes errors.
void check_signatures(const graph& g, const std::vector<signature>& sigs, const std::string& who);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE void check_signatures(const graph& g, const std::vector<signature>& sigs, const std::string& who) {
  if (sigs.empty()) fail(error_code::invalid_argument, who, ": no signatures (a model is run through one)");
  for (std::size_t i = 0; i < sigs.size(); ++i) {
    const signature& s = sigs[i];
    if (s.name.empty()) fail(error_code::invalid_argument, who, ": signature ", i, " has no name");
    for (std::size_t j = 0; j < i; ++j)
      if (sigs[j].name == s.name) fail(error_code::invalid_argument, who, ": two signatures named '", s.name, "'");
    if (s.outputs.empty()) fail(error_code::invalid_argument, who, ": signature '", s.name, "' has no outputs");
    for (const auto* side : {&s.inputs, &s.outputs})
      for (std::size_t k = 0; k < side->size(); ++k) {
        const signature_tensor& t = (*side)[k];
        const char* kind = side == &s.inputs ? "input" : "output";
        if (t.key.empty()) fail(error_code::invalid_argument, who, ": signature '", s.name, "' has an ", kind, " with no key");
        for (std::size_t m = 0; m < k; ++m)
          if ((*side)[m].key == t.key)
            fail(error_code::invalid_argument, who, ": signature '", s.name, "' has two ", kind, "s with the key '", t.key, "'");
        output o;
        try {
          o = g.resolve(t.tensor);
        } catch (const error& e) {
          fail(error_code::invalid_argument, who, ": signature '", s.name, "' ", kind, " '", t.key, "' names ", t.tensor,
               ", which the graph does not have (", e.what(), ")");
        }
        const dtype actual = g.at(o).output_dtype(o.port);
        if (actual != t.type)
          fail(error_code::invalid_argument, who, ": signature '", s.name, "' ", kind, " '", t.key, "' is ", t.type,
               ", but the graph's ", t.tensor, " is ", actual);
      }
  }
}
#endif

}  // namespace model_detail

/// How save_model writes a bundle.
struct save_model_options {
  /// Write freeze_graph's graph of the signatures' outputs (variables as constants, folded)
  /// and no variables, in place of the whole graph and its variables.
  bool freeze = false;
  passes::constant_folding_options folding = {};  ///< the frozen graph's constant folding
  /// Leave the nodes' device requests out (graph_def_options::devices): a model trained on a
  /// GPU then loads where there is none.
  bool clear_devices = false;
  /// Write each Fused node (the typed DSL's fusion) as its elementwise ops
  /// (passes/expand_fused.hpp): a Fused node's kernel is compiled from the saving program's
  /// types, so only such a program could run the bundle otherwise.
  bool expand_fused = true;
};

/// Writes a model bundle (the format above) atomically: `g` (or its frozen form), the
/// variables' values in `s`, and `signatures`. Every variable must be initialized.
void save_model(const std::filesystem::path& path, session& s, const graph& g, const std::vector<signature>& signatures,
                const save_model_options& options = {});
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE void save_model(const std::filesystem::path& path, session& s, const graph& g, const std::vector<signature>& signatures,
                                           const save_model_options& options) {
  model_detail::check_signatures(g, signatures, "save_model");
  std::vector<std::pair<std::string, tensor>> variables;
  std::string graph_bytes;
  if (options.freeze) {
    std::vector<output> ins, outs;
    for (const auto& sig : signatures) {
      for (const auto& t : sig.inputs)
        if (output o = g.resolve(t.tensor); std::find(ins.begin(), ins.end(), o) == ins.end()) ins.push_back(o);
      for (const auto& t : sig.outputs)
        if (output o = g.resolve(t.tensor); std::find(outs.begin(), outs.end(), o) == outs.end()) outs.push_back(o);
    }
    graph frozen = freeze_graph(g, s, outs, ins, options.folding);
    if (options.expand_fused) frozen = passes::expand_fused(frozen);
    model_detail::check_signatures(frozen, signatures, "save_model (the frozen graph)");
    graph_bytes = to_graph_def(frozen, {.devices = !options.clear_devices});
  } else {
    std::vector<endpoint> vars;
    std::vector<std::string> names;
    for (int id = 0; id < g.size(); ++id)
      if (g.at(id).def().variable) {
        vars.emplace_back(g.name_of(g.at(id).out(0)));
        names.push_back(g.at(id).name());
      }
    if (!vars.empty()) {
      std::vector<tensor> values;
      try {
        values = s.run({}, vars);
      } catch (const error& e) {
        fail(e.code(), "save_model: reading the variables: ", e.what());
      }
      for (std::size_t i = 0; i < vars.size(); ++i) variables.emplace_back(names[i], values[i]);
    }
    graph_bytes = to_graph_def(options.expand_fused ? passes::expand_fused(g) : g, {.devices = !options.clear_devices});
  }
  wire::writer meta;
  meta.bytes(model_detail::meta_f::graph_def, graph_bytes);
  for (const auto& sig : signatures) meta.message(model_detail::meta_f::signature, model_detail::signature_message(sig));
  const checkpoint_parts parts(variables);
  std::string head(model_detail::magic, 8);
  detail::put<std::uint32_t>(head, 1);
  detail::put<std::uint64_t>(head, meta.size());
  detail::put<std::uint32_t>(head, crc32c(meta.data().data(), meta.size()));
  head += meta.data();
  std::vector<std::string_view> blobs{parts.index};
  blobs.insert(blobs.end(), parts.blobs.begin(), parts.blobs.end());
  detail::write_file_atomically(path, head, blobs, "the model");
}
#endif

class model_bundle;
/// Loads a model bundle from its bytes (`name` names it in errors): load_model's work once
/// the file is read. `limits` bound what the graph's tensors may allocate (graph_def_limits).
model_bundle load_model_bytes(std::string_view bytes, const std::string& name, const session_options& options = {},
                              const graph_def_limits& limits = {});

/// A model loaded from a bundle: its graph, a session on it with the variables restored,
/// and its signatures.
class model_bundle {
 public:
  /// The bundle's graph.
  const weft::graph& graph() const noexcept { return graph_; }
  /// A session over it, the variables restored.
  weft::session& session() noexcept { return *session_; }
  /// Every signature, in the bundle's order.
  const std::vector<weft::signature>& signatures() const noexcept { return signatures_; }

  /// The signature named `name`; none is a not_found error listing those there are.
  const weft::signature& signature(std::string_view name) const {
    for (const auto& s : signatures_)
      if (s.name == name) return s;
    std::string names;
    for (const auto& s : signatures_) names += (names.empty() ? "'" : ", '") + s.name + "'";
    fail(error_code::not_found, "model: no signature named '", name, "' (it has ", names, ")");
  }

  /// Runs signature `name`, fed by key (every input of the signature, no other), and
  /// returns its outputs in the signature's order. Dtypes and shapes are checked against
  /// the signature, naming the key.
  std::vector<tensor> run(std::string_view name, const std::vector<std::pair<std::string, tensor>>& inputs,
                          const run_options& options = {});

 private:
  friend model_bundle load_model_bytes(std::string_view, const std::string&, const session_options&, const graph_def_limits&);
  weft::graph graph_;
  std::unique_ptr<weft::session> session_;
  std::vector<weft::signature> signatures_;
};

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<tensor> model_bundle::run(std::string_view name, const std::vector<std::pair<std::string, tensor>>& inputs,
                                                 const run_options& options) {
  const weft::signature& s = signature(name);
  feed_list feeds;
  for (const auto& given : inputs) {
    const std::string& key = given.first;  // not a structured binding: clang 14 cannot capture one
    const tensor& value = given.second;
    auto it = std::find_if(s.inputs.begin(), s.inputs.end(), [&](const signature_tensor& t) { return t.key == key; });
    if (it == s.inputs.end()) {
      std::string keys;
      for (const auto& t : s.inputs) keys += (keys.empty() ? "'" : ", '") + t.key + "'";
      fail(error_code::invalid_argument, "model: signature '", s.name, "' has no input '", key, "' (its inputs: ",
           keys.empty() ? std::string("none") : keys, ")");
    }
    if (std::count_if(inputs.begin(), inputs.end(), [&](const auto& in) { return in.first == key; }) > 1)
      fail(error_code::invalid_argument, "model: signature '", s.name, "' input '", key, "' is given twice");
    if (value.dtype() != it->type || !it->shape.accepts(value.shape()))
      fail(error_code::invalid_argument, "model: signature '", s.name, "' input '", key, "' takes ", it->type, it->shape,
           ", got ", value.dtype(), value.shape());
    feeds.emplace_back(it->tensor, value);
  }
  for (const auto& t : s.inputs)
    if (std::none_of(inputs.begin(), inputs.end(), [&](const auto& in) { return in.first == t.key; }))
      fail(error_code::invalid_argument, "model: signature '", s.name, "' needs input '", t.key, "' (", t.type, t.shape, ")");
  std::vector<endpoint> fetches;
  for (const auto& t : s.outputs) fetches.emplace_back(t.tensor);
  return session_->run(feeds, fetches, {}, options);
}
#endif

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE model_bundle load_model_bytes(std::string_view bytes, const std::string& name,
                                                         const session_options& options, const graph_def_limits& limits) {
  auto bad = [&](auto&&... what) { fail(error_code::data_loss, "the model ", name, " is corrupt: ", what...); };
  constexpr std::size_t head = 8 + 4 + 8 + 4;
  if (bytes.size() < head) bad("it has ", bytes.size(), " bytes, fewer than the header's ", head);
  if (std::memcmp(bytes.data(), model_detail::magic, 8) != 0) bad("it is not a weft model (bad magic number)");
  std::uint32_t version, crc;
  std::uint64_t meta_size;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&meta_size, bytes.data() + 12, 8);
  std::memcpy(&crc, bytes.data() + 20, 4);
  if (version != 1) bad("unknown format version ", version);
  if (meta_size > bytes.size() - head) bad("its meta claims ", meta_size, " bytes; the file has ", bytes.size() - head, " after the header");
  const std::string_view meta(bytes.data() + head, static_cast<std::size_t>(meta_size));
  if (crc32c(meta.data(), meta.size()) != crc) bad("the meta's checksum does not match");

  model_bundle m;
  std::string_view graph_bytes;
  bool has_graph = false;
  try {
    wire::reader r(meta, "the model's meta");
    wire::field f;
    while (r.next(f)) {
      if (f.number == model_detail::meta_f::graph_def) {
        r.expect(f, wire::wire_type::bytes, "graph_def");
        graph_bytes = f.bytes;
        has_graph = true;
      } else if (f.number == model_detail::meta_f::signature) {
        r.expect(f, wire::wire_type::bytes, "signature");
        m.signatures_.push_back(model_detail::read_signature(f.bytes, "signature " + std::to_string(m.signatures_.size())));
      }
    }
    if (!has_graph) fail(error_code::data_loss, "the meta has no graph");
    import_graph_def(m.graph_, graph_bytes, limits);
    model_detail::check_signatures(m.graph_, m.signatures_, "the signatures");
  } catch (const error& e) {
    fail(e.code(), "load_model ", name, ": ", e.what());
  }
  auto variables = parse_checkpoint(bytes.substr(head + static_cast<std::size_t>(meta_size)), name);

  // The session runs the graph with a restore step added: a Placeholder and an Assign per
  // variable, and a NoOp after them. graph() stays the model's graph.
  weft::graph restoring = m.graph_;
  feed_list feeds;
  std::vector<int> assigns;
  try {
    std::vector<bool> restored(variables.size(), false);
    for (int id = 0; id < m.graph_.size(); ++id) {
      const node& v = m.graph_.at(id);
      if (!v.def().variable) continue;
      auto it = std::find_if(variables.begin(), variables.end(), [&](const auto& e) { return e.first == v.name(); });
      if (it == variables.end()) fail(error_code::not_found, "holds no value for ", v.describe());
      restored[static_cast<std::size_t>(it - variables.begin())] = true;
      const std::string scope = "load_model/" + v.name();
      const node& value = restoring.placeholder(v.attr<dtype>("dtype"), v.attr<partial_shape>("shape"), node_options(scope + "/value"));
      assigns.push_back(restoring.op("Assign", {v.out(0), value}, {}, node_options(scope + "/assign")).id());
      feeds.emplace_back(value.name(), it->second);
    }
    for (std::size_t i = 0; i < variables.size(); ++i)
      if (!restored[i]) fail(error_code::invalid_argument, "holds '", variables[i].first, "', which is no variable of the graph");
    if (!assigns.empty()) restoring.op("NoOp", {}, {}, node_options("load_model/restore").after(assigns));
    m.session_ = std::make_unique<weft::session>(restoring, options);
    if (!assigns.empty()) m.session_->run(feeds, {}, {"load_model/restore"});
  } catch (const error& e) {
    fail(e.code(), "load_model ", name, ": restoring the variables: ", e.what());
  }
  return m;
}
#endif

/// Loads a model bundle written by save_model: the graph (every op it uses must be
/// registered, with its kernels: <weft/kernels/cpu/all.hpp> in one file of the program),
/// a session on it, the variables restored.
inline model_bundle load_model(const std::filesystem::path& path, const session_options& options = {}) {
  return load_model_bytes(read_file(path, "the model"), path.string(), options);
}

}  // namespace weft
