// Implements: the small thread pipeline of `detseg predict`: decoding thread(s) -> the model on the
// calling thread, in batches -> a writing thread (drawing, PNG or video encoding, JSON), so that
// decoding and writing overlap the network. Items are handed on in input order whatever the
// threads' timing, through bounded queues (a few images in flight, not the folder). An exception in
// any stage stops the others and is rethrown on the calling thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace detseg {

// Items pushed with their index by any thread, popped strictly in index order. push blocks while
// the index is `capacity` or more ahead of the next one to pop, so at most `capacity` wait.
template <class T>
class OrderedQueue {
 public:
  explicit OrderedQueue(int64_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  // False when the queue was closed (the item is dropped).
  bool push(int64_t index, T value) {
    std::unique_lock<std::mutex> lock(mutex_);
    space_.wait(lock, [&] { return closed_ || index < next_ + capacity_; });
    if (closed_) return false;
    items_.emplace(index, std::move(value));
    ready_.notify_all();
    return true;
  }

  // The item of the next index; nullopt once the queue is closed and that item is not there.
  std::optional<T> pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [&] { return closed_ || items_.count(next_) > 0; });
    const auto it = items_.find(next_);
    if (it == items_.end()) return std::nullopt;
    T value = std::move(it->second);
    items_.erase(it);
    ++next_;
    space_.notify_all();
    return value;
  }

  // No more pushes: pop drains what is in order, then gives nullopt; blocked pushes return false.
  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    ready_.notify_all();
    space_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_, space_;
  std::map<int64_t, T> items_;
  int64_t next_ = 0;
  const int64_t capacity_;
  bool closed_ = false;
};

// Threads running one body each; the first exception any throws is kept and `on_failure` runs
// (it closes the queues, so the other stages stop waiting). join() waits for all; rethrow() throws
// the kept exception. The destructor joins.
class StageThreads {
 public:
  explicit StageThreads(std::function<void()> on_failure) : on_failure_(std::move(on_failure)) {}
  ~StageThreads() { join(); }
  StageThreads(const StageThreads&) = delete;
  StageThreads& operator=(const StageThreads&) = delete;

  void start(std::function<void()> body) {
    threads_.emplace_back([this, body = std::move(body)] {
      try {
        body();
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          if (!error_) error_ = std::current_exception();
        }
        on_failure_();
      }
    });
  }
  void join() {
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
  }
  bool failed() {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<bool>(error_);
  }
  void rethrow() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::function<void()> on_failure_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::exception_ptr error_;
};

// Runs `close` when it goes out of scope, by an exception too: the model's loop closes the
// queues on leaving, so the stages' threads end before they are joined.
class CloseOnExit {
 public:
  explicit CloseOnExit(std::function<void()> close) : close_(std::move(close)) {}
  ~CloseOnExit() { close_(); }
  CloseOnExit(const CloseOnExit&) = delete;
  CloseOnExit& operator=(const CloseOnExit&) = delete;

 private:
  std::function<void()> close_;
};

}  // namespace detseg
