/// @file
/// Fused elementwise kernels generated at run time (issue 28, point 4). A Fused node (the
/// typed DSL's fusion, ops/fused_ops.hpp) names its subtree in its `expr` attr,
/// "Add:float32(Mul:float32($float32,$float32s),$float32)"; on a GPU that string becomes
/// CUDA source (fused_source), compiled by NVRTC for the GPU's architecture when the session
/// builds the node's kernel (the executable), cached by the source's hash in memory and on
/// disk ($XDG_CACHE_HOME/weft/cuda or ~/.cache/weft/cuda, written atomically), loaded with
/// cudaLibraryLoadData and launched on the compute stream: one pass over the inputs, which
/// broadcast as the node's inputs do. Gradients of fused subtrees are Fused nodes too, and
/// take the same path.
///
/// Arithmetic on float16 and bfloat16 is done in float32, as the other GPU kernels' is; each
/// op's result is converted to its dtype's compute type, so integer ops wrap as the CPU's do.
#pragma once

#include <nvrtc.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <weft/core/activation_constants.hpp>
#include <weft/core/error.hpp>
#include <weft/cuda/check.hpp>
#include <weft/cuda/device.hpp>
#include <weft/cuda/kernels.hpp>
#include <weft/ops/fused_ops.hpp>
#include <weft/core/file.hpp>

namespace weft::cuda {

/// Nothing for success, else an internal error naming `what` and NVRTC's message.
inline void check(nvrtcResult r, const char* what) {
  if (r == NVRTC_SUCCESS) return;
  fail(error_code::internal, what, ": ", nvrtcGetErrorString(r));
}

/// A Fused node's subtree (ops/fused_ops.hpp reads it back from the node's expr).
using fused_expr = fused::expr_node;

namespace detail {

/// The C++ type a dtype's elements are stored as in the generated source, and computed in.
inline const char* storage_type(dtype t) {
  switch (t) {
    case dtype::float16: return "__half";
    case dtype::bfloat16: return "__nv_bfloat16";
    case dtype::float32: return "float";
    case dtype::float64: return "double";
    case dtype::int8: return "signed char";
    case dtype::int16: return "short";
    case dtype::int32: return "int";
    case dtype::int64: return "long long";
    case dtype::uint8: return "unsigned char";
    case dtype::uint16: return "unsigned short";
    case dtype::uint32: return "unsigned int";
    case dtype::uint64: return "unsigned long long";
    case dtype::boolean: return "bool";
    case dtype::complex64: return "::cuda::std::complex<float>";  // std::complex's layout
    case dtype::complex128: return "::cuda::std::complex<double>";
    default: fail(error_code::unimplemented, "fused GPU kernels do not take ", t);
  }
}
inline const char* compute_type(dtype t) {
  return t == dtype::float16 || t == dtype::bfloat16 ? "float" : storage_type(t);
}
inline std::string load(dtype t, const std::string& v) {
  if (t == dtype::float16) return "__half2float(" + v + ")";
  if (t == dtype::bfloat16) return "__bfloat162float(" + v + ")";
  return v;
}
inline std::string store(dtype t, const std::string& v) {
  if (t == dtype::float16) return "__float2half_rn(" + v + ")";
  if (t == dtype::bfloat16) return "__float2bfloat16_rn(" + v + ")";
  return v;
}
inline bool is_unsigned_type(dtype t) {
  return t == dtype::uint8 || t == dtype::uint16 || t == dtype::uint32 || t == dtype::uint64 || t == dtype::boolean;
}

/// The code of e's value, in its dtype's compute type.
inline std::string expression(const fused_expr& e) {
  if (e.op.empty()) return "v" + std::to_string(e.leaf);
  std::vector<std::string> a;
  for (const auto& x : e.args) a.push_back(expression(x));
  const std::string C = compute_type(e.type);
  const dtype operand = e.args.empty() ? e.type : e.args[0].type;
  const std::string OC = compute_type(operand);
  auto arity = [&](std::size_t n) {
    if (a.size() != n)
      fail(error_code::invalid_argument, "Fused expr: ", e.op, " takes ", n, " operands, got ", a.size());
  };
  auto cast = [&](const std::string& code) { return "((" + C + ")(" + code + "))"; };
  // Constants of the compute types ("signed char(0)" is not C++: a functional cast takes one word).
  const std::string zero = "((" + C + ")0)", one = "((" + C + ")1)", operand_zero = "((" + OC + ")0)";
  const std::string& op = e.op;
  static const std::set<std::string, std::less<>> ordered{"Abs", "Relu", "ReluGrad", "Maximum", "Minimum", "Greater",
                                                          "GreaterEqual", "Less", "LessEqual"};
  if (is_complex(operand) && ordered.count(op))
    fail(error_code::invalid_argument, "Fused expr: ", op, " of ", operand, ": complex numbers are not ordered");
  if (op == "Neg") return arity(1), cast("-" + a[0]);
  if (op == "Abs") return arity(1), is_unsigned_type(e.type) ? cast(a[0]) : cast("(" + a[0] + " < " + zero + " ? -" + a[0] + " : " + a[0] + ")");
  if (op == "Square") return arity(1), cast(a[0] + " * " + a[0]);
  if (op == "Sqrt") return arity(1), cast("sqrt(" + a[0] + ")");
  if (op == "Rsqrt") return arity(1), cast(is_complex(e.type) ? one + " / sqrt(" + a[0] + ")" : "rsqrt(" + a[0] + ")");
  if (op == "Exp") return arity(1), cast("exp(" + a[0] + ")");
  if (op == "Log") return arity(1), cast("log(" + a[0] + ")");
  if (op == "Tanh") return arity(1), cast("tanh(" + a[0] + ")");
  if (op == "Sigmoid") return arity(1), cast(one + " / (" + one + " + exp(-" + a[0] + "))");
  if (op == "Sin") return arity(1), cast("sin(" + a[0] + ")");
  if (op == "Cos") return arity(1), cast("cos(" + a[0] + ")");
  if (op == "Tan") return arity(1), cast("tan(" + a[0] + ")");
  if (op == "Asin") return arity(1), cast("asin(" + a[0] + ")");
  if (op == "Acos") return arity(1), cast("acos(" + a[0] + ")");
  if (op == "Atan") return arity(1), cast("atan(" + a[0] + ")");
  if (op == "Sinh") return arity(1), cast("sinh(" + a[0] + ")");
  if (op == "Cosh") return arity(1), cast("cosh(" + a[0] + ")");
  if (op == "Asinh") return arity(1), cast("asinh(" + a[0] + ")");
  if (op == "Acosh") return arity(1), cast("acosh(" + a[0] + ")");
  if (op == "Atanh") return arity(1), cast("atanh(" + a[0] + ")");
  if (op == "Reciprocal") return arity(1), cast(one + " / " + a[0]);
  if (op == "Log1p") return arity(1), cast("log1p(" + a[0] + ")");
  if (op == "Expm1") return arity(1), cast("expm1(" + a[0] + ")");
  if (op == "Softplus")  // max(x, 0) + log1p(e^-|x|), the CPU's form
    return arity(1), cast("(" + a[0] + " > " + zero + " ? " + a[0] + " : " + zero + ") + log1p(exp(-fabs(" + a[0] + ")))");
  if (op == "Erf") return arity(1), cast("erf(" + a[0] + ")");
  if (op == "Floor") return arity(1), cast("floor(" + a[0] + ")");
  if (op == "Ceil") return arity(1), cast("ceil(" + a[0] + ")");
  if (op == "Round") return arity(1), cast("rint(" + a[0] + ")");  // half to even
  if (op == "Elu") return arity(1), cast("(" + a[0] + " > " + zero + " ? " + a[0] + " : expm1(" + a[0] + "))");
  if (op == "Selu") {  // the constants as the other kernels' (core/activation_constants.hpp), every digit
    auto literal = [&](double v) {
      char text[64];
      std::snprintf(text, sizeof text, "((%s)%.17g)", C.c_str(), v);
      return std::string(text);
    };
    return arity(1), cast("(" + a[0] + " > " + zero + " ? " + literal(selu_scale) + " * " + a[0] + " : " +
                              literal(selu_scale * selu_alpha) + " * expm1(" + a[0] + "))");
  }
  if (op == "Relu6")
    return arity(1), cast("(" + a[0] + " != " + a[0] + " ? " + a[0] + " : " + a[0] + " > " + zero + " ? (" + a[0] + " < (" + C +
                              ")6 ? " + a[0] + " : (" + C + ")6) : " + zero + ")");  // NaN of NaN
  if (op == "IsNan") return arity(1), cast("isnan(" + a[0] + ")");
  if (op == "IsInf") return arity(1), cast("isinf(" + a[0] + ")");
  if (op == "IsFinite") return arity(1), cast("isfinite(" + a[0] + ")");
  if (op == "Sign") {
    const std::string sign = "(" + C + ")((" + a[0] + " > " + zero + ") - (" + a[0] + " < " + zero + "))";
    return arity(1), is_floating(e.type) ? cast("(" + a[0] + " != " + a[0] + " ? " + a[0] + " : " + sign + ")") : cast(sign);
  }
  if (op == "Relu") return arity(1), cast("(" + a[0] + " > " + zero + " ? " + a[0] + " : " + zero + ")");
  if (op == "LogicalNot") return arity(1), cast("!" + a[0]);
  if (op == "ReluGrad") return arity(2), cast("(" + a[1] + " > " + operand_zero + " ? " + a[0] + " : " + zero + ")");
  if (op == "Add") return arity(2), cast(a[0] + " + " + a[1]);
  if (op == "Sub") return arity(2), cast(a[0] + " - " + a[1]);
  if (op == "Mul") return arity(2), cast(a[0] + " * " + a[1]);
  if (op == "Div") return arity(2), cast(a[0] + " / " + a[1]);  // integer Div and Pow are never fused
  if (op == "Pow") return arity(2), cast("pow(" + a[0] + ", " + a[1] + ")");
  if (op == "Atan2") return arity(2), cast("atan2(" + a[0] + ", " + a[1] + ")");
  // FloorDiv and FloorMod of floats (integer ones are never fused: their kernels check y first).
  if (op == "FloorDiv") return arity(2), cast("floor(" + a[0] + " / " + a[1] + ")");
  if (op == "FloorMod") {
    const std::string r = "fmod(" + a[0] + ", " + a[1] + ")";
    return arity(2), cast("(" + r + " != " + zero + " && ((" + r + " < " + zero + ") != (" + a[1] + " < " + zero + ")) ? " + r +
                              " + " + a[1] + " : " + r + ")");
  }
  if (op == "SquaredDifference") return arity(2), cast("(" + a[0] + " - " + a[1] + ") * (" + a[0] + " - " + a[1] + ")");
  if (op == "Maximum") return arity(2), cast("(" + a[0] + " < " + a[1] + " ? " + a[1] + " : " + a[0] + ")");
  if (op == "Minimum") return arity(2), cast("(" + a[1] + " < " + a[0] + " ? " + a[1] + " : " + a[0] + ")");
  if (op == "Greater") return arity(2), cast(a[0] + " > " + a[1]);
  if (op == "GreaterEqual") return arity(2), cast(a[0] + " >= " + a[1]);
  if (op == "Less") return arity(2), cast(a[0] + " < " + a[1]);
  if (op == "LessEqual") return arity(2), cast(a[0] + " <= " + a[1]);
  if (op == "Equal") return arity(2), cast(a[0] + " == " + a[1]);
  if (op == "NotEqual") return arity(2), cast(a[0] + " != " + a[1]);
  if (op == "LogicalAnd") return arity(2), cast(a[0] + " && " + a[1]);
  if (op == "LogicalOr") return arity(2), cast(a[0] + " || " + a[1]);
  if (op == "SelectV2") return arity(3), cast("(" + a[0] + " ? " + a[1] + " : " + a[2] + ")");
  if (op == "Cast") return arity(1), e.type == dtype::boolean ? cast(a[0] + " != " + operand_zero) : cast(a[0]);
  fail(error_code::unimplemented, "Fused expr: ", op, " has no GPU code (Select with a row vector)");
}

inline void number_leaves(const fused_expr& e, std::vector<const fused_expr*>& out) {
  if (e.op.empty()) out.push_back(&e);
  for (const auto& a : e.args) number_leaves(a, out);
}

}  // namespace detail

/// The subtree a Fused node's expr attr names.
inline fused_expr parse_fused(std::string_view expr) { return fused::parse(expr); }

/// The most inputs a generated kernel takes: its parameters (a pointer an input, the output,
/// the count and the plan of 68 bytes an input and 76 more) stay within the 4 KiB that every
/// GPU and CUDA version passes (3,740 bytes at 48).
inline constexpr std::size_t max_fused_inputs = 48;

/// The CUDA source of kernel `name` computing `e` for a Fused node whose leaf j reads input
/// slots[j], the inputs of dtypes `inputs`, the output of dtype `out`: extern "C"
/// __global__ void name(const In0*, ..., Out*, long long n, weft_plan plan).
inline std::string fused_source(const fused_expr& e, const std::vector<std::int64_t>& slots,
                                const std::vector<dtype>& inputs, dtype out, const std::string& name) {
  std::vector<const fused_expr*> leaves;
  detail::number_leaves(e, leaves);
  if (leaves.size() != slots.size())
    fail(error_code::invalid_argument, "Fused: ", leaves.size(), " leaves but ", slots.size(), " slots");
  if (inputs.empty()) fail(error_code::invalid_argument, "Fused: no inputs");
  if (inputs.size() > max_fused_inputs)
    fail(error_code::unimplemented, "fused GPU kernels take at most ", max_fused_inputs, " inputs, got ", inputs.size());
  for (std::size_t j = 0; j < slots.size(); ++j) {
    if (slots[j] < 0 || slots[j] >= static_cast<std::int64_t>(inputs.size()))
      fail(error_code::invalid_argument, "Fused: slot ", slots[j], " of leaf ", j, " is not an input");
    if (inputs[static_cast<std::size_t>(slots[j])] != leaves[j]->type)
      fail(error_code::invalid_argument, "Fused: leaf ", j, " is ", leaves[j]->type, " but input ", slots[j], " is ",
           inputs[static_cast<std::size_t>(slots[j])]);
  }
  if (e.type != out) fail(error_code::invalid_argument, "Fused: the expression is ", e.type, " but the node's T is ", out);
  const std::string body = detail::expression(e);
  const std::size_t n_in = inputs.size();
  std::ostringstream s;
  // The plan: long longs first, so that the host lays it out without padding between them.
  const bool complex = is_complex(out) || std::any_of(inputs.begin(), inputs.end(), [](dtype t) { return is_complex(t); });
  s << "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n" << (complex ? "#include <cuda/std/complex>\n" : "")
    << "struct weft_plan { long long dims[8]; long long stride[" << n_in << "][8]; int rank; int narrow; int vec; int kind["
    << n_in << "]; };\n"
    << "template <class T> struct alignas(4 * sizeof(T)) weft_vec { T x[4]; };\n"
    << "template <class I>\n"
    << "__device__ __forceinline__ I weft_offset(const weft_plan& p, int k, I i) {\n"
    << "  I off = 0;\n"
    << "  for (int d = p.rank - 1; d >= 0; --d) { const I dim = (I)p.dims[d]; const I q = i / dim; off += (i - q * dim) * (I)p.stride[k][d]; i = q; }\n"
    << "  return off;\n}\n"
    // The expression of the leaves' values.
    << "__device__ __forceinline__ " << detail::storage_type(out) << " weft_eval(";
  for (std::size_t j = 0; j < leaves.size(); ++j)
    s << (j ? ", " : "") << "const " << detail::compute_type(leaves[j]->type) << " v" << j;
  s << ") { return " << detail::store(out, body) << "; }\n"
    << "extern \"C\" __global__ void " << name << "(";
  for (std::size_t k = 0; k < n_in; ++k) s << "const " << detail::storage_type(inputs[k]) << "* __restrict__ in" << k << ", ";
  s << detail::storage_type(out) << "* __restrict__ out, long long n, weft_plan p) {\n";
  // A scalar input (kind 2) is read once, before the loop (n > 0: every input has an element).
  for (std::size_t k = 0; k < n_in; ++k) s << "  const " << detail::storage_type(inputs[k]) << " s" << k << " = in" << k << "[0];\n";
  // Leaf j's value at element i: kind 1, the output's shape (direct); 2, a scalar; 0,
  // broadcast by strides.
  auto leaf = [&](std::size_t j, const std::string& I, const std::string& i) {
    const std::string k = std::to_string(slots[j]);
    return detail::load(leaves[j]->type, "(p.kind[" + k + "] == 1 ? in" + k + "[" + i + "] : p.kind[" + k + "] == 2 ? s" + k +
                                             " : in" + k + "[weft_offset<" + I + ">(p, " + k + ", " + i + ")])");
  };
  auto eval_call = [&](const std::string& arg) {
    std::string c = "weft_eval(";
    for (std::size_t j = 0; j < leaves.size(); ++j) c += (j ? ", " : "") + arg + std::to_string(j) + (arg == "a" ? "[u]" : "");
    return c + ")";
  };
  // The loop, for an index type: 32 bits where every offset fits (no 64-bit division). A
  // thread takes four elements a grid apart per pass and loads all of them before it
  // computes, so that four loads are in flight at once (one at a time leaves HBM idle:
  // Little's law); the last pass goes element by element.
  auto loop = [&](const char* index) {
    const std::string I = index;
    s << "    const " << I << " stride = (" << I << ")blockDim.x * gridDim.x, count = (" << I << ")n;\n"
      << "    " << I << " base = blockIdx.x * (" << I << ")blockDim.x + threadIdx.x;\n"
      << "    for (; base + 3 * stride < count; base += 4 * stride) {\n";
    for (std::size_t j = 0; j < leaves.size(); ++j) s << "      " << detail::compute_type(leaves[j]->type) << " a" << j << "[4];\n";
    s << "      #pragma unroll\n      for (int u = 0; u < 4; ++u) {\n        const " << I << " i = base + u * stride;\n";
    for (std::size_t j = 0; j < leaves.size(); ++j) s << "        a" << j << "[u] = " << leaf(j, I, "i") << ";\n";
    s << "      }\n      #pragma unroll\n      for (int u = 0; u < 4; ++u) out[base + u * stride] = " << eval_call("a") << ";\n"
      << "    }\n"
      << "    for (" << I << " i = base; i < count; i += stride) {\n";
    for (std::size_t j = 0; j < leaves.size(); ++j)
      s << "      const " << detail::compute_type(leaves[j]->type) << " v" << j << " = " << leaf(j, I, "i") << ";\n";
    s << "      out[i] = " << eval_call("v") << ";\n    }\n";
  };
  // Where no input is broadcast by strides and the pointers are aligned (p.vec), each thread
  // moves four consecutive elements at a time (one 16-byte access for 4-byte types), as a
  // device copy does; the elements after the last whole four go one by one.
  s << "  if (p.vec) {\n"
    << "    const long long stride = (long long)blockDim.x * gridDim.x, quads = n / 4;\n"
    << "    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < quads; q += stride) {\n";
  for (std::size_t k = 0; k < n_in; ++k) {
    const std::string T = detail::storage_type(inputs[k]), K = std::to_string(k);
    s << "      const weft_vec<" << T << "> q" << K << " = p.kind[" << K << "] == 1 ? reinterpret_cast<const weft_vec<" << T
      << ">*>(in" << K << ")[q] : weft_vec<" << T << ">{{s" << K << ", s" << K << ", s" << K << ", s" << K << "}};\n";
  }
  s << "      weft_vec<" << detail::storage_type(out) << "> r;\n"
    << "      #pragma unroll\n      for (int u = 0; u < 4; ++u) r.x[u] = weft_eval(";
  for (std::size_t j = 0; j < leaves.size(); ++j)
    s << (j ? ", " : "") << detail::load(leaves[j]->type, "q" + std::to_string(slots[j]) + ".x[u]");
  s << ");\n"
    << "      reinterpret_cast<weft_vec<" << detail::storage_type(out) << ">*>(out)[q] = r;\n    }\n"
    << "    for (long long i = quads * 4 + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride)\n"
    << "      out[i] = weft_eval(";
  for (std::size_t j = 0; j < leaves.size(); ++j) {
    const std::string k = std::to_string(slots[j]);
    s << (j ? ", " : "") << detail::load(leaves[j]->type, "(p.kind[" + k + "] == 1 ? in" + k + "[i] : s" + k + ")");
  }
  s << ");\n  } else if (p.narrow) {\n";
  loop("unsigned");
  s << "  } else {\n";
  loop("long long");
  s << "  }\n}\n";
  return s.str();
}

/// NVRTC's compilation of `source` for sm_<arch> (90 for Hopper): the cubin, or an error with
/// NVRTC's log.
inline std::string compile_cubin(const std::string& source, int arch, const std::string& name) {
  nvrtcProgram program = nullptr;
  check(nvrtcCreateProgram(&program, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  struct destroy {
    nvrtcProgram& p;
    ~destroy() { (void)nvrtcDestroyProgram(&p); }
  } guard{program};
  const std::string gpu = "--gpu-architecture=sm_" + std::to_string(arch);
  // The toolkit's headers, and CCCL's (<cuda/std/complex>), which CUDA 13 keeps in include/cccl.
  static const std::string include = [] {
    const char* root = std::getenv("CUDA_PATH");
    return std::string("-I") + (root && *root ? root : "/usr/local/cuda") + "/include";
  }();
  static const std::string cccl = include + "/cccl";
  // Exact math (no --use_fast_math): the same functions as the other GPU kernels.
  const char* options[] = {gpu.c_str(), include.c_str(), cccl.c_str(), "--std=c++17"};
  const nvrtcResult compiled = nvrtcCompileProgram(program, 4, options);
  if (compiled != NVRTC_SUCCESS) {
    std::size_t size = 0;
    (void)nvrtcGetProgramLogSize(program, &size);
    std::string log(size, '\0');
    (void)nvrtcGetProgramLog(program, log.data());
    fail(error_code::internal, "NVRTC could not compile fused kernel ", name, ": ", nvrtcGetErrorString(compiled), "\n", log,
         "\nthe source:\n", source);
  }
  std::size_t size = 0;
  check(nvrtcGetCUBINSize(program, &size), "nvrtcGetCUBINSize");
  std::string cubin(size, '\0');
  check(nvrtcGetCUBIN(program, cubin.data()), "nvrtcGetCUBIN");
  return cubin;
}

/// The directory compiled fused kernels are kept in: $WEFT_CUDA_CACHE, else
/// $XDG_CACHE_HOME/weft/cuda, else ~/.cache/weft/cuda (empty: no disk cache).
inline std::filesystem::path fused_cache_dir() {
  if (const char* d = std::getenv("WEFT_CUDA_CACHE")) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "weft" / "cuda";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "weft" / "cuda";
  return {};
}

/// FNV-1a over the text, as 16 hex digits: the kernel's name and its cache key.
inline std::string text_hash(std::string_view text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

/// Compiled fused kernels by (source hash, architecture): in memory for the process, and on
/// disk across processes. Counts what each lookup found, for tests and benchmarks.
class fused_cache {
 public:
  /// What the lookups found, since the process started.
  struct counts {
    int compiled = 0;     ///< compiled with NVRTC
    int from_disk = 0;    ///< read from the disk cache
    int from_memory = 0;  ///< found in memory
  };
  /// The cubin of `source` for sm_<arch>.
  std::shared_ptr<const std::string> cubin(const std::string& source, int arch, const std::string& name) {
    const std::string key = text_hash(source) + "_sm" + std::to_string(arch);
    {
      std::lock_guard lock(mu_);
      if (auto it = memory_.find(key); it != memory_.end()) {
        ++counts_.from_memory;
        return it->second;
      }
    }
    std::shared_ptr<const std::string> bin;
    const auto dir = fused_cache_dir();
    const auto file = dir.empty() ? dir : dir / (key + ".cubin");
    bool from_disk = false;
    if (!file.empty()) {
      std::ifstream in(file, std::ios::binary);
      if (in) {
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        // The source is stored after the cubin's size, so that a hash collision or a torn
        // file is never loaded.
        const std::string tail = "\n//" + source;
        if (bytes.size() > tail.size() && bytes.compare(bytes.size() - tail.size(), tail.size(), tail) == 0) {
          bytes.resize(bytes.size() - tail.size());
          bin = std::make_shared<const std::string>(std::move(bytes));
          from_disk = true;
        }
      }
    }
    if (!bin) {
      bin = std::make_shared<const std::string>(compile_cubin(source, arch, name));
      if (!file.empty()) {
        try {
          std::filesystem::create_directories(dir);
          const std::string tail = "\n//" + source;
          weft::detail::write_file_atomically(file, "", {std::string_view(*bin), std::string_view(tail)}, "the kernel cache file");
        } catch (const std::exception&) {
          // A cache that cannot be written is no cache: the kernel is compiled again next time.
        }
      }
    }
    std::lock_guard lock(mu_);
    ++(from_disk ? counts_.from_disk : counts_.compiled);
    return memory_.try_emplace(key, std::move(bin)).first->second;
  }
  /// The counts so far.
  counts get_counts() const {
    std::lock_guard lock(mu_);
    return counts_;
  }
  /// Forgets the in-memory cache (the disk cache stays; tests use it to reach the disk).
  void clear_memory() {
    std::lock_guard lock(mu_);
    memory_.clear();
  }
  /// The process's cache (never destroyed).
  static fused_cache& global() {
    static auto* instance = new fused_cache;
    return *instance;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const std::string>> memory_;
  counts counts_;
};

/// The GPU kernel of a Fused node: compiled (or found in the cache) when the kernel is made,
/// loaded on first use on each GPU.
struct gpu_fused final : op_kernel {
  /// Generates and compiles (or finds) the kernel of node n's subtree for the current GPU's architecture.
  explicit gpu_fused(const node& n)
      : out_(n.output_dtype(0)), inputs_(n.attr<std::vector<dtype>>("Tin")) {
    const fused_expr e = parse_fused(n.attr<std::string>("expr"));
    source_ = fused_source(e, n.attr<std::vector<std::int64_t>>("slots"), inputs_, out_, "weft_fused");
    name_ = "weft_fused";
    int device = 0, major = 0, minor = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute");
    arch_ = major * 10 + minor;
    cubin_ = fused_cache::global().cubin(source_, arch_, name_);
  }
  /// Why a GPU kernel cannot be generated for node n (an op of its expression without GPU
  /// code, too many inputs), asked when nodes are placed, so that soft placement runs such a
  /// node on the CPU; empty where it can (NVRTC's compilation is not tried here).
  static std::string refuses(const node& n) {
    try {
      (void)fused_source(parse_fused(n.attr<std::string>("expr")), n.attr<std::vector<std::int64_t>>("slots"),
                         n.attr<std::vector<dtype>>("Tin"), n.output_dtype(0), "weft_fused");
    } catch (const error& e) {
      return e.what();
    }
    return {};
  }
  ~gpu_fused() override {
    for (auto& [ordinal, lib] : libraries_) (void)cudaLibraryUnload(lib);
  }
  void compute(kernel_context& ctx) const override {
    const auto& g = gpu_of(ctx.device());
    if (ctx.num_inputs() != static_cast<int>(inputs_.size()))
      fail(error_code::invalid_argument, "Fused: ", ctx.num_inputs(), " inputs for ", inputs_.size(), " dtypes");
    std::vector<tensor> in;
    std::vector<const shape*> shapes;
    in.reserve(inputs_.size());
    for (int i = 0; i < ctx.num_inputs(); ++i) in.push_back(device_input(ctx, i));
    shape out_shape = in[0].shape();
    for (const auto& t : in) {
      out_shape = broadcast_shape(ctx.node(), out_shape, t.shape());
      shapes.push_back(&t.shape());
    }
    tensor& y = ctx.allocate_output(0, out_shape);
    const std::int64_t n = y.num_elements();
    if (n == 0) return;
    // The generated kernel's weft_plan: dims[8], stride[inputs][8], rank, narrow, vec, kind[inputs].
    const std::size_t n_in = in.size();
    std::vector<std::int64_t> dims(8 + 8 * n_in, 0);
    std::vector<std::int32_t> ints(3 + n_in, 0);
    const bool same_shape = std::all_of(shapes.begin(), shapes.end(), [&](const shape* s) { return *s == out_shape; });
    if (!same_shape) {
      const std::vector<int> kept = planned_dims(out_shape);
      ints[0] = static_cast<std::int32_t>(kept.size());
      for (std::size_t j = 0; j < kept.size(); ++j) dims[j] = out_shape[kept[j]];
      for (std::size_t k = 0; k < n_in; ++k) operand_strides(*shapes[k], out_shape, kept, dims.data() + 8 + 8 * k);
    }
    ints[1] = n <= std::numeric_limits<std::int32_t>::max();
    // Four elements at a time where every input is direct or a scalar and the direct ones and
    // the output are aligned to four elements.
    bool vec = true;
    auto aligned = [](const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % (4 * bytes) == 0; };
    for (std::size_t k = 0; k < n_in; ++k) {
      ints[3 + k] = *shapes[k] == out_shape ? 1 : shapes[k]->num_elements() == 1 ? 2 : 0;
      vec = vec && (ints[3 + k] == 2 || (ints[3 + k] == 1 && aligned(in[k].raw_data(), size_of(in[k].dtype()))));
    }
    ints[2] = vec && aligned(y.raw_data(), size_of(y.dtype()));
    static_assert(sizeof(long long) == sizeof(std::int64_t));
    const std::size_t int_bytes = sizeof(std::int32_t) * ints.size();
    std::vector<unsigned char> plan_bytes(sizeof(std::int64_t) * dims.size() + (int_bytes + 7) / 8 * 8, 0);
    std::memcpy(plan_bytes.data(), dims.data(), sizeof(std::int64_t) * dims.size());
    std::memcpy(plan_bytes.data() + sizeof(std::int64_t) * dims.size(), ints.data(), int_bytes);
    std::vector<const void*> pointers;
    std::vector<void*> args;
    for (const auto& t : in) pointers.push_back(t.raw_data());
    void* out = y.raw_data();
    long long count = n;
    for (auto& p : pointers) args.push_back(&p);
    args.push_back(&out);
    args.push_back(&count);
    args.push_back(plan_bytes.data());
    const cudaKernel_t kernel = kernel_on(g);
    const current_device here(g.ordinal());
    const long long blocks = std::min<long long>((n + 255) / 256, 4096);
    check(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(static_cast<unsigned>(blocks)), dim3(256), args.data(), 0,
                           g.stream()),
          "launching a fused kernel");
  }

  /// The generated CUDA source.
  const std::string& source() const noexcept { return source_; }

 private:
  cudaKernel_t kernel_on(const gpu_device& g) const {
    std::lock_guard lock(mu_);
    auto it = kernels_.find(g.ordinal());
    if (it != kernels_.end()) return it->second;
    const current_device here(g.ordinal());
    cudaLibrary_t lib = nullptr;
    check(cudaLibraryLoadData(&lib, cubin_->data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cudaLibraryLoadData (a fused kernel)");
    libraries_.emplace(g.ordinal(), lib);
    cudaKernel_t k = nullptr;
    check(cudaLibraryGetKernel(&k, lib, name_.c_str()), "cudaLibraryGetKernel");
    kernels_.emplace(g.ordinal(), k);
    return k;
  }

  dtype out_;
  std::vector<dtype> inputs_;
  std::string source_, name_;
  int arch_ = 0;
  std::shared_ptr<const std::string> cubin_;
  mutable std::mutex mu_;
  mutable std::map<int, cudaLibrary_t> libraries_;
  mutable std::map<int, cudaKernel_t> kernels_;
};

/// Registers the Fused op and its GPU kernel, for each output dtype T the generated code
/// computes in (every dtype but string; complex numbers as libcu++'s complex); false when
/// it was registered already.
inline bool register_gpu_fused_kernel() {
  ops::register_fused_ops();
  bool added = false;
  for (dtype t : {dtype::float16, dtype::bfloat16, dtype::float32, dtype::float64, dtype::int8, dtype::int16, dtype::int32,
                  dtype::int64, dtype::uint8, dtype::uint16, dtype::uint32, dtype::uint64, dtype::boolean,
                  dtype::complex64, dtype::complex128})
    added = register_gpu_kernel<gpu_fused>("Fused", {"T", t}) || added;
  return added;
}

}  // namespace weft::cuda
