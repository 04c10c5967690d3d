// Reading a whole file for weft's readers (checkpoints, IDX): POSIX calls, so that no
// iostream or filesystem exception escapes; every failure is a weft::error naming the file.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <new>
#include <string>

#include <weft/core/error.hpp>

namespace weft {

// The bytes of the regular file at `path`. `what` names the file in errors ("the
// checkpoint"); `hint` ends the message when the file is missing.
inline std::string read_file(const std::filesystem::path& path, const std::string& what, const std::string& hint = {}) {
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

}  // namespace weft
