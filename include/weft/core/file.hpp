/// @file
/// Reading a whole file for weft's readers (checkpoints, IDX, graphs), and writing one
/// atomically for its writers: POSIX calls, so that no iostream or filesystem exception
/// escapes; every failure is a weft::error naming the file.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <new>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/prebuilt.hpp>

namespace weft {

/// The bytes of the regular file at `path`. `what` names the file in errors ("the
/// checkpoint"); `hint` ends the message when the file is missing.
std::string read_file(const std::filesystem::path& path, const std::string& what, const std::string& hint = {});
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::string read_file(const std::filesystem::path& path, const std::string& what, const std::string& hint) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    fail(err == ENOENT ? error_code::not_found : error_code::failed_precondition, "cannot open ", what, " ",
         path.string(), ": ", std::strerror(err), hint.empty() ? "" : "; ", hint);
  }
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_on_exit{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    fail(error_code::failed_precondition, "cannot read ", what, " ", path.string(), ": ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(error_code::invalid_argument, what, " ", path.string(), " is not a regular file");
  std::string bytes;
  try {
    bytes.resize(static_cast<std::size_t>(st.st_size));
  } catch (const std::bad_alloc&) {
    fail(error_code::resource_exhausted, what, " ", path.string(), " has ", st.st_size, " bytes, more than fit in memory");
  } catch (const std::length_error&) {
    fail(error_code::resource_exhausted, what, " ", path.string(), " has ", st.st_size, " bytes, more than fit in memory");
  }
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(error_code::data_loss, "cannot read ", what, " ", path.string(), ": ", std::strerror(errno));
    if (n == 0) break;  // it shrank while read: what is there is checked by the caller
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}
#endif

namespace detail {

inline constexpr std::string_view temporary_marker = ".weft-tmp.";

/// The writer's process id in a temporary's name ".<file>.weft-tmp.<pid>.<n>", else 0.
inline ::pid_t temporary_owner(const std::string& name) {
  const auto at = name.rfind(temporary_marker);
  if (name.empty() || name[0] != '.' || at == std::string::npos) return 0;
  const char* p = name.data() + at + temporary_marker.size();
  const char* end = name.data() + name.size();
  ::pid_t pid = 0;
  auto [rest, ec] = std::from_chars(p, end, pid);
  if (ec != std::errc() || pid <= 0 || rest == end || *rest != '.') return 0;
  std::uint64_t n = 0;
  auto [last, ec2] = std::from_chars(rest + 1, end, n);
  return ec2 == std::errc() && last == end ? pid : 0;
}

/// Removes the temporaries in `dir` of writers that died before renaming them (killed inside
/// a save): those whose process no longer exists. A live writer's, or one whose process id
/// was taken again, stays. Failures are ignored: this only tidies.
inline void remove_stale_temporaries(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const ::pid_t pid = temporary_owner(it->path().filename().string());
    if (pid > 0 && pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) {
      std::error_code ignored;
      std::filesystem::remove(it->path(), ignored);
    }
  }
}

/// Writes `head` and then `blobs` to `path` atomically (`what` names the file in errors: "the
/// checkpoint"): a temporary file in the same directory, fsync'd,
/// then renamed over `path`, then the directory fsync'd. Stale temporaries of writers that
/// were killed are removed first.
void write_file_atomically(const std::filesystem::path& path, std::string_view head,
                           const std::vector<std::string_view>& blobs, std::string_view what = "the file");
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE void write_file_atomically(const std::filesystem::path& path, std::string_view head,
                                                      const std::vector<std::string_view>& blobs, std::string_view what) {
  static std::atomic<unsigned> counter{0};
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  remove_stale_temporaries(dir);
  const std::filesystem::path tmp = dir / ("." + path.filename().string() + std::string(temporary_marker) +
                                           std::to_string(::getpid()) + "." + std::to_string(counter++));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(error_code::failed_precondition, "cannot create ", tmp.string(), ": ", std::strerror(errno));
  int err = 0;  // the first failure's errno
  auto write_all = [&](const void* data, std::size_t size) {
    const auto* p = static_cast<const char*>(data);
    while (size > 0 && !err) {
      ssize_t n = ::write(fd, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) err = n < 0 ? errno : EIO;
      else p += n, size -= static_cast<std::size_t>(n);
    }
  };
  write_all(head.data(), head.size());
  for (std::string_view b : blobs) write_all(b.data(), b.size());
  if (!err && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  if (!err && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    fail(error_code::failed_precondition, "cannot write ", what, " ", path.string(), ": ", std::strerror(err),
         "; the previous file, if any, is unchanged");
  }
  if (int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) {
    ::fsync(d);  // makes the rename durable; a failure here leaves a complete file either way
    ::close(d);
  }
}
#endif
}  // namespace detail

}  // namespace weft
