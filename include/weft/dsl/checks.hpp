/// @file
/// Compile-time checks of the DSL. A failed check is a static_assert whose message is one
/// sentence naming the op and the rule, for example
///   error: static assertion failed: weft::matmul: inner dimensions differ
///   note: the comparison reduces to '(784 == 256)'                          (g++)
///   error: static_assert failed due to requirement '784L == 256L' "weft::matmul: ..."  (clang)
/// C++20 requires the message to be a string literal, so the dims cannot be formatted into
/// it: each check compares the two offending values in its condition, and both compilers
/// print them next to the message. Dtype checks compare the C++ element types, which the
/// instantiation line names (weft::check::add_dtypes<float, double>).
#pragma once

#include <cstdint>
#include <type_traits>

// NAME<A, B>: passes when A == B; otherwise fails with MESSAGE, showing A and B.
#define WEFT_DETAIL_DIM_CHECK(NAME, MESSAGE)                  \
  template <std::int64_t A, std::int64_t B, bool Ok = (A == B)> \
  struct NAME {                                               \
    static_assert(A == B, MESSAGE);                           \
    static constexpr bool value = false;                      \
  };                                                          \
  template <std::int64_t A, std::int64_t B>                   \
  struct NAME<A, B, true> {                                   \
    static constexpr bool value = true;                       \
  }

// NAME<T, U>: passes when T and U are the same type.
#define WEFT_DETAIL_TYPE_CHECK(NAME, MESSAGE)                   \
  template <class T, class U, bool Ok = std::is_same_v<T, U>>   \
  struct NAME {                                                 \
    static_assert(std::is_same_v<T, U>, MESSAGE);               \
    static constexpr bool value = false;                        \
  };                                                            \
  template <class T, class U>                                   \
  struct NAME<T, U, true> {                                     \
    static constexpr bool value = true;                         \
  }

// NAME<T, Ok>: fails with MESSAGE when !Ok; T (the offending element type) is in its name.
#define WEFT_DETAIL_SUPPORT_CHECK(NAME, MESSAGE) \
  template <class T, bool Ok>                     \
  struct NAME {                                   \
    static_assert(Ok, MESSAGE);                   \
    static constexpr bool value = Ok;             \
  }

namespace weft::check {

WEFT_DETAIL_DIM_CHECK(reshape_element_counts, "weft::reshape: element counts differ");
WEFT_DETAIL_DIM_CHECK(reshape_one_dyn, "weft::reshape: at most one dimension may be weft::dyn");
WEFT_DETAIL_DIM_CHECK(matmul_inner_dims, "weft::matmul: inner dimensions differ");
WEFT_DETAIL_TYPE_CHECK(matmul_dtypes, "weft::matmul: operands have different dtypes");
WEFT_DETAIL_DIM_CHECK(matmul_rank_a, "weft::matmul: the first operand is not a matrix (rank 2)");
WEFT_DETAIL_DIM_CHECK(matmul_rank_b, "weft::matmul: the second operand is not a matrix (rank 2)");
WEFT_DETAIL_DIM_CHECK(concat_ranks, "weft::concat: operands have different ranks");
WEFT_DETAIL_DIM_CHECK(concat_dims, "weft::concat: operands differ in a dimension other than the axis");
WEFT_DETAIL_DIM_CHECK(concat_axis, "weft::concat: the axis is out of range for the operands' rank");
WEFT_DETAIL_TYPE_CHECK(concat_dtypes, "weft::concat: operands have different dtypes");
WEFT_DETAIL_DIM_CHECK(reduce_axis, "weft::reduce: an axis is out of range for the operand's rank");
WEFT_DETAIL_DIM_CHECK(transpose_perm, "weft::transpose: the permutation's length differs from the operand's rank");
WEFT_DETAIL_TYPE_CHECK(feed_dtype, "weft::feed: the tensor's dtype differs from the placeholder's");
WEFT_DETAIL_DIM_CHECK(feed_rank, "weft::feed: the tensor's rank differs from the placeholder's");
WEFT_DETAIL_TYPE_CHECK(assign_dtypes, "weft::assign: the value's dtype differs from the variable's");
WEFT_DETAIL_DIM_CHECK(assign_dims, "weft::assign: the value's shape differs from the variable's");
WEFT_DETAIL_DIM_CHECK(assign_rank, "weft::assign: the value's rank differs from the variable's");
WEFT_DETAIL_TYPE_CHECK(variable_init_dtype, "weft::variable: the initial value's dtype differs from the variable's");
WEFT_DETAIL_DIM_CHECK(variable_init_dims, "weft::variable: the initial value's shape differs from the variable's");
WEFT_DETAIL_DIM_CHECK(variable_static, "weft::variable: a variable's shape must be fully static (no weft::dyn)");
WEFT_DETAIL_DIM_CHECK(fill_static, "weft::fill: the shape must be fully static (no weft::dyn)");
WEFT_DETAIL_DIM_CHECK(random_static, "weft::random: the shape must be fully static (no weft::dyn)");
WEFT_DETAIL_TYPE_CHECK(select_dtypes, "weft::select: the two branches have different dtypes");
WEFT_DETAIL_TYPE_CHECK(select_condition, "weft::select: the condition is not a bool expression");
WEFT_DETAIL_DIM_CHECK(select_broadcast, "weft::select: operand shapes cannot be broadcast");

}  // namespace weft::check
