// Store: the key-value rendezvous that ranks use to find each other (NCCL unique ids, group
// setup). Every blocking call takes a timeout and throws Timeout naming the key.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace meshtrain {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // Waits until the key exists.
  virtual std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Atomically adds delta to an integer counter (created at 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Waits until every key exists.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
};

// Within one process (the local backend's ranks).
class InMemoryStore : public Store {
 public:
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<uint8_t>> values_;
};

// Across processes sharing a filesystem: one file per key, published by an atomic rename.
class FileStore : public Store {
 public:
  explicit FileStore(std::filesystem::path directory);
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;

 private:
  std::filesystem::path path_of(const std::string& key) const;
  std::filesystem::path directory_;
};

}  // namespace meshtrain
