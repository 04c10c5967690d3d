// Crash safety of checkpoints: this program starts itself as a child that saves a 4 MiB
// variable over and over (each save holds the step number in every element), kills it with
// SIGKILL at a random moment after its first checkpoint, and checks, 40 times (or N), that every
// checkpoint file that exists is complete and restores into a fresh session, that the
// newest one holds its step's values, and that temporaries of killed writers do not pile up
// (at most the last one's is left, and the next save removes it). The random delay counts
// from the first checkpoint, not from the child's start: under ASan on a loaded machine
// the child's start-up alone outlasted every delay, and no round had a checkpoint.
//   kill_save               the test (exit 0 when every check held)
//   kill_save --rounds N    the test with N rounds (the sanitizer presets run 10: each round's
//                           child starts a sanitized process, and the release build runs 40)
//   kill_save --child DIR   the saving child
#include <weft/weft.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using namespace weft;
namespace fs = std::filesystem;

constexpr std::int64_t elements = std::int64_t{1} << 20;  // 4 MiB of float32

struct model {
  graph g;
  output var, value;
  int assign = -1;
  model() {
    var = g.variable(dtype::float32, partial_shape({elements}), "v");
    value = g.placeholder(dtype::float32, partial_shape({elements}), "value");
    assign = g.op("Assign", {var, value}).id();
  }
};

int child(const fs::path& dir) {
  model m;
  saver sv(m.g, {m.var}, {.keep = 3});
  session s(m.g);
  for (std::int64_t step = 1;; ++step) {
    s.run({{m.value, tensor::filled(shape{elements}, static_cast<float>(step))}}, {}, {output{m.assign, 0}});
    sv.save(s, dir / "model", step);
    if (step == 1) std::ofstream(dir / "first-save-done");  // the parent's delay starts now
  }
}

int fails = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    ++fails;
  }
}

int temporaries(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().find(".weft-tmp.") != std::string::npos;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--child") return child(argv[2]);
  int rounds = 40;
  if (argc == 3 && std::string(argv[1]) == "--rounds") rounds = std::atoi(argv[2]);
  if (argc != 1 && !(argc == 3 && std::string(argv[1]) == "--rounds" && rounds > 0)) {
    std::fprintf(stderr, "usage: kill_save [--rounds N]   (N >= 1)\n");
    return 2;
  }
  const fs::path dir = fs::temp_directory_path() / ("weft_kill_save_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::mt19937 rng(20261125);
  std::uniform_int_distribution<int> delay_ms(0, 300);
  model m;
  saver restorer(m.g, {m.var});
  int restored = 0, mid_save = 0;  // rounds with a checkpoint to restore; kills that left a temporary
  for (int round = 0; round < rounds; ++round) {
    fs::remove(dir / "first-save-done");
    pid_t pid = 0;
    std::string flag = "--child", where = dir.string();
    char* args[] = {argv[0], flag.data(), where.data(), nullptr};
    if (::posix_spawn(&pid, argv[0], nullptr, nullptr, args, environ) != 0) {
      std::perror("posix_spawn");
      return 1;
    }
    // Wait for the child's first save (at most a minute), then for the random delay.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (!fs::exists(dir / "first-save-done") && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    check(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "round " + std::to_string(round) + ": the child died of SIGKILL");
    // Every checkpoint file there is complete; the newest restores with its step's values.
    for (const auto& [step, file] : saver::checkpoints(dir / "model")) {
      try {
        (void)read_checkpoint(file);
      } catch (const error& e) {
        check(false, "round " + std::to_string(round) + ": " + e.what());
      }
    }
    if (auto latest = saver::latest(dir / "model")) {
      session s(m.g);
      try {
        restorer.restore(s, latest->second);
        const tensor v = s.run({}, {m.var})[0];
        const float want = static_cast<float>(latest->first);
        bool all = true;
        for (float x : v.flat<float>()) all = all && x == want;
        check(all, "round " + std::to_string(round) + ": the newest checkpoint holds its step's values");
        ++restored;
      } catch (const error& e) {
        check(false, "round " + std::to_string(round) + ": restoring the newest checkpoint: " + e.what());
      }
    }
    const int left = temporaries(dir);
    mid_save += left > 0;
    check(left <= 1, "round " + std::to_string(round) + ": " + std::to_string(left) + " temporaries left (at most 1)");
  }
  check(restored == rounds, std::to_string(restored) + " of " + std::to_string(rounds) + " rounds had a checkpoint to restore");
  std::printf("kill_save: %d rounds, %d killed inside a save (a temporary left), %d restored the newest checkpoint, "
              "%d failures\n", rounds, mid_save, restored, fails);
  fs::remove_all(dir);
  return fails ? 1 : 0;
}
