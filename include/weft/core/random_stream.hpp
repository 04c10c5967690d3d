/// @file
/// The random streams of the seeded random ops (RandomUniform, RandomStandardNormal,
/// TruncatedNormal, Dropout): element i of the r-th value a node draws is a pure function of
/// its key (from seed and seed2) and a counter, so that runs repeat, shards compute apart,
/// and every device draws the same numbers (the GPU's kernels, weft/cuda/launch.cuh, compute
/// the same mix on the device).
#pragma once

#include <cstdint>
#include <random>

namespace weft {

/// SplitMix64: a strong 64-bit mix, enough for simulation-grade uniform bits.
inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Uniform in [0, 1) with 53 random bits.
inline double uniform01(std::uint64_t key, std::uint64_t counter) {
  return static_cast<double>(mix64(key ^ mix64(counter)) >> 11) * 0x1.0p-53;
}

/// The key of a seeded node's stream: from the system when seed = seed2 = 0, else from
/// both seeds. `salt` separates the streams of different ops given the same seeds.
inline std::uint64_t random_key(std::int64_t seed, std::int64_t seed2, std::uint64_t salt = 0) {
  if (seed == 0 && seed2 == 0) {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }
  return mix64(static_cast<std::uint64_t>(seed)) ^ mix64(~static_cast<std::uint64_t>(seed2) + salt);
}

/// The salt of Dropout's stream.
inline constexpr std::uint64_t dropout_salt = 0x5bd1e995u;

}  // namespace weft
