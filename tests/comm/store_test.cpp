// Rendezvous stores: values, counters and timeouts, in memory and on a shared directory.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <thread>
#include <unistd.h>

#include "meshtrain/core/comm/store.h"
#include "meshtrain/core/error.h"

namespace meshtrain {
namespace {

using std::chrono::milliseconds;

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            detail::concat("meshtrain_store_", ::getpid(), "_", counter++);
    std::filesystem::remove_all(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Each store kind gets the same tests; FileStore instances share one directory like processes.
class StoreTest : public ::testing::TestWithParam<bool> {
 protected:
  bool file_backed() const { return GetParam(); }
  std::unique_ptr<Store> make() {
    if (file_backed()) return std::make_unique<FileStore>(dir_.path());
    return std::make_unique<SharedStore>(memory_);
  }

 private:
  // Lets several handles use one InMemoryStore, as FileStores share a directory.
  class SharedStore : public Store {
   public:
    explicit SharedStore(std::shared_ptr<InMemoryStore> s) : s_(std::move(s)) {}
    void set(const std::string& k, const std::vector<uint8_t>& v) override { s_->set(k, v); }
    std::vector<uint8_t> get(const std::string& k, milliseconds t) override { return s_->get(k, t); }
    int64_t add(const std::string& k, int64_t d) override { return s_->add(k, d); }

   private:
    std::shared_ptr<InMemoryStore> s_;
  };
  TempDir dir_;
  std::shared_ptr<InMemoryStore> memory_ = std::make_shared<InMemoryStore>();
};

TEST_P(StoreTest, SetThenGet) {
  auto store = make();
  store->set("nccl/unique_id", bytes("abc"));
  EXPECT_EQ(store->get("nccl/unique_id", milliseconds(100)), bytes("abc"));
  store->set("nccl/unique_id", bytes(""));  // overwrite, empty value
  EXPECT_EQ(store->get("nccl/unique_id", milliseconds(100)), bytes(""));
}

TEST_P(StoreTest, GetWaitsForAnotherThread) {
  auto reader = make();
  auto writer = make();
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(50));
    writer->set("rank 1 ready", bytes("yes"));
  });
  EXPECT_EQ(reader->get("rank 1 ready", milliseconds(5000)), bytes("yes"));
  t.join();
}

TEST_P(StoreTest, GetTimesOutNamingTheKey) {
  auto store = make();
  const auto start = std::chrono::steady_clock::now();
  try {
    store->get("missing.key", milliseconds(100));
    FAIL() << "expected Timeout";
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("'missing.key'"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
}

TEST_P(StoreTest, AddCountsAtomicallyAcrossThreads) {
  constexpr int kThreads = 4, kAdds = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      auto store = make();
      for (int i = 0; i < kAdds; ++i) store->add("arrived", 1);
    });
  for (auto& t : threads) t.join();
  auto store = make();
  EXPECT_EQ(store->add("arrived", 0), kThreads * kAdds);
  EXPECT_EQ(store->add("arrived", -5), kThreads * kAdds - 5);
  EXPECT_EQ(store->get("arrived", milliseconds(10)), bytes(std::to_string(kThreads * kAdds - 5)));
}

TEST_P(StoreTest, AddOnANonCounterIsAnError) {
  auto store = make();
  store->set("text", bytes("hello"));
  EXPECT_THROW(store->add("text", 1), InvalidArgument);
}

TEST_P(StoreTest, WaitForSeveralKeys) {
  auto store = make();
  auto writer = make();
  std::thread t([&] {
    for (const char* key : {"a", "b", "c"}) {
      std::this_thread::sleep_for(milliseconds(10));
      writer->set(key, bytes(key));
    }
  });
  store->wait({"a", "b", "c"}, milliseconds(5000));
  t.join();
  try {
    store->wait({"a", "never"}, milliseconds(50));
    FAIL() << "expected Timeout";
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("'never'"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, StoreTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "File" : "InMemory"; });

TEST(FileStore, KeysWithAnyCharactersStayDistinct) {
  TempDir dir;
  FileStore store(dir.path());
  store.set("a/b", bytes("1"));
  store.set("a_b", bytes("2"));
  store.set("../escape", bytes("3"));
  EXPECT_EQ(store.get("a/b", milliseconds(10)), bytes("1"));
  EXPECT_EQ(store.get("a_b", milliseconds(10)), bytes("2"));
  EXPECT_EQ(store.get("../escape", milliseconds(10)), bytes("3"));
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().parent_path(), dir.path());
}

}  // namespace
}  // namespace meshtrain
