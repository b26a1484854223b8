// nicfw/spinlock.h -- the engine lock and the guard control calls take it through.
#pragma once

#include <atomic>
#include <cstdint>

namespace softvia::nicfw {

// A spin lock: uncontended acquire is one atomic exchange.
class SpinLock {
public:
    void lock() {
        while (flag_.exchange(true, std::memory_order_acquire))
            while (flag_.load(std::memory_order_relaxed)) __builtin_ia32_pause();
    }
    bool try_lock() {
        return !flag_.load(std::memory_order_relaxed) &&
               !flag_.exchange(true, std::memory_order_acquire);
    }
    void unlock() { flag_.store(false, std::memory_order_release); }

private:
    std::atomic<bool> flag_{false};
};

// Control calls take the engine lock through this guard; it tells the firmware thread
// someone is waiting so the thread lets go between steps.
class CtlGuard {
public:
    CtlGuard(SpinLock& l, std::atomic<uint32_t>& waiters) : l_(l) {
        waiters.fetch_add(1, std::memory_order_relaxed);
        l_.lock();
        waiters.fetch_sub(1, std::memory_order_relaxed);
    }
    ~CtlGuard() { l_.unlock(); }
    CtlGuard(const CtlGuard&) = delete;
    CtlGuard& operator=(const CtlGuard&) = delete;

private:
    SpinLock& l_;
};

}  // namespace softvia::nicfw
