/// @file
/// Checkpoints: saver saves a session's variables to "<prefix>-<step>.ckpt" (the format of
/// runtime/checkpoint_file.hpp) with a Save op, keeps the last N, and restores them with a
/// Restore op whose outputs the variables' Assign nodes read, so the file is read and
/// checked against each variable's name, dtype and shape before any variable changes, and
/// a bad file changes none.
///
/// A saver asks for their kernels through kernel_for (framework/kernel_for.hpp) where it is
/// constructed: the CPU kernels' specialization is in kernels/cpu/io.hpp, which
/// <weft/weft.hpp> includes; a program that constructs no saver compiles no checkpoint code.
///
/// The Save and Restore ops (kernels/cpu/io.hpp) take the file name as a string scalar, as
/// TensorFlow's SaveV2 and RestoreV2 do.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/core/tensor.hpp>
#include <weft/framework/kernel_for.hpp>
#include <weft/graph/graph.hpp>
#include <weft/ops/io_ops.hpp>
#include <weft/runtime/checkpoint_file.hpp>
#include <weft/runtime/session.hpp>

namespace weft {

/// The outputs of every Variable node of `g`.
inline std::vector<output> variables_of(const graph& g) {
  std::vector<output> vars;
  for (int id = 0; id < g.size(); ++id)
    if (g.at(id).def().variable) vars.push_back(g.at(id).out(0));
  return vars;
}

/// How a saver keeps its files.
struct saver_options {
  int keep = 5;  ///< checkpoints kept per prefix; older ones are deleted after a save (0: keep all)
};

/// Saves and restores variables of a graph by their node names. Construct it before the
/// session: it adds to the graph a Save node reading the variables, a Restore node, an
/// Assign per variable reading the Restore node's outputs, and a NoOp after them all.
class saver {
 public:
  /// A template only so that the Save and Restore kernels it asks for (kernel_for, one
  /// specialization per device type) are looked up where a saver is constructed.
  template <class Family = ops::families::io>
  saver(graph& g, const std::vector<output>& vars, saver_options o = {}) : options_(o) {
    std::vector<std::string> names;
    std::vector<dtype> dtypes;
    std::vector<partial_shape> shapes;
    for (const auto& v : vars) {
      const node& n = g.at(v);
      if (!n.def().variable) fail(error_code::invalid_argument, "weft::saver: ", n.describe(), " is not a variable");
      names.push_back(n.name());
      dtypes.push_back(n.attr<dtype>("dtype"));
      shapes.push_back(n.attr<partial_shape>("shape"));
    }
    use_kernels<Family>();
    filename_ = g.placeholder(dtype::string, partial_shape({}), node_options("save/filename")).out(0);
    std::vector<output> saved{filename_};
    saved.insert(saved.end(), vars.begin(), vars.end());
    save_ = g.op("Save", saved, {{"tensor_names", names}}, node_options("save/save")).name();
    const int read = g.op("Restore", {filename_}, {{"tensor_names", names}, {"dtypes", dtypes}, {"shapes", shapes}},
                          node_options("save/restore"))
                         .id();
    std::vector<int> assigns;
    for (std::size_t i = 0; i < vars.size(); ++i)
      assigns.push_back(
          g.op("Assign", {vars[i], output{read, static_cast<int>(i)}}, {}, node_options("save/restore/" + names[i])).id());
    restore_ = g.op("NoOp", {}, {}, node_options("save/restore_all").after(assigns)).name();
  }

  /// Writes every variable's value, read in one step, to "<prefix>-<step>.ckpt" (the Save
  /// node), then deletes all but the newest `keep` checkpoints of `prefix`. Returns the file
  /// written.
  std::filesystem::path save(session& s, const std::filesystem::path& prefix, std::int64_t step) const;

  /// Reads and checks `file`, then assigns every variable, in one step. A file that is
  /// corrupt, or lacks a variable, or holds one with another dtype or shape, fails the
  /// Restore node before any Assign runs: an error that changes no variable. Tensors of the
  /// file that are not among the variables are ignored.
  void restore(session& s, const std::filesystem::path& file) const {
    s.run({{filename_, filename_tensor(file)}}, {}, {restore_});
  }

  /// The checkpoints of `prefix` ("<prefix>-<step>.ckpt"), oldest step first.
  static std::vector<std::pair<std::int64_t, std::filesystem::path>> checkpoints(const std::filesystem::path& prefix);
  /// The newest checkpoint of `prefix`, if any.
  static std::optional<std::pair<std::int64_t, std::filesystem::path>> latest(const std::filesystem::path& prefix) {
    auto all = checkpoints(prefix);
    if (all.empty()) return std::nullopt;
    return all.back();
  }

 private:
  saver_options options_;
  output filename_;
  std::string save_, restore_;  ///< the Save node and the NoOp after the Assigns, by name
};

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::filesystem::path saver::save(session& s, const std::filesystem::path& prefix, std::int64_t step) const {
  const std::filesystem::path file = prefix.string() + "-" + std::to_string(step) + ".ckpt";
  if (std::error_code ec; prefix.has_parent_path() && (std::filesystem::create_directories(prefix.parent_path(), ec), ec))
    fail(error_code::failed_precondition, "weft::saver: cannot create the directory ", prefix.parent_path().string(),
         " for the checkpoint ", file.string(), ": ", ec.message());
  s.run({{filename_, filename_tensor(file)}}, {}, {save_});
  if (options_.keep > 0) {
    auto all = checkpoints(prefix);
    for (std::size_t i = 0; i + static_cast<std::size_t>(options_.keep) < all.size(); ++i) {
      std::error_code ignored;
      std::filesystem::remove(all[i].second, ignored);
    }
  }
  return file;
}

WEFT_DETAIL_RUNTIME_INLINE std::vector<std::pair<std::int64_t, std::filesystem::path>> saver::checkpoints(const std::filesystem::path& prefix) {
  std::vector<std::pair<std::int64_t, std::filesystem::path>> found;
  const std::filesystem::path dir = prefix.has_parent_path() ? prefix.parent_path() : std::filesystem::path(".");
  const std::string stem = prefix.filename().string() + "-";
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::filesystem::path& path = it->path();
    const std::string name = path.filename().string();
    if (name.size() <= stem.size() + 5 || name.compare(0, stem.size(), stem) != 0 || !name.ends_with(".ckpt")) continue;
    const std::string digits = name.substr(stem.size(), name.size() - stem.size() - 5);
    if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    std::int64_t step = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), step);  // at most 18 digits: it fits
    found.emplace_back(step, path);
  }
  std::sort(found.begin(), found.end());
  return found;
}
#endif

}  // namespace weft
