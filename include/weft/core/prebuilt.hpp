/// @file
/// The switch that compiles weft's non-template library code once per program instead of
/// in every file (docs/installing.md, "Compiling the library code once").
///
/// WEFT_PREBUILT_RUNTIME: define it, the same in every file of a program, where one file of
/// the program defines WEFT_RUNTIME_IMPLEMENTATION before including <weft/weft.hpp> (and
/// <weft/dsl.hpp> where the program uses the DSL). The functions that headers define
/// between `#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY` and its `#endif` (the session's
/// runtime: executor, placement, partitioning, graph passes; the op families' definitions
/// and the standard gradient rules; the gradient pass, `while_loop` and the graph's
/// builders) are then compiled in that file only; the others declare them and skip their
/// bodies, which they neither parse nor compile.
#pragma once

#if defined(WEFT_PREBUILT_RUNTIME) && !defined(WEFT_RUNTIME_IMPLEMENTATION)
/** Defined in the files that only declare the prebuilt functions. */
#define WEFT_DETAIL_RUNTIME_DECLARED_ONLY 1
#endif

#ifdef WEFT_RUNTIME_IMPLEMENTATION
/** What a prebuilt function's definition starts with: nothing in the one file that compiles
    it, `inline` where the library is header-only. */
#define WEFT_DETAIL_RUNTIME_INLINE
#else
/** What a prebuilt function's definition starts with: nothing in the one file that compiles
    it, `inline` where the library is header-only. */
#define WEFT_DETAIL_RUNTIME_INLINE inline
#endif
