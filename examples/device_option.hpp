// --device cpu|gpu, shared by the examples. With gpu the model's nodes ask for GPU:0 and the
// session has one GPU with soft placement: an op with no GPU kernel runs on the CPU, and
// values cross between the two (docs/gpu.md lists which ops run where).
#pragma once

#include <weft/weft.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace weft_examples {

// The device spec the model's nodes ask for ("" on the CPU), with the session's options
// set for it. Exits with status 77 (CTest's skipped) when the program has no GPU kernels or
// the machine has no GPU, saying why, and 2 for another name.
inline std::string use_device(const char* program, const std::string& device, weft::session_options& o) {
  if (device == "cpu") return "";
  if (device != "gpu") {
    std::fprintf(stderr, "%s: --device must be cpu or gpu, got '%s'\n", program, device.c_str());
    std::exit(2);
  }
  weft::device_factory gpus;
  try {
    gpus = weft::device_factory_registry::global().find("GPU");
  } catch (const weft::error& e) {
    std::fprintf(stderr, "%s: --device gpu: this build has no GPU kernels (%s)\n", program, e.what());
    std::exit(77);
  }
  const auto available = gpus.available();
  if (available.count == 0) {
    std::fprintf(stderr, "%s: --device gpu: no GPU here (%s)\n", program, available.why_none.c_str());
    std::exit(77);
  }
  o.device_count["GPU"] = 1;
  o.placement.soft = true;
  return "/device:GPU:0";
}

}  // namespace weft_examples
