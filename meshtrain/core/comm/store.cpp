#include "meshtrain/core/comm/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <fstream>
#include <iterator>
#include <thread>

#include "meshtrain/core/awake_wait.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/parse_integer.h"

namespace meshtrain {

namespace {

using Clock = std::chrono::steady_clock;

// Counters are stored as decimal text, so get() of a counter key reads the same in every store.
int64_t parse_counter(const std::string& key, const std::vector<uint8_t>& value) {
  const std::optional<int64_t> n = parse_integer<int64_t>(
      std::string_view(reinterpret_cast<const char*>(value.data()), value.size()));
  MT_CHECK(n.has_value(), "store key '", key, "' does not hold an integer counter");
  return *n;
}

std::vector<uint8_t> counter_bytes(int64_t n) {
  const std::string text = std::to_string(n);
  return {text.begin(), text.end()};
}

[[noreturn]] void throw_key_timeout(const std::string& key, std::chrono::milliseconds timeout,
                                    std::string_view where) {
  throw Timeout(detail::concat("timed out after ", timeout.count(), " ms waiting for store key '",
                               key, "' in ", where));
}

}  // namespace

void Store::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (const std::string& key : keys) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    get(key, std::max(left, std::chrono::milliseconds(0)));
  }
}

// ---- InMemoryStore ----

void InMemoryStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  {
    std::lock_guard lock(mutex_);
    values_[key] = value;
  }
  cv_.notify_all();
}

std::vector<uint8_t> InMemoryStore::get(const std::string& key,
                                        std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!wait_awake(cv_, lock, timeout, [&] { return values_.count(key) > 0; }))
    throw_key_timeout(key, timeout, "the in-memory store");
  return values_.at(key);
}

int64_t InMemoryStore::add(const std::string& key, int64_t delta) {
  int64_t result;
  {
    std::lock_guard lock(mutex_);
    auto it = values_.find(key);
    result = (it == values_.end() ? 0 : parse_counter(key, it->second)) + delta;
    values_[key] = counter_bytes(result);
  }
  cv_.notify_all();
  return result;
}

// ---- FileStore ----

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(2);

std::vector<uint8_t> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(detail::concat("cannot read store file ", path.string()));
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Writes to a name unique to this process and call, then renames: readers never see a partial file.
void publish(const std::filesystem::path& path, const std::vector<uint8_t>& value) {
  static std::atomic<uint64_t> counter{0};
  std::filesystem::path temp = path;
  temp += detail::concat(".tmp.", ::getpid(), ".", counter.fetch_add(1));
  std::error_code ec;
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(value.data()),
              static_cast<std::streamsize>(value.size()));
    if (!out) {
      std::filesystem::remove(temp, ec);
      throw IoError(detail::concat("cannot write store file ", temp.string()));
    }
  }
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    const std::string reason = ec.message();
    std::filesystem::remove(temp, ec);
    throw IoError(detail::concat("cannot publish store file ", path.string(), ": ", reason));
  }
}

// An exclusive flock on the directory's lock file; it works between processes and between threads
// (each holder opens its own file description) and is released if a holder dies.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::filesystem::path& lock_path)
      : fd_(::open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644)) {
    if (fd_ < 0) throw IoError(detail::concat("cannot open store lock ", lock_path.string()));
    if (::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      throw IoError(detail::concat("cannot lock ", lock_path.string()));
    }
  }
  ~DirectoryLock() { ::close(fd_); }  // closing releases the lock
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_;
};

}  // namespace

FileStore::FileStore(std::filesystem::path directory) : directory_(std::move(directory)) {
  std::error_code ec;
  std::filesystem::create_directories(directory_, ec);
  if (ec || !std::filesystem::is_directory(directory_))
    throw IoError(detail::concat("cannot create store directory ", directory_.string()));
}

// Keys may hold any bytes: everything outside [A-Za-z0-9_-] is escaped as %XX, so key files never
// contain '.' and cannot collide with temporary files or the lock file.
std::filesystem::path FileStore::path_of(const std::string& key) const {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string name = "k_";
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '_' || c == '-') {
      name += static_cast<char>(c);
    } else {
      name += '%';
      name += kHex[c >> 4];
      name += kHex[c & 15];
    }
  }
  return directory_ / name;
}

void FileStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  publish(path_of(key), value);
}

std::vector<uint8_t> FileStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  const auto path = path_of(key);
  const auto deadline = Clock::now() + timeout;
  while (!std::filesystem::exists(path)) {
    if (Clock::now() >= deadline)
      throw_key_timeout(key, timeout, detail::concat("the file store at ", directory_.string()));
    std::this_thread::sleep_for(kPollInterval);
  }
  return read_file(path);
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  DirectoryLock lock(directory_ / "store.lock");
  const auto path = path_of(key);
  const int64_t result =
      (std::filesystem::exists(path) ? parse_counter(key, read_file(path)) : 0) + delta;
  publish(path, counter_bytes(result));
  return result;
}

}  // namespace meshtrain
