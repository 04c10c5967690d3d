// classify: loads a model that mnist_cnn or mnist_mlp saved (--save-model FILE) and
// classifies 28x28 grey images with it. This program has no model code: the graph, the
// weights and the signature come from the file (weft::load_model, docs/models.md).
//
//   mnist_cnn --epochs 1 --save-model mnist_cnn.weft
//   classify mnist_cnn.weft digit.png other.pgm          # one line per image
//   classify mnist_cnn.weft --idx t10k-images-idx3-ubyte --labels t10k-labels-idx1-ubyte
//   classify mnist_cnn.weft --mnist                      # MNIST's test set: the accuracy
//   classify mnist_cnn.weft --mnist --latency            # load time, per-image latency at batch 1 and 64
//   classify mnist_cnn.weft --mnist --self-check 16      # the first 16 test images written as PGM and
//                                                        # PNG files, read back, classified alike
//
// Images: PGM (P2 or P5, any maxval) and, where libpng was found at build time, PNG (any
// format libpng reads, converted to 8-bit grey), each 28 x 28; IDX files of uint8 images
// [n, 28, 28] (MNIST's). Pixels are scaled to [0, 1] as in training. The model's signature
// "classify" takes "images" [n, 784] float32 and gives "probs" [n, 10] and "classes" [n].
//
// Exit status: 0; 1 on an error or below --min-accuracy; 2 for bad options; 77 when --mnist
// finds no data (CTest reads it as skipped).
#include <weft/weft.hpp>
#include <weft/data/idx.hpp>

#ifdef WEFT_CLASSIFY_PNG
#include <png.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int side = 28, pixels = side * side;

[[noreturn]] void bad_image(const std::string& file, const std::string& why) {
  weft::fail(weft::error_code::invalid_argument, file, ": ", why);
}

// A PGM file (P5 binary or P2 plain, maxval up to 65535) of 28 x 28, as 784 bytes 0..255.
std::vector<std::uint8_t> read_pgm(const std::string& file, const std::string& bytes) {
  std::size_t pos = 0;
  auto skip_space = [&] {
    while (pos < bytes.size()) {
      if (bytes[pos] == '#') {
        while (pos < bytes.size() && bytes[pos] != '\n') ++pos;
      } else if (std::isspace(static_cast<unsigned char>(bytes[pos]))) {
        ++pos;
      } else {
        break;
      }
    }
  };
  auto number = [&](const char* what) {
    skip_space();
    long v = 0;
    std::size_t digits = 0;
    while (pos < bytes.size() && std::isdigit(static_cast<unsigned char>(bytes[pos])) && digits < 9)
      v = v * 10 + (bytes[pos++] - '0'), ++digits;
    if (digits == 0) bad_image(file, std::string("a PGM file without its ") + what);
    return v;
  };
  if (bytes.size() < 2 || bytes[0] != 'P' || (bytes[1] != '5' && bytes[1] != '2')) bad_image(file, "not a PGM file (P2 or P5)");
  const bool plain = bytes[1] == '2';
  pos = 2;
  const long width = number("width"), height = number("height"), maxval = number("maxval");
  if (width != side || height != side)
    bad_image(file, "is " + std::to_string(width) + " x " + std::to_string(height) + ", not 28 x 28");
  if (maxval < 1 || maxval > 65535) bad_image(file, "has maxval " + std::to_string(maxval));
  std::vector<std::uint8_t> out(pixels);
  const bool wide = maxval > 255;
  if (!plain) ++pos;  // the one whitespace byte after maxval
  for (int i = 0; i < pixels; ++i) {
    long v;
    if (plain) {
      v = number("pixels");
    } else {
      if (bytes.size() - std::min(pos, bytes.size()) < (wide ? 2u : 1u)) bad_image(file, "ends inside its pixels");
      v = wide ? (static_cast<unsigned char>(bytes[pos]) << 8) | static_cast<unsigned char>(bytes[pos + 1])
               : static_cast<unsigned char>(bytes[pos]);
      pos += wide ? 2 : 1;
    }
    if (v > maxval) bad_image(file, "has a pixel above its maxval");
    out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>((v * 255 + maxval / 2) / maxval);
  }
  return out;
}

void write_pgm(const std::filesystem::path& file, const std::uint8_t* image) {
  std::ofstream out(file, std::ios::binary);
  out << "P5\n# written by weft's classify\n" << side << " " << side << "\n255\n";
  out.write(reinterpret_cast<const char*>(image), pixels);
  if (!out) weft::fail(weft::error_code::failed_precondition, "cannot write ", file.string());
}

#ifdef WEFT_CLASSIFY_PNG
std::vector<std::uint8_t> read_png(const std::string& file) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, file.c_str())) bad_image(file, std::string("libpng: ") + image.message);
  image.format = PNG_FORMAT_GRAY;
  if (image.width != side || image.height != side) {
    png_image_free(&image);
    bad_image(file, "is " + std::to_string(image.width) + " x " + std::to_string(image.height) + ", not 28 x 28");
  }
  std::vector<std::uint8_t> out(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, out.data(), 0, nullptr)) bad_image(file, std::string("libpng: ") + image.message);
  return out;
}

void write_png(const std::filesystem::path& file, const std::uint8_t* pixels_in) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = side;
  image.height = side;
  image.format = PNG_FORMAT_GRAY;
  if (!png_image_write_to_file(&image, file.c_str(), 0, pixels_in, 0, nullptr))
    weft::fail(weft::error_code::failed_precondition, "cannot write ", file.string(), ": libpng: ", image.message);
}
#endif

std::vector<std::uint8_t> read_image(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) weft::fail(weft::error_code::not_found, "cannot open ", file);
  std::ostringstream s;
  s << in.rdbuf();
  const std::string bytes = s.str();
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), "\x89PNG\r\n\x1a\n", 8) == 0) {
#ifdef WEFT_CLASSIFY_PNG
    return read_png(file);
#else
    bad_image(file, "is a PNG file, and this classify was built without libpng (Debian's libpng-dev)");
#endif
  }
  return read_pgm(file, bytes);
}

// Images [n, 784] as floats in [0, 1], from n * 784 bytes.
weft::tensor to_batch(const std::uint8_t* images, std::int64_t n) {
  weft::tensor x(weft::dtype::float32, weft::shape{n, pixels});
  float* p = x.data<float>();
  for (std::int64_t i = 0; i < n * pixels; ++i) p[i] = static_cast<float>(images[i]) * (1.0f / 255.0f);
  return x;
}

// The classes the model gives images[first, first + n), in batches of `batch`.
std::vector<std::int32_t> classify(weft::model_bundle& m, const std::uint8_t* images, std::int64_t n, std::int64_t batch,
                                   std::vector<float>* confidence = nullptr) {
  std::vector<std::int32_t> classes;
  for (std::int64_t first = 0; first < n; first += batch) {
    const std::int64_t k = std::min(batch, n - first);
    const auto out = m.run("classify", {{"images", to_batch(images + first * pixels, k)}});
    const auto c = out[1].to_vector<std::int32_t>();
    classes.insert(classes.end(), c.begin(), c.end());
    if (confidence) {
      const auto p = out[0].to_vector<float>();
      for (std::int64_t i = 0; i < k; ++i) confidence->push_back(p[static_cast<std::size_t>(i * 10 + c[static_cast<std::size_t>(i)])]);
    }
  }
  return classes;
}

int usage(int status) {
  std::fprintf(status ? stderr : stdout,
               "usage: classify MODEL [IMAGE.pgm|IMAGE.png ...] [--idx IMAGES [--labels LABELS]] [--mnist] [--batch N]\n"
               "                [--min-accuracy X] [--latency] [--self-check N] [--threads N]\n");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace weft;
  if (argc < 2) return usage(2);
  std::string model_path, idx_images, idx_labels;
  std::vector<std::string> files;
  bool use_mnist = false, latency = false;
  long batch = 256, self_check = 0, threads = 0;
  double min_accuracy = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "classify: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (a == "--help") return usage(0);
      if (a == "--idx") idx_images = value();
      else if (a == "--labels") idx_labels = value();
      else if (a == "--mnist") use_mnist = true;
      else if (a == "--latency") latency = true;
      else if (a == "--batch") batch = std::stol(value());
      else if (a == "--self-check") self_check = std::stol(value());
      else if (a == "--threads") threads = std::stol(value());
      else if (a == "--min-accuracy") min_accuracy = std::stod(value());
      else if (a.starts_with("--")) return usage(2);
      else if (model_path.empty()) model_path = a;
      else files.push_back(a);
    } catch (const std::logic_error&) {
      std::fprintf(stderr, "classify: %s needs a number\n", a.c_str());
      return 2;
    }
  }
  if (model_path.empty() || batch < 1 || self_check < 0 || threads < 0) return usage(2);
  try {
    session_options options;
    if (threads > 0) options.intra_op_threads = static_cast<int>(threads);
    const auto t0 = std::chrono::steady_clock::now();
    model_bundle m = load_model(model_path, options);
    const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const signature& sig = m.signature("classify");
    std::printf("classify: %s: %d nodes, signature 'classify' (%s -> %s), loaded in %.1f ms\n", model_path.c_str(), m.graph().size(),
                sig.inputs.at(0).key.c_str(), sig.outputs.at(0).key.c_str(), load_ms);

    // Images from files, one line each.
    if (!files.empty()) {
      std::vector<std::uint8_t> images;
      for (const auto& f : files) {
        const auto img = read_image(f);
        images.insert(images.end(), img.begin(), img.end());
      }
      std::vector<float> confidence;
      const auto classes = classify(m, images.data(), static_cast<std::int64_t>(files.size()), batch, &confidence);
      for (std::size_t i = 0; i < files.size(); ++i)
        std::printf("%s: %d (%.1f%%)\n", files[i].c_str(), classes[i], 100.0 * confidence[i]);
    }

    // Images from an IDX file (or MNIST's test set), with their labels when given.
    tensor images, labels;
    if (use_mnist) {
      try {
        const auto data = data::load_mnist();
        images = data.test.images;
        labels = data.test.labels;
      } catch (const error& e) {
        std::fprintf(stderr, "classify: %s\n", e.what());
        return e.code() == error_code::not_found ? 77 : 1;
      }
    } else if (!idx_images.empty()) {
      images = data::read_idx(idx_images);
      if (!idx_labels.empty()) labels = data::read_idx(idx_labels);
    }
    if (!images.valid()) return 0;
    if (images.dtype() != dtype::uint8 || images.rank() != 3 || images.shape()[1] != side || images.shape()[2] != side)
      fail(error_code::invalid_argument, "the IDX images must be uint8 [n, 28, 28], got ", images.dtype(), images.shape());
    const std::int64_t n = images.shape()[0];
    const auto* raw = images.data<std::uint8_t>();
    const auto t1 = std::chrono::steady_clock::now();
    const auto classes = classify(m, raw, n, batch);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    if (labels.valid()) {
      if (labels.dtype() != dtype::uint8 || labels.rank() != 1 || labels.shape()[0] != n)
        fail(error_code::invalid_argument, "the labels must be uint8 [", n, "], got ", labels.dtype(), labels.shape());
      std::int64_t right = 0;
      for (std::int64_t i = 0; i < n; ++i) right += classes[static_cast<std::size_t>(i)] == labels.data<std::uint8_t>()[i];
      const double accuracy = static_cast<double>(right) / static_cast<double>(std::max<std::int64_t>(n, 1));
      std::printf("classify: %lld images in %.2f s (batch %ld): accuracy %.2f%%\n", static_cast<long long>(n), seconds, batch,
                  100 * accuracy);
      if (accuracy < min_accuracy) {
        std::fprintf(stderr, "classify: accuracy %.4f is below --min-accuracy %.4f\n", accuracy, min_accuracy);
        return 1;
      }
    } else {
      for (std::int64_t i = 0; i < std::min<std::int64_t>(n, 20); ++i) std::printf("%d%s", classes[static_cast<std::size_t>(i)], i + 1 < std::min<std::int64_t>(n, 20) ? " " : "\n");
    }

    if (latency) {
      // Median time of one run at batch 1 and batch 64 (the first runs build the executables).
      for (std::int64_t b : {1, 64}) {
        if (b > n) break;
        const tensor x = to_batch(raw, b);
        std::vector<double> times;
        for (int r = 0; r < 200; ++r) {
          const auto s = std::chrono::steady_clock::now();
          m.run("classify", {{"images", x}});
          times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s).count());
        }
        std::sort(times.begin() + 20, times.end());
        const double median = times[20 + (times.size() - 20) / 2];
        std::printf("classify: batch %lld: %.1f us per run, %.1f us per image (median of 180 runs)\n", static_cast<long long>(b), median,
                    median / static_cast<double>(b));
      }
    }

    if (self_check > 0) {
      // The first images written as files, read back, classified: the same classes as from the IDX data.
      const std::int64_t k = std::min<std::int64_t>(self_check, n);
      const auto dir = std::filesystem::temp_directory_path() / ("weft_classify_" + std::to_string(::getpid()));
      std::filesystem::create_directories(dir);
      std::vector<std::uint8_t> from_files;
      int kinds = 0;
      for (const char* kind : {"pgm", "png"}) {
#ifndef WEFT_CLASSIFY_PNG
        if (std::string(kind) == "png") continue;
#endif
        ++kinds;
        for (std::int64_t i = 0; i < k; ++i) {
          const auto file = dir / ("image" + std::to_string(i) + "." + kind);
#ifdef WEFT_CLASSIFY_PNG
          if (std::string(kind) == "png") write_png(file, raw + i * pixels);
          else
#endif
            write_pgm(file, raw + i * pixels);
          const auto img = read_image(file.string());
          if (!std::equal(img.begin(), img.end(), raw + i * pixels))
            fail(error_code::internal, file.string(), ": read back different pixels");
          from_files.insert(from_files.end(), img.begin(), img.end());
        }
      }
      std::filesystem::remove_all(dir);
      const auto again = classify(m, from_files.data(), k * kinds, 1);
      for (std::int64_t i = 0; i < k * kinds; ++i)
        if (again[static_cast<std::size_t>(i)] != classes[static_cast<std::size_t>(i % k)])
          fail(error_code::internal, "self-check: image ", i % k, " read from a file is class ", again[static_cast<std::size_t>(i)],
               ", from the IDX data ", classes[static_cast<std::size_t>(i % k)]);
      std::printf("classify: self-check: %lld images as %s files, one at a time: the same classes\n", static_cast<long long>(k),
                  kinds == 2 ? "PGM and PNG" : "PGM");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "classify: %s\n", e.what());
    return 1;
  }
}
